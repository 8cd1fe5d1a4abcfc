"""The tensor-parallel example of Thunder's RFC "Option to make a trace easier to interpret",
with provenance: ToyModel with `net1` column-parallel and `net2` row-parallel; rank 0 prints
the final forward and backward traces grouped by tensor-parallel role.

    torchrun --nproc-per-node=2 examples/tensor_parallel.py

Runs on CPU with the gloo backend, or on GPUs with NCCL when CUDA is available.
"""

from __future__ import annotations

import contextlib
import os

import thunder
import torch
import torch.distributed as dist
from thunder.distributed import column_parallel, row_parallel
from toy_model import ToyModel

import provenance
from provenance.thunder.workarounds import tensor_parallel_on_cpu


def main() -> None:
    rank = int(os.environ["LOCAL_RANK"])
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", rank) if cuda else torch.device("cpu", rank)
    dist.init_process_group("nccl" if cuda else "gloo")
    provenance.enable()
    torch.manual_seed(0)

    model = ToyModel(bias=True).to(device)
    if rank == 0:
        print("# Convert `net1` and `net2` into column-wise parallel and row-wise parallel, respectively")
        print("\n".join(f"# {line}" for line in str(model).splitlines()))
    tp_model = thunder.jit(model)
    with contextlib.nullcontext() if cuda else tensor_parallel_on_cpu():
        tp_model = column_parallel(tp_model, ["net1"], device=device)
        tp_model = row_parallel(tp_model, ["net2"], device=device)

    x = torch.randn((1, ToyModel.N_IN), device=device, requires_grad=True)
    tp_model(x).sum().backward()

    if rank == 0:
        for title, trace in (("forward", thunder.last_traces(tp_model)[-1]),
                             ("backward", thunder.last_backward_traces(tp_model)[-1])):
            print(f"\n#### final {title} execution trace, grouped by role: {provenance.coverage(trace)}")
            print(provenance.annotate(trace, group=True, print_depth=1))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
