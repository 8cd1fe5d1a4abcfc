"""The run as a whole, for index.html, failures.html, distributed.html and compile_directory.json: the
model's root, apart from core.py so that the feature models (cost, fx, memory), which core's types are
shared with, are imported by it and never import it back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from provenance.report.model.core import (
    CallSiteNode,
    CompileSummary,
    Failure,
    LogGroup,
    LogSummary,
    Problems,
    RankComparison,
    RankGroup,
    RoleCount,
    Totals,
)

if TYPE_CHECKING:
    from provenance.report.model.cost import RunTime
    from provenance.report.model.fx import FxRun
    from provenance.report.model.memory import RunMemory

__all__ = ["RunModel"]


@dataclass(slots=True, repr=False, eq=False)
class RunModel:
    """The run, for index.html, failures.html, distributed.html and compile_directory.json."""

    logs: list[LogSummary]
    ranks: list[str]  # labels
    totals: Totals
    compiles: list[CompileSummary]
    call_sites: list[CallSiteNode]
    failures: list[Failure]  # the first MAX_FAILURES_DETAILED
    roles: list[RoleCount]
    distributed: RankComparison
    problems: Problems
    files: dict[str, str]  # the report's files by name
    time: RunTime | None = None  # when some compile was profiled
    memory: RunMemory | None = None  # when some compile has its memory records (memory.html)
    fx: FxRun | None = None  # ThunderFX's Dynamo graphs, pieces and breaks, if the logs have any
    log_groups: list[LogGroup] = field(default_factory=list)  # many logs: those alike, outliers first
    ranks_label: str = ""  # many ranks: `ranks 0–1023`, for the lead line
    live: bool = False  # a --watch rebuild while the job runs (a batch report is done: no live marks)

    def compiles_by_group(self) -> tuple[list[tuple[RankGroup, list[CompileSummary]]], list[CompileSummary]]:
        """Many ranks: per group of ranks that behaved alike, its first rank's compiles; and the
        other ranks' compiles (the index lists the first, and folds the rest). Else nothing."""
        of_log: dict[int, list[CompileSummary]] = {}
        for c in self.compiles:
            of_log.setdefault(c.log, []).append(c)
        groups = [g for g in self.distributed.groups if g.members]
        others = [c for g in groups for log in g.members[1:] for c in of_log.get(log, [])]
        return [(g, of_log.get(g.members[0], [])) for g in groups], others

    def directory_head(self) -> dict[str, Any]:
        """compile_directory.json but its compiles (they are streamed, directory.py)."""
        return {"generator": "thunder-trace report", "schema": 1, "logs": self.logs, "ranks": self.ranks,
                "totals": self.totals, "problems": self.problems.json(), "files": self.files,
                **({"dynamo_graphs": self.fx.directory()} if self.fx is not None else {})}
