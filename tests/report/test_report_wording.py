"""Issue 13's smaller items: counts in words ("1 recompile"), a function's cache hits shown once,
no process label in a one-process run, `--version`.

Hand-written logs (tests/support/report_logs.py), the command run in-process: no Thunder, no browser.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
import report_logs

from provenance._version import __version__
from provenance.report.cli import main
from provenance.report.plural import plural


def report(capsys, *args) -> tuple[int, str]:
    code = main(["report", *map(str, args), "--no-browser"])
    return code, capsys.readouterr().err


def test_plural():
    assert plural(1, "recompile") == "1 recompile"
    assert plural(0, "recompile") == "0 recompiles"
    assert plural(2, "cache hit") == "2 cache hits"
    assert plural(1, "compile differs", "compiles differ") == "1 compile differs"
    assert plural(3, "compile differs", "compiles differ") == "3 compiles differ"


def _recompiled_log(tmp_path: Path) -> Path:
    """One process without a rank: compile 1 and its recompile 2 of the same function, 1 call and
    1 cache hit of it in all (the calls record), 0 hits and 1 call at the end of compile 1."""
    first = report_logs.records()
    second = [dict(r) for r in report_logs.records(compile_id=2)
              if r["type"] in ("compile_start", "trace", "compile_end")]
    second[0]["index"] = 1
    calls = first.pop()
    assert calls["type"] == "calls"
    calls.update(compiles=[1, 2], calls=3, cache_hits=1, cache_misses=2)
    return report_logs.write(tmp_path / "log.jsonl", [*first, *second, calls])


def test_counts_read_in_the_singular_and_hits_show_once_per_function(tmp_path, capsys):
    out = tmp_path / "out"
    code, err = report(capsys, _recompiled_log(tmp_path), "-o", out)
    assert code == 0, err
    assert "2 compiles (0 failed) from 1 log" in err
    index = (out / "index.html").read_text()
    assert "1 recompile<" in index and "1 recompiles" not in index
    assert "3 calls &middot; 1 cache hit<" in index and "1 cache hits" not in index
    entries = orjson.loads((out / "compile_directory.json").read_bytes())["compiles"]
    pages = {e["compile"]: (out / e["pages"]["compile"]).read_text() for e in entries}
    # the function's hit, once: on its first compile's row and call-site chip, not on its recompile's
    # (a compile's page, written when it ends, shows the cache counts of that moment)
    rows = re.findall(r"<tr>.*?</tr>", index.split("<h2>Compiles</h2>")[1].split("<tbody>")[1], re.S)
    assert [row.count('class="badge s-hit"') for row in rows] == [1, 0]
    assert index.split("<h2>Call sites</h2>")[1].split("<h2>Compiles</h2>")[0].count("1 hit<") == 1
    assert 'title="cache hits of report_model.Model, all its 2 compiles (3 calls)">1 cache hit<' in rows[0]
    assert "0 hits &middot; 1 call at the end of this compile" in pages[1]


def test_a_one_process_run_names_no_process(tmp_path, capsys):
    out = tmp_path / "out"
    code, err = report(capsys, _recompiled_log(tmp_path), "-o", out)
    assert code == 0, err
    index = (out / "index.html").read_text()
    assert "<th>rank</th>" not in index.split("<h2>Compiles</h2>")[1]
    assert "1 log,\n" in index  # no "(process 4242)" after it
    for page in (out / "compiles").glob("*.html"):
        text = page.read_text()
        assert "process 4242" not in text, page.name
        assert "<title>compile " in text or "<title>source &middot; compile " in text, page.name
    # the Run table still says which process wrote the log, and the Perfetto track is named
    assert index.count("process 4242") == 1
    assert "process 4242" in (out / "perfetto_trace.json").read_text()


def test_two_ranks_keep_their_labels(tmp_path, capsys):
    logs = tmp_path / "logs"
    for rank in (0, 1):
        report_logs.write(logs / f"r{rank}.jsonl", report_logs.records(rank=rank))
    out = tmp_path / "out"
    code, err = report(capsys, logs, "-o", out)
    assert code == 0, err
    index = (out / "index.html").read_text()
    assert "2 logs (rank 0, rank 1)" in index and "<th>rank</th>" in index.split("<h2>Compiles</h2>")[1]
    # each rank's function compiled once: its hits on that compile, no "all its 1 compile"
    assert index.count('title="cache hits of report_model.Model (3 calls)">2 cache hits<') == 2
    pages = [p.read_text() for p in (out / "compiles").glob("*.html") if "source" not in p.name]
    assert sorted(re.search(r"<title>(rank \d) &middot; compile 1", p).group(1) for p in pages) == ["rank 0", "rank 1"]


@pytest.mark.parametrize("argv", [["--version"], ["report", "--version"]])
def test_version(capsys, argv):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"thunder-trace {__version__}"
