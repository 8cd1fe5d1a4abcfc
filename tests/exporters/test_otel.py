"""OpenTelemetry: compile spans, phase spans, code.* attributes and metrics reach a real collector."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest
import thunder_failures
from otel_collector import Collector, free_port
from paths import ROOT

SCRIPT = [str(ROOT / "examples" / "train_nanogpt.py"), "--layers", "1", "--steps", "2"]


@pytest.fixture(scope="module")
def collector(tmp_path_factory):
    c = Collector(tmp_path_factory.mktemp("rotel"))
    yield c
    c.close()


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "THUNDER_TRACE"))}
    env.update(extra)
    return env


def _run(cmd, **env):
    done = subprocess.run(cmd, env=_env(**env), capture_output=True, text=True, timeout=600)
    thunder_failures.check_process(cmd, _env(**env), done, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_a_traced_compile_arrives_as_a_compile_span_with_phase_children(collector, tmp_path):
    _run([sys.executable, *SCRIPT], THUNDER_TRACE=str(tmp_path), OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint)
    sink = collector.sink
    assert sink.wait_for(lambda s: any(x["name"].startswith("thunder.compile") for x in s.spans))
    compile_span = next(x for x in sink.spans if x["name"] == "thunder.compile GPT")
    attrs = compile_span["attributes"]
    assert attrs["code.file.path"].endswith("train_nanogpt.py") and attrs["code.function.name"] == "main"
    assert isinstance(attrs["code.line.number"], int) and attrs["thunder.ops"] > 100
    assert compile_span["resource"]["service.name"] == "train_nanogpt"
    assert compile_span["resource"]["host.name"]
    phases = [x for x in sink.spans if x["parent"] == compile_span["id"]]
    assert {p["attributes"]["thunder.phase"] for p in phases} >= {"acquire_trace", "grad", "del_last_used", "codegen"}
    for p in phases:
        assert p["trace"] == compile_span["trace"]
        assert compile_span["start"] <= p["start"] <= p["end"] <= compile_span["end"]
    assert sink.wait_for(lambda s: {"thunder.compile.duration", "thunder.pass.duration", "thunder.phase.duration",
                                    "thunder.cache.misses"} <= {m["name"] for m in s.metrics}, timeout=20)


@pytest.mark.slow
def test_two_ranks_arrive_with_their_rank(collector, tmp_path):
    before = len(collector.sink.spans)
    _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
          str(ROOT / "examples" / "tensor_parallel.py")],
         THUNDER_TRACE=str(tmp_path), OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint, OTEL_SERVICE_NAME="tp-demo")

    def both_ranks(sink) -> bool:
        ranks = {x["resource"].get("thunder.rank") for x in sink.spans[before:]
                 if x["name"].startswith("thunder.compile") and x["resource"].get("service.name") == "tp-demo"}
        return ranks == {0, 1}

    assert collector.sink.wait_for(both_ranks)


# The exit delay, timed inside the program: from its last statement to the last atexit handler,
# registered before provenance's (handlers run last-in first-out), so provenance's close (logs,
# OTel shutdown) and the interpreter's wait for non-daemon threads both come before it.
_EXIT_TIMER = """
import atexit, time
atexit.register(lambda: print(f"EXIT_DELAY {time.monotonic() - last_statement:.3f}", flush=True))
import torch, thunder, provenance  # THUNDER_TRACE: tracing is enabled as thunder loads
x = torch.ones(3)
print("SAME", thunder.jit(lambda x: torch.sin(x) * 2)(x).tolist() == (torch.sin(x) * 2).tolist(),
      sorted(provenance.stats()))
last_statement = time.monotonic()
"""


def test_collector_down_delays_exit_by_at_most_two_seconds(tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    done = _run([sys.executable, "-c", _EXIT_TIMER], THUNDER_TRACE=str(tmp_path), OTEL_EXPORTER_OTLP_ENDPOINT=dead)
    assert "SAME True ['jsonl', 'otel']" in done.stdout  # the program's result is unchanged
    delay = float(done.stdout.split("EXIT_DELAY ")[1].split()[0])
    print(f"collector down: exit delayed by {delay:.2f} s")
    assert delay <= 2.0, done.stdout
    (log,) = tmp_path.glob("*.jsonl")
    assert log.read_text().rstrip().endswith("}") and '"type":"calls"' in log.read_text()  # closed before


@pytest.mark.slow
def test_otel_sdk_disabled_turns_it_off(tmp_path):
    code = "import provenance; provenance.enable(); print(sorted(provenance.stats()))"
    on = _run([sys.executable, "-c", code], OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    off = _run([sys.executable, "-c", code], OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
               OTEL_SDK_DISABLED="true")
    assert on.stdout.strip() == "['otel']" and off.stdout.strip() == "[]"


_APP_PROVIDER = """
import json, torch, thunder, provenance
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

