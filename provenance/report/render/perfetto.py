"""Chrome trace-event JSON of compiles, their phases, executor compiles and provenance scopes, for
ui.perfetto.dev or chrome://tracing: one process track per rank (log file), complete ("X")
events in µs from the earliest time written, so no event starts before 0.

Events are spooled as compiles end (absolute times, to disk when large, in the output
directory) and written out at `close()`, once the earliest time is known, sorted by rank and time
(so the file does not depend on the order in which worker processes delivered compiles). The sort
is external, in bounded memory: runs of RUN_EVENTS events are sorted and spooled (unlinked files
in the output directory), then merged (MAX_RUNS at a time), so neither memory nor open files
follow the number of events (each event is merged log(E) / log(MAX_RUNS) times). Times and
durations are int64 nanoseconds (provenance/report/numbers.py), whatever the log's numbers.

A compile spans its wall time (the `phases` record's window) with every phase nested at its real
start and end. Logs without phases (schema 1.0) get the old placement: passes that report a
duration laid end to end from the compile's start (`args.placement` says so).
"""

from __future__ import annotations

import heapq
import os
import tempfile
from collections.abc import Iterator
from operator import itemgetter
from pathlib import Path
from typing import IO, Any

import orjson

from provenance.report.model import CompileSummary, ExecutorCompileView, GraphView
from provenance.report.numbers import clamp, dumps, duration_ns, ns_of_ms, ns_of_seconds
from provenance.report.render.files import written_whole
from provenance.report.render.spools import Spools

__all__ = ["PERFETTO_FILE", "PerfettoWriter"]

PERFETTO_FILE = "perfetto_trace.json"
# thread ids: compiles with their phases nested, executor compiles, scopes, Dynamo graphs' whole compiles
COMPILES, EXECUTORS, SCOPES, GRAPHS = 1, 2, 3, 4
RUN_EVENTS = 5_000  # events sorted in memory at a time (about 2 MB); more are merged from sorted runs
MAX_RUNS = 64  # sorted runs merged at once (open files); more are first merged into longer runs
_KEY = itemgetter(0, 1, 2, 3, 4)  # pid, start, -duration, tid, the spooled line


