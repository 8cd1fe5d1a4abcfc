"""How a report uses the machine: how many processes by default (`auto_jobs`; workers.py is the
workers themselves) and how often it collects garbage (`quiet_gc`). Light to import: the
command's help states these figures."""

from __future__ import annotations

import gc
import os

__all__ = ["BYTES_PER_WORKER", "MAX_AUTO_JOBS", "PARALLEL_MIN_BYTES", "auto_jobs", "quiet_gc"]

PARALLEL_MIN_BYTES = 1 << 20  # below, one process is done about when a second has read the logs
BYTES_PER_WORKER = 1 << 20  # a worker is forked in milliseconds, but reads every log: it needs compiles to build
MAX_AUTO_JOBS = 4  # each process reads every log (and holds ~40 MB): past 4, the reading is most of each one's work


def auto_jobs(size: int, cpus: int | None = None) -> int:
    """The default process count for `size` bytes of logs: one per CPU this process may run on
    (its affinity, not the machine's count), at most MAX_AUTO_JOBS and one per BYTES_PER_WORKER;
    1 (everything in this process) below PARALLEL_MIN_BYTES. Busy CPUs are counted too: on them, as
    on idle ones, each process gets its share of the CPUs (a worker costs a second reading of
    the logs, not a copy of every compile's records). `cpus`: given in tests, else the machine's."""
    if size < PARALLEL_MIN_BYTES:
        return 1
    if cpus is None:
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # not on Linux
            cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_AUTO_JOBS, size // BYTES_PER_WORKER))


def quiet_gc() -> tuple[int, int, int]:
    """Fewer cyclic garbage collections while a report is built (returns the thresholds to put
    back): building pages allocates millions of short-lived tuples that reference counting
    frees, and the default thresholds scan the young objects every 700 allocations (~5 % of a
    report's time)."""
    before = gc.get_threshold()
    gc.set_threshold(50_000, 20, 20)
    gc.freeze()  # what the imports made (~10^5 objects, kept to the end) is not traversed (nor, in a worker, copied)
    return before
