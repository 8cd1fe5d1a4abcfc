"""Records read ahead of the pass over a log file, without parsing its other lines.

Some records come after the compile they belong to has ended (its profiled calls run after the
compile), while its pages are written when it ends. So before the pass, `scan` finds the records
of the types asked for (a regular expression over the file, read in chunks) and hands each to
`take`, which says what is wrong with it, if anything. The report's handlers say which types are
read ahead (analyze/handlers.py); the pass then skips them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import orjson

from provenance.report.read.coerce import hashable

__all__ = ["CHUNK", "MAX_PROBLEMS", "ReadAhead", "scan"]

CHUNK = 1 << 20  # bytes read at a time: the scan's memory, whatever the log's size
MAX_PROBLEMS = 200  # a log of bad records keeps their count, not each reason


@dataclass(repr=False)
class ReadAhead:
    """What a scan found: the records skipped (line number, reason) and how many it took."""

    problems: list[tuple[int, str]]  # the first MAX_PROBLEMS
    records: int  # records found of the types asked for (good or not)
    more_problems: int = 0  # records skipped beyond those listed
    split: int | None = None  # records found before the offset asked for (None: not asked)
    compiles: set[Any] = field(default_factory=set)  # the compiles the records found name (hashable ids)


def _patterns(types: Collection[str]) -> tuple[bytes, re.Pattern[bytes]]:
    """A fast hint every matching line holds (the names' common start) and the exact pattern."""
    quoted = [b'"' + t.encode() + b'"' for t in sorted(types)]
    hint = os.path.commonprefix(quoted) if quoted else b'"'
    names = b"|".join(re.escape(q[1:-1]) for q in quoted)
    return hint, re.compile(rb'"type"\s*:\s*"(?:' + names + rb')"')


class _Lines:
    """Line numbers at byte offsets of a file, counted only when asked (a scan that finds no bad
    record counts nothing), each byte once: offsets are asked in increasing order."""

    def __init__(self, f: BinaryIO, offset: int = 0, line: int = 1) -> None:
        self._f, self._offset, self._line = f, offset, line

    def at(self, offset: int) -> int:
        f = self._f
        resume = f.tell()  # the scan's place
        f.seek(self._offset)
        while self._offset < offset and (block := f.read(min(CHUNK, offset - self._offset))):
            self._line += block.count(b"\n")
            self._offset += len(block)
        f.seek(resume)
        return self._line


def scan(path: str | os.PathLike[str], types: Collection[str], take: Callable[[dict], str | None],
         start: int = 0, first_line: int = 1, split: int | None = None,
         where: Callable[[int], None] | None = None) -> ReadAhead:
    """Find the records of `types` in a log file and `take` each. Read in chunks cut at a newline
    (a longer line is held whole, as the reader holds it), so memory does not follow the file.
    `start`: the offset of a line to start at, which is line `first_line`; `split`: an offset before
    which the records found are counted apart (ReadAhead.split); `where(offset)`: told each record's
    offset before it is taken."""
    if not types:
        return ReadAhead([], 0, split=0 if split is not None else None)
    hint, find = _patterns(types)
    problems: list[tuple[int, str]] = []  # line number, reason
    records = more = before = 0
    compiles: set[Any] = set()
    base = start  # the file offset of the chunk's first byte
    with open(path, "rb") as f:
        lines = _Lines(f, start, first_line)
        f.seek(start)
        pending: list[bytes] = []  # the start of a line that runs past the chunks read so far
        while block := f.read(CHUNK):
            cut = block.rfind(b"\n") + 1
            if not cut:
                pending.append(block)
                continue
            chunk = b"".join([*pending, block]) if pending else block  # searched up to its last newline
            end_of_lines = cut + sum(map(len, pending))
            pending = [block[cut:]] if cut < len(block) else []
            at = chunk.find(hint, 0, end_of_lines)
            while at >= 0:  # bytes.find runs at memory speed; the regex only checks the lines it finds
                start = chunk.rfind(b"\n", 0, at) + 1
                end = chunk.find(b"\n", at)  # found: the chunk's lines end with one
                at = chunk.find(hint, end, end_of_lines)
                if not find.search(chunk, start, end):
                    continue
                try:
                    data = orjson.loads(chunk[start:end])
                except orjson.JSONDecodeError:
                    continue  # the pass reports bad lines
                if not isinstance(data, dict) or data.get("type") not in types:
                    continue
                records += 1
                compiles.add(hashable(data.get("compile")))
                before += split is not None and base + start < split
                if where is not None:
                    where(base + start)
                reason = take(data)
                if reason is not None:
                    if len(problems) < MAX_PROBLEMS:
                        problems.append((lines.at(base + start), reason))
                    else:
                        more += 1
            base += end_of_lines
    # What is pending is a truncated last line: the pass reports it.
    return ReadAhead(problems, records, more, before if split is not None else None, compiles)
