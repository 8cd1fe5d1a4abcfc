"""A compile between its start and its end: built in this process as its records come
(LocalCompile), or its records collected, with the records they reference, for a worker process
(RemoteCompile, built by provenance/report/workers.py). Both deliver the same CompileResult."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from provenance.events import TYPES, refs
from provenance.report.analyze.compile import CompileBuilder
from provenance.report.analyze.handlers import handler_of
from provenance.report.model import CompileError, CompileSummary, RoleCount
from provenance.report.read.log_file import LogFile

if TYPE_CHECKING:
    from provenance.report.workers import Pool

__all__ = ["INCOMPLETE", "RECOVERABLE", "CompileResult", "Job", "LocalCompile", "RemoteCompile", "result_of"]

INCOMPLETE = "(incomplete)"  # what closes, for a worker, a compile the log ended before closing
RECOVERABLE = (KeyError, TypeError, ValueError, AttributeError, IndexError)  # a record the report cannot use


@dataclass(repr=False, eq=False)
class CompileResult:
    """A compile built (here or by a worker), as the run takes it."""

    summary: CompileSummary | None  # None if the compile's records could not be used at all
    roles: list[RoleCount] = field(default_factory=list)
    error: CompileError | None = None
    malformed: list[str] = field(default_factory=list)


def result_of(builder: CompileBuilder, summary: CompileSummary | None, malformed: list[str]) -> CompileResult:
    return CompileResult(summary, builder.page_roles, builder.error, malformed)


class LocalCompile:
    """A compile built in this process, trace by trace as its records are read; what it found
    malformed (`malformed`, which the builder appends to) is delivered with it, as a worker's is."""

    def __init__(self, builder: CompileBuilder, deliver: Callable[[CompileResult], None],
                 malformed: list[str]) -> None:
        self.builder, self.deliver, self.malformed = builder, deliver, malformed

    def add(self, data: dict) -> None:
        handler_of(data).compile(self.builder, data)

    def finish(self, closing: dict | None) -> None:
        """`closing`: the record that closed the compile (events.CLOSING_TYPES); None if the log
        ended first."""
        if closing is not None:
            handler_of(closing).compile(self.builder, closing)
        self.deliver(result_of(self.builder, self.builder.finish(), self.malformed))


@dataclass(repr=False, eq=False)
class Job:
    """What a worker needs to build one compile: its records and the records they reference."""

    builder: dict[str, Any]  # CompileBuilder's keyword arguments that can travel
    path: str
    records: list[dict]
    provs: dict[int, dict]
    spans: dict[int, dict]
    paths: dict[str, int]  # the numbers of the files their frames name (LogFile.paths)


class RemoteCompile:
    """A compile whose records are collected here and built by a worker once complete."""

    def __init__(self, pool: Pool, builder: dict[str, Any], log_file: LogFile,
                 deliver: Callable[[CompileResult], None]) -> None:
        self.pool, self.builder, self.log_file, self.deliver = pool, builder, log_file, deliver
        self.records: list[dict] = []

    def add(self, data: dict) -> None:
        self.records.append(data)

    def finish(self, closing: dict | None) -> None:
        self.records.append(closing if closing is not None else {"type": INCOMPLETE})
        profile = self.builder.get("profile")
        named = [refs(r) for r in self.records if r.get("type") in TYPES]
        provs, spans = self.log_file.referenced(
            [i for p, _ in named for i in p] + (list(profile.prov_ids()) if profile is not None else []),
            [i for _, s in named for i in s])
        numbers = self.log_file.paths
        paths = {frame[0]: numbers[frame[0]] for raw in provs.values() for frame in raw.get("source") or ()}
        self.pool.submit(Job(self.builder, self.log_file.path, self.records, provs, spans, paths), self.deliver)
