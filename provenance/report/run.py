"""The run: one streaming pass over THUNDER_TRACE logs, records dispatched to their compiles,
-> the report's render model.

Files are read one after the other, records one at a time. A compile's pages are written as soon
as its compile_end / compile_error arrives (compiles.py); the run keeps only a small summary per
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
from dataclasses import asdict
from typing import Any, NamedTuple

from provenance.report.call_sites import CallSites
from provenance.report.coerce import as_int, hashable
from provenance.report.compiles import CompileBuilder
from provenance.report.directory import DirectoryWriter
from provenance.report.fxgraphs import FxGraphs
from provenance.report.logs import RunLog, header_view
from provenance.report.model import (
    CompilePages,
    CompileSummary,
    Failure,
    LogSummary,
    Problems,
    RoleCount,
    RunModel,
    Totals,
    coverage,
)
from provenance.report.output import ReportWriter
from provenance.report.perfetto import PERFETTO_FILE, PerfettoWriter
from provenance.report.plural import plural
from provenance.report.profiles import PROFILE_TYPES, LoggedProfile, scan
from provenance.report.provinfo import ProvTable
from provenance.report.ranks import compare_ranks
from provenance.report.reader import LogFile, LogRecord
from provenance.report.source_files import SourceCache
from provenance.report.timing import run_time
from provenance.report.why import executor_compile
from provenance.report.workers import RECOVERABLE, CompileResult, LocalCompile, Pool, RemoteCompile

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


class RunBuilder:
    """Consumes the records of every log file; each compile's pages are written when it ends,
    here or (with a pool) by a worker process."""

    def __init__(self, writer: ReportWriter, logs: list[RunLog],
                 progress: Callable[[int], None] | None = None, pool: Pool | None = None) -> None:
        self.writer = writer
        self.logs = logs
        self.progress = progress
        self.pool = pool
        self.problems = Problems()
        self.summaries: list[CompileSummary] = []
        self.failures: list[Failure] = []
        self.call_sites = CallSites()
        self.roles: Counter = Counter()
        self.calls: list[_Calls] = []
        self.source_cache = SourceCache()
        self._page_counts: Counter = Counter()  # compiles by page-name base
        self._unnumbered = 0  # compiles whose id is not a non-negative integer
        self._compile_pages: dict[tuple[int, Any], str] = {}  # (log, compile id) -> its page, for links
        self._prologue_open: dict[tuple[int, Any], str] = {}  # the latest prologue of each open compile
        self._prologues: OrderedDict[tuple[int, Any], bytes] = OrderedDict()  # final prologues, zlib'd
        self.bytes_read = 0
        self.log_summaries: dict[int, LogSummary] = {}  # by log index, once read
        times = [log.header.get("time_ns") for log in logs if log.header and isinstance(log.header.get("time_ns"), int)]
        self.perfetto = PerfettoWriter(str(writer.out / PERFETTO_FILE), min(times) if times else None)
        self.directory = DirectoryWriter(writer.out)  # compile_directory.json's entries, as compiles end
        self._profiles: dict[Any, LoggedProfile] = {}  # the file's profiles by compile id (read ahead)
        self._profile_records = 0  # profile records the pass met in the file
        self.fx = FxGraphs()  # ThunderFX's graphs, pieces and breaks

    # -- the pass ---------------------------------------------------------------------------------
    def run(self) -> None:
        for log in self.logs:
            self._file(log)
        if self.pool is not None:
            self.pool.drain()
        self.perfetto.close()

    def _file(self, log: RunLog) -> None:
        log_file = LogFile(log.path)
        provs = ProvTable(log_file)
        found = scan(log.path)  # profile records come after their compile's end: read them first
        self._profiles, self._profile_records = found.profiles, 0
        for line, reason in found.problems:
            self._malformed(log, line, reason)
        if found.more_problems:
            more = found.more_problems
            self._in_order(lambda: self.problems.add("malformed record", log.name, None,
                                                     f"{more} more malformed profile records not listed", count=more))
        self._in_order(lambda: self.perfetto.process(log.index, f"{log.label} \u00b7 {log.name}"))
        open_compiles: dict[Any, LocalCompile | RemoteCompile] = {}
        # A compile that ended waits for the next compile to start (or the end of the log): the
        # executor compiles its first call causes come after its end.
        ended: list[tuple[Any, LocalCompile | RemoteCompile, dict]] = []
        done_before = self.bytes_read
        for n, record in enumerate(log_file):
            self._guarded(log, record.line, f"{record.type} record", self._record,
                          log, log_file, provs, record, open_compiles, ended)
            if self.progress is not None and not n & 255:
                self.progress(done_before + log_file.bytes)
        self._guarded(log, None, "compile end", self._release, ended)
        for compile_ in list(open_compiles.values()):  # the log ended mid-compile
            self._guarded(log, None, "incomplete compile", compile_.finish, None)
        self.bytes_read = done_before + log_file.bytes
        if self.progress is not None:
            self.progress(self.bytes_read)
        self._in_order(lambda: self._file_problems(log, log_file))
        if self._profile_records > found.records:  # a form the scan does not find (the writer never writes it)
            missed = self._profile_records - found.records
            self._malformed(log, None, f"{missed} profile record(s) not written as one JSON object per line with "
                                       f"\"type\" first were skipped")
        for cid in self._profiles:  # not handed to a compile
            self._malformed(log, None, f"profile records of compile {_short.repr(cid)}, which this log does not start")
        self._profiles = {}
        if log_file.header is not None and log.header is None:
            log.header = log_file.header
        self.log_summaries[log.index] = LogSummary(log.index, log.name, log.label, log.rank, header_view(log.header),
                                                   log_file.lines, log_file.bytes, log_file.truncated,
                                                   log_file.newer_minor)

    def _file_problems(self, log: RunLog, log_file: LogFile) -> None:
        """What the reader found wrong in a file: bad lines, malformed records, unknown types."""
        for category, kept, count in (("bad line", log_file.bad, log_file.bad_count),
                                      ("malformed record", log_file.malformed, log_file.malformed_count)):
            for bad in kept:
                self.problems.add(category, log.name, bad.line, bad.reason, bad.text)
            if count > len(kept):
                self.problems.add(category, log.name, None, f"{count - len(kept)} more {category}s not listed",
                                  count=count - len(kept))
        for kind, count in log_file.unknown.items():
            self.problems.add("unknown record type", log.name, None,
                              f"{plural(count, 'record')} of unknown type {kind!r}", count=count)

    def _in_order(self, action: Callable[[], None]) -> None:
        """Run `action` now or, while worker processes build compiles read before it, once they
        are delivered: problems and Perfetto events come in the order the logs have them, so
        the report does not depend on -j."""
        if self.pool is not None:
            self.pool.after(action)
        else:
            action()

    def _record(self, log: RunLog, log_file: LogFile, provs: ProvTable, record: LogRecord,
                open_compiles: dict[Any, LocalCompile | RemoteCompile], ended: list) -> None:
        kind, data = record.type, record.data
        if kind in ("prov", "span", "header"):
            return  # the reader keeps records by id; headers were read up front
        if kind == "compile_start":
            self._release(ended)
            cid = hashable(data.get("compile"))
            if cid in open_compiles:
                self._malformed(log, record.line,
                                f"compile {_short.repr(cid)} started twice; the first is closed as incomplete")
                open_compiles.pop(cid).finish(None)
            open_compiles[cid] = self._begin(log, log_file, provs, data)
        elif kind == "trace":
            if data.get("list") == "prologue" and isinstance(data.get("python"), str):
                self._prologue_open[(log.index, hashable(data.get("compile")))] = data["python"]
            self._compile(log, log_file, provs, record, open_compiles).add(data)
        elif kind == "phases":
            self._compile(log, log_file, provs, record, open_compiles).add(data)
        elif kind == "recompile":
            self._compile(log, log_file, provs, record, open_compiles).add(self._recompile(log, data))
        elif kind in ("compile_end", "compile_error", "capture_disabled"):
            compile_ = self._compile(log, log_file, provs, record, open_compiles)
            cid = hashable(data.get("compile"))
            open_compiles.pop(cid, None)
            prologue = self._prologue_open.pop((log.index, cid), None)
            if kind == "compile_end" and prologue is not None:
                self._prologues[(log.index, cid)] = zlib.compress(prologue.encode(), 1)  # fast: every compile pays it
                while len(self._prologues) > MAX_PROLOGUES:
                    self._prologues.popitem(last=False)
            self._release(ended)
            ended.append((cid, compile_, data))
        elif kind == "executor_compile":
            found = executor_compile(data)
            if found is not None:
                cid = data.get("compile")
                self._in_order(lambda: self.perfetto.executor_compile(log.index, cid, found))
            if ended and ended[0][0] == hashable(data.get("compile")):
                ended[0][1].add(data)
        elif kind == "dynamo_graph":
            self.fx.graph(log, data)
        elif kind == "graph_break":
            self.fx.graph_break(log, data)
        elif kind == "calls":
            self.calls.append(_Calls(log.index, as_int(data.get("calls")), as_int(data.get("cache_hits")),
                                     [c for c in data.get("compiles") or [] if isinstance(c, int)]))
        elif kind in PROFILE_TYPES:
            self._profile_records += 1  # read ahead (scan), handed to its compile at its start
        elif kind == "span_end":
            span = log_file._spans.get(data.get("id"))
            end = data.get("end_ns")
            if span and isinstance(span.get("start_ns"), int) and isinstance(end, int):
                name, start, role = str(span.get("name")), span["start_ns"], span.get("role")
                self._in_order(lambda: self.perfetto.scope(log.index, name, start, end, role))

    @staticmethod
    def _release(ended: list) -> None:
        """Finish the compile that ended last (its pages are written)."""
        while ended:
            _, compile_, closing = ended.pop()
            compile_.finish(closing)

    def _recompile(self, log: RunLog, data: dict) -> dict:
        """The recompile record, with the pages of the compiles it names and the final prologue of
        the newest one (the page diffs against it)."""
        rejected = data.get("rejected") if isinstance(data.get("rejected"), list) else []
        ids = [e.get("compile") for e in rejected if isinstance(e, dict) and isinstance(e.get("compile"), int)]
        pages = {cid: page for cid in ids if (page := self._compile_pages.get((log.index, cid))) is not None}
        newest = rejected[0].get("compile") if rejected and isinstance(rejected[0], dict) else None
        packed = self._prologues.get((log.index, newest)) if isinstance(newest, int) else None
        return {**data, "_pages": pages, "_prologue": zlib.decompress(packed).decode() if packed else None}

    def _compile(self, log: RunLog, log_file: LogFile, provs: ProvTable, record: LogRecord,
                 open_compiles: dict) -> LocalCompile | RemoteCompile:
        cid = hashable(record.data.get("compile"))
        found = open_compiles.get(cid)
        if found is None:
            self._malformed(log, record.line, f"{record.type} of compile {_short.repr(cid)} without its compile_start")
            found = open_compiles[cid] = self._begin(log, log_file, provs, {"compile": record.data.get("compile")})
        return found

    def _begin(self, log: RunLog, log_file: LogFile, provs: ProvTable, start: dict) -> LocalCompile | RemoteCompile:
        cid = start.get("compile")
        numbered = as_int(cid) is not None and cid >= 0
        base = f"{log.prefix}-c{cid}" if numbered else f"{log.prefix}-x{self._unnumbered}"
        self._unnumbered += not numbered
        # A compile id seen again in one file: -2, -3, ... (a base never ends in "-<digits>", so
        # these never meet another compile's name).
        self._page_counts[base] += 1
        n = self._page_counts[base]
        key = base if n == 1 else f"{base}-{n}"
        pages = CompilePages(f"compiles/{key}.html", f"compiles/{key}-source.html")
        if numbered:
            self._compile_pages[(log.index, cid)] = f"{key}.html"  # linked from the compiles/ directory
        self.fx.piece_compile(log, key, start)
        args = {"key": key, "log": log.index, "rank": log.rank, "rank_label": log.page_label, "pages": pages,
                "compare": len(self.logs) > 1, "profile": self._profiles.pop(hashable(cid), None)}

        def deliver(result: CompileResult) -> None:
            self._finished(log, result)

        if self.pool is not None:
            compile_ = RemoteCompile(self.pool, args, log_file, deliver)
            compile_.add(start)
            return compile_
        malformed: list[str] = []  # delivered with the compile, as a worker's would be
        builder = CompileBuilder(**args, start=start, provs=provs, sink=self.writer.begin_compile(pages, provs),
                                 sources=self.source_cache, malformed=malformed.append)
        return LocalCompile(builder, deliver, malformed)

    def _finished(self, log: RunLog, result: CompileResult) -> None:
        for reason in result.malformed:
            self.problems.add("malformed record", log.name, None, reason)
        summary = result.summary
        if summary is None:
            return
        self.summaries.append(summary)
        self.fx.compiled(summary)
        self.call_sites.add(summary.call_stack or summary.jit_stack, summary)
        for role in result.roles:
            self.roles[(role.role, role.color)] += role.count
        if result.error is not None and len(self.failures) < MAX_FAILURES_DETAILED:
            self.failures.append(Failure(summary, result.error, summary.call_stack))
        self.perfetto.compile(log.index, summary)
        self.directory.add(summary.directory_entry())
        # What stays is what the index and the rank comparison need: a few hundred bytes.
        summary.passes, summary.call_stack, summary.jit_stack = [], [], []
        summary.phases, summary.executor_compiles = [], []
        if self.progress is not None:
            self.progress(self.bytes_read)

    def _guarded(self, log: RunLog, line: int | None, what: str, fn: Callable[..., Any], *args: Any) -> None:
        """fn(*args); a record the report cannot use is a malformed record of the log, not the
        end of the report (THUNDER_TRACE_REPORT_DEBUG: raised instead)."""
        try:
            fn(*args)
        except RECOVERABLE as exc:
            if _DEBUG:
                raise
            self._malformed(log, line, f"{what}: {type(exc).__name__}: {exc}")

    def _malformed(self, log: RunLog, line: int | None, reason: str) -> None:
        self._in_order(lambda: self.problems.add("malformed record", log.name, line, reason))

    def directory_calls(self) -> dict[str, tuple[int, int]]:
        """Each compile's calls and cache hits (the calls records at the end of each log)."""
        return {s.key: (s.calls, s.cache_hits) for s in self.summaries}

    # -- the model ------------------------------------------------------------------------------------
    def model(self, files: dict[str, str]) -> RunModel:
        """The run's model, once every log is read; `files`: the report's files by name."""
        self._attach_calls()
        return RunModel(
            logs=[self.log_summaries[log.index] for log in self.logs],
            ranks=sorted({log.page_label for log in self.logs} - {""}), totals=self._totals(), compiles=self.summaries,
            call_sites=self.call_sites.model(), failures=self.failures,
            roles=[RoleCount(r, c, n) for (r, c), n in self.roles.most_common()],
            distributed=compare_ranks(self.logs, self.summaries), problems=self.problems, files=files,
            time=run_time([log.label for log in self.logs], [(s.log, s.time) for s in self.summaries if s.time]),
            fx=self.fx.finish(self.source_cache))

    def _attach_calls(self) -> None:
        by_id = {(s.log, s.compile): s for s in self.summaries if as_int(s.compile) is not None}
        for calls in self.calls:
            mine = [s for s in map(by_id.get, ((calls.log, cid) for cid in calls.compiles)) if s is not None]
            for summary in mine:
                summary.calls, summary.cache_hits, summary.fn_compiles = calls.calls or 0, calls.hits or 0, len(mine)
            if mine:  # hits are the function's: listed once, on its first compile
                min(mine, key=lambda s: (s.index, s.start_ns or 0)).fn_first = True

    def _totals(self) -> Totals:
        status = Counter(s.status for s in self.summaries)
        keys = ("ops", "with_provenance", "compute", "compute_with_user_source", "fusions")
        final = dict.fromkeys(keys, 0)  # a run without compiles has zero of each
        for s in self.summaries:
            for k in keys:
                value = (s.final or {}).get(k)
                final[k] += value if isinstance(value, int) else 0
        return Totals(compiles=len(self.summaries), ok=status["ok"], failed=status["failed"],
                      incomplete=status["incomplete"], disabled=status["disabled"],
                      recompiles=sum(1 for s in self.summaries if s.recompiled),
                      seconds=sum(s.seconds or 0.0 for s in self.summaries),
                      cache_hits=sum(c.hits or 0 for c in self.calls), calls=sum(c.calls or 0 for c in self.calls),
                      **asdict(coverage(final)), bytes=self.bytes_read, logs=len(self.logs))
