"""User source files for the source views: read from disk when the file still matches the run,
else rebuilt from the lines the log's frames carry.

A file read from disk is sent once per report, whichever pages show it: its lines (plain text,
which the pages' script highlights as it builds them: report.js, sourceRows) are one data file,
`static/src/<hash>.js` (named by a hash of its content, written by whichever process first
shows it), that every page showing it loads with a <script> (from file:// too,
where a page cannot fetch). A page says only which of its lines it shows; what a compile adds to
them (op counts, times) is data of the page's own. A file rebuilt from the log (only the lines
the log quotes) is data in the page.

A path comes from the log, so it is only ever read (never written), only if it names a regular
`.py` file of reasonable size, and only shown if the log's quoted lines identify it beyond doubt:
at least MIN_QUOTED distinct non-trivial lines (`trivial`: short lines, imports, comments,
decorators, bare `return`s and such boilerplate a log could guess), and every line it quotes
matches the file on disk at its line number. A changed (or unrelated) file is never passed off as
the run's source, and a log that names a local file knowing a line or two of it (`import os` on
line 1) gets nothing of it: the page shows the lines the log quotes, rebuilt.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from provenance.report.render.files import write_whole
from provenance.report.render.jsonsafe import json_bytes

__all__ = ["ASSET_DIR", "SourceCache", "SourceFile"]

MAX_BYTES = 2_000_000
MAX_STAMPS = 10_000  # files whose state an incremental report checks (a log names at most so many)
MIN_QUOTED = 5  # distinct non-trivial lines a log must quote (all matching) for a local file to be shown
MIN_TEXT = 12  # a quoted line shorter than this (stripped) is trivial
# Lines a log could quote of a file without knowing it: imports, comments, decorators, docstring
# quotes, bare statements and module boilerplate.
_TRIVIAL = re.compile("|".join((
    r"import\s", r"from\s+\S+\s+import\s", r"[#@]", "[\"']{3}",  # imports, comments, decorators, docstrings
    r"(?:return|pass|break|continue|raise|else|try|finally|yield|del|global|nonlocal)\b(?:\s+[\w.]+)?\s*:?$",
    r"super\(\)\.__init__\(", r"if\s+__name__\s*==", r"def\s+(?:__init__|forward|main)\s*\(",
    r"class\s+\w+\s*(?:\(\s*(?:nn\.Module|torch\.nn\.Module|object)?\s*\))?\s*:$")))
FULL_FILE_LINES = 3000  # longer files show windows around the lines that produced ops
CONTEXT = 6
ASSET_DIR = "static/src"  # in the output directory: one data file per user file shown


@dataclass(repr=False, eq=False)
class SourceFile:
    """A user file as source views show it: the lines shown, and where their data is."""

    path: str
    from_disk: bool
    ranges: list[tuple[int, int]]  # the lines shown, first and last of each run (a gap between two)
    asset: str | None = None  # from disk: the name of its lines' data file in ASSET_DIR, shared by every page
    data: dict[str, Any] | None = None  # rebuilt: its lines for the page itself, {"n": numbers, "l": lines}

    def shows(self, line: int) -> bool:
        return any(first <= line <= last for first, last in self.ranges)


MAX_STATEMENT = 12  # lines of a statement shown whole


@lru_cache(maxsize=32)
def _statement_ends(path: str, lines: tuple[str, ...]) -> dict[int, int]:
    """First line -> last line of each statement of the file that spans lines (empty if it does not parse)."""
    try:
        tree = ast.parse("\n".join(lines), filename=path)
    except (SyntaxError, ValueError, RecursionError):
        return {}
    ends: dict[int, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not isinstance(node, _COMPOUND) and node.end_lineno \
                and node.end_lineno > node.lineno:
            ends.setdefault(node.lineno, node.end_lineno)
    return ends


# a compound statement's line is its header: its body is not part of what that line did
_COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While, ast.With,
             ast.AsyncWith, ast.Try, ast.Match)



class SourceCache:
    """User files, a few kept (compiles of one model share its files); `out`: the report's
    directory, where each file's data is written the first time it is shown."""

    def __init__(self, out: Path | None = None, max_files: int = 16) -> None:
        # path -> [mtime and size, lines or None if unusable, its data file's name once written]
        self._files: OrderedDict[str, list] = OrderedDict()
        self._max = max_files
        self._out = out
        self.stamps: dict[str, list[int] | None] = {}  # every file looked at: [mtime, size] (None: not there)
        self._written: set[str] = set()  # data files this build wrote (one of an earlier build is written again)

    def _entry(self, path: str) -> list | None:
        try:
            if not path.endswith(".py") or not os.path.isfile(path):
                if path.endswith(".py") and len(self.stamps) < MAX_STAMPS:
                    self.stamps.setdefault(path, None)
                return None
            stat = os.stat(path)
        except (OSError, ValueError):
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        if len(self.stamps) < MAX_STAMPS:  # an incremental report checks them before taking up its state
            self.stamps[path] = [*stamp]
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
        entry = self._files[path] = [stamp, lines, None]
        if len(self._files) > self._max:
            self._files.popitem(last=False)
        return entry

    def get(self, path: str, quoted: dict[int, str], wanted: set[int], windows: bool = False) -> SourceFile:
        """`quoted`: line -> text the log quotes; `wanted`: lines that produced ops (kept visible);
        `windows`: only the lines around `wanted`, whatever the file's length (a Dynamo graph's page: its
        lines in a model file of thousands, not the file)."""
        entry = self._entry(path)
        disk = entry[1] if entry is not None else None
        if disk is not None and _matches(disk, quoted):
            if entry[2] is None:
                entry[2] = self._write(disk)
            if len(disk) <= FULL_FILE_LINES and not windows:  # the whole file
                return SourceFile(path, True, [(1, len(disk))], asset=entry[2])
            shown = sorted({n for line in wanted for n in range(line - CONTEXT, line + CONTEXT + 1)
                            if 0 < n <= len(disk)})
            return SourceFile(path, True, _ranges(shown), asset=entry[2])
        numbers = sorted(quoted)
        return SourceFile(path, False, _ranges(numbers),
                          data={"n": numbers, "l": [quoted[n] for n in numbers]})

    def statement(self, path: str, line: int, text: str) -> str | None:
        """The whole statement that begins at `line` where it spans more lines (a failure's line is only the
        first: `assert t <= self.config.block_size, (`), if the file on disk still has `text` there; at most
        MAX_STATEMENT lines. None: one line, or not known."""
        entry = self._entry(path)
        disk = entry[1] if entry is not None else None
        if disk is None or not 0 < line <= len(disk) or disk[line - 1].strip() != text.strip():
            return None
        end = _statement_ends(path, tuple(disk)).get(line)
        if end is None or end <= line:
            return None
        shown = disk[line - 1:min(end, line + MAX_STATEMENT - 1)]
        indent = min(len(x) - len(x.lstrip()) for x in shown if x.strip())
        return "\n".join(x[indent:] for x in shown) + ("\n…" if end > line + MAX_STATEMENT - 1 else "")

    def _write(self, lines: list[str]) -> str:
        """The file's data file ({"l": its lines}), written once per build (an incremental report
        deletes at its end what an earlier build wrote that this one did not): its name."""
        body = json_bytes({"l": lines})
        name = hashlib.blake2b(body, digest_size=10).hexdigest()
        if self._out is not None:
            target = self._out / ASSET_DIR / f"{name}.js"
            if name not in self._written:  # a worker process may write it too: the same bytes, replaced whole
                self._written.add(name)
                target.parent.mkdir(parents=True, exist_ok=True)
                write_whole(target, b'(self.thunderTraceSrc = self.thunderTraceSrc || {})["%s"] = %s;\n'
                            % (name.encode(), body))
        return name


def trivial(text: str) -> bool:
    """Whether a quoted line proves little about a file: short, or boilerplate a log could guess."""
    text = text.strip()
    return len(text) < MIN_TEXT or _TRIVIAL.match(text) is not None


def _matches(disk: list[str], quoted: dict[int, str]) -> bool:
    """Whether the file on disk is, beyond doubt, the one the log quotes: at least MIN_QUOTED
    distinct non-trivial quoted lines, and every quoted line the disk's line at its number (a
    frame without text proves nothing: it matches only a blank line). A log can make the report
    show a local file only by quoting a good part of it right."""
    if len({text.strip() for text in quoted.values() if not trivial(text)}) < MIN_QUOTED:
        return False
    return all(0 < line <= len(disk) and disk[line - 1].strip() == text.strip() for line, text in quoted.items())


def _ranges(numbers: list[int]) -> list[tuple[int, int]]:
    """Ascending line numbers as runs of consecutive ones."""
    runs: list[tuple[int, int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return runs
