"""The whole compile of a Dynamo graph under ThunderFX, and why Dynamo compiled a frame again.

A graph's compile is more than its Thunder pieces: Dynamo traces the frame, ThunderFX's backend
splits the graph (the splitter tries each node on Thunder) and compiles every fallback piece
with inductor, Dynamo builds the frame's guards and bytecode, then each Thunder piece compiles at
its first call and inductor compiles a fallback's backward at the first backward. Each of those
is a named phase of the graph (wall-clock ns):

- Dynamo's own compile-start/-end callbacks (`torch._dynamo.callback.callback_handler`, the
  documented hook; trigger DYNAMO, per frame compile, and LAZY_BACKWARD, inductor's backward),
  keyed by Dynamo's compile id ("0/0"): `dynamo_trace` (its start to the backend call),
  `dynamo_finish` (the backend's return to its end), `inductor_backward`;
- `thunder.dynamo.compiler._splitter`: the inductor callable ThunderCompiler hands it is timed
  (`inductor_compile` per fallback piece); the rest of the backend call is `split`, and inside it
  torch's `split_module` (`split_module`, depth 1: where the splitter tries each node on Thunder, the
  nodes tried and their time in its detail);
- a Thunder piece's compile (`thunder_compile`, emit.piece_compiled).

What the backend call knows goes out with the graph (`dynamo_graph.phases`); what comes later as
`graph_phases` records. Dynamo's recompile reasons: torch's
`get_and_maybe_log_recompilation_reasons` (what `TORCH_LOGS=recompiles` and tlparse's
`recompile_reasons` show) is wrapped where convert_frame calls it; its reasons, in the user's
terms (dynamo_reasons.py), wait for the frame's graph (`dynamo_graph.recompile`).

State is per thread and bounded: at most MAX_PENDING frame compiles and MAX_GRAPHS graph ids.
"""

from __future__ import annotations

import functools
import inspect
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from provenance.log.session import SESSION
from provenance.thunder import capture, dynamo_reasons, emit, torch_trace
from provenance.thunder.capture import Capture
from provenance.thunder.compat import api
from provenance.thunder.stack import python_stack
from provenance.thunder.state import check_fault, fail

T = api()  # this Thunder's objects (compat.py)

MAX_PENDING = 64  # frame compiles in progress or waiting for their graph, per thread
MAX_GRAPHS = 256  # Dynamo compile ids whose later phases are still attributed to their graph

# .frames: OrderedDict[compile id, FrameCompile]; .recompiles: OrderedDict[compile id, DynamoRecompile]
_local = threading.local()
_lock = threading.Lock()
_graphs: OrderedDict[str, int] = OrderedDict()  # Dynamo compile id -> the graph number it made (process-wide)


@dataclass(slots=True)
class FrameCompile:
    """One Dynamo frame compile, from its start callback."""

    start_ns: int
    backend_end: int | None = None  # when ThunderCompiler returned (the frame made a ThunderFX graph)
    graph: int | None = None
    recompile: dict | None = None  # dynamo_reasons.recompile(...)
    lazy_start: int | None = None  # inductor's lazy backward compile in progress


@dataclass(slots=True)
class SplitTimer:
    """The backend call, as phases: `split` around each `inductor_compile`."""

    start_ns: int
    phases: list = field(default_factory=list)  # [name, start, end, depth, detail]
    graphs: list = field(default_factory=list)  # the FX graph each inductor_compile compiled, by phase index
    cursor: int = 0
    node_checks: int = 0  # nodes Thunder's splitter tried on Thunder (is_node_supported_by_thunder)
    node_check_ns: int = 0

    def split_module(self, start: int, end: int) -> None:
        """torch's split_module inside `split`: where the splitter tries each node on Thunder."""
        detail = f"{self.node_checks} nodes tried on Thunder in {self.node_check_ns / 1e6:.0f} ms"
        self.phases.append(["split_module", start, end, 1, detail])

    def inductor(self, start: int, end: int, graph: Any) -> None:
        if start > self.cursor:
            self.phases.append(["split", self.cursor, start, 0, None])
        self.graphs.append((len(self.phases), graph))
        self.phases.append(["inductor_compile", start, end, 0, None])
        self.cursor = end

    def close(self, end: int) -> list:
        if end > self.cursor:
            self.phases.append(["split", self.cursor, end, 0, None])
        return self.phases


