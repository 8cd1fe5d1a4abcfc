"""The render model's runs, compiles, traces and provenance records (model/cost.py: time;
model/fx.py: ThunderFX): what the templates and compile_directory.json are made from.

Plain dataclasses with readable names, built by analyze/run.py (the run), analyze/compile.py (a compile) and the
modules they call; templates read their attributes. Two views leave Python, each made in one
place here: compile_directory.json's entries, and the compact JSON of provenance records that
the pages' script (report.js) reads.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from provenance.allocation.static_memory import CompileMemory
    from provenance.report.model.cost import CompileTime, TimeSummary
    from provenance.report.model.memory import CompileMemoryView

__all__ = ["LINE", "LISTS", "MAX_PROBLEMS_LISTED", "N", "OUTS", "PROV", "SYM", "CacheCounts", "CallSiteNode",
           "CompilePage", "CompilePages", "CompileSummary", "Coverage", "Desync", "DiffItem", "DisabledCapture",
           "ErrorSummary", "ErrorView", "ExecutorCompileView", "Failure", "FrameRef", "Fused", "Fusion", "FusionLine",
           "LogGroup", "LogHeader", "LogSummary", "Op", "PassList", "PassSummary", "Phase", "PhaseGroup", "PhaseView",
           "Problem", "Problems", "ProvInfo", "RankActivity", "RankComparison", "RankGroup", "RankRow", "RankTime",
           "RecompileView",
           "Rejection", "RoleCount", "SourceFileView", "SourcePage", "SourcePane", "StackFrame", "Totals",
           "TraceDiff", "TraceView", "coverage", "site_of"]


class FrameRef(NamedTuple):
    """A frame of a provenance record; `path` is the number of its file in the log (the reader's
    LogFile.paths: a file is named once per log, not once per frame)."""

    path: int
    line: int
    function: str
    text: str
    user: bool  # False for library frames (torch, thunder, ...)


@dataclass(slots=True, repr=False)
class StackFrame:
    """A frame as the pages show it."""

    file: str
    name: str  # the file's base name
    line: int
    fn: str
    text: str
    user: bool


def site_of(stack: list[StackFrame]) -> str | None:
    """`file:line` of a stack's outermost frame."""
    return f"{stack[-1].name}:{stack[-1].line}" if stack else None


@dataclass(slots=True, repr=False, eq=False)
class ProvInfo:
    """A provenance record as the pages show it."""

    id: int
    kind: str
    header: str  # the line provenance.annotate() prints above its ops
    module: str | None
    module_type: str | None
    user_frame: FrameRef | None  # where the user's code made it (a backward op: its forward op's line)
    module_frame: FrameRef | None  # its module line, where that is not `user_frame` (record.module_frame)
    stack: list[FrameRef]  # innermost first
    lineage: str | None  # e.g. grad(row_parallel(op))
    role: str | None  # distributed role
    role_color: int | None  # its palette index (CSS class role{n})
    scope: str | None  # the provenance span path, a/b/c
    derived_from: int | None  # record id
    members: list[int]  # a fusion's member record ids
    _compact: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)
    # The compact record as the pages embed it (JSON bytes), made once per record by the renderer
    # (render/html.py provs_script): a record shown on many pages is serialized once.
    script_json: bytes | None = field(default=None, init=False, repr=False, compare=False)

    def compact(self) -> dict[str, Any]:
        """The record for the pages' script, report.js: one-letter keys, frames as lists (a page
        embeds hundreds of records). Made once per record."""
        if self._compact is None:
            self._compact = {
                "id": self.id, "k": self.kind, "h": self.header, "m": self.module, "mt": self.module_type,
                "f": None if self.user_frame is None else list(self.user_frame),
                "ml": None if self.module_frame is None else list(self.module_frame),
                "st": [list(f) for f in self.stack], "lin": self.lineage, "r": self.role, "rc": self.role_color,
                "sp": self.scope, "d": self.derived_from, "mem": self.members}
        return self._compact


