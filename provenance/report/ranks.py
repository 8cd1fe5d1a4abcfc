"""The rank comparison: per-rank compile times, and each rank's compiles matched up with the
others' and compared by their final traces' op sequences (a difference is a desync)."""

from __future__ import annotations

import difflib
import zlib
from collections import Counter

from provenance.report.logs import RunLog
from provenance.report.model import CompileSummary, Desync, RankComparison, RankRow, RankTime

__all__ = ["compare_ranks"]

MAX_DESYNC_DETAILS = 50
MAX_ROWS = 2000


def compare_ranks(logs: list[RunLog], summaries: list[CompileSummary]) -> RankComparison:
    """Per-rank compile times, and the compiles of each rank matched up (same function, same
    recompile index, same occurrence) and compared by their final traces' op sequences."""
    labels = [log.label for log in logs]
    groups: dict[tuple, dict[int, CompileSummary]] = {}
    seen: Counter = Counter()
    for s in summaries:
        seen[(s.log, s.fn, s.index)] += 1
        groups.setdefault((s.fn, s.index, seen[(s.log, s.fn, s.index)]), {})[s.log] = s
    rows, desync = [], 0
    for (fn, index, occurrence), by_log in groups.items():
        cells = [by_log.get(log.index) for log in logs]
        differences = _compare(cells, labels) if len(by_log) > 1 else []
        desync += bool(differences)
        if len(rows) < MAX_ROWS:
            rows.append(RankRow(fn, index, occurrence, differences[:MAX_DESYNC_DETAILS], cells))
    per_rank = []
    for log in logs:
        mine = [s for s in summaries if s.log == log.index]
        per_rank.append(RankTime(log.label, len(mine), sum(s.seconds or 0 for s in mine),
                                 sum(s.status == "failed" for s in mine)))
    slowest = max((r.seconds for r in per_rank), default=0) or 1.0
    for r in per_rank:
        r.pct = 100.0 * r.seconds / slowest
    return RankComparison(len(logs) > 1, per_rank, rows, desync, labels)


def _compare(cells: list[CompileSummary | None], labels: list[str]) -> list[Desync]:
    """Where each rank's final traces differ from the first rank's that has the compile."""
    present = [(i, c) for i, c in enumerate(cells) if c is not None]
    (ref_i, ref), others = present[0], present[1:]
    out = []
    for i, other in others:
        for list_name in sorted(set(ref.signature) | set(other.signature)):
            a, b = ref.signature.get(list_name), other.signature.get(list_name)
            if a == b:
                continue
            seq_a = zlib.decompress(a).decode().split("\n") if a else []
            seq_b = zlib.decompress(b).decode().split("\n") if b else []
            opcodes = [op for op in difflib.SequenceMatcher(None, seq_a, seq_b, autojunk=False).get_opcodes()
                       if op[0] != "equal"]
            first = opcodes[0] if opcodes else ("replace", 0, 0, 0, 0)
            out.append(Desync(trace="forward" if list_name == "computation" else list_name, rank=labels[i],
                              ref_rank=labels[ref_i], at=first[1], changes=len(opcodes),
                              ref_ops=[_op_label(x) for x in seq_a[first[1]:first[2]][:5]],
                              ops=[_op_label(x) for x in seq_b[first[3]:first[4]][:5]],
                              ref_length=len(seq_a), length=len(seq_b)))
    return out


def _op_label(signature: str) -> str:
    sym, _, role = signature.partition("|")
    return f"{sym} [{role}]" if role else sym
