"""Frames and who they belong to: the user's code, a library, or code generated at run time.

The rule is provenance.core.usercode's; here it is applied to live frames, with the filesystem and
cached (exclusions registered later empty the caches)."""

from __future__ import annotations

import importlib.util
import linecache
import os
import sys
from collections.abc import Iterable
from functools import lru_cache

from provenance.core import usercode
from provenance.core.caches import CACHES
from provenance.core.record import Frame

__all__ = ["class_file", "module_file", "frame_at", "frame_of", "is_user_code", "is_user_path"]


@CACHES.lru("frames.is_user_code")
@lru_cache(maxsize=4096)
def is_user_code(module_name: str, path: str) -> bool:
    """provenance.core.usercode's rule for a live frame, known by its module and file: not a library
    module, not excluded, and a file on disk outside the standard library. Third-party model
    code (say, transformers) counts as user code; generated code (`<eval_with_key>.N`,
    `<string>`) and other pseudo-files (`<frozen ...>`, `<stdin>`) never do. A `__main__` module
    is decided by its file: `python -m pytest` or `-m torch.distributed.run` runs a library's."""
    if module_name == "__main__":
        return is_user_path(path)
    return not usercode.is_library_module(module_name) and _user_path(path)


@CACHES.lru("frames.is_user_path")
@lru_cache(maxsize=4096)
def is_user_path(path: str) -> bool:
    """`is_user_code` for a frame known only by its file (FX's recorded stack traces): the
    library packages by where they really are."""
    path = os.path.abspath(path) if not usercode.is_pseudo_file(path) else path
    for library, exempt in _library_dirs():
        if path.startswith(library) and not any(path.startswith(e) for e in exempt):
            return False
    return _user_path(path)


@CACHES.lru("frames.library_dirs")
@lru_cache(maxsize=1)
def _library_dirs() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(package folder, its user subfolders) of each library package (found, not imported; a
    registered dotted name imports its parent package)."""
    dirs: list[tuple[str, tuple[str, ...]]] = []
    for name in usercode.library_packages():
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):  # a registered subpackage of a package that is not there
            continue
        if spec is None or spec.submodule_search_locations is None:  # a registered module: its file
            if spec is not None and spec.has_location:
                dirs.append((os.path.abspath(spec.origin), ()))
            continue
        subpackages = [s.removeprefix(name + ".") for s in usercode.USER_SUBPACKAGES if s.startswith(name + ".")]
        for location in spec.submodule_search_locations:
            folder = os.path.abspath(location) + os.sep
            dirs.append((folder, tuple(folder + s.replace(".", os.sep) + os.sep for s in subpackages)))
    return tuple(dirs)


@CACHES.lru("frames.class_file")
@lru_cache(maxsize=1024)
def class_file(cls: type) -> str | None:
    """The file defining `cls`, if it is user code (a model's module class, not torch.nn's)."""
    module_name = getattr(cls, "__module__", None)
    module = sys.modules.get(module_name) if isinstance(module_name, str) else None
    path = getattr(module, "__file__", None)
    return path if isinstance(path, str) and is_user_code(module_name, path) else None


def module_file(classes: Iterable[type]) -> str | None:
    """The file of an op's module line (Provenance.module_file), from the classes of its module
    stack, innermost first: the file of the innermost user module class that lies in the same file
    as the nearest user module above it (or has none above). A layer imported from another file —
    transformers' Conv1D or activations inside modeling_gpt2.py's blocks — is a building block, like
    nn.Linear: its parent's file is the one the user reads."""
    files = [f for f in map(class_file, classes) if f is not None]
    return next((f for f, above in zip(files, files[1:] + [None]) if above is None or above == f), None)


def _user_path(path: str) -> bool:
    if usercode.is_pseudo_file(path) or not os.path.isfile(path):
        return False
    path = os.path.abspath(path)
    return not (usercode.is_stdlib_file(path) or usercode.is_excluded_path(path) or usercode.is_launcher_script(path))


@CACHES.lru("frames.frame_of")
@lru_cache(maxsize=65536)
def frame_of(path: str, line: int, function: str, module_name: str | None) -> Frame:
    """An interned Frame; `module_name` None: classified by its path alone."""
    text = linecache.getline(path, line).strip() if line else ""
    user = is_user_path(path) if module_name is None else is_user_code(module_name, path)
    generated = usercode.is_generated(path)
    return Frame(file=path, line=line, function=function, text=text, user=user, generated=generated)


def frame_at(path: str, line: int, function: str) -> Frame:
    """The Frame of a location known only by file, line and function (not a live frame)."""
    return frame_of(path, line, function, None)


# Exclusions changed: every capture table may hold frames decided under the old ones.
usercode.on_change(CACHES.clear)
