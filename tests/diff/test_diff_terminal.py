"""`thunder-trace diff`'s terminal summary shows what the logs say, never raw control characters."""

from __future__ import annotations

import io

import report_logs

from provenance.diff.compare import compare
from provenance.diff.read import read_side
from provenance.diff.render import terminal, view
from provenance.report.render.output import MARKER_FILE

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


def test_a_diff_whose_second_side_is_bad_leaves_nothing_in_out(tmp_path, capsys):
    """B has no readable log: exit 2, and OUT holds no report of A (made by this run: gone; given,
    holding a file of the user's: that file alone)."""
    from provenance.cli import main

    a = report_logs.write(tmp_path / "a" / "a.jsonl", report_logs.profiled())
    bad = tmp_path / "b"
    bad.mkdir()
    (bad / "b.jsonl").write_text("not a log\n")
    out = tmp_path / "out"
    assert main(["diff", str(a.parent), str(bad), "-o", str(out)]) == 2
    assert "error" in capsys.readouterr().err and not out.exists()
    out.mkdir()
    assert main(["diff", str(a.parent), str(bad), "-o", str(out)]) == 2
    assert [p.name for p in out.iterdir()] == [MARKER_FILE]  # it is ours now: --overwrite may reuse it
