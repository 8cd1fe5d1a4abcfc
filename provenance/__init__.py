"""thunder-provenance: where every line of a Thunder trace came from.

    import provenance
    provenance.enable()                      # or: with provenance.tracing(): ...
    jfn = thunder.jit(model); jfn(x)
    print(provenance.annotate(thunder.last_traces(jfn)[-1]))
    provenance.of(bsym)                      # -> Provenance | None

    provenance.enable(profile=3)             # or THUNDER_TRACE_PROFILE=3: time 3 calls op by op
    provenance.print_cost(jfn, by="line")    # where the time went: line, module, role, kind, op
    provenance.fx_graphs(thunderfx_fn)       # ThunderFX: Dynamo graphs, pieces, split reasons
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from provenance._version import __version__
from provenance.core.scope import current_span, scope  # eager: the submodule would shadow the function

TYPE_CHECKING = False  # typing is not imported: `import provenance` (every submodule's first step) stays light

if TYPE_CHECKING:
    from typing import Any

    from provenance.allocation.measured_memory import MemoryCheck
    from provenance.allocation.static_memory import CompileMemory, MemoryRow
    from provenance.core.coverage_stats import Coverage
    from provenance.core.record import Frame, Kind, Provenance, Span, of
    from provenance.dynamo.graphs import DynamoGraph, GraphBreak, Piece, SplitReason
    from provenance.log.exporter import Exporter
    from provenance.report.read.log_file import Log
    from provenance.timing.profile import CompileProfile
    from provenance.timing.rollup import CostRow

__all__ = [
    "Coverage", "DynamoGraph", "Frame", "GraphBreak", "Kind", "Piece", "Provenance", "Span", "SplitReason",
    "__version__", "add_exporter", "annotate", "cost", "coverage", "current_span", "disable", "enable", "enabled",
    "fx_graphs", "graph_breaks", "load", "memory", "memory_checks", "memory_compiles", "of", "print_cost",
    "print_memory", "profiles", "remove_exporter", "scope", "stats",
    "tracing", "wait_counters",
]

# The public classes are imported on first use (PEP 562): importing the package, which every
# submodule and `thunder-trace --version` does, loads no rollup, no graph types (scope() and
# current_span() are eager: the record's scope module is imported by every capture anyway).
_LAZY = {"Coverage": "provenance.core.coverage_stats", "DynamoGraph": "provenance.dynamo.graphs",
         "GraphBreak": "provenance.dynamo.graphs", "Piece": "provenance.dynamo.graphs",
         "SplitReason": "provenance.dynamo.graphs", "Frame": "provenance.core.record", "Kind": "provenance.core.record",
         "Provenance": "provenance.core.record", "Span": "provenance.core.record", "of": "provenance.core.record"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'provenance' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later look-ups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


PROFILE_ENV = "THUNDER_TRACE_PROFILE"
WARMUP_ENV = "THUNDER_TRACE_PROFILE_WARMUP"


def enable(directory: str | os.PathLike[str] | None = None, *, wait_counters: bool | None = None,
           profile: int | None = None, profile_warmup: int | None = None) -> bool:
    """Install the hooks into Thunder: every compile from now on records provenance.

    With `directory`, also log every compile there as JSONL (one file per process; what
    `THUNDER_TRACE=directory` does with no code change; a directory already logged to, by
    THUNDER_TRACE or an earlier enable(), keeps its one file). A directory that cannot be created
    or written gets one warning, and the program runs on untraced: returns False. A Thunder this
    package does not support, or one that cannot import on the installed torch, raises
    UnsupportedThunderVersion naming the versions (and Thunder's own error), before anything is created.
    When OpenTelemetry is configured (an application TracerProvider, or OTEL_EXPORTER_OTLP_*
    endpoints; see exporters/otel.py), spans and metrics also go there.
    `wait_counters` (default: THUNDER_TRACE_WAIT_COUNTERS=1) counts time blocked in collective
    waits (`provenance.wait_counters()`, and OTel metrics); it wraps every wait Thunder generates.
    `profile=N` (default: THUNDER_TRACE_PROFILE, else unchanged; 0 turns it off): for every
    compile from now on, the N calls after the first are timed op by op (`provenance.cost()`);
    the calls after those run Thunder's code untouched. `profile_warmup` (default:
    THUNDER_TRACE_PROFILE_WARMUP, else 1): how many calls of each compile run untimed first (0:
    the compile's own call is timed too). See docs/cost.md.
    """
    from exporters.otel import OtelExporter, from_environment
    from provenance import thunder as integration
    from provenance.log.session import SESSION, process_rank
    from provenance.timing.waits import WAITS

    if wait_counters is None:
        wait_counters = os.environ.get("THUNDER_TRACE_WAIT_COUNTERS", "").strip().lower() in ("1", "true")
    integration.check()  # before any log directory exists: a refused stack leaves none behind
    if directory is not None and _logging_to(directory):
        directory = None  # one process, one file per directory
    if directory is not None:
        from exporters.jsonl import JsonlExporter, UnwritableDirectory

        try:
            exporter = JsonlExporter(os.fspath(directory), rank=lambda: process_rank()[0])
        except UnwritableDirectory as exc:
            warnings.warn(f"thunder-provenance: {exc}; the program runs without tracing.", RuntimeWarning,
                          stacklevel=2)
            return False
        SESSION.add_exporter(exporter)
    waits = WAITS.snapshot if wait_counters else None
    otel = next((e for e in SESSION.exporters if isinstance(e, OtelExporter)), None)
    if otel is None:
        rank, world_size = process_rank()
        if (otel := from_environment(rank=rank, waits=waits, world_size=world_size)) is not None:
            SESSION.add_exporter(otel)
    elif waits is not None:
        otel.observe_waits(waits)
    integration.install(wait_counters=wait_counters, profile=_profile_setting(profile),
                        warmup=_warmup_setting(profile_warmup))
    return True


def _logging_to(directory: str | os.PathLike[str]) -> bool:
    """Whether a JSONL log of this process already goes to `directory`."""
    from exporters.jsonl import JsonlExporter
    from provenance.log.session import SESSION

    wanted = os.path.realpath(os.fspath(directory))
    return any(isinstance(e, JsonlExporter) and os.path.realpath(e.directory) == wanted for e in SESSION.exporters)


def _warmup_setting(warmup: int | None) -> int | None:
    """Calls to run untimed first: the argument, else THUNDER_TRACE_PROFILE_WARMUP, else None
    (unchanged; 1 by default)."""
    from provenance.timing.profile import parse_count

    if warmup is not None:
        return parse_count(warmup, "profile_warmup")
    value = os.environ.get(WARMUP_ENV)
    if value is None or not value.strip():
        return None
    try:
        return parse_count(value, WARMUP_ENV)
    except ValueError as exc:
        warnings.warn(f"thunder-provenance: {exc}; one warm-up call, as by default.", RuntimeWarning, stacklevel=3)
        return 1


def _profile_setting(profile: int | None) -> int:
    from provenance import thunder as integration
    from provenance.timing.profile import parse_count

    if profile is not None:
        return parse_count(profile, "profile")
    value = os.environ.get(PROFILE_ENV)
    if value is None:
        return integration.profile_setting()  # unchanged (0 when disabled)
    if not value.strip():  # set but empty: off, as unset would be in a fresh process
        return 0
    try:
        return parse_count(value, PROFILE_ENV)
    except ValueError as exc:
        warnings.warn(f"thunder-provenance: {exc}; profiling is off.", RuntimeWarning, stacklevel=3)
        return 0


def disable() -> None:
    """Remove every hook (Thunder then runs exactly as without this package), close the logs and
    exporters, and drop what capture kept (its memo tables, provenance.core.caches, emptied)."""
    from provenance import thunder as integration
    from provenance.log.session import SESSION

    integration.uninstall()
    SESSION.close()


def add_exporter(exporter: Exporter) -> None:
    """Send the events of every compile to `exporter` too (see exporters.base.Exporter) while
    tracing is enabled. Joining a running log, it first gets the header and the records already
    written, so every id it sees resolves."""
    from provenance.log.exporter import Exporter
    from provenance.log.session import SESSION

    if not isinstance(exporter, Exporter):
        missing = [m for m in ("name", "needs_trace_text", "emit", "close", "stats") if not hasattr(exporter, m)]
        raise TypeError(f"provenance.add_exporter() needs an exporters.base.Exporter; {exporter!r} lacks "
                        f"{', '.join(missing)}")
    SESSION.add_exporter(exporter)


def remove_exporter(exporter: Exporter) -> None:
    """Stop sending events to `exporter`, and close it."""
    from provenance.log.session import SESSION

    SESSION.remove_exporter(exporter)


def stats() -> dict[str, dict[str, Any]]:
    """What each attached exporter did so far, by name: `{"jsonl": {"path", "events", "bytes"},
    "otel": {"events", "spans", "dropped_spans"}}` (a second exporter of a name is `name#2`)."""
    from provenance.log.session import SESSION

    return SESSION.stats()


def annotate(trace: Any, *, print_depth: int = -1, group: bool = False) -> str:
    """`trace`'s Python source (as `print(trace)` shows it) with provenance comments: a header
    above each op whose record differs from the previous one's, a tag on each subsymbol line and
    bookkeeping statement. `print_depth` as in Thunder's `TraceCtx.python` (-1: every level);
    `group=True`: a run of ops sharing a distributed role is one labelled block. See
    provenance.core.annotation.annotate."""
    from provenance.core import annotation
    from provenance.thunder import printing

    return annotation.annotate(trace, printing, print_depth=print_depth, group=group)


def coverage(trace: Any, *, deep: bool = False) -> Coverage:
    """How many of the trace's top-level bound symbols (every nesting level with `deep=True`)
    have a record, a user line, a module (see provenance.core.coverage_stats.Coverage)."""
    from provenance.core import coverage_stats
    from provenance.thunder import passes

    return coverage_stats.coverage(trace, passes.is_bookkeeping, deep=deep)


def enabled() -> bool:
    from provenance import thunder as integration

    return integration.installed()


@contextmanager
def tracing(directory: str | os.PathLike[str] | None = None) -> Iterator[None]:
    """Enable provenance (and JSONL logs in `directory`) inside the block; restore after it."""
    from provenance.log.session import SESSION

    was_enabled, before = enabled(), list(SESSION.exporters)
    enable(directory)
    try:
        yield
    finally:
        if not was_enabled:
            disable()
        else:  # tracing was on already (THUNDER_TRACE): only close what this block added
            for exporter in [e for e in SESSION.exporters if e not in before]:
                SESSION.remove_exporter(exporter)


def wait_counters() -> dict[tuple[str | None, str | None], tuple[float, int]]:
    """{(role, module): (seconds blocked in collective waits, waits in progress)}; see provenance.timing.waits."""
    from provenance.timing.waits import WAITS

    return WAITS.snapshot()


def fx_graphs(compiled: object = None) -> list[DynamoGraph]:
    """ThunderFX: the Dynamo graphs `compiled` handed to Thunder, oldest first, each with the
    pieces Thunder's splitter cut it into (Thunder's or a torch fallback, and why) and the
    thunder.jit compiles of each piece. `compiled`: what `thunder.dynamo.thunderfx` returned,
    the `ThunderCompiler` given to `torch.compile`, or the module `torch.compile` returned;
    None: the process's most recent graphs. Recorded while tracing is enabled."""
    from provenance.thunder import thunderfx

    return thunderfx.graphs(compiled)


