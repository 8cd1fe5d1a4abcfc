"""OpenTelemetry exporter: the session's events as spans and metrics.

Spans: one per compile (root, or under its ThunderFX piece; a recompile carries its reason), its
phases as children at their real start and end (nested phases under theirs), a fusion executor's
compile at the first call as a late child, one span per `provenance.scope` span; a compile that
raised records the exception; with profiling on, one per profiled run of a forward or backward
trace, its top user lines as attributes; with wait counters on, one per collective wait that
blocked at least a second (the `wait` records). ThunderFX: one span per Dynamo graph (its graph breaks
as events), a child per piece (`thunder.split.reason` on those that fell back to torch), and
each Thunder piece's compiles under its piece. Metrics: compile, phase and pass durations, ops
and fusions per compile, cache hits and misses, (opt-in) wait counters, and with profiling on
`thunder.op.duration`: op time by module and role (ProfileTables: each profiled trace's ops, their label
sets and lines); with capture on, per compile
`thunder.memory.saved_for_backward` and `thunder.memory.peak` (bytes) by module and role, from the
`memory` records (docs/memory.md).

Configuration follows OpenTelemetry's conventions (`from_environment`): an application that
configured a TracerProvider gets its spans there; otherwise, when OTEL_EXPORTER_OTLP_ENDPOINT
(or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, this package configures the SDK itself with a
batch processor and the OTLP/HTTP exporter; OTEL_SDK_DISABLED=true turns it all off. Nothing
flushes on the compile path, exports time out after 1 s, and closing waits at most 1.5 s, so a
collector that is down or slow never holds up compiles or the program's exit.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple

from opentelemetry import metrics, trace
from opentelemetry.trace import Status, StatusCode

from provenance._version import __version__
from provenance.allocation.static_memory import live_after, peak_position
from provenance.core import attribution
from provenance.core.record import user_frame
from provenance.log.events import TYPES, Event

WaitSnapshot = Callable[[], dict[tuple[str | None, str | None], tuple[float, int]]]  # provenance.timing.waits

EXPORT_TIMEOUT_S = 1.0
CLOSE_DEADLINE_S = 1.5
MAX_PROFILED = 256  # profiled (compile, trace) ops tables kept: the calls of older ones are not exported
MAX_LABEL_SETS = 2000  # distinct thunder.op.duration label sets; beyond, the module is "(other)"
TOP_LINES = 5  # lines named on a profiled run's span
MAX_PIECE_SPANS = 1024  # ThunderFX pieces whose span a later compile can be a child of
MAX_PENDING_BREAKS = 256  # Dynamo compile ids whose graph breaks wait for their graph
WAIT_SPAN = "thunder.wait "  # a long collective wait's span: "thunder.wait torch_all_reduce_prim_impl"


def _logged_user(frame: list) -> bool:
    """Whether a logged frame, `[file, line, function, text, user, ...]`, is the user's."""
    return len(frame) >= 5 and bool(frame[4])


def _code_attributes(frames: list) -> dict[str, Any]:
    """Semantic conventions for code: the innermost user frame of a logged stack, outermost first."""
    user = user_frame(reversed(frames), is_user=_logged_user)
    if user is None:
        return {}
    file, line, function = user[:3]
    return {"code.file.path": file, "code.line.number": line, "code.function.name": function}


