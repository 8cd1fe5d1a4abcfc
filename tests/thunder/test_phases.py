"""Compile phases: every step of a compile timed with its real start and end, in the log, the
report's pipeline bar, the Perfetto trace and OpenTelemetry."""

from __future__ import annotations

import re
from pathlib import Path

import models
import orjson
import pytest
import report_logs
import thunder
import torch
from collecting import Collect
from thunder.core.trace import from_trace
from thunder.core.transform_common import Transform

import provenance
from provenance.cli import main as report_main
from provenance.log import schema


def _records(path: Path) -> list[dict]:
    (log,) = path.glob("*.jsonl")
    return [orjson.loads(line) for line in log.read_bytes().splitlines()]


def _covered(phases: dict) -> float:
    """The share of the compile's wall time in named top-level phases, from the log alone."""
    start, end = phases["start_ns"], phases["end_ns"]
    top = sorted((p for p in phases["phases"] if p[3] == 0), key=lambda p: p[1])
    cursor, named = start, 0
    for _name, begin, stop, _depth, _detail in top:
        assert begin >= cursor, "top-level phases overlap"
        assert stop <= end
        named += stop - begin
        cursor = stop
    return named / (end - start)


@pytest.mark.slow
def test_named_phases_cover_95_percent_of_a_nanogpt_compile(tmp_path):
    model, x = models.nanogpt()
    with provenance.tracing(tmp_path):
        models.forward_backward(thunder.jit(model), x)
    records = _records(tmp_path)
    (start,) = [r for r in records if r["type"] == "compile_start"]
    (phases,) = [r for r in records if r["type"] == "phases"]
    (end,) = [r for r in records if r["type"] == "compile_end"]
    assert schema.problems(phases) == []
    # the compile's wall time is the phases' window, everywhere
    assert phases["start_ns"] == start["time_ns"] and phases["end_ns"] == end["time_ns"]
    assert end["seconds"] == pytest.approx((end["time_ns"] - start["time_ns"]) / 1e9, abs=1e-6)
    assert _covered(phases) >= 0.95
    names = {p[0] for p in phases["phases"]}
    assert {"cache_lookup", "acquire_trace", "dce", "grad", "executor_claiming", "transform_for_execution",
            "split_forward_backward", "del_last_used", "codegen", "provenance"} <= names
    codegen = {p[4] for p in phases["phases"] if p[0] == "codegen"}
    assert {"prologue", "epilogue", "computation", "backward"} <= codegen
    # a nested phase lies inside the phase above it
    stack: list[list] = []
    for phase in phases["phases"]:
        del stack[phase[3]:]
        if stack:
            assert stack[-1][1] <= phase[1] <= phase[2] <= stack[-1][2], (stack[-1], phase)
        stack.append(phase)
    assert any(p[3] == 1 and p[0] == "executor_claiming" for p in phases["phases"])  # inside transform_for_execution


class KeepAsIs(Transform):
    """A transform returning a new, unlabelled computation trace (as tensor parallelism does)."""

    def transform_traces_pre_prologue(self, prologue_trc, computation_trc, epilogue_trc, **kwargs):
        new = from_trace(computation_trc)
        new.bound_symbols = list(computation_trc.bound_symbols)
        return prologue_trc, new, epilogue_trc


def test_transforms_are_timed_and_their_traces_named_after_them():
    original = KeepAsIs.transform_traces_pre_prologue
    collect = Collect()
    with provenance.tracing():
        provenance.add_exporter(collect)
        thunder.jit(lambda x: torch.tanh(x) * 2, transforms=[KeepAsIs()])(torch.ones(3))
    assert KeepAsIs.transform_traces_pre_prologue is original  # disable() put the class back
    passes = [(e["list"], e["pass"]) for e in collect.events if e["type"] == "trace" and "pass" in e]
    assert ("computation", "keep_as_is") in passes and not any(name == "unlabelled" for _, name in passes)
    (phases,) = [e for e in collect.events if e["type"] == "phases"]
    assert [p[4] for p in phases["phases"] if p[0] == "transform"] == ["KeepAsIs.traces_pre_prologue",
                                                                        "KeepAsIs.trace_post_optimization"]


