"""Compile events for the session, read off Thunder's objects (traces, compile data and stats)."""

from __future__ import annotations

import os
import sys
import time
import traceback
import warnings
from typing import Any

import torch

from provenance.allocation import record as memory_record
from provenance.core.caches import CACHES
from provenance.core.coverage_stats import coverage
from provenance.core.record import BSYM_ATTR as ATTR
from provenance.core.record import Frame
from provenance.dynamo.graphs import DynamoGraph, GraphBreak, Piece
from provenance.log.events import (
    BackendFailureJSON,
    CompileEnd,
    CompileError,
    CompileStart,
    DynamoGraphEvent,
    DynamoRecompile,
    ExecutorCompile,
    FrameCompileEvent,
    FrameJSON,
    FusedJSON,
    GraphBreakEvent,
    GraphPhases,
    OpJSON,
    PhaseJSON,
    Phases,
    ProfileCall,
    ProfileOps,
    Recompile,
    RejectedEntry,
    SplitReasonJSON,
    Trace,
    TraceRepeat,
    frame_json,
    frames_json,
)
from provenance.log.session import SESSION
from provenance.thunder import capture, passes
from provenance.thunder import recompile as recompiles
from provenance.thunder.compat import api
from provenance.thunder.frames import frame_of, is_user_code
from provenance.thunder.passes import pass_label
from provenance.thunder.printing import printed_layout, tracing_context
from provenance.thunder.stack import python_stack
from provenance.thunder.state import COUNTS_ATTR, LABELLED_AT, MADE_BY, CompileState, check_fault
from provenance.timing.profile import FORWARD, CompileProfile, ProfiledCall

T = api()  # this Thunder's objects (compat.py)
Proxy = T.Proxy


def fn_name(fn: Any) -> str:
    """`module.qualname` of the jitted function, or of the class of a jitted nn.Module."""
    if fn is None:
        return "?"
    named = fn if hasattr(fn, "__qualname__") and not isinstance(fn, torch.nn.Module) else type(fn)
    return f"{getattr(named, '__module__', '?')}.{named.__qualname__}"


def graph_label(graph: DynamoGraph) -> str:
    """A Dynamo graph as tlparse names it, `[0/0]`; `[graph N]` without torch's compile id."""
    return f"[{graph.compile_id}]" if graph.compile_id is not None else f"[graph {graph.number}]"


def compile_started(state: CompileState, compile_data: Any, compile_stats: Any) -> None:
    began = time.perf_counter_ns()
    fn = getattr(compile_data, "fn", None)
    piece: Piece | None = state.piece
    graph = piece.graph if piece is not None else None
    state.fn_name = f"{graph_label(graph)} {piece.name}" if graph is not None else fn_name(fn)
    if compile_stats:  # the hooks copy its counters into `counts` after each call
        state.index, counts = SESSION.track_compile(compile_stats, call_counts, state.fn_name, state.id)
        compile_stats.__dict__[COUNTS_ATTR] = counts
    running = capture.ACTIVE
    jit_stack = running.jit_stacks.get(compile_data, ()) if running is not None else ()
    call_stack = python_stack()
    state.call_frame = call_stack[-1] if call_stack else None
    event: CompileStart = {
        "type": "compile_start", "compile": state.id, "fn": state.fn_name, "index": state.index,
        "is_module": isinstance(fn, torch.nn.Module),
        "time_ns": state.phases.window_start + state.phases.wall_offset,  # the call that missed the cache
        "jit_stack": frames_json(jit_stack),
        "call_stack": frames_json(call_stack),
    }
    if graph is not None:
        event["piece"] = {"graph": graph.number, "compile_id": graph.compile_id, "name": piece.name}
    SESSION.emit(event)
    state.started = True
    state.log_ns += time.perf_counter_ns() - began


