"""Which of a report's inputs are OTLP/JSON exports, told by content (read/otlp_json.py reads them).

Apart from the reader so that a report of JSONL logs only looks for exports: it never imports the
reader (a module the size of the JSONL reader, for inputs most reports never have).
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

__all__ = ["MAX_EXPANSION", "MAX_SNIFFED", "MIN_EXPANDED_BYTES", "SIGNAL", "SNIFF_BYTES", "TooExpanded", "is_otlp",
           "open_export", "otlp_files"]

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


class TooExpanded(ValueError):
    """A compressed export expanded past its bound (MAX_EXPANSION, MIN_EXPANDED_BYTES)."""


class _Bounded:
    """A decompressed stream that raises TooExpanded once more than `limit` bytes came out of it."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        self._stream, self._left, self.limit = stream, limit, limit

    def _count(self, data: bytes) -> bytes:
        self._left -= len(data)
        if self._left < 0:
            raise TooExpanded(f"it expands past {self.limit >> 20} MB, {MAX_EXPANSION}x its compressed size: "
                              f"the rest is skipped")
        return data

    def read(self, size: int = -1) -> bytes:
        return self._count(self._stream.read(size if size >= 0 else self._left + 1))

    def readline(self, size: int = -1) -> bytes:
        return self._count(self._stream.readline(size if size >= 0 else self._left + 1))


@contextmanager
def open_export(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """The file's bytes, decompressed if it is gzip (by its magic number, not its name), at most
    MAX_EXPANSION times its size (TooExpanded past that)."""
    with open(path, "rb") as f:
        if f.read(2) != _GZIP:
            f.seek(0)
            yield f
            return
        import gzip

        f.seek(0)
        limit = max(MIN_EXPANDED_BYTES, MAX_EXPANSION * os.fstat(f.fileno()).st_size)
        with gzip.GzipFile(fileobj=f, mode="rb") as unzipped:
            yield _Bounded(unzipped, limit)  # type: ignore[misc]  # read and readline are all readers use


def _head(path: str | os.PathLike[str]) -> bytes:
    """The first SNIFF_BYTES of the file, decompressed: as much as there is of a compressed file that
    ends early or has bytes after its end (a cut file's lines are bad lines, never the whole file)."""
    head = b""
    try:
        with open_export(path) as f:
            while len(head) < SNIFF_BYTES and (chunk := f.read(min(16 << 10, SNIFF_BYTES - len(head)))):
                head += chunk
    except (OSError, EOFError, zlib.error, TooExpanded):
        pass
    return head


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
