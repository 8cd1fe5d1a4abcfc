"""The events of a compile, as code: the one definition writers, exporters and the reader share.

Capture writes them (`provenance.log.session`, `provenance.thunder.emit`), exporters consume them
(`exporters/`), the log reader reads them back (`provenance.report.read.log_file`); docs/log-schema.md
describes them, and tests/log/test_events.py holds the doc to this module. An event is a JSON-able
dict with a "type"; its keys are written in the order declared here.

Adding an event type: declare its TypedDict below and its entry in `TYPES` (its forms, the ids
it references, whether it defines a record or closes a compile) and in `Event` (the tests check
that the two agree), document it in docs/log-schema.md (a section with a JSON example and a field
table), give the report one handler for it (provenance/report/analyze/handlers.py; a test fails
until it has one), and bump the minor `SCHEMA_VERSION` (readers of the older minor
count the new type as unknown and go on). Adding a field also bumps the minor; renaming or
removing one, or changing its meaning, bumps the major.
"""

# No `from __future__ import annotations` here: on Python 3.11 a TypedDict only sees
# `NotRequired[...]` in evaluated annotations.

import functools
import operator
from collections.abc import Container, Iterable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Literal, NotRequired, TypedDict

from provenance.core.record import Frame

__all__ = [
    "CHANGE_FIELDS", "CLOSING_TYPES", "CacheCounts", "Calls", "CaptureDisabled", "ChangeJSON", "ChangedInput",
    "CompileEnd", "CompileError", "CompileStart", "DynamoGraphEvent", "DynamoGuardFailure", "DynamoRecompile",
    "EVENTS", "Event", "EventType", "ExecutorCompile", "FRAME_FIELDS", "FUSED_FIELDS", "FinalCounts", "FrameJSON",
    "FusedJSON", "GraphBreakEvent", "GraphPhases", "Header", "KNOWN_TYPES", "Library", "MAX_PHASES", "OP_FIELDS",
    "OpJSON", "OtlpSource",
    "PHASE_FIELDS", "PROFILE_OP_FIELDS", "PhaseJSON", "Phases", "PieceJSON", "PieceRef", "ProfileCall",
    "MAX_NESTING", "MEMORY_BLOCK_FIELDS", "MEMORY_OP_FIELDS", "Memory", "ProfileOpJSON", "ProfileOps", "Prov",
    "Recompile", "Ref", "RejectedEntry", "SCHEMA_VERSION",
    "SpanEnd",
    "SpanStart", "SplitReasonJSON", "TYPES", "TorchTrace", "Trace", "TraceRepeat", "Wait", "forms", "frame_json",
    "frames_json",
]

SCHEMA_VERSION = "1.11"  # major.minor: readers refuse another major and read a newer minor
# How deep provenance records (derived_from, members) and spans (parent) nest, at most: the writer
# writes a deeper one with its references dropped (a chain restarts), the reader drops deeper ones'.
MAX_NESTING = 64
MAX_PHASES = 4096  # phases a `phases` record holds at most

# A stack frame is a JSON array, [file, line, function, source text, user code?], and for code
# generated at run time (FX's `forward`) two more: [..., generated?, FX node or null] (schema 1.4).
# Readers accept 5 to 7 fields.
FRAME_FIELDS = ("file", "line", "function", "text", "user", "generated", "fx_node")
FrameJSON = (tuple[str, int, str, str, bool] | tuple[str, int, str, str, bool, bool]
             | tuple[str, int, str, str, bool, bool, str | None])
# An op of a printed trace: [first line (0-based) in `python`, number of lines, symbol, output names, prov id].
OP_FIELDS = ("line", "lines", "symbol", "outputs", "prov")
OpJSON = tuple[int, int, str, list[str], int | None]
# An op a fusion fused (schema 1.6): [the fusion's index in the trace record's `ops`, the op as printed, prov id].
FUSED_FIELDS = ("op", "text", "prov")
FusedJSON = tuple[int, str, int | None]
# A phase of a compile: [name, start (time_ns), end (time_ns), depth (0: top level), what it worked on or null].
PHASE_FIELDS = ("name", "start_ns", "end_ns", "depth", "detail")
PhaseJSON = tuple[str, int, int, int, str | None]
# What a cache entry's check found changed: [what, the cached entry's value, this call's value].
CHANGE_FIELDS = ("what", "cached", "now")
ChangeJSON = tuple[str, str, str]
# A timed op of a profiled trace: [position in bound_symbols, symbol, prov id, index in the trace record's ops].
PROFILE_OP_FIELDS = ("position", "symbol", "prov", "op")
ProfileOpJSON = tuple[int, str, int | None, int | None]