# -- traces ---------------------------------------------------------------------------------------
LISTS = ("prologue", "computation", "epilogue", "backward")  # Thunder's trace lists, in page order


# An op of a trace (a top-level bound symbol), from the trace record's `ops`: a plain tuple (a
# trace has thousands, made by zip) of its first line in the trace's python (0-based), its number
# of lines, its symbol, its outputs' names and its provenance record id (or None).
Op = tuple[int, int, str, list[str], int | None]
LINE, N, SYM, OUTS, PROV = range(5)  # its fields
Fused = tuple[int, str, int | None]  # an op inside a fusion: the fusion's index in the trace's ops, its text, prov id


@dataclass(slots=True, repr=False, eq=False)
class DiffItem:
    """An op a pass added, removed or rewrote, as its trace's diff lists it."""

    text: str  # an op's code, at most 300 characters
    old: str | None = None  # a rewritten op: its code before the pass


@dataclass(slots=True, repr=False, eq=False)
class TraceDiff:
    """What a pass did to the previous trace of its list. The counts are complete, the items capped."""

    previous: str  # the anchor of the trace diffed against
    added: int = 0
    removed: int = 0
    rewritten: int = 0  # same outputs, another symbol or code
    reattributed: int = 0  # same code, another provenance record
    added_items: list[DiffItem] = field(default_factory=list)
    removed_items: list[DiffItem] = field(default_factory=list)
    rewritten_items: list[DiffItem] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        return {"added": self.added, "removed": self.removed, "rewritten": self.rewritten}


@dataclass(repr=False, eq=False)
class TraceView:
    """One trace after one pass, ready to render. Its text is dropped once a later pass of its
    list arrives: the pass list keeps only names and figures."""

    list: str
    index: int
    pass_name: str
    label: str | None
    ms: float | None
    anchor: str
    same_as: int | None = None  # a repeat of trace #same_as of its list
    lines: list[str] = field(default_factory=list)  # the python, as lines
    ops: list[Op] = field(default_factory=list)
    diff: TraceDiff | None = None
    final: bool = False
    n_ops: int = 0  # kept when the text is dropped
    keyed: dict | None = None  # its ops by identity, once diffed (the next pass diffs against it)
    times: dict | None = None  # a profiled final trace: op index -> OpTime (model/cost.py)
    fused: list[Fused] = field(default_factory=list)  # its fusions' own ops, in order (trace record's `fused`)

    @property
    def counts(self) -> dict[str, int]:
        return self.diff.counts if self.diff else {}


# -- a compile ------------------------------------------------------------------------------------
@dataclass(slots=True, repr=False, eq=False)
class Coverage:
    """How many ops of a compile's final traces have a provenance record, and a user line
    (from compile_end.final)."""

    ops: int
    with_provenance: int
    compute: int
    compute_with_user_source: int
    fusions: int
    pct: float  # with_provenance / ops
    user_pct: float  # compute_with_user_source / compute
    compute_at_module_file: int | None = None  # of compute_with_user_source: in the module's own file (1.9)
    module_file_pct: float | None = None  # compute_at_module_file / compute


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def coverage(final: dict | None) -> Coverage | None:
    """compile_end's `final` counts as Coverage; None (unknown) unless each is a count (from the
    log: any field may be missing or odd)."""
    if not final:
        return None
    ops, with_prov, compute, user = (_count(final.get(k)) for k in
                                     ("ops", "with_provenance", "compute", "compute_with_user_source"))
    if ops is None or with_prov is None or compute is None or user is None:
        return None
    model = _count(final.get("compute_at_module_file"))
    return Coverage(ops=ops, with_provenance=with_prov, compute=compute, compute_with_user_source=user,
                    fusions=_count(final.get("fusions")) or 0,
                    pct=100.0 * with_prov / ops if ops else 100.0,
                    user_pct=100.0 * user / compute if compute else 100.0, compute_at_module_file=model,
                    module_file_pct=(100.0 * model / compute if compute else 100.0) if model is not None else None)


