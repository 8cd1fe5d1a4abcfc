"""The only code that touches Thunder internals, behind a version check.

Capture relies on Thunder's private structure (BoundSymbol fields, the interpreter's frame stack,
autograd's processor classes), so it refuses any Thunder it was not written and tested against:
compat.py holds the version check and, per Thunder series, every name capture uses. Importing this
package imports neither Thunder nor torch and installs nothing; install() does.
"""

from __future__ import annotations

import threading

from provenance.thunder.compat import (
    SUPPORTED_THUNDER,
    UnsupportedThunderVersion,
    check_stack,
    check_version,
    thunder_version,
)

__all__ = ["SUPPORTED_THUNDER", "UnsupportedThunderVersion", "check", "check_version", "compile_stats_of", "install",
           "installed", "profile_setting", "thunder_version", "uninstall"]

_lock = threading.Lock()


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def check() -> str:
    """The installed Thunder's version once it is supported and imports on this torch; else
    UnsupportedThunderVersion (compat.check_stack). Imports Thunder."""
    return check_stack()


def install(*, wait_counters: bool = False, profile: int = 0, warmup: int | None = None) -> None:
    """Install every hook (idempotent); `wait_counters` also counts collective waits (and, while
    the session has an exporter, writes the long ones to it: wait_hooks.watch); `profile`
    times the ops of that many calls (after `warmup` untimed ones; None: unchanged) of every
    compile from now on (0: off). Log
    headers name the torch and Thunder versions from then on. The hooks and all they keep belong
    to one `capture.Capture`, dropped by uninstall()."""
    with _lock:
        check_stack()
        from provenance.log.session import SESSION
        from provenance.thunder import capture, hooks, profiling, wait_hooks

        SESSION.add_version("torch", _torch_version)
        SESSION.add_version("thunder", thunder_version)
        if capture.ACTIVE is None:
            try:
                hooks.install(capture.start())
            except BaseException:
                capture.stop()
                raise
        running = capture.ACTIVE
        if wait_counters and not running.waits_active:
            wait_hooks.install(running)
        if running.waits_active and SESSION.active:  # a log is written: long waits go there too
            wait_hooks.watch(running)
        if profile:
            profiling.install(running)
        running.profile = profile
        if warmup is not None:
            running.warmup = warmup


def uninstall() -> None:
    """Remove every hook: Thunder runs exactly as without this package."""
    with _lock:
        from provenance.thunder import capture

        capture.stop()


def installed() -> bool:
    from provenance.thunder import capture

    return capture.ACTIVE is not None


def profile_setting() -> int:
    """The running capture's profiling setting (calls to time after the first); 0 when disabled."""
    from provenance.thunder import capture

    running = capture.ACTIVE
    return running.profile if running is not None else 0


def compile_stats_of(jfn: object) -> object | None:
    """`thunder.compile_stats(jfn)` (None for what thunder.jit did not return), without importing
    Thunder: the owner of a jitted function's profiles."""
    from provenance.thunder import compat

    return getattr(jfn, compat.TABLES[compat.series()].names["compile_stats_attr"], None)
