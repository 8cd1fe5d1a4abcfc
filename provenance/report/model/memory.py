"""Where the memory goes, as the pages show it: a compile's Memory section (the live-bytes timeline
of its forward and backward, the top lines and modules, what rematerialization changed) and the
run's Memory page (memory.html: compiles and ranks side by side)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CompileMemoryView", "MeasuredOp", "MeasuredTrace", "MemoryRowView", "MemoryTimeline", "RunMemory",
           "RunMemoryCell", "RunMemoryRow"]


@dataclass(slots=True, repr=False, eq=False)
class MemoryTimeline:
    """A final trace's live memory, op by op, as the bars of a chart. The bars are data the
    page's script draws (report.js: memoryBars): `bars` is {"t": texts (op names, lines, sizes),
    "b": [height in hundredths of a percent of the chart, op name, line, allocated, freed (-1:
    none), live (indexes into "t"), ops in the bar, ...], "p": the peak's bar (-1: at the start)}."""

    name: str  # forward | backward
    anchor: str | None  # the final trace's anchor on the compile page
    bars: dict
    peak: str  # `4.1 KiB after op 12 (linear, model.py:12)`
    peak_x: float  # percent
    inputs: str
    start: str
    description: str  # for screen readers: what the chart shows, in words


@dataclass(slots=True, repr=False, eq=False)
class MemoryRowView:
    """A row of a Memory table (a line, a module, a rematerialized tensor), its figures as text."""

    key: str
    label: str
    text: str
    saved: str
    forward_peak: str
    backward_peak: str
    allocated: str
    saved_bytes: int
    peak_bytes: int
    share: float  # of the compile's saved-for-backward bytes (a bar's width)
    remat: str = ""
    href: str | None = None


@dataclass(slots=True, repr=False, eq=False)
class MeasuredOp:
    """An op whose change the CUDA allocator measured differently from the static timeline."""

    where: str  # `model.py:12`
    key: str  # its line key
    op: str
    static: str
    measured: str


@dataclass(slots=True, repr=False, eq=False)
class MeasuredTrace:
    """A trace's allocator readings against its static timeline (provenance.allocation.measured_memory)."""

    text: str  # MemoryCheck.describe()
    agree: int
    ops: int
    differ: list[MeasuredOp]


@dataclass(slots=True, repr=False, eq=False)
class CompileMemoryView:
    """A compile's Memory section: its peaks, timelines and tables."""

    saved: str
    saved_inputs: str
    forward_peak: str
    backward_peak: str
    inputs: str
    timelines: list[MemoryTimeline]
    by_saved: list[MemoryRowView]
    by_peak: list[MemoryRowView]
    modules: list[MemoryRowView]
    remat: list[MemoryRowView] = field(default_factory=list)
    measured: list[MeasuredTrace] = field(default_factory=list)  # CUDA: the allocator's readings, per trace
    saved_bytes: int = 0
    forward_peak_bytes: int = 0
    backward_peak_bytes: int = 0


@dataclass(slots=True, repr=False, eq=False)
class RunMemoryCell:
    """One compile on one rank: its static figures, and its bar (width: % of the row's largest peak)."""

    saved: str
    forward_peak: str
    backward_peak: str
    peak: str  # the larger of its two peaks
    peak_bytes: int
    forward_width: float
    backward_width: float
    href: str  # its compile page, from the report's root


@dataclass(slots=True, repr=False, eq=False)
class RunMemoryRow:
    """A row of memory.html: a compile's (or the totals') peak on each rank."""

    label: str  # a compile (`report_model.Model (compile 1)`), or the ranks' totals
    cells: list[RunMemoryCell | None]  # per rank (None: that rank has no such compile)
    flagged: list[bool]  # per rank: its peak differs from the ranks' median
    median: str  # the ranks' median peak


@dataclass(slots=True, repr=False, eq=False)
class RunMemory:
    """memory.html: every compile's static memory, ranks side by side, the odd peak flagged."""

    ranks: list[str]
    compiles: list[RunMemoryRow]
    total: RunMemoryRow | None  # per rank, its compiles added up (several compiles)
    saved: str  # over the run
    flagged: int  # rows with a flagged rank
    differs: float  # a peak off the median by more than this factor is flagged