@dataclass(slots=True, repr=False, eq=False)
class CacheCounts:
    """The jitted function's cache figures when the compile ended."""

    hits: int | None
    misses: int | None
    calls: int | None


class PassSummary(NamedTuple):
    """A trace after a pass, as the run keeps it (no text)."""

    list: str
    index: int
    pass_name: str
    ms: float | None
    ops: int | None  # None for a repeat of an earlier trace
    counts: dict[str, int]  # what the pass changed: added, removed, rewritten (empty for a list's first)


class Phase(NamedTuple):
    """A phase of a compile (the log's `phases`), times in ns since the epoch."""

    name: str
    start_ns: int
    end_ns: int
    depth: int  # 0: top level
    detail: str | None  # what it worked on (a trace list, a transform, an executor)
    group: str  # its colour: tracing, cache, pass, transform, autograd, executors, codegen, provenance, other

    @property
    def ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6

    @property
    def label(self) -> str:
        return f"{self.name} ({self.detail})" if self.detail else self.name


class ExecutorCompileView(NamedTuple):
    """A fusion executor compiling a fusion at its first call (after the compile ended)."""

    executor: str
    fusion: str
    trace: str | None
    start_ns: int
    end_ns: int

    @property
    def ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


@dataclass(slots=True, repr=False, eq=False)
class ErrorSummary:
    """A failed compile's exception, in short (its summary's `error`)."""

    type: str
    message: str  # the first 500 characters


@dataclass(slots=True, repr=False, eq=False)
class DisabledCapture:
    """Capture stopped by an internal error in one of this package's hooks (capture_disabled)."""

    hook: str
    error: str  # the first 500 characters


@dataclass(slots=True, repr=False, eq=False)
class CompilePages:
    """A compile's pages, relative to the report's directory."""

    compile: str
    source: str | None  # None when no trace reached the log

    def json(self) -> dict[str, str]:
        return {"compile": self.compile} if self.source is None else {"compile": self.compile, "source": self.source}


