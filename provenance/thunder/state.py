"""Per-compile capture state, the stamping rule, and the never-break-the-program guard.

What lives as long as an enable() (settings, counters, the tests' fault injection) is the running
`capture.Capture`'s; this module keeps no state of its own beyond the two fallback CompileStates.
"""

from __future__ import annotations

import time
import traceback
import warnings
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from provenance.core.caches import CACHES
from provenance.core.record import BSYM_ATTR as ATTR
from provenance.core.record import Frame, Kind, Provenance, Span, intern
from provenance.core.scope import innermost_span
from provenance.log.events import MAX_PHASES, CaptureDisabled
from provenance.log.session import SESSION
from provenance.thunder import capture
from provenance.thunder.compat import api
from provenance.thunder.stack import StackReader

if TYPE_CHECKING:
    from provenance.allocation.static_memory import CompileMemory
    from provenance.dynamo.graphs import Piece

T = api()  # this Thunder's objects (compat.py)

TRACE_SOURCE_ATTR = "_provenance_source"  # on a TraceCtx being acquired: the current op's record
COMPILE_ATTR = "_provenance_compile"  # on thunder's CompileStats: the CompileState
LABELLED_AT = "_provenance_labelled_ns"  # on a TraceCtx: when its pass labelled it (its end)
MADE_BY = "_provenance_made_by"  # on a TraceCtx a transform returned: the transform's pass name
COUNTS_ATTR = "_provenance_counts"  # on thunder's CompileStats: [calls, cache hits, cache misses, hits by compile]


class InjectedFault(RuntimeError):
    pass


@dataclass(eq=False)
class CompileState:
    """What capture knows about one thunder.jit compile."""

    id: int  # from the running capture's counter; 0: no compile (_DETACHED, _SUSPENDED)
    stats_id: int = 0  # id() of the jitted function's CompileStats (not a reference: they hold the model)
    disabled: bool = False
    ended: bool = False
    started: bool = False  # its compile_start was emitted
    fn_name: str = "?"
    index: int = 0  # the how-manieth compile of this jitted function
    last_record: Provenance | None = None  # of the last symbol a pass processed (for failures)
    acquiring: Any = None  # the trace the interpreter is building: logged if the compile fails; dropped at its end
    log_ns: int = 0  # time spent building this compile's log events
    call_frame: Frame | None = None  # the user's line of the call that compiled (with a log)
    phases: PhaseLog = field(default_factory=lambda: PhaseLog())
    stack: StackReader = field(default_factory=StackReader)
    # Fusion records that know more than their members' own records (rematerialization's
    # recomputed ops), by the ids of the fusion's subsymbols; the tuple keeps them alive.
    fusion_hints: dict[tuple[int, ...], tuple[Provenance, tuple]] = field(default_factory=dict)
    piece: Piece | None = None  # ThunderFX: the piece this compile is of (thunderfx.attach)
    # Set by the from_bsym hook around Thunder's copy (in this compile's thread): the record the
    # copy keeps, for the bind hook; `copying_fill`: the copy has new subsymbols, to fill.
    copying: Provenance | None = None
    copying_fill: bool = False
    capture: capture.Capture | None = None  # the capture it started under (disable() drops that one)
    remat: list = field(default_factory=list)  # memory.py: what rematerialization changed in the saved tensors
    memory: CompileMemory | None = None  # memory.py: the compile's static memory, once its traces are final
    memory_ns: int = 0  # time spent on the memory timeline
    memory_unknown: str | None = None  # why it has none (memory.py: its sizes are symbols)

    def fusion_record(self, subsymbols: tuple | list) -> Provenance | None:
        hint = self.fusion_hints.get(tuple(map(id, subsymbols)))
        return hint[0] if hint is not None else None

    def remember_fusion(self, subsymbols: tuple | list, record: Provenance) -> None:
        self.fusion_hints[tuple(map(id, subsymbols))] = (record, tuple(subsymbols))


