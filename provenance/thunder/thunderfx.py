"""ThunderFX hooks: each Dynamo graph, the pieces Thunder's splitter cut it into, and why.

- `ThunderCompiler.__call__` (both `thunderfx()` and `torch.compile(backend=ThunderCompiler())`
  call it once per Dynamo graph): after the split, reads the `SubgraphInfo` Thunder appended
  (pieces, `split_reasons`) into a `DynamoGraph`; tells fx_source.py where the traced frame's `self`
  sits in the model; maps each Thunder piece's CompileData to its `Piece`, so the compiles of
  the piece (lazily, at its first call) are linked to it (`attach`).
- `thunder.dynamo.utils.try_execute_thunder_symbol`: the splitter runs each FX node's Thunder
  symbol (often with autograd) on proxies to see whether Thunder takes it; those symbols are
  thrown away, so capture is suspended meanwhile (it cost as much as capturing a compile).
- Dynamo's `log_graph_break`: torch calls it for every graph break (it writes the
  `dynamo_graph_break_reason` artifact of TORCH_TRACE and the `graph_breaks` log), with the reason
  and the user stack: a function of `torch._dynamo.symbolic_convert` on torch 2.9, a method of
  its `InstructionTranslatorBase` from 2.10 (compat.py's `one_of`, `graph_break_stack`). Kept when the
  frame's backend is a ThunderCompiler.

Registries are bounded and weak: nothing here keeps a model, a backend or a piece alive.
"""

from __future__ import annotations

import inspect
import itertools
import re
import sys
import threading
import time
import warnings
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

import torch
from torch.fx import GraphModule

from provenance.core.record import Frame
from provenance.dynamo.graphs import DynamoGraph, GraphBreak, Piece, SplitReason
from provenance.log.session import SESSION
from provenance.thunder import capture, emit, fx_compile, fx_source, state
from provenance.thunder.compat import api, graph_break_stack, present_one
from provenance.thunder.frames import frame_at
from provenance.thunder.fx_compile import backend_of
from provenance.thunder.patching import Patcher
from provenance.thunder.stack import python_stack
from provenance.thunder.state import CompileState, check_fault, fail

T = api()  # this Thunder's objects (compat.py)
thunder, ThunderCompiler, symbolic_convert = T.thunder, T.ThunderCompiler, T.symbolic_convert

MAX_GRAPHS = 256  # kept per process (and per backend): the most recent
MAX_BREAKS = 1024

_lock = threading.Lock()
_numbers = itertools.count(1)
_graphs: deque[DynamoGraph] = deque(maxlen=MAX_GRAPHS)
_breaks: deque[GraphBreak] = deque(maxlen=MAX_BREAKS)
_by_backend: weakref.WeakKeyDictionary[Any, deque[DynamoGraph]] = weakref.WeakKeyDictionary()
_breaks_by_backend: weakref.WeakKeyDictionary[Any, deque[GraphBreak]] = weakref.WeakKeyDictionary()

# Called (in the compiling thread) with each new DynamoGraph / GraphBreak; an exception in a
# listener is an internal error (one warning), never the user's.
graph_listeners: list[Callable[[DynamoGraph], None]] = []
break_listeners: list[Callable[[GraphBreak], None]] = []


# -- the capture-side API (provenance.fx_graphs / graph_breaks) --------------------------------
def graphs(compiled: Any = None) -> list[DynamoGraph]:
    """The Dynamo graphs of `compiled` (what `thunderfx()` returned, a ThunderCompiler, or a
    module `torch.compile` returned), oldest first; all of the process's recent ones if None."""
    with _lock:
        if compiled is None:
            return list(_graphs)
        backend = backend_of(compiled)
        return list(_by_backend.get(backend, ())) if backend is not None else []


def breaks(compiled: Any = None) -> list[GraphBreak]:
    """Dynamo's graph breaks in frames compiled by `compiled`'s ThunderCompiler (all if None)."""
    with _lock:
        if compiled is None:
            return list(_breaks)
        backend = backend_of(compiled)
        return list(_breaks_by_backend.get(backend, ())) if backend is not None else []


def piece_of(compile_data: Any) -> Piece | None:
    """The piece a thunder.jit function (by its CompileData) compiles, if ThunderFX made it
    while this capture runs (Capture.pieces)."""
    running = capture.ACTIVE
    return running.pieces.get(compile_data) if running is not None and compile_data is not None else None


def attach(state: CompileState, compile_data: Any) -> None:
    """At the start of a thunder.jit compile: link it to its ThunderFX piece, if it has one."""
    piece = piece_of(compile_data)
    if piece is not None:
        state.piece = piece
        with _lock:
            piece.compiles.append(state.id)


