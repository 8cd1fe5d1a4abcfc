"""Traces the compile page's script renders when they are opened (report.js), sent as compact
data instead of HTML: a compile's traces repeat most of their lines pass after pass, so each
distinct line is sent once per page (a `tl` script: the lines new to the page, in order) and a
trace is the runs of line numbers it is made of, its ops (`[first line, lines, record id]`) and
Thunder's `# file:line:` comment lines. Every string goes into JSON (html.json_script) and the
script inserts it with textContent: nothing from a log becomes markup.

A final trace is written as HTML instead (output.CompileWriter); the lines it brought that no
other trace uses are then sent as 0 (the numbering stays).
"""

from __future__ import annotations

from typing import NamedTuple

from provenance.annotation import THUNDER_SOURCE_COMMENT
from provenance.report.html import json_script
from provenance.report.model import TraceView

__all__ = ["LazyTrace", "LineTable", "lazy_trace", "lines_script"]


class LineTable:
    """A page's distinct trace lines, numbered in the order they were first sent (one compile:
    it holds what that compile's traces hold, once)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def add(self, lines: list[str]) -> tuple[list[int], list[str]]:
        """The lines' numbers as runs (`[first, count, first, count, ...]`) and the lines new to the page."""
        ids, new, runs = self.ids, [], []
        for line in lines:
            i = ids.get(line)
            if i is None:
                i = ids[line] = len(ids)
                new.append(line)
            if runs and runs[-2] + runs[-1] == i:
                runs[-1] += 1
            else:
                runs += (i, 1)
        return runs, new

    def __len__(self) -> int:
        return len(self.ids)


class LazyTrace(NamedTuple):
    first: int  # the number of the first line new to the page
    new: list[str]  # the lines new to the page
    runs: list[int]  # the trace's lines: [first, count, ...]
    data: str  # an empty `pre` and its data (a `td` script)


def lines_script(lines: list[str | int]) -> str:
    """The lines new to the page, as the script reads them (0: a line no rendered trace needs)."""
    return f'<script type="application/json" class="tl">{json_script(lines)}</script>' if lines else ""


def lazy_trace(view: TraceView, table: LineTable) -> LazyTrace:
    """A trace as the page's script renders it when opened."""
    first = len(table)
    runs, new = table.add(view.lines)
    ops: list[int | None] = []
    for line, n, _sym, _outs, prov in view.ops:
        ops += (line, n, prov)
    tsc = [i for i, line in enumerate(view.lines) if ": \t" in line and THUNDER_SOURCE_COMMENT.match(line)]
    data = json_script({"l": runs, "o": ops, "t": tsc})
    return LazyTrace(first, new, runs,
                     f'<pre class="code lazy"></pre><script type="application/json" class="td">{data}</script>')
