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
`graph_phases` records.

Every frame compile of a ThunderFX backend is written when it ends (`frame_compile`), whether it made a
graph or not: a backend call that raised (Thunder's splitter or a fallback's inductor compile failing;
Dynamo then restarts the frame with a graph break, or fails it) is a `backend_failed` phase of the frame,
with the error, its traceback and the user's line; a frame Dynamo gave up on (a graph break it cannot
resume from) is `skipped`. Which backend compiles a frame is read off convert_frame's `_compile` on the
stack at Dynamo's start callback; Thunder's own torch.compile executor's frames (inductor's) are not ours.

Dynamo's recompile reasons: torch's
`get_and_maybe_log_recompilation_reasons` (what `TORCH_LOGS=recompiles` and tlparse's
`recompile_reasons` show) is wrapped where convert_frame calls it; its reasons, in the user's
terms (dynamo_reasons.py), wait for the frame's graph (`dynamo_graph.recompile`).

State is per thread and bounded: at most MAX_PENDING frame compiles and MAX_GRAPHS graph ids.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from provenance.log.events import BackendFailureJSON, FrameJSON, PhaseJSON, frame_json
from provenance.log.session import SESSION
from provenance.thunder import capture, dynamo_reasons, emit, torch_trace
from provenance.thunder.capture import Capture
from provenance.thunder.compat import api
from provenance.thunder.frames import frame_at
from provenance.thunder.stack import python_stack
from provenance.thunder.state import check_fault, fail

T = api()  # this Thunder's objects (compat.py)

MAX_PENDING = 64  # frame compiles in progress or waiting for their graph, per thread
MAX_GRAPHS = 256  # Dynamo compile ids whose later phases are still attributed to their graph
MAX_FAILURES = 8  # failed backend calls kept per frame compile (the rest counted)
MAX_ERROR = 4000  # characters of an error's message
MAX_TRACEBACK = 24  # frames of an error's traceback, the innermost

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
    thunderfx: bool = False  # its backend is a ThunderCompiler: written at its end (frame_compile)
    function: tuple[str, int, str] | None = None  # the code Dynamo compiles: file, def line, name
    failures: list[BackendFailure] = field(default_factory=list)  # backend calls that raised, at most MAX_FAILURES
    more_failures: int = 0
    attempt_ns: int = 0  # where Dynamo's current attempt at the frame began (its start, or the last failure)
    breaks: int = 0  # graph breaks Dynamo logged in it


@dataclass(frozen=True, slots=True)
class BackendFailure:
    """A call of ThunderFX's backend that raised: the attempt's phases (its Dynamo tracing, the split and
    inductor compiles up to the error, at depth 1 under `backend_failed`), the error, and its traceback."""

    start_ns: int  # the attempt's start (Dynamo tracing)
    backend_ns: int  # the backend call
    end_ns: int  # the error
    error: str  # "Type: message", at most MAX_ERROR characters
    frames: tuple[FrameJSON, ...]  # the error's traceback, innermost first (the user's line in it)
    phases: tuple[PhaseJSON, ...]

    def as_phases(self) -> list[PhaseJSON]:
        return [("backend_failed", self.start_ns, self.end_ns, 0, self.error.partition("\n")[0][:300]),
                *self.phases]


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


_WRAPPERS = ("_backend", "_torchdynamo_orig_backend", "_inner_convert", "compiler_fn")


def backend_of(obj: Any, depth: int = 8) -> Any:
    """The ThunderCompiler behind `obj`: itself, what thunderfx() returned, the module
    torch.compile returned, or Dynamo's wrappers of a backend (WrapBackendDebug, ConvertFrame)."""
    if isinstance(obj, T.OptimizedModule):
        obj = getattr(obj.dynamo_ctx, "callback", None)
    for _ in range(depth):
        if obj is None or isinstance(obj, T.ThunderCompiler):
            return obj
        obj = next((v for a in _WRAPPERS if (v := getattr(obj, a, None)) is not None), None)
    return None


def _compiling() -> tuple[Any, Any]:
    """The code Dynamo is compiling and its backend: convert_frame's `_compile(code, ..., compiler_fn, ...)`
    on the stack (every torch from 2.9 to 2.12 compiles a frame there)."""
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_compile" and code.co_filename.endswith("convert_frame.py"):
            found = frame.f_locals
            return found.get("code"), found.get("compiler_fn")
        frame = frame.f_back
    return None, None