# -- hooks ----------------------------------------------------------------------------------
def _compiler_call(orig: Callable) -> Callable:
    def __call__(self: ThunderCompiler, gm: GraphModule, sample_args: Any) -> Any:
        context = compile_id = None
        before = len(self.subgraph_infos)
        start_ns = time.time_ns()
        timer = fx_compile.SplitTimer(start_ns, cursor=start_ns)
        try:
            check_fault("thunderfx")
            context = _graph_context()
            compile_id = _compile_id(gm)
        except Exception as exc:
            fail("thunderfx", exc)
        token = fx_compile.current_split.set(timer)
        try:
            result = orig(self, gm, sample_args)
        except BaseException as error:  # Dynamo restarts the frame with a graph break, or fails it
            try:
                fx_compile.backend_failed(compile_id, error, start_ns, timer)
            except Exception as exc:
                fail("thunderfx", exc)
            raise
        finally:
            fx_compile.current_split.reset(token)
        try:
            if context is not None and len(self.subgraph_infos) > before:
                _record(self, self.subgraph_infos[-1], compile_id, context, timer)
        except Exception as exc:
            fail("thunderfx", exc)
        return result

    return __call__


def _log_graph_break(orig: Callable) -> Callable:
    """Dynamo's graph-break log, whichever of its shapes this torch has (compat.graph_break_stack)."""
    signature = inspect.signature(orig)

    def log_graph_break(*args: Any, **kwargs: Any) -> Any:
        try:
            check_fault("thunderfx")
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            found = graph_break_stack(bound.arguments)
            if found is not None:
                _record_break(*found)
        except Exception as exc:
            fail("thunderfx", exc)
        return orig(*args, **kwargs)

    return log_graph_break


def _suspended(orig: Callable) -> Callable:
    def try_execute_thunder_symbol(*args: Any, **kwargs: Any) -> Any:
        token = state.suspended.set(True)
        try:
            return orig(*args, **kwargs)
        finally:
            state.suspended.reset(token)

    return try_execute_thunder_symbol


def install(patcher: Patcher) -> None:
    patcher.wrap(ThunderCompiler, "__call__", _compiler_call)
    patcher.wrap(T.dynamo_utils, "try_execute_thunder_symbol", _suspended)
    try:
        owner, attribute = present_one("graph_break_log")
    except AttributeError as exc:  # a torch that moved it again: everything else is still captured
        warnings.warn(f"thunder-provenance: Dynamo's graph breaks are not recorded on torch {torch.__version__} "
                      f"({exc}); the rest of ThunderFX is.", RuntimeWarning, stacklevel=2)
        return
    patcher.wrap(getattr(T, owner), attribute, _log_graph_break)


# -- reading Dynamo and the splitter ----------------------------------------------------------
def _current_tx() -> Any:
    try:
        return symbolic_convert.InstructionTranslator.current_tx()
    except AttributeError:  # not inside Dynamo's tracing
        return None


def _compile_id(gm: GraphModule) -> str | None:
    compile_id = gm.meta.get("dynamo_compile_id") if isinstance(getattr(gm, "meta", None), dict) else None
    if compile_id is None:
        compile_id = T.CompileContext.current_compile_id()
    return str(compile_id) if compile_id is not None else None


def _graph_context() -> fx_source.GraphContext:
    """Where the frame Dynamo traced sits: its `self`, and that module's path in the model the
    user compiled (the OptimizedModule's, else the outermost module on the Python stack)."""
    tx = _current_tx()
    if tx is None:
        return fx_source.GraphContext()
    self_ = tx.f_locals.get("self") if isinstance(tx.f_locals, dict) else None
    module = self_ if isinstance(self_, torch.nn.Module) else None
    resumed = fx_source.RESUME.match(tx.f_code.co_name)
    stack = _stack_modules()  # innermost first: (code, module)
    if module is None and resumed:  # a resume function without `self`: the function it resumes
        module = next((m for code, m in stack if code.co_name == resumed["name"]
                       and code.co_filename == tx.f_code.co_filename), None)
    if module is None:
        return fx_source.GraphContext()
    compiled = next((m for _, m in stack if isinstance(m, T.OptimizedModule)), None)
    root = getattr(compiled, "_orig_mod", None) if compiled is not None else (stack[-1][1] if stack else None)
    prefix = ""
    if isinstance(root, torch.nn.Module) and root is not module:
        prefix = next((name for name, m in root.named_modules(remove_duplicate=False) if m is module), "")
    return fx_source.GraphContext(prefix=prefix, root_type=type(module).__name__, root_class=type(module))


def _stack_modules() -> list[tuple[Any, torch.nn.Module]]:
    found = []
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_argcount and code.co_varnames[0] == "self":
            self_ = frame.f_locals.get("self")
            if isinstance(self_, torch.nn.Module):
                found.append((code, self_))
        frame = frame.f_back
    return found


_NODE_NAME = re.compile(r"node with name: (?P<name>\S+) and target")


def _split_reason(reason: Any, nodes: dict[str, Any], context: fx_source.GraphContext) -> SplitReason:
    info = str(getattr(reason, "info", "") or "")
    named = _NODE_NAME.search(info)  # every SplitReason Thunder 0.2.6 makes names its node so
    node = nodes.get(named["name"]) if named else None
    where = fx_source.node_info(node, context) if node is not None else None
    kind = getattr(reason, "reason_type", None)
    exception = getattr(reason, "exception", None)
    return SplitReason(
        kind=getattr(kind, "name", str(kind)), info=info, exception=str(exception) if exception else None,
        node=named["name"] if named else None, frames=where.frames if where else (),
        module=where.module if where else None, module_type=where.module_type if where else None,
    )


