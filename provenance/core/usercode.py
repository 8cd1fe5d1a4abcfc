"""The one rule for what is the user's code, for capture and for the report (cf. JAX's
`_src/source_info_util.py`: one small module, one rule, `register_exclusion`).

A frame is the user's unless it is library code: torch, thunder (its bundled test models,
`thunder.tests`, excepted), this package (`provenance`, `exporters`), the standard library, the
test runners and launchers that run the user's code (pytest, pluggy, IPython's kernel, and their
console scripts such as `bin/pytest` or `bin/torchrun`: a compile under pytest would otherwise
have some thirty of its frames above the test), or a package or path given to
`register_exclusion`. Third-party model code (transformers, litgpt) counts as the user's: it is
the model the user runs. Code generated at run time (FX's
`<eval_with_key>.N`, `<string>`) and every other pseudo-file (`<frozen ...>`, `<stdin>`) never does.

Two readings of the rule:
- capture (provenance/thunder/frames.py) knows the live process: a frame's module name, where
  each library package really is, and whether a file is on disk (a path that is not, is not
  the user's). It decides `Frame.user` once, at capture.
- the report reads text (tracebacks) from another machine: `is_library_path` decides by path
  patterns alone. For paths of a usual layout the two agree (tested): a package under
  `site-packages/` or `dist-packages/` is named by the folder right after it; elsewhere (a
  source checkout, an editable install) a folder named after a library package anywhere in
  the path marks it (so a user's own folder named `torch/` reads as library on the text side
  only); the standard library is `lib/pythonX.Y/` outside `*-packages/`.

Nothing here imports torch, thunder or the rest of this package.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

__all__ = ["GENERATED", "LAUNCHER_PACKAGES", "LAUNCHER_SCRIPTS", "LIBRARY_PACKAGES", "STDLIB_DIR", "USER_SUBPACKAGES",
           "is_excluded_path", "is_generated", "is_launcher_script", "is_library_module", "is_library_path",
           "is_pseudo_file", "is_stdlib_file", "library_packages", "on_change", "package_of",
           "register_exclusion", "remove_exclusion"]

LIBRARY_PACKAGES = ("torch", "thunder", "provenance", "exporters")
# Test runners and launchers (runpy, unittest, importlib and torch.distributed.elastic are already
# library code: the standard library, torch): they run the user's code, they are not it.
LAUNCHER_PACKAGES = ("pytest", "_pytest", "pluggy", "xdist", "execnet", "IPython", "ipykernel")
LAUNCHER_SCRIPTS = ("pytest", "py.test", "torchrun", "thunder-trace", "ipython")  # console scripts, in a bin/ folder
USER_SUBPACKAGES = ("thunder.tests",)  # inside a library package, yet the user's: Thunder's test models
GENERATED = ("<eval_with_key>", "<string>")  # pseudo-files of code generated at run time
# This interpreter's stdlib (os.py's folder); in a venv "platstdlib" would also cover site-packages.
STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__)) + os.sep

_packages: list[str] = []  # registered packages, dotted names
_prefixes: list[str] = []  # registered path prefixes, absolute
_listeners: list[Callable[[], None]] = []
_SITE = re.compile(r"[/\\](?:site|dist)-packages[/\\]")
_TEXT_STDLIB = re.compile(r"[/\\]lib[/\\]python\d+\.\d+[/\\]")  # POSIX layouts (not Windows' `Lib`)
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_SCRIPTS = "|".join(map(re.escape, LAUNCHER_SCRIPTS))
_SCRIPT = re.compile(rf"[/\\](?:bin|Scripts)[/\\](?:{_SCRIPTS})(?:-script\.py|\.exe)?$")


def _package_pattern(name: str) -> str:
    """A package's folder (or module file) as path components: `a.b` -> `a/b/` or `a/b.py`."""
    return r"[/\\]".join(map(re.escape, name.split("."))) + r"(?:[/\\]|\.py$)"


def _compile(names: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:^|[/\\\\])({_package_pattern(n)})" for n in names) or "(?!)")


_library_text = _compile(LIBRARY_PACKAGES + LAUNCHER_PACKAGES)
_user_text = _compile(USER_SUBPACKAGES)


