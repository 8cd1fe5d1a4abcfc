"""compile_directory.json: the run's model as JSON, one entry per compile, written as compiles end
(spooled by log: render/spools.py) and framed by the run's figures
at the end. Numbers are written by provenance/report/numbers.py's `dumps`: a sum past 64 bits is
a float, not a failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from provenance.report.numbers import dumps
from provenance.report.render.files import written_whole
from provenance.report.render.spools import Spools

__all__ = ["DIRECTORY_FILE", "DirectoryWriter"]

DIRECTORY_FILE = "compile_directory.json"


class DirectoryWriter:
    def __init__(self, out: Path, spools: Spools | None = None) -> None:
        # one JSON line per compile, by log (`spools`: an incremental report's, kept in OUT: render/spools.py)
        self._spools = spools if spools is not None else Spools("directory", out)

    def add(self, log: int, entry: dict[str, Any]) -> None:
        self._spools.write(log, dumps(entry, orjson.OPT_NON_STR_KEYS) + b"\n")

    def write(self, path: Path, head: dict[str, Any], calls: dict[str, tuple[int, int, int | None]]) -> None:
        """`head`, then the spooled entries with the figures the calls records (at the end of each
        log) gave them, `calls` by compile key: (the function's calls, the function's cache hits,
        the compile's own cache hits or None); one entry in memory at a time."""
        with written_whole(path) as f:
            f.write(dumps(head, orjson.OPT_NON_STR_KEYS)[:-1] + b', "compiles": [')
            for n, line in enumerate(self._spools.lines()):
                entry = orjson.loads(line)
                entry["calls"], entry["cache_hits"], entry["compile_hits"] = calls.get(entry["key"], (0, 0, None))
                f.write((b",\n  " if n else b"\n  ") + dumps(entry, orjson.OPT_NON_STR_KEYS))
            f.write(b"\n]}\n")
        self._spools.close()