# The static memory timeline of a final trace (schema 1.6, docs/memory.md):
# an op: [position in bound_symbols, symbol, prov id, bytes allocated, bytes freed, bytes live after];
MEMORY_OP_FIELDS = ("position", "symbol", "prov", "allocated", "freed", "live")
MemoryOpJSON = tuple[int, str, int | None, int, int, int]
# a storage: [tensor name, bytes, prov id of the op that made it, its position (null: live at the start),
# the position that freed it or null];
MEMORY_BLOCK_FIELDS = ("name", "bytes", "prov", "position", "freed")
MemoryBlockJSON = tuple[str, int, int | None, int | None, int | None]
# a saved-for-backward storage: [name, bytes, prov id, an input?]; a remat change: [name, bytes, prov id, change].
MemorySavedJSON = tuple[str, int, int | None, bool]
MemoryRematJSON = tuple[str, int, int | None, str]


class OtlpSource(TypedDict):
    """Where a log rebuilt from spans came from (provenance/report/read/otlp_json.py)."""

    file: str  # the OTLP/JSON export file(s), by name
    service: str | None  # the resource's service.name
    spans: int  # spans of this process read


class Header(TypedDict):
    """The first line of a log: who wrote it."""

    type: Literal["header"]
    schema: str
    time_ns: int
    versions: dict[str, str | None]  # python, then what integrations register (torch, thunder), thunder_provenance
    argv: list[str]
    pid: int | None  # None: not known (a log rebuilt from spans whose resource has no process.pid)
    host: str
    rank: int | None
    world_size: int | None
    otlp: NotRequired[OtlpSource]  # a log `thunder-trace report` rebuilt from an OTLP/JSON export (schema 1.8)


class Prov(TypedDict):
    """A provenance record, written once before its first reference (see provenance.core.record)."""

    type: Literal["prov"]
    id: int
    kind: str
    source: list[FrameJSON]  # innermost first
    module: str | None
    module_type: str | None
    module_file: NotRequired[str | None]  # the file of the innermost user module's class (schema 1.5)
    transforms: list[str]
    role: str | None
    span: int | None
    derived_from: int | None
    members: list[int]


class Library(TypedDict):
    """An installed distribution the user's code lies in (transformers, litgpt), written once,
    before the first record whose user frames name a file of it (schema 1.5; provenance.core.libraries)."""

    type: Literal["library"]
    name: str  # the distribution's name
    version: str | None
    package: str  # its top-level package, where the frames' files are


class SpanStart(TypedDict):
    """A `provenance.scope` span, written before its first reference."""

    type: Literal["span"]
    id: int
    name: str
    parent: int | None
    attributes: dict[str, Any]  # JSON values; anything else as its repr()
    role: str | None
    start_ns: int


class SpanEnd(TypedDict):
    type: Literal["span_end"]
    id: int
    end_ns: int


class PieceRef(TypedDict):
    """The ThunderFX piece a compile is of: its Dynamo graph and its name in the split module."""

    graph: int  # dynamo_graph.graph
    compile_id: str | None  # Dynamo's compile id ("0/0"), when torch gave one
    name: str  # "thunder_0"


class CompileStart(TypedDict):
    type: Literal["compile_start"]
    compile: int
    fn: str
    index: int
    is_module: bool
    time_ns: int
    jit_stack: list[FrameJSON]  # user frames, outermost first
    call_stack: list[FrameJSON]
    piece: NotRequired[PieceRef]  # a ThunderFX piece's compile (schema 1.4)


class PieceJSON(TypedDict):
    """A piece of a split Dynamo graph: run by Thunder, or fallen back to torch."""

    name: str  # "thunder_0", "inductor_1"
    index: int  # the splitter's partition number
    compiler: str  # thunder | inductor | eager
    nodes: int  # its FX nodes
    frames: list[FrameJSON]  # the distinct user lines of its nodes, in graph order


class SplitReasonJSON(TypedDict):
    """Why Thunder's splitter did not take an FX node (Thunder's SplitReason)."""

    piece: str | None  # the fallback piece holding the node
    kind: str  # MISSING_OP_SUPPORT, UNSUPPORTED_NODE, EXCEPTION_PROXY_THUNDER_OP, ...
    info: str
    exception: str | None
    node: str | None
    frames: list[FrameJSON]  # the node's user stack, innermost first
    module: str | None
    module_type: str | None


