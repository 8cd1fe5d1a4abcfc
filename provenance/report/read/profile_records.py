"""Profile records of a log (`profile_ops`, `profile_call`: docs/log-schema.md) -> per compile, the
timed ops and their summed times; rebuilt as `provenance.timing.profile.CompileProfile`s, so
`provenance.timing.rollup` rolls a log up exactly as `provenance.cost()` rolled up the live profiles.

A compile's profile records come after its `compile_end` (the calls run after the compile), but
its pages are written when it ends. So they are read ahead of the pass over a log file
(read_ahead.py; their handlers hand each record to a `ProfileCollector`), which sums their times
per compile and trace; the pass then hands each compile its profile. Every
record is untrusted: one that does not fit (fields, types, op count, a call before its ops
table) is skipped and named, and never stops the report.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from provenance.core.record import Provenance
from provenance.report.numbers import as_count, as_int, clamp
from provenance.report.read.coerce import UNUSABLE, hashable
from provenance.timing.profile import BACKWARD, FORWARD, MAX_CALLS, CompileProfile, Op, ProfiledCall, TraceProfile
from provenance.timing.spread import measured_calls

__all__ = ["LoggedProfile", "LoggedTrace", "ProfileCollector", "compile_profile", "safe_lookup"]

_TRACES = (FORWARD, BACKWARD)
_CLOCKS = ("cpu", "cuda")


def _int(value: Any) -> bool:
    """An integer of the log's, an int64 (provenance/report/numbers.py)."""
    return as_int(value) is not None


def _ints(value: Any, n: int) -> bool:
    """A list of `n` counts (non-negative int64s)."""
    return isinstance(value, list) and len(value) == n and all(as_count(v) is not None for v in value)


@dataclass(repr=False)
class LoggedTrace:
    """One profiled execution trace of a compile, as its log says: the ops table, the times of its
    calls summed, and its last MAX_CALLS calls (the distributions'; a log's calls are never all kept)."""

    trace: str  # forward | backward
    list: str  # the trace list of the logged trace these ops are in
    index: int | None  # that trace's index in the list (None: not logged)
    clock: str
    requested: int
    ops: list[tuple[int, str, int | None, int | None]]  # position, symbol, prov id, index in the trace's ops
    op_ns: list[int] = field(default_factory=list)
    host_ns: list[int] | None = None
    wall_ns: int = 0
    calls: int = 0
    recent: deque = field(default_factory=lambda: deque(maxlen=MAX_CALLS))  # the last calls, as ProfiledCall

    def __post_init__(self) -> None:
        if not self.op_ns:
            self.op_ns = [0] * len(self.ops)


@dataclass(repr=False)
class LoggedProfile:
    """A compile's profile as its log says (every report process reads it ahead for itself)."""

    compile: Any
    traces: dict[str, LoggedTrace] = field(default_factory=dict)
    first_at: int = 0  # the offset of its first record in the log

    @property
    def calls(self) -> int:
        return max((t.calls for t in self.traces.values()), default=0)

    @property
    def wall_ns(self) -> int:
        return sum(t.wall_ns for t in self.traces.values())

    @property
    def has_memory(self) -> bool:
        """Whether a kept call read the CUDA allocator (provenance.allocation.measured_memory)."""
        return any(c.memory is not None for t in self.traces.values() for c in t.recent)

    def measured(self) -> set[int]:
        """The measured calls' numbers (provenance.timing.spread)."""
        return set(measured_calls({name: t.recent for name, t in self.traces.items()})[0])

    def prov_ids(self) -> set[int]:
        return {op[2] for t in self.traces.values() for op in t.ops if op[2] is not None}


