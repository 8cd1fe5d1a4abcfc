"""The run: one streaming pass over THUNDER_TRACE logs, each record handed to its handler
(handlers.py), which sends it to the run or its compile -> the report's render model.

Files are read one after the other, records one at a time. A compile's pages are written as soon
as its compile_end / compile_error arrives (compile.py); the run keeps only a small summary per
compile, from which the index, failures, rank comparison, Perfetto trace and
`compile_directory.json` are made at the end. Bad input never raises: each problem is counted
and listed.
"""

from __future__ import annotations

import os
import reprlib
import zlib
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, overload

from provenance.report.analyze.activity import Activity, ranks_now
from provenance.report.analyze.call_sites import CallSites
from provenance.report.analyze.compile import CompileBuilder
from provenance.report.analyze.fx_graphs import FxGraphs
from provenance.report.analyze.handlers import HANDLERS, READ_AHEAD, read_ahead
from provenance.report.analyze.memory import run_memory
from provenance.report.analyze.pending import Compile, CompileResult, LocalCompile
from provenance.report.analyze.prov_table import ProvTable
from provenance.report.analyze.ranks import GROUP_OVER, compare_ranks, group_logs, ranks_label
from provenance.report.model import (
    CompilePages,
    CompileSummary,
    ExecutorCompileView,
    Failure,
    FxRun,
    LogSummary,
    Problems,
    RoleCount,
    RunModel,
    Totals,
    coverage,
)
from provenance.report.numbers import as_int, total
from provenance.report.plural import plural
from provenance.report.read.coerce import UNUSABLE, hashable
from provenance.report.read.log_file import LogFile, LogRecord
from provenance.report.read.processes import RunLog, header_view
from provenance.report.read.profile_records import LoggedProfile
from provenance.report.read.read_ahead import MAX_PROBLEMS as MAX_READ_AHEAD_LISTED
from provenance.report.read.read_ahead import ReadAhead

if TYPE_CHECKING:  # the outputs are given (build.py): analysis names them by what it asks of them
    from provenance.report.analyze.ports import DirectorySink, Keeper, PerfettoSink, ReportSink, Share, SourceLines

__all__ = ["RunBuilder"]

_short = reprlib.Repr()
_short.maxstring = _short.maxother = 60

MAX_FAILURES_DETAILED = 200
MAX_PROLOGUES = 256  # final prologues kept (compressed) for the recompiles that diff against them
_DEBUG = bool(os.environ.get("THUNDER_TRACE_REPORT_DEBUG"))  # raise on a record the report cannot use


class _Calls(NamedTuple):
    """A calls record: how often a jitted function was called, and which compiles it made."""

    log: int
    calls: int | None
    hits: int | None
    compiles: list[int]
    compile_hits: dict[int, int] | None  # each compile's own hits (schema 1.6), None in older logs


@dataclass(repr=False, eq=False)
class LogPart:
    """What one log adds to the run, kept apart from every other log's: the run's model is made from
    the logs' parts, in order, at the end (RunBuilder.model), so an incremental report keeps a log's
    part with the log's state and takes up each log on its own (incremental.py)."""

    problems: Problems = field(default_factory=Problems)
    read_ahead_problems: list[tuple[int, str]] = field(default_factory=list)  # listed first: found before the pass
    read_ahead_more: int = 0
    summaries: list[CompileSummary] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    call_sites: CallSites = field(default_factory=CallSites)
    roles: Counter = field(default_factory=Counter)
    calls: list[_Calls] = field(default_factory=list)
    page_counts: Counter = field(default_factory=Counter)  # compiles by page-name base
    unnumbered: int = 0  # compiles whose id is not a non-negative integer
    keys: list[str] = field(default_factory=list)  # every compile's page key, in the order begun
    begun: set[Any] = field(default_factory=set)  # the compile ids begun (hashable)
    compile_pages: dict[Any, str] = field(default_factory=dict)  # compile id -> its page, for links
    prologue_open: dict[Any, str] = field(default_factory=dict)  # the latest prologue of each open compile
    prologues: OrderedDict[Any, bytes] = field(default_factory=OrderedDict)  # final prologues, zlib'd
    assets: set[str] = field(default_factory=set)  # the user files' data files its compiles' pages load
    fx: FxGraphs = field(default_factory=FxGraphs)  # ThunderFX's graphs, pieces and breaks
    summary: LogSummary | None = None  # once the pass over the log ended
    size: int = 0  # bytes read, and their CRC-32 (None: not computed)
    crc: int | None = None

    def all_problems(self, log: str) -> Problems:
        """The log's problems, those found before the pass first."""
        found = Problems()
        for line, reason in self.read_ahead_problems:
            found.add("malformed record", log, line, reason)
        if more := self.read_ahead_more:
            found.add("malformed record", log, None, f"{more} more malformed read-ahead records not listed", count=more)
        found.extend(self.problems)
        return found


