"""Traces as the pages' script renders them (report.js: renderTrace), sent as compact data
instead of HTML: a compile's traces repeat most of their lines pass after pass, so each distinct
line is sent once per page (a `tl` script: the lines new to the page, in order) and a trace is
the numbers of its lines, its ops (`[first line, lines, record id]`), the ops its fusions fused
and, when profiled, its ops' times. Every string goes into JSON (jsonsafe.py) and the script inserts
it with textContent: nothing from a log becomes markup.

Every trace is sent so, the final ones too: the compile page renders those when it loads, the
source page its panes (the same traces). Highlighting, provenance headers and op borders are
the script's work; the report's is reading the log.
"""

from __future__ import annotations

from itertools import chain
from operator import itemgetter
from typing import NamedTuple

from provenance.report.model import LINE, PROV, N, TraceView
from provenance.report.render.jsonsafe import json_bytes

__all__ = ["LazyTrace", "LineTable", "lazy_trace", "renumbered"]

_LINE_N_PROV = itemgetter(LINE, N, PROV)  # of an Op


class LineTable:
    """A page's distinct trace lines, numbered in the order they were first sent (one compile:
    it holds what that compile's traces hold, once)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def add(self, lines: list[str]) -> tuple[list[int], list[str]]:
        """The lines' numbers and the lines new to the page (in the order of their numbers)."""
        ids = self.ids
        first = len(ids)
        new = [line for line in dict.fromkeys(lines) if line not in ids]  # C loops but for the distinct lines
        if new:
            ids.update(zip(new, range(first, first + len(new))))
        return list(map(ids.__getitem__, lines)), new


class LazyTrace(NamedTuple):
    new: list[str]  # the lines new to the page
    numbers: list[int]  # the trace's lines, by their numbers in the page's table
    data: bytes  # the trace, as JSON for its `td` script

    def html(self, pre: str = 'class="code lazy"') -> bytes:
        """The lines it brings (a `tl` script), an empty `pre` (with these attributes) and its
        data, as UTF-8: pages are written as bytes, and a trace's data is most of one."""
        lines = b'<script type="application/json" class="tl">%s</script>' % json_bytes(self.new) if self.new else b""
        return b'%s<pre %s></pre><script type="application/json" class="td">%s</script>' % (
            lines, pre.encode(), self.data)


def _data(view: TraceView, numbers: list[int]) -> bytes:
    data: dict = {"l": numbers, "o": list(chain.from_iterable(map(_LINE_N_PROV, view.ops)))}
    if view.times:  # a profiled final trace: [op index, heat, time per call, ...] (analyze/cost.py: our text)
        data["c"] = [x for i, t in sorted(view.times.items()) for x in (i, t.heat, t.label)]
        spreads = [x for i, t in sorted(view.times.items()) if t.spread for x in (i, t.spread)]
        if spreads:  # [op index, its spread across the calls, ...]: the click panel shows it
            data["s"] = spreads
    if view.fused:  # [fusion's op index, text, record id, ...]: the ops each fusion fused, in order
        data["f"] = list(chain.from_iterable(view.fused))
    return json_bytes(data)


def lazy_trace(view: TraceView, table: LineTable) -> LazyTrace:
    """A trace as the page's script renders it."""
    numbers, new = table.add(view.lines)
    return LazyTrace(new, numbers, _data(view, numbers))


def renumbered(table: LineTable, traces: list[tuple[TraceView, LazyTrace]]) -> list[LazyTrace]:
    """Traces already sent to a page (numbered in its `table`), for a page of their own (the
    source view's panes): its line table is the lines they use, which the first brings. Their
    numbers are mapped, not their lines hashed again."""
    lines = list(table.ids)  # by number
    order = list(dict.fromkeys(chain.from_iterable(lazy.numbers for _, lazy in traces)))
    number = dict(zip(order, range(len(order))))
    out = []
    for k, (view, lazy) in enumerate(traces):
        numbers = list(map(number.__getitem__, lazy.numbers))
        out.append(LazyTrace(list(map(lines.__getitem__, order)) if k == 0 else [], numbers, _data(view, numbers)))
    return out
