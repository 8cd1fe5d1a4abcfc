"""One handler per event type: where the report sends each record of a log.

The event types themselves (fields, the ids they reference, which close a compile) are declared
in provenance/log/events.py; this says what the report does with each. A handler's `route` is where
its records go:
- LOG: kept by the reader (records that define ids, the header); nothing more to do in the pass.
- RUN: the run as a whole (calls, ThunderFX graphs, scope ends): `run(...)`.
- OPENS / CLOSES: start or end a compile; COMPILE: a record of the open compile, handed to its
  builder (`compile(...)`), here or in a worker process; AFTER_END: a record of the compile that
  ended last (lazy executor compiles, which its first call causes).
- READ_AHEAD: read before the pass (read/read_ahead.py: they follow their compile's end), into
  what `read_ahead(...)` fills; the pass only counts them.

Adding an event type to the report is one class here (named for its type: `TraceHandler` handles
`trace`) and one line in `default_handlers()`;
tests/test_layering.py fails while an event type has no handler.
"""

from __future__ import annotations

import os
import zlib
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar

from provenance.log.events import TYPES
from provenance.report.analyze.phases import executor_compile
from provenance.report.numbers import as_int
from provenance.report.read.profile_records import LoggedProfile, ProfileCollector
from provenance.report.read.read_ahead import ReadAhead, scan

if TYPE_CHECKING:
    from provenance.report.analyze.ports import CompileSink, FileSink, RunSink
    from provenance.report.read.log_file import LogRecord

__all__ = ["HANDLERS", "READ_AHEAD", "Handler", "Route", "default_handlers", "handler_of", "read_ahead", "registry"]


class Route(Enum):
    LOG = "log"
    RUN = "run"
    OPENS = "opens"
    COMPILE = "compile"
    CLOSES = "closes"
    AFTER_END = "after_end"
    READ_AHEAD = "read_ahead"


class Handler:
    """What the report does with one event type. `run` is called in the pass over the log, in
    order; `compile`, for records that go to a compile, by its builder (wherever it is built)."""

    type: ClassVar[str]
    route: ClassVar[Route]
    # A COMPILE record whose compile has no start: one is begun for it (its traces are worth a page),
    # unless the record only annotates a compile (memory: a timeline of ops no trace of the log has).
    stands_for_compile: ClassVar[bool] = True

    def run(self, run: RunSink, file: FileSink, record: LogRecord) -> None:
        route = self.route
        if route is Route.COMPILE:
            compile_ = file.compile_of(record, begin=self.stands_for_compile)
            if compile_ is not None:
                compile_.add(record.data)
        elif route is Route.AFTER_END:
            file.after_end(record.data)
        elif route is Route.READ_AHEAD:
            file.read_ahead_seen += 1  # read before the pass, handed to its compile at its start

    def compile(self, builder: CompileSink, data: dict) -> None:
        raise TypeError(f"{self.type} records do not go to a compile")

    def read_ahead(self, collector: ProfileCollector, data: dict) -> str | None:
        raise TypeError(f"{self.type} records are not read ahead")


class Kept(Handler):
    route = Route.LOG

    def run(self, run: RunSink, file: FileSink, record: LogRecord) -> None:
        pass  # the reader keeps it by id (or read it up front: the header)


class HeaderHandler(Kept):
    type = "header"


class ProvHandler(Kept):
    type = "prov"


class SpanHandler(Kept):
    type = "span"


class SpanEndHandler(Handler):
    type, route = "span_end", Route.RUN

    def run(self, run: RunSink, file: FileSink, record: LogRecord) -> None:
        span = file.log_file.span_record(record.get("id"))
        end = record.get("end_ns")
        if span and isinstance(span.get("start_ns"), int) and isinstance(end, int):
            name, start, role, log = str(span.get("name")), span["start_ns"], span.get("role"), file.log.index
            run.in_order(lambda: run.perfetto.scope(log, name, start, end, role))


class CompileStartHandler(Handler):
    type, route = "compile_start", Route.OPENS

    def run(self, run: RunSink, file: FileSink, record: LogRecord) -> None:
        file.open(record)


