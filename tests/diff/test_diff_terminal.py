"""`thunder-trace diff`'s terminal summary shows what the logs say, never raw control characters."""

from __future__ import annotations

import io

import report_logs

from provenance.diff.compare import compare
from provenance.diff.read import read_side
from provenance.diff.render import html, terminal, view
from provenance.report.render.output import MARKER_FILE

HOSTILE = "y = x * 2\x1b[2J\x1b]0;pwned\x07\r\x08"  # clear the screen, set the title, bell, CR, BS
FN = "report_model.\x1b[31mModel"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:  # the rich tables' path
        return True


def test_control_characters_from_the_logs_are_escaped_on_the_terminal(tmp_path):
    a = report_logs.write(tmp_path / "a" / "a.jsonl", report_logs.profiled(text_mul=HOSTILE, fn=FN, calls=10))
    b = report_logs.write(tmp_path / "\x1b[1mb" / "a.jsonl", report_logs.profiled(
        text_mul=HOSTILE, fn=FN, calls=10, forward=(30_000_000, 1_000_000, 20_000)))  # 10 calls: a change can show
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


def test_too_few_calls_to_tell_a_change_from_noise_is_said(tmp_path):
    """Three profiled calls a side (enough to see where the time goes) cannot show a significant run-time
    change, however large: the diff says so, and what to profile, instead of calling it noise silently."""
    a = report_logs.write(tmp_path / "a" / "a.jsonl", report_logs.profiled(calls=3))
    b = report_logs.write(tmp_path / "b" / "a.jsonl", report_logs.profiled(calls=3, forward=(30_000_000, 1_000_000,
                                                                                           20_000)))
    diff = compare(read_side(str(a.parent)), read_side(str(b.parent)))
    assert not [c for c in diff.significant if c.metric == "run_time"]
    assert [c for c in diff.changes if c.metric == "run_time" and c.after > 5 * c.before]  # compared, not judged
    assert len(diff.notes) == 2 and all("3 measured calls a side" in n for n in diff.notes), diff.notes
    assert "THUNDER_TRACE_PROFILE=5," in diff.notes[0]  # the whole call: one figure a compile
    plain = io.StringIO()
    terminal(view(diff), plain)
    assert plain.getvalue().count("note: ") == 2
    (tmp_path / "page").mkdir()
    page = html(view(diff), tmp_path / "page").read_text()
    assert page.count("<li>a ") == 2 and "THUNDER_TRACE_PROFILE=5," in page  # the page says it too
    ten = [report_logs.write(tmp_path / name / "a.jsonl", report_logs.profiled(calls=10, **kw))
           for name, kw in (("a10", {}), ("b10", {"forward": (30_000_000, 1_000_000, 20_000)}))]
    diff = compare(*(read_side(str(log.parent)) for log in ten))  # ten calls a side: judged, and a change
    assert diff.notes == [] and [c for c in diff.significant if c.metric == "run_time"]


def test_extreme_logged_times_are_ranked_not_a_crash(tmp_path):
    """The rank test and its family take the logs' times as they are: ops at 2**61 ns a call against
    none (sums past 2**63) are a change; a side against itself, every call tied, is none."""
    big = 2**61
    a = report_logs.write(tmp_path / "a" / "a.jsonl", report_logs.profiled(calls=10, forward=(big, big, big)))
    b = report_logs.write(tmp_path / "b" / "a.jsonl", report_logs.profiled(calls=10, forward=(0, 0, 0)))
    diff = compare(read_side(str(a.parent)), read_side(str(b.parent)))
    assert "run time per call (forward + backward)" in [c.title for c in diff.significant] and diff.notes == []
    same = compare(read_side(str(b.parent)), read_side(str(b.parent)))
    assert same.significant == [] and same.notes == []


def test_a_side_s_files_passed_over_are_its_problems(tmp_path):
    """A log directory's symbolic link is passed over (never followed): the side lists it as a problem,
    with or without a report written (the run's problems are its logs' and what came before them)."""
    import report_logs

    from provenance.diff.read import read_side

    logs = tmp_path / "logs"
    report_logs.write(logs / "a.jsonl", report_logs.records())
    (logs / "b.jsonl").symlink_to(logs / "a.jsonl")
    for out in (None, tmp_path / "out"):
        if out is not None:
            out.mkdir()
        side = read_side(str(logs), out)
        assert side.problems.counts["skipped file"] == 1, out
        assert any(p.category == "skipped file" and p.file == "b.jsonl" for p in side.problems.entries)
