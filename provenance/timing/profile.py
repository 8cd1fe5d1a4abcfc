"""Per-op runtime profiles of compiled functions: the data, with no torch or thunder import.

A `CompileProfile` belongs to one compile (one Thunder cache entry) and holds, for each of its
execution traces ("forward", "backward"), the ops that were timed (`Op`: position in the trace,
symbol name, provenance record) and their times summed over the profiled calls. Live profiles
are filled by provenance/thunder/profiling.py; a log reader can rebuild the same objects from
profile records, so provenance.timing.rollup (behind provenance.cost()) rolls both up the same way.

Which calls count and what their times say (median, spread, one-offs) is provenance.timing.spread's.

Memory: a profile holds no tensor, trace, function or module (records are interned and shared);
each profile keeps sums of fixed size plus its last `MAX_CALLS` calls (the per-call times the
distributions are made of), and the process keeps its last `MAX_PROFILES` profiles. The jitted
function is referred to weakly.
"""

from __future__ import annotations

import operator
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from provenance.core.kept import Kept
from provenance.core.record import Provenance
from provenance.timing.spread import Excluded, measured_calls, preempted

__all__ = ["CompileProfile", "Op", "ProfiledCall", "TraceProfile", "call_listeners", "profiles", "register"]

FORWARD, BACKWARD = "forward", "backward"
MAX_PROFILES = 256  # compiles whose profiles the process keeps (the oldest go first)
MAX_CALLS = 64  # per compile and trace: the per-op times of the last calls (the distributions')


@dataclass(frozen=True, slots=True)
class Op:
    """One timed top-level symbol of an execution trace."""

    position: int  # index in the trace's bound_symbols (the final forward/backward trace)
    name: str  # the symbol's name: `linear`, `python_del`, `TorchCompile0`, ...
    record: Provenance | None
    line: int  # 0-based line of its first printed line in the trace's Python text (-1: not known)
    printed: int | None = None  # its index among the printed ops of the trace (a trace record's `ops`)


@dataclass(frozen=True, slots=True)
class ProfiledCall:
    """One timed run of one execution trace (what a profile log record will carry)."""

    compile_id: int
    call: int  # 1 = the first profiled call of this compile
    trace: str  # FORWARD | BACKWARD
    clock: str  # "cpu": wall time per op; "cuda": device time between CUDA events per op
    wall_ns: int  # the whole generated function, on the same clock
    op_ns: tuple[int, ...]  # aligned with TraceProfile.ops
    host_ns: tuple[int, ...] | None = None  # cuda: the CPU time of each op (launches), else None
    time_ns: int = field(default_factory=time.time_ns)  # when it ended (epoch)
    compiled: tuple[tuple[str, str, int], ...] = ()  # executor compiles during it: (fusion, executor, ns)
    # cuda, the window's first timed call: the allocator's bytes at each op boundary (len(ops) + 1),
    # and its peak during the call when that rose above every earlier peak (else None). Such a call
    # is no measured run: the readings take host time between launches (provenance.timing.spread)
    memory: tuple[int, ...] | None = None
    memory_peak: int | None = None

    @property
    def between_ns(self) -> int:
        """Time in the function outside every op (its call, decorators and return)."""
        return self.wall_ns - sum(self.op_ns)


@dataclass(eq=False)
class TraceProfile:
    """The timed ops of one execution trace: their times summed over every profiled call, and each
    of the last MAX_CALLS calls (`recent`)."""

    name: str  # FORWARD | BACKWARD
    ops: tuple[Op, ...]
    clock: str = "cpu"
    op_ns: list[int] = field(default_factory=list)  # per op, summed over calls
    host_ns: list[int] | None = None  # cuda: per op CPU time, summed
    wall_ns: int = 0
    calls: int = 0
    recent: deque = field(default_factory=lambda: deque(maxlen=MAX_CALLS))

    def __post_init__(self) -> None:
        if not self.op_ns:
            self.op_ns = [0] * len(self.ops)

    def add(self, call: ProfiledCall) -> None:
        if len(call.op_ns) != len(self.ops):
            raise ValueError(f"{len(call.op_ns)} op times for {len(self.ops)} ops of the {self.name} trace")
        # map() with operator: C loops, since this runs inside the profiled user call
        self.op_ns = list(map(operator.add, self.op_ns, call.op_ns))
        if call.host_ns is not None:
            self.host_ns = list(map(operator.add, self.host_ns or [0] * len(self.ops), call.host_ns))
        self.wall_ns += call.wall_ns
        self.calls += 1
        self.recent.append(call)

    @property
    def attributed_ns(self) -> int:
        return sum(self.op_ns)


