"""Where the time went, in the report: a compile's Time section (top lines, modules, roles, kinds,
an icicle chart of the module tree), each op's time on the final traces, each line's in the
source view's gutter; and for the run (time.html) the lines and roles across compiles and ranks.

Everything is rolled up by `provenance.timing.rollup` on the compile's profile rebuilt from the log
(read/profile_records.py), so the figures are the ones `provenance.cost()` gave in the process. Times are
per measured call (provenance.timing.spread: medians, with their range; one-off calls left out and
named). Colours ("heat")
say which share of the profiled time an op or a line took: `HEAT` are the thresholds.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from provenance.core.record import Provenance
from provenance.report.analyze.handlers import READ_AHEAD, read_ahead
from provenance.report.model import (
    HEAT,
    PROV,
    STRAGGLER,
    SYM,
    CompileTime,
    IcicleBox,
    LineTime,
    OpTime,
    RankLine,
    RankTable,
    RunTime,
    TimeRow,
    TimeSummary,
    TraceView,
)
from provenance.report.numbers import int_of_text
from provenance.report.read.coerce import hashable
from provenance.report.read.log_file import LogFile, log_files
from provenance.report.read.profile_records import (
    LoggedProfile,
    LoggedTrace,
    compile_profile,
    safe_lookup,
)
from provenance.timing.profile import CompileProfile
from provenance.timing.rollup import BETWEEN, NO_MODULE, ROOT, CostRow, line_texts, merge, rollups, summary
from provenance.timing.spread import spread
from provenance.timing.units import ms, ms_short

__all__ = ["HREFS_KEPT", "compile_time", "heat", "icicle", "load_profiles", "op_times", "run_time"]

TOP_LINES, TOP_MODULES, RUN_LINES, RANK_LINES = 15, 12, 25, 30
ICICLE_MIN_WIDTH = 0.25  # percent of the profiled time: narrower modules are not drawn
ICICLE_MAX_DEPTH = 12
HREFS_KEPT = 40  # per compile: source view links of its top lines, for the run's page


def heat(share: float) -> int:
    """0 (under 0.1%) to 5 (10% or more of the profiled time)."""
    return next((5 - i for i, limit in enumerate(HEAT) if share >= limit), 0)


def _time_row(row: CostRow, texts: dict[str, str], href: str | None = None) -> TimeRow:
    return TimeRow(key=row.key, label=row.label, text=texts.get(row.key, ""), kind=row.kind,
                   members=[_short(m) for m in row.members], ms=ms(row.median_ns),
                   forward_ms=ms(row.forward_ns), backward_ms=ms(row.backward_ns),
                   recompute_ms=ms(row.recompute_ns), shared_ms=ms(row.shared_ns),
                   total_ms=row.sum_ns / 1e6, share=row.share, heat=heat(row.share), calls=row.calls, href=href,
                   low_ms=ms(row.time.low_ns), high_ms=ms(row.time.high_ns), spread=row.time.describe())


def _shown(rows: list[CostRow]) -> list[CostRow]:
    """The rows a table lists: a row whose time is all in fusions it shares is listed with them."""
    return [r for r in rows if r.kind != "in_fusion"]


def in_fusion(row: CostRow, rows: dict[str, CostRow], what: str = "line") -> str:
    """`in TorchCompile1 (with 14 other lines)`: where an in_fusion row's time is."""
    names = []
    for key in row.fusions[:3]:
        fusion = rows.get(key)
        others = len(fusion.members) - 1 if fusion is not None else 0
        names.append(f"{key.split(' ', 1)[0]} (with {others} other {what}{'s' if others != 1 else ''})")
    more = f" and {len(row.fusions) - 3} more" if len(row.fusions) > 3 else ""
    return f"in {', '.join(names)}{more}" if names else "in fusions"


def _short(key: str) -> str:
    if key.startswith("(") or ":" not in key:
        return key
    path, _, line = key.rpartition(":")
    return f"{path.rsplit('/', 1)[-1]}:{line}"


