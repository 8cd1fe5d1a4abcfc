"""Streaming, tolerant reader of THUNDER_TRACE logs (schema: docs/log-schema.md).

One pass over each file, one line at a time. A log's first line is its header; a file without
one is not a THUNDER_TRACE log (`sniff` says what it is instead), a header of another schema
major version is refused with a clear error, and a newer minor version is read, with its unknown
record types counted. After the header, a line that is not a JSON object with a "type" (a header
included) is counted, never fatal; a last line without its newline is a truncated tail (the
process died while writing it). Records of known types are checked against their definitions
(validate.py): what is wrong is dropped from the record and counted. Provenance and span records
may refer only to records written before them (the writer's rule), which keeps their references
acyclic and shallow. What is kept of bad input is bounded: its count, and its first lines.
"""

from __future__ import annotations

import os
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from provenance.core.record import Frame, Provenance, Span, intern
from provenance.log.events import KNOWN_TYPES, MAX_NESTING, SCHEMA_VERSION, TYPES, EventType
from provenance.report.plural import plural
from provenance.report.read.validate import check

__all__ = ["BadLine", "Log", "LogFile", "LogRecord", "NotALog", "SchemaError", "log_files", "sniff",
           "torch_trace_directory"]

_MAJOR, _MINOR = SCHEMA_VERSION.split(".")
MAX_KEPT = 200  # bad lines (and malformed records) kept per file, to list; the rest are counted
MAX_UNKNOWN_TYPES = 50  # distinct unknown record types counted by name; more are counted together
MAX_DEPTH = MAX_NESTING  # how deep provenance records and spans may nest: the writer's bound (events.py)
MAX_HEADER_BYTES = 8 << 20
_SCHEMA = re.compile(r"(\d{1,9})\.(\d{1,9})")  # longer numbers are no version (and no int(): 4300 digits)
# glog's prefix, which every TORCH_TRACE line starts with: "V1130 15:52:35.123456 1234 torch/_dynamo/...:52]"
_GLOG = re.compile(rb"[IWEFV]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ \S+:\d+\] ")


class SchemaError(ValueError):
    """A log written with a schema this reader does not understand."""


class NotALog(ValueError):
    """A file that is not a THUNDER_TRACE log (no header on its first line)."""


@dataclass(frozen=True)
class BadLine:
    """A line of a log that was skipped (or a record that was repaired), and why."""

    file: str
    line: int
    reason: str
    text: str  # the start of the line, for the report ("" for a malformed record)


@dataclass(frozen=True, repr=False, eq=False)  # as the render model's (model/__init__.py): never compared
class LogRecord:
    """One record of a log: its type, its fields, and where it was read (file, line)."""

    type: str
    data: dict[str, Any]
    file: LogFile
    line: int

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)


def _header_schema(data: Any, path: str) -> tuple[int, int] | None:
    """(major, minor) of a header record, None if `data` is not one; SchemaError for another major."""
    if not isinstance(data, dict) or data.get("type") != "header":
        return None
    schema = data.get("schema")
    found = _SCHEMA.fullmatch(schema) if isinstance(schema, str) else None
    if found is None:
        return None
    if found.group(1) != _MAJOR:
        raise SchemaError(f"{path}: written with log schema {schema}, but this thunder-provenance reads schema "
                          f"{_MAJOR}.x; use a thunder-provenance release that matches the writer's.")
    return int(found.group(1)), int(found.group(2))


