"""A real OpenTelemetry collector for the tests: rotel (from PyPI) receives OTLP/HTTP and forwards
everything to a small sink that decodes the OTLP protobuf requests (opentelemetry-proto) and, like
the OpenTelemetry Collector's file exporter (rotel has none), can write each trace request it
receives as one line of OTLP/JSON (protobuf's JSON mapping, google.protobuf.json_format)."""

from __future__ import annotations

import gzip
import os
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

ROTEL = Path(__import__("rotel").__file__).parent / "rotel-agent"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _value(any_value) -> object:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


class Sink:
    """What the collector forwarded: spans as dicts, metrics as their names and their data points'
    attributes."""

    def __init__(self) -> None:
        self.spans: list[dict] = []
        self.export: Path | None = None  # where trace requests are appended as OTLP/JSON lines
        self.metrics: list[dict] = []
        self._lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path.endswith("/v1/traces"):
                    sink._traces(body)
                elif self.path.endswith("/v1/metrics"):
                    sink._metrics(body)
                payload = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _traces(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        with self._lock:
            if self.export is not None:
                with open(self.export, "a") as f:
                    f.write(json_format.MessageToJson(request, indent=None) + "\n")
            for rs in request.resource_spans:
                resource = {a.key: _value(a.value) for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        self.spans.append({
                            "name": span.name, "id": span.span_id.hex(), "parent": span.parent_span_id.hex(),
                            "trace": span.trace_id.hex(), "start": span.start_time_unix_nano,
                            "end": span.end_time_unix_nano, "resource": resource,
                            "attributes": {a.key: _value(a.value) for a in span.attributes},
                            "events": [e.name for e in span.events], "status": span.status.code,
                        })

    def _metrics(self, body: bytes) -> None:
        request = ExportMetricsServiceRequest.FromString(body)
        with self._lock:
            for rm in request.resource_metrics:
                for sm in rm.scope_metrics:
                    for metric in sm.metrics:
                        kind = metric.WhichOneof("data")
                        points = getattr(metric, kind).data_points if kind else ()
                        attributes = [{a.key: _value(a.value) for a in p.attributes} for p in points]
                        self.metrics.append({"name": metric.name, "points": attributes})

    def wait_for(self, predicate, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if predicate(self):
                    return True
            time.sleep(0.2)
        return False

    def close(self) -> None:
        self.server.shutdown()


class Collector:
    """rotel-agent listening for OTLP/HTTP on 127.0.0.1:<port>, forwarding to a Sink."""

    def __init__(self, log_dir: Path) -> None:
        self.sink = Sink()
        self.port = free_port()
        self.log = log_dir / "rotel.log"
        self.process = subprocess.Popen(
            [str(ROTEL), "start", "--otlp-http-endpoint", f"127.0.0.1:{self.port}",
             "--otlp-grpc-endpoint", f"127.0.0.1:{free_port()}", "--exporter", "otlp",
             "--otlp-exporter-endpoint", f"http://127.0.0.1:{self.sink.port}", "--otlp-exporter-protocol", "http",
             "--batch-timeout", "200ms", "--log-file", str(self.log)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "ROTEL_LOG_FORMAT": "text"})
        deadline = time.monotonic() + 20
        while True:  # ready when it accepts connections
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError as exc:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log = self.log.read_text() if self.log.exists() else ""
                    raise RuntimeError(f"rotel-agent did not start: {log}") from exc
                time.sleep(0.1)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.sink.close()