@dataclass(eq=False, slots=True)
class PhaseLog:
    """A compile's phases as they run, in start order (at most MAX_PHASES: those beyond are dropped,
    counted): [name, start, end, depth, detail] with
    perf_counter_ns times (depth 0: top level; a phase called inside another is one deeper).
    `window_start`: where the compile's wall time begins (the call's cache lookup, when Thunder's
    timers say so); `wall_offset`: time_ns() - perf_counter_ns(), to log wall-clock times."""

    items: list = field(default_factory=list)
    depth: int = 0
    dropped: int = 0
    window_start: int = field(default_factory=time.perf_counter_ns)
    wall_offset: int = field(default_factory=lambda: time.time_ns() - time.perf_counter_ns())

    def begin(self, name: str, detail: str | None = None) -> int:
        """Start a phase now; its index for `end` (-1 when dropped)."""
        self.depth += 1
        if len(self.items) >= MAX_PHASES:
            self.dropped += 1
            return -1
        self.items.append([name, time.perf_counter_ns(), 0, self.depth - 1, detail])
        return len(self.items) - 1

    def end(self, index: int, detail: str | None = None) -> None:
        self.depth -= 1
        if index >= 0:
            item = self.items[index]
            item[2] = time.perf_counter_ns()
            if detail is not None:
                item[4] = detail

    def add(self, name: str, start: int, end: int, detail: str | None = None) -> None:
        """A phase timed by someone else (Thunder's own timers), at the current depth."""
        if len(self.items) < MAX_PHASES:
            self.items.append([name, start, end, self.depth, detail])


# Compiles that happen outside thunder.jit (a trace transform called by hand) share this one.
_DETACHED = CompileState(id=0)
# Work whose symbols are thrown away (ThunderFX's splitter trying each FX node on Thunder)
# runs with capture off: this state, while `suspended` is set.
_SUSPENDED = CompileState(id=0, disabled=True)
suspended: ContextVar[bool] = ContextVar("provenance_suspended", default=False)


def get_compile_stats() -> Any:
    return T.compile_data_var.get()[1]  # (CompileData, CompileStats) while thunder.jit compiles


def current_compile() -> CompileState:
    # Called for every bound symbol Thunder creates: two contextvar reads and one lookup in the
    # CompileStats' `__dict__` (outside a compile the stats are None, whose missing `__dict__`
    # gives the empty default). The bind and copy hooks inline `compile_of`.
    state = compile_of(read_compile_data()[1])
    if state is not None:
        return state
    return _SUSPENDED if suspended.get() else _DETACHED


def compile_of(cs: Any) -> CompileState | None:
    """The compile of `cs` (a jitted function's CompileStats, None outside one) that concerns this
    thread: the one it is running, if it is of `cs` (two threads may compile one function at once,
    each its own compile), else the function's latest (a call of the function runs its code)."""
    state = active_compile.get()
    if state is not None and state.stats_id == id(cs):
        return state
    return getattr(cs, "__dict__", NO_DICT).get(COMPILE_ATTR)


read_compile_data = T.compile_data_var.get
NO_DICT: dict = {}


# The compile in progress in this thread/task: what its symbols are stamped under, and what an error
# raised where no compile data is set belongs to.
active_compile: ContextVar[CompileState | None] = ContextVar("provenance_compile", default=None)


def start_compile() -> CompileState | None:
    cs = get_compile_stats()
    if cs is None:
        return None
    running = capture.ACTIVE
    if running is None:  # disabled meanwhile (another thread)
        return None
    state = CompileState(id=next(running.compile_ids), capture=running, stats_id=id(cs))
    setattr(cs, COMPILE_ATTR, state)  # the function's latest compile
    active_compile.set(state)
    _DETACHED.disabled = False  # a failure outside a compile only skipped its own step
    return state


def end_compile(state: CompileState) -> None:
    """Forget what a compile held (its traces hold the model) once it ended, one way or another."""
    state.acquiring = None
    if active_compile.get() is state:
        active_compile.set(None)


