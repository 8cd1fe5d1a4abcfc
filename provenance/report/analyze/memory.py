"""Where the memory goes, in the report: a compile's Memory section from its `memory` records
(the live-bytes timeline of the forward and the backward with the peak marked, the top lines and
modules by saved-for-backward bytes and by bytes live at the peak, what rematerialization
changed), each line's saved bytes in the source view's gutter, and the run's Memory page.

The records are rebuilt into provenance.allocation.static_memory's objects with their provenance records and
rolled up by `provenance.allocation.static_memory.rollup`: the figures are the ones `provenance.memory()` gave
in the process.
"""

from __future__ import annotations

import os
from itertools import chain
from typing import TYPE_CHECKING

from provenance.allocation.static_memory import (
    BACKWARD,
    FORWARD,
    CompileMemory,
    MemoryRow,
    TraceMemory,
    line_texts,
    size,
)
from provenance.core import attribution
from provenance.core.record import Provenance
from provenance.report.model import (
    CompileMemoryView,
    MeasuredOp,
    MeasuredTrace,
    MemoryRowView,
    MemoryTimeline,
    RunMemory,
    RunMemoryCell,
    RunMemoryRow,
)
from provenance.report.numbers import int_of_text

if TYPE_CHECKING:
    from provenance.timing.profile import CompileProfile

__all__ = ["compile_memory_view", "line_memory", "measured_view", "run_memory"]

TOP = 15
MAX_BARS = 600  # a timeline of more ops is drawn in this many bars (each the largest of its ops)

def _where(record: Provenance | None) -> str:
    return attribution.short_place(record)  # a fusion: its members' lines


