"""OpenTelemetry in memory, for the test programs that check our spans and metrics in a process of
their own (a tracer and meter provider can be set once per process): `spans, reader = install()`."""

from __future__ import annotations

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def install() -> tuple[InMemorySpanExporter, InMemoryMetricReader]:
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    return spans, reader


def data_points(reader: InMemoryMetricReader, name: str) -> list:
    """The data points of the metrics named `name` (or starting with it, when it ends with '.')."""
    return [p for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics for m in sm.metrics
            if (m.name.startswith(name) if name.endswith(".") else m.name == name) for p in m.data.data_points]
