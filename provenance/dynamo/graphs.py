"""ThunderFX, as capture sees it: Dynamo graphs, the pieces Thunder's splitter cut them into, why,
and Dynamo's graph breaks. Plain values (names, frames, ids): nothing here refers to a model.

    compiled = thunder.dynamo.thunderfx(model)        # or torch.compile(model, backend=backend)
    compiled(x)
    for graph in provenance.fx_graphs(compiled):      # (backend) for torch.compile
        print(graph.compile_id, [(p.name, p.compiler, p.compiles) for p in graph.pieces])
    provenance.graph_breaks(compiled)

Filled in by provenance/thunder/thunderfx.py while tracing is enabled.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from provenance.core.record import Frame, user_frame

__all__ = ["DynamoGraph", "GraphBreak", "Piece", "SplitReason", "untimed"]

_GENERIC_FIRST_LINE = "Encountered graph break when attempting to trace"


@dataclass(frozen=True, slots=True)
class GraphBreak:
    """Dynamo stopped capturing a graph: torch's reason, at the user's line."""

    reason: str  # torch's message (first line: what; then explanation, hints)
    frames: tuple[Frame, ...]  # the user's stack at the break, innermost first
    compile_id: str | None  # Dynamo's compile id of the frame being captured ("0/0"; tlparse: [0/0])
    time_ns: int = 0
    call_stack: tuple[Frame, ...] = ()  # the user's frames that called the compiled one (the script's), outermost first

    @property
    def summary(self) -> str:
        """What broke, in torch's words: the reason's first line, or from torch 2.10 the line after its
        generic first line ("Encountered graph break when attempting to trace CALL: a function call, ...")."""
        lines = [line.strip() for line in self.reason.strip().splitlines() if line.strip()]
        if len(lines) > 1 and lines[0].startswith(_GENERIC_FIRST_LINE):
            return lines[1]
        return lines[0] if lines else ""

    @property
    def user_frame(self) -> Frame | None:
        return user_frame(self.frames)


@dataclass(frozen=True, slots=True)
class SplitReason:
    """Why Thunder's splitter did not give an FX node to Thunder (its `SplitReason`)."""

    kind: str  # Thunder's SplitReasonType: MISSING_OP_SUPPORT, UNSUPPORTED_NODE, EXCEPTION_*
    info: str  # Thunder's message
    exception: str | None = None  # the exception Thunder's check raised, if any
    node: str | None = None  # the FX node
    frames: tuple[Frame, ...] = ()  # the node's user stack, innermost first
    module: str | None = None  # the original model's module path of the node
    module_type: str | None = None

    @property
    def user_frame(self) -> Frame | None:
        return user_frame(self.frames)


@dataclass(eq=False, slots=True)
class Piece:
    """One submodule of the split graph: run by Thunder (`thunder.jit`) or by torch (a fallback)."""

    name: str  # as in the split module: "thunder_0", "inductor_1"
    index: int  # the splitter's partition number (graph order)
    compiler: str  # "thunder", or the fallback: "inductor" (torch._inductor.compile), "eager"
    nodes: tuple[str, ...]  # its FX nodes (call_function/call_method/call_module)
    frames: tuple[Frame, ...]  # the distinct user lines of its nodes, in graph order
    reasons: tuple[SplitReason, ...] = ()  # a fallback: why its nodes are not Thunder's
    compiles: list[int] = field(default_factory=list)  # thunder.jit compile ids (CompileState.id)
    graph: DynamoGraph | None = field(default=None, repr=False)
    _fn: Any = field(default=None, repr=False)  # weakref to the compiled callable

    @property
    def thunder(self) -> bool:
        return self.compiler == "thunder"

    @property
    def fn(self) -> Any:
        """The callable that runs this piece (Thunder's jitted module, or torch's), if alive."""
        return self._fn() if self._fn is not None else None

    def set_fn(self, fn: Any) -> None:
        try:
            self._fn = weakref.ref(fn)
        except TypeError:
            self._fn = None


@dataclass(eq=False, slots=True)
class DynamoGraph:
    """One FX graph Dynamo handed to ThunderFX's backend (`ThunderCompiler.__call__`)."""

    number: int  # per process, from 1, in the order the backend was called
    compile_id: str | None  # Dynamo's compile id ("0/0": frame 0, its first compile; tlparse [0/0])
    pieces: tuple[Piece, ...] = ()
    split_reasons: tuple[SplitReason, ...] = ()  # all of Thunder's, in its order
    breaks: tuple[GraphBreak, ...] = ()  # graph breaks while Dynamo captured this frame (what ended it)
    time_ns: int = 0

    @property
    def split(self) -> bool:
        """Whether anything of this graph falls back to torch."""
        return any(not p.thunder for p in self.pieces)

    def piece(self, name: str) -> Piece | None:
        return next((p for p in self.pieces if p.name == name), None)


def untimed(graph: str, compilers: list[str], lines: list[str]) -> str:
    """What profiled figures do not hold (print_cost, the report's Time sections): the torch pieces of a
    Dynamo graph (`graph`: its compile id), which torch ran (inductor or eager) and nobody timed;
    `compilers`: one per fallback piece, `lines`: their user lines (`file.py:12`)."""
    lines = list(dict.fromkeys(lines))
    shown = ", ".join(lines[:6]) + (f" and {len(lines) - 6} more" if len(lines) > 6 else "")
    return (f"Not timed: {len(compilers)} piece(s) of Dynamo graph {graph} ran in torch "
            f"({', '.join(sorted(set(compilers)))}), not Thunder: {shown or 'no user line'}. Their time is in no row.")