def dynamo_graph(graph: DynamoGraph, start_ns: int, dynamo_start_ns: int | None = None,
                 phases: list | None = None, recompile: DynamoRecompile | None = None) -> None:
    """A Dynamo graph ThunderFX's backend split: its pieces, and why nodes fell back to torch."""
    owner = {node: p.name for p in graph.pieces for node in p.nodes}
    reasons: list[SplitReasonJSON] = [
        {"piece": owner.get(r.node) if r.node else None, "kind": r.kind, "info": r.info, "exception": r.exception,
         "node": r.node, "frames": frames_json(r.frames), "module": r.module, "module_type": r.module_type}
        for r in graph.split_reasons]
    event: DynamoGraphEvent = {
        "type": "dynamo_graph", "graph": graph.number, "compile_id": graph.compile_id, "start_ns": start_ns,
        "time_ns": graph.time_ns,
        "pieces": [{"name": p.name, "index": p.index, "compiler": p.compiler, "nodes": len(p.nodes),
                    "frames": frames_json(p.frames)} for p in graph.pieces],
        "reasons": reasons, "dynamo_start_ns": dynamo_start_ns,
        "phases": [tuple(p) for p in phases or ()], "recompile": recompile,
    }
    SESSION.emit(event)


def graph_phases(graph: int, compile_id: str | None, phases: list) -> None:
    """Phases of a Dynamo graph's compile that came after its backend call (fx_compile.py)."""
    event: GraphPhases = {"type": "graph_phases", "graph": graph, "compile_id": compile_id,
                          "phases": [tuple(p) for p in phases]}
    SESSION.emit(event)


def piece_compiled(state: CompileState, end: int) -> None:
    """A ThunderFX piece's compile ended (`end`: perf_counter_ns): a phase of its graph."""
    graph = state.piece.graph if state.piece is not None else None
    if graph is None:
        return
    offset = state.phases.wall_offset
    graph_phases(graph.number, graph.compile_id,
                 [("thunder_compile", state.phases.window_start + offset, end + offset, 0, state.piece.name)])


def frame_compile(compile_id: str, start_ns: int, end_ns: int, outcome: str, graph: int | None,
                  function: FrameJSON | None, phases: list[list[PhaseJSON]], failures: list[BackendFailureJSON],
                  more_failures: int,
                  breaks: int, error: str | None, error_frames: list[FrameJSON]) -> None:
    """A Dynamo frame compile of a ThunderFX backend ended (fx_compile.py), whatever it made."""
    event: FrameCompileEvent = {
        "type": "frame_compile", "compile_id": compile_id, "start_ns": start_ns, "end_ns": end_ns,
        "outcome": outcome, "graph": graph, "function": function,
        "phases": [p for attempt in phases for p in attempt],
        "failures": failures, "more_failures": more_failures, "breaks": breaks,
        "error": error, "error_frames": error_frames,
    }
    SESSION.emit(event)


def graph_break(found: GraphBreak) -> None:
    event: GraphBreakEvent = {"type": "graph_break", "compile_id": found.compile_id, "time_ns": found.time_ns,
                              "reason": found.reason, "frames": frames_json(found.frames),
                              "call_stack": frames_json(found.call_stack)}
    SESSION.emit(event)


_LOOKS_UP = (T.CACHE_OPTIONS.CONSTANT_VALUES, T.CACHE_OPTIONS.SYMBOLIC_VALUES)  # modes that try the cached entries


def recompiled(state: CompileState, compile_data: Any, compile_stats: Any, args: tuple, kwargs: dict) -> None:
    """A call missed the cache although it holds entries: log why each entry rejected it, from
    the exceptions its prologue raised in this call's lookup (recompile.recording)."""
    entries = list(getattr(compile_stats, "interpreter_cache", None) or ())
    if not entries or getattr(compile_data, "cache_option", None) not in _LOOKS_UP:
        return
    check_fault("recompile")
    running = capture.ACTIVE
    built_by = running.entry_compiles if running is not None else {}
    raised = running.rejected.take() if running is not None and running.rejected is not None else {}
    found, more = recompiles.rejections(entries, raised, args, kwargs, getattr(compile_data, "fn", None), built_by)
    rejected: list[RejectedEntry] = [
        {"compile": r.compile, "reason": r.reason, "subject": r.subject, "changes": [list(c) for c in r.changes],
         "check": r.check, "error": r.error,
         "inputs": [{"subject": who, "changes": [list(c) for c in changes]} for who, changes in r.inputs]}
        for r in found]
    event: Recompile = {
        "type": "recompile", "compile": state.id, "time_ns": time.time_ns(),
        "call": frame_json(state.call_frame) if state.call_frame is not None else None,
        "reason": found[0].reason if found else "", "rejected": rejected, "more": more,
    }
    SESSION.emit(event)


