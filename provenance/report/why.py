"""Why a compile happened and where its time went: a compile's `recompile`, `phases` and
`executor_compile` records -> the compile page's views (model.Recompile, model.PhaseView).

Every field comes from an untrusted log: anything of the wrong type is skipped, never raised.
"""

from __future__ import annotations

import difflib
from typing import Any

from provenance.report.coerce import as_int
from provenance.report.model import (
    ExecutorCompile,
    Phase,
    PhaseGroup,
    PhaseView,
    Recompile,
    Rejection,
    StackFrame,
)

__all__ = ["GROUPS", "executor_compile", "phase_view", "phases_of", "recompile_view"]

MAX_PHASES = 4096  # per compile, as capture caps them
MAX_DIFF_LINES = 400
MAX_REJECTED = 64

# A phase's colour group (the pipeline bar's legend); any other phase is a Thunder pass.
GROUPS = {
    "cache_lookup": "cache", "acquire_trace": "tracing", "transform": "transform", "grad": "autograd",
    "split_forward_backward": "autograd", "transform_for_execution": "executors", "executor_claiming": "executors",
    "fusion": "executors", "rematerialization": "executors", "torch_compile_setup": "executors",
    "update_fusion_call_ctx": "executors", "codegen": "codegen", "provenance": "provenance",
}
GROUP_ORDER = ("cache", "tracing", "transform", "pass", "autograd", "executors", "codegen", "provenance", "other")


def phases_of(record: dict | None) -> tuple[tuple[int, int] | None, list[Phase]]:
    """A phases record -> (its window, its phases in time order, nested ones after their parent)."""
    if not isinstance(record, dict):
        return None, []
    start, end = as_int(record.get("start_ns")), as_int(record.get("end_ns"))
    window = (start, end) if start is not None and end is not None and end >= start else None
    out: list[Phase] = []
    raw = record.get("phases")
    for entry in raw[:MAX_PHASES] if isinstance(raw, list) else ():
        if not (isinstance(entry, list) and len(entry) == 5):
            continue
        name, begin, stop, depth, detail = entry
        if not (isinstance(name, str) and type(begin) is int and type(stop) is int and type(depth) is int
                and stop >= begin and depth >= 0):
            continue
        out.append(Phase(name, begin, stop, depth, detail if isinstance(detail, str) else None,
                         GROUPS.get(name, "pass")))
    out.sort(key=lambda p: (p.start_ns, p.depth))
    return window, out


def executor_compile(record: dict) -> ExecutorCompile | None:
    start, end = as_int(record.get("start_ns")), as_int(record.get("end_ns"))
    if start is None or end is None or end < start:
        return None
    trace = record.get("trace")
    return ExecutorCompile(str(record.get("executor") or "?"), str(record.get("fusion") or "?"),
                           trace if isinstance(trace, str) else None, start, end)


def phase_view(window: tuple[int, int] | None, phases: list[Phase],
               executor_compiles: list[ExecutorCompile]) -> PhaseView | None:
    """The pipeline bar (top-level phases and the gaps between them, as "other"), the phase
    table, and the time by group."""
    if window is None or not phases:
        return None
    start, end = window
    total = end - start
    segments: list[Phase] = []
    cursor = start
    by_group = dict.fromkeys(GROUP_ORDER, 0)
    small = max(1, total // 200)  # gaps under 0.5% are summed into one "other" at the end
    scattered = 0
    for phase in (p for p in phases if p.depth == 0):
        begin, stop = max(phase.start_ns, cursor), min(phase.end_ns, end)
        if begin - cursor >= small:
            segments.append(Phase("other", cursor, begin, 0, None, "other"))
        elif begin > cursor:
            scattered += begin - cursor
        if stop > begin:
            segments.append(phase._replace(start_ns=begin, end_ns=stop))
            by_group[phase.group] = by_group.get(phase.group, 0) + stop - begin
        cursor = max(cursor, stop)
    scattered += max(0, end - cursor)
    if scattered:
        segments.append(Phase("other", end - scattered, end, 0, "the gaps between phases", "other"))
    by_group["other"] = max(0, total - sum(v for k, v in by_group.items() if k != "other"))
    groups = [PhaseGroup(g, ns / 1e6, 100.0 * ns / total if total else 0.0) for g, ns in by_group.items()
              if ns or g == "other"]
    covered = 100.0 * (total - by_group["other"]) / total if total else 100.0
    return PhaseView(start, total / 1e6, segments, phases, groups, covered, executor_compiles)


# -- recompiles ---------------------------------------------------------------------------------------
def _frame(value: Any) -> StackFrame | None:
    if isinstance(value, list) and len(value) >= 4:
        path = str(value[0])
        return StackFrame(path, path.rsplit("/", 1)[-1], as_int(value[1]) or 0, str(value[2]), str(value[3]),
                          bool(value[4]) if len(value) > 4 else True)
    return None


def _rejection(entry: Any, pages: dict) -> Rejection | None:
    if not isinstance(entry, dict):
        return None
    cid = entry.get("compile")
    changes = [tuple(str(x) for x in c) for c in entry.get("changes") or [] if isinstance(c, list) and len(c) == 3]
    subject, check = entry.get("subject"), entry.get("check")
    return Rejection(cid if isinstance(cid, int) else None, pages.get(cid) if isinstance(cid, int) else None,
                     str(entry.get("reason") or ""), subject if isinstance(subject, str) else None, changes,
                     check if isinstance(check, str) else None, str(entry.get("error") or ""))


def recompile_view(record: dict | None, prologue: list[str] | None) -> Recompile | None:
    """A recompile record -> the page's view; `prologue`: this compile's final prologue (lines).
    The run attaches `_pages` (compile id -> page) and `_prologue` (the newest rejected entry's
    final prologue) to the record it hands over."""
    if not isinstance(record, dict):
        return None
    pages = record.get("_pages") if isinstance(record.get("_pages"), dict) else {}
    raw = record.get("rejected")
    rejected = [r for r in (_rejection(e, pages) for e in (raw if isinstance(raw, list) else [])[:MAX_REJECTED])
                if r is not None]
    older = record.get("_prologue")
    diff = _diff(older.split("\n"), prologue) if isinstance(older, str) and prologue else None
    return Recompile(str(record.get("reason") or (rejected[0].reason if rejected else "")), _frame(record.get("call")),
                     rejected, as_int(record.get("more")) or 0, rejected[0] if rejected else None, diff)


def _diff(old: list[str], new: list[str]) -> list[tuple[str, str]]:
    """A unified diff of two prologues (without Thunder's `# Constructed by` line, which names the
    pass and its time), as (kind, line)."""
    def body(lines: list[str]) -> list[str]:
        return [line for line in lines if not line.startswith("# Constructed by")]

    out: list[tuple[str, str]] = []
    for line in difflib.unified_diff(body(old), body(new), "cached", "this call", lineterm="", n=1):
        if line.startswith(("---", "+++")):
            continue
        kind = {"@": "hunk", "+": "add", "-": "rem"}.get(line[:1], "ctx")
        out.append((kind, line))
        if len(out) >= MAX_DIFF_LINES:
            out.append(("hunk", "..."))
            break
    return out
