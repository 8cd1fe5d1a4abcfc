"""The views of ThunderFX (analyze/fx_graphs.py makes them): Dynamo graphs, the pieces Thunder's
splitter cut them into and why, graph breaks, and each graph's source view."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from provenance.report.model.core import CompileSummary, Phase, PhaseView, SourceFileView, StackFrame

__all__ = ["BackendFailureView", "CodeView", "DynamoRecompileView", "FrameCompileView", "FxRun", "GraphBreakView",
           "GraphView", "GuardFailureView", "GuardGroupView", "GuardView", "PieceView", "ShapeView", "SplitView",
           "TorchTraceView"]

# Phases of a graph's compile that are its Thunder pieces' own compiles (counted with the compiles)
THUNDER_PHASES = frozenset({"thunder_compile"})


@dataclass(slots=True, repr=False, eq=False)
class SplitView:
    """Why Thunder's splitter left an FX node to torch."""

    piece: str | None
    kind: str
    info: str
    exception: str | None
    node: str | None
    frame: StackFrame | None  # the node's user line
    module: str | None
    module_type: str | None


@dataclass(slots=True, repr=False, eq=False)
class PieceView:
    """A piece of a Dynamo graph, as Thunder's splitter cut it: Thunder's, or a fallback's."""

    name: str
    index: int | None
    compiler: str  # thunder | inductor | eager | ? (unknown)
    nodes: int | None
    frames: list[StackFrame]  # its user lines
    reasons: list[SplitView] = field(default_factory=list)
    compiles: list[CompileSummary] = field(default_factory=list)  # a Thunder piece's (re)compiles

    @property
    def thunder(self) -> bool:
        return self.compiler == "thunder"


@dataclass(slots=True, repr=False, eq=False)
class GraphBreakView:
    """A Dynamo graph break: the user's line that broke the graph, and why."""

    rank_label: str
    log: int
    compile_id: str | None
    summary: str  # the reason's first line
    reason: str
    frame: StackFrame | None  # the user's line
    stack: list[StackFrame]
    graph: GraphView | None = None  # the graph it ended (none: the frame compile made none)
    call_stack: list[StackFrame] = field(default_factory=list)  # the script's frames that called it, outermost first
    outcome: str | None = None  # with no graph: its frame compile's (FrameCompileView.outcome), if logged


@dataclass(slots=True, repr=False, eq=False)
class BackendFailureView:
    """A call of ThunderFX's backend that raised in a frame compile (Dynamo restarted the frame, or failed it)."""

    error: str  # "Type: message"
    frame: StackFrame | None  # the innermost user frame of its traceback: the line that failed
    stack: list[StackFrame]  # its traceback, innermost first
    seconds: float  # the attempt: Dynamo's tracing, the split and compiles up to the error

    @property
    def summary(self) -> str:
        return self.error.strip().partition("\n")[0][:300]


@dataclass(slots=True, repr=False, eq=False)
class FrameCompileView:
    """A Dynamo frame compile of a ThunderFX backend (`frame_compile`): what it made, and what failed."""

    rank_label: str
    log: int
    compile_id: str
    outcome: str  # graph | failed | skipped | empty (provenance.log.events.FRAME_OUTCOMES)
    function: StackFrame | None  # the function Dynamo compiled
    start_ns: int
    end_ns: int
    graph_number: int | None
    failures: list[BackendFailureView]
    more_failures: int
    breaks: int
    error: str | None  # what ended it (failed, skipped)
    error_frame: StackFrame | None  # the innermost user frame of that error's traceback
    error_stack: list[StackFrame]
    graph: GraphView | None = None  # linked by FxGraphs.finish
    torch: TorchTraceView | None = None  # torch's trace of a frame compile that made no graph

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9

    @property
    def failed(self) -> bool:
        """A failure: the error reached Dynamo's caller, or a backend call raised (Dynamo restarted)."""
        return self.outcome == "failed" or bool(self.failures) or bool(self.more_failures)

    @property
    def label(self) -> str:
        return f"[{self.compile_id}]"

    @property
    def summary(self) -> str:
        """What failed first, one line: the error that ended it, else the first failed backend call."""
        if self.error:
            return self.error.strip().partition("\n")[0][:300]
        return self.failures[0].summary if self.failures else ""

    @property
    def line(self) -> StackFrame | None:
        """The user's line to show: where the error came from, else the function compiled."""
        found = self.error_frame or next((f.frame for f in self.failures if f.frame is not None), None)
        return found or self.function


@dataclass(slots=True, repr=False, eq=False)
class GuardFailureView:
    """One guard of a cached Dynamo entry that the call failed."""

    entry: str | None  # the entry's compile id ("0/0")
    subject: str | None  # what changed, as the user wrote it
    changes: list[tuple[str, str, str]]  # (what, cached, now)
    reason: str
    guard: str  # torch's words


@dataclass(slots=True, repr=False, eq=False)
class GuardView:
    """One check of the graph's guards (torch's guard tree)."""

    kind: str  # TENSOR_MATCH, ID_MATCH, LAMBDA_GUARD, ...
    code: str  # torch's code of the check, sources in the user's words
    where: str | None  # the user line that made it, as torch says
    failed: bool = False  # a later call failed it (that call's recompile names it)


