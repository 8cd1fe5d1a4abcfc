"""Opt-in per-op timing of compiled functions (`provenance.enable(profile=N)`, THUNDER_TRACE_PROFILE=N).

At the end of a compile, the forward and backward functions Thunder generated get a timed twin:
the same trace printed again (same text, same names), the first statement of each op prefixed
with `_provenance_stamps[k] = _provenance_clock(); ` (and the return too, which ends the last
op): one clock reading per boundary, on the statements' own lines, so line numbers are the
original's. Op k's time is stamps[k + 1] - stamps[k]. The cache entry Thunder stores holds two dispatchers
instead of the generated functions, for the profiling window only:

- the first call (the compile's own, which warms up executors) runs Thunder's functions
  (`Capture.warmup` calls: `enable(profile_warmup=0)` times the compile's own call too);
- the next calls run the timed twins: the forward marks its saved-for-backward values, so the
  backward of exactly those calls runs timed, whenever autograd calls it. The window takes calls
  until N are clean (CompileProfile.clean: measured, provenance.timing.spread, and with no op time
  preempted: a call during which an executor compiled a fusion, phases.py tells through
  `Capture.call_compiles`, is no measured run; nor is a stall, nor the first CUDA call that reads
  the allocator), at most MAX_FACTOR × N timed calls in all;
- after the N-th (its backward, where there is one; else the next forward), the cache entry
  Thunder built is put back: later calls run Thunder's generated code objects themselves, with
  no hook at all.

With a log open, the compile's ops tables are written when its window opens, and each timed run
from the call listener (emit.profile_started, emit.profile_called: `profile_ops`, `profile_call`).
Profiling off (N = 0) changes nothing: no dispatcher, and compile_finished sees the same entry.
An internal error stops profiling for that compile with one warning; the call's result is the
timed twin's, which computes exactly what the original does.
"""

from __future__ import annotations

import inspect
import itertools
import linecache
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from provenance.core.record import BSYM_ATTR as ATTR
from provenance.thunder import capture, emit
from provenance.thunder.capture import Capture
from provenance.thunder.compat import api
from provenance.thunder.printing import printed_layout
from provenance.thunder.state import CompileState, check_fault, current_compile, fail
from provenance.timing.profile import (
    BACKWARD,
    FORWARD,
    CompileProfile,
    Op,
    ProfiledCall,
    TraceProfile,
    call_listeners,
    durations,
    register,
)

T = api()  # this Thunder's objects (compat.py)
thunder, get_compile_data, TraceCtx = T.thunder, T.get_compile_data, T.TraceCtx
DeviceType, PrimIDs, TensorProxy = T.DeviceType, T.PrimIDs, T.TensorProxy

# The settings (Capture.profile: calls to profile after the first, for compiles from now on;
# force_clock, cuda_event_factory) and the open windows are the running Capture's.
MARK = "_provenance_stamps[{}] = _provenance_clock(); "  # the clock at an op boundary
MAX_FACTOR = 3  # a window times at most 3 × N calls to find N clean ones (N more for a compile, a stall...)
_GENERATED = "_provenance_generated"  # CompileState attribute: {id(fn): (fn, trace)} of this compile
_names = itertools.count()  # unique file names for the timed twins' source (linecache), process-wide


class ProfilingError(RuntimeError):
    pass


# -- knowing which trace a generated function was printed from -------------------------------
def _python_callable(orig: Callable, running: Capture) -> Callable:
    def python_callable(self: TraceCtx, **kwargs: Any) -> Callable:
        fn = orig(self, **kwargs)
        try:
            if running.profile and not kwargs:  # the computation and backward use the default printing
                state = current_compile()
                if state.id and not state.disabled:
                    state.__dict__.setdefault(_GENERATED, {})[id(fn)] = (fn, self)
        except Exception as exc:
            fail("profile", exc)
        return fn

    return python_callable