class DynamoGuardFailure(TypedDict):
    """One guard of a cached Dynamo entry that the call failed, in the user's terms."""

    entry: str | None  # the compile id of the entry ("0/0")
    subject: str | None  # what changed, as the user wrote it ("input_ids")
    changes: list[ChangeJSON]  # [["dim 1 size", "16", "8"]]; empty when the guard is not a tensor check
    reason: str  # "input_ids: dim 1 size 16 → 8"
    guard: str  # torch's words


class DynamoRecompile(TypedDict):
    """Why Dynamo compiled the frame again: every cached entry's failed guards."""

    reason: str  # the newest entry's failures, one line
    function: FrameJSON  # the function Dynamo compiled again (its def line)
    call: FrameJSON | None  # the user's line of the call
    failures: list[DynamoGuardFailure]
    more: int  # entries not explained


class DynamoGraphEvent(TypedDict):
    """A graph Dynamo handed to ThunderFX's backend, as Thunder's splitter cut it (schema 1.4)."""

    type: Literal["dynamo_graph"]
    graph: int  # per process, from 1
    compile_id: str | None
    start_ns: int  # the backend call
    time_ns: int  # its end (the pieces compile later, at their first call)
    pieces: list[PieceJSON]
    reasons: list[SplitReasonJSON]
    dynamo_start_ns: NotRequired[int | None]  # Dynamo's start of the frame's compile (schema 1.5)
    phases: NotRequired[list[PhaseJSON]]  # dynamo_trace, split, inductor_compile so far (schema 1.5)
    recompile: NotRequired[DynamoRecompile | None]  # a frame compiled again: why (schema 1.5)


class GraphPhases(TypedDict):
    """Later phases of a Dynamo graph's compile (schema 1.5): Dynamo's end of the frame compile,
    each Thunder piece's compile at its first call, inductor's backward compile of a fallback."""

    type: Literal["graph_phases"]
    graph: int  # dynamo_graph.graph
    compile_id: str | None
    phases: list[PhaseJSON]


class GraphBreakEvent(TypedDict):
    """Dynamo broke a graph of a frame ThunderFX compiles (schema 1.4)."""

    type: Literal["graph_break"]
    compile_id: str | None  # the frame being captured
    time_ns: int
    reason: str
    frames: list[FrameJSON]  # the user's stack at the break, innermost first
    call_stack: NotRequired[list[FrameJSON]]  # the user's frames that called the compiled one, outermost first (1.11)


class BackendFailureJSON(TypedDict):
    """A call of ThunderFX's backend that raised in a frame compile (schema 1.11)."""

    start_ns: int  # the attempt's start: the frame's, or the previous failure's end (Dynamo traced it again)
    backend_ns: int  # the backend call
    end_ns: int  # the error
    error: str  # "DataDependentOutputException: aten._local_scalar_dense.default"
    frames: list[FrameJSON]  # the error's traceback, innermost first (through the errors it was raised from)


class FrameCompileEvent(TypedDict):
    """A Dynamo frame compile of a ThunderFX backend, when it ended, whatever it made (schema 1.11)."""

    type: Literal["frame_compile"]
    compile_id: str  # Dynamo's compile id ("0/0"), as dynamo_graph.compile_id
    start_ns: int  # Dynamo's compile-start callback
    end_ns: int  # its compile-end callback
    outcome: str  # graph | failed | skipped | break | empty (FRAME_OUTCOMES)
    graph: int | None  # the dynamo_graph it made
    function: FrameJSON | None  # the function Dynamo compiled (its def line)
    phases: list[PhaseJSON]  # each failed backend call: backend_failed, with the attempt's phases inside
    failures: list[BackendFailureJSON]  # the backend calls that raised, the first MAX_FAILURES
    more_failures: int
    breaks: int  # graph breaks Dynamo logged in the frame compile (graph_break records)
    error: str | None  # the error that ended it (failed, skipped)
    error_frames: list[FrameJSON]  # its traceback, innermost first


# What a frame compile made: a graph; nothing, with an error Dynamo raised (a backend's, or its own: it
# reaches the user unless torch's suppress_errors); nothing, Dynamo giving up on the frame (its Unsupported:
# a graph break it cannot resume from, inside a context manager or a try block; the frame runs as Python);
# nothing, a graph break before any op; nothing to compile.
FRAME_OUTCOMES = ("graph", "failed", "skipped", "break", "empty")