def graph_breaks(compiled: object = None) -> list[GraphBreak]:
    """ThunderFX: Dynamo's graph breaks (torch's reason, the user's line) in what `compiled`
    compiled (as for `fx_graphs`; None: all recent ones). Recorded while tracing is enabled."""
    from provenance.thunder import thunderfx

    return thunderfx.breaks(compiled)


def load(path: str | os.PathLike[str]) -> Log:
    """Stream a THUNDER_TRACE log file, or a directory of them, back into records."""
    from provenance.report.read.log_file import Log

    return Log(path)


def profiles(jfn=None) -> list[CompileProfile]:
    """The per-op profiles of `jfn`'s compiles (a function or module from thunder.jit, or what
    `thunder.dynamo.thunderfx` returned: its Thunder pieces' compiles), or of every compile the
    process kept (the last 256) when `jfn` is None. See provenance.timing.profile."""
    from provenance.timing import profile

    return _of(jfn, profile.profiles)


def _of(jfn: object, kept: Any) -> list:
    """What `kept(owner=None)` keeps (profiles, memory timelines) of `jfn`'s compiles: a thunder.jit
    function or module (by its CompileStats), what thunderfx returned (its Thunder pieces' compile
    ids), or everything when `jfn` is None."""
    from provenance import thunder as integration

    if jfn is None:
        return kept()
    compile_stats = integration.compile_stats_of(jfn)
    if compile_stats is not None:
        return kept(compile_stats)
    graphs = fx_graphs(jfn)
    if not graphs:
        raise TypeError(f"expected a function or module returned by thunder.jit or thunderfx, got "
                        f"{type(jfn).__name__}")
    ids = {c for g in graphs for piece in g.pieces for c in piece.compiles}
    return [k for k in kept() if k.compile_id in ids]