def _timeline(trace: TraceMemory, anchor: str | None) -> MemoryTimeline:
    ops = trace.ops
    n = len(ops)
    top = max(trace.peak, 1)
    peak_at = trace.peak_position
    peak_index = next((i for i, o in enumerate(ops) if o.position == peak_at), -1)
    groups = max(1, -(-n // MAX_BARS)) if ops else 1
    if groups == 1:  # an op a bar (a trace of up to MAX_BARS ops)
        chosen, counts = ops, [1] * n
    else:  # a bar for each group of ops: its largest op (the first of them)
        lives = [o.live for o in ops]
        chosen = []
        for i in range(0, n, groups):
            group = lives[i:i + groups]
            chosen.append(ops[i + group.index(max(group))])
        counts = [groups] * (len(chosen) - 1) + [n - groups * (len(chosen) - 1)]
    # The bars' texts (op names, lines, sizes), each sent once and referenced by index; a column at a time
    _, names, records, allocated, freed, live = zip(*chosen) if chosen else ((),) * 6
    distinct = {id(r): r for r in records}  # a line's ops share their record (the trace holds them)
    line_of = {key: _where(record) for key, record in distinct.items()}
    size_of = {b: size(b) for b in {*allocated, *(f for f in freed if f), *live}}
    texts = {t: i for i, t in enumerate(dict.fromkeys((*names, *line_of.values(), *size_of.values())))}
    line_of = {key: texts[t] for key, t in line_of.items()}
    size_of = {b: texts[t] for b, t in size_of.items()}
    sized = size_of.__getitem__
    bars = list(chain.from_iterable(zip(
        [round(10_000 * b / top) for b in live], map(texts.__getitem__, names), [line_of[id(r)] for r in records],
        map(sized, allocated), [size_of[f] if f else -1 for f in freed], map(sized, live), counts)))
    peak_bar = peak_index // groups if peak_index >= 0 else -1
    peak_op = ops[peak_index] if peak_index >= 0 else None
    peak_x = 100 * (peak_bar + 0.5) / len(chosen) if peak_bar >= 0 else 0.0
    where = f"after {peak_op.name} ({_where(peak_op.record)})" if peak_op is not None else "at the start"
    peak = f"{size(trace.peak)} {where}"
    description = (f"{trace.name.capitalize()} trace: bytes live after each of its {len(ops)} ops, from "
                   f"{size(trace.start)} at the start to a peak of {peak}; inputs ({size(trace.inputs)}) apart.")
    return MemoryTimeline(trace.name, anchor, {"t": list(texts), "b": bars, "p": peak_bar}, peak, peak_x,
                          size(trace.inputs), size(trace.start), description)


def _row(row: MemoryRow, total: int, texts: dict[str, str], labels: dict[str, str] | None = None) -> MemoryRowView:
    remat = (f"−{size(row.remat_removed_bytes)} / +{size(row.remat_added_bytes)}"
             if row.remat_removed_bytes or row.remat_added_bytes else "")
    label = (labels or {}).get(row.key) or _short(row.key)
    return MemoryRowView(row.key, label, texts.get(row.key, ""), size(row.saved_bytes),
                         size(row.forward_peak_bytes), size(row.backward_peak_bytes), size(row.allocated_bytes),
                         row.saved_bytes, row.peak_bytes, row.saved_bytes / total if total else 0.0, remat)


def _short(key: str) -> str:
    path, sep, line = key.rpartition(":")
    return f"{os.path.basename(path)}:{line}" if sep and int_of_text(line) is not None else key


def compile_memory_view(memory: CompileMemory, anchors: dict[str, str], totals: dict,
                        by_line: list[MemoryRow], modules: list[MemoryRow]) -> CompileMemoryView:
    """The compile page's Memory section; `totals`, `by_line` and `modules`: its summary and its rows
    by line and by module (static_memory.summary, rollups), made once for the section, the run and
    the source view."""
    texts = line_texts([memory])
    total = totals["saved_bytes"]
    by_peak = sorted(by_line, key=lambda r: (-r.peak_bytes, r.key))
    lists = {FORWARD: "computation", BACKWARD: "backward"}
    return CompileMemoryView(
        saved=size(total), saved_inputs=size(totals["saved_input_bytes"]),
        forward_peak=size(totals["forward_peak_bytes"]), backward_peak=size(totals["backward_peak_bytes"]),
        inputs=size(totals["forward_input_bytes"]),
        timelines=[_timeline(t, anchors.get(lists[t.name])) for t in memory.traces.values()],
        by_saved=[_row(r, total, texts) for r in by_line if r.saved_bytes][:TOP],
        by_peak=[_row(r, total, texts) for r in by_peak if r.peak_bytes][:TOP],
        modules=[_row(r, total, {}) for r in modules if r.saved_bytes or r.peak_bytes][:TOP],
        remat=[_row(r, total, texts) for r in by_line if r.remat_removed_bytes or r.remat_added_bytes][:TOP],
        saved_bytes=total, forward_peak_bytes=totals["forward_peak_bytes"],
        backward_peak_bytes=totals["backward_peak_bytes"])


def measured_view(memory: CompileMemory, profile: CompileProfile) -> list[MeasuredTrace]:
    """The CUDA allocator's readings of the compile's profiled traces against its timeline."""
    from provenance.allocation.measured_memory import checks  # only a profile that read the allocator comes here

    return [MeasuredTrace(c.describe(), c.agree, c.ops,
                          [MeasuredOp(_where(d.record), attribution.line_key(d.record), d.name, size(d.static),
                                      size(d.measured)) for d in c.differ[:TOP]])
            for c in checks([memory], [profile])]


def line_memory(by_line: list[MemoryRow]) -> dict[tuple[str, int], tuple[str, str]]:
    """(path, line) -> (the line's saved bytes, its title), for the source view's gutter, from a
    compile's rows by line (static_memory.rollup)."""
    out: dict[tuple[str, int], tuple[str, str]] = {}
    for row in by_line:
        path, sep, line = row.key.rpartition(":")
        if sep and (number := int_of_text(line)) is not None and (row.saved_bytes or row.peak_bytes):
            out[(path, number)] = (size(row.saved_bytes), f"saved for backward {size(row.saved_bytes)}; live at "
                                      f"the forward peak {size(row.forward_peak_bytes)}, at the backward peak "
                                      f"{size(row.backward_peak_bytes)}; allocated {size(row.allocated_bytes)}")
    return out


PEAK_DIFFERS = 1.05  # a rank whose peak is over 5% off the ranks' median is flagged


def _peak(totals: dict) -> int:
    """A compile's peak: the larger of its forward's and its backward's (they run one after the other)."""
    return max(totals["forward_peak_bytes"], totals["backward_peak_bytes"])


def _run_row(label: str, per_rank: list[tuple[dict, str] | None]) -> RunMemoryRow:
    peaks = sorted(_peak(t) for t, _ in filter(None, per_rank))
    median = peaks[(len(peaks) - 1) // 2] if peaks else 0  # the lower median: of 2 ranks, the larger peak differs
    top = max(peaks, default=0) or 1
    cells: list[RunMemoryCell | None] = []
    flags = []
    for found in per_rank:
        if found is None:
            cells.append(None)
            flags.append(False)
            continue
        t, href = found
        peak = _peak(t)
        cells.append(RunMemoryCell(size(t["saved_bytes"]), size(t["forward_peak_bytes"]),
                                   size(t["backward_peak_bytes"]), size(peak), peak,
                                   100 * t["forward_peak_bytes"] / top, 100 * t["backward_peak_bytes"] / top, href))
        flags.append(len(peaks) > 1 and median > 0 and not (1 / PEAK_DIFFERS <= peak / median <= PEAK_DIFFERS))
    return RunMemoryRow(label, cells, flags, size(median))


def run_memory(labels: list[str], compiles: list[tuple[int, str, str, dict]]) -> RunMemory | None:
    """The run's Memory page: `labels` by log index; per compile (its log's index, its label, its
    page, its static_memory.summary). A compile's label (function and compile id) matches it
    across ranks; a rank whose peak is off the ranks' median by over PEAK_DIFFERS is flagged."""
    if not compiles:
        return None
    logs = sorted({log for log, _, _, _ in compiles})
    column = {log: i for i, log in enumerate(logs)}
    by_label: dict[str, list] = {}
    totals: list[dict | None] = [None] * len(logs)
    for log, label, href, t in compiles:
        by_label.setdefault(label, [None] * len(logs))[column[log]] = (t, href)
        total = totals[column[log]]
        if total is None:
            totals[column[log]] = dict(t)
        else:
            for k, v in t.items():
                total[k] = total.get(k, 0) + v
    rows = [_run_row(label, per_rank) for label, per_rank in by_label.items()]
    total = _run_row("all compiles, added up", [(t, "") if t is not None else None for t in totals]) \
        if len(rows) > 1 else None
    return RunMemory([labels[log] if 0 <= log < len(labels) else f"log {log}" for log in logs], rows, total,
                     size(sum(t["saved_bytes"] for t in totals if t is not None)),
                     sum(1 for r in rows if any(r.flagged)), PEAK_DIFFERS)