def install(running: Capture) -> None:
    if not running.profiling_installed:
        running.patcher.wrap(TraceCtx, "python_callable", lambda f: _python_callable(f, running))
        if emit.profile_called not in call_listeners:  # profile_call records, when a log is written
            call_listeners.append(emit.profile_called)
        running.profiling_installed = True
        running.on_stop.append(lambda: _stopped(running))


def _stopped(running: Capture) -> None:
    """The hooks are gone: close every open window (Thunder's own entries go back in place)."""
    for window in list(running.profile_windows):
        window.finish()
    while emit.profile_called in call_listeners:
        call_listeners.remove(emit.profile_called)


# -- timed twins --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Reading:
    """What a clock read of one run: the ProfiledCall's figures."""

    wall_ns: int
    op_ns: tuple[int, ...]
    host_ns: tuple[int, ...] | None = None
    memory: tuple[int, ...] | None = None
    memory_peak: int | None = None


class CpuClock:
    name = "cpu"

    def __init__(self, marks: int) -> None:
        self.mark = time.perf_counter_ns  # what the generated code calls at each op boundary

    def start(self) -> int:
        return time.perf_counter_ns()

    stop = start

    memory = None  # no allocator to read on the CPU: the static timeline is the figure
    reading = False

    def read(self, begin: int, end: int, stamps: list[int]) -> Reading:
        return Reading(end - begin, durations(stamps))


class CudaClock:
    """Device time: a CUDA event recorded at every op boundary on the current stream, read after
    the call (one synchronize, profiled calls only). An op's time is the time between its two
    boundary events on the GPU timeline: its kernels, not their launch (docs/cost.md says what
    else it can include)."""

    name = "cuda"

    def __init__(self, marks: int, make: Callable[[], Any] | None = None,
                 memory: tuple[Callable[[], int], Callable[[], int]] | None = None) -> None:
        if make is None:
            import torch

            def make() -> Any:
                return torch.cuda.Event(enable_timing=True)

        self.events = [make() for _ in range(marks)]
        self.bounds = (make(), make())
        self.used = 0
        # the allocator's readers (bytes allocated, peak so far), read at every mark of a run with
        # `reading` set: allocation is host-side (the caching allocator books a tensor when its op
        # is launched, and a `del` frees it then), so the readings need no synchronize
        self.memory = memory
        self.allocated = [0] * marks if memory is not None else None
        self.reading = False
        self.peak_before = 0

    def mark(self) -> int:
        event = self.events[self.used]
        if self.reading:
            self.allocated[self.used] = self.memory[0]()
        self.used += 1
        event.record()
        return time.perf_counter_ns()

    def start(self) -> int:
        self.used = 0
        if self.reading:
            self.peak_before = self.memory[1]()
        self.bounds[0].record()
        return time.perf_counter_ns()

    def stop(self) -> int:
        self.bounds[1].record()
        return time.perf_counter_ns()

    def read(self, begin: int, end: int, stamps: list[int]) -> Reading:
        self.bounds[1].synchronize()
        for event in self.events[: self.used]:  # events of other streams, if an op switched
            event.synchronize()
        events = self.events

        def ns(a: Any, b: Any) -> int:
            return max(0, round(a.elapsed_time(b) * 1e6))  # elapsed_time is in ms

        if self.used != len(stamps):
            raise ProfilingError(f"{self.used} CUDA events recorded for {len(stamps)} marks")
        op_ns = tuple(ns(events[i], events[i + 1]) for i in range(self.used - 1))
        memory = peak = None
        if self.reading:
            memory = tuple(self.allocated)
            after = self.memory[1]()
            peak = after if after > self.peak_before else None  # below an earlier peak: not known
        return Reading(ns(*self.bounds), op_ns, durations(stamps), memory, peak)