current_split: ContextVar[SplitTimer | None] = ContextVar("provenance_fx_split", default=None)


def _frames() -> OrderedDict[str, FrameCompile]:
    frames = getattr(_local, "frames", None)
    if frames is None:
        frames = _local.frames = OrderedDict()
    return frames


def _recompiles() -> OrderedDict[str, dict]:
    found = getattr(_local, "recompiles", None)
    if found is None:
        found = _local.recompiles = OrderedDict()
    return found


# -- Dynamo's callbacks (never raise into torch) ------------------------------------------------
def _started(args: Any) -> None:
    try:
        trigger = getattr(args.callback_trigger, "name", "")
        frames = _frames()
        if trigger == "DYNAMO":
            if capture.ACTIVE is not None:
                torch_trace.attach(capture.ACTIVE)  # put back if torch's set_logs removed it
            key = str(args.compile_id)
            frames[key] = FrameCompile(time.time_ns(), recompile=_recompiles().pop(key, None))
            while len(frames) > MAX_PENDING:
                frames.popitem(last=False)
        elif trigger == "LAZY_BACKWARD":
            with _lock:
                graph = _graphs.get(str(args.compile_id))
            if graph is not None:
                frames[f"bw:{args.compile_id}"] = FrameCompile(time.time_ns(), graph=graph)
    except Exception:
        pass


def _ended(args: Any) -> None:
    try:
        trigger = getattr(args.callback_trigger, "name", "")
        key = str(args.compile_id) if trigger == "DYNAMO" else f"bw:{args.compile_id}"
        running = capture.ACTIVE
        if trigger == "DYNAMO" and running is not None and running.torch_trace is not None:
            running.torch_trace.frame_ended(key)  # torch's artifacts of a frame that made no ThunderFX graph
        found = _frames().pop(key, None)
        if found is None or found.graph is None or not SESSION.active:
            return
        now = time.time_ns()
        if trigger == "DYNAMO" and found.backend_end is not None:
            emit.graph_phases(found.graph, str(args.compile_id), [("dynamo_finish", found.backend_end, now, 0, None)])
        elif trigger == "LAZY_BACKWARD":
            emit.graph_phases(found.graph, str(args.compile_id), [("inductor_backward", found.start_ns, now, 0, None)])
    except Exception:
        pass


# -- what thunderfx.py asks ---------------------------------------------------------------------
def frame_compile(compile_id: str | None) -> FrameCompile | None:
    """The Dynamo frame compile in progress in this thread with this id (its start callback ran)."""
    return _frames().get(compile_id) if compile_id is not None else None


def graph_made(compile_id: str | None, graph: int, backend_end: int) -> None:
    """The backend call of `compile_id` made graph number `graph`: later phases are its."""
    found = frame_compile(compile_id)
    if found is not None:
        found.graph, found.backend_end = graph, backend_end
    if compile_id is not None:
        with _lock:
            _graphs[compile_id] = graph
            while len(_graphs) > MAX_GRAPHS:
                _graphs.popitem(last=False)
        running = capture.ACTIVE
        if running is not None and running.torch_trace is not None:
            running.torch_trace.keep(compile_id)  # its torch artifacts, held until now, are written


def name_inductor_phases(timer: SplitTimer, pieces: dict[Any, str]) -> None:
    """Name each inductor_compile after the piece whose FX graph it compiled (`pieces`: FX graph -> name)."""
    for index, graph in timer.graphs:
        timer.phases[index][4] = next((name for g, name in pieces.items() if g is graph), None)


