"""compile_directory.json: the run's model as JSON, one entry per compile, written as compiles end
(spooled to an unlinked temporary file in the output directory) and framed by the run's figures
at the end. Numbers are written by provenance/report/numbers.py's `dumps`: a sum past 64 bits is
a float, not a failure."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import IO, Any

import orjson

from provenance.report.numbers import dumps
from provenance.report.render.files import written_whole

__all__ = ["DIRECTORY_FILE", "DirectoryWriter"]

DIRECTORY_FILE = "compile_directory.json"


class DirectoryWriter:
    def __init__(self, out: Path, spool: IO[bytes] | None = None) -> None:
        # one JSON line per compile (`spool`: an incremental report's, kept in OUT)
        self._spool = spool if spool is not None else tempfile.TemporaryFile(dir=out)

    def spooled(self) -> int:
        """The bytes spooled so far (flushed): where a resumed report truncates the spool."""
        self._spool.flush()
        return self._spool.tell()

    def add(self, entry: dict[str, Any]) -> None:
        self._spool.write(dumps(entry, orjson.OPT_NON_STR_KEYS) + b"\n")

    def write(self, path: Path, head: dict[str, Any], calls: dict[str, tuple[int, int, int | None]]) -> None:
        """`head`, then the spooled entries with the figures the calls records (at the end of each
        log) gave them, `calls` by compile key: (the function's calls, the function's cache hits,
        the compile's own cache hits or None); one entry in memory at a time."""
        self._spool.seek(0)
        with written_whole(path) as f:
            f.write(dumps(head, orjson.OPT_NON_STR_KEYS)[:-1] + b', "compiles": [')
            for n, line in enumerate(self._spool):
                entry = orjson.loads(line)
                entry["calls"], entry["cache_hits"], entry["compile_hits"] = calls.get(entry["key"], (0, 0, None))
                f.write((b",\n  " if n else b"\n  ") + dumps(entry, orjson.OPT_NON_STR_KEYS))
            f.write(b"\n]}\n")
        self._spool.close()
