"""Compiles rendered by worker processes, for large logs on machines with CPUs to spare.

The main process still reads every log once, in order; it hands each compile's records, once
complete, with the provenance records they reference, to a pool of spawned workers, which build
and write that compile's pages exactly as the main process does in-process (the same
CompileBuilder and CompileWriter) and send back its small summary. At most two compiles per
worker are in flight, so memory stays bounded; when the workers have that many still to build,
the main process builds the next one itself. Results are taken in submission order, so the
report does not depend on which process was faster. `auto_jobs` is the default worker count.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

from provenance.report.analyze.compile import CompileBuilder
from provenance.report.analyze.handlers import HANDLERS, Route
from provenance.report.analyze.pending import INCOMPLETE, RECOVERABLE, CompileResult, Job, result_of
from provenance.report.analyze.prov_table import ProvTable
from provenance.report.read.log_file import LogFile
from provenance.report.render.output import ReportWriter
from provenance.report.render.source_files import SourceCache

__all__ = ["Pool", "auto_jobs", "build", "quiet_gc"]

PARALLEL_MIN_BYTES = 32 << 20  # below, starting workers costs more than they save
BYTES_PER_WORKER = 16 << 20  # a worker starts in ~0.5 s (imports, templates): it needs this much to pay off
MAX_AUTO_JOBS = 3  # each worker is a Python process of ~40 MB; the main process's reading caps the gain


def auto_jobs(size: int, cpus: int | None = None, load: float | None = None) -> int:
    """The default worker count for `size` bytes of logs: one per CPU this process may run on
    (its affinity, not the machine's count) that the rest of the machine leaves idle (the
    1-minute load average), at most MAX_AUTO_JOBS and one per BYTES_PER_WORKER; 1 (everything in
    this process) when that is under 2: workers on busy CPUs only add the cost of shipping each
    compile to them. `cpus` and `load`: given in tests, else the machine's."""
    if size < PARALLEL_MIN_BYTES:
        return 1
    if cpus is None:
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # not on Linux
            cpus = os.cpu_count() or 1
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):
            load = 0.0
    idle = int(cpus - max(load, 0.0) + 0.5)  # CPUs the other runnable processes leave, rounded
    jobs = min(idle, MAX_AUTO_JOBS, size // BYTES_PER_WORKER)
    return jobs if jobs >= 2 else 1

# -- the worker side -----------------------------------------------------------------------------
Resources = tuple[ReportWriter, SourceCache]
_worker: Resources | None = None


def _resources(out: str, nav: list[tuple[str, str]]) -> Resources:
    return ReportWriter(Path(out), nav), SourceCache(Path(out))


def quiet_gc() -> tuple[int, int, int]:
    """Fewer cyclic garbage collections while a report is built (returns the thresholds to put
    back): building pages allocates millions of short-lived tuples that reference counting
    frees, and the default thresholds scan the young objects every 700 allocations (~5 % of a
    report's time)."""
    before = gc.get_threshold()
    gc.set_threshold(50_000, 20, 20)
    gc.freeze()  # what the imports made (~10^5 objects, kept to the end) is not traversed by them
    return before


def _start(out: str, nav: list[tuple[str, str]]) -> None:
    global _worker
    quiet_gc()
    _worker = _resources(out, nav)


def build(job: Job, resources: Resources | None = None) -> CompileResult:
    """Build and write one compile's pages (in a worker; or with `resources`, in the main
    process: the same code on the same records, so the same pages)."""
    writer, sources = resources or _worker
    provs = ProvTable(LogFile.of_records(job.path, job.provs, job.spans, job.paths))
    malformed: list[str] = []
    start, *rest = job.records
    builder = CompileBuilder(**job.builder, start=start, provs=provs, sources=sources,
                             sink=writer.begin_compile(job.builder["pages"], provs), malformed=malformed.append)
    summary = None
    for record in rest:
        kind = record.get("type")
        try:
            if kind == INCOMPLETE:
                summary = builder.finish()
                continue
            handler = HANDLERS[kind]
            handler.compile(builder, record)
            if handler.route is Route.CLOSES:
                summary = builder.finish()
        except RECOVERABLE as exc:
            malformed.append(f"{kind} record: {type(exc).__name__}: {exc}")
    return result_of(builder, summary, malformed)


class Pool:
    """Worker processes (spawned: the parent may run threads), two compiles in flight each.

    When every worker is busy (its two compiles in flight, neither done), the main process
    builds the next compile itself rather than wait idle. The workers still cost CPU (their start,
    the records pickled to them): on busy CPUs a pool is slower than one process, which is why
    auto_jobs looks at the load."""

    def __init__(self, jobs: int, out: Path, nav: list[tuple[str, str]]) -> None:
        """`nav`: the run's pages (file, title), for the top bar of the pages workers write."""
        self._executor = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_start, initargs=(str(out), nav))
        self._out, self._nav = str(out), nav
        self._local: Resources | None = None  # for the compiles this process builds, made once needed
        # Compiles in flight (or built here, done), in submission order, and actions to run after
        # them (None, action).
        self._inflight: deque[tuple[Future | None, Callable]] = deque()
        self._futures = 0  # those the workers have
        self._limit = 2 * jobs

    def _busy(self) -> bool:
        """Whether the workers have all the compiles they may (two each) still to build. Only
        those hold their records; done ones wait for their turn, holding small results."""
        if self._futures < self._limit:
            return False
        return sum(1 for f, _ in self._inflight if f is not None and not f.done()) >= self._limit

    def submit(self, job: Job, deliver: Callable[[CompileResult], None]) -> None:
        if self._busy():
            if self._local is None:
                self._local = _resources(self._out, self._nav)
            self._inflight.append((_Done(build(job, self._local)), deliver))
        else:
            self._inflight.append((self._executor.submit(build, job), deliver))
            self._futures += 1
        while self._inflight and (self._inflight[0][0] is None or self._inflight[0][0].done()):
            self._take()  # delivered as soon as done, in order

    def after(self, action: Callable[[], None]) -> None:
        """Run `action` once every compile submitted so far is delivered (now, if none is in flight)."""
        if self._inflight:
            self._inflight.append((None, action))
        else:
            action()

    def _take(self) -> None:
        future, then = self._inflight.popleft()
        if future is None:
            then()
            return
        if not isinstance(future, _Done):
            self._futures -= 1
        then(future.result())

    def drain(self) -> None:
        while self._inflight:
            self._take()

    def close(self) -> None:
        self._executor.shutdown(cancel_futures=True)


class _Done:
    """A compile the main process built: done, its result at hand."""

    def __init__(self, result: CompileResult) -> None:
        self._result = result

    def done(self) -> bool:
        return True

    def result(self) -> CompileResult:
        return self._result