def cost(jfn=None, by: str = "line", *, keep_all: bool = False) -> list[CostRow]:
    """Where the profiled calls' time went, as rows sorted by median time per call (largest first).

    `by`: "line" (the user's source line; backward and recompute time charged to the forward
    line through `derived_from`), "module_line", "module" (hierarchical: a module includes its
    submodules), "role" (distributed role), "kind" (forward/backward/recompute/bookkeeping/fusion)
    or "op". Each row (provenance.timing.rollup.CostRow), per measured call: `time` (a
    provenance.timing.spread.Spread: median, range, quartiles, outliers), the medians `forward_ns`,
    `backward_ns`, `recompute_ns`, `shared_ns` (fusions shared with other keys); `sum_ns`, `calls`,
    `share` (of the median profiled wall time), `kind`, `label`, `members`, `fusions`. Calls in which
    an executor compiled, and stalls (over 3× the median and 1 ms), are left out unless `keep_all`.
    Needs profiling: enable(profile=N). See docs/cost.md.
    """
    from provenance.timing.rollup import rollup

    return rollup(profiles(jfn), by, keep_all=keep_all)


def print_cost(jfn=None, by: str = "line", *, top: int | None = 20, file=None,
               keep_all: bool = False) -> None:
    """Print `cost(jfn, by)` as a table (ms per measured call: the median and the range), with
    the calls left out and what was not timed."""
    from rich.console import Console

    from provenance.timing.rollup import line_texts, rollup, summary, table

    kept = profiles(jfn)
    rows = rollup(kept, by, keep_all=keep_all)
    totals = summary(kept, keep_all=keep_all)
    stream = file if file is not None else sys.stdout
    console = Console(file=file, width=None if getattr(stream, "isatty", lambda: False)() else 160)
    if not totals["profiled"]:
        console.print("No profiled calls: enable profiling with provenance.enable(profile=N) or "
                      f"{PROFILE_ENV}=N before the first call, then call the compiled function again.")
        return
    title = (f"Time by {by}: {totals['calls']} measured call(s) of {totals['compiles']} compile(s), "
             f"{totals['wall_ns'] / 1e6:.3f} ms per call (median), {totals['coverage']:.1%} in ops")
    console.print(table(rows, by=by, title=title, top=top,
                        texts=line_texts(kept) if by in ("line", "module_line") else None))
    for _fn, compile_id, excluded in totals["excluded"][:10]:
        console.print(f"Left out: compile {compile_id}, {excluded.describe()}")
    if len(totals["excluded"]) > 10:
        console.print(f"Left out: {len(totals['excluded']) - 10} more (calls, and preempted op times)")
    for note in _untimed(jfn):
        console.print(note)