def _log_with_phases(tmp_path: Path) -> Path:
    """The hand-written log, its compile starting (as a real one does) a little before the header
    was written, with a phases record: 10 ms of wall time, 9 ms of it named."""
    items = report_logs.records()
    t = items[0]["time_ns"]
    start = t - 2_000_000  # before the header: Perfetto must still start at 0
    items[1]["time_ns"] = start
    phases = {"type": "phases", "compile": 1, "start_ns": start, "end_ns": start + 10_000_000, "phases": [
        ["cache_lookup", start, start + 1_000_000, 0, None],
        ["acquire_trace", start + 1_000_000, start + 6_000_000, 0, None],
        ["transform_for_execution", start + 6_000_000, start + 8_000_000, 0, "computation"],
        ["executor_claiming", start + 6_500_000, start + 7_000_000, 1, None],
        ["codegen", start + 8_000_000, start + 9_000_000, 0, "computation"]]}
    end = next(i for i, r in enumerate(items) if r["type"] == "compile_end")
    items[end]["time_ns"], items[end]["seconds"] = start + 10_000_000, 0.01
    items.insert(end, phases)
    items.insert(end + 2, {"type": "executor_compile", "compile": 1, "executor": "torchcompile",
                           "fusion": "TorchCompile0", "trace": "computation", "start_ns": start + 11_000_000,
                           "end_ns": start + 31_000_000})
    return report_logs.write(tmp_path / "logs" / "a.jsonl", items)


def test_the_pipeline_bar_shows_every_phase_and_other(tmp_path):
    log = _log_with_phases(tmp_path)
    out = tmp_path / "out"
    assert report_main(["report", str(log), "-o", str(out), "--no-browser"]) == 0
    page = (out / "compiles" / "log0-c1.html").read_text()
    # the bar's segments and the phase table's rows are data, drawn by the page's script (report.js phaseBars)
    data = orjson.loads(re.search(r'<script type="application/json" class="phases">(.*?)</script>', page).group(1))
    segments = [(group, f"{width:.4f}") for group, _, _, width in data["s"]]
    # the torch.compile executor's 20 ms compile at the first call is the compile's too: the last segment
    assert segments == [("cache", "1.0000"), ("tracing", "5.0000"), ("executors", "2.0000"), ("codegen", "1.0000"),
                        ("other", "1.0000"), ("executors", "20.0000")]
    legend = page[page.index('<p class="legend'):page.index("</p>", page.index('<p class="legend'))]
    assert "other 1.0 ms (3.3%)" in legend and "tracing 5.0 ms (16.7%)" in legend
    assert "executors 22 ms (73.3%)" in legend
    assert "96.7% in named phases" in page
    assert '<div class="num">30 ms</div><div>compile time</div>' in page or "0.03 s" in page
    assert [1, "executors", "executor_claiming"] in [row[:3] for row in data["p"]]  # nested
    assert "<code>TorchCompile0</code></td><td>torchcompile</td><td>computation</td><td class=\"r\">20 ms" in page
    entry = orjson.loads((out / "compile_directory.json").read_bytes())["compiles"][0]
    assert [p["name"] for p in entry["phases"]] == ["cache_lookup", "acquire_trace", "transform_for_execution",
                                                    "executor_claiming", "codegen"]
    assert entry["executor_compiles"][0]["fusion"] == "TorchCompile0"


def test_perfetto_never_starts_before_zero_and_places_phases_at_their_real_times(tmp_path):
    log = _log_with_phases(tmp_path)
    out = tmp_path / "out"
    assert report_main(["report", str(log), "-o", str(out), "--no-browser"]) == 0
    trace = orjson.loads((out / "perfetto_trace.json").read_bytes())["traceEvents"]
    timed = [e for e in trace if "ts" in e]
    assert min(e["ts"] for e in timed) == 0.0 and all(e["ts"] >= 0 for e in timed)
    (compile_event,) = [e for e in timed if e["cat"] == "compile"]
    assert (compile_event["ts"], compile_event["dur"]) == (0.0, 10_000.0)  # µs: the whole wall time
    phases = {e["name"]: (e["ts"], e["dur"]) for e in timed if e["cat"].startswith("phase.")}
    assert phases == {"cache_lookup": (0.0, 1000.0), "acquire_trace": (1000.0, 5000.0),
                      "transform_for_execution (computation)": (6000.0, 2000.0),
                      "executor_claiming": (6500.0, 500.0), "codegen (computation)": (8000.0, 1000.0)}
    (executor,) = [e for e in timed if e["cat"] == "executor_compile"]
    assert (executor["ts"], executor["dur"], executor["tid"]) == (11_000.0, 20_000.0, 2)


def test_otel_phase_spans_nest_at_the_logged_times():
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from exporters.otel import OtelExporter

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    collect = Collect()
    with provenance.tracing():
        provenance.add_exporter(OtelExporter(provider, MeterProvider()))
        provenance.add_exporter(collect)
        thunder.jit(lambda x: torch.tanh(x) * 2)(torch.ones(3, requires_grad=True)).sum().backward()
    (logged,) = [e for e in collect.events if e["type"] == "phases"]
    finished = spans.get_finished_spans()
    (root,) = [s for s in finished if s.name.startswith("thunder.compile")]
    assert (root.start_time, root.end_time) == (logged["start_ns"], logged["end_ns"])
    phase_spans = [s for s in finished if s.name.startswith("thunder.phase ")]
    assert [(s.attributes["thunder.phase"], s.start_time, s.end_time) for s in phase_spans] == [
        (p[0], p[1], p[2]) for p in logged["phases"]]
    by_id = {s.context.span_id: s for s in finished}
    depth = {s.context.span_id: p[3] for s, p in zip(phase_spans, logged["phases"])}
    assert any(p[3] > 0 for p in logged["phases"])
    for span, phase in zip(phase_spans, logged["phases"]):
        parent = by_id[span.parent.span_id]
        if phase[3] == 0:
            assert parent is root
        else:  # under the phase it ran in
            assert depth[parent.context.span_id] == phase[3] - 1
            assert parent.start_time <= span.start_time <= span.end_time <= parent.end_time


