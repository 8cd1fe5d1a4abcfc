"""Run under torchrun (gloo, 2 or 4 ranks) by tests/report/test_live.py, with THUNDER_TRACE and
THUNDER_TRACE_WAIT_COUNTERS=1 set: rank 1 is held in a long compile (its model's forward sleeps
LIVE_HOLD seconds while Thunder traces it first: only the compile sleeps, never a call), while rank 0,
compiled, waits in the row-parallel all-reduce for rank 1. Then both run a second step and exit.
LIVE_SHAPES: the batch sizes of the steps, one after the other (a new one is a recompile on every
rank), LIVE_PAUSE seconds apart: a job whose logs grow while it runs."""

from __future__ import annotations

import os
import sys
import time

import thunder
import torch
import torch.distributed as dist
from thunder.distributed import column_parallel, row_parallel

from provenance.thunder.workarounds import tensor_parallel_on_cpu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "examples"))
from toy_model import ToyModel

RANK = int(os.environ["LOCAL_RANK"])
HOLD = float(os.environ.get("LIVE_HOLD", "30"))
SHAPES = [int(n) for n in os.environ.get("LIVE_SHAPES", "4").split(",")]
PAUSE = float(os.environ.get("LIVE_PAUSE", "0"))
held = []


class HeldModel(ToyModel):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if RANK == 1 and not held:
            held.append(True)
            time.sleep(HOLD)  # runs while Thunder traces the forward: rank 1's first compile takes HOLD seconds
        return super().forward(x)


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = thunder.jit(HeldModel())
    with tensor_parallel_on_cpu():
        model = column_parallel(model, ["net1"], device=torch.device("cpu", RANK))
        model = row_parallel(model, ["net2"], device=torch.device("cpu", RANK))
    for step, n in enumerate(SHAPES):
        if step:
            time.sleep(PAUSE)
        x = torch.randn(n, ToyModel.N_IN)
        for _ in range(2):
            model(x).sum().backward()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
