"""What writing profile records costs a profiled call (issue 12, phase 2): logging on vs off.

nanoGPT (thunder.tests.nanogpt_model), N layers, CPU, one training call = forward + backward, every
call after the first profiled (`profile=10**9`). One model, two `thunder.jit`s of it in one process:
- unlogged: compiled with no exporter attached: its profile's ops table was never written, so its
  calls are not logged (the call listener returns at once);
- logged: compiled after a JSONL exporter was attached (`provenance.enable(dir)`): each profiled run
  of its forward and backward writes a `profile_call` record; with `--otel`, an OpenTelemetry
  exporter (SDK with in-memory reader and span exporter) is attached too: each run also records
  `thunder.op.duration` and ends a span.
Rounds of one call each, the order alternating; the ratio is taken within a round and the median
reported (wall and process CPU time), with the log bytes written per call.

    python bench/profile_log_overhead.py [--layers 4] [--rounds 200] [--otel] [--json out.json]
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import tempfile
import time
import warnings

import harness

warnings.filterwarnings("ignore")


def step(jm, x) -> tuple[float, float]:
    began, cpu = time.perf_counter(), time.process_time()
    out = jm(x)
    (out[0] if isinstance(out, tuple) else out).sum().backward()
    return time.perf_counter() - began, time.process_time() - cpu


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--otel", action="store_true", help="an OpenTelemetry exporter too, for the logged one")
    parser.add_argument("--json")
    args = parser.parse_args()

    import thunder
    import torch

    import provenance

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = harness.nanogpt(args.layers)
    x = torch.randint(0, 128, (2, 32))
    logs = tempfile.mkdtemp(prefix="profile_log_overhead.")

    provenance.enable(profile=10**9)
    unlogged = thunder.jit(model)
    step(unlogged, x)
    provenance.enable(logs)  # from now on, compiles log their profile
    if args.otel:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from exporters.otel import OtelExporter

        spans = InMemorySpanExporter()
        tracer = TracerProvider()
        tracer.add_span_processor(SimpleSpanProcessor(spans))
        provenance.add_exporter(OtelExporter(tracer, MeterProvider(metric_readers=[InMemoryMetricReader()])))
    logged = thunder.jit(model)
    step(logged, x)
    fns = {"unlogged": unlogged, "logged": logged}
    for jm in fns.values():
        for _ in range(3):
            step(jm, x)
    (log,) = [os.path.join(logs, f) for f in os.listdir(logs)]
    size_before, calls_before = os.path.getsize(log), provenance.profiles(logged)[0].calls
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
    names = list(fns)
    gc.collect()
    gc.disable()
    try:
        for i in range(args.rounds):
            for name in names[i % 2:] + names[:i % 2]:
                times[name].append(step(fns[name], x))
            if i % 20 == 19:
                gc.enable(), gc.collect(), gc.disable()
    finally:
        gc.enable()
    calls = provenance.profiles(logged)[0].calls - calls_before
    bytes_per_call = (os.path.getsize(log) - size_before) / calls
    ops = sum(len(t.ops) for t in provenance.profiles(logged)[0].traces.values())
    provenance.disable()

    def ratio(clock: int) -> float:
        return statistics.median(p[clock] / q[clock] for p, q in zip(times["logged"], times["unlogged"]))

    result = {
        "layers": args.layers, "rounds": args.rounds, "otel": args.otel, "threads": torch.get_num_threads(),
        "ops_timed_per_call": ops, "unlogged_ms": statistics.median(t[0] for t in times["unlogged"]) * 1e3,
        "logged_ms": statistics.median(t[0] for t in times["logged"]) * 1e3,
        "logged_over_unlogged": ratio(0), "logged_over_unlogged_cpu": ratio(1),
        "log_bytes_per_call": bytes_per_call,
    }
    for key, value in result.items():
        print(f"{key:>26}: {value:.3f}" if isinstance(value, float) else f"{key:>26}: {value}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
