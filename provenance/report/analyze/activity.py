"""What each process is doing at the end of its log: compiling (which function, since when),
waiting in a collective (with wait counters on: `wait` records), idle, or exited. While the job runs
the end of the log is now, and the index says it per rank (what a hang looks like: some ranks
compile while the others wait); the page's script adds how long, and which ranks went silent."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from provenance.report.model import RankActivity
from provenance.report.numbers import as_count
from provenance.report.read.coerce import hashable
from provenance.timing.waits import waited_in

__all__ = ["Activity", "ranks_now"]


def _text(value: Any, limit: int = 200) -> str | None:
    return value[:limit] if isinstance(value, str) and value else None


class Activity:
    """One log's: fed by the pass over it (FilePass) as compiles start and end and waits block."""

    def __init__(self) -> None:
        self.open: dict[Any, tuple[str, Any, int | None]] = {}  # compile id -> (fn, id, its start)
        self.wait: tuple[str, int | None] | None = None  # a wait blocked, not done yet: (what, since)
        self.last_ns: int | None = None
        self.last = ""
        self.summaries_last = False  # the process's calls summaries came last: it exited

    def _seen(self, data: dict, what: str) -> None:
        self.summaries_last = False
        t = as_count(data.get("time_ns"))
        if t is not None:
            self.last_ns, self.last = t, what

    def started(self, data: dict) -> None:
        fn = _text(data.get("fn")) or "?"
        self.open[hashable(data.get("compile"))] = (fn, data.get("compile"), as_count(data.get("time_ns")))
        self._seen(data, f"began compiling {fn}")

    def ended(self, data: dict, ok: bool) -> None:
        found = self.open.pop(hashable(data.get("compile")), None)
        fn = found[0] if found else "?"
        self._seen(data, f"ended compiling {fn}" if ok else f"compile of {fn} failed")

    def waited(self, data: dict) -> None:
        what = waited_in(data)
        if data.get("state") == "blocked":
            self.wait = (what, as_count(data.get("start_ns")))
            self._seen(data, f"blocked in {what}")
        else:
            self.wait = None
            self._seen(data, f"waited in {what}")

    def summarized(self, data: dict) -> None:
        self._seen(data, "wrote its calls summary (at its exit)")
        self.summaries_last = True

    def now(self, label: str) -> RankActivity:
        """What the process was doing when its log ended (exited: its calls summaries came last)."""
        last = self.last or "no record with a time"
        exited = self.summaries_last
        if self.wait is not None and not exited:
            return RankActivity(label, "waiting", f"waiting in {self.wait[0]}", self.wait[1], self.last_ns, last)
        if self.open and not exited:
            fn, cid, since = min(self.open.values(), key=lambda o: o[2] or 0)  # the outermost: begun first
            more = f" (and {len(self.open) - 1} more)" if len(self.open) > 1 else ""
            return RankActivity(label, "compiling", f"compiling {fn} (compile {cid}){more}", since, self.last_ns, last)
        if exited:  # the state says it: nothing to add
            return RankActivity(label, "exited", "", self.last_ns, self.last_ns, last)
        return RankActivity(label, "idle", "running, not compiling", self.last_ns, self.last_ns, last)


def ranks_now(activities: list[RankActivity]) -> list[RankActivity]:
    """Each waiting rank learns which ranks were compiling meanwhile (the usual cause); how long each
    has been at it, as of the latest record of any log (the end of the run, or its last sign of life)."""
    compiling = [a.label for a in activities if a.state == "compiling"]
    end = max((a.last_ns for a in activities if a.last_ns is not None), default=None)
    for a in activities:
        if a.state == "waiting":
            a.while_compiling = [label for label in compiling if label != a.label]
        if a.since_ns is not None:
            a.since = datetime.fromtimestamp(a.since_ns / 1e9, UTC).strftime("%H:%M:%S UTC")
            a.seconds = max(0, end - a.since_ns) / 1e9 if end is not None else None
    return activities
