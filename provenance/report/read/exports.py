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

__all__ = ["MAX_SNIFFED", "SIGNAL", "SNIFF_BYTES", "is_otlp", "open_export", "otlp_files"]

MAX_SNIFFED = 10_000  # files of a directory looked at
SNIFF_BYTES = 256 << 10
# How an export request's line starts (or the metrics or logs a collector may write to the same file).
SIGNAL = re.compile(rb'\s*\{\s*"(resource_?[sS]pans|resource_?[mM]etrics|resource_?[lL]ogs)"\s*:')
_SIGNAL_LINE = re.compile(rb'\n\s*\{\s*"(resource_?[sS]pans|resource_?[mM]etrics|resource_?[lL]ogs)"\s*:')
_GZIP = b"\x1f\x8b"


@contextmanager
def open_export(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """The file's bytes, decompressed if it is gzip (by its magic number, not its name)."""
    with open(path, "rb") as f:
        if f.read(2) != _GZIP:
            f.seek(0)
            yield f
            return
        import gzip

        f.seek(0)
        with gzip.GzipFile(fileobj=f, mode="rb") as unzipped:
            yield unzipped


def is_otlp(path: str | os.PathLike[str]) -> bool:
    """Whether a file is an OTLP/JSON export: a line in its first SNIFF_BYTES (decompressed) starts
    `{"resourceSpans":` (or the metrics or logs a collector may write to the same file); one bad
    first line does not hide an export."""
    try:
        with open_export(path) as f:
            head = f.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):
        return False
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
