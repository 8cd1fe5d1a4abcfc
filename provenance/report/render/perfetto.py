"""Chrome trace-event JSON of compiles, their phases, executor compiles and provenance scopes, for
ui.perfetto.dev or chrome://tracing: one process track per rank (log file), complete ("X")
events in µs from the earliest time written, so no event starts before 0.

Events are spooled as compiles end (absolute times, to disk when large) and written out at
`close()`, once the earliest time is known, sorted by rank and time (so the file does not depend
on the order in which worker processes delivered compiles). A compile spans its wall time (the `phases` record's
window) with every phase nested at its real start and end. Logs without phases (schema 1.0)
get the old placement: passes that report a duration laid end to end from the compile's start
(`args.placement` says so).
"""

from __future__ import annotations

import tempfile
from typing import IO, Any

import orjson

from provenance.report.model import CompileSummary, ExecutorCompile, GraphView

__all__ = ["PERFETTO_FILE", "PerfettoWriter"]

PERFETTO_FILE = "perfetto_trace.json"
# thread ids: compiles with their phases nested, executor compiles, scopes, Dynamo graphs' whole compiles
COMPILES, EXECUTORS, SCOPES, GRAPHS = 1, 2, 3, 4


class PerfettoWriter:
    def __init__(self, path: str, base_ns: int | None) -> None:
        self.path = path
        self.base_ns = base_ns  # the earliest time seen (headers first): timestamps start at 0
        self._spool: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=8 << 20, mode="w+b")

    def _emit(self, event: dict[str, Any], ts_ns: int | None = None, dur_ns: int | None = None) -> None:
        """`event` at `ts_ns` lasting `dur_ns` (absolute ns; converted at close)."""
        if ts_ns is not None:
            self.base_ns = ts_ns if self.base_ns is None else min(self.base_ns, ts_ns)
        self._spool.write(orjson.dumps([event, ts_ns, dur_ns]) + b"\n")

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
            dur = c.window[1] - c.window[0]
        elif c.seconds is not None:
            dur = int(c.seconds * 1e9)
        else:
            dur = c.end_ns - start if c.end_ns else 0
        name = f"{c.fn.rsplit('.', 1)[-1]} compile {c.compile}" + (f" (recompile {c.index})" if c.index else "")
        args = {"fn": c.fn, "compile": c.compile, "status": c.status, "index": c.index, "page": c.page}
        if c.recompile_reason:
            args["recompile_reason"] = c.recompile_reason
        self._emit({"ph": "X", "name": name, "cat": "compile", "pid": pid, "tid": COMPILES, "args": args},
                   start, max(dur, 0))
        if c.phases:
            for phase in c.phases:
                self._emit({"ph": "X", "name": phase.label, "cat": f"phase.{phase.group}", "pid": pid,
                            "tid": COMPILES, "args": {"phase": phase.name, "detail": phase.detail,
                                                      "depth": phase.depth}},
                           phase.start_ns, phase.end_ns - phase.start_ns)
        else:
            cursor = start
            for list_name, index, pass_name, ms, _ops, _counts in c.passes:
                if not ms:
                    continue
                length = min(int(ms * 1e6), max(start + dur - cursor, 0))  # stay inside the compile
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
                    "args": args}, g.timing.start_ns, int(g.timing.window_ms * 1e6))
        for phase in g.phases:
            self._emit({"ph": "X", "name": phase.label, "cat": f"phase.{phase.group}", "pid": pid, "tid": GRAPHS,
                        "args": {"phase": phase.name, "detail": phase.detail, "graph": g.label}},
                       phase.start_ns, phase.end_ns - phase.start_ns)

    def executor_compile(self, pid: int, compile_id: Any, e: ExecutorCompile) -> None:
        self._emit({"ph": "X", "name": f"{e.fusion} ({e.executor})", "cat": "executor_compile", "pid": pid,
                    "tid": EXECUTORS, "args": {"compile": compile_id, "trace": e.trace, "executor": e.executor}},
                   e.start_ns, e.end_ns - e.start_ns)

    def scope(self, pid: int, name: str, start_ns: int, end_ns: int, role: str | None) -> None:
        self._emit({"ph": "X", "name": name, "cat": "scope", "pid": pid, "tid": SCOPES, "args": {"role": role}},
                   start_ns, max(end_ns - start_ns, 0))

    def close(self) -> None:
        """Write the trace: metadata first, then the events by rank and start (longer first, so
        a phase precedes what it contains): the same file however compiles were delivered."""
        base = self.base_ns or 0
        self._spool.seek(0)
        meta, timed = [], []
        for line in self._spool:
            event, ts_ns, dur_ns = orjson.loads(line)
            if ts_ns is None:
                meta.append(event)
                continue
            event["ts"] = (ts_ns - base) / 1000.0
            if dur_ns is not None:
                event["dur"] = dur_ns / 1000.0
            timed.append((event["pid"], ts_ns, -(dur_ns or 0), event["tid"], line, event))
        self._spool.close()
        timed.sort(key=lambda item: item[:5])
        with open(self.path, "wb") as f:
            f.write(b'{"displayTimeUnit": "ms", "traceEvents": [\n')
            f.write(b",\n".join(orjson.dumps(e) for e in [*meta, *(item[5] for item in timed)]))
            f.write(b"\n]}\n")
