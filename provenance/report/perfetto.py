"""Chrome trace-event JSON of compiles, passes and provenance scopes, for ui.perfetto.dev or
chrome://tracing: one process track per rank (log file), complete ("X") events in µs.

Written as the compiles end, so it costs no memory. Thunder reports a pass's duration, not its
start: passes are laid end to end from the compile's start, inside it, in the order Thunder lists
them (`args.placement` says so).
"""

from __future__ import annotations

from typing import IO, Any

import orjson

from provenance.report.model import CompileSummary

__all__ = ["PERFETTO_FILE", "PerfettoWriter"]

PERFETTO_FILE = "perfetto_trace.json"
COMPILES, SCOPES = 1, 3  # thread ids: compiles with their passes nested, provenance scopes


class PerfettoWriter:
    def __init__(self, path: str, base_ns: int | None) -> None:
        self._f: IO[bytes] = open(path, "wb")
        self._f.write(b'{"displayTimeUnit": "ms", "traceEvents": [\n')
        self._first = True
        self.base_ns = base_ns  # the earliest time seen: timestamps start near 0

    def _us(self, ns: int) -> float:
        if self.base_ns is None:
            self.base_ns = ns
        return (ns - self.base_ns) / 1000.0

    def _emit(self, event: dict[str, Any]) -> None:
        if not self._first:
            self._f.write(b",\n")
        self._first = False
        self._f.write(orjson.dumps(event))

    def process(self, pid: int, name: str) -> None:
        self._emit({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
        self._emit({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        for tid, thread in ((COMPILES, "compiles and passes"), (SCOPES, "provenance scopes")):
            self._emit({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": thread}})

    def compile(self, pid: int, c: CompileSummary) -> None:
        if c.start_ns is None:
            return
        ts = self._us(c.start_ns)
        dur = c.seconds * 1e6 if c.seconds is not None else ((c.end_ns - c.start_ns) / 1000.0 if c.end_ns else 0.0)
        name = f"{c.fn.rsplit('.', 1)[-1]} compile {c.compile}" + (f" (recompile {c.index})" if c.index else "")
        self._emit({"ph": "X", "name": name, "cat": "compile", "pid": pid, "tid": COMPILES, "ts": ts,
                    "dur": max(dur, 0.0), "args": {"fn": c.fn, "compile": c.compile, "status": c.status,
                                                   "index": c.index, "page": c.page}})
        cursor = ts
        for list_name, index, pass_name, ms, _ops, _counts in c.passes:
            if not ms:
                continue
            length = min(ms * 1000.0, max(ts + dur - cursor, 0.0))  # stay inside the compile
            self._emit({"ph": "X", "name": pass_name, "cat": "pass", "pid": pid, "tid": COMPILES, "ts": cursor,
                        "dur": length, "args": {"list": list_name, "index": index, "ms": ms,
                                                "placement": "sequential from the compile start"}})
            cursor += length
        if c.status == "failed" and c.end_ns is not None:
            self._emit({"ph": "i", "s": "t", "name": "compile error", "cat": "error", "pid": pid, "tid": COMPILES,
                        "ts": self._us(c.end_ns), "args": c.error or {}})

    def scope(self, pid: int, name: str, start_ns: int, end_ns: int, role: str | None) -> None:
        self._emit({"ph": "X", "name": name, "cat": "scope", "pid": pid, "tid": SCOPES, "ts": self._us(start_ns),
                    "dur": max((end_ns - start_ns) / 1000.0, 0.0), "args": {"role": role}})

    def close(self) -> None:
        self._f.write(b"\n]}\n")
        self._f.close()