@dataclass(slots=True, repr=False, eq=False)
class CompileSummary:
    """A compile, for every page that lists it (index, call sites, failures, the rank
    comparison), the Perfetto trace and compile_directory.json. The run keeps one per compile:
    `passes` and the stacks are dropped once the compile's entries are written."""

    key: str  # unique in the report: its pages' names
    log: int  # RunLog.index
    rank: int | None
    rank_label: str
    compile: Any  # the compile id, as the log has it
    fn: str
    index: int  # recompile index
    status: str  # ok | failed | incomplete | disabled (capture was)
    start_ns: int | None
    end_ns: int | None
    seconds: float | None
    cache: CacheCounts | None
    final: dict | None  # compile_end.final, as logged
    coverage: Coverage | None
    passes: list[PassSummary]
    pages: CompilePages
    call_stack: list[StackFrame]  # the user's call that compiled
    jit_stack: list[StackFrame]  # where thunder.jit was called
    call_site: str | None = None  # `file:line` of the call (or of thunder.jit): kept when the stacks are dropped
    error: ErrorSummary | None = None
    disabled: DisabledCapture | None = None
    signature: dict[str, bytes] = field(default_factory=dict)  # final traces' ops, zlib'd, for desync
    finals: dict[str, str] = field(default_factory=dict)  # the final traces' anchors by list (desync links)
    cache_hits: int = 0  # of its function (all its compiles), from the calls records at the end of the log
    calls: int = 0  # of its function
    compile_hits: int | None = None  # its own: the calls its cache entry served (None: not in the log)
    fn_first: bool = False  # the function's first compile in the report: the one its hits are shown on
    fn_compiles: int = 0  # the function's compiles in the report
    recompile_reason: str | None = None  # why it compiled again (the newest cache entry's rejecting check)
    window: tuple[int, int] | None = None  # the compile's wall time (ns), from its phases record
    phases: list[Phase] = field(default_factory=list)  # dropped with `passes` once the entries are written
    executor_compiles: list[ExecutorCompileView] = field(default_factory=list)
    time: TimeSummary | None = None  # of a profiled compile
    memory: dict[str, Any] | None = None  # its static memory (allocation.static_memory.summary), for memory.html
    # A ThunderFX piece's compile: (path, line) -> what its final traces made there (source_view's
    # line_ops), for its Dynamo graph's page; the run takes it off (analyze/fx_graphs.py).
    piece_lines: dict | None = None
    otlp: bool = False  # rebuilt from an OpenTelemetry export's spans: no traces, provenance or source view

    def stacks_shared(self) -> int:
        """How many outer frames the call stack shares with the jit stack (the page lists them once)."""
        shared = 0
        for jit, call in zip(self.jit_stack, self.call_stack):
            if jit != call:
                break
            shared += 1
        return shared

    @property
    def recompiled(self) -> bool:
        return self.index > 0

    @property
    def page(self) -> str:
        return self.pages.compile

    def directory_entry(self) -> dict[str, Any]:
        """The compile in compile_directory.json (made when the compile ends: every pass). orjson
        writes the dataclasses in it (cache, coverage, error) as objects, fields in order."""
        return {
            "key": self.key, "log": self.log, "rank": self.rank, "rank_label": self.rank_label,
            "compile": self.compile, "fn": self.fn, "index": self.index, "status": self.status,
            "recompiled": self.recompiled, "start_ns": self.start_ns, "end_ns": self.end_ns, "seconds": self.seconds,
            "cache": self.cache, "calls": self.calls, "cache_hits": self.cache_hits,
            "compile_hits": self.compile_hits, "final": self.final,
            "coverage": self.coverage, "error": self.error, "disabled": self.disabled, "pages": self.pages.json(),
            "passes": [{"list": p.list, "index": p.index, "pass": p.pass_name, "ms": p.ms, "ops": p.ops, **p.counts}
                       for p in self.passes],
            "call_site": self.call_site, "jit_site": site_of(self.jit_stack),
            "recompile_reason": self.recompile_reason,
            "window": list(self.window) if self.window else None,
            "phases": [{"name": p.name, "detail": p.detail, "depth": p.depth, "start_ns": p.start_ns,
                        "end_ns": p.end_ns} for p in self.phases],
            "executor_compiles": [e._asdict() for e in self.executor_compiles],
            "time": self.time.directory() if self.time is not None else None,
        }


# -- a compile's pages ----------------------------------------------------------------------------
@dataclass(slots=True, repr=False, eq=False)
class ErrorView:
    """A failed compile's error on its page and failures.html: the exception, its traceback, the op
    being processed when it raised."""

    type: str
    message: str
    traceback: str
    last_prov: int | None  # the record of the op being processed when it raised
    last_info: ProvInfo | None
    last_stack: list[StackFrame]
    user_frame: StackFrame | None = None  # the innermost user frame of the traceback: the headline
    statement: str | None = None  # the whole statement at user_frame, where it spans lines (the file's own)


@dataclass(slots=True, repr=False, eq=False)
class PassList:
    """A trace list's traces, one after each pass, on the compile page."""

    name: str  # computation, backward, ...
    passes: list[TraceView]


@dataclass(slots=True, repr=False, eq=False)
class RoleCount:
    """A distributed role, its palette colour and how many ops have it."""

    role: str
    color: int | None
    count: int  # ops


@dataclass(slots=True, repr=False, eq=False)
class FusionLine:
    """A user line behind some of a fusion's members."""

    where: str  # file:line
    text: str
    kinds: list[str]  # of the member records made there


@dataclass(slots=True, repr=False, eq=False)
class Fusion:
    """A fusion of a final trace: the records of the ops it fused and their user lines."""

    sym: str
    outs: list[str]
    trace: str  # its list
    anchor: str
    prov: int | None
    members: list[ProvInfo]
    lines: list[FusionLine]  # the user lines of its members


