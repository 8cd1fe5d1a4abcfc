"""Run under torchrun by tests/timing/test_cost_report.py with THUNDER_TRACE and THUNDER_TRACE_PROFILE set
(no code change: the .pth bootstrap, or `provenance.enable()` reading both): the RFC's ToyModel,
`net1` column-parallel and `net2` row-parallel on 2 CPU ranks (gloo), called 1 + PROFILED times.
Rank 1 sleeps before each profiled call, so rank 0 waits in the row-parallel all-reduce: that
rank's time on the role and on its line is the straggler's. Each rank writes what
provenance.cost() says, by role and by line, to OUT/cost<rank>.json."""

from __future__ import annotations

import json
import os
import sys
import time

import thunder
import torch
import torch.distributed as dist
from thunder.distributed import column_parallel, row_parallel

import provenance
from provenance.thunder.workarounds import tensor_parallel_on_cpu
from provenance.timing.rollup import BY

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/support/ -> the checkout
sys.path.insert(0, os.path.join(ROOT, "examples"))
from toy_model import ToyModel  # noqa: E402

HOLD_S = 0.3  # rank 1's delay before each profiled call


def main() -> None:
    out_dir = sys.argv[1]
    rank = int(os.environ["LOCAL_RANK"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    if not provenance.enabled():  # the bootstrap did it when the .pth is installed
        provenance.enable(os.environ["THUNDER_TRACE"])
    torch.manual_seed(0)
    jm = thunder.jit(ToyModel(bias=True))
    with tensor_parallel_on_cpu():
        jm = column_parallel(jm, ["net1"], device=torch.device("cpu", rank))
        jm = row_parallel(jm, ["net2"], device=torch.device("cpu", rank))
    x = torch.randn((4, ToyModel.N_IN), requires_grad=True)
    profiled = int(os.environ["THUNDER_TRACE_PROFILE"])
    for call in range(1 + profiled):
        if call and rank == 1:
            time.sleep(HOLD_S)
        jm(x).sum().backward()
    rows = {by: [[r.key, r.forward_ns, r.backward_ns, r.recompute_ns, r.shared_ns, r.calls] for r in
                 provenance.cost(jm, by=by)] for by in BY}
    with open(os.path.join(out_dir, f"cost{rank}.json"), "w") as f:
        json.dump(rows, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
