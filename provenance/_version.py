"""The package version: the one place it is written (pyproject.toml reads it, see [tool.hatch.version])."""

__version__ = "0.1.0"
