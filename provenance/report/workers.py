"""Compiles built by worker processes that read the logs themselves (-j N, or the default on a
large input: jobs.py's `auto_jobs`).

The report forks N-1 workers once its modules are imported and before any thread runs. Every
process then reads every log, in order, and runs every record's handler (which keeps what a
compile's pages need of earlier ones: their page names, their final prologues), but builds only
the compiles it claims: each compile is built by the first process to reach it (`Claims`), so a
process that is ahead, less busy, or given more of a loaded machine's CPUs builds more. A worker
writes its compiles' pages and sends their small results (CompileResult) to the main process over
a pipe; nothing is shipped to a worker, which reads the logs a second time instead (passing over,
unparsed, the traces and memory records of compiles another process builds: `skipper`). The main
process builds what it claims, takes the workers' results in the order the compiles ended, and
alone lists problems and writes the run's pages, the Perfetto trace and compile_directory.json:
the report does not depend on -j, nor on which process built which compile.

Memory stays bounded: the main process keeps the records of a compile a worker builds (parsed
anyway: references, no copy) until the worker's result comes, and once it keeps more than
MAX_AHEAD such compiles per worker it waits for the oldest.

A worker that dies (the OOM killer's SIGKILL), hangs (nothing delivered for HUNG_S seconds while
the main process waits for it) or fails costs its compiles a rebuild here: every worker is stopped
first (none writes into OUT afterwards), each compile not delivered is built here, in order, from
the records kept, over the pages a worker may have begun, and so is the rest of the run. One
warning line says so; the report is the one -j 1 writes.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import re
import select
import signal
import struct
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provenance.report.analyze.pending import (
    Compile,
    CompileResult,
    ElsewhereCompile,
    IsolatedCompile,
    MakeBuilder,
    Pending,
    SkippedCompile,
)
from provenance.report.render.source_files import ASSET_DIR

if TYPE_CHECKING:
    from provenance.report.analyze.run import RunBuilder

__all__ = ["HUNG_S", "MAX_AHEAD", "Claims", "MainShare", "WorkerShare", "can_fork", "start_workers"]

HUNG_S = 600.0  # seconds a worker may take to deliver the compile the main process waits for
MAX_AHEAD = 2  # compiles per worker whose records the main process keeps while they are built

Deliver = Callable[[CompileResult], None]


def can_fork() -> bool:
    return hasattr(os, "fork") and hasattr(os, "pread")


class Claims:
    """Which process builds each compile: the first to reach it. A byte per compile (the k-th
    begun at offset k: its builder's number + 1), in an unlinked file of OUT that every process
    shares, each claim read and made under a lock (one process claims at a time)."""

    MAX_PROCESSES = 255  # a process's number + 1 fits the byte

    def __init__(self, out: Path) -> None:
        self._file = tempfile.TemporaryFile(dir=out)
        self.fd = self._file.fileno()

    def claim(self, ordinal: int, process: int) -> int:
        """The number of the process that builds the `ordinal`-th compile: `process`, if no
        process reached it first."""
        fcntl.lockf(self.fd, fcntl.LOCK_EX)
        try:
            found = os.pread(self.fd, 1, ordinal)
            if found and found[0]:
                return found[0] - 1
            os.pwrite(self.fd, bytes((process + 1,)), ordinal)
            return process
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        self._file.close()


_LENGTH = struct.Struct("<Q")
# The start of a line a worker may pass over (WorkerShare.skipper): the compile id in group 1 (a
# trace) or 2 (a memory record)
_HEAVY = re.compile(rb'\{"type":(?:"trace","compile":(\d{1,18}),"list":"(?!prologue")|"memory","compile":(\d{1,18}),)')
_COUNTED = (b'"type"', b'"compile"', b'"list"')


def _send(fd: int, value: Any) -> None:
    """One pickled value, its length first (a pipe takes a large one in several writes)."""
    body = pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
    data = memoryview(_LENGTH.pack(len(body)) + body)
    while data:
        data = data[os.write(fd, data):]


def _readable(fd: int, timeout: float) -> bool:
    """Whether a value (or the pipe's end) waits in the pipe, within `timeout` seconds."""
    poller = select.poll()  # not select(): any descriptor number
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


def _read(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        if not _readable(fd, HUNG_S):  # a worker stopped in the middle of a value hangs no more than before one
            raise TimeoutError(f"hung: no compile delivered in {HUNG_S:g} s")
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError("the worker's pipe closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _receive(fd: int) -> Any:
    (n,) = _LENGTH.unpack(_read(fd, _LENGTH.size))
    return pickle.loads(_read(fd, n))


class Worker:
    """A forked worker: its process and the pipe its results come through."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd
        self.exitcode: int | None = None

    def join(self, seconds: float) -> None:
        """Reap it, waiting up to `seconds` for it to exit."""
        deadline = time.monotonic() + seconds
        while self.exitcode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere
                self.exitcode = -1
                return
            if pid:
                self.exitcode = os.waitstatus_to_exitcode(status)
            elif time.monotonic() >= deadline:
                return
            else:
                time.sleep(0.005)

    def kill(self) -> None:
        if self.exitcode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _warn(message: str) -> None:
    print(f"thunder-trace: warning: {message}", file=sys.stderr)


# -- a worker ------------------------------------------------------------------------------------
class WorkerShare:
    """A worker's part of the run: it builds its compiles and sends each result to the main
    process; it lists no problem and writes none of the run's outputs (the main process does)."""

    def __init__(self, index: int, claims: Claims, fd: int) -> None:
        self.index, self.claims, self.fd = index, claims, fd
        self._begun = 0
        self._parent = os.getppid()

    def begin(self, make: MakeBuilder, deliver: Deliver) -> Compile:
        if os.getppid() != self._parent:  # the main process is gone (killed): so is the report
            os._exit(1)
        mine = self.claims.claim(self._begun, self.index) == self.index
        self._begun += 1
        return IsolatedCompile(make, self.send) if mine else SkippedCompile()

    def send(self, result: CompileResult) -> None:
        _send(self.fd, result)

    @staticmethod
    def skipper(open_compiles: dict[Any, Compile]) -> Callable[[bytes], bool]:
        """Which lines of a log this worker need not parse: the traces (but prologues, which later
        recompiles diff against) and memory records of an open compile another process builds,
        as this package writes them ("type", then "compile", then "list"), each of those keys once
        and no \\u escape (a line that could parse to another type, compile or list is parsed)."""

        def skip(raw: bytes) -> bool:
            found = _HEAVY.match(raw)
            return (found is not None and type(open_compiles.get(int(found[1] or found[2]))) is SkippedCompile
                    and b"\\u" not in raw and all(raw.count(key) <= 1 for key in _COUNTED))

        return skip

    def after(self, action: Callable[[], None]) -> None:
        pass  # problems and Perfetto events: the main process's, from its own reading

    def drain(self) -> None:
        pass


class _Failed:
    """What a worker sends instead of its next result when it fails: why, for the warning."""

    def __init__(self, why: str) -> None:
        self.why = why


def _work(index: int, claims: Claims, fd: int, run: Callable[[WorkerShare], RunBuilder]) -> None:
    try:
        run(WorkerShare(index, claims, fd)).read()
    except Exception as exc:  # said by the main process, which builds the rest (no traceback)
        try:
            _send(fd, _Failed(f"one failed: {type(exc).__name__}: {str(exc)[:200]}"))
        except OSError:
            pass


def start_workers(jobs: int, out: Path, run: Callable[[WorkerShare], RunBuilder]) -> MainShare:
    """Fork `jobs` - 1 workers writing into `out`, each reading the logs with the RunBuilder `run`
    makes for its share (call it before the main process starts a thread: a fork copies none)."""
    jobs = min(jobs, Claims.MAX_PROCESSES)
    claims = Claims(out)
    sys.stdout.flush()  # else a worker would write what is buffered again
    sys.stderr.flush()
    workers: list[Worker] = []
    for index in range(1, jobs):
        receive, send = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker: never returns into the caller
            code = 1
            try:
                os.close(receive)
                for earlier in workers:
                    os.close(earlier.fd)
                _work(index, claims, send, run)
                code = 0
            finally:
                os._exit(code)
        os.close(send)  # the worker's end: EOF here once the worker is gone
        workers.append(Worker(pid, receive))
    return MainShare(claims, workers, out)


# -- the main process -----------------------------------------------------------------------------
class _Done:
    """A compile this process built: its result at hand."""

    def __init__(self, result: CompileResult) -> None:
        self.result = result


class MainShare(Pending):
    """The main process's part: it builds its compiles, waits for the workers' results, and
    delivers every compile, and every action queued behind them, in the order the compiles
    ended (module docstring)."""

    def __init__(self, claims: Claims, workers: list[Worker], out: Path, warn: Callable[[str], None] = _warn) -> None:
        self.claims, self.out = claims, out
        self._workers = workers
        self._begun = 0
        # In the order the compiles ended: (built here | built by a worker | None: an action, then)
        self._inflight: deque[tuple[_Done | ElsewhereCompile | None, Callable]] = deque()
        self._waiting = 0  # compiles in _inflight a worker builds
        self._warn = warn
        self.lost: str | None = None  # why the workers were given up (then everything is built here)
        self.rebuilt = 0  # compiles a lost worker had, built here

    @property
    def workers(self) -> list[Worker]:
        return list(self._workers)

    @property
    def processes(self) -> int:
        """How many read the logs: the workers and this one."""
        return len(self._workers) + 1

    def begin(self, make: MakeBuilder, deliver: Deliver) -> Compile:
        owner = self.claims.claim(self._begun, 0) if self.lost is None else 0
        self._begun += 1
        if owner == 0:  # built as a worker builds (what it cannot use named in its result): whoever builds it
            return IsolatedCompile(make, lambda result: self._queue(_Done(result), deliver))
        return ElsewhereCompile(make, deliver, self, owner - 1)

    @staticmethod
    def skipper(open_compiles: dict[Any, Compile]) -> None:
        """The main process reads every line: it lists the logs' problems."""
        return None

    def wait_for(self, compile_: ElsewhereCompile) -> None:
        self._waiting += 1
        self._queue(compile_, compile_.deliver)
        while self._waiting > MAX_AHEAD * len(self._workers):  # bounded: the oldest first
            self._take()

    def after(self, action: Callable[[], None]) -> None:
        """Run `action` once every compile ended so far is delivered (now, if none waits)."""
        if self._inflight:
            self._inflight.append((None, action))
        else:
            action()

    def drain(self) -> None:
        while self._inflight:
            self._take()

    def _queue(self, item: _Done | ElsewhereCompile, then: Callable) -> None:
        self._inflight.append((item, then))
        while self._inflight and self._ready(self._inflight[0][0]):  # delivered as soon as can be, in order
            self._take()

    def _ready(self, item: _Done | ElsewhereCompile | None) -> bool:
        if not isinstance(item, ElsewhereCompile) or self.lost is not None:
            return True
        try:
            return _readable(self._workers[item.worker].fd, 0)  # its result (or the worker's end) is there
        except (OSError, ValueError):
            return True

    def _take(self) -> None:
        item, then = self._inflight.popleft()
        if item is None:
            then()
        elif isinstance(item, _Done):
            then(item.result)
        else:
            self._waiting -= 1
            result = self._receive(item.worker) if self.lost is None else None
            if result is None:  # built here, over whatever its worker had begun
                result = item.replay()
                self.rebuilt += 1
            then(result)

    def _receive(self, worker: int) -> CompileResult | None:
        try:
            result = _receive(self._workers[worker].fd)  # waits at most HUNG_S for each part of it
            if not isinstance(result, _Failed):
                return result
            self._give_up(result.why)
        except TimeoutError as exc:
            self._give_up(str(exc))
        except (EOFError, OSError) as exc:
            self._give_up(self._ended(worker, exc))
        except Exception as exc:  # a result that does not unpickle: built here instead
            self._give_up(f"{type(exc).__name__}: {str(exc)[:200]}")
        return None

    def _ended(self, worker: int, exc: BaseException) -> str:
        """What became of a worker whose pipe closed, for the warning."""
        process = self._workers[worker]
        process.join(5)
        code = process.exitcode
        if code is not None and code < 0:
            try:
                return f"one died, killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"one died, killed by signal {-code}"
        if code is not None:
            return f"one exited with status {code} before delivering its compiles"
        return f"one stopped answering ({type(exc).__name__})"

    def _give_up(self, why: str) -> None:
        """Stop every worker (so none writes into OUT any more); the compiles they had are built
        here as they are taken, and so is the rest of the run."""
        if self.lost is None:
            self.lost = why
            self._stop()

    def _stop(self) -> None:
        for worker in self._workers:
            worker.kill()
        for worker in self._workers:
            worker.join(10)
            os.close(worker.fd)
        self.claims.close()
        for left in Path(self.out, ASSET_DIR).glob("*.tmp"):  # a worker stopped while writing a user file's data
            try:
                left.unlink()
            except OSError:
                pass

    def close(self) -> None:
        """Once the run is read (or given up): the workers, done with their share, are stopped."""
        if self.lost is None:
            self._stop()
            return
        self._warn(f"the report's worker processes were stopped ({self.lost}); {self.rebuilt} compile"
                   f"{'' if self.rebuilt == 1 else 's'} they had in flight, and the rest, were built in the main "
                   f"process: the report is complete")