def compile_time(logged: LoggedProfile, record_of: Callable[[int | None], Provenance | None], fn: str,
                 ) -> tuple[CompileTime, TimeSummary, dict[tuple[str, int], LineTime]]:
    """A compile's Time section, what the run keeps of it, and each user line's time
    ((path, line) -> LineTime) for the source view."""
    profile = compile_profile(logged, record_of, fn)
    totals = summary([profile])
    wall, calls = totals["wall_ns"], totals["calls"]
    texts = line_texts([profile])
    grouped = rollups([profile], ("line", "module_line", "module", "role", "kind"))  # each op's spread once
    by_line, by_module_line, by_module = grouped["line"], grouped["module_line"], grouped["module"]
    by_role, by_kind = grouped["role"], grouped["kind"]
    types = _module_types(profile)
    modules = [r for r in _shown(by_module) if r.key != ROOT][:TOP_MODULES]
    clock = "/".join(sorted({t.clock for t in profile.traces.values()})) or "cpu"
    boxes, depth = icicle(by_module, wall, types, fn.rsplit(".", 1)[-1])
    excluded = [e.describe() for _, _, e in totals["excluded"] if not e.partial]
    preempted = [e.describe() for _, _, e in totals["excluded"] if e.partial]
    lines_shown = _shown(by_line)
    time = CompileTime(
        calls=calls, clock=clock, wall_ms=ms(wall), traces=_trace_walls(profile),
        coverage=totals["coverage"], between_ms=ms(totals["between_ns"]),
        lines=[_time_row(r, texts) for r in lines_shown[:TOP_LINES]],
        more_lines=max(0, len(lines_shown) - TOP_LINES),
        module_lines=([_time_row(r, texts) for r in _shown(by_module_line)[:TOP_LINES]]
                      if {r.key for r in by_module_line} != {r.key for r in by_line} else []),
        modules=[_time_row(r, types) for r in modules], roles=[_time_row(r, {}) for r in _shown(by_role)],
        kinds=[_time_row(r, {}) for r in by_kind], icicle=boxes, icicle_depth=depth,
        profiled=totals["profiled"], excluded=excluded, preempted=preempted, profile=profile,
        rows={"line": by_line, "module": by_module, "role": by_role})
    lines: dict[tuple[str, int], LineTime] = {}
    keyed = {r.key: r for r in by_line}
    for row in by_line:
        path, _, number = row.key.rpartition(":")
        if row.kind in ("key", "in_fusion") and path and (line := int_of_text(number)) is not None:
            fusion = in_fusion(row, keyed) if row.kind == "in_fusion" else ""
            share = row.shared_ns / wall if fusion and wall else row.share
            lines[(path, line)] = LineTime(
                ms(row.median_ns if not fusion else row.shared_ns), ms(row.forward_ns), ms(row.backward_ns),
                ms(row.recompute_ns), ms(row.shared_ns), share, heat(share),
                "" if fusion else row.time.describe(), fusion)
    top = {r.key for r in by_line[:RUN_LINES * 4]}  # the run's page names at most so many lines
    kept = TimeSummary(calls, clock, wall, totals["attributed_ns"], by_line, by_role,
                       {k: v for k, v in texts.items() if k in top}, profiled=totals["profiled"], excluded=excluded,
                       preempted=preempted)
    return time, kept, lines


def _trace_walls(profile: CompileProfile) -> list[tuple[str, float, int]]:
    """(trace, median wall ms per measured call, measured calls) of each profiled trace."""
    import statistics  # where a median is taken (provenance.timing.spread says why)

    measured = set(profile.measured()[0])
    out = []
    for name, trace in profile.traces.items():
        walls = [c.wall_ns for c in trace.recent if c.call in measured]
        if walls:
            out.append((name, ms(statistics.median(walls)), len(walls)))
    return out


def _module_types(profile: CompileProfile) -> dict[str, str]:
    """module path -> class name, from the records of the profiled ops."""
    types: dict[str, str] = {}
    seen: set[int] = set()

    def visit(record: Provenance | None) -> None:
        while record is not None and id(record) not in seen:
            seen.add(id(record))
            if record.module is not None and record.module_type:
                types.setdefault(record.module, record.module_type)
            for member in record.members:
                visit(member)
            record = record.derived_from

    for trace in profile.traces.values():
        for op in trace.ops:
            visit(op.record)
    if "" in types:
        types[ROOT] = types[""]
    return types