def _record(backend: ThunderCompiler, info: Any, compile_id: str | None, context: fx_source.GraphContext,
            timer: fx_compile.SplitTimer) -> None:
    start_ns = timer.start_ns
    nodes = {n.name: n for n in info.original_graph_module.graph.nodes}
    reasons = tuple(_split_reason(r, nodes, context) for r in info.split_reasons or ())
    original = info.original_split_graph_module  # Thunder's _ThunderSplitGraphModule (before compiling)
    split = info.split_graph_module  # the pieces replaced by their compiled callables
    pieces: list[Piece] = []
    fallback_graphs: dict[Any, str] = {}  # a fallback's FX graph -> its piece (the inductor compile of it)
    for node in original.split_graph_module.graph.nodes:
        if node.op != "call_module" or not node.name.startswith("submod_"):
            continue
        index = int(node.name.removeprefix("submod_"))
        thunder_piece = original.is_thunder_supported_partition(node)
        name = f"{'thunder' if thunder_piece else 'inductor'}_{index}"
        submodule = original.split_graph_module.get_submodule(node.target)
        names = tuple(n.name for n in submodule.graph.nodes if n.op.startswith("call_"))
        fn = getattr(split, name, None)
        compiler = "thunder" if thunder_piece else ("eager" if isinstance(fn, GraphModule) else "inductor")
        piece = Piece(
            name=name, index=index, compiler=compiler, nodes=names,
            frames=_distinct_lines(fx_source.node_info(n, context) for n in submodule.graph.nodes if n.name in names),
            reasons=tuple(r for r in reasons if r.node in names),
        )
        if fn is not None:
            piece.set_fn(fn)
            if not thunder_piece and getattr(fn, "graph", None) is not None:
                fallback_graphs[fn.graph] = name
        if thunder_piece and fn is not None:
            compile_data = thunder.compile_data(fn)
            if compile_data is not None:
                running = capture.ACTIVE
                if running is not None:
                    running.pieces[compile_data] = piece
                if isinstance(compile_data.fn, GraphModule):
                    fx_source.set_context(compile_data.fn, context)
        pieces.append(piece)
    with _lock:
        graph_breaks = tuple(b for b in _breaks_by_backend.get(backend, ()) if b.compile_id == compile_id)
        graph = DynamoGraph(number=next(_numbers), compile_id=compile_id, pieces=tuple(pieces),
                            split_reasons=reasons, breaks=graph_breaks, time_ns=time.time_ns())
        for piece in pieces:
            piece.graph = graph
        _graphs.append(graph)
        _by_backend.setdefault(backend, deque(maxlen=MAX_GRAPHS)).append(graph)
    phases = timer.close(graph.time_ns)
    fx_compile.name_inductor_phases(timer, fallback_graphs)
    frame = fx_compile.frame_compile(compile_id)
    dynamo_start = frame.start_ns if frame is not None and frame.start_ns <= start_ns else None
    if frame is not None and dynamo_start is not None:  # Dynamo's tracing of the frame, up to the backend call
        # (after the attempts whose backend call raised: Dynamo traced the frame again from their end)
        failed = [list(p) for f in frame.failures for p in f.as_phases()]
        phases[:0] = [*failed, ["dynamo_trace", frame.attempt_ns, start_ns, 0, None]]
    fx_compile.graph_made(compile_id, graph.number, graph.time_ns)
    if SESSION.active:
        emit.dynamo_graph(graph, start_ns, dynamo_start, phases, frame.recompile if frame is not None else None)
    for listener in list(graph_listeners):
        listener(graph)


def _distinct_lines(infos: Any) -> tuple[Frame, ...]:
    seen: dict[Frame, None] = {}
    for info in infos:
        frame = next((f for f in info.frames if f.user), None)
        if frame is not None:
            seen.setdefault(frame, None)
    return tuple(seen)


def _record_break(reason: str, user_stack: Any) -> None:
    tx = _current_tx()
    backend = backend_of(getattr(getattr(tx, "output", None), "compiler_fn", None)) if tx is not None else None
    if backend is None:
        return  # not a ThunderFX compile
    if user_stack is None:
        user_stack = T.TracingContext.extract_stack()  # what log_graph_break itself falls back to
    frames = tuple(frame_at(s.filename, s.lineno or 0, fx_source.function_name(s.name))
                   for s in reversed(list(user_stack)))
    current = T.CompileContext.current_compile_id()
    compile_id = str(current) if current else None
    fx_compile.graph_break(compile_id)
    graph_break = GraphBreak(reason=reason, frames=frames, compile_id=compile_id, time_ns=time.time_ns(),
                             call_stack=tuple(python_stack()))
    with _lock:
        _breaks.append(graph_break)
        _breaks_by_backend.setdefault(backend, deque(maxlen=MAX_BREAKS)).append(graph_break)
    if SESSION.active:
        emit.graph_break(graph_break)
    for listener in list(break_listeners):
        listener(graph_break)
