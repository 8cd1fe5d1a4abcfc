"""Compiles rendered by worker processes, for large logs on machines with CPUs to spare.

The main process still reads every log once, in order; it hands each compile's records, once
complete, with the provenance records they reference, to a pool of spawned workers, which build
and write that compile's pages exactly as the main process does in-process (the same
CompileBuilder and CompileWriter) and send back its small summary. At most two compiles per
worker are in flight, so memory stays bounded; when the workers have that many still to build,
the main process builds the next one itself. Results are taken in submission order, so the
report does not depend on which process was faster. jobs.py's `auto_jobs` is the default worker count.

A worker that dies (the OOM killer's SIGKILL), hangs (no compile delivered for HUNG_S seconds
while the main process waits) or fails costs its compiles a rebuild in the main process, from the
records kept for that: the workers are stopped first (none writes into OUT afterwards), every
compile not yet delivered is built here, in order, over the pages a worker may have begun, and
the rest of the run is built here. One warning line says so; the report is the one -j 1 writes.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from provenance.report.analyze.compile import CompileBuilder
from provenance.report.analyze.handlers import HANDLERS, Route
from provenance.report.analyze.pending import INCOMPLETE, RECOVERABLE, CompileResult, Job, result_of
from provenance.report.analyze.prov_table import ProvTable
from provenance.report.jobs import quiet_gc
from provenance.report.read.log_file import LogFile
from provenance.report.render.output import ReportWriter
from provenance.report.render.source_files import ASSET_DIR, SourceCache

__all__ = ["Pool", "build"]

HUNG_S = 600.0  # seconds without any worker delivering a compile, while the main process waits: hung


# -- the worker side -----------------------------------------------------------------------------
Resources = tuple[ReportWriter, SourceCache]
_worker: Resources | None = None


def _resources(out: str, nav: list[tuple[str, str]]) -> Resources:
    return ReportWriter(Path(out), nav), SourceCache(Path(out))


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


def _warn(message: str) -> None:
    print(f"thunder-trace: warning: {message}", file=sys.stderr)


class Pool:
    """Worker processes (spawned: the parent may run threads), two compiles in flight each.

    When every worker is busy (its two compiles in flight, neither done), the main process
    builds the next compile itself rather than wait idle. The workers still cost CPU (their start,
    the records pickled to them): on busy CPUs a pool is slower than one process, which is why
    auto_jobs looks at the load. A worker that dies, hangs or fails: the compiles in flight are
    rebuilt here (module docstring)."""

    def __init__(self, jobs: int, out: Path, nav: list[tuple[str, str]],
                 warn: Callable[[str], None] = _warn) -> None:
        """`nav`: the run's pages (file, title), for the top bar of the pages workers write."""
        self._executor = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_start, initargs=(str(out), nav))
        self._out, self._nav = str(out), nav
        self._local: Resources | None = None  # for the compiles this process builds, made once needed
        # Compiles in flight (or built here, done), in submission order, each with its job (to
        # rebuild it here if its worker is lost), and actions to run after them (None, None, action).
        self._inflight: deque[tuple[Future | _Done | None, Job | None, Callable]] = deque()
        self._futures = 0  # those the workers have
        self._limit = 2 * jobs
        self._processes: dict[int, multiprocessing.process.BaseProcess] = {}  # the workers started
        self._warn = warn
        self.lost: str | None = None  # why the workers were given up (then everything is built here)
        self.rebuilt = 0  # compiles a lost worker had, built here

    def _busy(self) -> bool:
        """Whether the workers have all the compiles they may (two each) still to build. Only
        those hold their records; done ones wait for their turn, holding small results."""
        if self._futures < self._limit:
            return False
        return sum(1 for f, _, _ in self._inflight if isinstance(f, Future) and not f.done()) >= self._limit

    def _here(self, job: Job) -> _Done:
        if self._local is None:
            self._local = _resources(self._out, self._nav)
        return _Done(build(job, self._local))

    def submit(self, job: Job, deliver: Callable[[CompileResult], None]) -> None:
        if self.lost is not None or self._busy():
            self._inflight.append((self._here(job), job, deliver))
        else:
            try:
                future = self._executor.submit(build, job)
            except BrokenProcessPool as exc:  # a worker died since
                self._give_up(_why(exc))
                future = self._here(job)
            else:
                self._futures += 1
                self._processes.update(getattr(self._executor, "_processes", None) or {})
            self._inflight.append((future, job, deliver))
        while self._inflight and (self._inflight[0][0] is None or self._inflight[0][0].done()):
            self._take()  # delivered as soon as done, in order

    def after(self, action: Callable[[], None]) -> None:
        """Run `action` once every compile submitted so far is delivered (now, if none is in flight)."""
        if self._inflight:
            self._inflight.append((None, None, action))
        else:
            action()

    def _take(self) -> None:
        future, job, then = self._inflight.popleft()
        if future is None:
            then()
            return
        if isinstance(future, Future):
            self._futures -= 1
            result = None
            if self.lost is None or future.done():  # once the workers are stopped, never waited for
                try:
                    result = future.result()
                except BaseException as exc:  # noqa: BLE001 - BrokenProcessPool, a worker's error, cancelled
                    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                        raise
                    self._give_up(_why(exc))
            if result is None:  # built here, over whatever its worker had begun
                result = self._here(job).result()
                self.rebuilt += 1
        else:
            result = future.result()
        then(result)

    def _wait_front(self) -> None:
        """Wait for the oldest compile in flight; with no worker delivering any for HUNG_S
        seconds, the workers are hung: given up."""
        front = self._inflight[0][0]
        while isinstance(front, Future) and not front.done() and self.lost is None:
            pending = [f for f, _, _ in self._inflight if isinstance(f, Future) and not f.done()]
            done, _ = wait(pending, timeout=HUNG_S, return_when=FIRST_COMPLETED)
            if not done:
                self._give_up(f"hung: no compile delivered in {HUNG_S:.0f} s")

    def _give_up(self, why: str) -> None:
        """Stop every worker (so none writes into OUT any more); the compiles in flight are
        rebuilt here as they are taken, and the rest of the run is built here."""
        if self.lost is not None:
            return
        self.lost = why
        self._stop_workers()

    def _workers(self) -> list[multiprocessing.process.BaseProcess]:
        return list({**self._processes, **(getattr(self._executor, "_processes", None) or {})}.values())

    @staticmethod
    def _join(processes: list[multiprocessing.process.BaseProcess], seconds: float) -> list:
        """Wait up to `seconds` for them to exit; those still running."""
        deadline = time.monotonic() + seconds
        for process in processes:
            try:
                process.join(max(0.0, deadline - time.monotonic()))
            except (OSError, ValueError, AssertionError, AttributeError):
                pass
        return [p for p in processes if p.exitcode is None]

    def _stop_workers(self) -> None:
        processes = self._workers()
        for process in processes:
            try:
                process.kill()
            except (OSError, ValueError, AttributeError):
                pass
        self._join(processes, 10)
        self._executor.shutdown(wait=False, cancel_futures=True)
        # a worker stopped while writing a user file's data leaves its temporary file: removed
        for left in Path(self._out, ASSET_DIR).glob("*.tmp"):
            try:
                left.unlink()
            except OSError:
                pass

    def drain(self) -> None:
        while self._inflight:
            self._wait_front()
            self._take()

    def close(self) -> None:
        if self.lost is None:
            # never waits for ever: a worker that does not exit (hung while holding nothing) is killed
            self._executor.shutdown(wait=False, cancel_futures=True)
            for process in self._join(self._workers(), 30):
                try:
                    process.kill()
                except (OSError, ValueError, AttributeError):
                    pass
            return
        self._warn(f"the report's worker processes were stopped ({self.lost}); {self.rebuilt} compile"
                   f"{'' if self.rebuilt == 1 else 's'} they had in flight, and the rest, were built in the main "
                   f"process: the report is complete")


def _why(exc: BaseException) -> str:
    """What became of a worker, for the warning."""
    if isinstance(exc, BrokenProcessPool):
        return "one died, as if killed: BrokenProcessPool"
    return f"{type(exc).__name__}: {str(exc)[:200]}" if str(exc) else type(exc).__name__


class _Done:
    """A compile the main process built: done, its result at hand."""

    def __init__(self, result: CompileResult) -> None:
        self._result = result

    def done(self) -> bool:
        return True

    def result(self) -> CompileResult:
        return self._result
