"""Stand-ins for the CUDA clock's device parts on this GPU-less machine, so its plumbing runs for real:
an event per mark paired by number, and an allocator whose readings come from the program itself."""

from __future__ import annotations

import sys

import torch

GRANULE = 512  # the CUDA caching allocator's rounding


class FakeCudaEvent:
    """Stands in for torch.cuda.Event: its clock is the event's number, so an op's elapsed time says
    which events were paired for it, whatever the machine's load."""

    records = 0

    def record(self):
        FakeCudaEvent.records += 1
        self.t = FakeCudaEvent.records

    def synchronize(self):
        assert hasattr(self, "t"), "synchronize() on an event never recorded"

    def elapsed_time(self, end):
        return float(end.t - self.t)  # ms


class LiveTensors:
    """Stands in for torch.cuda.memory_allocated / max_memory_allocated: the bytes of the distinct
    storages the timed function holds at the moment (its frame's local names, and the lists and
    tuples in them), each rounded up as the caching allocator rounds, plus those of `held`, the
    tensors the caller holds (parameters, the batch). Measured from the running program, not from
    the trace: a `del` frees a storage only when no name of it (a view's included) is left."""

    def __init__(self, held=()) -> None:
        self.held = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in held}
        self.peak = 0
        self.reads = 0

    def allocated(self) -> int:
        frame = sys._getframe(1)
        while frame is not None and not frame.f_code.co_filename.startswith("thunder.profiled_"):
            frame = frame.f_back
        assert frame is not None, "read outside a timed twin"
        storages = dict(self.held)

        def add(value, depth: int = 0) -> None:
            if isinstance(value, torch.Tensor):
                storage = value.untyped_storage()
                storages[storage.data_ptr()] = storage.nbytes()
            elif isinstance(value, (list, tuple)) and depth < 3:
                for item in value:
                    add(item, depth + 1)

        for value in frame.f_locals.values():
            add(value)
        self.reads += 1
        total = sum(-(-n // GRANULE) * GRANULE for n in storages.values())
        self.peak = max(self.peak, total)
        return total

    def max_allocated(self) -> int:
        return self.peak
