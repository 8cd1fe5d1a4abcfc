"""One compile's pages -> what the diff compares of it (a CompileDigest): a few numbers and
tables per compile, made from the models the report builds for its pages, with the report's own
roll-ups (provenance.timing.rollup for time, provenance.allocation.static_memory for memory, provenance.core.attribution
for the line and module an op is charged to). Nothing here re-derives a figure the report shows.

Ops are keyed by their provenance (the user line and module they are charged to), never by a
trace's variable names: a renamed temporary is no change. Each digest is bounded (MAX_LINES user
lines, MAX_FUSIONS fusions, MAX_ROWS time rows per table): a log's size never grows a digest past
that, and what was left out is counted.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from provenance.allocation.static_memory import rollup as memory_rollup
from provenance.allocation.static_memory import summary as memory_summary
from provenance.core import attribution
from provenance.core.record import Kind
from provenance.report.model import PROV, SYM, CompilePage, SourcePage
from provenance.timing.rollup import rollup
from provenance.timing.spread import Spread, spread

__all__ = ["DIMENSIONS", "MAX_LINES", "CompileDigest", "FusionDigest", "LineOps", "digest", "symbol_of"]

MAX_LINES = 4000  # user lines per compile (final traces together)
MAX_FUSIONS = 2000
MAX_ROWS = 2000  # time rows per dimension
DIMENSIONS = ("line", "module", "role", "op")  # the time tables compared, provenance.timing.rollup's `by`
_SKIP = frozenset({Kind.BOOKKEEPING})  # del, return, unpack: no op of the user's


@dataclass(slots=True)
class LineOps:
    """What one user line became in a compile's final traces."""

    key: str  # `file:line` (provenance.core.attribution.line_key)
    text: str
    module: str | None
    ops: Counter = field(default_factory=Counter)  # `trace:symbol` -> count, ops outside fusions
    fused: Counter = field(default_factory=Counter)  # `trace:symbol` -> count, inside fusions
    fusions: set = field(default_factory=set)  # `trace:fusion` it has ops in (TorchCompile0: shown, not matched)


@dataclass(slots=True)
class FusionDigest:
    """A fusion of a final trace, by what it fused: its members' lines (its name, TorchCompile0,
    is only shown)."""

    trace: str
    sym: str
    lines: tuple[str, ...]  # the members' line keys, sorted
    ops: int  # members

    @property
    def signature(self) -> tuple[str, tuple[str, ...]]:
        return self.trace, self.lines


@dataclass(slots=True)
class TimeFigure:
    time: Spread
    label: str
    kind: str  # provenance.timing.rollup.CostRow.kind


@dataclass
class CompileDigest:
    key: str  # the report's page name base
    log: int
    rank: int | None
    rank_label: str
    fn: str
    call_site: str | None
    index: int
    status: str
    error: str | None
    recompile_reason: str | None
    seconds: float | None
    phases: dict[str, float]  # top-level phase group -> ms
    page: str  # its compile page, in its report
    source: str | None  # its source view
    kinds: Counter  # final traces' ops by provenance kind
    lines: dict[str, LineOps]
    fusions: list[FusionDigest]
    hrefs: dict[str, str]  # line key -> its line in the source view
    time: dict[str, dict[str, TimeFigure]] | None = None  # by dimension, key -> figure (profiled compiles)
    wall: Spread | None = None  # per measured call, forward + backward
    memory: dict[str, tuple[int, int]] | None = None  # line key -> (saved for backward, live at the peak)
    memory_totals: dict[str, int] | None = None
    dropped: int = 0  # lines or fusions past the bounds
    own_keys: dict[str, str] = field(default_factory=dict)  # aligned (match.align_lines): compared key -> its own


def _fusion_lines(record: Any) -> tuple[str, ...]:
    return tuple(sorted({attribution.line_key(m) for m in record.members}))


