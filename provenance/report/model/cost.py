"""The views of where the time went (analyze/cost.py makes them): a compile's Time section, an
op's and a line's time, the run's time page and its rank comparison."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only named in annotations: the timing modules are loaded by a profiled report only
    from provenance.timing.profile import CompileProfile
    from provenance.timing.rollup import CostRow

__all__ = ["HEAT", "LEGEND", "STRAGGLER", "CompileTime", "IcicleBox", "LineTime", "OpTime", "RankLine", "RankTable",
           "RunTime", "TimeRow", "TimeSummary"]

HEAT = (0.10, 0.03, 0.01, 0.003, 0.001)  # share of the profiled time -> heat 5, 4, 3, 2, 1 (else 0)
LEGEND = [(5 - i, f"{100 * limit:g}%") for i, limit in enumerate(HEAT)]  # for the pages: (heat, threshold)
STRAGGLER = 1.5  # a rank whose time on a line is >= this times the ranks' median is flagged


@dataclass(slots=True, repr=False, eq=False)
class TimeRow:
    """A row of a time table, per measured call (provenance.timing.spread): the median (`ms`), the
    range of the measured calls, the medians of its columns."""

    key: str
    label: str
    text: str  # a line's source text; a module's class
    kind: str  # key | fusion | between
    members: list[str]  # a fusion's member keys (labels)
    ms: float
    forward_ms: float
    backward_ms: float
    recompute_ms: float
    shared_ms: float
    total_ms: float  # over every measured call
    share: float
    heat: int
    calls: int
    href: str | None = None  # the line in a source view
    low_ms: float = 0.0  # the fastest and slowest measured call
    high_ms: float = 0.0
    spread: str = ""  # `median 1.2 ms, 1.1–1.4 ms over 3 calls, 1 outlier (call 2: 6.1 ms)`


@dataclass(slots=True, repr=False, eq=False)
class IcicleBox:
    """A module of the icicle chart: its row (depth), horizontal extent in percent of the
    profiled time, and what its tooltip says."""

    depth: int
    left: float
    width: float
    label: str
    title: str
    heat: int


@dataclass(slots=True, repr=False, eq=False)
class LineTime:
    """A source line's time per measured call (its median), for the source view's gutter. A line
    whose time is all in fusions it shares with other lines shows the fusion's (`fusion`)."""

    ms: float
    forward_ms: float
    backward_ms: float
    recompute_ms: float
    shared_ms: float
    share: float
    heat: int
    spread: str = ""
    fusion: str = ""  # `in TorchCompile1 (with 14 other lines)`

    @property
    def title(self) -> str:
        if self.fusion:
            return f"{self.fusion}: {self.shared_ms:.3f} ms per call, the fusion's whole time"
        parts = [f"{self.ms:.3f} ms per call ({self.share:.1%})", f"forward {self.forward_ms:.3f}",
                 f"backward {self.backward_ms:.3f}"]
        if self.recompute_ms:
            parts.append(f"recompute {self.recompute_ms:.3f}")
        if self.shared_ms:
            parts.append(f"+ {self.shared_ms:.3f} in fusions shared with other lines")
        if self.spread:
            parts.append(self.spread)
        return ", ".join(parts)


@dataclass(slots=True, repr=False, eq=False)
class OpTime:
    """An op's time per measured call on its trace (the median), and its spread."""

    label: str  # "1.234 ms"
    heat: int
    spread: str = ""  # `median 1.234 ms, 1.100–1.400 ms over 3 calls`


