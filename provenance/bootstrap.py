"""THUNDER_TRACE=dir (and THUNDER_TRACE_PROFILE=N) with no code change: run from
`thunder_provenance.pth` at interpreter start.

The .pth line costs two environment lookups when both are unset and imports nothing. When one
is set, this module enables tracing as soon as `thunder` has been imported (or at once, if it
already is), so every `thunder.jit` of the program — every torchrun rank, which inherits the
variables — is captured: logged with THUNDER_TRACE, profiled with THUNDER_TRACE_PROFILE (alone,
it captures and profiles without writing logs). It never raises: a failure is one warning and
an untraced program.
"""

from __future__ import annotations

import importlib.abc
import os
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

_activated = False


def activate() -> None:
    global _activated
    if _activated:  # site may process the .pth twice (lib and lib64 of a venv)
        return
    _activated = True
    directory = os.environ.get("THUNDER_TRACE", "")
    if not directory and not os.environ.get("THUNDER_TRACE_PROFILE", ""):
        return
    if "thunder" in sys.modules:
        _enable(directory)
    else:
        sys.meta_path.insert(0, _ThunderImportWatcher(directory))


def _enable(directory: str) -> None:
    """Capture (THUNDER_TRACE_PROFILE alone: profiling, no log), and logs in `directory` if set."""
    try:
        import provenance

        provenance.enable(directory or None)
    except Exception as exc:  # the user's program must run regardless
        what = f"THUNDER_TRACE={directory!r}" if directory else "THUNDER_TRACE_PROFILE"
        warnings.warn(f"thunder-provenance: {what} could not be enabled ({exc!r}); "
                      f"the program runs without tracing.", RuntimeWarning, stacklevel=2)


class _ThunderImportWatcher(importlib.abc.MetaPathFinder):
    """Finds nothing itself: it wraps thunder's loader to enable tracing once thunder is loaded."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname != "thunder":
            return None
        sys.meta_path.remove(self)
        spec = None
        for finder in sys.meta_path:  # whoever would have found thunder without us
            find = getattr(finder, "find_spec", None)
            if find is not None and (spec := find(fullname, path, target)) is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, directory = spec.loader, self.directory
        exec_module = loader.exec_module

        def exec_and_enable(module: ModuleType) -> None:
            exec_module(module)
            _enable(directory)

        loader.exec_module = exec_and_enable
        return spec
