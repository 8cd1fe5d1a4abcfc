"""Build hook (hatchling): the report's jinja2 templates compiled at install time, so that a
report process loads them instead of compiling them (provenance/report/render/templating.py).

A wheel gets provenance/report/render/templates_compiled.bin as a file of its own (made in a temporary
directory, never in the checkout); an editable install (`pip install -e .`, what ./dev does) gets it
written into the checkout next to templating.py, where the installed package is imported from
(.gitignore'd). An sdist gets nothing: its wheel is built, and compiles, where it is installed.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

TEMPLATING = "provenance/report/render/templating.py"


def _templating(root: Path) -> Any:
    """templating.py loaded by its path: importing the package would import its dependencies,
    which a build environment does not have (jinja2 is a build requirement, for this)."""
    spec = importlib.util.spec_from_file_location("_thunder_provenance_templating", root / TEMPLATING)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # for dataclasses, pickling, anything that looks itself up
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


class CompileTemplates(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        templating = _templating(root)
        templates = root / "provenance" / "report" / "render" / "templates"
        relative = f"provenance/report/render/{templating.COMPILED}"
        if version == "editable":
            try:
                templating.write_compiled(templates, root / relative)
            except OSError as e:  # a read-only checkout: reports compile the templates, as without this hook
                print(f"thunder-provenance: templates not compiled at install: {e}", file=sys.stderr)
            return
        self._tmp = tempfile.mkdtemp(prefix="thunder-provenance-templates-")
        target = Path(self._tmp) / templating.COMPILED
        templating.write_compiled(templates, target)
        build_data["force_include"][str(target)] = relative

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        if getattr(self, "_tmp", None):
            shutil.rmtree(self._tmp, ignore_errors=True)