@pytest.mark.slow
def test_the_torch_compile_executors_own_compile_is_timed_at_the_first_call(tmp_path, monkeypatch):
    """One inductor build (~30 s on CPU); the second compile of the same region hits inductor's cache."""
    import warnings

    from thunder.executors.torch_compile import torch_compile_ex

    from provenance.thunder import capture

    def f(x, w):
        return torch.tanh(x @ w).sum() * 2

    x, w = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    expected = f(x, w)
    expected.backward()
    grads = (x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    with provenance.tracing(tmp_path / "logs"):
        thunder.jit(f, executors=[torch_compile_ex])(x, w).backward()
    records = _records(tmp_path / "logs")
    compiled = [r for r in records if r["type"] == "executor_compile"]
    (end,) = [r for r in records if r["type"] == "compile_end"]
    assert all(schema.problems(r) == [] for r in compiled)
    assert {(r["compile"], r["executor"], r["trace"]) for r in compiled} == {
        (end["compile"], "torchcompile", "computation"), (end["compile"], "torchcompile", "backward")}
    fusions = {op[2] for r in records if r["type"] == "trace" and "ops" in r for op in r["ops"]}
    assert {r["fusion"] for r in compiled} <= fusions
    assert all(end["time_ns"] <= r["start_ns"] < r["end_ns"] for r in compiled)  # after the compile: lazily
    (phases,) = [r for r in records if r["type"] == "phases"]
    assert {"fusion", "torch_compile_setup", "rematerialization"} <= {p[0] for p in phases["phases"]}

    out = tmp_path / "out"
    assert report_main(["report", str(tmp_path / "logs"), "-o", str(out), "--no-browser"]) == 0
    page = (out / "compiles" / f"log0-c{end['compile']}.html").read_text()
    assert "Executor compiles at the first call" in page and all(r["fusion"] in page for r in compiled)
    trace = orjson.loads((out / "perfetto_trace.json").read_bytes())["traceEvents"]
    assert len([e for e in trace if e.get("cat") == "executor_compile"]) == len(compiled)

    # a fault in the executor hook: one warning, the results stay right
    x.grad = w.grad = None
    with warnings.catch_warnings(record=True) as caught, provenance.tracing():
        warnings.simplefilter("always")
        monkeypatch.setattr(capture.ACTIVE, "fault_injection", "executor_compile")
        out_ = thunder.jit(f, executors=[torch_compile_ex])(x, w)
        out_.backward()
    ours = [str(w.message) for w in caught if "thunder-provenance" in str(w.message)]
    assert len(ours) == 1 and "hook 'executor_compile'" in ours[0]
    torch.testing.assert_close(out_, expected)
    torch.testing.assert_close((x.grad, w.grad), grads)


def test_no_phase_hook_runs_on_a_cache_hit(monkeypatch):
    from provenance.thunder import phases

    seen = []
    active = phases._active
    monkeypatch.setattr(phases, "_active", lambda: seen.append(1) or active())
    with provenance.tracing():
        provenance.add_exporter(Collect())
        jf = thunder.jit(lambda x: torch.tanh(x) * 2)
        x = torch.ones(3, requires_grad=True)
        jf(x).sum().backward()
        compiled = len(seen)
        for _ in range(5):
            jf(x).sum().backward()
    assert compiled > 10 and len(seen) == compiled


def test_a_zero_length_or_odd_phases_record_still_makes_a_page(tmp_path):
    items = report_logs.records(why=True)
    (phases,) = [r for r in items if r["type"] == "phases"]
    phases["end_ns"] = phases["start_ns"]
    phases["phases"] = [["acquire_trace", phases["start_ns"], phases["start_ns"], 0, None],
                        ["codegen", phases["start_ns"] + 5, phases["start_ns"] + 1, 0, 7], "junk", [1, 2, 3, 4, 5]]
    log = report_logs.write(tmp_path / "a.jsonl", items)
    out = tmp_path / "out"
    assert report_main(["report", str(log), "-o", str(out), "--no-browser"]) == 0
    page = (out / "compiles" / "log0-c1.html").read_text()
    assert "Every phase (2)" in page  # the one well-formed phase, and the executor compile at the first call