class OtelExporter:
    """Spans and metrics through these providers. `owned`: this package configured them (it
    shuts them down at close); `span_exporter`: the CountingExporter behind the tracer provider,
    whose failed exports `stats()` reports; `waits`: observe wait counters (see observe_waits)."""

    name = "otel"
    needs_trace_text = False  # pass timings only: the session skips printing traces for us
    # What this consumer of the event stream does with each type of provenance/log/events.py: handled by
    # its `_on_<type>` method (HANDLERS, found once below), or ignored, with why. Every type is one or
    # the other (tests/exporters/test_otel.py checks it against events.TYPES).
    IGNORED: dict[str, str] = {
        "library": "the libraries a process imported: the report's run table; nothing here to time or count",
        "torch_trace": "torch's compiler artifacts (graphs, guards, generated code): text for the report's graph "
                       "pages, not spans; captured only for an exporter that keeps trace text, which this is not",
    }
    HANDLERS: dict[str, Callable[[OtelExporter, Event], None]] = {}

    def __init__(self, tracer_provider: Any, meter_provider: Any, *, owned: bool = False,
                 rank: int | None = None, span_exporter: CountingExporter | None = None,
                 waits: WaitSnapshot | None = None) -> None:
        self._tracer = tracer_provider.get_tracer("thunder-provenance", __version__)
        self._owned = (tracer_provider, meter_provider) if owned else None
        self._span_exporter = span_exporter
        self._events = self._spans = 0
        self._observing_waits = False
        self._common = {"thunder.rank": rank} if rank is not None else {}
        self._compiles: dict[int, Any] = {}
        self._ended: OrderedDict[int, Any] = OrderedDict()  # span contexts of ended compiles (late children)
        self._scopes: dict[int, Any] = {}
        self._pieces: OrderedDict[tuple[int, str], Any] = OrderedDict()  # ThunderFX pieces' span contexts
        self._graphs: OrderedDict[int, Any] = OrderedDict()  # Dynamo graphs' span contexts (their later phases)
        self._breaks: OrderedDict[str | None, list] = OrderedDict()  # graph breaks waiting for their graph
        self._reported_hits: dict[str, int] = {}
        meter = meter_provider.get_meter("thunder-provenance", __version__)
        self._compile_seconds = meter.create_histogram("thunder.compile.duration", unit="s",
                                                       description="thunder.jit compile time")
        self._pass_seconds = meter.create_histogram("thunder.pass.duration", unit="s",
                                                    description="time of one Thunder pass, as Thunder reports it")
        self._phase_seconds = meter.create_histogram("thunder.phase.duration", unit="s",
                                                     description="time of one phase of a compile")
        self._graph_seconds = meter.create_histogram(
            "thunder.dynamo.phase.duration", unit="s",
            description="time of one phase of a Dynamo graph's whole compile (ThunderFX)")
        self._ops = meter.create_histogram("thunder.compile.ops", unit="{op}",
                                           description="bound symbols in the final forward+backward traces")
        self._fusions = meter.create_histogram("thunder.compile.fusions", unit="{fusion}",
                                               description="fusions in the final traces")
        self._op_seconds = meter.create_histogram(
            "thunder.op.duration", unit="s",
            description="time of the ops of one module and role in one profiled run of a trace (profiling on)")
        self._profiled = ProfileTables()
        self._saved_bytes = meter.create_histogram(
            "thunder.memory.saved_for_backward", unit="By",
            description="bytes one compile's forward saves for the backward, by module and role (static timeline)")
        self._peak_bytes = meter.create_histogram(
            "thunder.memory.peak", unit="By",
            description="bytes live at the peak of one compile's forward or backward trace, by module and role "
                        "(static timeline, inputs apart)")
        self._misses = meter.create_counter("thunder.cache.misses", unit="{compile}",
                                            description="calls that compiled")
        self._hits = meter.create_counter("thunder.cache.hits", unit="{call}",
                                          description="calls served from the compile cache")
        self._meter = meter
        if waits is not None:
            self.observe_waits(waits)

    def stats(self) -> dict[str, Any]:
        """`events` received, `spans` ended, `dropped_spans`: spans whose export failed (None when
        the application's providers export them: they are its to count)."""
        dropped = self._span_exporter.dropped if self._span_exporter is not None else None
        return {"events": self._events, "spans": self._spans, "dropped_spans": dropped}

    # -- events ------------------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        self._events += 1
        handler = self.HANDLERS.get(event["type"])
        if handler is not None:
            handler(self, event)

    def _on_header(self, event: Event) -> None:
        if event.get("rank") is not None:
            self._common["thunder.rank"] = event["rank"]

    def _on_prov(self, event: Event) -> None:
        self._profiled.prov(event)

    def _on_compile_start(self, event: Event) -> None:
        self._profiled.fns[event["compile"]] = event["fn"]
        while len(self._profiled.fns) > 4 * MAX_PROFILED:
            self._profiled.fns.popitem(last=False)
        attributes = {**self._common, "thunder.compile_id": event["compile"], "thunder.function": event["fn"],
                      "thunder.compile_index": event["index"], "thunder.is_module": bool(event.get("is_module")),
                      **_code_attributes(event.get("call_stack") or event.get("jit_stack") or [])}
        piece = event.get("piece")
        parent = None
        if piece is not None:  # a ThunderFX piece's compile: a child of its piece's span
            attributes.update({"thunder.dynamo.graph": piece["graph"], "thunder.piece": piece["name"]})
            if piece["compile_id"] is not None:
                attributes["thunder.dynamo.compile_id"] = piece["compile_id"]
            parent = self._pieces.get((piece["graph"], piece["name"]))
        self._compiles[event["compile"]] = self._tracer.start_span(
            f"thunder.compile {event['fn'].rsplit('.', 1)[-1]}" if piece is None else f"thunder.compile {event['fn']}",
            context=trace.set_span_in_context(parent) if parent is not None else None, start_time=event["time_ns"],
            attributes=attributes)
        self._misses.add(1, {**self._common, "thunder.function": event["fn"]})

    def _on_trace(self, event: Event) -> None:
        if event.get("ms") is not None and event.get("pass"):
            self._pass_seconds.record(event["ms"] / 1e3, {**self._common, "thunder.pass": event["pass"]})

    def _on_recompile(self, event: Event) -> None:
        span = self._compiles.get(event["compile"])
        if span is None:
            return
        rejected = event.get("rejected") or []
        attributes: dict[str, Any] = {"thunder.recompile.reason": event.get("reason") or "",
                                      "thunder.recompile.reasons": [str(r.get("reason")) for r in rejected]}
        if rejected and isinstance(rejected[0].get("compile"), int):
            attributes["thunder.recompile.diverged_from"] = rejected[0]["compile"]
        span.set_attributes(attributes)

    def _on_phases(self, event: Event) -> None:
        root = self._compiles.get(event["compile"])
        if root is None:
            return
        parents = [root]  # by depth: the enclosing phase's span
        for name, start, end, depth, detail in event.get("phases") or ():
            del parents[depth + 1:]
            parent = parents[-1] if depth < len(parents) else root
            attributes = {**self._common, "thunder.compile_id": event["compile"], "thunder.phase": name}
            if detail:
                attributes["thunder.phase.detail"] = detail
            span = self._tracer.start_span(f"thunder.phase {name}", context=trace.set_span_in_context(parent),
                                           start_time=start, attributes=attributes)
            span.end(end_time=end)
            self._spans += 1
            parents.append(span)
            self._phase_seconds.record((end - start) / 1e9, {**self._common, "thunder.phase": name})

    def _on_executor_compile(self, event: Event) -> None:
        parent = self._ended.get(event["compile"]) or self._compiles.get(event["compile"])
        if parent is None:
            return
        span = self._tracer.start_span(
            f"thunder.executor_compile {event['fusion']}", context=trace.set_span_in_context(parent),
            start_time=event["start_ns"],
            attributes={**self._common, "thunder.compile_id": event["compile"], "thunder.executor": event["executor"],
                        "thunder.fusion": event["fusion"], "thunder.trace_list": event.get("trace") or ""})
        span.end(end_time=event["end_ns"])
        self._spans += 1

    def _on_graph_break(self, event: Event) -> None:
        """Kept until the graph it ended arrives (same compile id), as an event of that graph's span."""
        self._breaks.setdefault(event["compile_id"], []).append(event)
        while len(self._breaks) > MAX_PENDING_BREAKS:
            self._breaks.popitem(last=False)

    def _on_dynamo_graph(self, event: Event) -> None:
        """A span per Dynamo graph (the backend call: split, fallbacks compiled), a child per piece;
        a Thunder piece's compiles, later, become children of its piece's span."""
        compile_id, pieces = event["compile_id"], event["pieces"]
        attributes = {**self._common, "thunder.dynamo.graph": event["graph"], "thunder.dynamo.pieces": len(pieces),
                      "thunder.dynamo.fallbacks": sum(1 for p in pieces if p["compiler"] != "thunder")}
        if compile_id is not None:
            attributes["thunder.dynamo.compile_id"] = compile_id
        label = f"[{compile_id}]" if compile_id is not None else f"[graph {event['graph']}]"
        start, end = event["start_ns"], event["time_ns"]
        recompile = event.get("recompile")
        if recompile:  # Dynamo compiled the frame again: why, in the user's terms
            failures = recompile.get("failures") or []
            attributes.update({"thunder.dynamo.recompile.reason": recompile.get("reason") or "",
                               "thunder.dynamo.recompile.reasons": [str(f.get("reason")) for f in failures],
                               "thunder.dynamo.recompile.guards": [str(f.get("guard")) for f in failures]})
            if recompile.get("call"):
                attributes.update(_code_attributes([recompile["call"]]))
        graph = self._tracer.start_span(f"thunder.dynamo_graph {label}",
                                        start_time=event.get("dynamo_start_ns") or start, attributes=attributes)
        self._graph_phases(graph, event["graph"], compile_id, event.get("phases") or ())
        self._graphs[event["graph"]] = trace.NonRecordingSpan(graph.get_span_context())
        while len(self._graphs) > MAX_PIECE_SPANS:
            self._graphs.popitem(last=False)
        for found in self._breaks.pop(compile_id, ()):
            graph.add_event("thunder.graph_break", {"thunder.graph_break.reason": found["reason"].strip()[:2000],
                                                    **_code_attributes(list(reversed(found["frames"])))},
                            timestamp=found["time_ns"])
        context = trace.set_span_in_context(graph)
        for piece in pieces:
            piece_attributes = {**self._common, "thunder.dynamo.graph": event["graph"], "thunder.piece": piece["name"],
                                "thunder.piece.compiler": piece["compiler"], "thunder.piece.nodes": piece["nodes"],
                                **_code_attributes(list(reversed(piece["frames"][:1])))}
            reasons = [r for r in event["reasons"] if r["piece"] == piece["name"]]
            if piece["compiler"] != "thunder":
                piece_attributes["thunder.split.reason"] = "; ".join(
                    f"{r['kind']}: {r['info']}" for r in reasons)[:2000] or "(none given)"
                piece_attributes["thunder.split.nodes"] = [str(r["node"]) for r in reasons]
            span = self._tracer.start_span(f"thunder.piece {piece['name']}", context=context, start_time=start,
                                           attributes=piece_attributes)
            span.end(end_time=end)
            self._spans += 1
            self._pieces[(event["graph"], piece["name"])] = trace.NonRecordingSpan(span.get_span_context())
        while len(self._pieces) > MAX_PIECE_SPANS:
            self._pieces.popitem(last=False)
        graph.end(end_time=end)
        self._spans += 1

    def _graph_phases(self, parent: Any, graph: int, compile_id: str | None, phases: Any) -> None:
        """A Dynamo graph's phases as children of its span (those after its backend call end after it)."""
        context = trace.set_span_in_context(parent)
        for name, start, end, _depth, detail in phases:
            attributes = {**self._common, "thunder.dynamo.graph": graph, "thunder.phase": name}
            if compile_id is not None:
                attributes["thunder.dynamo.compile_id"] = compile_id
            if detail:
                attributes["thunder.phase.detail"] = detail
            span = self._tracer.start_span(f"thunder.dynamo_phase {name}", context=context, start_time=start,
                                           attributes=attributes)
            span.end(end_time=end)
            self._spans += 1
            self._graph_seconds.record((end - start) / 1e9, {**self._common, "thunder.phase": name})

    def _on_frame_compile(self, event: Event) -> None:
        """A frame compile that made no graph (failed, skipped, empty): a span of its own with its
        failed backend calls and its breaks (a graph's frame compile is its graph's span)."""
        compile_id = event["compile_id"]
        breaks = self._breaks.pop(compile_id, [])
        if event["outcome"] == "graph":
            return
        attributes = {**self._common, "thunder.dynamo.compile_id": compile_id,
                      "thunder.dynamo.outcome": event["outcome"], "thunder.dynamo.breaks": event["breaks"],
                      "thunder.dynamo.backend_failures": len(event["failures"]) + event["more_failures"],
                      **_code_attributes([event["function"]] if event["function"] else [])}
        error = event["error"] or (event["failures"][-1]["error"] if event["failures"] else None)
        stack = event["error_frames"] or (event["failures"][-1]["frames"] if event["failures"] else [])
        if stack:  # the line the error came from, else the function
            attributes.update(_code_attributes(list(reversed(stack))))
        span = self._tracer.start_span(f"thunder.dynamo_frame [{compile_id}]", start_time=event["start_ns"],
                                       attributes=attributes)
        self._graph_phases(span, 0, compile_id, event["phases"])
        for found in breaks:
            span.add_event("thunder.graph_break", {"thunder.graph_break.reason": found["reason"].strip()[:2000],
                                                   **_code_attributes(list(reversed(found["frames"])))},
                           timestamp=found["time_ns"])
        if error:
            span.add_event("exception", {"exception.message": error}, timestamp=event["end_ns"])
        if event["outcome"] == "failed" or event["failures"]:
            span.set_status(Status(StatusCode.ERROR, (error or event["outcome"])[:200]))
        span.end(end_time=event["end_ns"])
        self._spans += 1

    def _on_graph_phases(self, event: Event) -> None:
        parent = self._graphs.get(event["graph"])
        if parent is not None:
            self._graph_phases(parent, event["graph"], event.get("compile_id"), event.get("phases") or ())

    def _remember_ended(self, compile_id: int, span: Any) -> None:
        self._ended[compile_id] = trace.NonRecordingSpan(span.get_span_context())
        while len(self._ended) > 256:
            self._ended.popitem(last=False)

    def _on_compile_end(self, event: Event) -> None:
        span = self._compiles.pop(event["compile"], None)
        final = event.get("final") or {}
        labels = dict(self._common)
        self._compile_seconds.record(event["seconds"], labels)
        self._ops.record(final.get("ops", 0), labels)
        self._fusions.record(final.get("fusions", 0), labels)
        if span is not None:
            span.set_attributes({"thunder.ops": final.get("ops", 0), "thunder.fusions": final.get("fusions", 0),
                                 "thunder.coverage.with_provenance": final.get("with_provenance", 0),
                                 "thunder.coverage.compute_with_user_source": final.get("compute_with_user_source", 0),
                                 "thunder.coverage.compute": final.get("compute", 0),
                                 **({"thunder.coverage.compute_at_module_file": final["compute_at_module_file"]}
                                    if "compute_at_module_file" in final else {}),
                                 "thunder.log_seconds": float(event.get("log_seconds") or 0.0)})
            span.end(end_time=event["time_ns"])
            self._spans += 1
            self._remember_ended(event["compile"], span)

    def _on_compile_error(self, event: Event) -> None:
        span = self._compiles.pop(event["compile"], None)
        if span is None:
            return
        span.add_event("exception", {"exception.type": event["error_type"], "exception.message": event["message"],
                                     "exception.stacktrace": event["traceback"]}, timestamp=event["time_ns"])
        span.set_status(Status(StatusCode.ERROR, event["message"][:200]))
        span.end(end_time=event["time_ns"])
        self._spans += 1

    def _on_capture_disabled(self, event: Event) -> None:
        span = self._compiles.pop(event["compile"], None)
        if span is not None:
            span.set_attributes({"thunder.capture_disabled": event["hook"],
                                 "thunder.capture_disabled.error": str(event.get("error") or "")[:500]})
            span.end(end_time=event["time_ns"])
            self._spans += 1

    def _on_span(self, event: Event) -> None:
        parent = self._scopes.get(event.get("parent"))
        attributes = {**self._common, **{f"thunder.scope.{k}": v for k, v in (event.get("attributes") or {}).items()
                                         if isinstance(v, (str, bool, int, float))}}
        if event.get("role"):
            attributes["thunder.role"] = event["role"]
        self._scopes[event["id"]] = self._tracer.start_span(
            event["name"], context=trace.set_span_in_context(parent) if parent is not None else None,
            start_time=event["start_ns"], attributes=attributes)

    def _on_span_end(self, event: Event) -> None:
        span = self._scopes.pop(event["id"], None)
        if span is not None:
            span.end(end_time=event["end_ns"])
            self._spans += 1

    def _on_profile_ops(self, event: Event) -> None:
        self._profiled.table(event, self._common)

    def _on_profile_call(self, event: Event) -> None:
        """One profiled run of a trace: op time per (module, role) into the histogram (a backend's
        percentiles are the distributions; a run in which an executor compiled is left out and its
        span says so), and a span with its top lines. Aggregated per run first: the SDK takes ~10 us
        per recorded value, so recording each op would double a profiled call of a large model."""
        found = self._profiled.run(event)
        if found is None:
            return
        table, sums, lines = found
        compiled = [str(c[0]) for c in event.get("compiled") or ()]
        memory = event.get("memory")
        if not compiled and memory is None:  # no measured run (timing.spread): compiled, or read the allocator
            for attributes, ns in zip(table.attributes, sums):
                self._op_seconds.record(ns / 1e9, attributes)
        top = sorted(lines.items(), key=lambda item: -item[1])[:TOP_LINES]
        wall = event["wall_ns"]
        attributes = {**self._common, "thunder.compile_id": event["compile"], "thunder.function": table.fn,
                      "thunder.trace": event["trace"], "thunder.call": event["call"], "thunder.clock": table.clock,
                      "thunder.ops": len(table.lines), "thunder.coverage": sum(sums) / wall if wall else 1.0,
                      "thunder.top_lines": [key for key, _ in top],
                      "thunder.top_lines.ms": [ns / 1e6 for _, ns in top],
                      "thunder.top_lines.text": [table.texts.get(key, "") for key, _ in top]}
        if compiled:
            attributes.update({"thunder.profile.excluded": "compile", "thunder.profile.compiled": compiled[:16]})
        elif memory is not None:  # the CUDA allocator's bytes at the run's start and its peak (docs/memory.md)
            attributes.update({"thunder.profile.excluded": "memory", "thunder.memory.allocated_start": memory[0],
                               "thunder.memory.allocated_peak": max(event.get("memory_peak") or 0, *memory)})
        if top and top[0][0] in table.frames:  # the top line, in the semantic conventions for code
            file, line, function = table.frames[top[0][0]]
            attributes.update({"code.file.path": file, "code.line.number": line, "code.function.name": function})
        span = self._tracer.start_span(f"thunder.profiled {event['trace']} {table.fn.rsplit('.', 1)[-1]}",
                                       start_time=event["time_ns"] - wall, attributes=attributes)
        span.end(end_time=event["time_ns"])
        self._spans += 1

    def _on_memory(self, event: Event) -> None:
        """A compile's static memory timeline of one final trace (docs/memory.md): its peak's live
        bytes, and (the forward) what it saves for the backward, summed per (module, role) and
        recorded once per label set and compile: the points of a compile sum to its figures."""
        fn = self._profiled.fns.get(event["compile"], "?")
        trace_name = event["trace"]
        if trace_name == "forward":
            saved: dict[tuple[str, str], int] = {}
            for _name, nbytes, prov_id, is_input in event.get("saved") or ():
                if not is_input:
                    key = self._profiled.module_role(prov_id)
                    saved[key] = saved.get(key, 0) + nbytes
            for (module, role), nbytes in saved.items():
                self._saved_bytes.record(nbytes, self._profiled.labels(self._common, fn, None, module, role))
        where = peak_position(event.get("start") or 0, ((op[0], op[5]) for op in event.get("ops") or ()))
        peak: dict[tuple[str, str], int] = {}
        for _name, nbytes, prov_id, position, freed in event.get("blocks") or ():
            if live_after(position if position is not None else -1, freed, where):
                key = self._profiled.module_role(prov_id)
                peak[key] = peak.get(key, 0) + nbytes
        for (module, role), nbytes in peak.items():
            self._peak_bytes.record(nbytes, self._profiled.labels(self._common, fn, trace_name, module, role))

    def _on_wait(self, event: Event) -> None:
        """A collective wait that blocked at least a second: a span as long as it blocked, once it
        returned ("done"). A "blocked" record makes none (a span goes out only when it ends): while
        a wait blocks, `thunder.wait.time` and `thunder.wait.active` show it (observe_waits)."""
        if event["state"] != "done":
            return
        start, op = event["start_ns"], event.get("op")
        attributes = {**self._labels((event.get("role"), event.get("module"))), "thunder.wait.op": op or ""}
        span = self._tracer.start_span(f"{WAIT_SPAN}{op or 'wait'}", start_time=start, attributes=attributes)
        span.end(end_time=start + int(event["seconds"] * 1e9))
        self._spans += 1

    def _on_calls(self, event: Event) -> None:
        fn = event["fn"]
        new_hits = event["cache_hits"] - self._reported_hits.get(fn, 0)
        if new_hits > 0:
            self._hits.add(new_hits, {**self._common, "thunder.function": fn})
            self._reported_hits[fn] = event["cache_hits"]

    # -- wait counters ---------------------------------------------------------------------------
    def observe_waits(self, snapshot: WaitSnapshot) -> None:
        """Observable instruments over `snapshot() -> {(role, module): (seconds, active)}` (once)."""
        if self._observing_waits:
            return
        self._observing_waits = True

        def seconds(_options: Any) -> list:
            return [metrics.Observation(s, self._labels(key)) for key, (s, _) in snapshot().items()]

        def active(_options: Any) -> list:
            return [metrics.Observation(n, self._labels(key)) for key, (_, n) in snapshot().items()]

        self._meter.create_observable_counter(
            "thunder.wait.time", callbacks=[seconds], unit="s",
            description="seconds spent in collective waits, counting waits still blocked")
        self._meter.create_observable_up_down_counter(
            "thunder.wait.active", callbacks=[active], unit="{wait}", description="collective waits in progress")

    def _labels(self, key: tuple[str | None, str | None]) -> dict[str, Any]:
        role, module = key
        return {**self._common, "thunder.role": role or "", "thunder.module": module or ""}

    def after_fork(self) -> None:
        """In a forked child: the parent's open compile and scope spans are the parent's to end;
        the child's spans name its pid (the resource, shared with the parent, names the parent's)."""
        self._common["process.pid"] = os.getpid()
        self._compiles.clear()
        self._scopes.clear()

    # -- shutdown ----------------------------------------------------------------------------
    def close(self) -> None:
        for span in [*self._compiles.values(), *self._scopes.values()]:
            span.end()
            self._spans += 1
        self._compiles.clear()
        self._scopes.clear()
        if self._owned is None:
            return  # the application's providers are the application's to flush
        # Shut both providers down in parallel, in daemon threads: at most CLOSE_DEADLINE_S.
        workers = [threading.Thread(target=provider.shutdown, daemon=True) for provider in self._owned]
        for worker in workers:
            worker.start()
        deadline = time.monotonic() + CLOSE_DEADLINE_S
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))


