"""The views of where the time went (analyze/cost.py makes them): a compile's Time section, an
op's and a line's time, the run's time page and its rank comparison."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from provenance.rollup import CostRow

__all__ = ["HEAT", "LEGEND", "STRAGGLER", "CompileTime", "IcicleBox", "LineTime", "OpTime", "RankLine", "RankTable",
           "RunTime", "TimeRow", "TimeSummary"]

HEAT = (0.10, 0.03, 0.01, 0.003, 0.001)  # share of the profiled time -> heat 5, 4, 3, 2, 1 (else 0)
LEGEND = [(5 - i, f"{100 * limit:g}%") for i, limit in enumerate(HEAT)]  # for the pages: (heat, threshold)
STRAGGLER = 1.5  # a rank whose time on a line is >= this times the ranks' median is flagged


@dataclass(slots=True)
class TimeRow:
    """A row of a time table: per profiled call (`ms`...) and over all of them (`total_ms`)."""

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
    total_ms: float
    share: float
    heat: int
    calls: int
    href: str | None = None  # the line in a source view


@dataclass(slots=True)
class IcicleBox:
    """A module of the icicle chart: its row (depth), horizontal extent in percent of the
    profiled time, and what its tooltip says."""

    depth: int
    left: float
    width: float
    label: str
    title: str
    heat: int


@dataclass(slots=True)
class LineTime:
    """A source line's time per profiled call, for the source view's gutter."""

    ms: float
    forward_ms: float
    backward_ms: float
    recompute_ms: float
    shared_ms: float
    share: float
    heat: int

    @property
    def title(self) -> str:
        parts = [f"{self.ms:.3f} ms per call ({self.share:.1%})", f"forward {self.forward_ms:.3f}",
                 f"backward {self.backward_ms:.3f}"]
        if self.recompute_ms:
            parts.append(f"recompute {self.recompute_ms:.3f}")
        if self.shared_ms:
            parts.append(f"+ {self.shared_ms:.3f} in fusions shared with other lines")
        return ", ".join(parts)


@dataclass(slots=True)
class OpTime:
    """An op's time per profiled call on its trace."""

    label: str  # "1.234 ms"
    heat: int


@dataclass(slots=True)
class CompileTime:
    """The Time section of a compile page."""

    calls: int
    clock: str
    wall_ms: float  # per call, forward + backward
    traces: list[tuple[str, float, int]]  # (forward | backward, wall ms per call, calls)
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
    legend: list[tuple[int, str]] = field(default_factory=lambda: LEGEND)


@dataclass
class TimeSummary:
    """What the run keeps of a compile's profile: its rows by line and role (for the run's page
    and the rank comparison), and the figures compile_directory.json lists."""

    calls: int
    clock: str
    wall_ns: int
    attributed_ns: int
    lines: list[CostRow]
    roles: list[CostRow]
    texts: dict[str, str]
    hrefs: dict[str, str] = field(default_factory=dict)  # line key -> its source view line
    legend: list[tuple[int, str]] = field(default_factory=lambda: LEGEND, repr=False)

    def directory(self) -> dict[str, Any]:
        return {"calls": self.calls, "clock": self.clock, "wall_ns": self.wall_ns,
                "attributed_ns": self.attributed_ns,
                "lines": [{"key": r.key, "total_ns": r.total_ns, "forward_ns": r.forward_ns,
                           "backward_ns": r.backward_ns, "recompute_ns": r.recompute_ns, "shared_ns": r.shared_ns}
                          for r in self.lines[:10]]}


# -- a compile ------------------------------------------------------------------------------------


@dataclass(slots=True)
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


@dataclass(slots=True)
class RankTable:
    labels: list[str]
    lines: list[RankLine]
    roles: list[RankLine]
    stragglers: int  # lines with a flagged rank
    more: int  # lines not listed


@dataclass(slots=True)
class RunTime:
    """time.html: the run's profiled compiles, their lines and roles, and the ranks compared."""

    compiles: int
    calls: int
    wall_ms: float  # all profiled calls
    coverage: float
    lines: list[TimeRow]
    roles: list[TimeRow]
    more_lines: int
    ranks: RankTable | None
    straggler: float = STRAGGLER
    legend: list[tuple[int, str]] = field(default_factory=lambda: LEGEND)