def digest(page: CompilePage, source: SourcePage | None, provs: Any) -> CompileDigest:
    """The digest of one compile, from its pages' models and its log's provenance table."""
    s = page.summary
    lines: dict[str, LineOps] = {}
    fusions: list[FusionDigest] = []
    kinds: Counter = Counter()
    dropped = 0
    files = {f.path: f.index for f in source.files} if source is not None else {}
    for view in (v for pl in page.lists for v in pl.passes if v.final):
        fused_in: dict[int, Any] = {}  # a fusion's index in the trace -> its record
        for position, op in enumerate(view.ops):
            record = provs.record(op[PROV])
            kinds[record.kind if record is not None else "(none)"] += 1
            if record is not None and record.kind == Kind.FUSION:
                fused_in[position] = record
                if len(fusions) < MAX_FUSIONS:
                    fusions.append(FusionDigest(view.list, op[SYM], _fusion_lines(record), len(record.members)))
                else:
                    dropped += 1
                continue
            if record is None or record.kind in _SKIP:
                continue
            entry = _line(lines, record)
            if entry is None:
                dropped += 1
            else:
                entry.ops[f"{view.list}:{op[SYM]}"] += 1
        for fusion_index, text, prov in view.fused:  # what each fusion fused, charged to the members' lines
            record = provs.record(prov)
            if record is None or fusion_index not in fused_in:
                continue
            entry = _line(lines, record)
            if entry is not None:
                entry.fused[f"{view.list}:{symbol_of(text)}"] += 1
                entry.fusions.add(f"{view.list}:{view.ops[fusion_index][SYM]}")
    hrefs = {}
    if s.pages.source is not None:
        for key in lines:
            path, _, number = key.rpartition(":")
            if path in files:
                hrefs[key] = f"{s.pages.source}#L{files[path]}-{number}"
    out = CompileDigest(
        key=s.key, log=s.log, rank=s.rank, rank_label=s.rank_label, fn=s.fn, call_site=s.call_site,
        index=s.index, status=s.status, error=f"{s.error.type}: {s.error.message[:200]}" if s.error else None,
        recompile_reason=s.recompile_reason, seconds=s.seconds, phases=_phases(s.phases),
        page=s.pages.compile, source=s.pages.source, kinds=kinds, lines=lines, fusions=fusions, hrefs=hrefs,
        dropped=dropped)
    if page.time is not None and page.time.profile is not None:
        out.time, out.wall = _time(page.time.profile, page.time.rows)
    if page.static_memory is not None:
        out.memory = {r.key: (r.saved_bytes, r.peak_bytes)
                      for r in memory_rollup([page.static_memory], "line")[:MAX_ROWS]}
        out.memory_totals = memory_summary([page.static_memory])
    return out


def symbol_of(text: str) -> str:
    """A fused op's symbol from its printed line, as the trace's own ops name theirs:
    `t2 = ltorch.mul(x, 2.0)  # ...` -> `mul`."""
    call = text.split("(", 1)[0]
    return call.rsplit("=", 1)[-1].strip().rsplit(".", 1)[-1] or "?"


def _line(lines: dict[str, LineOps], record: Any) -> LineOps | None:
    key = attribution.line_key(record)
    entry = lines.get(key)
    if entry is None:
        if len(lines) >= MAX_LINES:
            return None
        frame = attribution.line_frame(record)
        entry = lines[key] = LineOps(key, (frame.text or "").strip() if frame is not None else "",
                                     attribution.module_of(record))
    return entry


def _phases(phases: list) -> dict[str, float]:
    """Top-level phases' time by group (ms): the compile's pipeline, as its page's bar shows it."""
    out: Counter = Counter()
    for phase in phases:
        if phase.depth == 0:
            out[phase.group] += (phase.end_ns - phase.start_ns) / 1e6
    return dict(out)


def _time(profile: Any, made: dict[str, list]) -> tuple[dict[str, dict[str, TimeFigure]], Spread]:
    """The compile's time rows by line, module, role and op (provenance.timing.rollup: those the report
    made for its Time section, `made`, are not made again), and its wall time per measured call."""
    tables = {}
    for by in DIMENSIONS:
        rows = (made[by] if by in made else rollup([profile], by))[:MAX_ROWS]
        tables[by] = {r.key: TimeFigure(r.time, r.label or _short(r.key), r.kind) for r in rows}
    calls, _ = profile.measured()
    index = {c: i for i, c in enumerate(calls)}
    walls = [0] * len(calls)
    for trace in profile.traces.values():
        for c in trace.recent:
            if c.call in index:
                walls[index[c.call]] += c.wall_ns
    return tables, spread(list(zip(calls, walls)), keep=True)


def _short(key: str) -> str:
    path, _, line = key.rpartition(":")
    return f"{os.path.basename(path)}:{line}" if path and line.isdigit() else key