class _Table:
    """A profiled trace's ops, as the exporter needs them: each op's label set and user line."""

    __slots__ = ("fn", "clock", "attributes", "labels", "lines", "texts", "frames", "by_label", "by_line")

    def __init__(self, fn: str, clock: str) -> None:
        self.fn, self.clock = fn, clock
        self.by_label: list[tuple[int, ...]] | None = None  # per label set, its ops' indices
        self.by_line: dict[str, tuple[int, ...]] = {}  # per line, its ops' indices
        self.attributes: list[dict[str, Any]] = []  # the label sets of thunder.op.duration
        self.labels: list[int] = []  # per op, its label set's index
        self.lines: list[str] = []  # per op, its line key (file:line, or what stands for one)
        self.texts: dict[str, str] = {}
        self.frames: dict[str, tuple[str, int, str]] = {}


class _Frame(NamedTuple):
    file: str
    line: int
    function: str
    text: str


class _Record:
    """A `prov` event read as provenance.core.attribution reads a record: its references are
    resolved by id when read (a record may name one that arrives later)."""

    __slots__ = ("kind", "module", "role", "user_frame", "_derived", "_members", "_records")

    def __init__(self, event: Event, records: dict[int, _Record]) -> None:
        self.kind, self.module, self.role = event.get("kind"), event.get("module"), event.get("role")
        user = user_frame(event.get("source") or (), is_user=_logged_user)
        self.user_frame = _Frame(*user[:4]) if user is not None else None
        self._derived, self._members = event.get("derived_from"), tuple(event.get("members") or ())
        self._records = records

    @property
    def derived_from(self) -> _Record | None:
        return self._records.get(self._derived)

    @property
    def members(self) -> tuple[_Record | None, ...]:
        return tuple(map(self._records.get, self._members))


