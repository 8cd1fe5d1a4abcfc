"""Syntax highlighting of user source files with pygments (PythonLexer), one HTML string per
line, once per file per report. Thunder's traces are not highlighted here: the pages' script
does it when it renders them (report.js, highlightInto), from data (trace_data.py).
"""

from __future__ import annotations

from markupsafe import escape
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

__all__ = ["MAX_LINE", "python_lines", "style_css"]

MAX_LINE = 20_000  # characters: longer lines are shown as plain text (report.js: MAX_LINE)
_FORMATTER = HtmlFormatter(nowrap=True)
_PYTHON_LEXER = PythonLexer(stripnl=False, ensurenl=True)


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
    out = highlight("\n".join(lexed), _PYTHON_LEXER, _FORMATTER).split("\n")
    if out and out[-1] == "":
        out.pop()
    if len(out) != len(lines):
        return [str(escape(line)) for line in lines]
    for i in long:
        out[i] = str(escape(lines[i]))
    return out


def style_css(selector: str = ".code") -> str:
    return HtmlFormatter(style="default").get_style_defs(selector)
