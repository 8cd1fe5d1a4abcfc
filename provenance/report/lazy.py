"""Traces as the pages' script renders them (report.js: renderTrace), sent as compact data
instead of HTML: a compile's traces repeat most of their lines pass after pass, so each distinct
line is sent once per page (a `tl` script: the lines new to the page, in order) and a trace is
the runs of line numbers it is made of, its ops (`[first line, lines, record id]`) and, when
profiled, its ops' times. Every string goes into JSON (html.json_script) and the script inserts
it with textContent: nothing from a log becomes markup.

Every trace is sent so, the final ones too: the compile page renders those when it loads, the
source page its panes (the same traces). Highlighting, provenance headers and op borders are
the script's work; the report's is reading the log.
"""

from __future__ import annotations

from operator import sub
from typing import NamedTuple

from provenance.report.html import json_bytes
from provenance.report.model import TraceView

__all__ = ["LazyTrace", "LineTable", "lazy_trace"]


class LineTable:
    """A page's distinct trace lines, numbered in the order they were first sent (one compile:
    it holds what that compile's traces hold, once)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def add(self, lines: list[str]) -> tuple[list[int], list[str]]:
        """The lines' numbers as runs (`[first, count, first, count, ...]`) and the lines new to the page."""
        ids = self.ids
        first = len(ids)
        setdefault = ids.setdefault
        numbers = [setdefault(line, len(ids)) for line in lines]  # len() before the insertion: the new number
        new = list(dict.fromkeys(line for line, i in zip(lines, numbers) if i >= first)) if len(ids) > first else []
        # runs of consecutive numbers, from where the step is not 1 (C loops: traces have thousands of lines)
        starts = [0, *(i for i, step in enumerate(map(sub, numbers[1:], numbers), 1) if step != 1)]
        runs: list[int] = []
        for start, stop in zip(starts, [*starts[1:], len(numbers)]):
            if stop > start:
                runs += (numbers[start], stop - start)
        return runs, new

    def __len__(self) -> int:
        return len(self.ids)


class LazyTrace(NamedTuple):
    new: list[str]  # the lines new to the page
    data: bytes  # the trace, as JSON for its `td` script

    def html(self, pre: str = 'class="code lazy"') -> bytes:
        """The lines it brings (a `tl` script), an empty `pre` (with these attributes) and its
        data, as UTF-8: pages are written as bytes, and a trace's data is most of one."""
        lines = b'<script type="application/json" class="tl">%s</script>' % json_bytes(self.new) if self.new else b""
        return b'%s<pre %s></pre><script type="application/json" class="td">%s</script>' % (
            lines, pre.encode(), self.data)


def lazy_trace(view: TraceView, table: LineTable) -> LazyTrace:
    """A trace as the page's script renders it."""
    runs, new = table.add(view.lines)
    ops: list[int | None] = []
    for line, n, _sym, _outs, prov in view.ops:
        ops += (line, n, prov)
    data: dict = {"l": runs, "o": ops}
    if view.times:  # a profiled final trace: [op index, heat, time per call, ...] (timing.py: our text)
        data["c"] = [x for i, t in sorted(view.times.items()) for x in (i, t.heat, t.label)]
    return LazyTrace(new, json_bytes(data))
