"""Streaming, tolerant reader of THUNDER_TRACE logs (schema: docs/log-schema.md).

One pass over each file, one line at a time. A line that is not a JSON object with a "type" is
counted and listed, never fatal; a last line without its newline is a truncated tail (the
process died while writing it). A header of another schema major version is refused with a
clear error; a newer minor version is read, with its unknown record types counted.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from provenance.events import KNOWN_TYPES, SCHEMA_VERSION
from provenance.record import Frame, Provenance, Span, intern

__all__ = ["BadLine", "Log", "LogFile", "LogRecord", "SchemaError", "log_files"]

_MAJOR = SCHEMA_VERSION.split(".")[0]


class SchemaError(ValueError):
    """A log written with a schema this reader does not understand."""


@dataclass(frozen=True)
class BadLine:
    file: str
    line: int
    reason: str
    text: str  # the start of the line, for the report


@dataclass(frozen=True)
class LogRecord:
    type: str
    data: dict[str, Any]
    file: LogFile
    line: int

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)


@dataclass
class LogFile:
    """One process's log. Iterate it (once) to stream its records."""

    path: str
    header: dict[str, Any] | None = None
    bad: list[BadLine] = field(default_factory=list)
    unknown: Counter = field(default_factory=Counter)  # record types this reader does not know
    truncated: bool = False  # the last line was cut off
    newer_minor: bool = False
    lines: int = 0
    bytes: int = 0
    _prov: dict[int, dict] = field(default_factory=dict, repr=False)
    _spans: dict[int, dict] = field(default_factory=dict, repr=False)
    _built: dict[int, Provenance] = field(default_factory=dict, repr=False)
    _built_spans: dict[int, Span] = field(default_factory=dict, repr=False)

    def __iter__(self) -> Iterator[LogRecord]:
        with open(self.path, "rb") as f:
            for number, raw in enumerate(f, 1):
                self.lines = number
                self.bytes += len(raw)
                if not raw.endswith(b"\n"):
                    self.truncated = True
                    self._bad(number, "truncated last line (the process stopped while writing it)", raw)
                    break
                record = self._parse(number, raw)
                if record is not None:
                    yield record

    def _parse(self, number: int, raw: bytes) -> LogRecord | None:
        if not raw.strip():
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
            self._check_header(data)
        elif kind not in KNOWN_TYPES:
            self.unknown[kind] += 1
            return None
        elif kind == "prov" and isinstance(data.get("id"), int):
            self._prov[data["id"]] = data
        elif kind == "span" and isinstance(data.get("id"), int):
            self._spans[data["id"]] = data
        return LogRecord(kind, data, self, number)

    def _check_header(self, data: dict) -> None:
        schema = str(data.get("schema", ""))
        major, _, minor = schema.partition(".")
        if major != _MAJOR:
            raise SchemaError(
                f"{self.path}: written with log schema {schema or '(none)'}, but this thunder-provenance "
                f"reads schema {_MAJOR}.x; use a thunder-provenance release that matches the writer's."
            )
        self.newer_minor = minor.isdigit() and int(minor) > int(SCHEMA_VERSION.split(".")[1])
        self.header = data

    def _bad(self, number: int, reason: str, raw: bytes) -> None:
        self.bad.append(BadLine(self.path, number, reason, raw[:200].decode("utf-8", "replace")))

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
                module=data.get("module"), module_type=data.get("module_type"),
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
                name=data["name"], parent=self.span(data.get("parent")),
                attributes=tuple(sorted((data.get("attributes") or {}).items())), role=data.get("role"),
                id=span_id, start_ns=data.get("start_ns", 0))
        return built


def log_files(path: str | os.PathLike[str]) -> list[Path]:
    """A log file, or the *.jsonl files of a THUNDER_TRACE directory (sorted by name)."""
    path = Path(path)
    if path.is_dir():
        return sorted(p for p in path.glob("*.jsonl") if p.is_file())
    if path.is_file():
        return [path]
    raise FileNotFoundError(f"no THUNDER_TRACE log at {str(path)!r}")


class Log:
    """All records of a log file or directory, streamed file by file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.files = [LogFile(str(p)) for p in log_files(path)]

    def __iter__(self) -> Iterator[LogRecord]:
        for log_file in self.files:
            yield from log_file

    @property
    def bad(self) -> list[BadLine]:
        return [b for f in self.files for b in f.bad]