def sniff(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The header of a THUNDER_TRACE log (its first line). NotALog says what the file is instead,
    SchemaError that it is a log of another schema major version."""
    path = str(path)
    with open(path, "rb") as f:
        first = f.readline(MAX_HEADER_BYTES)
    if not first.strip():
        raise NotALog("not a THUNDER_TRACE log (empty)" if not first else "not a THUNDER_TRACE log (no header)")
    if _GLOG.match(first):
        raise NotALog("this looks like a TORCH_TRACE log: give it after the THUNDER_TRACE log or directory of "
                      "the same run (thunder-trace report THUNDER_DIR TORCH_DIR), or read it with tlparse")
    try:
        data = orjson.loads(first)
    except orjson.JSONDecodeError:
        data = None
    if _header_schema(data, path) is None:
        raise NotALog("not a THUNDER_TRACE log (its first line is not a THUNDER_TRACE header)")
    return data


@dataclass(repr=False, eq=False)
class LogFile:
    """One process's log. Iterate it (once) to stream its records."""

    path: str
    header: dict[str, Any] | None = None
    bad: list[BadLine] = field(default_factory=list)  # the first MAX_KEPT
    bad_count: int = 0
    malformed: list[BadLine] = field(default_factory=list)  # records of known types with bad fields: the first MAX_KEPT
    malformed_count: int = 0
    unknown: Counter = field(default_factory=Counter)  # record types this reader does not know
    truncated: bool = False  # the last line was cut off
    newer_minor: bool = False
    lines: int = 0
    bytes: int = 0
    # The files that provenance records' frames name, numbered in the order first named: the
    # pages refer to a file by its number, the same whichever compile (or worker) shows it.
    paths: dict[str, int] = field(default_factory=dict, repr=False)
    # Types a reader of their own checks, ahead of the pass (the report's profile records): not
    # checked again here, so a problem is counted once.
    read_ahead: frozenset[str] = frozenset()
    # A line this reader may pass over unparsed (counted, never checked): a report worker's
    # (workers.py), for the records of compiles another process builds; None: every line is read.
    skip: Callable[[bytes], bool] | None = field(default=None, repr=False)
    # The running CRC-32 of the bytes read, when asked for (0 to start: an incremental report keys a
    # log's prefix by it; None: not computed, e.g. in a report's worker processes), and a pause:
    # (offset, action) runs `action` before the line that starts at that offset is read.
    crc: int | None = None
    pause: tuple[int, Callable[[], None]] | None = field(default=None, repr=False)
    _prov: dict[int, dict] = field(default_factory=dict, repr=False)
    _spans: dict[int, dict] = field(default_factory=dict, repr=False)
    _depth: dict[int, int] = field(default_factory=dict, repr=False)  # prov id -> nesting depth
    _span_depth: dict[int, int] = field(default_factory=dict, repr=False)
    _built: dict[int, Provenance] = field(default_factory=dict, repr=False)
    _built_spans: dict[int, Span] = field(default_factory=dict, repr=False)

    def __iter__(self) -> Iterator[LogRecord]:
        """The records from where this reader is (`lines`, `bytes`: 0 for a new one, or a state
        an incremental report kept) to the end of the file."""
        skip = self.skip
        pause_at, pause = self.pause if self.pause is not None else (-1, None)
        crc, track = zlib.crc32, self.crc is not None
        with open(self.path, "rb") as f:
            f.seek(self.bytes)
            for number, raw in enumerate(f, self.lines + 1):
                if self.bytes == pause_at:
                    pause()
                self.lines = number
                self.bytes += len(raw)
                if track:
                    self.crc = crc(raw, self.crc)
                if not raw.endswith(b"\n"):
                    self.truncated = True
                    self._bad(number, "truncated last line (the process stopped while writing it)", raw)
                    break
                if skip is not None and skip(raw):
                    continue
                record = self._parse(number, raw)
                if record is not None:
                    yield record

    def __getstate__(self) -> dict[str, Any]:
        """What an incremental report keeps of a reader: its counters and tables, not its
        callables, nor the records it rebuilt (rebuilt again from the tables when asked)."""
        state = dict(self.__dict__)
        state.update(skip=None, pause=None, _built={}, _built_spans={})
        return state

    def _parse(self, number: int, raw: bytes) -> LogRecord | None:
        if raw[:1] != b"{":  # every record starts so: anything else is told apart without parsing it
            if not raw.strip():
                return None
            if not raw.lstrip().startswith(b"{"):
                self._bad(number, "not a record (a JSON object with a string \"type\")", raw)
                return None
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            self._bad(number, f"not JSON ({exc.args[0] if exc.args else exc})", raw)
            return None
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            self._bad(number, "not a record (a JSON object with a string \"type\")", raw)
            return None
        kind = data["type"]
        if kind == "header":
            if number != 1:
                self._bad(number, "a header that is not the log's first line", raw)
                return None
            schema = _header_schema(data, self.path)
            if schema is None:
                self._bad(number, "a header without a schema version", raw)
                return None
            self.newer_minor = schema[1] > int(_MINOR)
            self.header = data
        elif kind not in KNOWN_TYPES:
            self._unknown(kind)
            return None
        declared = TYPES[kind]
        problems = check(data) if kind not in self.read_ahead else []
        if declared.defines is not None:
            problems += self._keep(declared, data)
        elif kind not in self.read_ahead:
            problems += self._earlier(declared, data)
        if problems:
            self._malformed(number, "; ".join(problems[:3]) + (f" (and {len(problems) - 3} more)"
                                                                  if len(problems) > 3 else ""))
        return LogRecord(kind, data, self, number)

    def _tables(self, kind: str) -> tuple[dict[int, dict], dict[int, int]]:
        return (self._prov, self._depth) if kind == "prov" else (self._spans, self._span_depth)

    def _keep(self, declared: EventType, data: dict) -> list[str]:
        """Store a record that defines an id (prov, span). It may refer only to records written
        before it (which keeps references acyclic), and nest at most MAX_DEPTH deep."""
        kind, record_id = declared.defines, data.get("id")
        table, depths = self._tables(kind)
        if type(record_id) is not int:
            return [f"{kind} record without an integer id: not kept"]
        if record_id in table:
            return [f"{kind} {record_id} written twice: the first is kept"]
        problems = []
        depth = 0
        for target, declared_refs in (("prov", declared.provs), ("span", declared.spans)):
            known, _ = self._tables(target)
            for ref in declared_refs:
                if ref.keep_known(data, known):
                    problems.append(f"{kind} {record_id}.{ref.field} refers to "
                                    f"{'records' if target == kind else 'a ' + target} not written before it")
                if target == kind:
                    depth = max(depth, *(depths[t] for t in ref.ids(data) if type(t) is int), 0)
        nesting = declared.provs if kind == "prov" else declared.spans
        if depth >= MAX_DEPTH:
            problems.append(f"{kind} {record_id} nests more than {MAX_DEPTH} records deep: its references are dropped")
            for ref in nesting:
                data[ref.field] = [] if isinstance(data.get(ref.field), list) else None
            depth = 0
        table[record_id] = data
        depths[record_id] = depth + 1
        if kind == "prov":
            paths = self.paths
            for frame in data.get("source") or ():
                if frame[0] not in paths:
                    paths[frame[0]] = len(paths)
        return problems

    def _earlier(self, declared: EventType, data: dict) -> list[str]:
        """A record may name only records written before it (what it names is then the same
        whenever, and by whichever process, it is rendered)."""
        problems = []
        for known, declared_refs in ((self._prov, declared.provs), (self._spans, declared.spans)):
            for ref in declared_refs:
                dropped = ref.keep_known(data, known)
                if not dropped:
                    continue
                if ref.position is None:
                    problems.append(f"{declared.name}.{ref.field} refers to a record not written before it")
                else:
                    noun = ref.field.removesuffix("s")
                    problems.append(f"{declared.name}: {plural(dropped, f'{noun} refers', f'{noun}s refer')} "
                                    f"to records not written before it")
        return problems

    def _unknown(self, kind: str) -> None:
        kind = kind[:100]
        if kind not in self.unknown and len(self.unknown) >= MAX_UNKNOWN_TYPES:
            kind = "(other types)"
        self.unknown[kind] += 1

    def _bad(self, number: int, reason: str, raw: bytes) -> None:
        self.bad_count += 1
        if len(self.bad) < MAX_KEPT:
            self.bad.append(BadLine(self.path, number, reason, raw[:200].decode("utf-8", "replace")))

    def _malformed(self, number: int, reason: str) -> None:
        self.malformed_count += 1
        if len(self.malformed) < MAX_KEPT:
            self.malformed.append(BadLine(self.path, number, reason, ""))

    # -- records by id ---------------------------------------------------------------------
    def prov_record(self, prov_id: Any) -> dict | None:
        """The prov record with this id as read and checked (None: not read, or not an id)."""
        return self._prov.get(prov_id) if type(prov_id) is int else None

    def span_record(self, span_id: Any) -> dict | None:
        return self._spans.get(span_id) if type(span_id) is int else None

    # -- interned records --------------------------------------------------------------------
    def provenance(self, prov_id: int | None) -> Provenance | None:
        """The record with this id (as read so far), rebuilt as the process had it."""
        if prov_id is None:
            return None
        built = self._built.get(prov_id)
        if built is None:
            data = self._prov.get(prov_id)
            if data is None:
                return None
            built = self._built[prov_id] = intern(Provenance(
                source=tuple(Frame(*frame) for frame in data.get("source") or ()),
                module=data.get("module"), module_type=data.get("module_type"), module_file=data.get("module_file"),
                transforms=tuple(data.get("transforms") or ()), role=data.get("role"),
                span=self.span(data.get("span")), derived_from=self.provenance(data.get("derived_from")),
                members=tuple(m for m in map(self.provenance, data.get("members") or ()) if m is not None),
                kind=data.get("kind", "op"),
            ))
        return built

    def span(self, span_id: int | None) -> Span | None:
        if span_id is None:
            return None
        built = self._built_spans.get(span_id)
        if built is None and (data := self._spans.get(span_id)) is not None:
            built = self._built_spans[span_id] = Span(
                name=str(data.get("name", "?")), parent=self.span(data.get("parent")),
                attributes=tuple(sorted((data.get("attributes") or {}).items())), role=data.get("role"),
                id=span_id, start_ns=data.get("start_ns", 0))
        return built


def log_files(path: str | os.PathLike[str]) -> tuple[list[Path], list[tuple[Path, str]]]:
    """A log file, or the *.jsonl files of a THUNDER_TRACE directory (sorted by name); and the
    files of the directory passed over, with why: symbolic links are not followed (a link in a
    log directory could point anywhere), nor is anything that is not a regular file. A link
    given as `path` itself is followed: that is the user's choice."""
    path = Path(path)
    if path.is_dir():
        files, skipped = [], []
        for p in sorted(path.glob("*.jsonl")):
            if p.is_symlink():
                skipped.append((p, "skipped: a symbolic link (links in a log directory are not followed)"))
            elif not p.is_file():
                skipped.append((p, "skipped: not a regular file"))
            else:
                files.append(p)
        return files, skipped
    if path.is_file():
        return [path], []
    raise FileNotFoundError(f"no THUNDER_TRACE log at {str(path)!r}")


class Log:
    """All records of a log file or directory, streamed file by file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.files = [LogFile(str(p)) for p in log_files(path)[0]]

    def __iter__(self) -> Iterator[LogRecord]:
        for log_file in self.files:
            yield from log_file

    @property
    def bad(self) -> list[BadLine]:
        return [b for f in self.files for b in f.bad]


def torch_trace_directory(path: Path) -> bool:
    """Whether a directory holds TORCH_TRACE logs (a few of its files looked at)."""
    try:
        candidates = [p for p in sorted(path.iterdir())[:20] if p.is_file() and not p.is_symlink()]
    except OSError:
        return False
    for candidate in candidates[:5]:
        try:
            sniff(candidate)
        except NotALog as exc:
            if "TORCH_TRACE" in str(exc):
                return True
        except (OSError, SchemaError):
            pass
    return False
