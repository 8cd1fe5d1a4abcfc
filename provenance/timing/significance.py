"""Whether a run-time figure changed between two runs: the rule `thunder-trace diff` judges run time by
(docs/diff.md, "The significance rule"). Pure data: Spreads in, p-values out.

A change of a figure (the whole call's time, or a row's: a line, module, role or op of it) is
**significant** when it is both

- **large enough** (`large_enough`): the medians differ by MIN_TIME_NS and by `ratio` of the faster
  one: MIN_TIME_RATIO for the whole call, MIN_ROW_RATIO for a row, and a row's change by MIN_ROW_SHARE
  of the call. Two processes of one program differ by more than either's calls show (their pace:
  the machine's state), which no test of the calls can see: a row's floor is high for it, and the
  whole call's ranges must not overlap (`apart`: every call of one side beyond every call of the
  other; a busy machine's ranges are wide enough to hold its drift between processes);
- **unlikely by chance** (`judge`): the calls of the two runs differ by rank (`rank_p`, a
  Mann-Whitney U test of the measured calls' times), judged together with every other figure of
  its family (the calls of every matched compile; the rows of every matched compile, every table)
  by the Benjamini-Hochberg procedure at ALPHA. A figure that is not large enough counts in its
  family at p = 1: the more figures compared, the more each must show. With no real change, the
  chance that a diff names any run-time change is at most ALPHA, however many rows it compares.

Why ranks, and why a family: a run's ranges (fastest to slowest call) or quartiles not overlapping
happen by chance more often than they look (with 8 calls a side, quartiles apart: 6% of the time
for one row; the diff compares dozens), and a busy machine preempts calls at random: by rank a
preempted call is only the slowest.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from provenance.timing.spread import Spread

__all__ = ["ALPHA", "MIN_ROW_RATIO", "MIN_ROW_SHARE", "MIN_SAMPLES", "MIN_TIME_NS", "MIN_TIME_RATIO", "Compared",
           "judge", "large_enough", "least_calls", "rank_p"]

ALPHA = 0.01  # the false discovery rate of a diff's run-time changes (its chance of any, with none real)
MIN_SAMPLES = 2  # measured calls a side to rank at all (2 and 2: p is never under 1/3)
MIN_TIME_NS = 10_000  # 10 µs per call: below a CPU clock's resolution of a row
MIN_TIME_RATIO = 0.05
# A row's floor: on CPU, the same program run three times one after the other, each alone, gave
# erf and exp medians 20-40% apart between runs, every call of one run beyond every call of the
# other (tests/diff: process-level differences, not noise within a run): no rank test sees that,
# each run's calls agree with each other. A row is named only past this.
MIN_ROW_RATIO = 0.5
# A row's change must also be this share of the call's time (per measured call): a 36 µs op of a 2.5 ms
# call took 69 µs in the next process of the same program, beyond both 5-call ranges (bench/diff_noise.py)
MIN_ROW_SHARE = 0.02

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Compared:
    """One figure compared: its Spreads in A and B (with their samples), the least relative change
    that counts (`ratio`) and the least absolute one (`floor_ns`, besides MIN_TIME_NS)."""

    a: Spread
    b: Spread
    ratio: float = MIN_TIME_RATIO
    floor_ns: float = 0.0
    apart: bool = False  # the ranges must not overlap too (the whole call's)


def large_enough(test: Compared) -> bool:
    """Whether the medians differ by the test's floors (the change is worth naming if it is real)."""
    a, b = test.a.median_ns, test.b.median_ns
    change = abs(b - a)
    if change < max(MIN_TIME_NS, test.floor_ns) or change < test.ratio * min(a, b):
        return False
    return not test.apart or test.b.low_ns > test.a.high_ns or test.b.high_ns < test.a.low_ns


def rank_p(a: Spread, b: Spread) -> float | None:
    """How likely calls as far apart as a's and b's are by chance: the two-sided Mann-Whitney U
    test of their samples (exact for small samples without ties), None without MIN_SAMPLES a side."""
    if len(a.samples) < MIN_SAMPLES or len(b.samples) < MIN_SAMPLES:
        return None
    from scipy.stats import mannwhitneyu  # ~0.6 s: imported by a diff that has samples to rank

    return float(mannwhitneyu(a.samples, b.samples, alternative="two-sided").pvalue)


def judge(family: Mapping[K, Compared]) -> dict[K, float | None]:
    """Each figure's p-value adjusted for its family (Benjamini-Hochberg): significant where it is
    at most ALPHA. None: not judged (not large enough, or too few calls to rank); such a figure
    still counts in the family, at p = 1."""
    raw = {k: rank_p(t.a, t.b) if large_enough(t) else None for k, t in family.items()}
    tested = [k for k, p in raw.items() if p is not None]
    if not tested:
        return dict.fromkeys(family)
    from scipy.stats import false_discovery_control

    ps = [raw[k] for k in tested] + [1.0] * (len(family) - len(tested))
    adjusted = false_discovery_control(ps, method="bh")
    out: dict[K, float | None] = dict.fromkeys(family)
    out.update((k, float(adjusted[i])) for i, k in enumerate(tested))
    return out


def least_calls(tests: int) -> int:
    """The fewest measured calls a side with which one change, its calls all apart (the least p
    there is: 2 / C(2n, n)), is significant among `tests` figures: what to profile."""
    from math import comb

    n = MIN_SAMPLES
    while 2 / comb(2 * n, n) > ALPHA / max(tests, 1):
        n += 1
    return n