@dataclass(eq=False)
class CompileProfile:
    """The profile of one compile: its forward and (if any) backward execution traces."""

    compile_id: int
    fn_name: str
    requested: int  # calls to profile (after the first)
    traces: dict[str, TraceProfile] = field(default_factory=dict)
    owner: Any = None  # weak reference to Thunder's CompileStats of the jitted function
    error: str | None = None  # why profiling stopped early, if it did
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def calls(self) -> int:
        """Profiled calls (a forward whose backward has not run yet counts)."""
        return max((t.calls for t in self.traces.values()), default=0)

    @property
    def wall_ns(self) -> int:
        return sum(t.wall_ns for t in self.traces.values())

    @property
    def attributed_ns(self) -> int:
        return sum(t.attributed_ns for t in self.traces.values())

    @property
    def coverage(self) -> float:
        """Attributed op time / profiled wall time (1.0 before any profiled call)."""
        return self.attributed_ns / self.wall_ns if self.wall_ns else 1.0

    def measured(self, keep_all: bool = False) -> tuple[list[int], list[Excluded]]:
        """The measured calls (their numbers), the excluded ones, then the measured calls' preempted op
        times (provenance.timing.spread's rules; none with `keep_all`)."""
        traces = {name: t.recent for name, t in self.traces.items()}
        calls, excluded = measured_calls(traces, keep_all)
        if keep_all:
            return calls, excluded
        names = {name: [op.name for op in t.ops] for name, t in self.traces.items()}
        return calls, excluded + preempted(traces, calls, names)

    def clean(self) -> int:
        """Measured calls with no preempted op time: what the profiling window counts."""
        calls, excluded = self.measured()
        return len(set(calls) - {e.call for e in excluded if e.partial})


    def add(self, call: ProfiledCall) -> None:
        with self._lock:
            self.traces[call.trace].add(call)
        for listener in list(call_listeners):
            try:
                listener(self, call)
            except Exception as exc:  # an observer never breaks the program
                call_listeners.remove(listener)
                warnings.warn(f"thunder-provenance: profile listener {listener!r} failed ({exc!r}) and was "
                              f"removed.", RuntimeWarning, stacklevel=2)


# Observers of profiled calls: `listener(profile, call)` after each profiled run of a trace.
call_listeners: list[Callable[[CompileProfile, ProfiledCall], None]] = []

_profiles: Kept[CompileProfile] = Kept(MAX_PROFILES)


def register(profile: CompileProfile, owner: Any = None) -> CompileProfile:
    """Keep `profile` (the process keeps its last MAX_PROFILES); `owner` is held weakly."""
    return _profiles.add(profile, owner)


def profiles(owner: Any = None) -> list[CompileProfile]:
    """The kept profiles, oldest first; with `owner` (a CompileStats), only its compiles'."""
    return _profiles.items(owner)


def clear() -> None:
    _profiles.clear()


def durations(stamps: Sequence[int]) -> tuple[int, ...]:
    """Clock readings at op boundaries [b0, b1, ..., bn] -> the n ops' times (b1 - b0, ...)."""
    return tuple(map(operator.sub, stamps[1:], stamps[:-1]))


MAX_COUNT = (1 << 63) - 1  # a count of calls the log can hold (its integers are 64-bit)


def parse_count(value: Any, source: str) -> int:
    """A number of calls to profile: an int from 0 to MAX_COUNT, or ASCII digits that say one;
    anything else is a clear error."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{source} must be a number of calls (an integer from 0 to {MAX_COUNT}), got {value!r}")
    text = str(value).strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 19 or int(text) > MAX_COUNT:
        raise ValueError(f"{source} must be a number of calls (an integer from 0 to {MAX_COUNT}), got {value!r}")
    return int(text)
