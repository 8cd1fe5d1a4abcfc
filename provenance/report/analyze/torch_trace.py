"""torch's structured trace in the report: the `torch_trace` records of each frame compile, kept by
(log, compile id) as the logs are read, and each Dynamo graph's view of them (its page's guards,
output graph, torch pieces' code, symbolic shapes, caches and metrics; provenance.dynamo.torch_trace
holds the rules). Bounded: at most MAX_FRAMES frame compiles and MAX_CHARS characters of payload per
run are kept; the rest are counted (the page says so).
"""

from __future__ import annotations

from typing import Any

from provenance.dynamo.torch_trace import TEXTS, Artifact, FrameTrace, decode, root_name, user_frame, user_name
from provenance.report.model import (
    CodeView,
    GuardFailureView,
    GuardGroupView,
    GuardView,
    ShapeView,
    StackFrame,
    TorchTraceView,
)

__all__ = ["TorchTraces", "view"]

MAX_FRAMES = 4096
MAX_CHARS = 256 << 20
GLOBAL = "(global state)"  # the group of guards on no input
# torch's compilation metrics a graph page shows, in this order, with their labels. torch's times cover less
# than the page's bar of the same name: each label says what torch counted (its dynamo_timed regions).
METRICS = (("guard_count", "guards (Dynamo's)"), ("shape_env_guard_count", "guards on symbols"),
           ("graph_op_count", "graph ops"), ("graph_node_count", "graph nodes"), ("graph_input_count", "graph inputs"),
           ("entire_frame_compile_time_s", "frame compile (s), torch's: Dynamo's frame compile, the backend call in "
                                           "it; not the Thunder pieces' compiles at their first call"),
           ("backend_compile_time_s", "backend compile (s), torch's: ThunderFX's backend call (the split, the "
                                      "fallbacks' compiles)"),
           ("inductor_compile_time_s", "inductor compile (s), torch's: inductor's lowering and code generation "
                                       "only (the bar's inductor_compile adds AOTAutograd's tracing and the rest "
                                       "of torch._inductor.compile)"),
           ("cache_size", "cache entries before"),
           ("restart_reasons", "restarts"), ("fail_type", "failure"), ("fail_reason", "failure reason"),
           ("non_compliant_ops", "non-compliant ops"))
_TITLES = {"aot_forward_graph": "AOT forward graph", "aot_backward_graph": "AOT backward graph",
           "aot_joint_graph": "AOT joint graph", "aot_inference_graph": "AOT inference graph",
           "inductor_output_code": "inductor's code"}


class TorchTraces:
    """The run's torch_trace records, by (log, compile id)."""

    def __init__(self) -> None:
        self.frames: dict[tuple[int, str], FrameTrace] = {}
        self.chars = 0
        self._chars: dict[tuple[int, str], int] = {}  # by frame
        self.dropped = 0  # records not kept: past MAX_FRAMES or MAX_CHARS, or with no compile id

    def add(self, log: int, data: dict) -> None:
        artifact = decode(data)
        if artifact is None or artifact.compile_id is None:
            self.dropped += 1
            return
        key = (log, artifact.compile_id)
        frame = self.frames.get(key)
        if frame is None:
            if len(self.frames) >= MAX_FRAMES:
                self.dropped += 1
                return
            frame = self.frames[key] = FrameTrace(artifact.compile_id)
        size = len(artifact.payload or "")
        if self.chars + size > MAX_CHARS:
            self.dropped += 1
            return
        self.chars += size
        self._chars[key] = self._chars.get(key, 0) + size
        frame.add(artifact)

    def absorb(self, other: TorchTraces) -> None:
        """`other`'s frames after these (a log's, after the logs before it's), within the run's bounds."""
        self.dropped += other.dropped
        for key, frame in other.frames.items():
            size = other._chars.get(key, 0)
            if len(self.frames) >= MAX_FRAMES or self.chars + size > MAX_CHARS:
                self.dropped += 1
                continue
            self.frames[key], self._chars[key] = frame, size
            self.chars += size

    def pop(self, log: int, compile_id: str | None) -> FrameTrace | None:
        return self.frames.pop((log, compile_id), None) if compile_id is not None else None


