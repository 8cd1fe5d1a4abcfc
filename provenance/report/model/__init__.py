# ruff: noqa: F403, F405 -- the package re-exports its modules
"""The render model: plain dataclasses that the analysis builds and the templates, the pages'
script and compile_directory.json read. It imports nothing of the report (tests/test_layering.py).
They have no generated `__repr__` or `__eq__` (`repr=False, eq=False`; StackFrame keeps `__eq__`:
a compile's two stacks are compared): nothing prints or compares them, and Python 3.11 compiles
each generated method when the module is imported, most of what importing the model cost.

- core.py: the run's logs, compiles, traces, diffs, provenance records, problems, ranks;
- run.py: the run itself (RunModel), the root of the model;
- cost.py: where the time went (Time sections, time.html);
- fx.py: ThunderFX's Dynamo graphs, pieces, split reasons and graph breaks;
- memory.py: static memory (a compile's Memory section, memory.html).
"""

from provenance.report.model.core import *
from provenance.report.model.cost import *
from provenance.report.model.fx import *
from provenance.report.model.memory import *
from provenance.report.model.run import *

__all__ = [
    "CompileMemoryView",
    "MemoryRowView",
    "MemoryTimeline",
    "RunMemory",
    "RunMemoryCell",
    "RunMemoryRow",
    "CacheCounts",
    "CallSiteNode",
    "ErrorView",
    "CompilePage",
    "CompilePages",
    "CompileSummary",
    "CompileTime",
    "Coverage",
    "Desync",
    "DiffItem",
    "DisabledCapture",
    "ErrorSummary",
    "ExecutorCompileView",
    "Failure",
    "FrameRef",
    "Fused",
    "Fusion",
    "FusionLine",
    "BackendFailureView",
    "FrameCompileView",
    "FxRun",
    "GraphBreakView",
    "GraphView",
    "HEAT",
    "IcicleBox",
    "LEGEND",
    "LINE",
    "LISTS",
    "LineTime",
    "LogGroup",
    "LogHeader",
    "LogSummary",
    "RankActivity",
    "MAX_PROBLEMS_LISTED",
    "N",
    "OUTS",
    "Op",
    "OpTime",
    "PROV",
    "PassList",
    "PassSummary",
    "Phase",
    "PhaseGroup",
    "PhaseView",
    "PieceView",
    "Problem",
    "Problems",
    "ProvInfo",
    "RankComparison",
    "RankGroup",
    "RankLine",
    "RankRow",
    "RankTable",
    "RankTime",
    "RecompileView",
    "Rejection",
    "RoleCount",
    "RunModel",
    "RunTime",
    "STRAGGLER",
    "SYM",
    "SourceFileView",
    "SourcePage",
    "SourcePane",
    "SplitView",
    "StackFrame",
    "TimeRow",
    "TimeSummary",
    "Totals",
    "TraceDiff",
    "TraceView",
    "coverage",
    "site_of",
]
