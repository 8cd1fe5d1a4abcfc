"""A compile between its start and its end, as one process of the report holds it.

- LocalCompile: built in this process as its records come (a -j 1 report builds every compile so).
- IsolatedCompile: the same, but a record the builder cannot use is kept with the compile's result
  instead of raised: how a worker process builds its share (workers.py), and how the main process
  rebuilds a compile a lost worker had.
- ElsewhereCompile: one a worker builds; the main process keeps its records (parsed anyway) until
  the worker's result comes, to rebuild it if the worker is lost.
- SkippedCompile: one another process builds; a worker keeps nothing of it.

All deliver the same CompileResult, built by the same CompileBuilder from the same records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from provenance.report.analyze.compile import CompileBuilder
from provenance.report.analyze.handlers import handler_of
from provenance.report.model import CompileSummary, ErrorView, RoleCount
from provenance.report.read.coerce import UNUSABLE

__all__ = ["Compile", "CompileResult", "ElsewhereCompile", "IsolatedCompile", "LocalCompile",
           "Pending", "SkippedCompile", "result_of"]


Deliver = Callable[["CompileResult"], None]
MakeBuilder = Callable[[list[str]], CompileBuilder]  # a compile's builder, its problems appended to the list


@dataclass(repr=False, eq=False)
class CompileResult:
    """A compile built (here or by a worker), as the run takes it."""

    summary: CompileSummary | None  # None if the compile's records could not be used at all
    roles: list[RoleCount] = field(default_factory=list)
    error: ErrorView | None = None
    malformed: list[str] = field(default_factory=list)
    assets: list[str] = field(default_factory=list)  # the user files' data files its pages load


def result_of(builder: CompileBuilder, summary: CompileSummary | None, malformed: list[str]) -> CompileResult:
    return CompileResult(summary, builder.page_roles, builder.error, malformed, builder.assets)


class LocalCompile:
    """A compile built in this process, trace by trace as its records are read; what it found
    malformed (`malformed`, which the builder appends to) is delivered with it."""

    def __init__(self, builder: CompileBuilder, deliver: Deliver, malformed: list[str]) -> None:
        self.builder, self.deliver, self.malformed = builder, deliver, malformed

    def add(self, data: dict) -> None:
        handler_of(data).compile(self.builder, data)

    def finish(self, closing: dict | None) -> None:
        """`closing`: the record that closed the compile (events.CLOSING_TYPES); None if the log
        ended first."""
        if closing is not None:
            handler_of(closing).compile(self.builder, closing)
        self.deliver(result_of(self.builder, self.builder.finish(), self.malformed))


class IsolatedCompile:
    """A compile built as its records come, delivering exactly one result whatever its records
    hold: a record its builder cannot use is named in the result (the process that delivers the
    result is not the one that lists problems)."""

    def __init__(self, make: MakeBuilder, deliver: Deliver) -> None:
        self.malformed: list[str] = []
        self.builder = make(self.malformed)
        self.deliver = deliver

    def add(self, data: dict) -> None:
        try:
            handler_of(data).compile(self.builder, data)
        except UNUSABLE as exc:
            self.malformed.append(f"{data.get('type')} record: {type(exc).__name__}: {exc}")

    def finish(self, closing: dict | None) -> None:
        if closing is not None:
            self.add(closing)
        summary = None
        try:
            summary = self.builder.finish()
        except UNUSABLE as exc:
            self.malformed.append(f"compile end: {type(exc).__name__}: {exc}")
        self.deliver(result_of(self.builder, summary, self.malformed))


class Pending:
    """Where a compile built elsewhere waits for its result (workers.py's Share)."""

    def wait_for(self, compile_: ElsewhereCompile) -> None: ...


class ElsewhereCompile:
    """A compile a worker builds: its records kept here until the worker's result comes (`replay`
    rebuilds it here from them, if the worker is lost)."""

    def __init__(self, make: MakeBuilder, deliver: Deliver, pending: Pending, worker: int) -> None:
        self.make, self.deliver, self.pending, self.worker = make, deliver, pending, worker
        self.records: list[dict] = []
        self.closing: dict | None = None

    def add(self, data: dict) -> None:
        self.records.append(data)

    def finish(self, closing: dict | None) -> None:
        self.closing = closing
        self.pending.wait_for(self)

    def replay(self) -> CompileResult:
        """The compile built here, from its records, as its worker would have built it."""
        got: list[CompileResult] = []
        compile_ = IsolatedCompile(self.make, got.append)
        for data in self.records:
            compile_.add(data)
        compile_.finish(self.closing)
        return got[0]


class SkippedCompile:
    """A compile another process builds: nothing of it is kept."""

    def add(self, data: dict) -> None:
        pass

    def finish(self, closing: dict | None) -> None:
        pass


Compile = LocalCompile | IsolatedCompile | ElsewhereCompile | SkippedCompile