def memory(jfn=None, by: str = "line") -> list[MemoryRow]:
    """Where the memory of `jfn`'s compiles goes (the static timeline of its final forward and
    backward traces; on CPU this is the figure): rows by "line" (a backward allocation charged to
    its forward line through `derived_from`), "module_line", "module" (hierarchical), "role" or
    "op", sorted by saved-for-backward bytes. Each row (provenance.allocation.static_memory.MemoryRow):
    `saved_bytes`, `forward_peak_bytes`, `backward_peak_bytes` (live at each trace's peak),
    `allocated_bytes`, `remat_removed_bytes`/`remat_added_bytes`. Inputs and parameters are counted
    apart (`memory_summary`). Needs capture on (provenance.enable()). See docs/memory.md."""
    from provenance.allocation.static_memory import rollup

    return rollup(memory_compiles(jfn), by)


def memory_compiles(jfn=None) -> list[CompileMemory]:
    """The memory timelines of `jfn`'s compiles (or of every compile the process kept)."""
    from provenance.allocation import static_memory

    return _of(jfn, static_memory.compiles)


def memory_checks(jfn=None) -> list[MemoryCheck]:
    """The CUDA allocator's readings of each profiled compile against its static timeline, per trace
    (profiling on a CUDA device: the first timed call reads the allocator; docs/memory.md). Empty on
    the CPU, where the static timeline is the figure."""
    from provenance.allocation.measured_memory import checks

    return checks(memory_compiles(jfn), profiles(jfn))