@dataclass(eq=False)
class Timed:
    """A generated function's timed twin, its timed ops, and the clock readings its marks store
    (one per op boundary: len(ops) + 1)."""

    fn: Callable
    ops: tuple[Op, ...]
    stamps: list
    clock: CpuClock | CudaClock
    filename: str
    lock: threading.Lock


def _on_cuda(trace: TraceCtx) -> bool:
    """Whether the trace computes on a GPU: then ops are timed on the device's clock."""
    return any(isinstance(out, TensorProxy) and out.device.devicetype is DeviceType.CUDA
               for bsym in trace.bound_symbols for out in bsym.flat_proxy_outs)


def _memory_readers(running: Capture) -> tuple[Callable[[], int], Callable[[], int]] | None:
    """The CUDA allocator's readers for the CUDA clock (None: memory readings off)."""
    if not running.profile_memory:
        return None
    if running.cuda_memory is not None:
        return running.cuda_memory
    import torch

    return torch.cuda.memory_allocated, torch.cuda.max_memory_allocated


def _source(fn: Callable) -> str | None:
    entry = linecache.cache.get(inspect.unwrap(fn).__code__.co_filename)
    return "".join(entry[2]) if entry is not None and len(entry) == 4 else None


def twin(trace: TraceCtx, original: Callable, which: str, running: Capture) -> Timed:
    """The timed twin of `original`, which Thunder generated from `trace`: a clock reading at
    every boundary between two ops (before the first, after the last)."""
    text, placed = printed_layout(trace)
    source = _source(original)
    if source is not None and source != "\n".join(text):
        raise ProfilingError(f"the {which} function's code differs from its trace's printing")
    positions = {id(b): i for i, b in enumerate(trace.bound_symbols)}
    lines = list(text)
    ops: list[Op] = []
    indent = "  "
    for printed, (bsym, start, length) in enumerate(placed):
        first = next((i for i in range(start, start + length)
                      if lines[i].strip() and not lines[i].lstrip().startswith("#")), None)
        if first is None:  # comments only: nothing runs
            continue
        stripped = lines[first].lstrip()
        indent = lines[first][: len(lines[first]) - len(stripped)]
        # on the statement's own line (line numbers stay the original's): the previous op ends here
        lines[first] = f"{indent}{MARK.format(len(ops))}{stripped}"
        if bsym.sym.id is PrimIDs.RETURN:
            break
        ops.append(Op(positions[id(bsym)], bsym.sym.name, bsym.__dict__.get(ATTR), start, printed))
    else:  # no return statement: the last op ends after its block
        lines.append(f"{indent}{MARK.format(len(ops)).rstrip('; ')}")
    marks = len(ops) + 1
    on = running.force_clock or ("cuda" if _on_cuda(trace) else "cpu")
    clock = (CudaClock(marks, running.cuda_event_factory, _memory_readers(running)) if on == "cuda"
             else CpuClock(marks))
    stamps = [0] * marks
    ctx = trace.python_ctx()  # what TraceCtx.python_callable gives the original
    ctx["__function_obj"] = trace.fn
    ctx["thunder"] = thunder
    ctx["_provenance_stamps"] = stamps
    ctx["_provenance_clock"] = clock.mark
    program = "\n".join(lines)
    filename = f"thunder.profiled_{trace.siginfo().name}_{next(_names)}"
    exec(compile(program, filename, "exec"), ctx)
    linecache.cache[filename] = (len(program), None, program.splitlines(keepends=True), filename)
    fn = ctx[trace.siginfo().name]
    if running.waits_active:  # the twin's lines are the original's: its waits map the same way
        from provenance.thunder import wait_hooks

        wait_hooks.register_sites(fn, trace)
    return Timed(fn, tuple(ops), stamps, clock, filename, threading.Lock())


# -- the profiling window of one cache entry ----------------------------------------------------
class _Mark:
    """Replaces a profiled forward's saved non-tensor values: its backward runs timed too."""

    __slots__ = ("other", "call")

    def __init__(self, other: Any, call: int) -> None:
        self.other, self.call = other, call