class ProfileTables:
    """What the profile records need from the other events (provenance records, function names),
    bounded: the label sets of thunder.op.duration have no op id, shape or line, only the
    function, trace, module (provenance.core.attribution's: the op's, a backward op's forward module,
    a fusion's members' innermost common one; `<root>` the jitted module itself, "" none) and role."""

    def __init__(self) -> None:
        self.records: dict[int, _Record] = {}
        self.fns: OrderedDict[Any, str] = OrderedDict()
        self.tables: OrderedDict[tuple, _Table] = OrderedDict()
        self.label_sets: dict[tuple, dict[str, Any]] = {}
        self.memory_label_sets: dict[tuple, dict[str, Any]] = {}

    def labels(self, common: dict[str, Any], fn: str, trace: str | None, module: str, role: str) -> dict[str, Any]:
        """The memory metrics' label set, bounded as thunder.op.duration's (beyond MAX_LABEL_SETS,
        the module is "(other)"); `trace` None: no thunder.trace (saved for backward is the forward's)."""
        key = (fn, trace, module, role)
        found = self.memory_label_sets.get(key)
        if found is None:
            if len(self.memory_label_sets) >= MAX_LABEL_SETS:
                key = (fn, trace, "(other)", role)
            found = self.memory_label_sets.setdefault(key, {
                **common, "thunder.function": fn, **({"thunder.trace": trace} if trace is not None else {}),
                "thunder.module": key[2], "thunder.role": role})
        return found

    def prov(self, event: Event) -> None:
        self.records[event["id"]] = _Record(event, self.records)

    def table(self, event: Event, common: dict[str, Any]) -> None:
        fn = self.fns.get(event["compile"], "?")
        table = _Table(fn, event["clock"])
        index: dict[tuple, int] = {}
        for _position, symbol, prov_id, _op in event["ops"]:
            module, role, line, frame = self._describe(prov_id, symbol)
            key = (fn, event["trace"], module, role)
            if key not in self.label_sets:
                if len(self.label_sets) >= MAX_LABEL_SETS:
                    key = (fn, event["trace"], "(other)", role)
                self.label_sets.setdefault(key, {**common, "thunder.function": fn, "thunder.trace": event["trace"],
                                                 "thunder.module": key[2], "thunder.role": role})
            if key not in index:
                index[key] = len(table.attributes)
                table.attributes.append(self.label_sets[key])
            table.labels.append(index[key])
            table.lines.append(line)
            if frame is not None:
                table.frames.setdefault(line, frame[:3])
                table.texts.setdefault(line, frame.text)
        self.tables[(event["compile"], event["trace"])] = table
        while len(self.tables) > MAX_PROFILED:
            self.tables.popitem(last=False)

    def module_role(self, prov_id: Any) -> tuple[str, str]:
        """A record's module and role labels, by provenance.core.attribution."""
        record = self.records.get(prov_id)
        paths = attribution.modules(record)
        module = (attribution.common_module(paths) or attribution.ROOT) if paths else ""
        roles = attribution.keys(record, lambda r: attribution.role_of(r) or "")
        return module, roles[0] if len(roles) == 1 else "(mixed)"

    def _describe(self, prov_id: Any, symbol: str) -> tuple[str, str, str, _Frame | None]:
        """An op's module and role labels, and its line key (and frame), by provenance.core.attribution."""
        record = self.records.get(prov_id)
        module, role = self.module_role(prov_id)
        lines = attribution.keys(record, attribution.line_key)
        if len(lines) > 1:
            return module, role, f"{symbol} (fusion of {len(lines)} lines)", None
        frame = next(filter(None, map(attribution.line_frame, attribution.charged(record))), None)
        return module, role, lines[0], frame

    def run(self, event: Event) -> tuple[_Table, list[int], dict[str, int]] | None:
        """A profiled run's op times summed per label set and per line, or None (unknown table).
        Sums over index tuples with C-level map(): this runs inside the user's profiled call."""
        table = self.tables.get((event["compile"], event["trace"]))
        op_ns = event["op_ns"]
        if table is None or len(op_ns) != len(table.labels):
            return None
        if table.by_label is None:  # the ops of each label set and of each line, once per table
            by_label: list[list[int]] = [[] for _ in table.attributes]
            by_line: dict[str, list[int]] = {}
            for i, (label, line) in enumerate(zip(table.labels, table.lines)):
                by_label[label].append(i)
                by_line.setdefault(line, []).append(i)
            table.by_label = [tuple(ops) for ops in by_label]
            table.by_line = {line: tuple(ops) for line, ops in by_line.items()}
        get = op_ns.__getitem__
        return (table, [sum(map(get, ops)) for ops in table.by_label],
                {line: sum(map(get, ops)) for line, ops in table.by_line.items()})


