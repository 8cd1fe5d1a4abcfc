"""The log files of a run: which process wrote each (its rank, a label for the pages) and the
prefix of its compiles' page names."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from provenance.report.model import LogHeader
from provenance.report.numbers import as_int, path_text

__all__ = ["RunLog", "header_view", "label_logs"]


@dataclass(repr=False, eq=False)
class RunLog:
    """One log file of the run."""

    index: int
    path: str
    header: dict | None
    label: str = ""  # "rank 0", "process 4242", ...
    page_label: str = ""  # on its compiles' pages and rows: the label, or "" when the run is one process without a rank
    prefix: str = ""  # of its compiles' page names: made from integers only
    shown: str | None = None  # the log given, where `path` is a copy of it (merged with a TORCH_TRACE log)

    @property
    def name(self) -> str:
        return path_text(self.shown if self.shown is not None else self.path)

    @property
    def rank(self) -> int | None:
        rank = (self.header or {}).get("rank")
        return rank if isinstance(rank, int) and not isinstance(rank, bool) else None


def label_logs(paths: Iterable[Path], headers: list[dict | None], shown: dict[Path, Path] | None = None
               ) -> list[RunLog]:
    """Each log's label (rank N / process P), page label and page-name prefix (made from integers only);
    `shown`: the log given, for a path that is a copy of it."""
    shown = shown or {}
    logs = [RunLog(i, str(p), h, shown=str(shown[p]) if p in shown else None)
            for i, (p, h) in enumerate(zip(paths, headers))]
    ranks = Counter(log.rank for log in logs if log.rank is not None)
    for log in logs:
        unique = log.rank is not None and ranks[log.rank] == 1
        log.prefix = f"r{log.rank}" if unique and log.rank >= 0 else f"log{log.index}"
        pid = (log.header or {}).get("pid")
        log.label = (f"rank {log.rank}" if unique else f"rank {log.rank} (log {log.index})" if log.rank is not None
                     else f"process {pid}" if as_int(pid) is not None else f"log {log.index}")
        # One process, no rank: every page would say the same "process N"; its pid is in the Run table.
        log.page_label = "" if len(logs) == 1 and log.rank is None else log.label
    return logs


def header_view(header: dict | None) -> LogHeader | None:
    """A log's header with every field the pages show, of the type they expect (a header is
    from the log: any field may be missing or odd)."""
    if header is None:
        return None
    versions = header.get("versions")
    argv = header.get("argv")
    otlp = header.get("otlp")
    return LogHeader(schema=str(header.get("schema", "")), time_ns=as_int(header.get("time_ns")),
                     rank=as_int(header.get("rank")), world_size=as_int(header.get("world_size")),
                     host=str(header.get("host", "")), pid=as_int(header.get("pid")),
                     argv=[str(a) for a in argv] if isinstance(argv, list) else [],
                     versions={str(k): str(v) for k, v in versions.items()} if isinstance(versions, dict) else {},
                     otlp={"file": str(otlp.get("file", "?")), "service": str(otlp.get("service") or "?"),
                           "spans": as_int(otlp.get("spans"))} if isinstance(otlp, dict) else None)
