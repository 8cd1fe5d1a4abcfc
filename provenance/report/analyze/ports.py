"""What analysis is given and what its handlers are given, as protocols.

Analysis runs before rendering and the pipeline that drives it (build.py, workers.py) is above it,
so it names its outputs (the page writer, Perfetto, compile_directory.json, the user's source files,
a worker's share) by what it asks of them, not by their classes. The handlers (handlers.py) name the
run, the pass over a file and a compile's builder the same way: run.py and compile.py implement these,
and no module of the report imports a later stage or one that imports it back, not even for a type
checker (tests/test_layering.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, overload

if TYPE_CHECKING:
    from provenance.report.analyze.prov_table import ProvTable
    from provenance.report.model import (
        CompilePage,
        CompilePages,
        CompileSummary,
        ExecutorCompileView,
        GraphView,
        SourcePage,
        TraceView,
    )
    from provenance.report.read.log_file import LogFile, LogRecord
    from provenance.report.read.processes import RunLog

__all__ = ["CompileSink", "DirectorySink", "FileSink", "FxSink", "Keeper", "OpenCompile", "PageSink", "PerfettoSink",
           "ReportSink", "RunSink", "Share", "ShownFile", "SourceLines"]


# -- what analysis writes to (render/ and workers.py implement these) --------------------------------
class PageSink(Protocol):
    """Where a compile's pages go (render/output.py's CompileWriter)."""

    def trace(self, view: TraceView, provs: ProvTable) -> None: ...

    def finish(self, page: CompilePage, source: SourcePage | None) -> None: ...


class Keeper(Protocol):
    """Where an incremental report keeps each log's state (provenance/report/incremental.py)."""

    def checkpoint_at(self, log: int, path: str) -> int | None: ...

    def keep(self, log: int, state: dict[str, Any], offset: int, crc: int, kind: str = ...) -> None: ...

    def fell_back(self, log: int, why: str) -> None: ...


class ReportSink(Protocol):
    """The report's pages (render/output.py's ReportWriter)."""

    def begin_compile(self, pages: CompilePages, provs: ProvTable) -> PageSink: ...


class PerfettoSink(Protocol):
    """The Perfetto trace (render/perfetto.py)."""

    def process(self, pid: int, name: str) -> None: ...

    def compile(self, pid: int, c: CompileSummary) -> None: ...

    def dynamo_graph(self, pid: int, g: GraphView) -> None: ...

    def executor_compile(self, pid: int, compile_id: Any, e: ExecutorCompileView) -> None: ...

    def scope(self, pid: int, name: str, start_ns: int, end_ns: int, role: str | None) -> None: ...

    def close(self) -> None: ...


class DirectorySink(Protocol):
    """compile_directory.json's entries (render/directory.py), by log."""

    def add(self, log: int, entry: dict[str, Any]) -> None: ...


class ShownFile(Protocol):
    """A user file as source views show it (render/source_files.py's SourceFile)."""

    path: str
    from_disk: bool
    ranges: list[tuple[int, int]]
    asset: str | None
    data: dict[str, Any] | None

    def shows(self, line: int) -> bool: ...


class SourceLines(Protocol):
    """The user's source files, read once for every page (render/source_files.py's SourceCache)."""

    def get(self, path: str, quoted: dict[int, str], wanted: set[int], windows: bool = False) -> ShownFile: ...

    def statement(self, path: str, line: int, text: str) -> str | None: ...


class OpenCompile(Protocol):
    """A compile between its start and its end, wherever it is built (pending.py)."""

    def add(self, data: dict) -> None: ...

    def finish(self, closing: dict | None) -> None: ...


class Share(Protocol):
    """The part of the compiles one process of a -j N report builds (workers.py)."""

    def begin(self, make: Callable[[list[str]], Any], deliver: Callable[[Any], None]) -> OpenCompile: ...

    def skipper(self, open_compiles: dict[Any, OpenCompile]) -> Callable[[bytes], bool]: ...

    def after(self, action: Callable[[], None]) -> None: ...

    def drain(self) -> None: ...


# -- what handlers ask of the run (run.py) and of a compile's builder (compile.py) -------------------
class FxSink(Protocol):
    def graph(self, log: RunLog, data: dict) -> None: ...

    def graph_phases(self, log: RunLog, data: dict) -> None: ...

    def graph_break(self, log: RunLog, data: dict) -> None: ...

    def frame_compile(self, log: RunLog, data: dict) -> None: ...

    def torch_trace(self, log: RunLog, data: dict) -> None: ...

    def executor_compile(self, log: RunLog, compile_id: Any, found: ExecutorCompileView) -> None: ...


class RunSink(Protocol):
    perfetto: PerfettoSink
    fx: FxSink

    def in_order(self, action: Callable[[], None]) -> None: ...

    def add_calls(self, log: int, calls: int | None, hits: int | None, compiles: list[int],
                  compile_hits: dict[int, int] | None = None) -> None: ...

    def page_of(self, log: RunLog, compile_id: int) -> str | None: ...

    def final_prologue(self, log: RunLog, compile_id: int) -> bytes | None: ...


class FileSink(Protocol):
    log: RunLog
    log_file: LogFile
    read_ahead_seen: int
    libraries: dict[str, str]

    def open(self, record: LogRecord) -> None: ...

    @overload
    def compile_of(self, record: LogRecord) -> OpenCompile: ...

    @overload
    def compile_of(self, record: LogRecord, begin: bool) -> OpenCompile | None: ...

    def close(self, record: LogRecord, ok: bool) -> None: ...

    def after_end(self, data: dict) -> None: ...

    def latest_prologue(self, compile_id: Any, text: str) -> None: ...

    def waited(self, data: dict) -> None: ...

    def summarized(self, data: dict) -> None: ...


class CompileSink(Protocol):
    phases: dict | None
    recompile: dict | None
    memory: dict[str, dict]
    executor_compiles: list

    def add_trace(self, data: dict) -> None: ...

    def close(self, status: str, data: dict) -> None: ...
