"""Frames and who they belong to: the user's code, a library, or code generated at run time."""

from __future__ import annotations

import importlib.util
import linecache
import os
from functools import lru_cache

from provenance.caches import CACHES
from provenance.record import Frame

__all__ = ["frame_at", "frame_of", "is_generated", "is_user_code", "is_user_path"]

_LIBRARY_PACKAGES = frozenset({"torch", "thunder", "provenance", "exporters"})
# The interpreter's own stdlib (os.py's folder); in a venv "platstdlib" would also cover site-packages.
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__)) + os.sep
# Pseudo-files of code generated at run time: FX's GraphModule code, exec()/compile() of a string.
_GENERATED = ("<eval_with_key>", "<string>")


@CACHES.lru("frames.is_user_code")
@lru_cache(maxsize=4096)
def is_user_code(module_name: str, path: str) -> bool:
    """User code: a file on disk, but not torch, thunder (its bundled test models excepted), this
    package or the standard library. Third-party model code (say, transformers) counts as user
    code: it is the model the user runs. Generated code (`<eval_with_key>.N`, `<string>`) and
    other pseudo-files (`<frozen ...>`, `<stdin>`) never do."""
    top = module_name.partition(".")[0]
    if top in _LIBRARY_PACKAGES and not module_name.startswith("thunder.tests"):
        return False
    return _user_path(path)


@CACHES.lru("frames.is_user_path")
@lru_cache(maxsize=4096)
def is_user_path(path: str) -> bool:
    """`is_user_code` for a frame known only by its file (FX's recorded stack traces)."""
    path = os.path.abspath(path) if not path.startswith("<") else path
    for library, exempt in _library_dirs():
        if path.startswith(library) and not (exempt and path.startswith(exempt)):
            return False
    return _user_path(path)


@lru_cache(maxsize=1)
def _library_dirs() -> tuple[tuple[str, str | None], ...]:
    """(package folder, exempt subfolder) of each library package (found, not imported)."""
    dirs = []
    for name in sorted(_LIBRARY_PACKAGES):
        spec = importlib.util.find_spec(name)
        for location in (spec.submodule_search_locations or ()) if spec is not None else ():
            folder = os.path.abspath(location) + os.sep
            dirs.append((folder, folder + "tests" + os.sep if name == "thunder" else None))
    return tuple(dirs)


def _user_path(path: str) -> bool:
    if path.startswith("<") or not os.path.isfile(path):
        return False
    path = os.path.abspath(path)
    return not (path.startswith(_STDLIB_DIR) and "-packages" + os.sep not in path)


def is_generated(path: str) -> bool:
    return path.startswith(_GENERATED)


@CACHES.lru("frames.frame_of")
@lru_cache(maxsize=65536)
def frame_of(path: str, line: int, function: str, module_name: str | None) -> Frame:
    """An interned Frame; `module_name` None: classified by its path alone."""
    text = linecache.getline(path, line).strip() if line else ""
    user = is_user_path(path) if module_name is None else is_user_code(module_name, path)
    return Frame(file=path, line=line, function=function, text=text, user=user, generated=is_generated(path))


def frame_at(path: str, line: int, function: str) -> Frame:
    """The Frame of a location known only by file, line and function (not a live frame)."""
    return frame_of(path, line, function, None)