# -- hooks ----------------------------------------------------------------------------------------
def _in_split(orig: Callable, record: Callable[[SplitTimer, int, int, tuple], None]) -> Callable:
    """`orig`, and while a backend call is timed (`current_split`), `record(timer, start_ns, end_ns, args)`
    after it (an error of ours in `record` is fail(): one warning, orig's result unchanged)."""
    @functools.wraps(orig)
    def timed(*args: Any, **kwargs: Any) -> Any:
        timer = current_split.get()
        if timer is None:
            return orig(*args, **kwargs)
        start = time.time_ns()
        try:
            return orig(*args, **kwargs)
        finally:
            try:
                record(timer, start, time.time_ns(), args)
            except Exception as exc:
                fail("thunderfx", exc)

    return timed


def _timed_inductor(inner: Callable) -> Callable:
    """The inductor callable ThunderCompiler hands the splitter: an `inductor_compile` phase per piece."""
    return _in_split(inner, lambda timer, start, end, args: timer.inductor(
        start, end, getattr(args[0], "graph", None) if args else None))


def _timed_split_module(orig: Callable) -> Callable:
    """thunder.dynamo.splitter's split_module (torch.fx's): a phase inside `split`, with the node checks."""
    return _in_split(orig, lambda timer, start, end, args: timer.split_module(start, end))


def _counted_node_check(orig: Callable) -> Callable:
    """thunder.dynamo.splitter's is_node_supported_by_thunder: counted and timed for `split_module`."""
    def count(timer: SplitTimer, start: int, end: int, args: tuple) -> None:
        timer.node_checks += 1
        timer.node_check_ns += end - start

    return _in_split(orig, count)


def _splitter(orig: Callable) -> Callable:
    """thunder.dynamo.compiler._splitter(gm, thunder_jit, torch_inductor, ...): time the inductor
    compiles it makes (only the callable ThunderCompiler passes it, not torch's own function)."""

    def splitter(gm: Any, thunder_jit: Any, torch_inductor: Any, *args: Any, **kwargs: Any) -> Any:
        if current_split.get() is not None and callable(torch_inductor):
            torch_inductor = _timed_inductor(torch_inductor)
        return orig(gm, thunder_jit, torch_inductor, *args, **kwargs)

    return splitter


def _recompilation_reasons(orig: Callable) -> Callable:
    # (cache_entry, frame, skip_logging=False) up to torch 2.10; torch 2.11 put `backend` before
    # skip_logging: where a positional skip_logging would be, after cache_entry and frame
    try:
        skip_at = list(inspect.signature(orig).parameters).index("skip_logging") - 2
    except (TypeError, ValueError):
        skip_at = -1  # keyword only, then

    def get_and_maybe_log_recompilation_reasons(cache_entry: Any, frame: Any, *args: Any, **kwargs: Any) -> Any:
        reasons = orig(cache_entry, frame, *args, **kwargs)
        try:
            check_fault("dynamo_recompile")
            skip = kwargs.get("skip_logging", args[skip_at] if 0 <= skip_at < len(args) else False)
            compile_id = T.CompileContext.current_compile_id()
            if not skip and compile_id is not None and reasons is not None:
                code = frame.f_code
                found = dynamo_reasons.recompile(
                    list(reasons), (code.co_filename, code.co_firstlineno, code.co_name),
                    next((f for f in reversed(python_stack()) if f.user), None))
                recompiles = _recompiles()  # read before the frame compile's start callback: kept until then
                recompiles[str(compile_id)] = found
                while len(recompiles) > MAX_PENDING:
                    recompiles.popitem(last=False)
        except Exception as exc:
            fail("dynamo_recompile", exc)
        return reasons

    return get_and_maybe_log_recompilation_reasons


def install(running: Capture) -> None:
    running.patcher.wrap(T.dynamo_compiler, "_splitter", _splitter)
    running.patcher.wrap(T.dynamo_splitter, "split_module", _timed_split_module)
    running.patcher.wrap(T.dynamo_splitter, "is_node_supported_by_thunder", _counted_node_check)
    running.patcher.wrap(T.convert_frame, "get_and_maybe_log_recompilation_reasons", _recompilation_reasons)
    running.listen_to_dynamo(T.dynamo_callbacks, _started, _ended)
    running.on_stop.append(_stopped)


def _stopped() -> None:
    with _lock:
        _graphs.clear()