def phases(state: CompileState, end: int) -> None:
    """The compile's phases, its window ending at `end` (perf_counter_ns)."""
    log = state.phases
    offset = log.wall_offset
    items: list[PhaseJSON] = [
        (name, start + offset, (stop or end) + offset, depth, detail)
        for name, start, stop, depth, detail in sorted(log.items, key=lambda item: (item[1], item[3]))]
    event: Phases = {"type": "phases", "compile": state.id, "start_ns": log.window_start + offset,
                     "end_ns": end + offset, "phases": items}
    SESSION.emit(event)


def executor_compiled(compile_id: int, executor: str, fusion: str, trace: str | None, start_ns: int,
                      end_ns: int) -> None:
    event: ExecutorCompile = {"type": "executor_compile", "compile": compile_id, "executor": executor,
                              "fusion": fusion, "trace": trace, "start_ns": start_ns, "end_ns": end_ns}
    SESSION.emit(event)


def compile_finished(state: CompileState, entry: Any, compile_stats: Any) -> None:
    began = time.perf_counter_ns()
    logging = state.phases.begin("provenance", "log")
    lists = (("prologue", entry.prologue_traces), ("computation", entry.computation_traces),
             ("epilogue", entry.epilogue_traces), ("backward", entry.backward_traces))
    for list_name, traces in lists:
        first_index: dict[int, int] = {}
        for index, trace in enumerate(traces or ()):
            if id(trace) in first_index:  # Thunder lists some traces twice
                repeat: TraceRepeat = {"type": "trace", "compile": state.id, "list": list_name, "index": index,
                                       "same_as": first_index[id(trace)]}
                SESSION.emit(repeat)
                continue
            first_index[id(trace)] = index
            SESSION.emit(trace_event(state.id, list_name, index, trace))
    final = [t for t in (entry.computation_traces[-1] if entry.computation_traces else None,
                         entry.backward_traces[-1] if entry.backward_traces else None) if t is not None]
    if state.memory is not None:
        memory_records(state.memory)
    covs = [coverage(t, passes.is_bookkeeping) for t in final]
    state.ended = True
    state.phases.end(logging)
    now = time.perf_counter_ns()
    phases(state, now)
    event: CompileEnd = {
        "type": "compile_end", "compile": state.id, "status": "ok", "time_ns": now + state.phases.wall_offset,
        "seconds": (now - state.phases.window_start) / 1e9,
        "log_seconds": (state.log_ns + now - began) / 1e9,  # of which: writing this log
        "cache": {"hits": compile_stats.cache_hits, "misses": compile_stats.cache_misses,
                  "calls": compile_stats.calls} if compile_stats is not None else None,
        "final": {"ops": sum(c.total for c in covs), "with_provenance": sum(c.with_provenance for c in covs),
                  "compute": sum(c.compute for c in covs),
                  "compute_with_user_source": sum(c.compute_with_user_source for c in covs),
                  "compute_at_module_file": sum(c.compute_at_module_file for c in covs),
                  "fusions": sum(1 for t in final for b in t.bound_symbols if b.sym.is_fusion)},
    }
    if state.memory_unknown is not None:
        event["memory_unknown"] = state.memory_unknown
    SESSION.emit(event)
    piece_compiled(state, now)


def memory_records(memory: Any) -> None:
    """The compile's static memory timeline (provenance/thunder/memory.py): one record per final trace."""
    for event in memory_record.encode(memory, SESSION.prov_id):
        SESSION.emit(event)