@dataclass(slots=True, repr=False, eq=False)
class GuardGroupView:
    """The guards on one input (in the user's words), or on global state."""

    subject: str
    guards: list[GuardView]
    local: bool = False  # an argument or local of the frame

    @property
    def failed(self) -> int:
        return sum(g.failed for g in self.guards)


@dataclass(slots=True, repr=False, eq=False)
class CodeView:
    """A graph or generated code torch wrote (an output graph, an AOT graph, inductor's code)."""

    title: str
    text: str
    cut: int | None = None  # its whole length where the log kept less
    piece: str | None = None  # the fallback piece whose compile wrote it (by its inductor_compile phase)
    copy: bool = False  # a program to run: the page gives it a copy button
    repeats: int = 0  # more artifacts with the same title, piece and text (shown once)


@dataclass(slots=True, repr=False, eq=False)
class ShapeView:
    """A symbolic-shape step: a dim made dynamic, a specialization, a guard on a symbol."""

    kind: str  # "symbol" | "specialized" | "guard"
    subject: str | None  # the input's dim in the user's words (`input_ids dim 1`)
    text: str
    frame: StackFrame | None  # the user's line, where torch gives it
    symbol: str | None = None  # torch's symbol (`s27`)


@dataclass(slots=True, repr=False, eq=False)
class TorchTraceView:
    """What torch's structured trace says about the graph's frame compile (torch_trace records)."""

    groups: list[GuardGroupView]
    guard_count: int  # checks in the guard tree
    torch_guard_count: int | None  # compilation_metrics.guard_count: Dynamo's guards, some several checks each
    output_graph: CodeView | None
    codes: list[CodeView]  # AOT graphs and inductor's code of the graph's torch pieces
    shapes: list[ShapeView]
    caches: list[tuple[str, str, str]]  # (cache, outcome, why)
    metrics: list[tuple[str, str]]  # (what, value) of torch's compilation metrics
    others: dict[str, int]  # other artifacts by name, counted
    fixed: list[str] = field(default_factory=list)  # dims Dynamo made dynamic that Thunder's pieces take as fixed
    recompiled: int = 0  # of the graph's Thunder piece compiles, the recompiles (each a new size, with `fixed`)

    @property
    def failed(self) -> int:
        return sum(g.failed for g in self.groups)

    def directory(self) -> dict[str, Any]:
        """A graph's `torch` in compile_directory.json: the counts its page shows."""
        return {"guards": self.guard_count, "dynamo_guards": self.torch_guard_count, "failed_guards": self.failed,
                "dynamic": [s.subject for s in self.shapes if s.kind == "symbol" and s.subject],  # inputs'
                "internal_symbols": [s.symbol for s in self.shapes if s.kind == "symbol" and not s.subject],
                "fixed_by_thunder": self.fixed,
                "codes": [c.title for c in self.codes], "caches": [[c, o] for c, o, _ in self.caches],
                "others": self.others}


@dataclass(slots=True, repr=False, eq=False)
class DynamoRecompileView:
    """Why Dynamo compiled the graph's frame again."""

    reason: str
    function: StackFrame | None  # the function Dynamo compiled again
    call: StackFrame | None  # the user's line of the call
    failures: list[GuardFailureView]
    more: int
    # inputs whose sizes changed too, which torch's reason does not name (it stops at the first failed
    # guard): "input_ids: size [2, 16] → [2, 8]", from the two graphs' tensor guards
    also: list[str] = field(default_factory=list)


@dataclass(slots=True, repr=False, eq=False)
class GraphView:
    """A Dynamo graph's page: its pieces, split reasons and breaks, and its source view."""

    key: str  # unique in the report: its page's name
    log: int
    rank_label: str
    number: int | None
    compile_id: str | None
    start_ns: int | None
    time_ns: int | None
    pieces: list[PieceView]
    reasons: list[SplitView]
    breaks: list[GraphBreakView] = field(default_factory=list)
    files: list[SourceFileView] = field(default_factory=list)  # made by FxGraphs.finish(), the model's first
    lines: dict[str, list[dict]] = field(default_factory=dict)  # "L<file>-<line>" -> what each piece did there
    # What the page's script adds to the rows: "c": row id -> [forward ops, backward ops, fusions] of
    # every Thunder piece; "fx": row id -> "fallback" and/or "break" (a line that ran in torch, broke the graph)
    marks: dict[str, dict[str, Any]] = field(default_factory=dict)
    dropped_pieces: int = 0
    dynamo_start_ns: int | None = None  # Dynamo's start of the frame's compile
    phases: list[Phase] = field(default_factory=list)  # the whole compile's, as logged (time order at finish)
    timing: PhaseView | None = None  # made by FxGraphs.finish(): the pipeline bar of the whole compile
    recompile: DynamoRecompileView | None = None
    torch: TorchTraceView | None = None  # torch's structured trace of its frame compile (torch_trace records)

    @property
    def seconds(self) -> float | None:
        """The whole compile: its named phases (Dynamo, the split, every piece's compile)."""
        return sum(p.ms for p in self.phases if p.depth == 0) / 1e3 if self.phases else None

    @property
    def seconds_outside_thunder(self) -> float:
        """What the run's compile time lacks without this graph: all but its Thunder compiles."""
        return sum(p.ms for p in self.phases if p.depth == 0 and p.name not in THUNDER_PHASES) / 1e3

    @property
    def page(self) -> str:
        return f"graphs/{self.key}.html"

    @property
    def label(self) -> str:
        """tlparse's [frame/recompile]; [graph N] when torch gave no compile id."""
        return f"[{self.compile_id}]" if self.compile_id is not None else f"[graph {self.number}]"

    @property
    def split(self) -> bool:
        return any(not p.thunder for p in self.pieces)

    def anchor(self, frame: StackFrame) -> str:
        """The id of the frame's line on this graph's page ("" if it does not show it)."""
        index = next((f.index for f in self.files if f.path == frame.file), None)
        return f"L{index}-{frame.line}" if index is not None else ""

    @property
    def fallbacks(self) -> list[PieceView]:
        return [p for p in self.pieces if not p.thunder]


