"""Compile events for the session, read off Thunder's objects (traces, compile data and stats)."""

from __future__ import annotations

import re
import time
import traceback
import weakref
from typing import Any

import torch
from thunder.core.proxies import Proxy

from provenance.record import BSYM_ATTR as ATTR
from provenance.session import SESSION, frames_json
from provenance.stats import coverage
from provenance.thunder import passes
from provenance.thunder.passes import pass_name
from provenance.thunder.printing import printed_layout
from provenance.thunder.stack import python_stack
from provenance.thunder.state import LABELLED_AT, CompileState

_TOOK = re.compile(r"\(took (\d+) milliseconds\)")

# The user stack of each thunder.jit call, by its CompileData.
jit_stacks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _fn_name(fn: Any) -> str:
    """`module.qualname` of the jitted function, or of the class of a jitted nn.Module."""
    if fn is None:
        return "?"
    named = fn if hasattr(fn, "__qualname__") and not isinstance(fn, torch.nn.Module) else type(fn)
    return f"{getattr(named, '__module__', '?')}.{named.__qualname__}"


def compile_started(state: CompileState, compile_data: Any, compile_stats: Any) -> None:
    began = time.perf_counter_ns()
    fn = getattr(compile_data, "fn", None)
    state.fn_name = _fn_name(fn)
    state.index = SESSION.track_compile(compile_stats, state.fn_name, state.id) if compile_stats else 0
    SESSION.emit({
        "type": "compile_start", "compile": state.id, "fn": state.fn_name, "index": state.index,
        "is_module": isinstance(fn, torch.nn.Module), "time_ns": time.time_ns(),
        "jit_stack": frames_json(jit_stacks.get(compile_data, ())),
        "call_stack": frames_json(python_stack()),
    })
    state.log_ns += time.perf_counter_ns() - began


def compile_finished(state: CompileState, entry: Any, compile_stats: Any) -> None:
    began = time.perf_counter_ns()
    lists = (("prologue", entry.prologue_traces), ("computation", entry.computation_traces),
             ("epilogue", entry.epilogue_traces), ("backward", entry.backward_traces))
    for list_name, traces in lists:
        first_index: dict[int, int] = {}
        for index, trace in enumerate(traces or ()):
            if id(trace) in first_index:  # Thunder lists some traces twice
                SESSION.emit({"type": "trace", "compile": state.id, "list": list_name, "index": index,
                              "same_as": first_index[id(trace)]})
                continue
            first_index[id(trace)] = index
            SESSION.emit(trace_event(state.id, list_name, index, trace))
    final = [t for t in (entry.computation_traces[-1] if entry.computation_traces else None,
                         entry.backward_traces[-1] if entry.backward_traces else None) if t is not None]
    covs = [coverage(t) for t in final]
    state.ended = True
    now = time.perf_counter_ns()
    SESSION.emit({
        "type": "compile_end", "compile": state.id, "status": "ok", "time_ns": time.time_ns(),
        "seconds": (now - state.start_ns) / 1e9,
        "log_seconds": (state.log_ns + now - began) / 1e9,  # of which: writing this log
        "cache": {"hits": compile_stats.cache_hits, "misses": compile_stats.cache_misses,
                  "calls": compile_stats.calls} if compile_stats is not None else None,
        "final": {"ops": sum(c.total for c in covs), "with_provenance": sum(c.with_provenance for c in covs),
                  "compute": sum(c.compute for c in covs),
                  "compute_with_user_source": sum(c.compute_with_user_source for c in covs),
                  "fusions": sum(1 for t in final for b in t.bound_symbols if b.sym.is_fusion)},
    })


def compile_failed(state: CompileState, exc: BaseException) -> None:
    state.ended = True
    SESSION.emit({
        "type": "compile_error", "compile": state.id, "time_ns": time.time_ns(),
        "seconds": (time.perf_counter_ns() - state.start_ns) / 1e9,
        "error_type": f"{type(exc).__module__}.{type(exc).__qualname__}", "message": str(exc),
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
        "last_prov": SESSION.prov_id(state.last_record),
    })


def trace_event(compile_id: int, list_name: str, index: int, trace: Any) -> dict:
    label_text = passes.label_text(trace.get_provenance())
    took = _TOOK.search(label_text or "")
    event = {
        "type": "trace", "compile": compile_id, "list": list_name, "index": index,
        "pass": pass_name(label_text) if label_text else ("acquire_trace" if index == 0 else "unlabelled"),
        "label": label_text, "ms": int(took.group(1)) if took else None,
        "end_ns": trace.__dict__.get(LABELLED_AT),
    }
    if SESSION.wants_trace_text:
        text, placed = printed_layout(trace)
        ops = []
        for bsym, start, length in placed:
            outs = [o.name for o in bsym.flat_outs if isinstance(o, Proxy)]
            ops.append([start, length, bsym.sym.name, outs, SESSION.prov_id(bsym.__dict__.get(ATTR))])
        event["python"], event["ops"] = "\n".join(text), ops
    return event