def compile_failed(state: CompileState, exc: BaseException) -> None:
    state.ended = True
    partial = state.acquiring
    if partial is not None and partial.bound_symbols:  # what did trace before the failure
        try:
            SESSION.emit(trace_event(state.id, "computation", 0, partial))
        except Exception:  # a trace cut short may not print: the error is what matters
            pass
    now = time.perf_counter_ns()
    phases(state, now)
    user = user_frame(exc)
    event: CompileError = {
        "type": "compile_error", "compile": state.id, "time_ns": now + state.phases.wall_offset,
        "seconds": (now - state.phases.window_start) / 1e9,
        "error_type": f"{type(exc).__module__}.{type(exc).__qualname__}", "message": _message(exc),
        "traceback": traceback_text(exc), "last_prov": SESSION.prov_id(state.last_record),
        "user_frame": frame_json(user) if user is not None else None,
    }
    SESSION.emit(event)
    piece_compiled(state, now)


_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # provenance/


def _ours(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_OURS)


def _message(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # an exception whose __str__ raises: the user sees that too
        return f"<{type(exc).__qualname__}: str() failed>"


def traceback_text(exc: BaseException) -> str:
    """The exception as Python prints it, without this package's frames (the hooks around
    Thunder's functions are not part of the user's story), chained exceptions included."""
    formatted = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
    seen: set[int] = set()
    todo = [formatted]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        current.stack = traceback.StackSummary.from_list([f for f in current.stack if not _ours(f.filename)])
        todo.extend(t for t in (current.__cause__, current.__context__) if t is not None)
    return "".join(formatted.format())


def _module_name(frame: Any) -> str:
    """The module a traceback frame's code belongs to. The frames Thunder's interpreter adds for
    the user's code it ran carry the interpreter's globals: those are looked up by file."""
    name = frame.f_globals.get("__name__", "")
    path = frame.f_code.co_filename
    module = sys.modules.get(name)
    if module is None or getattr(module, "__file__", None) == path:
        return name
    found = _modules_by_file.get(path)
    if found is None:
        found = _modules_by_file.put(path, next(
            (n for n, m in list(sys.modules.items()) if getattr(m, "__file__", None) == path), ""))
    return found


_modules_by_file = CACHES.memo("emit.modules_by_file", 1 << 12)  # file -> module name (tracebacks)


def user_frame(exc: BaseException) -> Frame | None:
    """The innermost frame of the exception's traceback that is the user's code: where it failed."""
    from provenance.core.record import user_frame as innermost

    walked = [(frame, line) for frame, line in traceback.walk_tb(exc.__traceback__)
              if not frame.f_code.co_filename.startswith("<")]
    found = innermost(reversed(walked), is_user=lambda w: is_user_code(_module_name(w[0]), w[0].f_code.co_filename))
    if found is None:
        return None
    frame, line = found
    return frame_of(frame.f_code.co_filename, line, frame.f_code.co_qualname, _module_name(frame))


def trace_event(compile_id: int, list_name: str, index: int, trace: Any) -> Trace:
    label = passes.label_text(trace.get_provenance())
    if label:
        name, ms = pass_label(label)
    else:  # Thunder's first trace, or a transform's (which Thunder does not label)
        name, ms = ("acquire_trace" if index == 0 else trace.__dict__.get(MADE_BY, "unlabelled")), None
    event: Trace = {
        "type": "trace", "compile": compile_id, "list": list_name, "index": index, "pass": name, "label": label,
        "ms": ms, "end_ns": trace.__dict__.get(LABELLED_AT),
    }
    if SESSION.wants_trace_text:
        text, placed = printed_layout(trace)
        ops: list[OpJSON] = []
        fusions: list[tuple[int, Any]] = []
        for bsym, start, length in placed:
            outs = [o.name for o in bsym.flat_outs if isinstance(o, Proxy)]
            ops.append((start, length, bsym.sym.name, outs, SESSION.prov_id(bsym.__dict__.get(ATTR))))
            if bsym.sym.is_fusion:
                fusions.append((len(ops) - 1, bsym))
        event["python"], event["ops"] = "\n".join(text), ops
        if fusions:
            event["fused"] = fused_ops(trace, fusions)
    return event


def fused_ops(trace: Any, fusions: list[tuple[int, Any]]) -> list[FusedJSON]:
    """The ops each fusion fused (its subsymbols; a fusion's fusions' ops in their place), in its
    order: [the fusion's index in the trace record's ops, the op as Thunder prints it, prov id]."""
    out: list[FusedJSON] = []
    with tracing_context(trace):  # printing a symbol reads names from its trace
        for index, fusion in fusions:
            todo = list(reversed(fusion.subsymbols))
            while todo:
                sub = todo.pop()
                if sub.sym.is_fusion and sub.subsymbols:
                    todo.extend(reversed(sub.subsymbols))
                    continue
                lines = sub.python(0, print_depth=1)
                text = next((line for line in lines if not line.lstrip().startswith("#")), lines[0] if lines else "")
                out.append((index, text.strip(), SESSION.prov_id(sub.__dict__.get(ATTR))))
    return out


def call_counts(compile_stats: Any) -> tuple[int, int, int]:
    """A jitted function's (calls, cache hits, cache misses), for the session's runtime summary."""
    return compile_stats.calls, compile_stats.cache_hits, compile_stats.cache_misses


# -- profiles (provenance/thunder/profiling.py): the ops table once per compile and trace, then one
# record per profiled run. A call record goes only to the exporters its profile's ops table went to
# (one attached later never saw the table that says what the times are of): Capture.profiles_logged.


def _logged_index(traces: Any, trace: Any) -> int | None:
    """The index in `traces` (a list the log writes) of `trace`, or of the trace it is a copy of:
    Thunder's forward function is printed from a copy of the last computation trace whose return
    alone differs (transform_to_torch_types). Its first index, as the log refers to repeats."""
    traces = list(traces or ())
    for i, listed in enumerate(traces):
        if listed is trace:
            return i
    if traces:
        last, mine = traces[-1].bound_symbols, trace.bound_symbols
        if len(last) == len(mine) and all(a is b for a, b in zip(last[:-1], mine[:-1])):
            return next(i for i, listed in enumerate(traces) if listed is traces[-1])
    return None


def profile_started(profile: CompileProfile, entry: Any, traces: dict[str, Any]) -> None:
    """Write the ops table of each profiled trace of a compile (at the end of the compile)."""
    running = capture.ACTIVE
    if not SESSION.active or running is None:
        return
    for name, trace in traces.items():
        timed = profile.traces[name]
        listed = entry.computation_traces if name == FORWARD else entry.backward_traces
        event: ProfileOps = {
            "type": "profile_ops", "compile": profile.compile_id, "trace": name,
            "list": "computation" if name == FORWARD else "backward", "index": _logged_index(listed, trace),
            "clock": timed.clock, "requested": profile.requested,
            "ops": [(op.position, op.name, SESSION.prov_id(op.record), op.printed) for op in timed.ops],
        }
        SESSION.emit(event)
    running.profiles_logged[profile] = tuple(SESSION.exporters)


def profile_called(profile: CompileProfile, call: ProfiledCall) -> None:
    """A profiled run of a trace (provenance.timing.profile.call_listeners): one record, written as it is
    (the op times are a tuple of ints already; orjson writes it as an array)."""
    running = capture.ACTIVE
    targets = running.profiles_logged.get(profile) if running is not None else None
    if not targets or not SESSION.active:
        return
    try:
        event: ProfileCall = {
            "type": "profile_call", "compile": call.compile_id, "trace": call.trace, "call": call.call,
            "wall_ns": call.wall_ns, "op_ns": call.op_ns, "host_ns": call.host_ns, "time_ns": call.time_ns,
        }
        if call.compiled:
            event["compiled"] = [list(c) for c in call.compiled]
        if call.memory is not None:
            event["memory"], event["memory_peak"] = call.memory, call.memory_peak
        SESSION.emit(event, only=targets)
    except Exception as exc:  # this compile's calls go unlogged; the others' are still written
        running.profiles_logged.pop(profile, None)
        warnings.warn(f"thunder-provenance: logging the profile of {profile.fn_name} failed ({exc!r}); its "
                      f"calls are still profiled, not logged.", RuntimeWarning, stacklevel=2)
