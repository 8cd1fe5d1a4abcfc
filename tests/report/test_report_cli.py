"""`thunder-trace report` on hand-written logs: the files it writes, bad input, the CLI's options.

No Thunder run and no browser here (test_report_browser.py has those): each test builds a small
log (tests/support/report_logs.py), runs the command in-process, and reads what it wrote.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import report_logs
from paths import ROOT

from provenance.cli import main


def report(capsys, *args: str) -> tuple[int, str]:
    code = main(["report", *map(str, args), "--no-browser"])
    return code, capsys.readouterr().err


def files_under(path: Path) -> set[Path]:
    return {p for p in path.rglob("*")}


def test_report_pages_model_and_perfetto(tmp_path, capsys):
    log = report_logs.write(tmp_path / "logs" / "a.jsonl", report_logs.records())
    out = tmp_path / "out"
    code, err = report(capsys, log, "-o", out)
    assert code == 0, err
    assert "1 compile (0 failed)" in err and "warning" not in err
    for name in ("index.html", "failures.html", "distributed.html", "compile_directory.json", "perfetto_trace.json",
                 "static/report.css", "static/report.js"):
        assert (out / name).is_file(), name

    directory = orjson.loads((out / "compile_directory.json").read_bytes())
    (entry,) = directory["compiles"]
    assert entry["status"] == "ok" and entry["cache_hits"] == 2 and entry["calls"] == 3
    assert [(p["list"], p["pass"], p["ms"]) for p in entry["passes"]] == [
        ("computation", "dce", None), ("computation", "del_last_used", 3), ("computation", "(repeat)", None),
        ("backward", "del_last_used", 2)]
    changed = entry["passes"][1]
    assert (changed["added"], changed["removed"], changed["rewritten"]) == (1, 0, 0)  # del_last_used added `del t0`
    assert entry["coverage"]["pct"] == 100.0 and directory["totals"]["compiles"] == 1
    for page in entry["pages"].values():
        assert (out / page).is_file()

    for html in [*out.glob("*.html"), *out.glob("compiles/*.html")]:  # entities are never escaped twice
        assert not re.search(r"&amp;(ndash|middot|rarr|minus|hellip|rsaquo|mdash|#)", html.read_text()), html
    page = (out / entry["pages"]["compile"]).read_text()
    records = (out / entry["pages"]["compile"].replace(".html", ".provs.js")).read_text()  # both pages load it
    assert 2 in report_logs.page_provs(page) and "Delete Last Used" in page and "report_model.py:10" in records
    source = (out / entry["pages"]["source"]).read_text()
    assert "rebuilt from the log" in source and 'data-show="10-11"' in source  # not on disk: the quoted lines

    trace = orjson.loads((out / "perfetto_trace.json").read_bytes())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["cat"] for e in events} == {"compile", "pass"}
    (compile_event,) = [e for e in events if e["cat"] == "compile"]
    assert compile_event["dur"] == pytest.approx(5000.0)  # µs
    assert all(compile_event["ts"] <= e["ts"] and e["ts"] + e["dur"] <= compile_event["ts"] + compile_event["dur"]
               for e in events if e["cat"] == "pass")
    assert any(e["ph"] == "M" and e["args"].get("name", "").startswith("process 4242") for e in trace["traceEvents"])


def test_failures_and_incomplete_compiles(tmp_path, capsys):
    failed = report_logs.records(error={})
    incomplete = report_logs.records(compile_id=2)[1:-2]  # the process died during the compile
    log = report_logs.write(tmp_path / "a.jsonl", failed + incomplete)
    out = tmp_path / "out"
    code, err = report(capsys, log, "-o", out)
    assert code == 0, err
    directory = orjson.loads((out / "compile_directory.json").read_bytes())
    assert [c["status"] for c in directory["compiles"]] == ["failed", "incomplete"]
    failures = (out / "failures.html").read_text()
    assert "builtins.RuntimeError" in failures and "boom" in failures
    assert "return y + x" in failures  # the provenance of the last op being processed


@pytest.mark.parametrize("case", ["truncated", "garbage", "unknown", "newer_minor", "malformed"])
def test_bad_input_is_counted_and_strict_fails(tmp_path, capsys, case):
    records = report_logs.records()
    if case == "truncated":
        items = [*records, b'{"type": "calls", "fn": "x", "com']
    elif case == "garbage":
        items = [*records[:3], b"this is not json\n", b"[1, 2, 3]\n", b'{"no_type": 1}\n', *records[3:]]
    elif case == "unknown":
        items = [*records[:3], {"type": "tensor_stats", "compile": 1}, *records[3:]]
    elif case == "newer_minor":
        records[0]["schema"] = "1.7"
        items = [*records[:3], {"type": "kernel_launch", "compile": 1}, {"type": "kernel_launch"}, *records[3:]]
    else:  # known types with missing or wrong fields
        bad_trace = dict(records[7], ops=[[99, 1, "mul", ["t0"], 2], "junk", [0, "x", 1, [], None]], index=5)
        items = [*records[:-1], bad_trace, {"type": "compile_end", "compile": 77}, {"type": "trace", "compile": 1},
                 {"type": "prov", "id": 9, "kind": "op", "source": [["only-a-file"]]}, records[-1]]
    log = report_logs.write(tmp_path / "a.jsonl", items)
    out = tmp_path / "out"
    code, err = report(capsys, log, "-o", out)
    assert code == 0, err
    assert "warning:" in err and "#problems" in err
    index = (out / "index.html").read_text()
    assert 'id="problems"' in index
    directory = orjson.loads((out / "compile_directory.json").read_bytes())
    counts = directory["problems"]["counts"]
    expected = {"truncated": {"bad line": 1}, "garbage": {"bad line": 3}, "unknown": {"unknown record type": 1},
                "newer_minor": {"unknown record type": 2}}.get(case)
    if expected is not None:
        assert counts == expected
    else:
        assert counts["malformed record"] >= 3
    assert any(c["status"] == "ok" for c in directory["compiles"])  # the good compile is still reported
    code, err = report(capsys, log, "-o", out, "--overwrite", "--strict")
    assert code == 1 and "--strict" in err


def test_a_log_with_only_its_header_still_makes_a_report(tmp_path, capsys):
    log = report_logs.write(tmp_path / "a.jsonl", [report_logs.records()[0]])
    code, err = report(capsys, log, "-o", tmp_path / "out")
    assert code == 0 and "0 compiles" in err, err
    assert "Thunder compiles" in (tmp_path / "out" / "index.html").read_text()
    assert report(capsys, log, "-o", tmp_path / "out", "--overwrite", "--strict")[0] == 0


def test_newer_minor_without_unknown_records_is_clean(tmp_path, capsys):
    records = report_logs.records(schema="1.3")
    code, err = report(capsys, report_logs.write(tmp_path / "a.jsonl", records), "-o", tmp_path / "out", "--strict")
    assert code == 0 and "warning" not in err


def test_wrong_major_version_is_refused_clearly(tmp_path, capsys):
    log = report_logs.write(tmp_path / "a.jsonl", report_logs.records(schema="2.0"))
    out = tmp_path / "out"
    code, err = report(capsys, log, "-o", out)
    assert code == 2
    assert "schema 2.0" in err and "reads schema 1.x" in err and "Traceback" not in err
    assert not out.exists()  # refused before anything was written


def test_output_directory_rules(tmp_path, capsys):
    log = report_logs.write(tmp_path / "a.jsonl", report_logs.records())
    mine = tmp_path / "report"
    assert report(capsys, log, "-o", mine)[0] == 0
    code, err = report(capsys, log, "-o", mine)  # a report of the same logs: taken up (docs/report.md)
    assert code == 0 and "up to date" in err
    other = report_logs.write(tmp_path / "b.jsonl", report_logs.records())
    code, err = report(capsys, other, "-o", mine)  # of other logs: replaced only when asked
    assert code == 2 and "--overwrite" in err
    assert report(capsys, other, "-o", mine, "--overwrite")[0] == 0
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "precious.txt").write_text("keep me")
    code, err = report(capsys, log, "-o", theirs, "--overwrite")
    assert code == 2 and "refusing" in err and (theirs / "precious.txt").read_text() == "keep me"
    code, err = report(capsys, tmp_path / "missing", "-o", tmp_path / "x")
    assert code == 2 and "no THUNDER_TRACE log" in err


def test_rank_and_latest_select_logs(tmp_path, capsys):
    logs = tmp_path / "logs"
    report_logs.write(logs / "r0.jsonl", report_logs.records(rank=0, fn="m.A", time_ns=1_796_000_000_000_000_000))
    report_logs.write(logs / "r1.jsonl", report_logs.records(rank=1, fn="m.B", time_ns=1_796_000_100_000_000_000))
    out = tmp_path / "out"
    assert report(capsys, logs, "-o", out)[0] == 0
    directory = orjson.loads((out / "compile_directory.json").read_bytes())
    assert sorted(c["rank_label"] for c in directory["compiles"]) == ["rank 0", "rank 1"]
    assert "2 ranks" in (out / "distributed.html").read_text()
    for flags, fn in ((["--rank", "0"], "m.A"), (["--latest"], "m.B")):
        assert report(capsys, logs, "-o", out, "--overwrite", *flags)[0] == 0
        directory = orjson.loads((out / "compile_directory.json").read_bytes())
        assert [c["fn"] for c in directory["compiles"]] == [fn]
    code, err = report(capsys, logs, "-o", out, "--overwrite", "--rank", "5")
    assert code == 2 and "ranks: 0, 1" in err


def test_desync_between_ranks_is_flagged(tmp_path, capsys):
    logs = tmp_path / "logs"
    report_logs.write(logs / "r0.jsonl", report_logs.records(rank=0))
    other = report_logs.records(rank=1)
    other[8]["ops"][1][2] = "sub"  # rank 1's final forward trace runs another op
    report_logs.write(logs / "r1.jsonl", other)
    out = tmp_path / "out"
    assert report(capsys, logs, "-o", out)[0] == 0
    page = (out / "distributed.html").read_text()
    assert "desync" in page and "differs" in page and "sub" in page


def test_many_ranks_are_grouped_by_behaviour_the_outliers_first(tmp_path, capsys):
    """Past 16 ranks, the distributed page groups the ranks that made the same compiles with the
    same status and final ops: one row and one column per group, the smallest groups first."""
    logs = tmp_path / "logs"
    for rank in range(20):
        records = report_logs.records(rank=rank, error={} if rank == 7 else None)
        if rank in (3, 4):
            records[8]["ops"][1][2] = "sub"  # ranks 3 and 4 run another op
        records[0]["world_size"] = 20
        report_logs.write(logs / f"r{rank}.jsonl", records)
    out = tmp_path / "out"
    assert report(capsys, logs, "-o", out)[0] == 0
    page = (out / "distributed.html").read_text()
    groups = page[page.index('id="rank-groups"'):page.index("</section>", page.index('id="rank-groups"'))]
    rows = [re.sub(r"<[^>]+>", " ", r).split() for r in re.findall(r"<tr><td>.*?</tr>", groups)]
    assert [r[:3] for r in rows] == [["rank", "7", "1"], ["ranks", "3\u20134", "2"],
                                     ["ranks", "0\u20132,", "5\u20136,"]], rows
    assert rows[0][3:5] == ["1", "1"] and rows[2][3:7] == ["8\u201319", "17", "1", "0"]  # rank 7's compile failed
    across = page[page.index("Compiles across rank groups"):]
    header = re.search(r"<thead>.*?</thead>", across, re.S).group(0)
    assert header.count('<th class="r">') == 3 and "ranks 0\u20132, 5\u20136, 8\u201319" in header
    assert "desync" in page and "differs" in page
    assert "one rank" not in across  # each compile was made by every rank


def test_many_ranks_make_an_index_of_groups_with_every_compile_a_click_away(tmp_path, capsys):
    """Past 16 logs the index's run table has a row per group of logs that ran alike (the odd
    one first), the lead names the ranks as runs, and the compiles table lists each rank group's
    first rank, the other ranks' compiles folded under it: none is lost."""
    logs = tmp_path / "logs"
    for rank in range(20):
        records = report_logs.records(rank=rank, error={} if rank == 7 else None)
        records[0]["world_size"], records[0]["host"] = 20, f"node{rank // 8}"
        if rank == 11:
            records[0]["argv"] = ["train.py", "--odd"]  # one process started differently
        report_logs.write(logs / f"r{rank}.jsonl", records)
    out = tmp_path / "out"
    assert report(capsys, logs, "-o", out)[0] == 0
    page = (out / "index.html").read_text()
    assert "20 logs (ranks 0\u201319)" in page
    run = page[page.index("<h2>Run</h2>"):page.index('<details class="every-log"')]
    rows = [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", r)).strip() for r in re.findall(r"<tr><td>.*?</tr>", run, re.S)]
    assert len(rows) == 2, rows
    assert rows[0].startswith("rank 11 1 log") and "--odd" in rows[0]
    assert rows[1].startswith("ranks 0\u201310, 12\u201319 19 logs alike") and "node0, node1, node2" in rows[1]
    assert "19 processes" in rows[1] and "--odd" not in rows[1]
    every = page[page.index('<details class="every-log"'):page.index("</details>", page.index('"every-log"'))]
    assert every.count("<tr>") == 20 and "r19.jsonl" in every
    compiles = page[page.index("<h2>Compiles</h2>"):]
    listed = compiles[:compiles.index('<details class="other-ranks"')]
    folded = compiles[compiles.index('<details class="other-ranks"'):]
    # the distributed page's groups: rank 7 (its compile failed), then the 19 others; each listed by its first rank
    assert re.findall(r'href="(compiles/[^"]+)">passes', listed) == ["compiles/r7-c1.html", "compiles/r0-c1.html"]
    assert "for ranks 0\u20136, 8\u201319" in listed
    pages = re.findall(r'href="(compiles/[^"]+\.html)">passes', folded)
    assert len(pages) == 18 and "compiles/r19-c1.html" in pages and "compiles/r0-c1.html" not in pages
    assert all((out / p).is_file() for p in pages)


def test_names_from_the_log_never_become_paths(tmp_path, capsys):
    evil = "../../../../tmp/evil"
    records = report_logs.records(compile_id=evil, fn=evil, file="/../../etc/passwd", module=evil)
    records[0]["host"] = evil
    logs = tmp_path / "logs"
    report_logs.write(logs / "a.jsonl", records)
    report_logs.write(logs / "b.jsonl", report_logs.records(compile_id=-3))
    before = files_under(tmp_path)
    out = tmp_path / "sandbox" / "out"
    code, err = report(capsys, logs, "-o", out)
    assert code == 0, err
    written = files_under(tmp_path) - before
    assert written and all(out in p.parents or p == out or p == out.parent for p in written)
    assert not Path("/tmp/evil").exists()
    names = {p.name for p in (out / "compiles").iterdir()}
    assert all(n.replace("-", "").replace(".", "").replace("_", "").isalnum() for n in names), names


def test_help_and_module_entry_point():
    script = Path(sys.executable).with_name("thunder-trace")
    for command in ([str(script)] if script.exists() else []) + [[sys.executable, "-m", "provenance.report"]]:
        command = command if isinstance(command, list) else [command]
        done = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "report" in done.stdout
        done = subprocess.run([*command, "report", "--help"], capture_output=True, text=True, timeout=60)
        for flag in ("-o OUT", "--overwrite", "--latest", "--strict", "--no-browser", "--rank N"):
            assert flag in done.stdout, flag
        done = subprocess.run([*command, "diff", "--help"], capture_output=True, text=True, timeout=60)
        assert "--no-browser" in done.stdout and "run_time=+5%" in done.stdout and "%%" not in done.stdout
    env = {k: v for k, v in os.environ.items() if k != "THUNDER_TRACE"}
    done = subprocess.run([sys.executable, "-m", "provenance.report", "report", "/nonexistent/logs"],
                          capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert done.returncode == 2 and "no THUNDER_TRACE log" in done.stderr


def test_worker_processes_write_the_same_report(tmp_path, capsys):
    first = report_logs.records()
    recompiled = report_logs.records(compile_id=4, why=True)[1:-1]  # its page links to and diffs with compile 1
    failed = report_logs.records(compile_id=2, error={})[1:-1]
    incomplete = report_logs.records(compile_id=3)[1:-3]
    log = report_logs.write(tmp_path / "a.jsonl", [*first[:-1], *recompiled, *failed,
                                                   {"type": "trace", "compile": 9, "list": 1}, *incomplete, first[-1]])
    outs = []
    for jobs in ("1", "2"):
        outs.append(tmp_path / f"out{jobs}")
        code, err = report(capsys, log, "-o", outs[-1], "-j", jobs)
        assert code == 0 and "malformed record" in err, err
    # the state too (but its MAC, which is bound to its OUT's path)
    files = sorted(p.relative_to(outs[0]) for p in outs[0].rglob("*") if p.is_file() and p.name != "state.mac")
    assert files == sorted(p.relative_to(outs[1]) for p in outs[1].rglob("*") if p.is_file() and p.name != "state.mac")
    for name in files:
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name
    statuses = [c["status"] for c in orjson.loads((outs[1] / "compile_directory.json").read_bytes())["compiles"]]
    assert statuses == ["ok", "ok", "failed", "incomplete", "incomplete"]
    page = (outs[1] / "compiles" / "log0-c4.html").read_text()
    assert '<a href="log0-c1.html">compile 1</a>' in page and "TorchCompile0" in page


@pytest.mark.slow
def test_fuzzed_records_never_crash_the_report(tmp_path, capsys):
    """Known record types with fields dropped or of the wrong type: always a report (or, for a
    header that no longer says schema 1.x, a clear refusal)."""
    import copy
    import random

    rng = random.Random(5)
    junk = [None, 0, -1, 1.5, True, "", "../../x", [], [1], [[1]], {}, {"a": 1}, 2**62, "<script>", [None] * 5]

    def mutate(record: dict) -> dict:
        record = copy.deepcopy(record)
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(list(record))
            value = record[key]
            if rng.random() < 0.2 and key != "type":
                del record[key]
            elif isinstance(value, list) and value and rng.random() < 0.4:
                i = rng.randrange(len(value))
                if isinstance(value[i], list) and value[i]:
                    value[i][rng.randrange(len(value[i]))] = copy.deepcopy(rng.choice(junk))
                else:
                    value[i] = copy.deepcopy(rng.choice(junk))
            else:
                record[key] = copy.deepcopy(rng.choice(junk))
        return record

    for attempt in range(40):
        records = report_logs.records(rank=rng.choice([None, 0])) + report_logs.records(
            compile_id=2, error={} if attempt % 2 else None, why=True)[1:]
        for i in rng.sample(range(len(records)), rng.randint(1, 4)):
            records[i] = mutate(records[i])
        log = report_logs.write(tmp_path / f"{attempt}.jsonl", records)
        out = tmp_path / f"out{attempt}"
        code, err = report(capsys, log, "-o", out)
        assert code in (0, 2) and "Traceback" not in err, (attempt, err)
        assert (out / "index.html").is_file() or "schema" in err or "not a THUNDER_TRACE log" in err


_IMPORTED = r"""
import contextlib, io, json, sys
from provenance.cli import main
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:  # --version and --help exit
            code = exc.code
    assert code == 0, (argv, code)
print("RESULT " + json.dumps(sorted(sys.modules)))
"""
_HEAVY = ("jinja2", "pygments", "rich", "markupsafe", "orjson", "torch", "thunder", "multiprocessing",
          "concurrent.futures", "dataclasses", "provenance.report.build", "provenance.report.report_command")


def _imported(*argvs: list[str]) -> set[str]:
    """The modules a fresh interpreter has loaded after `thunder-trace` ran with each of `argvs`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("THUNDER_TRACE")}
    done = subprocess.run([sys.executable, "-c", _IMPORTED, orjson.dumps(argvs).decode()], capture_output=True,
                          text=True, timeout=120, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return set(orjson.loads(done.stdout.split("RESULT ", 1)[1]))


def test_version_and_help_import_nothing_of_the_report():
    """`thunder-trace --version`, `--help` and `report --help` load the options only: the report's
    implementation (jinja2, pygments, rich, the pool, the pipeline) is imported when it runs."""
    loaded = _imported(["--version"], ["--help"], ["report", "--help"], ["report", "--version"])
    assert not {m for m in loaded if m.split(".")[0] in _HEAVY or m in _HEAVY}, sorted(loaded)
    assert "provenance.cli" in loaded


def test_a_one_process_report_starts_no_worker(tmp_path):
    """-j 1 (and the default for a small log) does not import the workers module; -j 2 does, and
    forks its worker without multiprocessing (whose import costs a small report ~7 ms)."""
    log = report_logs.write(tmp_path / "a.jsonl", report_logs.records())
    loaded = _imported(["report", str(log), "-o", str(tmp_path / "one"), "--no-browser"])
    assert "provenance.report.build" in loaded and "jinja2" in loaded  # it did run
    assert not {"provenance.report.workers", "multiprocessing"} & loaded
    loaded = _imported(["report", str(log), "-o", str(tmp_path / "two"), "--no-browser", "-j", "2"])
    assert "provenance.report.workers" in loaded and "multiprocessing" not in loaded


def test_a_report_of_jsonl_logs_imports_what_it_needs_only(tmp_path):
    """A report of JSONL logs (a file, or a directory looked through for OTLP/JSON exports) of one
    rank, without profiles or recompiles, imports neither the exports' reader, nor the check of
    measured memory, nor the time analysis and its roll-up (profiles only), nor webbrowser
    (--no-browser), nor statistics and difflib, nor any highlighter (the pages' script highlights):
    each is imported by the code that needs it."""
    logs = tmp_path / "logs"
    logs.mkdir()
    log = report_logs.write(logs / "a.jsonl", report_logs.records())
    (logs / "notes.txt").write_text("not an export\n")
    loaded = _imported(["report", str(log), "-o", str(tmp_path / "file"), "--no-browser"],
                       ["report", str(logs), "-o", str(tmp_path / "dir"), "--no-browser"])
    assert "provenance.report.build" in loaded and "provenance.report.read.exports" in loaded  # it did run
    unused = {"provenance.report.read.otlp_json", "provenance.allocation.measured_memory", "webbrowser", "statistics",
              "difflib", "provenance.report.analyze.cost", "provenance.timing.rollup", "pygments"}
    assert not unused & loaded, sorted(unused & loaded)