@dataclass(slots=True, repr=False, eq=False)
class Rejection:
    """Why one cached entry rejected the call that compiled (a recompile record's entry)."""

    compile: Any  # the compile that built the entry, or None
    page: str | None  # its page, relative to the compile pages' directory
    reason: str
    subject: str | None
    changes: list[tuple[str, str, str]]  # (what, cached, now)
    check: str | None  # the prologue statement that raised
    error: str
    # every input found changed, `subject` first: (subject, its changes)
    inputs: list[tuple[str, list[tuple[str, str, str]]]] = field(default_factory=list)


@dataclass(slots=True, repr=False, eq=False)
class RecompileView:
    """compile.html's "Why it compiled again"."""

    reason: str
    call: StackFrame | None
    rejected: list[Rejection]
    more: int  # entries the log does not analyse
    diverged_from: Rejection | None  # the newest entry: the prologue diff is against its compile
    prologue_diff: list[tuple[str, str]] | None  # (kind: add | rem | ctx | hunk, line); None: a prologue missing


@dataclass(slots=True, repr=False, eq=False)
class PhaseGroup:
    """The time of a compile's phases of one group (compile.html's phase table)."""

    group: str
    ms: float
    pct: float  # of the compile's wall time


@dataclass(slots=True, repr=False, eq=False)
class PhaseView:
    """compile.html's pipeline bar and phase table, from the phases record."""

    start_ns: int  # the window's start
    window_ms: float
    segments: list[Phase]  # top level and the gaps between them (group "other"), in time order
    phases: list[Phase]  # every phase, in time order, nested ones after their parent
    groups: list[PhaseGroup]  # time by group, "other" always listed
    covered_pct: float  # named top-level phases / wall time
    executor_compiles: list[ExecutorCompileView]


@dataclass(slots=True, repr=False, eq=False)
class CompilePage:
    """compile.html: the pass pipeline, the traces (rendered as they came), fusions, roles."""

    summary: CompileSummary
    error: ErrorView | None
    lists: list[PassList]
    timeline: list[TraceView]  # the passes that report a duration
    total_ms: float
    log_seconds: float | None  # what logging the compile cost
    fusions: list[Fusion]
    roles: list[RoleCount]
    provs: dict[int, ProvInfo]  # every record the page's traces name
    paths: dict[int, str]  # the files their frames name, by index
    recompile: RecompileView | None = None
    phases: PhaseView | None = None
    time: CompileTime | None = None  # the Time section, for a profiled compile
    memory: CompileMemoryView | None = None  # the Memory section
    memory_unknown: str | None = None  # why the compile has no Memory section (compile_end.memory_unknown)
    static_memory: CompileMemory | None = None  # what it was made from (the diff rolls it up)


@dataclass(slots=True, repr=False, eq=False)
class SourceFileView:
    """A user file on a source view (a compile's or a Dynamo graph's): which of its lines the
    page shows; the lines themselves are one data file per report (`asset`, from disk) or the
    page's own data (`data`, rebuilt from the lines the log quotes): render/source_files.py."""

    index: int  # in the page's line keys
    path: str
    name: str
    from_disk: bool  # else rebuilt from the lines the log quotes
    ranges: list[tuple[int, int]]  # the lines shown: first and last of each run, a gap between two
    asset: str | None = None
    data: dict[str, Any] | None = None
    open_at: int | None = None  # the line the page opens the file at: its hottest (time, else ops), not line 1


@dataclass(slots=True, repr=False, eq=False)
class SourcePane:
    """A final trace shown beside the user's files on source.html."""

    name: str  # forward | backward
    view: TraceView  # the final trace


