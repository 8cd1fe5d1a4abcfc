"""Which profiled calls count, and what a set of per-call times says: the rules behind every time
figure (provenance.timing.rollup, the report, the OpenTelemetry exporter). Pure data, no torch or
thunder import. docs/cost.md, "Distributions".

- A profiled call is **measured** unless it was a one-off: an executor compiled a fusion during it
  (torch.compile's inductor at a fusion's first call: `ProfiledCall.compiled`), it read the CUDA
  allocator at every op boundary (`ProfiledCall.memory`: host time between launches), or its time
  is a stall, far over the compile's fastest call of the same trace (`is_one_off`). A measured call
  is one whose forward and (where any backward ran) backward were both measured.
- The reference of a one-off is the **fastest** of its peers, not their median: a preemption or a
  stall only ever adds time, and in two calls of three it moves the median too (a 0.2 ms op taking
  4.2 and 8.2 ms in calls 1 and 3 has a 4.2 ms median, and nothing over 3× it).
- An op's figure is the **median** of its time over the measured calls, with its spread (the
  fastest and slowest call, the quartiles); a time that is a one-off against the op's fastest (the
  op was preempted, or stalled) is named as an outlier and left out of the spread. A measured call
  with such an op time is **preempted** (`preempted`): it stays measured (its other ops count), is
  named with the op, and does not count as a clean call: the profiling window takes calls until N
  are clean (provenance/thunder/profiling.py). A row's (a line, a module)
  figures are the sums of its ops': a preemption or stall hits some op in nearly every call of a
  large model, but rarely the same op in most calls.
- Figures of several compiles add up: a row's median is the sum of its medians per compile (a line
  in a function compiled for two shapes costs what it costs in each).
- Whether two runs' calls differ is a rank test (provenance.timing.significance): a row of one
  compile keeps its time in each measured call (the sum of its ops' times in that call) for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from provenance.timing.units import ms_text

__all__ = ["MIN_EXCESS_NS", "RATIO", "Excluded", "Spread", "is_one_off", "measured_calls", "preempted", "spread"]

# statistics (fractions and decimal with it, ~2 ms) is imported where a median is taken: not by a
# report of a log without profiles.
RATIO = 3.0  # a time over RATIO × the median ...
MIN_EXCESS_NS = 1_000_000  # ... and over the median by more than 1 ms is a one-off


def is_one_off(ns: float, fastest: float) -> bool:
    """Whether a time is a one-off against the fastest of its peers."""
    return ns > RATIO * fastest and ns - fastest > MIN_EXCESS_NS


@dataclass(frozen=True, slots=True)
class Excluded:
    """A profiled call left out of the figures, and why."""

    call: int
    trace: str  # forward | backward
    # "compile" (an executor compiled during it) | "memory" (it read the allocator) | "stall" (its
    # wall time) | "preempted": only `op`'s time in it is left out; the call stays measured
    reason: str
    wall_ns: int  # the call's (preempted: the op's time)
    compiled: tuple[str, ...] = ()  # the fusions compiled during it
    compile_ns: int = 0  # the time those compiles took
    op: str | None = None  # preempted: the op (its name and place in the trace: `layer_norm #12`)
    fastest_ns: int = 0  # preempted: the op's time in its fastest measured call

    @property
    def partial(self) -> bool:
        """Whether the call still counts (only an op's time in it is left out)."""
        return self.reason == "preempted"

    def describe(self) -> str:
        """`call 1 (backward): compiled TorchCompile0, 1.20 s, excluded`; `call 3 (forward): layer_norm #12
        preempted, 8.200 ms (0.210 ms in its fastest call), left out of its figures`."""
        if self.partial:
            return (f"call {self.call} ({self.trace}): {self.op} preempted, {ms_text(self.wall_ns)} "
                    f"({ms_text(self.fastest_ns)} in its fastest call), left out of its figures")
        what = {"compile": f"compiled {', '.join(self.compiled)}",
                "memory": "read the CUDA allocator at every op"}.get(self.reason, "a stall, over 3× the fastest call")
        return f"call {self.call} ({self.trace}): {what}, {_duration(self.wall_ns)}, excluded"


def _duration(ns: int) -> str:
    return f"{ns / 1e9:.2f} s" if ns >= 1e9 else f"{ns / 1e6:.2f} ms"


class _Call:  # what measured_calls reads of a ProfiledCall (or a logged one)
    call: int
    wall_ns: int
    op_ns: Sequence[int]
    compiled: Sequence
    memory: Sequence | None


def measured_calls(traces: dict[str, Iterable[_Call]], keep_all: bool = False,
                   ) -> tuple[list[int], list[Excluded]]:
    """{trace: its profiled calls} -> the measured call numbers (ascending) and the calls left out.
    `keep_all`: every call counts (warm-up and one-offs included)."""
    excluded: list[Excluded] = []
    present: dict[str, set[int]] = {}
    for name, calls in traces.items():
        calls = list(calls)
        if not calls:
            continue
        present[name] = {c.call for c in calls}
        if keep_all:
            continue
        ran = [c for c in calls if not c.compiled and c.memory is None]
        fastest = min((c.wall_ns for c in ran), default=0)
        for c in calls:
            if c.compiled:
                compiled = tuple(str(f[0]) for f in c.compiled)
                excluded.append(Excluded(c.call, name, "compile", c.wall_ns, compiled,
                                         sum(int(f[2]) for f in c.compiled)))
            elif c.memory is not None:
                excluded.append(Excluded(c.call, name, "memory", c.wall_ns))
            elif len(ran) > 2 and is_one_off(c.wall_ns, fastest):
                excluded.append(Excluded(c.call, name, "stall", c.wall_ns))
    if not present:
        return [], excluded
    out = {e.call for e in excluded}
    complete = set.intersection(*present.values()) - out
    if not complete and len(present) > 1:  # no backward ran for a measured forward: forward-only
        complete = present.get("forward", next(iter(present.values()))) - out
    return sorted(complete), sorted(excluded, key=lambda e: (e.call, e.trace != "forward"))


def preempted(traces: dict[str, Iterable[_Call]], measured: Iterable[int], names: dict[str, Sequence[str]],
              ) -> list[Excluded]:
    """The op times of the measured calls that are one-offs against the op's fastest measured call (three
    calls or more): the ops `spread` leaves out, one entry per (call, op), in call order."""
    measured = set(measured)
    found: list[Excluded] = []
    for name, calls in traces.items():
        ran = [c for c in calls if c.call in measured]
        if len(ran) < 3:
            continue
        floors = list(map(min, *(c.op_ns for c in ran)))
        ops = names.get(name, ())
        for c in ran:
            for i, (ns, floor) in enumerate(zip(c.op_ns, floors)):
                if ns > RATIO * floor and ns - floor > MIN_EXCESS_NS:
                    op = f"{ops[i]} #{i}" if i < len(ops) else f"op #{i}"
                    found.append(Excluded(c.call, name, "preempted", int(ns), op=op, fastest_ns=int(floor)))
    return sorted(found, key=lambda e: (e.call, e.trace != "forward"))


@dataclass(frozen=True, slots=True)
class Spread:
    """Per-call times of one row: the median (outliers apart), the range and quartiles of the
    measured calls, and the outliers (call, ns). Adding two Spreads adds each figure (two
    compiles' shares of one row)."""

    median_ns: float = 0.0
    low_ns: float = 0.0
    high_ns: float = 0.0
    q1_ns: float = 0.0
    q3_ns: float = 0.0
    calls: int = 0
    outliers: tuple[tuple[int, int], ...] = ()
    # each measured call's time, in call order, outliers included (provenance.timing.significance ranks
    # them); kept by the figures of one compile's calls (`spread(..., keep=True)`, a rollup row): a sum
    # of two compiles' has none, their calls are not the same calls
    samples: tuple[float, ...] = ()

    def __add__(self, other: Spread) -> Spread:
        samples = other.samples if not self.calls else self.samples if not other.calls else ()
        return Spread(self.median_ns + other.median_ns, self.low_ns + other.low_ns, self.high_ns + other.high_ns,
                      self.q1_ns + other.q1_ns, self.q3_ns + other.q3_ns, self.calls + other.calls,
                      self.outliers + other.outliers, samples)

    def describe(self) -> str:
        """`median 1.23 ms, 1.10–1.40 ms over 3 calls, 1 outlier (call 2: 6.10 ms)`."""
        if not self.calls:
            return "not measured"
        text = f"median {ms_text(self.median_ns)}"
        if self.calls > 1:
            text += f", {ms_text(self.low_ns, unit=False)}–{ms_text(self.high_ns)} over {self.calls} calls"
        if self.outliers:
            shown = ", ".join(f"call {c}: {ms_text(ns)}" for c, ns in self.outliers[:3])
            text += f", {len(self.outliers)} outlier{'s' if len(self.outliers) > 1 else ''} ({shown})"
        return text


def spread(samples: Sequence[tuple[int, float]], keep: bool = False) -> Spread:
    """(call, ns) per measured call -> its Spread: a sample that is a one-off against the fastest
    is an outlier (needs three samples or more), left out of the median and the range. `keep`: the
    Spread keeps the samples (a rank test's; an op's figures, one per op, do not)."""
    if not samples:
        return Spread()
    import statistics

    values = [ns for _, ns in samples]
    fastest = min(values)
    outliers = tuple((c, int(ns)) for c, ns in samples if len(samples) > 2 and is_one_off(ns, fastest))
    if outliers:
        values = [ns for c, ns in samples if (c, int(ns)) not in outliers]
    median = statistics.median(values)
    if len(values) > 1:
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    else:
        q1 = q3 = values[0]
    return Spread(float(median), float(min(values)), float(max(values)), float(q1), float(q3), len(samples),
                  outliers, tuple(float(ns) for _, ns in samples) if keep else ())