class Window:
    def __init__(self, profile: CompileProfile, compile_stats: Any, original: Any,
                 forward: Timed, backward: Timed | None, calls: int, warmup: int = 1,
                 compiles: threading.local | None = None) -> None:
        self.profile = profile
        self.owner = weakref.ref(compile_stats)
        self.original = original  # the cache entry Thunder built, put back at the end
        self.forward_fn, self.backward_fn = original.computation_fn, original.backward_fn
        self.forward, self.backward = forward, backward
        self.requested = calls  # clean calls wanted
        self.calls = calls  # the last call to time (grows while fewer than `requested` are clean)
        self.cap = calls * MAX_FACTOR  # the most calls it times
        self.warmup = warmup
        self.compiles = compiles  # Capture.call_compiles
        self.seen = 0
        self.active = True
        self.dispatcher_id = 0
        self._finalizer = weakref.finalize(self, _forget_sources, (forward.filename,
                                                                   backward.filename if backward else None))

    def run(self, timed: Timed, trace: str, call: int, args: tuple) -> Any:
        stamps, clock = timed.stamps, timed.clock
        # the first timed call reads the allocator too (a CUDA clock with readers): no measured run,
        # so the window takes one more call for it (_settle)
        clock.reading = call == 1 and clock.memory is not None
        compiled: list = []
        outer = getattr(self.compiles, "value", None)
        if self.compiles is not None:
            self.compiles.value = compiled
        try:
            begin = clock.start()
            result = timed.fn(*args)  # straight-line code: when it returns, every mark has run
            end = clock.stop()
        finally:
            if self.compiles is not None:
                self.compiles.value = outer
        try:
            check_fault("profile")
            got = clock.read(begin, end, stamps)
            self.profile.add(ProfiledCall(self.profile.compile_id, call, trace, clock.name, got.wall_ns, got.op_ns,
                                          got.host_ns, compiled=tuple(compiled), memory=got.memory,
                                          memory_peak=got.memory_peak))
            if trace == BACKWARD or self.backward is None:  # the call's last trace
                self._settle(call)
        except Exception as exc:
            self.fail(exc)
        return result

    def _settle(self, call: int) -> None:
        """After call `call`: time more calls while fewer than `requested` are clean, `cap` at most."""
        missing = self.requested - self.profile.clean()
        if missing > 0:
            self.calls = min(max(self.calls, call + missing), self.cap)

    def fail(self, exc: BaseException) -> None:
        if self.profile.error is None:
            self.profile.error = f"{type(exc).__name__}: {exc}"
            warnings.warn(f"thunder-provenance: profiling {self.profile.fn_name} failed ({exc!r}); it is off for "
                          f"this compile, which runs on unchanged.", RuntimeWarning, stacklevel=3)
        self.finish()

    def finish(self) -> None:
        """Put the entry Thunder built back in its cache: later calls run its functions directly."""
        if not self.active:
            return
        self.active = False
        compile_stats = self.owner()
        cache = getattr(compile_stats, "interpreter_cache", None) or []
        for i, entry in enumerate(cache):
            if id(entry.computation_fn) == self.dispatcher_id:
                cache[i] = self.original
                break
        self.original = None
        self.forward = None
        running = capture.ACTIVE
        if running is not None:
            running.profile_windows.discard(self)


def _forget_sources(filenames: tuple) -> None:
    for filename in filenames:
        if filename is not None:
            linecache.cache.pop(filename, None)


