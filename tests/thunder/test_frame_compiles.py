"""Every Dynamo frame compile of ThunderFX in the log and the report, the failed ones too
(provenance/thunder/fx_compile.py's `frame_compile`): a backend call that raises on a data-dependent op
(what Thunder's splitter and inductor do on a Mixtral's grouped matmul) is a failure with its error and
the user's line, and its time counts; frames Dynamo gives up on at a break (torch's Unsupported, which
logs no break of its own) are listed as breaks at their lines."""

from __future__ import annotations

import re
import warnings

import fx_failing
import orjson
import pytest
import thunder_failures
import torch
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import provenance
from exporters.otel import OtelExporter
from provenance.cli import main as report_main
from provenance.log import schema

pytestmark = pytest.mark.slow  # inductor compiles a fallback piece with its caches off (seconds), in each run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("frame_compiles")
    torch._dynamo.reset()  # frame ids from 0, whatever ran before
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with provenance.tracing(tmp / "logs"):
            steps = thunder_failures.run(fx_failing.main)
    assert [str(w.message) for w in caught if "thunder-provenance" in str(w.message)] == []
    (log,) = (tmp / "logs").glob("*.jsonl")
    records = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    out = tmp / "report"
    assert report_main(["report", str(tmp / "logs"), "-o", str(out), "--no-browser", "--strict"]) == 0
    return records, steps, out


def _frames(records: list[dict]) -> dict[str, dict]:
    """function name -> its frame_compile record."""
    return {r["function"][2]: r for r in records if r["type"] == "frame_compile"}


def _where(frames: list) -> tuple[str, int] | None:
    user = next((f for f in frames if f[4]), None)
    return (user[0], user[1]) if user else None


def _text(path) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", path.read_text()))


def test_records_follow_the_schema(run):
    records, _, _ = run
    assert [p for r in records for p in schema.problems(r)] == []


def test_a_backend_call_that_raised_is_logged_with_its_error_and_the_users_line(run):
    records, _, _ = run
    experts = _frames(records)["forward"]
    (failure,) = experts["failures"]
    assert failure["error"].startswith("DataDependentOutputException: aten._local_scalar_dense")
    assert _where(failure["frames"]) == (fx_failing.__file__, fx_failing.line_of("data-dependent"))
    assert failure["start_ns"] == experts["start_ns"] < failure["backend_ns"] < failure["end_ns"] < experts["end_ns"]
    # Dynamo compiled the frame again with a break at the call: a graph, whose compile begins with the failure
    assert experts["outcome"] == "graph"
    (graph,) = [r for r in records if r["type"] == "dynamo_graph" and r["graph"] == experts["graph"]]
    names = [p[0] for p in graph["phases"] if p[3] == 0]
    assert names[:2] == ["backend_failed", "dynamo_trace"]
    retraced = next(p for p in graph["phases"] if p[0] == "dynamo_trace" and p[3] == 0)
    assert graph["phases"][0][2] == failure["end_ns"] == retraced[1]


def test_frames_dynamo_gave_up_on_are_skipped_at_the_line_of_their_break(run):
    records, _, out = run
    frames = _frames(records)
    for function, marker in (("scaled", "break in a context manager"), ("guarded", "break in a try block")):
        found = frames[function]
        assert (found["outcome"], found["graph"]) == ("skipped", None)
        assert found["error"].startswith("Unsupported: ")
        assert _where(found["error_frames"]) == (fx_failing.__file__, fx_failing.line_of(marker))
    directory = orjson.loads((out / "compile_directory.json").read_bytes())
    lines = {b["line"] for b in directory["dynamo_graphs"]["breaks"] if b["graph"] is None}
    assert {f"{fx_failing.__file__}:{fx_failing.line_of(m)}"
            for m in ("break in a context manager", "break in a try block")} <= lines


def test_the_index_counts_the_failed_frame_and_the_compile_time_includes_every_frame(run):
    records, steps, out = run
    directory = orjson.loads((out / "compile_directory.json").read_bytes())
    totals = directory["totals"]
    assert (totals["failed"], totals["failed_frames"]) == (0, 1)
    assert re.search(r"1 failed \( ?1 Dynamo frame compile ?\)", _text(out / "index.html"))
    # everything compiled in the first step: the run's compile time is what that step took more than the warm
    # second (its Python, the custom op run eagerly, the frames Dynamo gave up on), within 5%
    (start, end), (warm_start, warm_end) = steps
    first, warm = (end - start) / 1e9, (warm_end - warm_start) / 1e9
    assert totals["seconds"] == pytest.approx(first - warm, rel=0.05) and totals["seconds"] <= first
    failures = _text(out / "failures.html")
    assert "DataDependentOutputException: aten._local_scalar_dense.default" in failures
    assert f"fx_failing.py:{fx_failing.line_of('data-dependent')}" in failures
    graphs = _text(out / "graphs.html")
    assert "Dynamo frame compiles" in graphs and "skipped" in graphs


def test_otel_gives_a_frame_that_made_no_graph_a_span_of_its_own(run):
    records, _, _ = run
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    exporter = OtelExporter(provider, MeterProvider())
    for record in records:
        exporter.emit(record)
    frames = {s.name: s for s in spans.get_finished_spans() if s.name.startswith("thunder.dynamo_frame")}
    skipped = [s for s in frames.values() if s.attributes["thunder.dynamo.outcome"] == "skipped"]
    assert sorted(s.attributes["code.line.number"] for s in skipped) == [
        fx_failing.line_of("break in a context manager"), fx_failing.line_of("break in a try block")]
    assert all(s.status.status_code is not StatusCode.ERROR for s in skipped)  # Dynamo ran them as Python


def test_a_fault_writing_a_frame_compile_warns_and_the_program_runs_on(tmp_path, monkeypatch):
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with provenance.tracing(tmp_path / "logs"):
            from provenance.thunder import capture

            monkeypatch.setattr(capture.ACTIVE, "fault_injection", "dynamo_frame")
            thunder_failures.run(fx_failing.main)
    ours = [str(w.message) for w in caught if "thunder-provenance" in str(w.message)]
    assert ours and all("internal error in hook 'dynamo_frame'" in m for m in ours)
    (log,) = (tmp_path / "logs").glob("*.jsonl")
    records = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    types = {r["type"] for r in records}
    assert "frame_compile" not in types and "dynamo_graph" in types
    assert report_main(["report", str(tmp_path / "logs"), "-o", str(tmp_path / "report"), "--no-browser",
                        "--strict"]) == 0
