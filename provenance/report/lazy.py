"""Traces the compile page's script renders when they are opened (report.js), sent as compact
data instead of HTML: a compile's traces repeat most of their lines pass after pass, so each
distinct line is sent once per page (a `tl` script: the lines new to the page, in order) and a
trace is the runs of line numbers it is made of, its ops (`[first line, lines, record id]`) and
Thunder's `# file:line:` comment lines. Every string goes into JSON (html.json_script) and the
script inserts it with textContent: nothing from a log becomes markup.
"""

from __future__ import annotations

from provenance.annotation import THUNDER_SOURCE_COMMENT
from provenance.report.html import json_script
from provenance.report.model import TraceView

__all__ = ["LineTable", "lazy_trace"]


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


def lazy_trace(view: TraceView, table: LineTable) -> tuple[str, str]:
    """The lines the page has not had yet (a `tl` script, or ""), and the trace itself: an empty
    `pre` and its data (a `td` script), what the page renders when the trace is opened."""
    runs, new = table.add(view.lines)
    ops: list[int | None] = []
    for line, n, _sym, _outs, prov in view.ops:
        ops += (line, n, prov)
    tsc = [i for i, line in enumerate(view.lines) if ": \t" in line and THUNDER_SOURCE_COMMENT.match(line)]
    lines = f'<script type="application/json" class="tl">{json_script(new)}</script>' if new else ""
    data = json_script({"l": runs, "o": ops, "t": tsc})
    return lines, f'<pre class="code lazy"></pre><script type="application/json" class="td">{data}</script>'