@dataclass(slots=True, repr=False, eq=False)
class SourcePage:
    """source.html: the user files behind a compile's final traces, and those traces."""

    summary: CompileSummary
    files: list[SourceFileView]
    panes: list[SourcePane]
    provs: dict[int, ProvInfo]
    paths: dict[int, str]
    line_keys: dict[int, list[list[int]]]  # record id -> [[file index, line], ...], its own line first
    # What the page's script adds to the rows: "c": row id -> [forward ops, backward ops, fusions]
    # the line made directly; "t" (profiled): row id -> [time per call, heat, its split]
    marks: dict[str, dict[str, list]] = field(default_factory=dict)


# -- the run --------------------------------------------------------------------------------------
@dataclass(slots=True, repr=False, eq=False)
class Failure:
    """A failed compile, for failures.html."""

    summary: CompileSummary
    error: ErrorView
    call_stack: list[StackFrame]  # kept here: the summary's is dropped once its entries are written


MAX_PROBLEMS_LISTED = 200


@dataclass(slots=True, repr=False, eq=False)
class Problem:
    """One piece of bad input: where it is, what is wrong, how it starts."""

    category: str  # bad line | unknown record type | malformed record
    file: str
    line: int | None
    reason: str
    text: str  # the start of the line


@dataclass(repr=False, eq=False)
class Problems:
    """Bad input, counted by category; the first MAX_PROBLEMS_LISTED listed."""

    counts: Counter = field(default_factory=Counter)
    entries: list[Problem] = field(default_factory=list)

    def add(self, category: str, file: str, line: int | None, reason: str, text: str = "", count: int = 1) -> None:
        self.counts[category] += count
        if len(self.entries) < MAX_PROBLEMS_LISTED:  # what comes from a log is shortened: 200 entries
            self.entries.append(Problem(category, file[:300], line, reason[:500], text[:200]))

    def extend(self, other: Problems) -> None:
        """`other`'s problems after these (a log's, after the logs before it): as if added here in turn."""
        self.counts.update(other.counts)
        self.entries.extend(other.entries[:max(0, MAX_PROBLEMS_LISTED - len(self.entries))])

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def json(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "entries": self.entries, "total": self.total}


@dataclass(slots=True, repr=False, eq=False)
class LogHeader:
    """A log's header, every field of the type the pages expect."""

    schema: str
    time_ns: int | None
    rank: int | None
    world_size: int | None
    host: str
    pid: int | None
    argv: list[str]
    versions: dict[str, str]
    otlp: dict[str, Any] | None = None  # a log rebuilt from an OTel export's spans: file, service, spans


@dataclass(slots=True, repr=False, eq=False)
class RankActivity:
    """What a process was doing at the end of its log (while the job runs: now), for the index.
    `state`: compiling, waiting, idle or exited; times are the log's (ns since the epoch)."""

    label: str
    state: str
    what: str  # `compiling model.forward (compile 3)`, `waiting in all_reduce (row_parallel.post · net2)`
    since_ns: int | None  # when that began
    last_ns: int | None  # the log's last record with a time
    last: str  # what that record was
    while_compiling: list[str] = field(default_factory=list)  # waiting: the ranks compiling meanwhile
    since: str = ""  # since_ns as a UTC clock time
    seconds: float | None = None  # how long, as of the latest record of any log (the page's script: of now, live)


@dataclass(slots=True, repr=False, eq=False)
class LogSummary:
    """A log file of the run, for the index's run table."""

    index: int
    file: str
    label: str
    rank: int | None
    header: LogHeader | None
    lines: int = 0
    bytes: int = 0
    truncated: bool = False  # its last line was cut off
    newer_minor: bool = False  # written with a newer minor schema version
    libraries: dict[str, str] = field(default_factory=dict)  # the model code's distributions: name -> version
    activity: RankActivity | None = None


@dataclass(slots=True, repr=False, eq=False)
class LogGroup:
    """Logs of a run of many processes that ran alike (the same command, versions, schema and
    model code, none cut short), for the index's run table: one row, not one per rank."""

    label: str  # `ranks 0–511, 513–1023`
    logs: list[LogSummary]
    hosts: list[str]  # the first few, sorted
    more_hosts: int  # hosts not listed


