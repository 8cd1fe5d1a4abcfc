"""Where a compile's time went: its `phases` and `executor_compile` records -> the compile page's
pipeline bar, phase table and time by group (model.PhaseView).

Every field comes from an untrusted log: anything of the wrong type is skipped, never raised.
"""

from __future__ import annotations

from provenance.log.events import MAX_PHASES
from provenance.report.model import ExecutorCompileView, Phase, PhaseGroup, PhaseView
from provenance.report.numbers import as_int

__all__ = ["GROUPS", "executor_compile", "fusion_phase", "phase_view", "phases_of"]

# A phase's colour group (the pipeline bar's legend); any other phase is a Thunder pass.
GROUPS = {
    "cache_lookup": "cache", "acquire_trace": "tracing", "transform": "transform", "grad": "autograd",
    "split_forward_backward": "autograd", "transform_for_execution": "executors", "executor_claiming": "executors",
    "fusion": "executors", "rematerialization": "executors", "torch_compile_setup": "executors",
    "update_fusion_call_ctx": "executors", "codegen": "codegen", "provenance": "provenance",
    "executor_compile": "executors",
    # a Dynamo graph's whole compile (ThunderFX)
    "dynamo_trace": "dynamo", "dynamo_finish": "dynamo", "split": "split", "inductor_compile": "inductor",
    "inductor_backward": "inductor", "thunder_compile": "thunder", "backend_failed": "failed",
}
GROUP_ORDER = ("failed", "dynamo", "split", "inductor", "thunder", "cache", "tracing", "transform", "pass", "autograd",
               "executors", "codegen", "provenance", "other")


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


def executor_compile(record: dict) -> ExecutorCompileView | None:
    start, end = as_int(record.get("start_ns")), as_int(record.get("end_ns"))
    if start is None or end is None or end < start:
        return None
    trace = record.get("trace")
    return ExecutorCompileView(str(record.get("executor") or "?"), str(record.get("fusion") or "?"),
                           trace if isinstance(trace, str) else None, start, end)


def fusion_phase(e: ExecutorCompileView) -> Phase:
    """An executor's compile of a fusion (at its first call), as a phase of the compile that made it."""
    return Phase("executor_compile", e.start_ns, e.end_ns, 0, f"{e.fusion} ({e.executor})", "executors")


def phase_view(window: tuple[int, int] | None, phases: list[Phase],
               executor_compiles: list[ExecutorCompileView]) -> PhaseView | None:
    """The pipeline bar (top-level phases and the gaps between them, as "other", then each
    executor compile at the first call), the phase table, and the time by group."""
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
    phases = list(phases)  # the executor compiles appended (once: a log may hold any number of them)
    for e in sorted(executor_compiles, key=lambda e: e.start_ns):
        # a fusion compiled at the first call, after the window: counted in the compile's time (the
        # generated code running between is not)
        compiled = fusion_phase(e)
        segments.append(compiled)
        phases.append(compiled)
        by_group["executors"] += e.end_ns - e.start_ns
        total += e.end_ns - e.start_ns
    by_group["other"] = max(0, total - sum(v for k, v in by_group.items() if k != "other"))
    groups = [PhaseGroup(g, ns / 1e6, 100.0 * ns / total if total else 0.0) for g, ns in by_group.items()
              if ns or g == "other"]
    covered = 100.0 * (total - by_group["other"]) / total if total else 100.0
    return PhaseView(start, total / 1e6, segments, phases, groups, covered, executor_compiles)


# -- recompiles ---------------------------------------------------------------------------------------
