"""Wait counters: seconds spent blocked in collective waits, counting waits still in progress;
and the watchdog that writes the long ones to the log.

A counter that only ticks when a wait returns says nothing about a rank that is stuck; here a
snapshot adds the elapsed time of every wait still blocked, so the value keeps growing while
a wait hangs. Keys are (role, module) of the wait's provenance, e.g. ("row_parallel.post", "net2").
Opt-in (`provenance.enable(wait_counters=True)` or THUNDER_TRACE_WAIT_COUNTERS=1): counting
wraps every collective wait Thunder generates.

With a log being written too, a `WaitWatch` (a daemon thread, started by enable() and stopped by
disable(): provenance/thunder/wait_hooks.py) samples the waits in progress every POLL_S and writes
`wait` records (provenance.log.events, docs/log-schema.md): once "blocked" for a wait that has
blocked WAIT_NOTICE_S, while it still blocks, and once "done" when it returns, with its exact
duration. The hot path does not change for it: `end` hands the duration of an announced wait to
the watchdog (a dict look-up it makes anyway while one is announced); everything else is the
watchdog's, four times a second.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from provenance.log.events import Wait

__all__ = ["MAX_FINISHED", "POLL_S", "WAITS", "WAIT_NOTICE_S", "Key", "Site", "WaitCounters", "WaitWatch",
           "wait_record", "waited_in"]

Key = tuple[str | None, str | None]  # (role, module): what the counters add up by
Site = tuple[Key, str | None]  # a wait's call site: its key, and the collective it waits for (its op)
WAIT_NOTICE_S = 1.0  # a wait blocked this long is written to the log
POLL_S = 0.25  # how often the watchdog looks
MAX_FINISHED = 1024  # announced waits that returned, kept for the watchdog to drain; beyond, counted
_perf = time.perf_counter


class WaitCounters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done: dict[Key, float] = {}
        self._active: dict[int, tuple[Site, float]] = {}
        self._tokens = itertools.count()
        # the watchdog's: the waits it announced (token -> what it wants back), and those of them
        # that returned since it last looked ((what it wanted back, seconds)); at most one
        # announced wait per thread, and the finished ones drained every POLL_S (MAX_FINISHED)
        self._announced: dict[int, Any] = {}
        self._finished: list[tuple[Any, float]] = []
        self.finished_dropped = 0

    # The hot path takes the lock once per wait: inserting into a dict is atomic under the GIL;
    # moving a wait from active to done must be atomic with respect to snapshot(), so that the
    # counter never goes down (and with respect to announce(), so that a wait announced as blocked
    # has its duration handed over, never lost).
    def begin(self, site: Site) -> int:
        token = next(self._tokens)
        self._active[token] = (site, _perf())
        return token

    def end(self, token: int) -> None:
        with self._lock:
            (key, _op), start = self._active.pop(token)
            seconds = _perf() - start
            self._done[key] = self._done.get(key, 0.0) + seconds
            if self._announced and token in self._announced:
                if len(self._finished) < MAX_FINISHED:
                    self._finished.append((self._announced.pop(token), seconds))
                else:
                    del self._announced[token]
                    self.finished_dropped += 1

    def snapshot(self) -> dict[Key, tuple[float, int]]:
        """{(role, module): (seconds waited so far, waits in progress)}."""
        with self._lock:
            now = _perf()
            active = list(self._active.values())  # one C call: a consistent copy
            result = {key: (seconds, 0) for key, seconds in self._done.items()}
        for (key, _op), start in active:
            seconds, count = result.get(key, (0.0, 0))
            result[key] = (seconds + max(0.0, now - start), count + 1)
        return result

    # -- the watchdog's side ---------------------------------------------------------------------
    def announce(self, older_than: float,
                 note: Callable[[Site, float], Any]) -> tuple[list[tuple[Any, float]], list[Any]]:
        """For the watchdog, in one step under the lock: the announced waits that returned since the
        last call, as (note, seconds blocked), and the waits in progress that began at least
        `older_than` seconds ago and were not announced yet, each announced now (once): their
        `note(site, start)` (a perf_counter start), which `end` hands back with the duration."""
        new = []
        with self._lock:
            finished, self._finished = self._finished, []
            due = _perf() - older_than
            # a copy in one C call: begin() adds waits without the lock (only end() removes one, under it)
            for token, (site, start) in list(self._active.items()):
                if start <= due and token not in self._announced:
                    self._announced[token] = noted = note(site, start)
                    new.append(noted)
        return finished, new

    def forget_announced(self) -> list[tuple[Any, float]]:
        """The watchdog stops: the announced waits that returned and were not drained yet; those
        still blocked are no longer followed."""
        with self._lock:
            finished, self._finished = self._finished, []
            self._announced.clear()
        return finished

    def after_fork_in_child(self) -> None:
        """A forked child: a lock another thread held at the fork would never be released here,
        and the parent's other threads' waits will never end in the child."""
        self._lock = threading.Lock()
        self._active.clear()
        self._announced.clear()
        self._finished = []


WAITS = WaitCounters()


def wait_record(state: str, role: str | None, module: str | None, op: str | None, start_ns: int, time_ns: int,
                seconds: float | None = None) -> Wait:
    """A `wait` record: the watchdog's, and the one the OTLP/JSON reader rebuilds from a wait's span."""
    event: Wait = {"type": "wait", "state": state, "role": role, "module": module, "op": op, "start_ns": start_ns,
                   "time_ns": time_ns}
    if seconds is not None:
        event["seconds"] = seconds
    return event


def waited_in(record: dict[str, Any]) -> str:
    """What a `wait` record (read from a log: any value) waited in, as the report says it:
    `torch_all_reduce_prim_impl (row_parallel.post · net2)`."""
    def text(value: Any) -> str | None:
        return value[:200] if isinstance(value, str) and value else None

    where = " \u00b7 ".join(x for x in (text(record.get("role")), text(record.get("module"))) if x)
    return (text(record.get("op")) or "a collective") + (f" ({where})" if where else "")


class WaitWatch:
    """Writes `wait` records of `counters`' long waits through `emit` (the session's), every POLL_S,
    in a daemon thread, until `stop()` or until `writing()` says no log is written any more.
    `check`: called at each look (the tests' fault injection). An internal error warns once
    (`on_error`) and ends the watchdog: counting and tracing go on."""

    def __init__(self, counters: WaitCounters, emit: Callable[[Any], None], writing: Callable[[], bool],
                 on_error: Callable[[BaseException], None], check: Callable[[], None] = lambda: None,
                 notice_s: float = WAIT_NOTICE_S, poll_s: float = POLL_S) -> None:
        self.counters, self.emit, self.writing, self.on_error, self.check = counters, emit, writing, on_error, check
        self.notice_s, self.poll_s = notice_s, poll_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="thunder-provenance wait watch", daemon=True)
        self._failed = False
        self._wall_offset = 0  # time_ns() - perf_counter() in ns, read at each look

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop and join the thread, then write "done" for the announced waits that returned meanwhile."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        finished = self.counters.forget_announced()
        if not self._failed and not self._thread.is_alive():
            self._guarded(self._write_done, finished)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            if not self.writing():  # the log was closed: nothing to write to
                self.counters.forget_announced()
                return
            if not self._guarded(self.look):
                return

    def look(self) -> None:
        """One look: "done" for the announced waits that returned, "blocked" for those newly due."""
        self.check()
        self._wall_offset = time.time_ns() - int(_perf() * 1e9)
        finished, new = self.counters.announce(self.notice_s, self._note)
        self._write_done(finished)
        now = time.time_ns()
        for (role, module), op, start_ns in new:
            self.emit(wait_record("blocked", role, module, op, start_ns, now))

    def _note(self, site: Site, start: float) -> tuple[Key, str | None, int]:
        key, op = site
        return key, op, max(0, int(start * 1e9) + self._wall_offset)

    def _write_done(self, finished: list[tuple[Any, float]]) -> None:
        now = time.time_ns()
        for ((role, module), op, start_ns), seconds in finished:
            self.emit(wait_record("done", role, module, op, start_ns, now, max(0.0, seconds)))

    def _guarded(self, action: Callable[..., None], *args: Any) -> bool:
        try:
            action(*args)
            return True
        except Exception as exc:
            self._failed = True
            self.counters.forget_announced()
            try:
                self.on_error(exc)
            except Exception:
                pass
            return False