@dataclass(slots=True, repr=False, eq=False)
class Totals:
    """The run's figures: compiles, time, calls, and the final traces' coverage, summed."""

    compiles: int
    ok: int
    failed: int
    incomplete: int
    disabled: int  # compiles whose capture an internal error stopped
    failed_frames: int  # Dynamo frame compiles of ThunderFX that failed (a backend call raised, or Dynamo)
    recompiles: int
    seconds: float
    cache_hits: int
    calls: int
    ops: int
    with_provenance: int
    compute: int
    compute_with_user_source: int
    fusions: int
    pct: float
    user_pct: float
    compute_at_module_file: int | None
    module_file_pct: float | None
    bytes: int  # read
    logs: int


@dataclass(slots=True, repr=False, eq=False)
class CallSiteNode:
    """A frame of the call-site trie; the compiles made at exactly this stack."""

    frame: StackFrame | None  # None: compiles without a user stack, `elided` frames, or `folded` ones
    children: list[CallSiteNode]
    compiles: list[CompileSummary]
    count: int  # compiles here and below
    elided: int = 0  # stands for that many outer frames of a deep stack, not shown
    folded: list[StackFrame] = field(default_factory=list)  # frames shown as one collapsed line: `label`
    label: str = ""  # what the folded frames are (launchers', or common to every compile)


@dataclass(slots=True, repr=False, eq=False)
class Desync:
    """Where a rank's final trace first differs from the reference rank's."""

    trace: str  # forward | backward
    rank: str
    ref_rank: str
    at: int  # op index
    changes: int | None  # differing stretches (None: too long a difference to count)
    ref_ops: list[str]  # the first differing ops (symbol [role])
    ops: list[str]
    ref_length: int
    length: int
    list_name: str = ""  # the trace list compared (computation | backward)
    other_at: int = 0  # the op index on `rank` (`at` is on `ref_rank`)
    links: list[tuple[str, str]] = field(default_factory=list)  # (rank, its page#op) for both ranks (desync.py)


@dataclass(slots=True, repr=False, eq=False)
class RankRow:
    """A compile matched across ranks: same function, recompile index and occurrence."""

    fn: str
    index: int
    occurrence: int
    differences: list[Desync]
    cells: list[CompileSummary | None]  # per log; None: that rank did not make it
    compared: bool = True  # False: fewer than two of its ranks have final traces (the others read from spans)


@dataclass(slots=True, repr=False, eq=False)
class RankTime:
    """A rank's compiles and their time, for distributed.html."""

    label: str
    compiles: int
    seconds: float
    failed: int
    pct: float = 0.0  # of the slowest rank's


@dataclass(slots=True, repr=False, eq=False)
class RankGroup:
    """Ranks that behaved alike: the same compiles, each with the same status and final traces."""

    label: str  # `ranks 0–511, 513–1023`
    ranks: int
    compiles: int
    failed: int
    seconds: float  # compile time, the median rank's
    low: float  # the fastest rank's and the slowest's
    high: float
    members: list[int] = field(default_factory=list)  # its logs' indices, the first standing for the group


@dataclass(slots=True, repr=False, eq=False)
class RankComparison:
    """distributed.html: each rank's compile time, the compiles matched across ranks, the desyncs."""

    multi: bool  # several logs
    ranks: list[RankTime]
    rows: list[RankRow]
    desync: int  # compiles that differ between ranks
    labels: list[str]  # the columns of `rows`: a label per rank, or per group when grouped
    more_rows: int = 0  # compiles matched across ranks but not listed (rows x ranks is capped)
    max_cells: int = 0  # the cap
    groups: list[RankGroup] = field(default_factory=list)  # many ranks: by behaviour, the smallest groups first
    uncompared: int = 0  # compiles of several ranks not compared: read from spans, they have no final traces
    compared: int = 0  # compiles of several ranks compared by their final traces
