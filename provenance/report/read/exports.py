"""Which of a report's inputs are OTLP/JSON exports, told by content (read/otlp_json.py reads them).

Apart from the reader so that a report of JSONL logs only looks for exports: it never imports the
reader (a module the size of the JSONL reader, for inputs most reports never have).
"""

from __future__ import annotations

import functools
import os
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

__all__ = ["MAX_EXPANSION", "MAX_SNIFFED", "MIN_EXPANDED_BYTES", "SIGNAL", "SNIFF_BYTES", "ExportStream", "TooExpanded",
           "is_otlp", "open_export", "otlp_files"]

MAX_SNIFFED = 10_000  # files of a directory looked at
SNIFF_BYTES = 256 << 10
# How an export request's line starts (or the metrics or logs a collector may write to the same file).
SIGNAL = re.compile(rb'\s*\{\s*"(resource_?[sS]pans|resource_?[mM]etrics|resource_?[lL]ogs)"\s*:')
_SIGNAL_LINE = re.compile(rb'\n\s*\{\s*"(resource_?[sS]pans|resource_?[mM]etrics|resource_?[lL]ogs)"\s*:')
_GZIP = b"\x1f\x8b"
# A compressed export expands at most MAX_EXPANSION times its size on disk, or MIN_EXPANDED_BYTES for a
# small one: OTLP/JSON compresses 10-30x (a nanoGPT export: 14x), a few KB of gzip that inflate to
# gigabytes (a "zip bomb") would cost time out of all proportion; past the bound the rest is skipped.
MAX_EXPANSION = 200
MIN_EXPANDED_BYTES = 64 << 20
_CHUNK = 64 << 10  # compressed bytes read at a time
_STEP = 256 << 10  # bytes read or decompressed at a time: what one step allocates, whatever the data
_BLANK = re.compile(rb"[ \t\n\r\x0b\x0c]*")  # what bytes.strip() strips


class TooExpanded(ValueError):
    """A compressed export expanded past its bound (MAX_EXPANSION, MIN_EXPANDED_BYTES)."""


class ExportStream:
    """An export's bytes read a line at a time, from `more()` (the next bytes; b"" at the end). An error
    of `more` (a compressed file cut short or corrupt, TooExpanded) is raised once the whole lines
    before it are read: a damaged file is read as far as it goes, its incomplete last line left out."""

    def __init__(self, more: Callable[[], bytes]) -> None:
        self._more = more
        self._buffer = bytearray()
        self._at = 0  # where the unread bytes start
        self._done = False
        self._error: Exception | None = None

    def _fill(self) -> bool:
        """More bytes into the buffer; False at the end or at an error (kept, to raise later)."""
        if self._done:
            return False
        del self._buffer[:self._at]  # bytearray drops its head without moving the rest
        self._at = 0
        try:
            data = self._more()
        except (OSError, EOFError, zlib.error, TooExpanded) as exc:
            self._error, data = exc, b""
        self._buffer += data
        self._done = not data
        return bool(data)

    def _take(self, end: int) -> bytes:
        data = bytes(memoryview(self._buffer)[self._at:end])  # one copy (a slice would be two); no view kept
        self._at = end
        return data

    def read(self, size: int) -> bytes:
        """The next `size` bytes, fewer at the end; b"" there."""
        while len(self._buffer) - self._at < size and self._fill():
            pass
        if self._at == len(self._buffer) and self._error is not None:
            raise self._error
        return self._take(min(len(self._buffer), self._at + size))

    def readline(self, size: int) -> bytes:
        """The next line with its newline, or its first `size` bytes; b"" at the end."""
        searched = 0  # bytes after _at known to hold no newline (_fill moves _at, not what follows it)
        while True:
            found = self._buffer.find(b"\n", self._at + searched, self._at + size)
            if found >= 0:
                return self._take(found + 1)
            if len(self._buffer) - self._at >= size:
                return self._take(self._at + size)
            searched = len(self._buffer) - self._at
            if not self._fill():
                break
        if self._error is not None:  # the line the error cut: not a line
            raise self._error
        return self._take(len(self._buffer))

    def skip_blank(self) -> tuple[int, int]:
        """Blank lines from here skipped in bulk, not one at a time (a few KB of gzip expand to millions
        of newlines): how many, and their bytes. A blank run of more than _STEP bytes without a newline
        is left to readline (a line as long as any)."""
        lines = size = known = 0  # known: bytes after _at known to be blank, without a newline
        while True:
            end = _BLANK.match(self._buffer, self._at + known).end()
            last = self._buffer.rfind(b"\n", self._at + known, end)
            if last >= 0:
                lines += self._buffer.count(b"\n", self._at + known, last + 1)
                size += last + 1 - self._at
                self._at = last + 1
            known = end - self._at
            if end < len(self._buffer) or known > _STEP or not self._fill():
                return lines, size


