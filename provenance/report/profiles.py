"""Profile records of a log (`profile_ops`, `profile_call`: docs/log-schema.md) -> per compile, the
timed ops and their summed times; rebuilt as `provenance.profile.CompileProfile`s, so
`provenance.rollup` rolls a log up exactly as `provenance.cost()` rolled up the live profiles.

A compile's profile records come after its `compile_end` (the calls run after the compile), but
its pages are written when it ends. So before the pass over a log file, `scan` finds the profile
records (a regular expression over the file, read in chunks: the other lines are never parsed) and
sums their times per compile and trace; the pass then hands each compile its profile. Every
record is untrusted: one that does not fit (fields, types, op count, a call before its ops
table) is skipped and named, and never stops the report.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from provenance.profile import BACKWARD, FORWARD, CompileProfile, Op, TraceProfile
from provenance.record import Provenance
from provenance.report.coerce import hashable

__all__ = ["PROFILE_TYPES", "LoggedProfile", "LoggedTrace", "ProfileCollector", "Scan", "compile_profile", "load",
           "scan"]

PROFILE_TYPES = frozenset({"profile_ops", "profile_call"})
_FIND = re.compile(rb'"type"\s*:\s*"profile_')
_HINT = b'"profile_'  # in every line _FIND matches
_TRACES = (FORWARD, BACKWARD)
_CLOCKS = ("cpu", "cuda")


def _int(value: Any) -> bool:
    return type(value) is int


def _ints(value: Any, n: int) -> bool:
    """A list of `n` non-negative ints."""
    return isinstance(value, list) and len(value) == n and all(type(v) is int and v >= 0 for v in value)


@dataclass
class LoggedTrace:
    """One profiled execution trace of a compile, as its log says: the ops table and the times of
    its calls, summed (what a page needs; a log's calls are never all kept)."""

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

    def __post_init__(self) -> None:
        if not self.op_ns:
            self.op_ns = [0] * len(self.ops)


@dataclass
class LoggedProfile:
    """A compile's profile as its log says (picklable: it travels to report workers)."""

    compile: Any
    traces: dict[str, LoggedTrace] = field(default_factory=dict)

    @property
    def calls(self) -> int:
        return max((t.calls for t in self.traces.values()), default=0)

    @property
    def wall_ns(self) -> int:
        return sum(t.wall_ns for t in self.traces.values())

    def prov_ids(self) -> set[int]:
        return {op[2] for t in self.traces.values() for op in t.ops if op[2] is not None}


class ProfileCollector:
    """Profile records of one log file, in order -> LoggedProfile per compile id."""

    def __init__(self) -> None:
        self.profiles: dict[Any, LoggedProfile] = {}

    def add(self, data: dict) -> str | None:
        """Take one profile record; what is wrong with it (then it is skipped), or None."""
        kind = data.get("type")
        compile_id, trace = hashable(data.get("compile")), data.get("trace")
        if trace not in _TRACES:
            return f"{kind} with trace {str(trace)[:40]!r} (not forward or backward)"
        if kind == "profile_ops":
            return self._ops(compile_id, trace, data)
        return self._call(compile_id, trace, data)

    def _ops(self, compile_id: Any, trace: str, data: dict) -> str | None:
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
        profile = self.profiles.setdefault(compile_id, LoggedProfile(compile_id))
        if trace in profile.traces:
            return f"a second profile_ops for compile {compile_id!r} ({trace}); the first is kept"
        clock = data.get("clock")
        profile.traces[trace] = LoggedTrace(trace, str(data.get("list")), index,
                                            clock if clock in _CLOCKS else "cpu", requested, table)
        return None

    def _call(self, compile_id: Any, trace: str, data: dict) -> str | None:
        profile = self.profiles.get(compile_id)
        table = profile.traces.get(trace) if profile is not None else None
        if table is None:
            return f"profile_call of compile {compile_id!r} ({trace}) before its profile_ops"
        n = len(table.ops)
        op_ns, host_ns, wall_ns = data.get("op_ns"), data.get("host_ns"), data.get("wall_ns")
        if not _ints(op_ns, n) or not (host_ns is None or _ints(host_ns, n)) or not _int(wall_ns) or wall_ns < 0:
            return f"profile_call of compile {compile_id!r} ({trace}): times missing, negative or not one per op ({n})"
        table.op_ns = [a + b for a, b in zip(table.op_ns, op_ns)]
        if host_ns is not None:
            table.host_ns = [a + b for a, b in zip(table.host_ns or [0] * n, host_ns)]
        table.wall_ns += wall_ns
        table.calls += 1
        return None


@dataclass
class Scan:
    """The profile records of a log file: profiles by compile id, and the records skipped
    (line number, reason)."""

    profiles: dict[Any, LoggedProfile]
    problems: list[tuple[int, str]]  # the first MAX_PROBLEMS
    records: int  # profile records found (good or not)
    more_problems: int = 0  # records skipped beyond those listed


MAX_PROBLEMS = 200  # a log of bad profile records keeps their count, not each reason


CHUNK = 1 << 20  # bytes read at a time by scan: its memory, whatever the log's size


def scan(path: str | os.PathLike[str]) -> Scan:
    """Find and read the profile records of a log file, without parsing its other lines. Read in
    chunks cut at a newline (a longer line is held whole, as the reader holds it), so memory
    does not follow the file."""
    collector = ProfileCollector()
    problems: list[tuple[int, str]] = []  # line number, reason
    records = more = 0
    line_base = 1  # the number of the first line of the chunk
    with open(path, "rb") as f:
        pending: list[bytes] = []  # the start of a line that runs past the chunks read so far
        while block := f.read(CHUNK):
            cut = block.rfind(b"\n") + 1
            if not cut:
                pending.append(block)
                continue
            chunk = b"".join([*pending, block[:cut]]) if pending else block[:cut]
            pending = [block[cut:]] if cut < len(block) else []
            counted = 0  # newlines before `counted` are counted
            line = line_base
            at = chunk.find(_HINT)
            while at >= 0:  # bytes.find runs at memory speed; the regex only checks the lines it finds
                start = chunk.rfind(b"\n", 0, at) + 1
                end = chunk.find(b"\n", at)  # found: the chunk ends with one
                at = chunk.find(_HINT, end)
                if not _FIND.search(chunk, start, end):
                    continue
                try:
                    data = orjson.loads(chunk[start:end])
                except orjson.JSONDecodeError:
                    continue  # the pass reports bad lines
                if not isinstance(data, dict) or data.get("type") not in PROFILE_TYPES:
                    continue
                records += 1
                reason = collector.add(data)
                if reason is not None:
                    if len(problems) < MAX_PROBLEMS:
                        line += chunk.count(b"\n", counted, start)
                        counted = start
                        problems.append((line, reason))
                    else:
                        more += 1
            line_base += chunk.count(b"\n")
    # What is pending is a truncated last line: the pass reports it.
    return Scan(collector.profiles, problems, records, more)


def compile_profile(logged: LoggedProfile, record_of: Callable[[int | None], Provenance | None],
                    fn_name: str = "?") -> CompileProfile:
    """The CompileProfile a log describes, its records rebuilt by `record_of(prov id)`: what
    provenance.rollup takes. Sums only (`recent` is empty); an op's `line` is not logged (-1)."""
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
        profile.traces[name] = timed
    return profile


def load(path: str | os.PathLike[str]) -> list[CompileProfile]:
    """The profiles of a THUNDER_TRACE log file or directory, rebuilt (every compile with a
    profile, file by file): `provenance.rollup.rollup(load(dir), by="line")` is the log's
    `provenance.cost()`. Records that do not fit are skipped."""
    from provenance.report.reader import LogFile, log_files

    out: list[CompileProfile] = []
    for path_ in log_files(path)[0]:
        found = scan(path_)
        if not found.profiles:
            continue
        log_file = LogFile(str(path_))
        names: dict[Any, str] = {}
        for record in log_file:  # the provenance records (kept by the reader) and function names
            if record.type == "compile_start":
                names[hashable(record.get("compile"))] = str(record.get("fn") or "?")
        out.extend(compile_profile(p, _safe(log_file.provenance), names.get(key, "?"))
                   for key, p in found.profiles.items())
    return out


def _safe(record_of: Callable[[int], Provenance | None]) -> Callable[[int | None], Provenance | None]:
    def safe(prov_id: int | None) -> Provenance | None:
        try:
            return record_of(prov_id)
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError):
            return None

    return safe
