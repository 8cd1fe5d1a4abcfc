"""JSONL exporter: one file per process, one JSON object per line, crash-safe.

Each event is serialized with orjson and written with a single unbuffered `os.write` on an
O_APPEND descriptor, newline included: a line reaches the kernel whole, at the record boundary,
so a SIGKILL loses at most the record being written. A value orjson refuses (text with lone
surrogates, an integer beyond 64 bits, an object) is written as text instead: one odd value never
costs the log. The file is created with the first event that serializes, and a forked child
writes a file of its own (`after_fork`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any

import orjson

from exporters.base import Event
from provenance.core.scope import text

__all__ = ["JsonlExporter", "log_file_name", "UnwritableDirectory"]


class UnwritableDirectory(OSError):
    pass


_OPTIONS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS


_MIN_INT, _MAX_INT = -(1 << 63), (1 << 63) - 1  # the log's integers (docs/log-schema.md)


def _plain(value: Any) -> Any:
    """`value` with what orjson refuses made writable: strings with lone surrogates escaped, integers
    saturated at the log's 64-bit bounds (a count or sum past them is at least that large), unknown
    objects as their repr."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {(text(k) if isinstance(k, str) else _plain(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, float)):
        return value
    if isinstance(value, int):
        return min(max(int(value), _MIN_INT), _MAX_INT)
    try:
        return text(repr(value))
    except Exception:
        return f"<unrepresentable {type(value).__qualname__}>"


def log_file_name(rank: int | None, pid: int | None = None, host: str | None = None) -> str:
    """`thunder_trace.<host>.pid<pid>.rank<rank>.jsonl`: unique per process, readable by eye."""
    host = (host or socket.gethostname()).replace(os.sep, "_") or "host"
    rank_part = f"rank{rank}" if rank is not None else "norank"
    return f"thunder_trace.{host}.pid{pid or os.getpid()}.{rank_part}.jsonl"


def check_writable(directory: str) -> str:
    """Create `directory` if needed and prove it writable; UnwritableDirectory says why not."""
    try:
        os.makedirs(directory, exist_ok=True)
        probe = os.path.join(directory, f".thunder_trace_probe.{os.getpid()}")
        with open(probe, "wb"):
            pass
        os.unlink(probe)
    except OSError as exc:
        raise UnwritableDirectory(f"cannot write THUNDER_TRACE logs to {directory!r}: {exc.strerror or exc}") from exc
    return os.path.abspath(directory)


class JsonlExporter:
    """THUNDER_TRACE logs: `directory` is created if needed (UnwritableDirectory if it cannot be
    written); `rank()` names the file, asked when the first event arrives."""

    name = "jsonl"
    needs_trace_text = True  # the report shows every trace

    def __init__(self, directory: str, rank: Callable[[], int | None] = lambda: None) -> None:
        self.directory = check_writable(directory)
        self._rank = rank
        self._fd: int | None = None
        self.path: str | None = None  # the file is created at the first event
        self._events = 0
        self._bytes = 0
        self._closed = False

    def _open(self) -> None:
        # O_EXCL: two processes never share a file; a name left by an earlier run with the same
        # pid gets a numeric suffix instead of being appended to.
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_EXCL
        base = log_file_name(self._rank())
        for attempt in range(1000):
            name = base if attempt == 0 else base.replace(".jsonl", f".{attempt}.jsonl")
            try:
                self._fd = os.open(os.path.join(self.directory, name), flags, 0o644)
                break
            except FileExistsError:
                continue
        else:
            raise UnwritableDirectory(f"no free log file name like {base!r} in {self.directory!r}")
        self.path = os.path.join(self.directory, name)

    def emit(self, event: Event) -> None:
        if self._closed:
            return
        try:
            data = orjson.dumps(event, option=_OPTIONS)
        except orjson.JSONEncodeError:
            data = orjson.dumps(_plain(event), option=_OPTIONS)
        if self._fd is None:
            self._open()
        view = memoryview(data)
        while view:  # os.write may write less than asked (signals, huge records)
            written = os.write(self._fd, view)
            view = view[written:]
        self._events += 1
        self._bytes += len(data)

    def stats(self) -> dict[str, Any]:
        return {"path": self.path, "events": self._events, "bytes": self._bytes}

    def after_fork(self) -> None:
        """In a forked child: leave the parent's file to the parent; the child's first event
        opens a file named after the child's pid."""
        if self._fd is not None:
            os.close(self._fd)  # the child's copy of the descriptor; the parent's stays open
        self._fd, self.path, self._events, self._bytes = None, None, 0, 0

    def close(self) -> None:
        self._closed = True
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