def _code(title: str, artifact: Artifact | None, pieces: list[tuple[int, int, str]] = (),
          copy: bool = False) -> CodeView | None:
    if artifact is None or artifact.payload is None and artifact.payload_chars is None:
        return None
    when = artifact.time_ns
    piece = next((name for start, end, name in pieces if when is not None and start <= when <= end), None)
    return CodeView(title, artifact.payload or "", artifact.payload_chars, piece, copy)


def _once(codes: list[CodeView]) -> list[CodeView]:
    """Each (title, piece, text) once, its repeats counted (torch writes some twice: a cache hit's, a retry's)."""
    kept: dict[tuple[str, str | None, str], CodeView] = {}
    for code in codes:
        found = kept.setdefault((code.title, code.piece, code.text), code)
        if found is not code:
            found.repeats += 1
    return list(kept.values())


def _frame(trace_frame: Any) -> StackFrame | None:
    if trace_frame is None:
        return None
    name = trace_frame.file.rsplit("/", 1)[-1]
    return StackFrame(trace_frame.file, name, trace_frame.line, trace_frame.name, trace_frame.text, trace_frame.user)


def _failed(kind: str, subject: str | None, code: str, failures: list[GuardFailureView]) -> bool:
    """Whether a later call failed this check: a tensor check of the input a failure names, or the
    same code (in the user's words) as a failed guard."""
    for f in failures:
        if f.changes and subject is not None and f.subject == subject and kind == "TENSOR_MATCH":
            return True
        if f.guard and user_name(f.guard) == code:
            return True
    return False


def view(frame: FrameTrace, failures: list[GuardFailureView],
         pieces: list[tuple[int, int, str]] = ()) -> TorchTraceView:
    """A graph's view of its frame compile's torch_trace records; `failures`: the guards of this
    graph's entry that later calls failed (their recompiles' failures naming its compile id); `pieces`:
    (start, end, piece) of each fallback piece's inductor compile, to label what it wrote."""
    groups: dict[str, GuardGroupView] = {}
    guards = frame.guard_list()
    for guard in guards:
        code = user_name(guard.code)
        subject = root_name(guard.subject) if guard.subject else GLOBAL
        group = groups.setdefault(subject, GuardGroupView(subject, [], guard.local))
        failed = _failed(guard.kind, guard.subject, code, failures)
        group.guards.append(GuardView(guard.kind, code, guard.where, failed))
    # what a later call failed first, then the frame's arguments and locals, then globals, global state last
    ordered = sorted(groups.values(), key=lambda g: (g.subject == GLOBAL, -g.failed, not g.local, g.subject))
    metrics = frame.metrics or {}
    shown = [(label, _metric(metrics[key])) for key, label in METRICS
             if key in metrics and metrics[key] not in (None, [], "")]
    torch_count = metrics.get("guard_count")
    order = {name: i for i, name in enumerate(TEXTS)}
    texts = sorted(frame.texts, key=lambda a: order[a.name])  # stable: torch's order within a kind
    made = [_code(_TITLES.get(a.name, a.name), a, pieces) for a in [*frame.graphs, *frame.inductor]]
    made += [_code(TEXTS[a.name][0], a, pieces, TEXTS[a.name][1]) for a in texts]
    codes = _once([c for c in made if c])
    shapes = [ShapeView(s.kind, s.subject, s.text, _frame(user_frame(s.user_stack)), s.symbol)
              for s in frame.shapes]
    caches = [(cache, outcome, (why or "")[:2000]) for cache, outcome, why in frame.caches]
    return TorchTraceView(ordered, len(guards), torch_count if type(torch_count) is int else None,
                          _code("Dynamo's output graph", frame.output_graph), codes, shapes, caches, shown,
                          dict(frame.others))


def _metric(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, list):
        return "; ".join(str(v).partition("\n")[0][:300] for v in value[:8])
    return str(value)[:500]
