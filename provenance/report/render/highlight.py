"""Syntax highlighting of user source files with pygments (PythonLexer), once per file per
report: one HTML string per line, or as tokens (`python_tokens`) for the pages' script to build
with text nodes (a user file is sent once per report, as data: source_files.py). Thunder's
traces are not highlighted here: the pages' script does it when it renders them (report.js,
highlightInto), from data (trace_data.py).
"""

from __future__ import annotations

import html
import re
from functools import cache
from typing import Any

from markupsafe import escape

__all__ = ["MAX_LINE", "python_lines", "python_tokens", "style_css"]

MAX_LINE = 20_000  # characters: longer lines are shown as plain text (report.js: MAX_LINE)


@cache
def _pygments() -> tuple[Any, Any, Any]:
    """pygments' highlight, its HTML formatter and Python lexer: imported when a first file is
    highlighted, not by every process that imports the report (pygments' lexer tables are large)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    return highlight, HtmlFormatter(nowrap=True), PythonLexer(stripnl=False, ensurenl=True)


def python_lines(lines: list[str]) -> list[str]:
    """User source (real Python) as HTML lines (pygments spans, closed on every line). Lexed
    together, so multi-line constructs stay right; if pygments would change the line count (a
    stray carriage return), the lines are only escaped. A line longer than MAX_LINE is only
    escaped (no real source line is that long; PythonLexer lexes about 1 MB/s)."""
    if not lines:
        return []
    long = [i for i, line in enumerate(lines) if len(line) > MAX_LINE]
    lexed = lines
    if long:
        lexed = list(lines)
        for i in long:
            lexed[i] = ""
    highlight, formatter, lexer = _pygments()
    out = highlight("\n".join(lexed), lexer, formatter).split("\n")
    if out and out[-1] == "":
        out.pop()
    if len(out) != len(lines):
        return [str(escape(line)) for line in lines]
    for i in long:
        out[i] = str(escape(lines[i]))
    return out


# pygments' nowrap HTML: spans of one class (never nested, closed on every line) and escaped text
_TOKEN = re.compile(r'<span class="([^"<>]*)">([^<]*)</span>|([^<]+)')


def python_tokens(lines: list[str]) -> dict[str, list]:
    """python_lines as compact data for the pages' script (report.js: sourceRow), which builds
    the elements the HTML would be with textContent: `{"c": [class, ...], "l": lines}`, a line
    its text if nothing in it is coloured, else [text, [plain, class, length, ...]]: per coloured
    token, the length of the plain text before it, its class (an index into "c") and its length,
    in UTF-16 units (a JS string's). A token of a class the style does not colour (names,
    punctuation: most tokens) or of whitespace is plain text: it looks the same, and the data
    is about the size of the file."""
    classes: dict[str, int] = {}
    styled = _styled()
    out: list = []
    for line in python_lines(lines):
        text: list[str] = []
        runs: list[int] = []
        plain = 0
        for m in _TOKEN.finditer(line):
            cls, part = ("", m.group(3)) if m.group(3) is not None else (m.group(1), m.group(2))
            part = html.unescape(part)
            text.append(part)
            size = len(part.encode("utf-16-le")) // 2 if not part.isascii() else len(part)
            if cls in styled:
                runs += (plain, classes.setdefault(cls, len(classes)), size)
                plain = 0
            else:
                plain += size
        out.append(["".join(text), runs] if runs else "".join(text))
    return {"c": list(classes), "l": out}


@cache
def style_css(selector: str = ".code") -> str:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style="default").get_style_defs(selector)


@cache
def _styled() -> frozenset[str]:
    """The token classes the style colours (a rule with a declaration), whitespace's colour aside."""
    return frozenset(re.findall(r"^\.x \.(\S+) \{ *[^ }]", style_css(".x"), re.M)) - {"w"}