spans = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(provider)  # the application configured OTel: provenance uses it
provenance.enable()
with provenance.scope("step", role="training", step=1):
    thunder.jit(lambda x: torch.sin(x) * 2)(torch.ones(3))
try:
    thunder.jit(lambda x: torch.nn.functional.conv2d(x, x, stride=(1, 2, 3)))(torch.ones(1, 1, 3, 3))
except Exception as exc:
    raised = type(exc).__name__
provenance.disable()
print(json.dumps({"raised": raised, "spans": [
    {"name": s.name, "status": s.status.status_code.name, "events": [e.name for e in s.events],
     "attributes": dict(s.attributes), "parent": s.parent.span_id if s.parent else None, "id": s.context.span_id}
    for s in spans.get_finished_spans()]}))
"""


@pytest.mark.slow
def test_application_provider_scope_spans_and_failed_compiles():
    import json

    done = _run([sys.executable, "-c", _APP_PROVIDER])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    spans = result["spans"]
    failed = [s for s in spans if s["name"].startswith("thunder.compile") and s["status"] == "ERROR"]
    assert len(failed) == 1 and failed[0]["events"] == ["exception"]
    step = next(s for s in spans if s["name"] == "step")
    assert step["attributes"] == {"thunder.role": "training", "thunder.scope.step": 1}
    ok = [s for s in spans if s["name"].startswith("thunder.compile") and s["status"] != "ERROR"]
    assert len(ok) == 1 and any(s["parent"] == ok[0]["id"] for s in spans)  # with its phase spans


@pytest.mark.slow
def test_thunderfx_graphs_arrive_as_a_span_per_graph_with_a_child_per_piece(collector, tmp_path):
    """tests/support/fx_program.py, unchanged, under THUNDER_TRACE: a span per Dynamo graph (its graph
    break as an event), a child per piece (the fallback with thunder.split.reason), and each
    Thunder piece's compile under its piece."""
    import fx_program

    before = len(collector.sink.spans)
    _run([sys.executable, fx_program.__file__], THUNDER_TRACE=str(tmp_path),
         OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint, OTEL_SERVICE_NAME="fx-demo")

    def mine(sink) -> list[dict]:
        return [x for x in sink.spans[before:] if x["resource"].get("service.name") == "fx-demo"]

    assert collector.sink.wait_for(lambda s: sum(x["name"].startswith("thunder.compile") for x in mine(s)) >= 3)
    spans = mine(collector.sink)
    graphs = {x["name"]: x for x in spans if x["name"].startswith("thunder.dynamo_graph")}
    assert set(graphs) == {"thunder.dynamo_graph [0/0]", "thunder.dynamo_graph [1/0]"}
    first = graphs["thunder.dynamo_graph [0/0]"]
    assert first["parent"] == "" and first["events"] == ["thunder.graph_break"]
    assert first["attributes"]["thunder.dynamo.compile_id"] == "0/0"
    assert first["attributes"]["thunder.dynamo.fallbacks"] == 1
    pieces = {x["attributes"]["thunder.piece"]: x for x in spans
              if x["name"].startswith("thunder.piece") and x["parent"] == first["id"]}
    assert sorted(pieces) == ["inductor_1", "thunder_0", "thunder_2"]
    fallback = pieces["inductor_1"]["attributes"]
    assert fallback["thunder.piece.compiler"] == "inductor" and "MISSING_OP_SUPPORT" in fallback["thunder.split.reason"]
    assert fallback["code.line.number"] == fx_program.line_of("fxp fallback")
    assert "thunder.split.reason" not in pieces["thunder_0"]["attributes"]
    assert pieces["thunder_0"]["attributes"]["code.line.number"] == fx_program.line_of("fxp up")
    compiles = {x["name"]: x for x in spans if x["name"].startswith("thunder.compile")}
    assert compiles["thunder.compile [0/0] thunder_0"]["parent"] == pieces["thunder_0"]["id"]
    assert compiles["thunder.compile [0/0] thunder_2"]["parent"] == pieces["thunder_2"]["id"]
    assert all(x["trace"] == first["trace"] for x in [*pieces.values(), compiles["thunder.compile [0/0] thunder_0"]])


