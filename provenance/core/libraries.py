"""The installed distributions the user's code lies in (transformers, litgpt): what the log's
`library` records name, so that a report says which versions of the model's code ran (the
header names Python, torch and Thunder only).

A file is a distribution's when it lies in `site-packages/` or `dist-packages/`: its top-level
package is the folder (or module) right after it, and the distribution the one that provides
that package, by name first (`importlib.metadata.distribution`, a few ms), else from
`packages_distributions()` (~0.3 s, once per process, only for a package named otherwise).
Only the user's frames are looked at (provenance.log.session: a `prov` record's), so torch and
thunder, which the header names, are not.
Each file is looked at once, each package once; both are bounded. Nothing here imports torch,
thunder or the rest of this package.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.metadata import Distribution

__all__ = ["MAX_FILES", "MAX_LIBRARIES", "Libraries"]

MAX_FILES = 8192  # files looked at; later ones are not
MAX_LIBRARIES = 64  # distributions named per process
_SITE = re.compile(r"[/\\](?:site|dist)-packages[/\\]([A-Za-z_]\w*)(?:[/\\]|\.py$)")


class Libraries:
    """Remembers the files, packages and distributions seen (one per logging process)."""

    def __init__(self) -> None:
        self._files: set[str] = set()
        self._packages: dict[str, tuple[str, str | None] | None] = {}  # top-level package -> (name, version)
        self._named: set[str] = set()  # distributions already named
        self._by_package: dict[str, list[str]] | None = None  # packages_distributions(), once needed

    def new(self, files: Iterable[str], named: Container[str] = ()) -> list[tuple[str, str | None, str]]:
        """The distributions (name, version, top-level package) of `files` not named before;
        packages in `named` (the header's: thunder, for its bundled test models) are not looked up."""
        found = []
        for file in files:
            if file in self._files or len(self._files) >= MAX_FILES:
                continue
            self._files.add(file)
            match = _SITE.search(file)
            if match is None or match.group(1) in named:
                continue
            package = match.group(1)
            if package not in self._packages:
                self._packages[package] = self._distribution(package)
            dist = self._packages[package]
            if dist is not None and dist[0] not in self._named and len(self._named) < MAX_LIBRARIES:
                self._named.add(dist[0])
                found.append((dist[0], dist[1], package))
        return found

    def _distribution(self, package: str) -> tuple[str, str | None] | None:
        from importlib import metadata  # once a user frame lies in site-packages: not at import

        try:
            dist = metadata.distribution(package)
            if _provides(dist, package):
                return dist.metadata["Name"] or package, dist.version
        except (metadata.PackageNotFoundError, ValueError, OSError):
            pass
        if self._by_package is None:
            try:
                self._by_package = metadata.packages_distributions()
            except Exception:  # broken metadata of some other distribution: name nothing
                self._by_package = {}
        for name in self._by_package.get(package, ())[:1]:
            try:
                return name, metadata.version(name)
            except (metadata.PackageNotFoundError, ValueError, OSError):
                return name, None
        return None


def _provides(dist: Distribution, package: str) -> bool:
    """Whether the distribution named like the package installs it (not just shares its name)."""
    top_level = dist.read_text("top_level.txt")
    if top_level is not None:
        return package in top_level.split()
    return any(f.parts and f.parts[0] in (package, f"{package}.py") for f in dist.files or ())
