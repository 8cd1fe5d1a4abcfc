"""The rank comparison: per-rank compile times, and each rank's compiles matched up with the
others' and compared by their final traces' op sequences (a difference is a desync)."""

from __future__ import annotations

import difflib
import zlib
from collections import Counter

from provenance.report.model import CompileSummary, Desync, RankComparison, RankRow, RankTime
from provenance.report.read.processes import RunLog

__all__ = ["compare_ranks"]

MAX_DESYNC_DETAILS = 50
MAX_ROWS = 2000
MAX_CELLS = 20_000  # rows x ranks of the table of compiles across ranks: past it, fewer rows (desyncs first)
MAX_DIFF_WORK = 4_000_000  # pairs of ops difflib may compare to count the differing stretches


def compare_ranks(logs: list[RunLog], summaries: list[CompileSummary]) -> RankComparison:
    """Per-rank compile times, and the compiles of each rank matched up (same function, same
    recompile index, same occurrence) and compared by their final traces' op sequences."""
    labels = [log.label for log in logs]
    groups: dict[tuple, dict[int, CompileSummary]] = {}
    seen: Counter = Counter()
    for s in summaries:
        seen[(s.log, s.fn, s.index)] += 1
        groups.setdefault((s.fn, s.index, seen[(s.log, s.fn, s.index)]), {})[s.log] = s
    # A row has a cell per rank: rows x ranks is capped (MAX_CELLS), the rows that differ listed first
    most = max(1, min(MAX_ROWS, MAX_CELLS // max(1, len(logs))))
    position = {log.index: i for i, log in enumerate(logs)}
    differing: list[tuple[int, RankRow]] = []
    others: list[tuple[int, RankRow]] = []
    desync = 0
    uncompared = compared_groups = 0
    for n, ((fn, index, occurrence), by_log) in enumerate(groups.items()):
        traced = {log: c for log, c in by_log.items() if not c.otlp}  # read from spans: no final traces
        differences = _compare(traced, position, labels) if len(traced) > 1 else []
        compared = len(traced) > 1 or len(by_log) == 1
        uncompared += not compared
        compared_groups += len(traced) > 1
        desync += bool(differences)
        kept = differing if differences else others
        if len(kept) < most:
            cells = [by_log.get(log.index) for log in logs]
            kept.append((n, RankRow(fn, index, occurrence, differences[:MAX_DESYNC_DETAILS], cells, compared)))
    listed = sorted(differing + others[:max(0, most - len(differing))], key=lambda item: item[0])
    per_log: dict[int, list[CompileSummary]] = {}
    for s in summaries:
        per_log.setdefault(s.log, []).append(s)
    per_rank = []
    for log in logs:
        mine = per_log.get(log.index, [])
        per_rank.append(RankTime(log.label, len(mine), sum(s.seconds or 0 for s in mine),
                                 sum(s.status == "failed" for s in mine)))
    slowest = max((r.seconds for r in per_rank), default=0) or 1.0
    for r in per_rank:
        r.pct = 100.0 * r.seconds / slowest
    return RankComparison(len(logs) > 1, per_rank, [row for _, row in listed], desync, labels,
                          more_rows=len(groups) - len(listed), max_cells=MAX_CELLS, uncompared=uncompared,
                          compared=compared_groups)


def _compare(by_log: dict[int, CompileSummary], position: dict[int, int], labels: list[str]) -> list[Desync]:
    """Where each rank's final traces differ from the first rank's that has the compile (linear in
    the ranks that have it, not in the run's)."""
    present = sorted((position[log], c) for log, c in by_log.items())
    (ref_i, ref), others = present[0], present[1:]
    out = []
    for i, other in others:
        for list_name in sorted(set(ref.signature) | set(other.signature)):
            a, b = ref.signature.get(list_name), other.signature.get(list_name)
            if a == b:
                continue
            found = first_difference(zlib.decompress(a).decode().split("\n") if a else [],
                                     zlib.decompress(b).decode().split("\n") if b else [])
            found.trace = "forward" if list_name == "computation" else list_name
            found.list_name = list_name
            found.rank, found.ref_rank = labels[i], labels[ref_i]
            out.append(found)
    return out


def first_difference(seq_a: list[str], seq_b: list[str]) -> Desync:
    """Where two op sequences first differ and how: linear in their length. The common head and
    tail are skipped; the differing stretches are counted (difflib) only when the middle is
    small enough, else `changes` is None (many)."""
    n = min(len(seq_a), len(seq_b))
    head = next((k for k in range(n) if seq_a[k] != seq_b[k]), n)
    tail = 0
    while tail < n - head and seq_a[-1 - tail] == seq_b[-1 - tail]:
        tail += 1
    mid_a, mid_b = seq_a[head:len(seq_a) - tail], seq_b[head:len(seq_b) - tail]
    changes, first = None, (head, head + min(len(mid_a), 5), head, head + min(len(mid_b), 5))
    if len(mid_a) * len(mid_b) <= MAX_DIFF_WORK:
        opcodes = [op for op in difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False).get_opcodes()
                   if op[0] != "equal"]
        changes = len(opcodes) or 1
        if opcodes:
            _, i1, i2, j1, j2 = opcodes[0]
            first = (head + i1, head + i2, head + j1, head + j2)
    return Desync(trace="", rank="", ref_rank="", at=first[0], changes=changes,
                  ref_ops=[_op_label(x) for x in seq_a[first[0]:first[1]][:5]],
                  ops=[_op_label(x) for x in seq_b[first[2]:first[3]][:5]],
                  ref_length=len(seq_a), length=len(seq_b), other_at=first[2])


def _op_label(signature: str) -> str:
    sym, _, role = signature.partition("|")
    return f"{sym} [{role}]" if role else sym