class TraceHandler(Handler):
    type, route = "trace", Route.COMPILE

    def run(self, run: RunSink, file: FileSink, record: LogRecord) -> None:
        if record.get("list") == "prologue" and isinstance(record.get("python"), str):
            file.latest_prologue(record.get("compile"), record["python"])
        super().run(run, file, record)

    def compile(self, builder: CompileSink, data: dict) -> None:
        builder.add_trace(data)


class PhasesHandler(Handler):
    type, route = "phases", Route.COMPILE

    def compile(self, builder: CompileSink, data: dict) -> None:
        builder.phases = data


class RecompileHandler(Handler):
    type, route = "recompile", Route.COMPILE

    def run(self, run: RunSink, file: FileSink, record: LogRecord) -> None:
        """With the pages of the compiles it names and the final prologue of the newest one (the
        page diffs against it)."""
        data = record.data
        rejected = data.get("rejected") if isinstance(data.get("rejected"), list) else []
        ids = [e.get("compile") for e in rejected if isinstance(e, dict) and isinstance(e.get("compile"), int)]
        pages = {cid: page for cid in ids if (page := run.page_of(file.log, cid)) is not None}
        newest = rejected[0].get("compile") if rejected and isinstance(rejected[0], dict) else None
        packed = run.final_prologue(file.log, newest) if isinstance(newest, int) else None
        file.compile_of(record).add({**data, "_pages": pages,
                                     "_prologue": zlib.decompress(packed).decode() if packed else None})

    def compile(self, builder: CompileSink, data: dict) -> None:
        builder.recompile = data


class Closing(Handler):
    route = Route.CLOSES
    status: ClassVar[str]  # the compile's status on the pages

    def run(self, run: RunSink, file: FileSink, record: LogRecord) -> None:
        file.close(record, ok=self.status == "ok")

    def compile(self, builder: CompileSink, data: dict) -> None:
        builder.close(self.status, data)


class CompileEndHandler(Closing):
    type, status = "compile_end", "ok"


class CompileErrorHandler(Closing):
    type, status = "compile_error", "failed"


class CaptureDisabledHandler(Closing):
    type, status = "capture_disabled", "disabled"


class ExecutorCompileHandler(Handler):
    type, route = "executor_compile", Route.AFTER_END

    def run(self, run: RunSink, file: FileSink, record: LogRecord) -> None:
        found = executor_compile(record.data)
        if found is not None:
            log, cid = file.log.index, record.get("compile")
            run.in_order(lambda: run.perfetto.executor_compile(log, cid, found))
            run.fx.executor_compile(file.log, cid, found)  # a ThunderFX piece's: a phase of its graph
        super().run(run, file, record)

    def compile(self, builder: CompileSink, data: dict) -> None:
        found = executor_compile(data)
        if found is not None:
            builder.executor_compiles.append(found)


class CallsHandler(Handler):
    type, route = "calls", Route.RUN

    def run(self, run: RunSink, file: FileSink, record: LogRecord) -> None:
        compiles = record.get("compiles") if isinstance(record.get("compiles"), list) else []
        per_compile, hits = None, record.get("compile_hits")  # schema 1.6: beside `compiles`, in order
        if isinstance(hits, list) and len(hits) == len(compiles):
            per_compile = {c: h for c, h in zip(compiles, hits)
                           if as_int(c) is not None and as_int(h) is not None and h >= 0}
        run.add_calls(file.log.index, as_int(record.get("calls")), as_int(record.get("cache_hits")),
                      [c for c in compiles if as_int(c) is not None], per_compile)
        file.summarized(record.data)


class DynamoGraphHandler(Handler):
    type, route = "dynamo_graph", Route.RUN

    def run(self, run: RunSink, file: FileSink, record: LogRecord) -> None:
        run.fx.graph(file.log, record.data)


class GraphPhasesHandler(Handler):
    type, route = "graph_phases", Route.RUN

    def run(self, run: RunSink, file: FileSink, record: LogRecord) -> None:
        run.fx.graph_phases(file.log, record.data)


class GraphBreakHandler(Handler):
    type, route = "graph_break", Route.RUN

    def run(self, run: RunSink, file: FileSink, record: LogRecord) -> None:
        run.fx.graph_break(file.log, record.data)