# -- Dynamo's callbacks (never raise into torch) ------------------------------------------------
def _started(args: Any) -> None:
    try:
        trigger = getattr(args.callback_trigger, "name", "")
        frames = _frames()
        if trigger == "DYNAMO":
            if capture.ACTIVE is not None:
                torch_trace.attach(capture.ACTIVE)  # put back if torch's set_logs removed it
            key = str(args.compile_id)
            now = time.time_ns()
            found = frames[key] = FrameCompile(now, recompile=_recompiles().pop(key, None), attempt_ns=now)
            code, backend = _compiling()
            if backend_of(backend) is not None:
                found.thunderfx = True
                if code is not None:
                    found.function = (code.co_filename, code.co_firstlineno, code.co_name)
                if capture.ACTIVE is not None and capture.ACTIVE.torch_trace is not None:
                    capture.ACTIVE.torch_trace.keep(key)  # torch's artifacts of a ThunderFX frame, whatever it makes
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
        if found is None or not SESSION.active:
            return
        now = time.time_ns()
        if trigger == "DYNAMO" and found.thunderfx:
            _frame_ended(key, found, now, sys.exc_info()[1])  # in torch's `finally`: the error, if one ends it
        if found.graph is None:
            return
        if trigger == "DYNAMO" and found.backend_end is not None:
            emit.graph_phases(found.graph, str(args.compile_id), [("dynamo_finish", found.backend_end, now, 0, None)])
        elif trigger == "LAZY_BACKWARD":
            emit.graph_phases(found.graph, str(args.compile_id), [("inductor_backward", found.start_ns, now, 0, None)])
    except Exception:
        pass


def _frame_ended(key: str, found: FrameCompile, now: int, error: BaseException | None) -> None:
    try:
        check_fault("dynamo_frame")
        if error is not None:  # Dynamo's Unsupported: it gives up on the frame, which runs as Python
            outcome = "skipped" if type(error).__name__ == "Unsupported" else "failed"
        elif found.graph is not None:
            outcome = "graph"
        else:  # no graph: a graph break before any op (or one in a loop, where Dynamo gives up), or no op at all
            outcome = "break" if found.breaks else "empty"
        function = frame_at(*found.function) if found.function is not None else None
        emit.frame_compile(key, found.start_ns, now, outcome, found.graph,
                           frame_json(function) if function is not None else None,
                           [f.as_phases() for f in found.failures], [_failure_json(f) for f in found.failures],
                           found.more_failures, found.breaks,
                           _error_text(error) if error is not None else None,
                           _user_stack(error) + _traceback(error) if error is not None else [])
    except Exception as exc:
        fail("dynamo_frame", exc)


def _failure_json(failure: BackendFailure) -> BackendFailureJSON:
    return {"start_ns": failure.start_ns, "backend_ns": failure.backend_ns, "end_ns": failure.end_ns,
            "error": failure.error, "frames": list(failure.frames)}


def _error_text(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".strip()
    return text if len(text) <= MAX_ERROR else text[:MAX_ERROR] + " …"


def _user_stack(error: BaseException) -> list[FrameJSON]:
    """Where in the user's code Dynamo stopped, innermost first: the stack torch attaches to its errors
    (`real_stack`, what its message's "from user code" shows); empty if it attached none."""
    stack = getattr(error, "real_stack", None)
    try:
        entries = list(stack) if stack is not None else []
    except TypeError:
        return []
    return [frame_json(frame_at(e.filename, e.lineno or 0, e.name)) for e in reversed(entries[-MAX_TRACEBACK:])]


def _traceback(error: BaseException) -> list[FrameJSON]:
    """The error's traceback, innermost first, through the exceptions it was raised from or during (Dynamo
    wraps the backend's): the innermost MAX_TRACEBACK frames, and the user's frames beyond them (the line to
    show is the innermost user frame, often under many of torch's)."""
    entries: list[Any] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen and len(entries) < 1000:
        seen.add(id(current))
        entries.extend(reversed(traceback.extract_tb(current.__traceback__)))
        current = current.__cause__ or current.__context__
    frames = [frame_at(e.filename, e.lineno or 0, e.name) for e in entries]
    kept = frames[:MAX_TRACEBACK] + [f for f in frames[MAX_TRACEBACK:] if f.user][:MAX_TRACEBACK // 2]
    return [frame_json(f) for f in kept]


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


def backend_failed(compile_id: str | None, error: BaseException, backend_ns: int, timer: SplitTimer) -> None:
    """ThunderFX's backend raised in the frame compile `compile_id` (called from its except clause)."""
    found = frame_compile(compile_id)
    if found is None:
        return
    now = time.time_ns()
    inner = [(name, start, end, depth + 1, detail) for name, start, end, depth, detail in timer.close(now)]
    if len(found.failures) < MAX_FAILURES:
        found.failures.append(BackendFailure(
            found.attempt_ns, backend_ns, now, _error_text(error), tuple(_traceback(error)),
            (("dynamo_trace", found.attempt_ns, backend_ns, 1, None), *inner)))
    else:
        found.more_failures += 1
    found.attempt_ns = now  # Dynamo restarts the frame (a graph break at the failing call) or gives up


def graph_break(compile_id: str | None) -> None:
    """Dynamo logged a graph break in the frame compile `compile_id`."""
    found = frame_compile(compile_id)
    if found is not None:
        found.breaks += 1


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
