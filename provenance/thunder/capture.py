"""What one `provenance.enable()` holds, in one object that `disable()` drops.

Importing capture's modules installs and registers nothing. `start()` (provenance.thunder.install)
creates the `Capture`, whose patcher then installs the hooks; `stop()` undoes them and drops the
object, and with it everything capture kept for its compiles: flags, the compile-id counter,
the weak tables keyed by Thunder's objects. The memo tables keyed by values (records, frames,
wait sites) are registered in provenance.core.caches, bounded, and emptied by `stop()` too.

Hooks read the running capture as `capture.ACTIVE` (one module-global lookup; None while
disabled), or close over it when install builds them. Kept after disable(), by design, are the
results a user reads afterwards, each bounded: profiles (provenance.timing.profile), ThunderFX's graphs
and breaks (thunderfx.py), wait counters (provenance.timing.waits).

A forked child's compiles count from 1 (its log is its own). os.register_at_fork cannot
unregister, so that handler is registered once, at the first `start()`, and does nothing while
no capture runs.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

from provenance.core.caches import CACHES
from provenance.thunder.patching import Patcher

__all__ = ["ACTIVE", "Capture", "start", "stop"]


class Capture:
    """Everything capture holds between enable() and disable()."""

    def __init__(self) -> None:
        self.patcher = Patcher()  # every hook, undone by stop()
        self.compile_ids = itertools.count(1)
        self.fault_injection: str | None = None  # tests: the hook that raises InjectedFault (state.check_fault)
        # profiling.py
        self.profile = 0  # calls to profile after the first, for compiles from now on; 0: off
        self.profiling_installed = False
        self.force_clock: str | None = None  # tests: "cuda" times with cuda_event_factory's events on any device
        self.cuda_event_factory: Callable[[], Any] | None = None  # default: torch.cuda.Event(enable_timing=True)
        # the CUDA clock's allocator readings in each window's first timed call (docs/memory.md):
        # off with THUNDER_TRACE_PROFILE_MEMORY=0; the readers (bytes allocated now, the peak so far)
        # are torch.cuda.memory_allocated / max_memory_allocated unless tests set stand-ins
        self.profile_memory = os.environ.get("THUNDER_TRACE_PROFILE_MEMORY", "").strip() != "0"
        self.cuda_memory: tuple[Callable[[], int], Callable[[], int]] | None = None
        self.profile_windows: weakref.WeakSet = weakref.WeakSet()  # open windows, closed by stop()
        self.profiles_logged: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # profile -> its exporters
        self.warmup = 1  # calls of each compile run untimed before the profiled ones
        # per thread, while a profiled call runs: the executor compiles during it (phases.py appends)
        self.call_compiles = threading.local()
        # wait_hooks.py
        self.waits_active = False
        # phases.py: the transform methods wrapped so far; the torch.compile executor's fusions by
        # compiled function (-> compile id, fusion, executor), and the code of Thunder's wrapper of them
        self.patched_transforms: set[tuple[type, str]] = set()
        self.fusions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.fusion_wrapper_code: list = []
        # emit.py: the user stack of each thunder.jit call, by its CompileData
        self.jit_stacks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        # recompile.py: the compile that built each cache entry, by its prologue function; what
        # the prologues of the lookup in progress raised (per thread)
        self.entry_compiles: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.rejected: Any = None  # a recompile.Rejected, from hooks.install
        # thunderfx.py / fx_source.py: each ThunderFX piece by its CompileData; each GraphModule's
        # context and line table
        self.pieces: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.fx_contexts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.fx_line_tables: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.fx_warned = False
        # torch_trace.py: the handler on torch's trace logger (None: not installed)
        self.torch_trace: Any = None
        # run by stop() after the patcher's undo, newest first (hook modules' own clean-up)
        self.on_stop: list[Callable[[], None]] = []

    def listen_to_dynamo(self, handler: Any, started: Callable, ended: Callable) -> None:
        """Dynamo's compile start/end callbacks on `handler` (torch._dynamo.callback_handler),
        registered until the capture stops."""
        handler.register_start_callback(started)
        handler.register_end_callback(ended)

        def stop() -> None:
            while started in handler.start_callbacks:
                handler.remove_start_callback(started)
            while ended in handler.end_callbacks:
                handler.remove_end_callback(ended)

        self.on_stop.append(stop)


ACTIVE: Capture | None = None
_fork_handler = False


def start() -> Capture:
    """The running capture, created if there is none."""
    global ACTIVE, _fork_handler
    if ACTIVE is None:
        if not _fork_handler:
            _fork_handler = True
            os.register_at_fork(after_in_child=_after_fork_in_child)
        ACTIVE = Capture()
    return ACTIVE


def stop() -> None:
    """Undo every hook, drop the capture, empty the memo tables."""
    global ACTIVE
    capture, ACTIVE = ACTIVE, None
    if capture is not None:
        if capture.rejected is not None:
            capture.rejected.clear()  # the exceptions hold the inputs' frames
        capture.patcher.undo()
        while capture.on_stop:
            capture.on_stop.pop()()
    CACHES.clear()


def _after_fork_in_child() -> None:
    capture = ACTIVE
    if capture is not None:
        capture.compile_ids = itertools.count(1)