class PerfettoWriter:
    def __init__(self, path: str, base_ns: int | None, spools: Spools | None = None) -> None:
        """`spools`: where events wait for `close()`, by log (an incremental report's, kept in OUT, which
        it cuts back to take a log up: render/spools.py); by default one temporary file."""
        self.path = path
        self._header_base = base_ns  # the earliest header time: timestamps start at 0
        self._bases: dict[int, int] = {}  # by spool (log): the earliest event time spooled there
        self._dir = os.path.dirname(os.path.abspath(path))  # the report's: every file it writes is in it
        self._spools = spools if spools is not None else Spools("perfetto", Path(self._dir))

    @property
    def base_ns(self) -> int | None:
        """The earliest time seen (headers first): timestamps start at 0."""
        times = [t for t in (self._header_base, *self._bases.values()) if t is not None]
        return min(times) if times else None

    def base_of(self, pid: int) -> int | None:
        """The earliest event time of a log (an incremental report keeps it with the log's state)."""
        return self._bases.get(pid)

    def take_up(self, pid: int, base_ns: int | None) -> None:
        """A log taken up: its earliest event time as kept (its spool was cut back by the keeper)."""
        if base_ns is not None:
            self._bases[pid] = base_ns

    def restart(self, pid: int) -> None:
        """A log taken up is read whole after all (its spool was started anew)."""
        self._bases.pop(pid, None)

    def _emit(self, event: dict[str, Any], ts_ns: int | None = None, dur_ns: int | None = None,
              spool: int | None = None) -> None:
        """`event` at `ts_ns` lasting `dur_ns` (absolute ns, int64s; converted at close), spooled with
        its log's events (`spool`: elsewhere: -1, the run's end)."""
        key = event["pid"] if spool is None else spool
        if ts_ns is not None:
            ts_ns = clamp(ts_ns)
            base = self._bases.get(key)
            self._bases[key] = ts_ns if base is None else min(base, ts_ns)
        if dur_ns is not None:
            dur_ns = max(0, clamp(dur_ns))
        self._spools.write(key, dumps([event, ts_ns, dur_ns]) + b"\n")

    def process(self, pid: int, name: str) -> None:
        self._emit({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
        self._emit({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        for tid, thread in ((COMPILES, "compiles and their phases"), (EXECUTORS, "executor compiles (first call)"),
                            (SCOPES, "provenance scopes"), (GRAPHS, "Dynamo graphs: the whole compile (ThunderFX)")):
            self._emit({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": thread}})

    def compile(self, pid: int, c: CompileSummary) -> None:
        start = c.window[0] if c.window else c.start_ns
        if start is None:
            return
        if c.window:
            dur = duration_ns(*c.window)
        elif c.seconds is not None:
            dur = ns_of_seconds(c.seconds)
        else:
            dur = duration_ns(start, c.end_ns) if c.end_ns else 0
        name = f"{c.fn.rsplit('.', 1)[-1]} compile {c.compile}" + (f" (recompile {c.index})" if c.index else "")
        args = {"fn": c.fn, "compile": c.compile, "status": c.status, "index": c.index, "page": c.page}
        if c.recompile_reason:
            args["recompile_reason"] = c.recompile_reason
        self._emit({"ph": "X", "name": name, "cat": "compile", "pid": pid, "tid": COMPILES, "args": args},
                   start, max(dur, 0))
        if c.phases:
            for phase in c.phases:
                event = {"ph": "X", "name": phase.label, "cat": f"phase.{phase.group}", "pid": pid, "tid": COMPILES}
                # only what the name does not say: thousands of phases per report
                args = {k: v for k, v in (("phase", phase.name if phase.name != phase.label else None),
                                          ("detail", phase.detail), ("depth", phase.depth or None)) if v is not None}
                if args:
                    event["args"] = args
                self._emit(event, phase.start_ns, phase.end_ns - phase.start_ns)
        else:
            cursor = start
            for list_name, index, pass_name, ms, _ops, _counts in c.passes:
                if not ms:
                    continue
                length = min(ns_of_ms(ms), max(start + dur - cursor, 0))  # stay inside the compile
                self._emit({"ph": "X", "name": pass_name, "cat": "pass", "pid": pid, "tid": COMPILES,
                            "args": {"list": list_name, "index": index, "ms": ms,
                                     "placement": "sequential from the compile start"}}, cursor, length)
                cursor += length
        if c.status == "failed" and c.end_ns is not None:
            self._emit({"ph": "i", "s": "t", "name": "compile error", "cat": "error", "pid": pid, "tid": COMPILES,
                        "args": c.error or {}}, c.end_ns)

    def dynamo_graph(self, pid: int, g: GraphView) -> None:
        """A Dynamo graph's whole compile, Dynamo's start to the last piece compiled, its phases nested."""
        if g.timing is None:
            return
        args = {"graph": g.number, "compile_id": g.compile_id, "page": g.page, "seconds": g.seconds,
                "covered_pct": round(g.timing.covered_pct, 1)}
        if g.recompile is not None:
            args["recompile_reason"] = g.recompile.reason
        self._emit({"ph": "X", "name": f"Dynamo graph {g.label}", "cat": "dynamo_graph", "pid": pid, "tid": GRAPHS,
                    "args": args}, g.timing.start_ns, ns_of_ms(g.timing.window_ms), spool=-1)
        for phase in g.phases:
            self._emit({"ph": "X", "name": phase.label, "cat": f"phase.{phase.group}", "pid": pid, "tid": GRAPHS,
                        "args": {"phase": phase.name, "detail": phase.detail, "graph": g.label}},
                       phase.start_ns, phase.end_ns - phase.start_ns, spool=-1)

    def executor_compile(self, pid: int, compile_id: Any, e: ExecutorCompileView) -> None:
        self._emit({"ph": "X", "name": f"{e.fusion} ({e.executor})", "cat": "executor_compile", "pid": pid,
                    "tid": EXECUTORS, "args": {"compile": compile_id, "trace": e.trace, "executor": e.executor}},
                   e.start_ns, e.end_ns - e.start_ns)

    def scope(self, pid: int, name: str, start_ns: int, end_ns: int, role: str | None) -> None:
        self._emit({"ph": "X", "name": name, "cat": "scope", "pid": pid, "tid": SCOPES, "args": {"role": role}},
                   start_ns, max(end_ns - start_ns, 0))

    def close(self) -> None:
        """Write the trace: metadata first, then the events by rank and start (longer first, so
        a phase precedes what it contains): the same file however compiles were delivered. At
        most RUN_EVENTS events are held at a time: longer runs are sorted in pieces, then merged."""
        base = self.base_ns or 0
        levels: list[list[IO[bytes]]] = [[]]  # sorted runs; MAX_RUNS of a level merged into one of the next
        batch: list[tuple] = []
        first = True
        try:
            with written_whole(self.path) as f:
                f.write(b'{"displayTimeUnit": "ms", "traceEvents": [\n')
                for line in self._spools.lines():  # metadata as it comes; the timed events sorted in runs
                    event, ts_ns, dur_ns = orjson.loads(line)
                    if ts_ns is None:
                        f.write((b"" if first else b",\n") + dumps(event))
                        first = False
                        continue
                    batch.append((event["pid"], ts_ns, -(dur_ns or 0), event["tid"], line))
                    if len(batch) >= RUN_EVENTS:
                        levels[0].append(self._sorted_run(batch))
                        batch = []
                        for level, runs in enumerate(levels):  # open files bounded; each event merged
                            if len(runs) < MAX_RUNS:  # log(E) / log(MAX_RUNS) times
                                break
                            if level + 1 == len(levels):
                                levels.append([])
                            levels[level + 1].append(self._merged_run(runs))
                            levels[level] = []
                self._spools.close()
                runs = [run for runs in levels for run in runs]  # fewer than MAX_RUNS per level
                batch.sort()
                merged = heapq.merge(*map(_read_run, runs), iter(batch), key=_KEY) if runs else iter(batch)
                for item in merged:
                    event, ts_ns, dur_ns = orjson.loads(item[4])
                    event["ts"] = (ts_ns - base) / 1000.0
                    if dur_ns is not None:
                        event["dur"] = dur_ns / 1000.0
                    f.write((b"" if first else b",\n") + dumps(event))
                    first = False
                f.write(b"\n]}\n")
        finally:
            for runs in levels:
                for run in runs:
                    run.close()

    def _merged_run(self, runs: list[IO[bytes]]) -> IO[bytes]:
        """Sorted runs merged into one (an unlinked file of the output directory)."""
        merged = tempfile.TemporaryFile(dir=self._dir)
        merged.writelines(item[4] for item in heapq.merge(*map(_read_run, runs), key=_KEY))
        for run in runs:
            run.close()
        merged.seek(0)
        return merged

    def _sorted_run(self, batch: list[tuple]) -> IO[bytes]:
        """A run of spooled events, sorted, in an unlinked file of the output directory."""
        batch.sort()
        run = tempfile.TemporaryFile(dir=self._dir)
        run.writelines(item[4] for item in batch)
        run.seek(0)
        return run


def _read_run(run: IO[bytes]) -> Iterator[tuple]:
    for line in run:
        event, ts_ns, dur_ns = orjson.loads(line)
        yield event["pid"], ts_ns, -(dur_ns or 0), event["tid"], line