class CountingExporter:
    """Wraps a span exporter: failed exports are counted (never raised)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.dropped = 0

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            result = self.inner.export(spans)
        except Exception:
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self.dropped += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def service_name() -> str:
    name = os.environ.get("OTEL_SERVICE_NAME")
    if name:
        return name
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] not in ("", "-c") else "python"
    return script.removesuffix(".py") or "python"


OtelExporter.HANDLERS = {t: getattr(OtelExporter, f"_on_{t}") for t in TYPES if t not in OtelExporter.IGNORED}


def from_environment(rank: int | None = None, waits: WaitSnapshot | None = None,
                     world_size: int | None = None) -> OtelExporter | None:
    """The OTel exporter OTel's own configuration asks for, or None (see the module doc);
    `waits`: also export these wait counters. The resource names the process (`process.pid`,
    `host.name`, `thunder.rank`): `thunder-trace report` groups an export's spans by it."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    provider = trace.get_tracer_provider()
    if not isinstance(provider, trace.ProxyTracerProvider):  # the application configured OTel
        return OtelExporter(provider, metrics.get_meter_provider(), rank=rank, waits=waits)
    if not (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")):
        return None

    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attributes: dict[str, Any] = {"host.name": socket.gethostname(), "process.pid": os.getpid()}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = service_name()
    if rank is not None:
        attributes["thunder.rank"] = rank
    if world_size is not None:
        attributes["thunder.world_size"] = world_size
    resource = Resource.create(attributes)  # merges OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME
    span_exporter = CountingExporter(OTLPSpanExporter(timeout=EXPORT_TIMEOUT_S))
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    tracer_provider.add_span_processor(BatchSpanProcessor(
        span_exporter, schedule_delay_millis=500, export_timeout_millis=EXPORT_TIMEOUT_S * 1000))
    metrics_endpoint = os.environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT")
    readers = [PeriodicExportingMetricReader(OTLPMetricExporter(timeout=EXPORT_TIMEOUT_S),
                                             export_interval_millis=5000,
                                             export_timeout_millis=EXPORT_TIMEOUT_S * 1000)] if metrics_endpoint else []
    meter_provider = MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False)
    return OtelExporter(tracer_provider, meter_provider, owned=True, rank=rank, span_exporter=span_exporter,
                        waits=waits)
