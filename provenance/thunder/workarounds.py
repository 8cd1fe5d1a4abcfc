"""Workarounds for Thunder 0.2.6 limits that tests and examples need (not capture itself)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def tensor_parallel_on_cpu() -> Iterator[None]:
    """Let `thunder.distributed.column_parallel/row_parallel` shard onto the CPU.

    Thunder 0.2.6's `TransformForTensorParallel.__post_init__` hard-codes
    `torch.device("cuda", rank)` as the device shards are moved to, whatever `device=` says.
    Inside this block the transforms built take `torch.device("cpu", rank)` instead; pass the
    same device to `column_parallel(..., device=torch.device("cpu", rank))`. On a GPU machine
    this is not needed. The class is restored on exit.
    """
    from provenance.thunder.compat import api

    TransformForTensorParallel = api().TransformForTensorParallel
    original = TransformForTensorParallel.__post_init__

    def __post_init__(self: TransformForTensorParallel) -> None:
        original(self)
        self.device = torch.device("cpu", self.rank)

    TransformForTensorParallel.__post_init__ = __post_init__
    try:
        yield
    finally:
        TransformForTensorParallel.__post_init__ = original