class FrameCompileHandler(Handler):
    """A Dynamo frame compile of a ThunderFX backend: what it made, what failed, its time."""

    type, route = "frame_compile", Route.RUN

    def run(self, run: RunSink, file: FileSink, record: LogRecord) -> None:
        run.fx.frame_compile(file.log, record.data)


class TorchTraceHandler(Handler):
    """An artifact of torch's structured trace: kept for its Dynamo graph's page."""

    type, route = "torch_trace", Route.RUN

    def run(self, run: RunSink, file: FileSink, record: LogRecord) -> None:
        run.fx.torch_trace(file.log, record.data)


class LibraryHandler(Handler):
    """A distribution the model's code lies in (transformers 5.3.0): the run table names it."""

    type, route = "library", Route.RUN
    most: ClassVar[int] = 64  # per log: what a log holds is bounded

    def run(self, run: RunSink, file: FileSink, record: LogRecord) -> None:
        name, version = record.get("name"), record.get("version")
        if isinstance(name, str) and len(file.libraries) < self.most:
            file.libraries.setdefault(name[:200], version[:200] if isinstance(version, str) else "?")


class WaitHandler(Handler):
    """A collective wait that blocked at least a second ("blocked" while it blocks, then "done"):
    the file's live state and its waits (run.py's FilePass.waited)."""

    type, route = "wait", Route.RUN

    def run(self, run: RunSink, file: FileSink, record: LogRecord) -> None:
        file.waited(record.data)


class ProfileOpsHandler(Handler):
    type, route = "profile_ops", Route.READ_AHEAD

    def read_ahead(self, collector: ProfileCollector, data: dict) -> str | None:
        return collector.ops(data)


class ProfileCallHandler(Handler):
    type, route = "profile_call", Route.READ_AHEAD

    def read_ahead(self, collector: ProfileCollector, data: dict) -> str | None:
        return collector.call(data)


class MemoryHandler(Handler):
    """A final trace's static memory timeline: the compile's Memory section (analyze/memory.py)."""

    type, route = "memory", Route.COMPILE
    stands_for_compile = False

    def compile(self, builder: CompileSink, data: dict) -> None:
        if data.get("trace") in ("forward", "backward"):
            builder.memory[data["trace"]] = data


def default_handlers() -> list[Handler]:
    """Every event type's handler, one each."""
    return [HeaderHandler(), ProvHandler(), SpanHandler(), SpanEndHandler(), CompileStartHandler(), TraceHandler(),
            PhasesHandler(), RecompileHandler(), CompileEndHandler(), CompileErrorHandler(), CaptureDisabledHandler(),
            ExecutorCompileHandler(), CallsHandler(), DynamoGraphHandler(), GraphPhasesHandler(), GraphBreakHandler(),
            FrameCompileHandler(), TorchTraceHandler(), LibraryHandler(), WaitHandler(), ProfileOpsHandler(),
            ProfileCallHandler(), MemoryHandler()]


def registry(handlers: list[Handler]) -> dict[str, Handler]:
    found: dict[str, Handler] = {}
    for handler in handlers:
        if handler.type in found:
            raise ValueError(f"two report handlers for {handler.type!r}")
        if handler.type not in TYPES:
            raise ValueError(f"a report handler for {handler.type!r}, which provenance.log.events does not declare")
        if (handler.route is Route.CLOSES) != TYPES[handler.type].closes:
            raise ValueError(f"{handler.type!r}: provenance.log.events and its handler disagree on closing a compile")
        found[handler.type] = handler
    return found


HANDLERS: dict[str, Handler] = registry(default_handlers())
READ_AHEAD = frozenset(t for t, h in HANDLERS.items() if h.route is Route.READ_AHEAD)


def handler_of(data: dict) -> Handler:
    return HANDLERS[data["type"]]


def read_ahead(path: str | os.PathLike[str], start: int = 0, first_line: int = 1, split: int | None = None
               ) -> tuple[ReadAhead, dict[Any, LoggedProfile]]:
    """A log file's read-ahead records (from offset `start`, line `first_line`), each taken by its
    handler: what the scan found (the records skipped, and why; `split`: read_ahead.scan's) and the
    profiles by compile id."""
    collector = ProfileCollector()
    found = scan(path, READ_AHEAD, lambda data: handler_of(data).read_ahead(collector, data), start, first_line,
                 split, collector.at)
    return found, collector.profiles