def test_a_dynamo_recompile_arrives_with_its_reason_and_the_graphs_phases(collector, tmp_path):
    """tests/support/fx_recompile.py (the sequence length changes): graph [0/1]'s span says why
    Dynamo compiled again, in the user's terms; each graph's span has a child per named phase:
    those up to the backend's return within it, the later ones (Dynamo's finish, each Thunder
    piece's compile at its first call) after it, in order (a span cannot be reopened)."""
    import fx_recompile

    before = len(collector.sink.spans)
    _run([sys.executable, fx_recompile.__file__], THUNDER_TRACE=str(tmp_path),
         OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint, OTEL_SERVICE_NAME="fx-recompile")

    def mine(sink) -> list[dict]:
        return [x for x in sink.spans[before:] if x["resource"].get("service.name") == "fx-recompile"]

    def graph(spans, label):
        return next((x for x in spans if x["name"] == f"thunder.dynamo_graph {label}"), None)

    def complete(sink) -> bool:
        spans = mine(sink)
        return all(graph(spans, label) is not None for label in ("[0/0]", "[0/1]")) and sum(
            x["name"] == "thunder.dynamo_phase thunder_compile" for x in spans) >= 2

    assert collector.sink.wait_for(complete)
    spans = mine(collector.sink)
    first, second = graph(spans, "[0/0]"), graph(spans, "[0/1]")
    assert "thunder.dynamo.recompile.reason" not in first["attributes"]
    reason = second["attributes"]["thunder.dynamo.recompile.reason"]
    assert "tokens" in reason and "16" in reason and "8" in reason, reason
    assert any("size mismatch at index 1" in g for g in second["attributes"]["thunder.dynamo.recompile.guards"])
    for g in (first, second):
        phases = [x for x in spans if x["parent"] == g["id"] and x["name"].startswith("thunder.dynamo_phase")]
        names = {p["attributes"]["thunder.phase"] for p in phases}
        assert {"dynamo_trace", "split", "thunder_compile"} <= names, names
        for p in phases:
            assert p["trace"] == g["trace"] and g["start"] <= p["start"] <= p["end"], p
            if p["attributes"]["thunder.phase"] in ("dynamo_trace", "split", "split_module", "inductor_compile"):
                assert p["end"] <= g["end"], p
            else:
                assert p["start"] >= g["end"], p


def test_a_long_wait_is_a_span_once_done_and_an_export_gives_its_records_back(tmp_path):
    """The `wait` records (tests/timing/test_wait_watch.py writes them): "done" is a span as long as
    the wait blocked, named after its collective; "blocked" makes none (the wait metrics show it
    meanwhile). Read back from an OTLP/JSON export, the span is the two records again."""
    from google.protobuf import json_format
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from exporters.otel import OtelExporter
    from provenance.log import schema
    from provenance.report.read.otlp_json import OtlpExport

    spans = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "waits", "host.name": "h", "process.pid": 7}))
    provider.add_span_processor(SimpleSpanProcessor(spans))
    exporter = OtelExporter(provider, MeterProvider(), rank=0)
    start = 1_796_026_940_000_000_000
    wait = {"type": "wait", "state": "blocked", "role": "row_parallel.post", "module": "net2",
            "op": "torch_all_reduce_prim_impl", "start_ns": start, "time_ns": start + 1_100_000_000}
    done = {**wait, "state": "done", "time_ns": start + 6_200_000_000, "seconds": 6.0}
    exporter.emit(wait)
    assert spans.get_finished_spans() == ()
    exporter.emit(done)
    exporter.emit({**done, "op": None, "role": None, "module": None})
    named, unnamed = spans.get_finished_spans()
    assert named.name == "thunder.wait torch_all_reduce_prim_impl" and unnamed.name == "thunder.wait wait"
    assert (named.start_time, named.end_time) == (start, start + 6_000_000_000)
    assert dict(named.attributes) == {"thunder.rank": 0, "thunder.role": "row_parallel.post", "thunder.module": "net2",
                                      "thunder.wait.op": "torch_all_reduce_prim_impl"}

    export_file = tmp_path / "export.json"
    export_file.write_text(json_format.MessageToJson(encode_spans([named, unnamed]), indent=None) + "\n")
    export = OtlpExport()
    export.read(export_file)
    (spool_log, _header), = export.logs(tmp_path)
    rebuilt = [orjson.loads(line) for line in spool_log.read_bytes().splitlines()]
    waits = [r for r in rebuilt if r["type"] == "wait"]
    assert all(schema.problems(r) == [] for r in waits), [schema.problems(r) for r in waits]
    assert [r["state"] for r in waits] == ["blocked", "blocked", "done", "done"]
    assert waits[0] == {**wait, "time_ns": start + 1_000_000_000}
    assert waits[2] == {**done, "time_ns": start + 6_000_000_000}
    assert (waits[3]["role"], waits[3]["module"], waits[3]["op"]) == (None, None, None)
    assert not [r for r in rebuilt if r["type"] == "span"]  # not taken for a provenance.scope span
