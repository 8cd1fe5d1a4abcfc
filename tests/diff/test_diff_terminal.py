"""`thunder-trace diff`'s terminal summary shows what the logs say, never raw control characters."""

from __future__ import annotations

import io

import report_logs

from provenance.diff.compare import compare
from provenance.diff.read import read_side
from provenance.diff.render import terminal, view

HOSTILE = "y = x * 2\x1b[2J\x1b]0;pwned\x07\r\x08"  # clear the screen, set the title, bell, CR, BS
FN = "report_model.\x1b[31mModel"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:  # the rich tables' path
        return True


def test_control_characters_from_the_logs_are_escaped_on_the_terminal(tmp_path):
    a = report_logs.write(tmp_path / "a" / "a.jsonl", report_logs.profiled(text_mul=HOSTILE, fn=FN, calls=5))
    b = report_logs.write(tmp_path / "\x1b[1mb" / "a.jsonl", report_logs.profiled(
        text_mul=HOSTILE, fn=FN, calls=5, forward=(30_000_000, 1_000_000, 20_000)))
    data = view(compare(read_side(str(a.parent)), read_side(str(b.parent))), [], [], reports=False)
    assert any("pwned" in c["title"] for c in data["changes"])  # the line's text is in a change's title
    plain = io.StringIO()
    terminal(data, plain, everything=True)
    text = plain.getvalue()
    assert "\\x1b]0;pwned\\x07\\r\\x08" in text and "\\x1b[1mb" in text and "\\x1b[31mModel" in text
    assert not any(c in text for c in "\x1b\x07\r\x08")
    tty = _Terminal()
    terminal(data, tty, everything=True)
    text = tty.getvalue()  # rich's own styling is escape sequences: none of the log's
    assert "pwned" in text
    assert all(raw not in text for raw in ("\x1b]0;", "\x07", "\x1b[2J", "\x08", "\r", "\x1b[1mb", "\x1b[31mM"))