def library_packages() -> tuple[str, ...]:
    """The library packages: the built-in ones, the launchers, then the registered ones."""
    return LIBRARY_PACKAGES + LAUNCHER_PACKAGES + tuple(_packages)


def _is_path(what: str) -> bool:
    return "/" in what or os.sep in what or what.endswith(".py")


def _prefix(path: str) -> str:
    prefix = os.path.abspath(os.path.expanduser(path))
    # a folder: not its namesakes (`/opt/launch/` does not cover `/opt/launcher`)
    return prefix + os.sep if path.endswith(("/", os.sep)) else prefix


def register_exclusion(what: str) -> None:
    """Never count `what` as the user's code: a package (`mylauncher`, `mypkg.tools`) or a path
    (a folder or file: `/opt/launch/`, `scripts/run.py`; anything with a path separator or
    ending in `.py`). Frames captured from now on follow it; records made before keep theirs."""
    if _is_path(what):
        if _prefix(what) not in _prefixes:
            _prefixes.append(_prefix(what))
    elif _IDENTIFIER.fullmatch(what):
        if what not in _packages:
            _packages.append(what)
    else:
        raise ValueError(f"register_exclusion({what!r}): give a package name or a path")
    _changed()


def remove_exclusion(what: str) -> None:
    """Undo `register_exclusion(what)` (a test's cleanup)."""
    if _is_path(what) and _prefix(what) in _prefixes:
        _prefixes.remove(_prefix(what))
    elif what in _packages:
        _packages.remove(what)
    _changed()


def on_change(callback: Callable[[], None]) -> None:
    """Call `callback()` whenever the exclusions change (capture empties its caches)."""
    _listeners.append(callback)


def _changed() -> None:
    global _library_text
    _library_text = _compile(library_packages())
    for callback in list(_listeners):
        callback()


def is_library_module(module_name: str) -> bool:
    """Whether a module (by its `__name__`) is library code, its file aside."""
    if any(module_name == s or module_name.startswith(s + ".") for s in USER_SUBPACKAGES):
        return False
    top = module_name.partition(".")[0]
    if top in LIBRARY_PACKAGES or top in LAUNCHER_PACKAGES:
        return True
    return any(module_name == p or module_name.startswith(p + ".") for p in _packages)


def is_pseudo_file(path: str) -> bool:
    """`<frozen ...>`, `<stdin>`, `<string>`, `<eval_with_key>.N`: no file behind it."""
    return path.startswith("<")


def is_generated(path: str) -> bool:
    """Code generated at run time (FX's GraphModule code, exec()/compile() of a string)."""
    return path.startswith(GENERATED)


def is_stdlib_file(path: str) -> bool:
    """Whether an absolute path lies in this interpreter's standard library."""
    return path.startswith(STDLIB_DIR) and "-packages" + os.sep not in path


def is_launcher_script(path: str) -> bool:
    """Whether a path is a launcher's console script (`.../bin/pytest`, `.../bin/torchrun`): run
    as `__main__`, outside any package, yet no more the user's code than the package it calls."""
    return _SCRIPT.search(path) is not None


def package_of(path: str) -> str:
    """What a path is part of, for a label: the folder after `site-packages/` (the installed
    package), a launcher script's name, else the file's name."""
    sites = list(_SITE.finditer(path))
    if sites:
        return re.split(r"[/\\]", path[sites[-1].end():], maxsplit=1)[0].removesuffix(".py")
    return re.split(r"[/\\]", path)[-1]


def is_excluded_path(path: str) -> bool:
    """Whether a path lies under a registered path prefix."""
    return any(path.startswith(prefix) for prefix in _prefixes)


def is_library_path(path: str) -> bool:
    """The rule on a path alone, as text (a traceback of another machine): library code, a
    pseudo-file or an excluded path. Not the user's code exactly when this is False."""
    if is_pseudo_file(path) or is_excluded_path(path) or is_launcher_script(path):
        return True
    sites = list(_SITE.finditer(path))
    if sites:  # an installed package: named by the folder right after site-packages
        top = path[sites[-1].end():]
        return not _user_text.match(top) and bool(_library_text.match(top))
    if _library_text.search(path):
        return not _user_text.search(path)
    return bool(_TEXT_STDLIB.search(path))