class TorchTrace(TypedDict):
    """An artifact of torch's structured trace (what TORCH_TRACE writes): Dynamo's output graph and
    guards, AOT graphs, inductor's code, symbolic shapes, cache outcomes, metrics (schema 1.9)."""

    type: Literal["torch_trace"]
    name: str  # torch's name of the artifact ("dynamo_output_graph", "fx_graph_cache_miss", ...)
    compile_id: str | None  # torch's compile id of the frame ("0/1"), as dynamo_graph.compile_id
    attempt: int | None  # Dynamo's attempt at the frame (a restart traces it again)
    time_ns: int
    metadata: Any  # torch's metadata of the artifact, its file names resolved
    payload: NotRequired[str]  # its text (a graph, code, guards), at most MAX_PAYLOAD characters
    payload_chars: NotRequired[int]  # the payload's whole length, where it was cut or left out


# A trace after a pass. Functional syntax: "pass" is a Python keyword.
Trace = TypedDict("Trace", {
    "type": Literal["trace"],
    "compile": int,
    "list": str,
    "index": int,
    "pass": str,
    "label": str | None,
    "ms": int | None,
    "end_ns": int | None,
    "python": NotRequired[str],  # only when an exporter keeps trace text (the JSONL log does)
    "ops": NotRequired[list[OpJSON]],
    "fused": NotRequired[list[FusedJSON]],  # with `ops`, where the trace has fusions (schema 1.6)
})


class TraceRepeat(TypedDict):
    """A trace Thunder lists a second time in the same list: a reference to the first."""

    type: Literal["trace"]
    compile: int
    list: str
    index: int
    same_as: int


class CacheCounts(TypedDict):
    hits: int
    misses: int
    calls: int


class FinalCounts(TypedDict):
    ops: int
    with_provenance: int
    compute: int
    compute_with_user_source: int
    compute_at_module_file: NotRequired[int]  # of those, the line in its module's own file (schema 1.9)
    fusions: int


class CompileEnd(TypedDict):
    type: Literal["compile_end"]
    compile: int
    status: Literal["ok"]
    time_ns: int
    seconds: float
    log_seconds: float | None  # None: not known (a log rebuilt from spans of a version before 1.8)
    cache: CacheCounts | None
    final: FinalCounts
    memory_unknown: NotRequired[str]  # why it has no memory records: its sizes are symbols (schema 1.11)


class CompileError(TypedDict):
    type: Literal["compile_error"]
    compile: int
    time_ns: int
    seconds: float
    error_type: str
    message: str
    traceback: str  # without this package's own frames
    last_prov: int | None
    user_frame: NotRequired[FrameJSON | None]  # the innermost user frame of the traceback (schema 1.3)


class CaptureDisabled(TypedDict):
    """An internal error in a hook stopped capture for this compile (which ran on unchanged):
    no compile_end or compile_error follows (schema 1.3)."""

    type: Literal["capture_disabled"]
    compile: int
    time_ns: int
    hook: str
    error: str


class ChangedInput(TypedDict):
    subject: str  # as the user wrote it
    changes: list[ChangeJSON]


class RejectedEntry(TypedDict):
    compile: int | None  # the compile that built the entry (None: not known to this log)
    reason: str
    subject: str | None
    changes: list[ChangeJSON]
    check: str | None
    error: str
    inputs: NotRequired[list[ChangedInput]]  # every input found changed, `subject` first (schema 1.5)


class Recompile(TypedDict):
    """A call missed the cache while entries existed: why each entry rejected it."""

    type: Literal["recompile"]
    compile: int
    time_ns: int
    call: FrameJSON | None  # the user's line of the call
    reason: str
    rejected: list[RejectedEntry]  # newest first, as Thunder tried them
    more: int


class Phases(TypedDict):
    """Where a compile's wall time went."""

    type: Literal["phases"]
    compile: int
    start_ns: int
    end_ns: int
    phases: list[PhaseJSON]


class ExecutorCompile(TypedDict):
    """A fusion executor compiling one fusion lazily, at the generated code's first call."""

    type: Literal["executor_compile"]
    compile: int
    executor: str
    fusion: str
    trace: str | None
    start_ns: int
    end_ns: int