class ProfileCollector:
    """Profile records of one log file, in order -> LoggedProfile per compile id."""

    def __init__(self) -> None:
        self.profiles: dict[Any, LoggedProfile] = {}
        self._offset = 0  # of the record taken next (read_ahead.scan's `where`)

    def at(self, offset: int) -> None:
        self._offset = offset

    @staticmethod
    def _trace(data: dict) -> tuple[Any, str | None, str | None]:
        compile_id, trace = hashable(data.get("compile")), data.get("trace")
        if trace not in _TRACES:
            return compile_id, None, f"{data.get('type')} with trace {str(trace)[:40]!r} (not forward or backward)"
        return compile_id, trace, None

    def ops(self, data: dict) -> str | None:
        """Take a profile_ops record; what is wrong with it (then it is skipped), or None."""
        compile_id, trace, wrong = self._trace(data)
        if wrong is not None:
            return wrong
        ops = data.get("ops")
        index, requested = data.get("index"), data.get("requested")
        if not isinstance(ops, list) or not (index is None or _int(index)) or not _int(requested):
            return "profile_ops without a valid ops list, index or requested count"
        table = []
        for entry in ops:
            if not (isinstance(entry, list) and len(entry) == 4 and _int(entry[0]) and isinstance(entry[1], str)
                    and (entry[2] is None or _int(entry[2])) and (entry[3] is None or _int(entry[3]))):
                return f"profile_ops of compile {compile_id!r}: a malformed op entry {str(entry)[:60]}"
            table.append((entry[0], entry[1], entry[2], entry[3]))
        profile = self.profiles.setdefault(compile_id, LoggedProfile(compile_id, first_at=self._offset))
        if trace in profile.traces:
            return f"a second profile_ops for compile {compile_id!r} ({trace}); the first is kept"
        clock = data.get("clock")
        profile.traces[trace] = LoggedTrace(trace, str(data.get("list")), index,
                                            clock if clock in _CLOCKS else "cpu", requested, table)
        return None

    def call(self, data: dict) -> str | None:
        """Take a profile_call record (after its profile_ops); what is wrong with it, or None."""
        compile_id, trace, wrong = self._trace(data)
        if wrong is not None:
            return wrong
        profile = self.profiles.get(compile_id)
        table = profile.traces.get(trace) if profile is not None else None
        if table is None:
            return f"profile_call of compile {compile_id!r} ({trace}) before its profile_ops"
        n = len(table.ops)
        op_ns, host_ns, wall_ns = data.get("op_ns"), data.get("host_ns"), data.get("wall_ns")
        if not _ints(op_ns, n) or not (host_ns is None or _ints(host_ns, n)) or as_count(wall_ns) is None:
            return f"profile_call of compile {compile_id!r} ({trace}): times missing, negative or not one per op ({n})"
        number, compiled = data.get("call"), data.get("compiled", [])
        if not _int(number) or number < 0:
            return f"profile_call of compile {compile_id!r} ({trace}) without a call number"
        if not (isinstance(compiled, list) and all(
                isinstance(c, list) and len(c) == 3 and isinstance(c[0], str) and isinstance(c[1], str)
                and as_count(c[2]) is not None for c in compiled)):
            return (f"profile_call of compile {compile_id!r} ({trace}): `compiled` is not a list of "
                    f"[fusion, executor, ns]")
        memory, peak = data.get("memory"), data.get("memory_peak")
        if not (memory is None or _ints(memory, n + 1)) or not (peak is None or as_count(peak) is not None):
            return (f"profile_call of compile {compile_id!r} ({trace}): `memory` is not one byte count per op "
                    f"boundary ({n + 1}), or `memory_peak` not a count")
        if any(c.call == number for c in table.recent):
            return f"a second profile_call for call {number} of compile {compile_id!r} ({trace}); the first is kept"
        table.recent.append(ProfiledCall(compile_id if _int(compile_id) else -1, number, trace, table.clock, wall_ns,
                                         tuple(op_ns), None if host_ns is None else tuple(host_ns),
                                         data.get("time_ns") if _int(data.get("time_ns")) else 0,
                                         tuple((c[0][:200], c[1][:200], c[2]) for c in compiled),
                                         None if memory is None else tuple(memory), None if memory is None else peak))
        table.op_ns = [clamp(a + b) for a, b in zip(table.op_ns, op_ns)]  # sums saturate (provenance/report/numbers.py)
        if host_ns is not None:
            table.host_ns = [clamp(a + b) for a, b in zip(table.host_ns or [0] * n, host_ns)]
        table.wall_ns = clamp(table.wall_ns + wall_ns)
        table.calls += 1
        return None


def compile_profile(logged: LoggedProfile, record_of: Callable[[int | None], Provenance | None],
                    fn_name: str = "?") -> CompileProfile:
    """The CompileProfile a log describes, its records rebuilt by `record_of(prov id)`: what
    provenance.timing.rollup takes (with the last MAX_CALLS calls); an op's `line` is not logged (-1)."""
    compile_id = logged.compile
    profile = CompileProfile(compile_id if _int(compile_id) else -1, fn_name,
                             max((t.requested for t in logged.traces.values()), default=0))
    for name in _TRACES:
        trace = logged.traces.get(name)
        if trace is None:
            continue
        ops = tuple(Op(position, symbol, record_of(prov), -1, printed) for position, symbol, prov, printed in trace.ops)
        timed = TraceProfile(name, ops, clock=trace.clock, op_ns=list(trace.op_ns),
                             host_ns=list(trace.host_ns) if trace.host_ns is not None else None,
                             wall_ns=trace.wall_ns, calls=trace.calls)
        timed.recent.extend(trace.recent)
        profile.traces[name] = timed
    return profile


def safe_lookup(record_of: Callable[[int], Provenance | None]) -> Callable[[int | None], Provenance | None]:
    def safe(prov_id: int | None) -> Provenance | None:
        try:
            return record_of(prov_id)
        except UNUSABLE:
            return None

    return safe