@dataclass(slots=True, repr=False, eq=False)
class FxRun:
    """The run's ThunderFX graphs and breaks, for index.html, graphs.html and the graph pages."""

    graphs: list[GraphView]
    breaks: list[GraphBreakView]
    dropped_graphs: int = 0
    dropped_breaks: int = 0
    frames: list[FrameCompileView] = field(default_factory=list)  # every frame compile of a ThunderFX backend
    dropped_frames: int = 0

    @property
    def failed_frames(self) -> list[FrameCompileView]:
        return [f for f in self.frames if f.failed]

    @property
    def seconds_without_graph(self) -> float:
        """The frame compiles that made no graph (failed, skipped, empty): compile time no graph shows."""
        return sum(f.seconds for f in self.frames if f.graph is None)

    @property
    def pieces(self) -> int:
        return sum(len(g.pieces) for g in self.graphs)

    @property
    def recompiles(self) -> int:
        """Dynamo's recompiles: graphs of a frame compiled again."""
        return sum(1 for g in self.graphs if g.recompile is not None)

    @property
    def fallbacks(self) -> list[tuple[GraphView, PieceView]]:
        return [(g, p) for g in self.graphs for p in g.pieces if not p.thunder]

    def directory(self) -> dict[str, Any]:
        """compile_directory.json's `dynamo_graphs`: each graph, its pieces (a Thunder piece's
        compiles by key, a fallback's reasons) and breaks, and every break of the run, user lines as `file:line`."""
        def where(frame: StackFrame | None) -> str | None:
            return f"{frame.file}:{frame.line}" if frame is not None else None

        return {
            "graphs": [{
                "key": g.key, "log": g.log, "rank_label": g.rank_label, "graph": g.number, "compile_id": g.compile_id,
                "page": g.page, "start_ns": g.start_ns, "end_ns": g.time_ns, "dynamo_start_ns": g.dynamo_start_ns,
                "seconds": g.seconds, "covered_pct": g.timing.covered_pct if g.timing is not None else None,
                "phases": [{"name": p.name, "detail": p.detail, "start_ns": p.start_ns, "end_ns": p.end_ns}
                           for p in g.phases if p.depth == 0],
                "recompile_reason": g.recompile.reason if g.recompile is not None else None,
                "recompile_also": g.recompile.also if g.recompile is not None else [],
                "pieces": [{"name": p.name, "compiler": p.compiler, "nodes": p.nodes,
                            "compiles": [c.key for c in p.compiles],
                            "reasons": [{"kind": r.kind, "node": r.node, "info": r.info, "line": where(r.frame)}
                                        for r in p.reasons]} for p in g.pieces],
                "breaks": [{"reason": b.summary, "line": where(b.frame)} for b in g.breaks],
                "torch": g.torch.directory() if g.torch is not None else None,
            } for g in self.graphs],
            # every break of the run, a skipped frame's too (no graph: `graph` null); a graph's own are also under it
            "breaks": [{"rank_label": b.rank_label, "compile_id": b.compile_id,
                        "graph": b.graph.key if b.graph is not None else None, "reason": b.summary,
                        "line": where(b.frame), "stack": [where(f) for f in b.stack]} for b in self.breaks],
            # every frame compile of ThunderFX, whatever it made, and what failed in it
            "frames": [{"rank_label": f.rank_label, "log": f.log, "compile_id": f.compile_id, "outcome": f.outcome,
                        "function": where(f.function), "seconds": f.seconds, "failed": f.failed,
                        "graph": f.graph.key if f.graph is not None else None, "breaks": f.breaks,
                        "error": f.error, "line": where(f.line),
                        "failures": [{"error": b.error, "line": where(b.frame), "seconds": b.seconds}
                                     for b in f.failures], "more_failures": f.more_failures} for f in self.frames],
            "not_listed": {"graphs": self.dropped_graphs, "breaks": self.dropped_breaks, "frames": self.dropped_frames},
        }
