"""User source files for the source view: read from disk when the file still matches the run,
else rebuilt from the lines the log's frames carry.

A path comes from the log, so it is only ever read (never written), only if it names a regular
`.py` file of reasonable size, and only shown if the log quotes at least one of its lines and
every line it quotes matches the file on disk: a changed (or unrelated) file is never passed off
as the run's source, and a log naming a local file without quoting it gets nothing of it.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass

from provenance.report.render.highlight import python_lines

__all__ = ["SourceCache", "SourceFile"]

MAX_BYTES = 2_000_000
FULL_FILE_LINES = 3000  # longer files show windows around the lines that produced ops
CONTEXT = 6


@dataclass
class SourceFile:
    path: str
    from_disk: bool
    rows: list[tuple[int, str] | None]  # (line number, html) or None for a gap
    shared: dict[int, str] | None = None  # for rows every compile shows: their page HTML, by file index


class SourceCache:
    """Highlighted user files, a few kept (compiles of one model share its files)."""

    def __init__(self, max_files: int = 16) -> None:
        # path -> (mtime and size, lines or None if unusable, highlighted lines once needed, the
        # whole file's rows once needed: shared by every compile's SourceFile, never changed; and
        # their page HTML by the file's index on a page, html.source_rows's)
        self._files: OrderedDict[str, list] = OrderedDict()
        self._max = max_files

    def _entry(self, path: str) -> list | None:
        try:
            if not path.endswith(".py") or not os.path.isfile(path):
                return None
            stat = os.stat(path)
        except (OSError, ValueError):
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        entry = self._files.get(path)
        if entry is not None and entry[0] == stamp:
            self._files.move_to_end(path)
            return entry
        lines: list[str] | None = None
        if stat.st_size <= MAX_BYTES:
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = f.read().splitlines()
            except (OSError, ValueError):
                lines = None
        entry = self._files[path] = [stamp, lines, None, None, {}]
        if len(self._files) > self._max:
            self._files.popitem(last=False)
        return entry

    def get(self, path: str, quoted: dict[int, str], wanted: set[int]) -> SourceFile:
        """`quoted`: line -> text the log quotes; `wanted`: lines that produced ops (kept visible)."""
        entry = self._entry(path)
        disk = entry[1] if entry is not None else None
        if disk is not None and _matches(disk, quoted):
            if entry[2] is None:
                entry[2] = python_lines(disk)
            html = entry[2]
            if len(disk) <= FULL_FILE_LINES:  # the whole file: the same rows for every compile
                if entry[3] is None:
                    entry[3] = _with_gaps(range(1, len(disk) + 1), lambda n: html[n - 1])
                return SourceFile(path, True, entry[3], entry[4])
            shown = sorted({n for line in wanted for n in range(line - CONTEXT, line + CONTEXT + 1)
                            if 0 < n <= len(disk)})
            return SourceFile(path, True, _with_gaps(shown, lambda n: html[n - 1]))
        numbers = sorted(quoted)
        html = dict(zip(numbers, python_lines([quoted[n] for n in numbers])))
        return SourceFile(path, False, _with_gaps(numbers, html.__getitem__))


def _matches(disk: list[str], quoted: dict[int, str]) -> bool:
    """Whether the file on disk is the one the log quotes: every quoted line is the disk's line
    (a frame without text proves nothing: it matches only a blank line), and at least one quoted
    line has text. A log can make the report show a local file only by quoting it right."""
    return any(text.strip() for text in quoted.values()) and all(
        0 < line <= len(disk) and disk[line - 1].strip() == text.strip() for line, text in quoted.items())


def _with_gaps(numbers, html_of) -> list[tuple[int, str] | None]:
    rows: list[tuple[int, str] | None] = []
    previous = 0
    for n in numbers:
        if n != previous + 1 and rows:
            rows.append(None)
        rows.append((n, html_of(n)))
        previous = n
    return rows
