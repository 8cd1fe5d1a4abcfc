"""The only code that touches Thunder internals, behind a version check.

Capture relies on Thunder's private structure (BoundSymbol fields, the interpreter's frame stack,
autograd's processor classes), so it refuses any Thunder it was not written and tested against.
"""

from __future__ import annotations

import threading
from importlib import metadata

SUPPORTED_THUNDER = ("0.2.6",)  # release series this integration was written and tested against


class UnsupportedThunderVersion(RuntimeError):
    pass


def thunder_version() -> str:
    try:
        return metadata.version("lightning-thunder")
    except metadata.PackageNotFoundError:
        import thunder

        return getattr(thunder, "__version__", "unknown")


def check_version(version: str | None = None) -> str:
    """Raise UnsupportedThunderVersion unless `version` (default: the installed one) is supported."""
    version = version or thunder_version()
    base = version.split("+")[0]
    if not any(base == v or base.startswith(v + ".") for v in SUPPORTED_THUNDER):
        raise UnsupportedThunderVersion(
            f"thunder-provenance supports lightning-thunder {', '.join(SUPPORTED_THUNDER)}, "
            f"but {version} is installed. Install a supported release "
            f"(pip install 'lightning-thunder=={SUPPORTED_THUNDER[-1]}') or upgrade thunder-provenance."
        )
    return version


_lock = threading.Lock()
_patcher = None


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def install(*, wait_counters: bool = False, profile: int = 0) -> None:
    """Install every hook (idempotent); `wait_counters` also counts collective waits; `profile`
    times the ops of that many calls (after the first) of every compile from now on (0: off). Log
    headers name the torch and Thunder versions from then on."""
    global _patcher
    with _lock:
        check_version()
        from provenance.session import SESSION
        from provenance.thunder import hooks, profiling, waits
        from provenance.thunder.patching import Patcher

        SESSION.add_version("torch", _torch_version)
        SESSION.add_version("thunder", thunder_version)
        if not _patcher:
            patcher = Patcher()
            try:
                hooks.install(patcher)
            except BaseException:
                patcher.undo()
                raise
            _patcher = patcher
        if wait_counters and not waits.active:
            waits.install(_patcher)
        if profile:
            profiling.install(_patcher)
        profiling.requested = profile


def uninstall() -> None:
    """Remove every hook: Thunder runs exactly as without this package."""
    global _patcher
    with _lock:
        if _patcher:
            _patcher.undo()
            from provenance.thunder import phases, profiling, recompile, waits

            waits.uninstalled()
            profiling.uninstalled()
            phases.uninstalled()
            recompile.entry_compiles.clear()  # compile ids of this session's logs
        _patcher = None


def installed() -> bool:
    return bool(_patcher)
