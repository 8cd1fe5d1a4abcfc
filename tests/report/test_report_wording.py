"""Issue 13's smaller items: counts in words ("1 recompile"), cache hits shown per compile (issue 21;
a function's, once, for a log without them), no process label in a one-process run, `--version`.

Hand-written logs (tests/support/report_logs.py), the command run in-process: no Thunder, no browser.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
import report_logs

from provenance._version import __version__
from provenance.cli import main
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


def _recompiled_log(tmp_path: Path, compile_hits: list[int] | None = None) -> Path:
    """One process without a rank: compile 1 and its recompile 2 of the same function, 3 calls and
    1 cache hit of it in all (the calls record; `compile_hits`: each compile's, or none, as a log
    before schema 1.6), 0 hits and 1 call at the end of compile 1."""
    first = report_logs.records()
    second = [dict(r) for r in report_logs.records(compile_id=2)
              if r["type"] in ("compile_start", "trace", "compile_end")]
    second[0]["index"] = 1
    calls = first.pop()
    assert calls["type"] == "calls"
    calls.update(compiles=[1, 2], calls=3, cache_hits=1, cache_misses=2)
    calls.pop("compile_hits")
    if compile_hits is not None:
        calls["compile_hits"] = compile_hits
    return report_logs.write(tmp_path / "log.jsonl", [*first, *second, calls])


def _rows(index: str) -> list[str]:
    return re.findall(r"<tr>.*?</tr>", index.split("<h2>Compiles</h2>")[1].split("<tbody>")[1], re.S)


def _card(page: str) -> str:
    return page.split("<!--@@thunder-trace-report:cache@@-->")[1].split("<!--")[0]


def test_counts_read_in_the_singular_and_hits_show_per_compile(tmp_path, capsys):
    out = tmp_path / "out"
    code, err = report(capsys, _recompiled_log(tmp_path, compile_hits=[0, 1]), "-o", out)
    assert code == 0, err
    assert "2 compiles (0 failed) from 1 log" in err
    index = (out / "index.html").read_text()
    assert "1 recompile<" in index and "1 recompiles" not in index
    assert "3 calls &middot; 1 cache hit (all compiles)<" in index and "1 cache hits" not in index
    entries = orjson.loads((out / "compile_directory.json").read_bytes())["compiles"]
    assert [(e["compile_hits"], e["cache_hits"]) for e in entries] == [(0, 1), (1, 1)]
    pages = {e["compile"]: (out / e["pages"]["compile"]).read_text() for e in entries}
    # the recompile served the hit: its row and chip say so, the first compile's none
    rows = _rows(index)
    assert [row.count('class="badge s-hit"') for row in rows] == [0, 1]
    assert ">1 cache hit (this compile)<" in rows[1]
    assert "report_model.Model, all its 2 compiles: 1 hit of 3 calls" in rows[1]
    assert index.split("<h2>Call sites</h2>")[1].split("<h2>Compiles</h2>")[0].count("1 hit<") == 1
    # each page, written when its compile ended, has its own hits once the log's end is read
    assert '<div class="num">0</div><div>cache hits (this compile)</div>' in _card(pages[1])
    assert '<div class="num">1</div><div>cache hits (this compile)</div>' in _card(pages[2])
    assert "the function, all 2 compiles: 1 hit of 3 calls" in _card(pages[1])


def test_a_log_without_compile_hits_shows_the_functions_once(tmp_path, capsys):
    out = tmp_path / "out"
    code, err = report(capsys, _recompiled_log(tmp_path), "-o", out)
    assert code == 0, err
    index = (out / "index.html").read_text()
    entries = orjson.loads((out / "compile_directory.json").read_bytes())["compiles"]
    assert [(e["compile_hits"], e["cache_hits"]) for e in entries] == [(None, 1), (None, 1)]
    rows = _rows(index)
    assert [row.count('class="badge s-hit"') for row in rows] == [1, 0]
    assert ">1 cache hit (all 2 compiles of the function)<" in rows[0]
    assert index.split("<h2>Call sites</h2>")[1].split("<h2>Compiles</h2>")[0].count("1 hit (all compiles)<") == 1
    page = (out / entries[0]["pages"]["compile"]).read_text()
    assert "not in this log; the function, all 2 compiles: 1 hit of 3 calls" in _card(page)


def test_a_compile_page_without_a_calls_record_keeps_the_counts_of_its_end(tmp_path, capsys):
    records = [r for r in report_logs.records() if r["type"] != "calls"]  # the process was killed
    out = tmp_path / "out"
    code, err = report(capsys, report_logs.write(tmp_path / "log.jsonl", records), "-o", out)
    assert code == 0, err
    (entry,) = orjson.loads((out / "compile_directory.json").read_bytes())["compiles"]
    card = _card((out / entry["pages"]["compile"]).read_text())
    assert "cache misses" in card and "when this compile ended: 0 hits &middot; 1 call" in card


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
    assert index.count("report_model.Model: 2 hits of 3 calls\">2 cache hits (this compile)<") == 2
    pages = [p.read_text() for p in (out / "compiles").glob("*.html") if "source" not in p.name]
    assert sorted(re.search(r"<title>(rank \d) &middot; compile 1", p).group(1) for p in pages) == ["rank 0", "rank 1"]


@pytest.mark.parametrize("argv", [["--version"], ["report", "--version"]])
def test_version(capsys, argv):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"thunder-trace {__version__}"


def test_a_finished_report_has_no_live_marks_and_names_where_a_process_stopped(tmp_path, capsys):
    """A batch report of a job that is over: no live badge, no row per process that exited ("exited exited",
    "0 ms"), and a process whose log ends mid-compile (it died there) said to have stopped there."""
    done = report_logs.write(tmp_path / "done" / "a.jsonl", report_logs.records())
    assert report(capsys, done.parent, "-o", tmp_path / "out1")[0] == 0
    index = (tmp_path / "out1" / "index.html").read_text()
    assert 'id="now"' not in index and "live-badge" not in index and "exited" not in index
    assert "cache hit" in index.split('class="cards"')[1].split("</section>")[0]
    records = report_logs.records()
    last_end = max(i for i, r in enumerate(records) if r["type"] == "compile_end")
    died = [r for i, r in enumerate(records) if r["type"] != "calls" and i < last_end]
    report_logs.write(tmp_path / "died" / "a.jsonl", died)
    assert report(capsys, tmp_path / "died", "-o", tmp_path / "out2")[0] == 0
    now = (tmp_path / "out2" / "index.html").read_text().split('id="now"')[1].split("</section>")[0]
    assert "Where the process stopped" in now and "now-compiling" in now and "live-badge" not in now
    assert "compiling report_model.Model (compile 1)" in now
    cards = (tmp_path / "out2" / "index.html").read_text().split('class="cards"')[1].split("</section>")[0]
    assert "calls and cache hits: counted at each process's exit (no process exited in its log)" in cards
    assert '<div class="num">&ndash;</div><div>provenance coverage' in cards  # no op: no share of ops


def test_a_failure_at_a_statement_of_several_lines_shows_it_whole(tmp_path, capsys):
    """The traceback names a statement's first line (`assert t <= self.config.block_size, (`): the failure
    shows the whole statement, from the file, where it still reads so; one line stays one line."""
    model = tmp_path / "model.py"
    model.write_text("def forward(self, idx):\n    b, t = idx.size()\n    assert t <= self.config.block_size, (\n"
                     "        f\"Cannot forward sequence of length {t}\"\n    )\n    return idx\n")
    frame = [str(model), 3, "forward", "assert t <= self.config.block_size, (", True]
    log = report_logs.write(tmp_path / "logs" / "a.jsonl", report_logs.records(error={"user_frame": frame}))
    assert report(capsys, log.parent, "-o", tmp_path / "out")[0] == 0
    failures = (tmp_path / "out" / "failures.html").read_text()
    statement = re.search(r'<pre class="statement"[^>]*>(.*?)</pre>', failures, re.S)
    assert statement and statement.group(1) == ("assert t &lt;= self.config.block_size, (\n"
                                                "    f&#34;Cannot forward sequence of length {t}&#34;\n)")
    page = next((tmp_path / "out" / "compiles").glob("*c1.html")).read_text()
    assert '<pre class="statement">assert t &lt;= self.config.block_size, (' in page
    model.write_text(model.read_text().replace("assert t <=", "assert t >="))  # changed since: not shown
    assert report(capsys, log.parent, "-o", tmp_path / "out2")[0] == 0
    assert 'class="statement"' not in (tmp_path / "out2" / "failures.html").read_text()
