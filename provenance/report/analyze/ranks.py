"""The rank comparison: per-rank compile times, and each rank's compiles matched up with the
others' and compared by their final traces' op sequences (a difference is a desync)."""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Sequence

from provenance.report.model import (
    CompileSummary,
    Desync,
    LogGroup,
    LogSummary,
    RankComparison,
    RankGroup,
    RankRow,
    RankTime,
)
from provenance.report.read.processes import RunLog

__all__ = ["GROUP_OVER", "compare_ranks", "group_logs", "ranks_label"]

MAX_DESYNC_DETAILS = 50
MAX_ROWS = 2000
MAX_CELLS = 20_000  # rows x ranks of the table of compiles across ranks: past it, fewer rows (desyncs first)
GROUP_OVER = 16  # ranks: past it, ranks that behaved alike are one column, one row (RankGroup)
MAX_HOSTS = 8  # a log group's hosts listed by name
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
    per_rank = _per_rank(logs, summaries)
    alike = _alike(logs, groups, per_rank) if len(logs) > GROUP_OVER else []
    columns = [members[0] for members, _ in alike] or logs  # a group's first rank stands for it
    if alike:
        labels = [group.label for _, group in alike]
    # A row has a cell per rank: rows x ranks is capped (MAX_CELLS), the rows that differ listed first
    most = max(1, min(MAX_ROWS, MAX_CELLS // max(1, len(columns))))
    position = {log.index: i for i, log in enumerate(logs)}
    rank_labels = [log.label for log in logs]
    differing: list[tuple[int, RankRow]] = []
    others: list[tuple[int, RankRow]] = []
    desync = 0
    uncompared = compared_groups = 0
    for n, ((fn, index, occurrence), by_log) in enumerate(groups.items()):
        # read from spans: no final traces; incomplete (a rank still compiling, or one that died doing
        # so): its traces are not final, and a live report would call every compile in flight a desync
        traced = {log: c for log, c in by_log.items() if not c.otlp and c.status != "incomplete"}
        differences = _compare(traced, position, rank_labels) if len(traced) > 1 else []
        compared = len(traced) > 1 or len(by_log) == 1
        uncompared += not compared
        compared_groups += len(traced) > 1
        desync += bool(differences)
        kept = differing if differences else others
        if len(kept) < most:
            cells = [by_log.get(log.index) for log in columns]
            kept.append((n, RankRow(fn, index, occurrence, differences[:MAX_DESYNC_DETAILS], cells, compared)))
    listed = sorted(differing + others[:max(0, most - len(differing))], key=lambda item: item[0])
    return RankComparison(len(logs) > 1, per_rank, [row for _, row in listed], desync, labels,
                          more_rows=len(groups) - len(listed), max_cells=MAX_CELLS, uncompared=uncompared,
                          compared=compared_groups, groups=[group for _, group in alike])


def group_logs(logs: list[LogSummary]) -> list[LogGroup]:
    """Past GROUP_OVER logs, those that ran alike (the same command, versions, schema, world size
    and model code; a truncated log, or one of a newer schema, only with its like) as one group
    each, the smallest groups first (the outliers), then by their first log; else none."""
    if len(logs) <= GROUP_OVER:
        return []
    alike: dict[tuple, list[LogSummary]] = {}
    for log in logs:
        h = log.header
        started = None if h is None else (tuple(h.argv), tuple(h.versions.items()), h.schema, h.world_size,
                                          tuple(h.otlp.items()) if h.otlp else None)
        key = (started, tuple(log.libraries.items()), log.truncated, log.newer_minor)
        alike.setdefault(key, []).append(log)
    out = []
    for members in sorted(alike.values(), key=lambda m: (len(m), m[0].index)):
        hosts = sorted({log.header.host for log in members if log.header is not None})
        out.append(LogGroup(ranks_label(members), members, hosts[:MAX_HOSTS], max(0, len(hosts) - MAX_HOSTS)))
    return out


def _per_rank(logs: list[RunLog], summaries: list[CompileSummary]) -> list[RankTime]:
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
    return per_rank


def _alike(logs: list[RunLog], groups: dict[tuple, dict[int, CompileSummary]], per_rank: list[RankTime],
           ) -> list[tuple[list[RunLog], RankGroup]]:
    """The ranks by behaviour (the same compiles, each with the same status and final traces'
    ops), the smallest groups first (the outliers), then by their first rank: linear in the
    compiles of all ranks."""
    import statistics  # (with fractions and decimal) only for a run of several ranks

    behaviour: dict[int, list] = {log.index: [] for log in logs}
    for key, by_log in groups.items():
        for log, c in by_log.items():
            behaviour[log].append((key, c.status, tuple(sorted(c.signature.items()))))
    alike: dict[tuple, list[int]] = {}
    for i, log in enumerate(logs):
        alike.setdefault(tuple(behaviour[log.index]), []).append(i)
    out = []
    for members in sorted(alike.values(), key=lambda m: (len(m), m[0])):
        times = sorted(per_rank[i].seconds for i in members)
        out.append(([logs[i] for i in members], RankGroup(
            ranks_label([logs[i] for i in members]), len(members), per_rank[members[0]].compiles,
            per_rank[members[0]].failed, statistics.median(times), times[0], times[-1],
            [logs[i].index for i in members])))
    return out


def ranks_label(logs: Sequence[RunLog | LogSummary]) -> str:
    """`ranks 0–511, 513–1023`, or the logs' labels (a few, then how many more)."""
    ranks = [log.rank for log in logs]
    if any(r is None for r in ranks) or len(set(ranks)) != len(ranks):
        shown = ", ".join(log.label for log in logs[:3])
        return shown + (f" and {len(logs) - 3} more" if len(logs) > 3 else "")
    runs: list[list[int]] = []
    for r in sorted(ranks):
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    parts = [f"{a}\u2013{b}" if b > a else str(a) for a, b in runs]
    shown = ", ".join(parts[:6]) + (f" and {len(parts) - 6} more runs" if len(parts) > 6 else "")
    return f"rank{'s' if len(ranks) > 1 else ''} {shown}"


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
        import difflib  # only when ranks differ

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
