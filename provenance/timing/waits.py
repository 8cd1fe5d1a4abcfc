"""Wait counters: seconds spent blocked in collective waits, counting waits still in progress.

A counter that only ticks when a wait returns says nothing about a rank that is stuck; here a
snapshot adds the elapsed time of every wait still blocked, so the value keeps growing while
a wait hangs. Keys are (role, module) of the wait's provenance, e.g. ("row_parallel.post", "net2").
Opt-in (`provenance.enable(wait_counters=True)` or THUNDER_TRACE_WAIT_COUNTERS=1): counting
wraps every collective wait Thunder generates.
"""

from __future__ import annotations

import itertools
import threading
import time

Key = tuple[str | None, str | None]


class WaitCounters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done: dict[Key, float] = {}
        self._active: dict[int, tuple[Key, float]] = {}
        self._tokens = itertools.count()

    # The hot path takes the lock once per wait: inserting into a dict is atomic under the GIL;
    # moving a wait from active to done must be atomic with respect to snapshot(), so that the
    # counter never goes down.
    def begin(self, key: Key) -> int:
        token = next(self._tokens)
        self._active[token] = (key, time.perf_counter())
        return token

    def end(self, token: int) -> None:
        with self._lock:
            key, start = self._active.pop(token)
            self._done[key] = self._done.get(key, 0.0) + (time.perf_counter() - start)

    def snapshot(self) -> dict[Key, tuple[float, int]]:
        """{(role, module): (seconds waited so far, waits in progress)}."""
        with self._lock:
            now = time.perf_counter()
            active = list(self._active.values())  # one C call: a consistent copy
            result = {key: (seconds, 0) for key, seconds in self._done.items()}
        for key, start in active:
            seconds, count = result.get(key, (0.0, 0))
            result[key] = (seconds + max(0.0, now - start), count + 1)
        return result


WAITS = WaitCounters()
