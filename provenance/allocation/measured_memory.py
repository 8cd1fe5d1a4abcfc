"""The CUDA allocator's readings of a profiled call against the static memory timeline: where the
static figures (provenance.allocation.static_memory) and the device agree, op by op. Pure data (no torch or
thunder import): live profiles and a log's rebuilt ones are checked alike. docs/memory.md,
"Measured on the device".

A window's first timed call on the CUDA clock reads `torch.cuda.memory_allocated()` at every op
boundary (`ProfiledCall.memory`) and the allocator's peak in the call (`memory_peak`). An op's
measured change is the difference of the readings around it; its static change is the bytes its
outputs allocate less those its `del` frees, each block rounded up to the caching allocator's
512-byte granule. They agree when equal, with 1 MiB of slack per block over 1 MiB the op
allocates (the allocator may hand out a cached block up to 1 MiB larger without splitting it).
Temporaries inside an op (a matmul's workspace, a fusion's scratch) are freed before its end:
they show in the allocator's peak, never in an op's change.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from provenance.allocation.static_memory import CompileMemory, TraceMemory
from provenance.core.record import Provenance
from provenance.timing.profile import CompileProfile, Op, ProfiledCall

__all__ = ["GRANULE", "MemoryCheck", "OpCheck", "check", "checks"]

GRANULE = 512  # the CUDA caching allocator rounds every block up to a multiple of this
LARGE = 1 << 20  # a block over this may come from a cached block up to this much larger, unsplit
MAX_LISTED = 20  # ops that disagree, listed per trace (the largest differences)


def rounded(nbytes: int) -> int:
    return -(-nbytes // GRANULE) * GRANULE


@dataclass(frozen=True, slots=True)
class OpCheck:
    """One op whose measured change differs from its static one."""

    position: int
    name: str
    record: Provenance | None
    static: int  # bytes: allocated less freed, rounded as the allocator rounds
    measured: int  # bytes: the allocator's readings after the op less before it

    @property
    def difference(self) -> int:
        return self.measured - self.static


@dataclass(frozen=True, slots=True)
class MemoryCheck:
    """One trace of one compile: the device's readings in `call` against the static timeline."""

    compile_id: int
    fn_name: str
    trace: str
    call: int
    ops: int  # ops compared
    agree: int  # of them, within the tolerance
    differ: tuple[OpCheck, ...]  # the ops that disagree, largest difference first (MAX_LISTED at most)
    static_peak: int  # bytes above the trace's start, rounded, after any op
    measured_peak: int  # the readings' most above the start
    allocator_peak: int | None  # the allocator's peak in the call above the start, if it rose (temporaries too)

    def describe(self) -> str:
        """`forward of Net.forward, call 1: 41 of 42 ops agree; peak 1.0 MiB measured, 1.0 MiB static`."""
        from provenance.allocation.static_memory import size

        text = (f"{self.trace} of {self.fn_name} (compile {self.compile_id}), call {self.call}: "
                f"{self.agree} of {self.ops} ops agree with the static timeline; peak "
                f"{size(self.measured_peak)} measured at op boundaries, {size(self.static_peak)} static")
        if self.allocator_peak is not None and self.allocator_peak > self.measured_peak:
            text += f", {size(self.allocator_peak)} inside ops (temporaries)"
        return text


def _changes(memory: TraceMemory) -> dict[int, tuple[int, int]]:
    """position -> (its rounded change, its slack)."""
    changes: dict[int, tuple[int, int]] = {}
    for block in memory.blocks:
        size = rounded(block.nbytes)
        if block.position >= 0:
            change, slack = changes.get(block.position, (0, 0))
            changes[block.position] = (change + size, slack + (LARGE if block.nbytes > LARGE else 0))
        if block.freed is not None:
            change, slack = changes.get(block.freed, (0, 0))
            changes[block.freed] = (change - size, slack)
    return changes


def check(memory: TraceMemory, ops: Sequence[Op], call: ProfiledCall, compile_id: int = -1,
          fn_name: str = "?") -> MemoryCheck | None:
    """The check of one trace's readings (None when `call` has none, or not one per op boundary)."""
    readings = call.memory
    if readings is None or len(readings) != len(ops) + 1:
        return None
    changes = _changes(memory)
    agree, differ, live, static_peak = 0, [], 0, 0
    for k, op in enumerate(ops):
        static, slack = changes.get(op.position, (0, 0))
        measured = readings[k + 1] - readings[k]
        live += static
        static_peak = max(static_peak, live)
        if abs(measured - static) <= slack:
            agree += 1
        else:
            differ.append(OpCheck(op.position, op.name, op.record, static, measured))
    differ.sort(key=lambda d: -abs(d.difference))
    start = readings[0]
    peak = call.memory_peak - start if call.memory_peak is not None else None
    return MemoryCheck(compile_id, fn_name, call.trace, call.call, len(ops), agree, tuple(differ[:MAX_LISTED]),
                       static_peak, max(readings) - start, peak)


def checks(memories: Iterable[CompileMemory], profiles: Iterable[CompileProfile]) -> list[MemoryCheck]:
    """Every trace with readings of every compile that has both a timeline and a profile."""
    by_id = {m.compile_id: m for m in memories}
    found = []
    for profile in profiles:
        memory = by_id.get(profile.compile_id)
        if memory is None:
            continue
        for name, trace in profile.traces.items():
            timeline = memory.traces.get(name)
            call = next((c for c in trace.recent if c.memory is not None), None)
            if timeline is not None and call is not None:
                result = check(timeline, trace.ops, call, profile.compile_id, profile.fn_name)
                if result is not None:
                    found.append(result)
    return found
