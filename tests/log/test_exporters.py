"""The exporter contract (exporters.base.Exporter): adding, removing, failing, stats, options."""

from __future__ import annotations

import os
import time
import warnings

import pytest
import report_logs
import thunder
import torch
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from otel_collector import free_port

import provenance
from exporters.base import Exporter
from exporters.jsonl import JsonlExporter
from exporters.otel import CLOSE_DEADLINE_S, OtelExporter, from_environment
from provenance.log.session import SESSION


def _open_files() -> set[str]:
    return {os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
            if os.path.exists(f"/proc/self/fd/{fd}")}


class FailsOnTrace(JsonlExporter):
    """A JSONL log whose emit raises at the first trace event."""

    name = "fails_on_trace"

    def emit(self, event) -> None:
        if event["type"] == "trace":
            raise OSError("disk full")
        super().emit(event)


def test_the_package_exporters_implement_the_protocol(tmp_path):
    assert isinstance(JsonlExporter(str(tmp_path)), Exporter)
    assert isinstance(OtelExporter(TracerProvider(), MeterProvider()), Exporter)
    with pytest.raises(TypeError, match="lacks needs_trace_text, stats"):
        provenance.add_exporter(type("Half", (), {"name": "half", "emit": print, "close": print})())


def test_a_failing_exporter_is_removed_and_closed_with_one_warning_and_the_rest_go_on(tmp_path):
    failing = FailsOnTrace(str(tmp_path / "failing"))
    with warnings.catch_warnings(record=True) as caught, provenance.tracing(tmp_path / "ok"):
        warnings.simplefilter("always")
        provenance.add_exporter(failing)
        jf = thunder.jit(lambda x: torch.sin(x) * 2)
        out = jf(torch.ones(3))
        assert failing.path is not None and failing.path not in _open_files()  # its file was released
        assert failing not in SESSION.exporters and list(provenance.stats()) == ["jsonl"]
    torch.testing.assert_close(out, torch.sin(torch.ones(3)) * 2)
    ours = [str(w.message) for w in caught if "thunder-provenance" in str(w.message)]
    assert len(ours) == 1 and "'fails_on_trace' failed (OSError('disk full'))" in ours[0]
    (log,) = (tmp_path / "ok").glob("*.jsonl")
    assert '"type":"compile_end"' in log.read_text()  # the other exporter saw the whole compile


def test_remove_exporter_closes_it_and_stats_count_what_was_written(tmp_path):
    provenance.enable()
    try:
        first, second = JsonlExporter(str(tmp_path / "a")), JsonlExporter(str(tmp_path / "b"))
        provenance.add_exporter(first)
        provenance.add_exporter(second)
        thunder.jit(lambda x: torch.cos(x) + 1)(torch.ones(3))
        stats = provenance.stats()
        assert list(stats) == ["jsonl", "jsonl#2"]
        assert stats["jsonl"]["events"] > 5 and stats["jsonl"]["bytes"] == os.path.getsize(first.path)
        assert stats["jsonl"]["path"] == first.path
        provenance.remove_exporter(first)
        assert first.path not in _open_files() and list(provenance.stats()) == ["jsonl"]
        size = os.path.getsize(first.path)
        thunder.jit(lambda x: torch.tan(x))(torch.ones(3))
        assert os.path.getsize(first.path) == size  # nothing after its removal
    finally:
        provenance.disable()
    assert second.path not in _open_files()  # disable() closed it
    assert provenance.stats() == {}


def test_otel_wait_counters_are_a_constructor_option():
    reader = InMemoryMetricReader()
    exporter = OtelExporter(TracerProvider(), MeterProvider(metric_readers=[reader]), rank=1,
                            waits=lambda: {("row_parallel.post", "net2"): (1.5, 1)})
    exporter.observe_waits(lambda: {})  # already observing: a second call adds nothing
    metrics = {m.name: m for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics
               for m in sm.metrics}
    (point,) = metrics["thunder.wait.time"].data.data_points
    assert point.value == 1.5
    assert dict(point.attributes) == {"thunder.rank": 1, "thunder.role": "row_parallel.post", "thunder.module": "net2"}
    (active,) = metrics["thunder.wait.active"].data.data_points
    assert active.value == 1


def test_collector_down_close_is_bounded_and_drops_are_counted(monkeypatch):
    """The exporter's shutdown against an endpoint where nothing listens, timed in this process."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    exporter = from_environment(rank=0)
    assert exporter is not None and exporter.stats()["dropped_spans"] == 0
    for record in report_logs.records():  # a compile's events: its span waits in the batch queue
        exporter.emit(record)
    start = time.monotonic()
    exporter.close()
    took = time.monotonic() - start
    assert took <= CLOSE_DEADLINE_S + 0.5, took
    deadline = time.monotonic() + 10  # the shutdown threads finish the failed export in the background
    while exporter.stats()["dropped_spans"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert exporter.stats() == {"events": len(report_logs.records()), "spans": 1, "dropped_spans": 1}