@dataclass(slots=True, repr=False, eq=False)
class CompileTime:
    """The Time section of a compile page."""

    calls: int  # measured calls
    clock: str
    wall_ms: float  # per measured call (the median), forward + backward
    traces: list[tuple[str, float, int]]  # (forward | backward, median wall ms per call, measured calls)
    coverage: float
    between_ms: float
    lines: list[TimeRow]
    more_lines: int
    module_lines: list[TimeRow]  # by module line; empty where every op's is its user line
    modules: list[TimeRow]
    roles: list[TimeRow]
    kinds: list[TimeRow]
    icicle: list[IcicleBox]
    icicle_depth: int
    profiled: int = 0  # profiled calls, the excluded ones included
    excluded: list[str] = field(default_factory=list)  # `call 1 (backward): compiled TorchCompile0, 1.20 s, excluded`
    # op times of measured calls left out as preempted: `call 3 (forward): layer_norm #12 preempted, ...`
    preempted: list[str] = field(default_factory=list)
    untimed: str | None = None  # a ThunderFX piece's: its graph's pieces that torch ran (dynamo.graphs.untimed)
    fusions: list[TimeRow] = field(default_factory=list)  # rows of fusions shared by several lines
    legend: list[tuple[int, str]] = field(default_factory=lambda: LEGEND)
    profile: CompileProfile | None = field(default=None, repr=False)  # the profile it came from (the diff's)
    rows: dict[str, list[CostRow]] = field(default_factory=dict, repr=False)  # its roll-ups by `by`, all rows


@dataclass(repr=False, eq=False)
class TimeSummary:
    """What the run keeps of a compile's profile: its rows by line and role (for the run's page
    and the rank comparison), and the figures compile_directory.json lists."""

    calls: int  # measured calls
    clock: str
    wall_ns: float  # per measured call: the median
    attributed_ns: float
    lines: list[CostRow]
    roles: list[CostRow]
    texts: dict[str, str]
    hrefs: dict[str, str] = field(default_factory=dict)  # line key -> its source view line
    profiled: int = 0
    excluded: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    legend: list[tuple[int, str]] = field(default_factory=lambda: LEGEND, repr=False)

    def directory(self) -> dict[str, Any]:
        return {"calls": self.calls, "profiled": self.profiled, "excluded": self.excluded,
                "preempted": self.preempted, "clock": self.clock,
                "wall_ns": round(self.wall_ns), "attributed_ns": round(self.attributed_ns),
                "lines": [{"key": r.key, "median_ns": round(r.median_ns), "low_ns": round(r.time.low_ns),
                           "high_ns": round(r.time.high_ns), "forward_ns": round(r.forward_ns),
                           "backward_ns": round(r.backward_ns), "recompute_ns": round(r.recompute_ns),
                           "shared_ns": round(r.shared_ns), "calls": r.calls}
                          for r in self.lines[:10]]}


# -- a compile ------------------------------------------------------------------------------------


@dataclass(slots=True, repr=False, eq=False)
class RankLine:
    """A line (or role) across ranks: its time per profiled call on each (None: not there)."""

    key: str
    label: str
    text: str
    cells: list[float | None]
    stragglers: list[bool]
    median: float
    width: list[float]  # each cell's bar, percent of the row's largest

    @property
    def flagged(self) -> bool:
        return any(self.stragglers)


@dataclass(slots=True, repr=False, eq=False)
class RankTable:
    """time.html's rank comparison: each line's and role's time per rank, the stragglers counted."""

    labels: list[str]
    lines: list[RankLine]
    roles: list[RankLine]
    stragglers: int  # lines with a flagged rank
    more: int  # lines not listed


@dataclass(slots=True, repr=False, eq=False)
class RunTime:
    """time.html: the run's profiled compiles, their lines and roles, and the ranks compared."""

    compiles: int
    calls: int  # measured calls
    wall_ms: float  # per measured call of each compile, added up
    coverage: float
    lines: list[TimeRow]
    roles: list[TimeRow]
    more_lines: int
    ranks: RankTable | None
    excluded: int = 0  # profiled calls left out (executor compiles, stalls)
    untimed: list[str] = field(default_factory=list)  # ThunderFX graphs' torch pieces (dynamo.graphs.untimed)
    straggler: float = STRAGGLER
    legend: list[tuple[int, str]] = field(default_factory=lambda: LEGEND)