def print_memory(jfn=None, by: str = "line", *, top: int | None = 20, file=None) -> None:
    """Print `memory(jfn, by)` as a table, with the totals: saved for backward, the peaks, inputs."""
    from rich.console import Console

    from provenance.allocation.static_memory import line_texts, rollup, size, summary, table
    from provenance.core import attribution

    kept = memory_compiles(jfn)
    stream = file if file is not None else sys.stdout
    console = Console(file=file, width=None if getattr(stream, "isatty", lambda: False)() else 160)
    if not kept:
        console.print("No memory timelines: enable capture (provenance.enable()) before the first call.")
        return
    totals = summary(kept)
    title = (f"Memory by {by} (static, from the traces): {totals['compiles']} compile(s); saved for backward "
             f"{size(totals['saved_bytes'])} (+ {size(totals['saved_input_bytes'])} of inputs), forward peak "
             f"{size(totals['forward_peak_bytes'])}, backward peak {size(totals['backward_peak_bytes'])}, "
             f"inputs {size(totals['forward_input_bytes'])} apart")
    rows = rollup(kept, by)
    console.print(table(rows, by=by, title=title, top=top,
                        texts=line_texts(kept) if by in ("line", "module_line") else None))
    for check in memory_checks(jfn):  # measured on the device, where it was
        console.print(f"Measured (CUDA allocator): {check.describe()}", highlight=False, soft_wrap=True)
        for op in check.differ[:5]:
            where = attribution.line_key(op.record)
            console.print(f"  {op.name} at {where}: {size(op.measured)} measured, {size(op.static)} static",
                          highlight=False, soft_wrap=True)


def _untimed(jfn: object) -> list[str]:
    """What the figures do not hold: ThunderFX pieces that torch ran (inductor or eager)."""
    from provenance.dynamo.graphs import untimed

    try:
        graphs = fx_graphs(jfn)
    except Exception:  # a note, never an error
        return []
    notes = []
    for graph in graphs:
        fallback = [p for p in graph.pieces if not p.thunder]
        if fallback:
            notes.append(untimed(str(graph.compile_id or graph.number), [p.compiler for p in fallback],
                                 [f"{os.path.basename(f.file)}:{f.line}" for p in fallback for f in p.frames]))
    return notes