def check_fault(hook: str) -> None:
    """Tests: raise in `hook` if the running capture's `fault_injection` names it."""
    running = capture.ACTIVE
    if running is not None and running.fault_injection == hook:
        raise InjectedFault(f"fault injected into provenance hook {hook!r}")


def warn_internal(hook: str, exc: BaseException, outcome: str, stacklevel: int = 2) -> None:
    """The one warning of an internal error of ours: the hook, the error, and what became of tracing."""
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    warnings.warn(f"thunder-provenance: internal error in hook {hook!r} ({detail}); {outcome}.", RuntimeWarning,
                  stacklevel=stacklevel + 1)


def fail(hook: str, exc: BaseException) -> None:
    """An internal error: stop capturing for this compile, warn once, let Thunder go on.

    Outside a compile (e.g. at thunder.jit() time) only that step is skipped, with one warning.
    """
    state = current_compile()
    if state.disabled:
        return
    if capture.ACTIVE is None or (state.capture is not None and state.capture is not capture.ACTIVE):
        state.disabled = True  # disable() ran meanwhile (another thread): its hooks are gone, no error of ours
        return
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    state.disabled = True  # outside a compile: warns once, re-armed at the next compile
    if state is _DETACHED:
        outcome = "that step was skipped; tracing goes on"
    else:
        outcome = "provenance tracing is disabled for this compile, which otherwise runs unchanged"
    warn_internal(hook, exc, outcome)
    if state.started and not state.ended:  # the log says what happened to the compile it started
        state.ended = True
        try:
            if SESSION.active:
                event: CaptureDisabled = {"type": "capture_disabled", "compile": state.id, "time_ns": time.time_ns(),
                                          "hook": hook, "error": detail}
                SESSION.emit(event)
        except Exception:  # the warning above said it all
            pass



@dataclass(eq=False, slots=True)
class Processing:
    """Set while a pass processes one bound symbol: what the symbols it creates descend from."""

    record: Provenance | None
    created: list | None = None  # the symbols created meanwhile, when the pass needs them


processing: ContextVar[Processing | None] = ContextVar("provenance_processing", default=None)


def set_record(bsym: Any, record: Provenance | None) -> None:
    if record is not None:
        setattr(bsym, ATTR, record)  # not via __dict__: that would materialize a dict per symbol


_with_span = CACHES.memo("state.with_span", 1 << 16)  # (record, span) -> record


def with_span(record: Provenance | None, span: Span) -> Provenance:
    """`record` inside a user scope: stamped with the span, its role unless it has one."""
    key = (record, span)
    found = _with_span.get(key)
    if found is None:
        if record is None:
            found = intern(Provenance(span=span, role=span.role, kind=Kind.SCOPE))
        elif record.span is span:
            found = record
        else:
            found = record.derive(span=span, role=record.role or span.role)
        _with_span.put(key, found)
    return found


_get_tracectx = T.tracectx_var.get
_get_span = innermost_span.get


def ambient_record(is_bookkeeping: bool, proc: Processing | None) -> Provenance | None:
    """The record a newly bound symbol gets from its context (None: left to the pass fix-up):
    `proc` is the pass's symbol being processed (`processing`), if any."""
    if proc is not None:
        record = proc.record
        if record is not None and (record.kind == Kind.BOOKKEEPING) != is_bookkeeping:
            # compute spawned by a return/unpack is attributed by data flow in the fix-up;
            # bookkeeping spawned by an op is named after the pass
            record = None
    elif is_bookkeeping:
        return None  # the source of the last traced op is stale for unpack/return/del
    else:
        trace = _get_tracectx(None)
        record = trace.__dict__.get(TRACE_SOURCE_ATTR) if trace is not None else None
    span = _get_span()
    if span is not None and (record is None or record.span is not span) and not is_bookkeeping:
        record = with_span(record, span)
    return record
