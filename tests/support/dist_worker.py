"""Run under torchrun by tests/thunder/test_distributed.py: compiles the RFC's tensor-parallel ToyModel,
then DDP and FSDP versions, and writes what provenance says about every op of the final
forward/backward traces to OUT/rank<N>.json; a collective held back on rank 0 is logged to OUT/logs/."""

from __future__ import annotations

import copy
import json
import os
import sys
import threading
import time
import warnings

import thunder
import torch
import torch.distributed as dist
from thunder.distributed import column_parallel, ddp, fsdp, row_parallel

import provenance
from provenance.thunder import capture
from provenance.thunder.workarounds import tensor_parallel_on_cpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/support/ -> the checkout
sys.path.insert(0, os.path.join(ROOT, "examples"))
from toy_model import ToyModel  # noqa: E402


def describe(jm) -> dict:
    out = {}
    for title, trace in (("forward", thunder.last_traces(jm)[-1]), ("backward", thunder.last_backward_traces(jm)[-1])):
        ops = []
        for bsym in trace.bound_symbols:
            r = provenance.of(bsym)
            ops.append(None if r is None else {
                "sym": bsym.sym.name, "kind": r.kind, "role": r.role, "transforms": list(r.transforms),
                "module": r.module, "line": r.user_frame.line if r.user_frame else None,
                "file": os.path.basename(r.user_frame.file) if r.user_frame else None,
            })
        out[title] = {"ops": ops, "grouped": provenance.annotate(trace, group=True, print_depth=1)}
    return out


def held_back_waits(rank, device, toy, x, tensor_parallel, log_dir) -> list:
    """Rank 1 sleeps before its collectives; rank 0 blocks in the row-parallel all-reduce's wait.
    Rank 0 samples the OTel wait counters meanwhile (an in-memory reader of the application's
    MeterProvider, which the exporter uses), and its THUNDER_TRACE log in `log_dir` gets the wait's
    records (blocked while it blocks, done once it returned)."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider

    reader = InMemoryMetricReader()
    trace.set_tracer_provider(TracerProvider())
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    provenance.disable()
    provenance.enable(log_dir, wait_counters=True)
    model = tensor_parallel(copy.deepcopy(toy))
    samples: list = []
    stop = threading.Event()

    def collect() -> None:
        points = []
        data = reader.get_metrics_data()
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name in ("thunder.wait.time", "thunder.wait.active"):
                        points += [[metric.name, dict(p.attributes), p.value] for p in metric.data.data_points]
        samples.append([time.monotonic(), points])

    def sample() -> None:
        while not stop.is_set():
            collect()
            time.sleep(0.2)

    if rank == 1:
        time.sleep(6.0)  # hold rank 0 in its first collective wait
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    model(x).sum().backward()
    stop.set()
    sampler.join()
    collect()  # after the call: nothing in progress any more
    return samples


def main() -> None:
    out_dir = sys.argv[1]
    rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cpu", rank)
    dist.init_process_group("gloo")
    provenance.enable()
    torch.manual_seed(0)
    result = {}

    x = torch.randn((1, ToyModel.N_IN), requires_grad=True)
    toy = ToyModel(bias=True)

    def tensor_parallel(model):
        jm = thunder.jit(model)
        with tensor_parallel_on_cpu():
            jm = column_parallel(jm, ["net1"], device=device)
            return row_parallel(jm, ["net2"], device=device)

    tp = tensor_parallel(copy.deepcopy(toy))
    out = tp(x)
    out.sum().backward()
    grad, x.grad = x.grad.clone(), None
    result["tensor_parallel"] = describe(tp)

    # A fault inside the distributed hooks: one warning, the same results.
    capture.ACTIVE.fault_injection = "distributed"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        faulty = tensor_parallel(copy.deepcopy(toy))
        faulty_out = faulty(x)
        faulty_out.sum().backward()
    capture.ACTIVE.fault_injection = None
    result["fault"] = {
        "warnings": [str(w.message) for w in caught if "thunder-provenance" in str(w.message)],
        "same_output": torch.equal(out, faulty_out),
        "same_grad": torch.equal(grad, x.grad),
    }
    x.grad = None

    dp = ddp(thunder.jit(ToyModel(bias=True)))
    dp(x).sum().backward()
    result["ddp"] = describe(dp)

    sharded = fsdp(thunder.jit(ToyModel(bias=True)), device=torch.device("cpu"))
    y = sharded(x)
    try:  # gloo has no reduce_scatter: the backward trace exists, running it may not
        y.sum().backward()
    except RuntimeError as exc:
        result["fsdp_backward_error"] = str(exc)[:200]
    result["fsdp"] = describe(sharded)

    result["waits"] = held_back_waits(rank, device, toy, x, tensor_parallel, os.path.join(out_dir, "logs"))

    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