class Calls(TypedDict):
    type: Literal["calls"]
    fn: str
    compiles: list[int]
    calls: int
    cache_hits: int
    cache_misses: int
    compile_hits: NotRequired[list[int]]  # the hits each compile of `compiles` served, in order (schema 1.6)
    time_ns: int


class ProfileOps(TypedDict):
    """The timed ops of one execution trace of a profiled compile, once, before its calls."""

    type: Literal["profile_ops"]
    compile: int
    trace: Literal["forward", "backward"]
    list: str  # the trace list holding the logged trace these ops are in ("computation" or "backward")
    index: int | None  # that trace's index in its list (its first, if listed twice); None: not logged
    clock: Literal["cpu", "cuda"]
    requested: int  # calls to profile
    ops: list[ProfileOpJSON]


class ProfileCall(TypedDict):
    """One profiled run of one execution trace: each op's time, in the order of its profile_ops."""

    type: Literal["profile_call"]
    compile: int
    trace: Literal["forward", "backward"]
    call: int
    wall_ns: int
    op_ns: list[int]
    host_ns: list[int] | None
    time_ns: int
    compiled: NotRequired[list[tuple[str, str, int]]]  # executor compiles during the run: [fusion, executor, ns] (1.6)
    memory: NotRequired[list[int]]  # cuda: the allocator's bytes at each op boundary, len(op_ns) + 1 (1.7)
    memory_peak: NotRequired[int | None]  # with `memory`: the allocator's peak in the run, if it rose (1.7)


class Memory(TypedDict):
    """The static memory timeline of one final execution trace, at the end of its compile (1.6)."""

    type: Literal["memory"]
    compile: int
    trace: Literal["forward", "backward"]
    list: str  # the logged trace list ("computation" or "backward")
    index: int | None  # the final trace's index in it
    inputs: int  # bytes of the inputs the caller holds (counted apart)
    start: int  # bytes live at the start (the backward: saved for backward)
    ops: list[MemoryOpJSON]
    blocks: list[MemoryBlockJSON]
    saved: list[MemorySavedJSON]  # the forward: what it saves for the backward; the backward: []
    remat: list[MemoryRematJSON]  # the forward: what rematerialization changed in that; the backward: []


class Wait(TypedDict):
    """A collective wait that blocked at least WAIT_NOTICE_S (1 s), with wait counters on and a log
    (provenance.timing.waits; schema 1.10): written once "blocked", while it still blocks, and once
    "done" when it returned, with how long it blocked. The two match on (start_ns, role, module, op)."""

    type: Literal["wait"]
    state: Literal["blocked", "done"]
    role: str | None  # the wait's distributed role ("row_parallel.post")
    module: str | None  # its module ("net2")
    op: str | None  # the collective it waits for ("torch_all_reduce_prim_impl"), where the trace says
    start_ns: int  # when the wait began (the same in both records)
    time_ns: int
    seconds: NotRequired[float]  # "done": how long it blocked


# -- the registry: every event type, once ------------------------------------------------------

class Ref:
    """Where an event names other records by id: a field ("last_prov"), each entry of an array
    field ("members[]"), or one position in each entry of an array of arrays ("ops[].4").
    Readers use it to find and check references; a value of the wrong shape names nothing."""

    __slots__ = ("field", "each", "position", "_nth")

    def __init__(self, path: str) -> None:
        name, _, position = path.partition("[].")
        self.each = path.endswith("[]") or bool(position)
        self.field = name.removesuffix("[]")
        self.position = int(position) if position else None
        self._nth = itemgetter(self.position) if self.position is not None else None

    def ids(self, event: dict) -> list:
        """The ids this reference holds in `event` (non-integers included: the caller checks)."""
        value = event.get(self.field)
        if not self.each:
            return [value] if value is not None else []
        if type(value) is not list:
            return []
        if self._nth is None:
            return value
        try:  # the common case, at C speed: every entry is an array long enough
            return list(map(self._nth, value))
        except (TypeError, IndexError, KeyError):
            n = self.position
            return [v[n] for v in value if type(v) is list and len(v) > n]

    def keep_known(self, event: dict, known: Container) -> int:
        """Drop from `event` the integer ids not in `known` (a field: set to None; an array's
        entry: removed; a position: set to None); how many were dropped."""
        value = event.get(self.field)
        if not self.each:
            if type(value) is int and value not in known:
                event[self.field] = None
                return 1
            return 0
        if type(value) is not list:
            return 0
        if self._nth is None:
            kept = [v for v in value if type(v) is not int or v in known]
            event[self.field] = kept
            return len(value) - len(kept)
        ids = self.ids(event)
        try:  # at C speed: a set minus a dict looks each distinct id up (the dict is not iterated)
            unknown = {i for i in set(ids).difference(known) if type(i) is int}
        except TypeError:  # an unhashable entry (junk): one by one
            unknown = {i for i in ids if type(i) is int and i not in known}
        if not unknown:
            return 0
        n, dropped = self.position, 0
        for entry in value:
            if type(entry) is list and len(entry) > n and type(entry[n]) is int and entry[n] in unknown:
                entry[n] = None
                dropped += 1
        return dropped

    def __repr__(self) -> str:
        return f"Ref({self.field}{'[]' if self.each else ''}{'' if self.position is None else f'.{self.position}'})"