def _forward_dispatcher(window: Window) -> Callable:
    original = window.forward_fn
    marks = window.backward is not None

    def computation(*args: Any) -> Any:
        __tracebackhide__ = True  # pytest hides this frame in a failure's traceback
        if not window.active:
            return original(*args)
        window.seen += 1
        call = window.seen - window.warmup  # the first calls warm up
        timed = window.forward
        if call > window.calls:  # past the window (the last call's backward never ran)
            window.finish()
            return original(*args)
        if call <= 0 or timed is None or not timed.lock.acquire(blocking=False):
            return original(*args)
        try:
            result = window.run(timed, FORWARD, call, args)
        finally:
            timed.lock.release()
            if call >= window.calls and not marks:
                window.finish()
        if marks:
            try:
                data, (saved_tensors, saved_other) = result
                result = data, (saved_tensors, _Mark(saved_other, call))
            except (TypeError, ValueError):
                pass  # not the (data, saved) pair autograd needs: its backward runs untimed
        return result

    return computation


def _backward_dispatcher(window: Window) -> Callable:
    original = window.backward_fn

    def backward_fn(saved_for_backward: list, cotangents: Any) -> Any:
        __tracebackhide__ = True  # pytest hides this frame in a failure's traceback
        mark = saved_for_backward[1] if len(saved_for_backward) == 2 else None
        if type(mark) is not _Mark:
            return original(saved_for_backward, cotangents)
        saved_for_backward[1] = mark.other
        timed = window.backward
        if window.profile.error is not None or not timed.lock.acquire(blocking=False):
            return original(saved_for_backward, cotangents)
        try:
            return window.run(timed, BACKWARD, mark.call, (saved_for_backward, cotangents))
        finally:
            timed.lock.release()
            if mark.call >= window.calls:
                window.finish()

    return backward_fn


def profiled_entry(running: Capture, entry: Any, state: CompileState, compile_stats: Any) -> Any:
    """The cache entry to store: `entry` itself, or one whose functions run a profiling window."""
    requested = running.profile
    if not requested or not state.id or state.disabled or compile_stats is None:
        return entry
    generated = state.__dict__.pop(_GENERATED, {})
    profile = None
    try:
        compile_data = get_compile_data()
        profile = CompileProfile(state.id, emit.fn_name(getattr(compile_data, "fn", None)), requested)
        check_fault("profile_build")
        found = generated.get(id(entry.computation_fn))
        if found is None or found[0] is not entry.computation_fn:
            raise ProfilingError("the computation function was not generated from a trace")
        traces = {FORWARD: found[1]}
        forward = twin(found[1], entry.computation_fn, FORWARD, running)
        backward = None
        if entry.backward_fn is not None:
            found = generated.get(id(entry.backward_fn))
            if found is None or found[0] is not entry.backward_fn:
                raise ProfilingError("the backward function was not generated from a trace")
            traces[BACKWARD] = found[1]
            backward = twin(found[1], entry.backward_fn, BACKWARD, running)
        profile.traces[FORWARD] = TraceProfile(FORWARD, forward.ops, clock=forward.clock.name)
        if backward is not None:
            profile.traces[BACKWARD] = TraceProfile(BACKWARD, backward.ops, clock=backward.clock.name)
        window = Window(profile, compile_stats, entry, forward, backward, requested, running.warmup,
                        running.call_compiles)
        computation = _forward_dispatcher(window)
        window.dispatcher_id = id(computation)
        replaced = entry._replace(computation_fn=computation)
        if backward is not None:
            replaced = replaced._replace(backward_fn=_backward_dispatcher(window))
        register(profile, owner=compile_stats)
        running.profile_windows.add(window)
    except Exception as exc:
        name = profile.fn_name if profile is not None else "a function"
        warnings.warn(f"thunder-provenance: cannot profile {name} ({exc!r}); it runs unprofiled.",
                      RuntimeWarning, stacklevel=2)
        return entry
    try:
        check_fault("profile_log")
        emit.profile_started(profile, entry, traces)
    except Exception as exc:  # profiled all the same; the log lacks this compile's profile
        warnings.warn(f"thunder-provenance: cannot log the profile of {profile.fn_name} ({exc!r}); it is "
                      f"profiled, not logged.", RuntimeWarning, stacklevel=2)
    return replaced