def icicle(rows: list[CostRow], wall_ns: int, types: dict[str, str], root_label: str,
           ) -> tuple[list[IcicleBox], int]:
    """The module tree as an icicle chart: the first row splits the profiled time into the model
    (`<root>`), ops outside any module and time between ops; each row below splits a module into
    its submodules (a module's width is its time, its submodules' included)."""
    if not wall_ns:
        return [], 0
    by_key = {r.key: r for r in rows}
    children: dict[str, list[CostRow]] = {}
    for row in rows:
        if row.kind != "key" or row.key in (ROOT, NO_MODULE):
            continue
        parent = row.key.rpartition(".")[0] or ROOT
        children.setdefault(parent, []).append(row)
    boxes: list[IcicleBox] = []
    depth_used = 0

    def place(row: CostRow, depth: int, left: float, label: str) -> None:
        nonlocal depth_used
        width = 100.0 * row.median_ns / wall_ns
        if width < ICICLE_MIN_WIDTH or depth >= ICICLE_MAX_DEPTH:
            return
        depth_used = max(depth_used, depth + 1)
        kind = f" ({types[row.key]})" if row.key in types and row.key != ROOT else ""
        shared = f", +{ms(row.shared_ns):.3f} ms in fusions it shares" if row.shared_ns else ""
        name = row.key if row.key != ROOT else f"{root_label} (the jitted module)"
        boxes.append(IcicleBox(depth, left, width, label, f"{name}{kind}, {ms(row.median_ns):.3f} ms "
                               f"per call (median), {row.share:.1%}{shared}", heat(row.share)))
        for child in sorted(children.get(row.key, ()), key=lambda r: -r.median_ns):
            place(child, depth + 1, left, child.key.rpartition(".")[2])
            left += 100.0 * child.median_ns / wall_ns

    left = 0.0
    for key, label in ((ROOT, root_label), (NO_MODULE, NO_MODULE), (BETWEEN, BETWEEN)):
        row = by_key.get(key)
        if row is not None and row.median_ns > 0:
            place(row, 0, left, label)
            left += 100.0 * row.median_ns / wall_ns
    return boxes, depth_used


def op_times(view: TraceView, trace: LoggedTrace, measured: set[int] | None = None) -> dict[int, OpTime]:
    """Each timed op of a logged final trace (by its index in `view.ops`) -> its median time per
    measured call (`measured`: the call numbers; None: every call kept) and its spread. An
    ops-table entry whose index does not name an op of the same symbol and record is skipped."""
    out: dict[int, OpTime] = {}
    calls = [c for c in trace.recent if measured is None or c.call in measured]
    if not calls:
        return out
    import statistics

    wall = statistics.median(c.wall_ns for c in calls)
    if not wall:
        return out
    ops = view.ops
    for i, (_position, symbol, prov, index) in enumerate(trace.ops):
        if index is None or not 0 <= index < len(ops) or ops[index][SYM] != symbol or ops[index][PROV] != prov:
            continue
        times = spread([(c.call, c.op_ns[i]) for c in calls])
        out[index] = OpTime(ms_short(times.median_ns), heat(times.median_ns / wall), times.describe())
    return out


# -- the run ----------------------------------------------------------------------------------------
def run_time(labels: list[str], compiles: Iterable[tuple[int, TimeSummary]]) -> RunTime | None:
    """The run's time page from each profiled compile's summary, with its log's index (the
    position of its label in `labels`)."""
    compiles = list(compiles)
    if not compiles:
        return None
    wall = sum(t.wall_ns for _, t in compiles)  # per measured call of each compile, added up
    texts: dict[str, str] = {}
    hrefs: dict[str, str] = {}
    for _, t in compiles:
        for key, text in t.texts.items():
            texts.setdefault(key, text)
        for key, href in t.hrefs.items():
            hrefs.setdefault(key, href)
    lines = merge((t.lines, t.wall_ns) for _, t in compiles)
    roles = merge((t.roles, t.wall_ns) for _, t in compiles)
    per_log: dict[int, list[TimeSummary]] = {}
    for log, t in compiles:
        per_log.setdefault(log, []).append(t)
    ranks = _ranks(labels, per_log, texts) if len(per_log) > 1 else None
    lines = _shown(lines)
    return RunTime(compiles=len(compiles), calls=sum(t.calls for _, t in compiles), wall_ms=wall / 1e6,
                   coverage=sum(t.attributed_ns for _, t in compiles) / wall if wall else 1.0,
                   lines=[_time_row(r, texts, hrefs.get(r.key)) for r in lines[:RUN_LINES]],
                   roles=[_time_row(r, {}) for r in _shown(roles)], more_lines=max(0, len(lines) - RUN_LINES),
                   ranks=ranks, excluded=sum(len(t.excluded) for _, t in compiles))