@dataclass(frozen=True)
class EventType:
    """One event type: the TypedDicts it is written as, the records it names by id, the kind of
    id it defines (a prov or span record, which later events name), and whether it closes its
    compile (no record of the compile follows it but the lazy executor compiles)."""

    name: str
    forms: tuple[type, ...]
    provs: tuple[Ref, ...] = ()  # references to prov records
    spans: tuple[Ref, ...] = ()  # references to span records
    defines: Literal["prov", "span"] | None = None
    closes: bool = False


def _type(name: str, *forms: type, provs: tuple[str, ...] = (), spans: tuple[str, ...] = (),
          defines: Literal["prov", "span"] | None = None, closes: bool = False) -> EventType:
    return EventType(name, forms, tuple(map(Ref, provs)), tuple(map(Ref, spans)), defines, closes)


TYPES: dict[str, EventType] = {t.name: t for t in (
    _type("header", Header),
    _type("prov", Prov, provs=("derived_from", "members[]"), spans=("span",), defines="prov"),
    _type("span", SpanStart, spans=("parent",), defines="span"),
    _type("span_end", SpanEnd, spans=("id",)),
    _type("compile_start", CompileStart),
    _type("trace", Trace, TraceRepeat, provs=("ops[].4", "fused[].2")),
    _type("compile_end", CompileEnd, closes=True),
    _type("compile_error", CompileError, provs=("last_prov",), closes=True),
    _type("capture_disabled", CaptureDisabled, closes=True),
    _type("calls", Calls),
    _type("profile_ops", ProfileOps, provs=("ops[].2",)),
    _type("profile_call", ProfileCall),
    _type("recompile", Recompile),
    _type("phases", Phases),
    _type("executor_compile", ExecutorCompile),
    _type("dynamo_graph", DynamoGraphEvent),
    _type("graph_break", GraphBreakEvent),
    _type("graph_phases", GraphPhases),
    _type("frame_compile", FrameCompileEvent),
    _type("library", Library),
    _type("memory", Memory, provs=("ops[].2", "blocks[].2", "saved[].2", "remat[].2")),
    _type("torch_trace", TorchTrace),
    _type("wait", Wait),
)}
KNOWN_TYPES = frozenset(TYPES)
CLOSING_TYPES = frozenset(name for name, t in TYPES.items() if t.closes)
# Every event type, by its "type"; a type written in more than one form maps to their union.
EVENTS: dict[str, Any] = {name: functools.reduce(operator.or_, t.forms) for name, t in TYPES.items()}
# Any event, for type checkers: the forms of every type.
Event = (Header | Prov | SpanStart | SpanEnd | CompileStart | Trace | TraceRepeat | CompileEnd | CompileError
         | CaptureDisabled | Calls | ProfileOps | ProfileCall | Recompile | Phases | ExecutorCompile | DynamoGraphEvent
         | GraphBreakEvent | GraphPhases | FrameCompileEvent | Library | Memory | TorchTrace | Wait)


def frame_json(frame: Frame) -> FrameJSON:
    """Five fields, seven for generated code (readers of 1.3 and before read five)."""
    if frame.generated or frame.fx_node is not None:
        return (frame.file, frame.line, frame.function, frame.text, frame.user, frame.generated, frame.fx_node)
    return (frame.file, frame.line, frame.function, frame.text, frame.user)


def frames_json(frames: Iterable[Frame]) -> list[FrameJSON]:
    return [frame_json(f) for f in frames]


def forms(event_type: str) -> tuple[type, ...]:
    """The TypedDicts an event of this type is written as (one, or several for "trace")."""
    return TYPES[event_type].forms
