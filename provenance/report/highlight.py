"""Syntax highlighting with pygments, one HTML string per source line.

Thunder's generated traces are most of a log's bytes, and pygments' PythonLexer (a RegexLexer
trying its rules one by one at every position) runs at well under 1 MB/s: `TraceLexer` is a
pygments lexer for the small subset of Python that Thunder prints, matching one combined regex
with C-speed `finditer`, and leaving names and punctuation as plain text runs so the formatter
emits few spans. Consecutive passes repeat most lines, so `LineHighlighter` lexes each distinct
line once (per compile) and the HTML formatter's per-line output is reused. User source files,
real Python, are highlighted with PythonLexer, once per file per report.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterator

from markupsafe import escape
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import PythonLexer
from pygments.token import Comment, Keyword, Name, String, Text, _TokenType

__all__ = ["LineHighlighter", "TraceLexer", "highlight_lines", "style_css"]

# Only what gets a color is matched; the text between matches is one plain token, so the Python
# loop runs a few times per line rather than once per name and comma. The leading lookahead lets
# the regex engine skip most positions at once; keywords are a prefix trie (re has none). Linear
# on any input: repetitions are possessive, and a string runs to its closing quote or to the end
# of its line (an unterminated string is one token, not a match tried again at every quote).
def _trie(words: list[str]) -> str:
    heads: dict[str, list[str]] = {}
    for word in words:
        heads.setdefault(word[0], []).append(word[1:])
    parts = []
    for head, tails in sorted(heads.items()):
        rest = [t for t in tails if t]
        parts.append(re.escape(head) + (f"(?:{_trie(rest)})" + ("?" if "" in tails else "") if rest else ""))
    return "|".join(parts)


_TOKEN = re.compile(rf"""(?=[\#"'@A-Za-z_])(?:
  (?P<comment>\#[^\n]*)
| (?P<string>(?<![\w.])[rbuf]{{0,2}}(?:"(?:[^"\\\n]|\\.?)*+(?:"|$)|'(?:[^'\\\n]|\\.?)*+(?:'|$)))
| (?P<decorator>^@[\w.]+)
| (?P<keyword>\b(?:{_trie(keyword.kwlist)})\b)
| (?P<call>(?<![\w.])[A-Za-z_][\w.]*+(?=\())
)""", re.X | re.M)

_KINDS: dict[str, _TokenType] = {"comment": Comment.Single, "string": String, "decorator": Name.Decorator,
                                 "keyword": Keyword, "call": Name.Function}


class TraceLexer(Lexer):
    """Thunder's printed traces: comments, strings, keywords, calls, decorators; the rest plain."""

    name = "Thunder trace"
    aliases = ["thunder-trace"]

    def get_tokens_unprocessed(self, text: str) -> Iterator[tuple[int, _TokenType, str]]:
        plain = 0  # where the current run of plain text started
        for match in _TOKEN.finditer(text):
            start = match.start()
            if start > plain:
                yield plain, Text, text[plain:start]
            yield start, _KINDS[match.lastgroup], match.group()
            plain = match.end()
        if plain < len(text):
            yield plain, Text, text[plain:]


MAX_LINE = 20_000  # characters: longer lines are shown as plain text
_FORMATTER = HtmlFormatter(nowrap=True)
_TRACE_LEXER = TraceLexer(stripnl=False, ensurenl=True)
_PYTHON_LEXER = PythonLexer(stripnl=False, ensurenl=True)


def highlight_lines(lines: list[str], lexer: Lexer = _TRACE_LEXER) -> list[str]:
    """Each line as HTML (pygments spans, closed on every line). Lexed together, so multi-line
    constructs stay right; if pygments would change the line count (a stray carriage return),
    the lines are only escaped. A line longer than MAX_LINE is only escaped (no real trace or
    source line is that long; pygments' PythonLexer lexes about 1 MB/s)."""
    if not lines:
        return []
    long = [i for i, line in enumerate(lines) if len(line) > MAX_LINE]
    lexed = lines
    if long:
        lexed = list(lines)
        for i in long:
            lexed[i] = ""
    out = highlight("\n".join(lexed), lexer, _FORMATTER).split("\n")
    if out and out[-1] == "":
        out.pop()
    if len(out) != len(lines):
        return [str(escape(line)) for line in lines]
    for i in long:
        out[i] = str(escape(lines[i]))
    return out


# Lines are looked up by their template: the line's bytes with every digit turned into this
# letter (to the lexer a digit and a letter are both word characters: the tokens stay the same).
_HOLE = b"Z"
_TO_HOLES = bytes.maketrans(b"0123456789", _HOLE * 10)
_NOT_DIGITS = bytes(b for b in range(256) if not 48 <= b <= 57)
_NOT_DIGITS_NL = _NOT_DIGITS.replace(b"\n", b"")  # keeps the newlines that separate joined lines
MAX_TEMPLATES = 50_000


def _format(html: str) -> tuple[str, int]:
    """A template's HTML as a %-format taking its digits as code points (`%c` of the ints a
    bytes object iterates as: no str made per digit), and how many it takes."""
    hole = _HOLE.decode()
    return html.replace("%", "%%").replace(hole, "%c"), html.count(hole)


class LineHighlighter:
    """Highlights trace lines, lexing few of them.

    Traces repeat lines across passes, and lines repeat up to their numbers (`t1301 = torch.mul(
    t1300, t1300)  # t1301: "cpu f32[2, 16]"`): each line is looked up by itself (one compile's
    lines, until `clear()`), then by its template (digits replaced by a letter): a template is
    lexed once and its HTML filled in with each line's digits. A line that contains the letter
    itself shows it by a count mismatch and is highlighted on its own. Templates are few and
    kept across compiles, up to MAX_TEMPLATES.
    """

    def __init__(self) -> None:
        self._lines: dict[str, str] = {"": ""}
        self._templates: dict[bytes, tuple[str, int]] = {}

    def lines(self, lines: list[str]) -> list[str]:
        cache, templates = self._lines, self._templates
        new = [line for line in dict.fromkeys(lines) if line not in cache]
        if new:
            # Every new line at once: one encode and two translations of their joined text.
            joined = "\n".join(new).encode("utf-8", "surrogatepass")
            keys = joined.translate(_TO_HOLES).split(b"\n")
            digit_runs = joined.translate(None, _NOT_DIGITS_NL).split(b"\n")
            if len(keys) != len(new):  # a line with a newline in it (not from a split text)
                keys = [line.encode("utf-8", "surrogatepass").translate(_TO_HOLES) for line in new]
                digit_runs = [line.encode("utf-8", "surrogatepass").translate(None, _NOT_DIGITS) for line in new]
            todo = [k for k in dict.fromkeys(keys) if k not in templates]
            if todo:
                if len(templates) + len(todo) > MAX_TEMPLATES:
                    templates.clear()
                texts = [k.decode("utf-8", "surrogatepass") for k in todo]
                templates.update(zip(todo, map(_format, highlight_lines(texts))))
            exact = []
            for line, key, digits in zip(new, keys, digit_runs):
                template, holes = templates[key]
                if holes == len(digits):
                    cache[line] = template % tuple(digits) if holes else template
                else:
                    exact.append(line)
            if exact:
                cache.update(zip(exact, highlight_lines(exact)))
        return [cache[line] for line in lines]

    def clear(self) -> None:
        self._lines = {"": ""}


def python_lines(lines: list[str]) -> list[str]:
    """User source (real Python) as HTML lines, with pygments' PythonLexer."""
    return highlight_lines(lines, _PYTHON_LEXER)


def style_css(selector: str = ".code") -> str:
    return HtmlFormatter(style="default").get_style_defs(selector)
