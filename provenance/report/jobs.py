"""How a report uses the machine: how many worker processes by default (`auto_jobs`; workers.py
is the pool itself) and how often it collects garbage (`quiet_gc`). Light to import: the
command's help states these figures."""

from __future__ import annotations

import gc
import os

__all__ = ["BYTES_PER_WORKER", "MAX_AUTO_JOBS", "PARALLEL_MIN_BYTES", "auto_jobs", "quiet_gc"]

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


def quiet_gc() -> tuple[int, int, int]:
    """Fewer cyclic garbage collections while a report is built (returns the thresholds to put
    back): building pages allocates millions of short-lived tuples that reference counting
    frees, and the default thresholds scan the young objects every 700 allocations (~5 % of a
    report's time)."""
    before = gc.get_threshold()
    gc.set_threshold(50_000, 20, 20)
    gc.freeze()  # what the imports made (~10^5 objects, kept to the end) is not traversed by them
    return before