def _ranks(labels: list[str], per_log: dict[int, list[TimeSummary]], texts: dict[str, str]) -> RankTable:
    logs = sorted(per_log)
    line_rows = {log: {r.key: r for r in merge((t.lines, t.wall_ns) for t in per_log[log])} for log in logs}
    role_rows = {log: {r.key: r for r in merge((t.roles, t.wall_ns) for t in per_log[log])} for log in logs}
    lines, stragglers, total = _compare(logs, line_rows, texts, RANK_LINES)
    roles, _, _ = _compare(logs, role_rows, {}, RANK_LINES)
    return RankTable(labels=[labels[log] if 0 <= log < len(labels) else f"log {log}" for log in logs],
                     lines=lines, roles=roles, stragglers=stragglers, more=total - len(lines))


def _compare(logs: list[int], rows: dict[int, dict[str, CostRow]], texts: dict[str, str], top: int,
             ) -> tuple[list[RankLine], int, int]:
    """The `top` slowest rows across ranks and up to `top` more with a straggler, side by side; how
    many rows have a straggler; how many rows there are. Linear in the rows of all ranks: a row's
    figures are gathered from the ranks that have it; only listed rows get a cell per rank."""
    import statistics

    present: dict[str, list[tuple[int, float]]] = {}
    for i, log in enumerate(logs):
        for key, row in rows[log].items():
            present.setdefault(key, []).append((i, ms(row.median_ns)))
    summary = []  # (slowest, key, median, flagged)
    for key, found in present.items():
        values = [c for _, c in found]
        median = statistics.median(values)
        flagged = len(values) > 1 and median > 0 and max(values) >= STRAGGLER * median
        summary.append((max(values), key, median, flagged))
    summary.sort(key=lambda s: (-s[0], s[1]))
    listed = summary[:top] + [s for s in summary[top:] if s[3]][:top]
    out = []
    for slowest, key, median, _ in listed:
        cells: list[float | None] = [None] * len(logs)
        for i, c in present[key]:
            cells[i] = c
        flags = [c is not None and len(present[key]) > 1 and median > 0 and c >= STRAGGLER * median for c in cells]
        label = next(rows[logs[i]][key].label for i, _ in present[key])
        out.append(RankLine(key, label, texts.get(key, ""), cells, flags, median,
                            [0.0 if c is None else 100.0 * c / (slowest or 1.0) for c in cells]))
    return out, sum(s[3] for s in summary), len(summary)


def load_profiles(path: str | os.PathLike[str]) -> list[CompileProfile]:
    """The profiles of a THUNDER_TRACE log file or directory, rebuilt (every compile with a
    profile, file by file): `provenance.timing.rollup.rollup(load_profiles(dir), by="line")` is the log's
    `provenance.cost()`. Records that do not fit are skipped."""
    out: list[CompileProfile] = []
    for path_ in log_files(path)[0]:
        _, profiles = read_ahead(path_)
        if not profiles:
            continue
        log_file = LogFile(str(path_), read_ahead=READ_AHEAD)
        names: dict[Any, str] = {}
        for record in log_file:  # the provenance records (kept by the reader) and function names
            if record.type == "compile_start":
                names[hashable(record.get("compile"))] = str(record.get("fn") or "?")
        out.extend(compile_profile(p, safe_lookup(log_file.provenance), names.get(key, "?"))
                   for key, p in profiles.items())
    return out