class _Gunzip:
    """A gzip file's members decompressed a step at a time, at most `limit` bytes in all (TooExpanded past
    that; no step allocates more than _STEP). zlib, not GzipFile: 3.11's GzipFile raises EOFError for a
    file cut short and drops what it had decompressed with it (a small cut export was refused whole)."""

    def __init__(self, file: IO[bytes], limit: int) -> None:
        self._file, self._left, self.limit = file, limit, limit
        self._member = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # one gzip member, its header and trailer
        self._input = b""  # compressed bytes read and not yet decompressed

    def __call__(self) -> bytes:
        """The next decompressed bytes (at most _STEP); b"" after the last member."""
        while True:
            if self._member.eof and not self._next_member():
                return b""
            data = self._input or self._file.read(_CHUNK)
            out = self._member.decompress(data, min(_STEP, self._left) or 1)  # at the bound: is there more?
            self._input = self._member.unconsumed_tail
            if len(out) > self._left:
                raise TooExpanded(f"it expands past {self.limit >> 20} MB, {MAX_EXPANSION}x its compressed size: "
                                  f"the rest is skipped")
            self._left -= len(out)
            if out:
                return out
            if not data and not self._member.eof:
                raise EOFError("cut short: the compressed data ends before its end-of-stream marker")

    def _next_member(self) -> bool:
        """After a member's end, the next one (concatenated gzip files; zero padding skipped, as gzip does)."""
        rest = self._member.unused_data.lstrip(b"\x00")
        while len(rest) < len(_GZIP) and (more := self._file.read(_CHUNK)):
            rest = (rest + more).lstrip(b"\x00")
        if not rest:
            return False
        if not rest.startswith(_GZIP):
            raise zlib.error("bytes after the end of its compressed data that are not gzip")
        self._member, self._input = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS), rest
        return True


@contextmanager
def open_export(path: str | os.PathLike[str]) -> Iterator[ExportStream]:
    """The file's bytes, decompressed if it is gzip (by its magic number, not its name), at most
    MAX_EXPANSION times its size (TooExpanded past that)."""
    with open(path, "rb") as f:
        if f.read(len(_GZIP)) != _GZIP:
            f.seek(0)
            yield ExportStream(functools.partial(f.read, _STEP))
            return
        f.seek(0)
        limit = max(MIN_EXPANDED_BYTES, MAX_EXPANSION * os.fstat(f.fileno()).st_size)
        yield ExportStream(_Gunzip(f, limit))


def _head(path: str | os.PathLike[str]) -> bytes:
    """The first SNIFF_BYTES of the file, decompressed: as much as there is of a compressed file that
    ends early or has bytes after its end (a cut file's lines are bad lines, never the whole file)."""
    try:
        with open_export(path) as f:
            return f.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error, TooExpanded):  # nothing of it read (opening it, a first step)
        return b""


def is_otlp(path: str | os.PathLike[str]) -> bool:
    """Whether a file is an OTLP/JSON export: a line in its first SNIFF_BYTES (decompressed) starts
    `{"resourceSpans":` (or the metrics or logs a collector may write to the same file); one bad
    first line does not hide an export."""
    head = _head(path)
    return SIGNAL.match(head) is not None or _SIGNAL_LINE.search(head) is not None


def otlp_files(path: str | os.PathLike[str], logs: Iterable[Path] = ()) -> list[Path]:
    """The OTLP/JSON exports a file or directory holds: told by content, regular files only (links
    in a directory are not followed, as in a log directory), at most MAX_SNIFFED looked at;
    `logs`: files known to be THUNDER_TRACE logs, not looked at again."""
    path = Path(path)
    known = set(logs)
    if path.is_file():
        return [path] if path not in known and is_otlp(path) else []
    try:
        entries = sorted(path.iterdir())[:MAX_SNIFFED]
    except OSError:
        return []
    return [p for p in entries if p not in known and not p.is_symlink() and p.is_file() and is_otlp(p)]