class FilePass:
    """The pass over one log file: its open compiles, and the compile that ended last."""

    def __init__(self, run: RunBuilder, log: RunLog, part: LogPart, log_file: LogFile,
                 profiles: dict[Any, LoggedProfile]) -> None:
        self.run, self.log, self.part, self.log_file = run, log, part, log_file
        self.provs = ProvTable(log_file)
        self.profiles = profiles  # read ahead, by compile id: each handed to its compile at its start
        self.open_compiles: dict[Any, Compile] = {}
        # A compile that ended waits for the next compile to start (or the end of the log): the
        # executor compiles its first call causes come after its end.
        self.ended: list[tuple[Any, Compile, dict]] = []
        self.read_ahead_seen = 0  # read-ahead records the pass met
        self.libraries: dict[str, str] = {}  # `library` records: distribution -> version
        self.activity = Activity()  # what the process is doing as the log ends

    def open(self, record: LogRecord) -> None:
        self.release()
        self.activity.started(record.data)
        cid = hashable(record.get("compile"))
        if cid in self.open_compiles:
            self.run.malformed(self.log, record.line,
                               f"compile {_short.repr(cid)} started twice; the first is closed as incomplete")
            self.open_compiles.pop(cid).finish(None)
        self.open_compiles[cid] = self.run.begin(self, record.data)

    @overload
    def compile_of(self, record: LogRecord) -> Compile: ...

    @overload
    def compile_of(self, record: LogRecord, begin: bool) -> Compile | None: ...

    def compile_of(self, record: LogRecord, begin: bool = True) -> Compile | None:
        """The open compile a record belongs to; if its start is missing, one begun for it (`begin`),
        else None (the record is counted and skipped)."""
        cid = hashable(record.get("compile"))
        found = self.open_compiles.get(cid)
        if found is None:
            self.run.malformed(self.log, record.line, f"{record.type} of compile {_short.repr(cid)} without its "
                                                      f"compile_start{'' if begin else ': skipped'}")
            if begin:
                found = self.open_compiles[cid] = self.run.begin(self, {"compile": record.get("compile")})
        return found

    def close(self, record: LogRecord, ok: bool) -> None:
        """The record that closes its compile; `ok`: the compile succeeded (its handler says)."""
        compile_ = self.compile_of(record)
        cid = hashable(record.get("compile"))
        self.activity.ended(record.data, ok)
        self.open_compiles.pop(cid, None)
        self.run.compile_closed(self.log, cid, ok=ok)
        self.release()
        self.ended.append((cid, compile_, record.data))

    def after_end(self, data: dict) -> None:
        """A record of the compile that ended last (dropped if another compile came between)."""
        if self.ended and self.ended[0][0] == hashable(data.get("compile")):
            self.ended[0][1].add(data)

    def waited(self, data: dict) -> None:
        """A `wait` record: a collective wait blocked long, or one that did and returned."""
        self.activity.waited(data)

    def summarized(self, data: dict) -> None:
        """A `calls` record: the process's summary of a jitted function (written as it exits)."""
        self.activity.summarized(data)

    def latest_prologue(self, compile_id: Any, text: str) -> None:
        self.part.prologue_open[hashable(compile_id)] = text

    def release(self) -> None:
        """Finish the compile that ended last (its pages are written)."""
        while self.ended:
            _, compile_, closing = self.ended.pop()
            compile_.finish(closing)

    def kept(self) -> dict[str, Any]:
        """What an incremental report keeps of the pass (between compiles: none is open)."""
        return {"log_file": self.log_file, "provs": self.provs,
                "read_ahead_seen": self.read_ahead_seen, "libraries": self.libraries, "activity": self.activity}

    @classmethod
    def resumed(cls, run: RunBuilder, log: RunLog, part: LogPart, kept: dict[str, Any],
                profiles: dict[Any, LoggedProfile]) -> FilePass:
        """The pass taken up where an incremental report kept it; `profiles`: those read ahead past it."""
        file = cls.__new__(cls)
        file.run, file.log, file.part = run, log, part
        file.log_file, file.provs, file.profiles = kept["log_file"], kept["provs"], profiles
        file.log_file.path = log.path  # the file is the one given, never one a state names
        file.read_ahead_seen, file.libraries = kept["read_ahead_seen"], kept["libraries"]
        file.activity = kept["activity"]
        file.open_compiles, file.ended = {}, []
        return file


class RunBuilder:
    """Consumes the records of every log file; each compile's pages are written when it ends,
    here or (with a `share`: workers.py) by the worker process whose share it is. What each log adds
    is kept in its LogPart; the run's model is made from them at the end. Its outputs are given: the
    page writer, the Perfetto trace, compile_directory.json's entries and the user source files (a
    worker's run has no Perfetto trace or directory: it only reads, and builds its share)."""

    def __init__(self, writer: ReportSink, logs: list[RunLog], *, perfetto: PerfettoSink | None,
                 directory: DirectorySink | None, sources: SourceLines,
                 progress: Callable[[int], None] | None = None,
                 share: Share | None = None, keeper: Keeper | None = None) -> None:
        self.writer = writer
        self.keeper = keeper  # an incremental report's: each log's state kept at a place of it
        self.logs = logs
        self.progress = progress
        self.share = share
        self.preamble = Problems()  # what the input had before any log was read (files passed over)
        self.parts: dict[int, LogPart] = {}  # by log index
        self.source_cache = sources
        self.bytes_done = 0  # bytes read by this build, for the progress bar
        self.perfetto = perfetto
        self.directory = directory  # compile_directory.json's entries, as compiles end
        self.fx = _FxOfLog(self.parts)
        self._run_fx: FxGraphs | None = None  # the logs' merged, once the pass ended

    # -- the run, from its logs' parts ------------------------------------------------------------
    @property
    def problems(self) -> Problems:
        found = Problems()
        found.extend(self.preamble)
        for log in self.logs:
            part = self.parts.get(log.index)
            if part is not None:
                found.extend(part.all_problems(log.name))
        return found

    @property
    def summaries(self) -> list[CompileSummary]:
        return [s for log in self.logs if log.index in self.parts for s in self.parts[log.index].summaries]

    @property
    def bytes_read(self) -> int:
        return sum(part.size for part in self.parts.values())

    def _parts(self) -> list[LogPart]:
        return [self.parts[log.index] for log in self.logs if log.index in self.parts]

    # -- the pass ---------------------------------------------------------------------------------
    def run(self, resume: dict[int, tuple[LogPart, dict[str, Any]]] | None = None) -> None:
        """The pass; `resume`: by log, (its part, its pass) kept by an earlier report (incremental.py),
        taken up where they were kept."""
        self.read(resume)
        if self.share is not None:
            self.share.drain()
        self._run_fx = FxGraphs.merged([part.fx for part in self._parts()])
        for graph in self._run_fx.timed_graphs():
            self.perfetto.dynamo_graph(graph.log, graph)
        self.perfetto.close()

    def read(self, resume: dict[int, tuple[LogPart, dict[str, Any]]] | None = None) -> None:
        """The pass over every log (all a worker does: its compiles' results go to the main process)."""
        for log in self.logs:
            self._file(log, (resume or {}).get(log.index))

    def _start(self, log: RunLog, resumed: tuple[LogPart, dict[str, Any]] | None, at: int | None
               ) -> tuple[FilePass, ReadAhead, bool]:
        """The pass over a log: taken up where its part was kept, or from its start; whether taken up."""
        if resumed is not None:
            part, kept = resumed
            log_file = kept["log_file"]
            found, profiles = read_ahead(log.path, start=log_file.bytes, first_line=log_file.lines + 1, split=at)
            # (malformed read-ahead records past those listed are counted, not placed: not split at the state)
            if part.begun.isdisjoint(found.compiles) and not (found.more_problems or part.read_ahead_more):
                part.read_ahead_problems = sorted(
                    [p for p in part.read_ahead_problems if p[0] <= log_file.lines] + found.problems)
                part.read_ahead_more = max(0, len(part.read_ahead_problems) - MAX_READ_AHEAD_LISTED)
                del part.read_ahead_problems[MAX_READ_AHEAD_LISTED:]
                found.records += kept["read_ahead_before"]
                found.split = (found.split or 0) + kept["read_ahead_before"]
                self.parts[log.index] = part
                return FilePass.resumed(self, log, part, kept, profiles), found, True
            # profile records of a compile before the state (its page changes): the log is read whole
            self.keeper.fell_back(log.index, "profile records of a compile before its kept state were added"
                                  if not part.begun.isdisjoint(found.compiles) else
                                  "more malformed profile records than are listed")
        part = self.parts[log.index] = LogPart()
        found, profiles = read_ahead(log.path, split=at)
        part.read_ahead_problems, part.read_ahead_more = found.problems, found.more_problems
        return FilePass(self, log, part, LogFile(log.path, read_ahead=READ_AHEAD), profiles), found, False

    def _file(self, log: RunLog, resumed: tuple[LogPart, dict[str, Any]] | None = None) -> None:
        keeper = self.keeper
        at = keeper.checkpoint_at(log.index, log.path) if keeper is not None else None
        file, found, taken_up = self._start(log, resumed, at)
        part, log_file = file.part, file.log_file
        start = log_file.bytes
        if self.share is not None:  # a worker passes over what only another process's compiles use
            log_file.skip = self.share.skipper(file.open_compiles)
        if keeper is not None and log_file.crc is None:  # the log's bytes read are keyed by their CRC-32
            log_file.crc = 0
        if keeper is not None and at is not None and at > log_file.bytes:
            log_file.pause = (at, lambda: self._keep(file, found.split))
        if not taken_up:
            self.in_order(lambda: self.perfetto.process(log.index, f"{log.label} \u00b7 {log.name}"))
        for n, record in enumerate(log_file):
            self._guarded(log, record.line, f"{record.type} record", HANDLERS[record.type].run, self, file, record)
            if self.progress is not None and not n & 255:
                self.progress(self.bytes_done + log_file.bytes - start)
        self._guarded(log, None, "compile end", file.release)
        if keeper is not None and log_file.bytes > start and not log_file.truncated:
            self._keep(file, found.records, "end")  # the log's end, every compile there ended and finished
        activity = file.activity.now(log.label)
        for compile_ in list(file.open_compiles.values()):  # the log ended mid-compile
            self._guarded(log, None, "incomplete compile", compile_.finish, None)
        self.bytes_done += log_file.bytes - start
        part.size, part.crc = log_file.bytes, log_file.crc
        if self.progress is not None:
            self.progress(self.bytes_done)
        self.in_order(lambda: self._file_problems(log, log_file))
        if file.read_ahead_seen > found.records:  # a form the scan does not find (the writer never writes it)
            missed = file.read_ahead_seen - found.records
            self.malformed(log, None, f"{missed} {'/'.join(sorted(READ_AHEAD))} record(s) not written as one JSON "
                                      f"object per line with \"type\" first were skipped")
        for cid in file.profiles:  # not handed to a compile
            self.malformed(log, None, f"profile records of compile {_short.repr(cid)}, which this log does not start")
        if log_file.header is not None and log.header is None:
            log.header = log_file.header
        part.summary = LogSummary(log.index, log.name, log.label, log.rank, header_view(log.header),
                                  log_file.lines, log_file.bytes, log_file.truncated,
                                  log_file.newer_minor, file.libraries, activity)

    def _keep(self, file: FilePass, read_ahead_before: int | None, kind: str = "start") -> None:
        """The log's state before this compile start (or at its end: `kind`), kept: the compile that
        ended last is finished first (as this start would: nothing after it can reach it), and the
        workers' compiles delivered, so that nothing is in flight. Not where a profile read ahead has
        records before it of a compile not begun yet (a compile id used twice): taken up, it would be
        lost."""
        file.release()
        if self.share is not None:
            self.share.drain()
        if file.open_compiles or file.ended or read_ahead_before is None or any(
                profile.first_at < file.log_file.bytes for profile in file.profiles.values()):
            return
        log_file = file.log_file
        state = {"part": file.part, "file": {**file.kept(), "read_ahead_before": read_ahead_before}}
        assert self.keeper is not None and log_file.crc is not None
        self.keeper.keep(file.log.index, state, log_file.bytes, log_file.crc, kind)

    def _file_problems(self, log: RunLog, log_file: LogFile) -> None:
        """What the reader found wrong in a file: bad lines, malformed records, unknown types."""
        problems = self.parts[log.index].problems
        for category, kept, count in (("bad line", log_file.bad, log_file.bad_count),
                                      ("malformed record", log_file.malformed, log_file.malformed_count)):
            for bad in kept:
                problems.add(category, log.name, bad.line, bad.reason, bad.text)
            if count > len(kept):
                problems.add(category, log.name, None, f"{count - len(kept)} more {category}s not listed",
                             count=count - len(kept))
        for kind, count in log_file.unknown.items():
            problems.add("unknown record type", log.name, None,
                         f"{plural(count, 'record')} of unknown type {kind!r}", count=count)

    def in_order(self, action: Callable[[], None]) -> None:
        """Run `action` now or, while worker processes build compiles read before it, once they
        are delivered: problems and Perfetto events come in the order the logs have them, so
        the report does not depend on -j (a worker drops it: the main process lists them)."""
        if self.share is not None:
            self.share.after(action)
        else:
            action()

    # -- what handlers ask of the run ---------------------------------------------------------
    def add_calls(self, log: int, calls: int | None, hits: int | None, compiles: list[int],
                  compile_hits: dict[int, int] | None = None) -> None:
        self.parts[log].calls.append(_Calls(log, calls, hits, compiles, compile_hits))

    def page_of(self, log: RunLog, compile_id: int) -> str | None:
        """The page of a compile of this log that began before (for links)."""
        return self.parts[log.index].compile_pages.get(compile_id)

    def final_prologue(self, log: RunLog, compile_id: int) -> bytes | None:
        """The final prologue of a compile of this log that ended ok (zlib'd), if still kept."""
        return self.parts[log.index].prologues.get(compile_id)

    def compile_closed(self, log: RunLog, compile_id: Any, ok: bool) -> None:
        """Keep an ok compile's final prologue, for the recompiles that diff against it."""
        part = self.parts[log.index]
        prologue = part.prologue_open.pop(compile_id, None)
        if ok and prologue is not None:
            # level 1: fast, and every compile pays it
            part.prologues[compile_id] = zlib.compress(prologue.encode(), 1)
            while len(part.prologues) > MAX_PROLOGUES:
                part.prologues.popitem(last=False)

    def begin(self, file: FilePass, start: dict) -> Compile:
        log, part = file.log, file.part
        cid = start.get("compile")
        numbered = as_int(cid) is not None and cid >= 0
        base = f"{log.prefix}-c{cid}" if numbered else f"{log.prefix}-x{part.unnumbered}"
        part.unnumbered += not numbered
        # A compile id seen again in one file: -2, -3, ... (a base never ends in "-<digits>", so
        # these never meet another compile's name).
        part.page_counts[base] += 1
        n = part.page_counts[base]
        key = base if n == 1 else f"{base}-{n}"
        part.keys.append(key)
        part.begun.add(hashable(cid))
        pages = CompilePages(f"compiles/{key}.html", f"compiles/{key}-source.html")
        if numbered:
            part.compile_pages[cid] = f"{key}.html"  # linked from the compiles/ directory
        part.fx.piece_compile(log, key, start)
        args = {"key": key, "log": log.index, "rank": log.rank, "rank_label": log.page_label, "pages": pages,
                "compare": len(self.logs) > 1, "profile": file.profiles.pop(hashable(cid), None),
                "otlp": isinstance((log.header or {}).get("otlp"), dict), "untimed": part.fx.untimed(log, start)}

        def deliver(result: CompileResult) -> None:
            self._finished(log, result)

        def make(malformed: list[str]) -> CompileBuilder:  # what it finds malformed is delivered with it
            return CompileBuilder(**args, start=start, provs=file.provs, sources=self.source_cache,
                                  sink=self.writer.begin_compile(pages, file.provs), malformed=malformed.append)

        if self.share is not None:
            return self.share.begin(make, deliver)
        malformed: list[str] = []
        return LocalCompile(make(malformed), deliver, malformed)

    def _finished(self, log: RunLog, result: CompileResult) -> None:
        part = self.parts[log.index]
        for reason in result.malformed:
            part.problems.add("malformed record", log.name, None, reason)
        part.assets.update(result.assets)
        summary = result.summary
        if summary is None:
            return
        part.summaries.append(summary)
        part.fx.compiled(summary)
        part.call_sites.add(summary.call_stack or summary.jit_stack, summary)
        for role in result.roles:
            part.roles[(role.role, role.color)] += role.count
        if result.error is not None and len(part.failures) < MAX_FAILURES_DETAILED:
            part.failures.append(Failure(summary, result.error, summary.call_stack))
        for what, write in (("its Perfetto events", lambda: self.perfetto.compile(log.index, summary)),
                            ("its directory entry", lambda: self.directory.add(log.index, summary.directory_entry()))):
            try:  # one output that cannot use the compile never costs it the others
                write()
            except UNUSABLE as exc:
                if _DEBUG:
                    raise
                part.problems.add("malformed record", log.name, None,
                                  f"compile {summary.key}: {what}: {type(exc).__name__}: {exc}")
        # What stays is what the index and the rank comparison need: a few hundred bytes.
        summary.passes, summary.call_stack, summary.jit_stack = [], [], []
        summary.phases, summary.executor_compiles = [], []
        if self.progress is not None:
            self.progress(self.bytes_done)

    def _guarded(self, log: RunLog, line: int | None, what: str, fn: Callable[..., Any], *args: Any) -> None:
        """fn(*args); a record the report cannot use is a malformed record of the log, not the
        end of the report (THUNDER_TRACE_REPORT_DEBUG: raised instead)."""
        try:
            fn(*args)
        except UNUSABLE as exc:
            if _DEBUG:
                raise
            self.malformed(log, line, f"{what}: {type(exc).__name__}: {exc}")

    def malformed(self, log: RunLog, line: int | None, reason: str) -> None:
        self.in_order(lambda: self.parts[log.index].problems.add("malformed record", log.name, line, reason))

    def directory_calls(self) -> dict[str, tuple[int, int, int | None]]:
        """Each compile's function's calls and cache hits, and its own cache hits (the calls
        records at the end of each log)."""
        return {s.key: (s.calls, s.cache_hits, s.compile_hits) for s in self.summaries}

    # -- the model ------------------------------------------------------------------------------------
    def model(self, files: dict[str, str]) -> RunModel:
        """The run's model, once every log is read; `files`: the report's files by name."""
        parts = self._parts()
        summaries = self.summaries
        calls = [c for part in parts for c in part.calls]
        self._attach_calls(summaries, calls)
        call_sites, failures, roles = CallSites(), [], Counter()
        for part in parts:
            call_sites.absorb(part.call_sites)
            failures.extend(part.failures[:max(0, MAX_FAILURES_DETAILED - len(failures))])
            roles.update(part.roles)
        fx_graphs = self._run_fx if self._run_fx is not None else FxGraphs.merged([part.fx for part in parts])
        fx = fx_graphs.finish(self.source_cache)
        logs = [part.summary for part in parts if part.summary is not None]
        ranks_now([log.activity for log in logs if log.activity is not None])
        timed = [(s.log, s.time) for s in summaries if s.time]
        time = None
        if timed:  # a profiled run: the time analysis is loaded for one only
            from provenance.report.analyze.cost import run_time

            time = run_time([log.label for log in self.logs], timed)
            if time is not None:
                time.untimed = fx_graphs.untimed_notes()
        return RunModel(
            logs=logs, log_groups=group_logs(logs),
            ranks_label=ranks_label(self.logs) if len(self.logs) > GROUP_OVER else "",
            ranks=sorted({log.page_label for log in self.logs} - {""}), totals=self._totals(summaries, calls, fx),
            compiles=summaries,
            call_sites=call_sites.model(), failures=failures,
            roles=[RoleCount(r, c, n) for (r, c), n in roles.most_common()],
            distributed=compare_ranks(self.logs, summaries), problems=self.problems, files=files,
            time=time,
            memory=run_memory([log.label for log in self.logs],
                              [(s.log, f"{s.fn} (compile {s.compile})", s.pages.compile, s.memory)
                               for s in summaries if s.memory]),
            fx=fx)

    @staticmethod
    def _attach_calls(summaries: list[CompileSummary], calls: list[_Calls]) -> None:
        by_id = {(s.log, s.compile): s for s in summaries if as_int(s.compile) is not None}
        for call in calls:
            mine = [s for s in map(by_id.get, ((call.log, cid) for cid in call.compiles)) if s is not None]
            for summary in mine:
                summary.calls, summary.cache_hits, summary.fn_compiles = call.calls or 0, call.hits or 0, len(mine)
                if call.compile_hits is not None:
                    summary.compile_hits = call.compile_hits.get(summary.compile, 0)
                elif len(call.compiles) == 1:  # a log before 1.6: the function's only compile had every hit
                    summary.compile_hits = summary.cache_hits
            if mine:  # the function's hits: shown once, on its first compile (with its own, if known)
                min(mine, key=lambda s: (s.index, s.start_ns or 0)).fn_first = True

    def _totals(self, summaries: list[CompileSummary], calls: list[_Calls], fx: FxRun | None = None) -> Totals:
        """The run's figures. Under ThunderFX a graph's compile is more than its Thunder pieces'
        compiles: Dynamo, the split and the fallbacks' compiles count too (and Dynamo's recompiles), and so
        do the frame compiles that made no graph (failed, skipped); a failed frame compile is a failure."""
        status = Counter(s.status for s in summaries)
        keys = ("ops", "with_provenance", "compute", "compute_with_user_source", "fusions")
        # a run without compiles has zero of each; sums saturate (provenance/report/numbers.py)
        final = {k: total((s.final or {}).get(k) for s in summaries) for k in keys}
        counted = [s.final for s in summaries if s.final]
        if counted and all(type(f.get("compute_at_module_file")) is int for f in counted):  # every log says (1.9)
            final["compute_at_module_file"] = total(f["compute_at_module_file"] for f in counted)
        return Totals(compiles=len(summaries), ok=status["ok"], failed=status["failed"],
                      incomplete=status["incomplete"], disabled=status["disabled"],
                      recompiles=sum(1 for s in summaries if s.recompiled) + (fx.recompiles if fx else 0),
                      seconds=sum(s.seconds or 0.0 for s in summaries)
                      + (sum(g.seconds_outside_thunder for g in fx.graphs) + fx.seconds_without_graph if fx else 0.0),
                      failed_frames=len(fx.failed_frames) if fx else 0,
                      cache_hits=total(c.hits for c in calls), calls=total(c.calls for c in calls),
                      **asdict(coverage(final)), bytes=self.bytes_read, logs=len(self.logs))


class _FxOfLog:
    """What the handlers ask of ThunderFX's records (ports.FxSink), sent to the log's part."""

    def __init__(self, parts: dict[int, LogPart]) -> None:
        self._parts = parts

    def graph(self, log: RunLog, data: dict) -> None:
        self._parts[log.index].fx.graph(log, data)

    def graph_phases(self, log: RunLog, data: dict) -> None:
        self._parts[log.index].fx.graph_phases(log, data)

    def graph_break(self, log: RunLog, data: dict) -> None:
        self._parts[log.index].fx.graph_break(log, data)

    def frame_compile(self, log: RunLog, data: dict) -> None:
        self._parts[log.index].fx.frame_compile(log, data)

    def torch_trace(self, log: RunLog, data: dict) -> None:
        self._parts[log.index].fx.torch_trace(log, data)

    def executor_compile(self, log: RunLog, compile_id: Any, found: ExecutorCompileView) -> None:
        self._parts[log.index].fx.executor_compile(log, compile_id, found)
