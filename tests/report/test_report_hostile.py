"""Hostile and unlucky inputs to `thunder-trace report` (issue 10): no crash, no quadratic blow-up,
no local file leaked into the report, no input lost, `--strict` that notices.

Hand-written logs (tests/support/report_logs.py), the command run in-process: no Thunder, no browser.
Timing is never compared here (see bench/hostile_inputs.py and the fuzz test in
test_report_fuzz.py for the linear bounds); these tests check structure: what was reported, what
was written, and, for the quadratic cases, how much work the bounded algorithm was given.
"""

from __future__ import annotations

import copy
import difflib
import os
import random
import re
import time
import tracemalloc
from pathlib import Path

import orjson
import pytest
import report_logs
from paths import report_files

from provenance.cli import main
from provenance.log import schema
from provenance.report.analyze import ranks
from provenance.report.read.log_file import LogFile


def report(capsys, *args) -> tuple[int, str]:
    code = main(["report", *map(str, args), "--no-browser"])
    return code, capsys.readouterr().err


def directory(out: Path) -> dict:
    return orjson.loads((out / "compile_directory.json").read_bytes())


def all_text(out: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())


# -- 1. a deep call stack ----------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [300, 3000])
def test_a_deep_call_stack_does_not_recurse(tmp_path, capsys, depth):
    records = report_logs.records()
    stack = [report_logs.frame(i + 1, f"f{i}()", f"/nonexistent/deep{i}.py", f"f{i}") for i in range(depth)]
    records[1]["call_stack"] = stack
    records[1]["jit_stack"] = stack
    out = tmp_path / "out"
    code, err = report(capsys, report_logs.write(tmp_path / "a.jsonl", records), "-o", out)
    assert code == 0, err
    index = (out / "index.html").read_text()
    assert f"deep{depth - 1}.py" in index  # the innermost frames, where the call was made
    assert "outer frames not shown" in index
    page = (out / directory(out)["compiles"][0]["pages"]["compile"]).read_text()
    assert f"deep{depth - 1}.py" in page


# -- 2. a header that is not the first line -----------------------------------------------------------
@pytest.mark.parametrize("stray", [{"type": "header"}, {"type": "header", "schema": "2.0"}],
                         ids=["no-schema", "other-major"])
def test_a_stray_header_is_a_bad_line_not_the_end_of_the_run(tmp_path, capsys, stray):
    logs = tmp_path / "logs"
    for rank in (0, 1):
        records = report_logs.records(rank=rank)
        report_logs.write(logs / f"r{rank}.jsonl", [*records[:5], stray, *records[5:], stray])
    out = tmp_path / "out"
    code, err = report(capsys, logs, "-o", out)
    assert code == 0, err
    found = directory(out)
    assert [c["status"] for c in found["compiles"]] == ["ok", "ok"]
    assert found["problems"]["counts"] == {"bad line": 4}
    assert all("header" in e["reason"] for e in found["problems"]["entries"])
    orjson.loads((out / "perfetto_trace.json").read_bytes())  # complete
    code, err = report(capsys, logs, "-o", out, "--overwrite", "--strict")
    assert code == 1


def test_a_file_whose_header_is_another_major_is_refused_before_writing(tmp_path, capsys):
    logs = tmp_path / "logs"
    report_logs.write(logs / "a.jsonl", report_logs.records(rank=0))
    report_logs.write(logs / "b.jsonl", report_logs.records(rank=1, schema="2.0"))
    code, err = report(capsys, logs, "-o", tmp_path / "out")
    assert code == 2 and "schema 2.0" in err
    assert not (tmp_path / "out").exists()


# -- 3. wrong types and values, field by field --------------------------------------------------------
WRONG = ["1" * 400, 1.5, -7, [1, 2], {"a": 1}, None, True, "x", [[1, "x", 2, 3, 4]]]


def _mutated(record: dict, key: str, value: object) -> dict:
    record = copy.deepcopy(record)
    outer, _, inner = key.partition(".")
    if inner:
        record[outer][inner] = value
    else:
        record[outer] = value
    return record


def _mutations() -> list[tuple[int, str, object]]:
    """(record index, field, a value of the wrong type or out of range) for every field of every
    record of the hand-written log, and one field of each nested object."""
    records = report_logs.records()
    out = []
    n = 0
    for i, record in enumerate(records):
        keys = [k for k in record if k != "type"]
        keys += [f"{k}.{next(iter(v))}" for k, v in record.items() if isinstance(v, dict) and v]
        for key in keys:
            for value in WRONG[n % len(WRONG):] + WRONG[:n % len(WRONG)]:
                if schema.problems(_mutated(record, key, value)):
                    out.append((i, key, value))
                    break
            n += 1
    return out


def _report_mutated(tmp_path, capsys, mutations, mutate, **kind) -> dict:
    """A log per mutation (its rank the mutation's number), reported together with --strict."""
    logs = tmp_path / "logs"
    for n, (i, key, value) in enumerate(mutations):
        records = report_logs.records(rank=n, **kind)
        records[i] = mutate(records[i], key, value)
        report_logs.write(logs / f"m{n:03d}.jsonl", records)
    out = tmp_path / "out"
    code, err = report(capsys, logs, "-o", out, "--strict")
    assert code == 1 and "Traceback" not in err, err
    return directory(out)


def test_every_wrong_field_degrades_to_unknown_and_is_counted(tmp_path, capsys):
    mutations = _mutations()
    assert len(mutations) > 80
    found = _report_mutated(tmp_path, capsys, mutations, _mutated)
    not_logs = [n for n, (i, key, _) in enumerate(mutations) if i == 0 and key == "schema"]
    assert len(not_logs) == 1 and found["totals"]["logs"] == len(mutations) - 1  # a header without its schema
    assert found["problems"]["counts"]["skipped file"] == 1
    flagged = {e["file"] for e in found["problems"]["entries"]}
    missed = [(f"m{n:03d}.jsonl", m) for n, m in enumerate(mutations) if f"m{n:03d}.jsonl" not in flagged]
    assert not missed, missed
    # the compile ids stayed what they were: each log's compile is there
    assert len(found["compiles"]) >= len(mutations) - sum(1 for _, k, _ in mutations if k == "compile")


@pytest.mark.parametrize("fused", [
    "x", [[3, 5, 10]], [[3, "t2 = ltorch.mul(t1, 2.0)", "10"]], [[99, "t2 = ltorch.mul(t1, 2.0)", 10]],
    [[3, "t2 = ltorch.mul(t1, 2.0)"]], [[3, "t2 = ltorch.mul(t1, 2.0)", 999]]],
    ids=["not-an-array", "text-not-a-string", "prov-not-an-int", "op-out-of-range", "short", "unknown-prov"])
def test_a_wrong_fused_list_is_counted_and_the_trace_still_shows(tmp_path, capsys, fused):
    """The ops a fusion fused (trace.fused, schema 1.6): a bad entry is dropped and counted."""
    records = report_logs.reading()
    final = next(r for r in records if r["type"] == "trace" and r.get("fused"))
    final["fused"] = [*report_logs.READ_FUSED[:2], *fused] if isinstance(fused, list) else fused
    out = tmp_path / "out"
    code, err = report(capsys, report_logs.write(tmp_path / "a.jsonl", records), "-o", out, "--strict")
    assert code == 1 and "Traceback" not in err, err
    found = directory(out)
    assert found["problems"]["entries"] and [c["status"] for c in found["compiles"]] == ["ok"]
    (page,) = [out / c["pages"]["compile"] for c in found["compiles"]]
    traces = report_logs.page_traces(page.read_text())
    kept = [t["f"] for t in traces if "f" in t]  # the final forward trace's
    good = [x for entry in report_logs.READ_FUSED[:2] for x in entry]
    if not isinstance(fused, list):
        assert kept == []
    elif fused[0][-1] == 999:  # kept, its record unknown
        assert kept == [[*good, 3, "t2 = ltorch.mul(t1, 2.0)", None]]
    else:
        assert kept == [good]


def _fx_mutations() -> list[tuple[int, str, object]]:
    """Every field of ThunderFX's records (the graph's pieces and reasons: their first entry's),
    each given a value of the wrong type."""
    records = report_logs.records(fx=True)
    out, n = [], 0
    for i, record in enumerate(records):
        if record["type"] not in ("dynamo_graph", "graph_break") and "piece" not in record:
            continue
        keys = [k for k in record if k != "type" and (record["type"] != "compile_start" or k == "piece")]
        keys += [f"{k}.{inner}" for k, v in record.items() if k in ("piece", "pieces", "reasons")
                 for inner in (v if isinstance(v, dict) else v[0])]
        for key in keys:
            value = WRONG[n % len(WRONG)]
            n += 1
            out.append((i, key, value))
    return out


def _fx_mutated(record: dict, key: str, value: object) -> dict:
    record = copy.deepcopy(record)
    outer, _, inner = key.partition(".")
    if not inner:
        record[outer] = value
    elif isinstance(record[outer], list):
        record[outer][0][inner] = value
    else:
        record[outer][inner] = value
    return record


def test_wrong_fields_of_thunderfx_records_degrade_and_are_counted(tmp_path, capsys):
    """dynamo_graph, graph_break and compile_start.piece are untrusted too: each wrong field is
    counted, the report is made, and what is good in the record is still shown."""
    mutations = _fx_mutations()
    assert len(mutations) > 25
    found = _report_mutated(tmp_path, capsys, mutations, _fx_mutated, fx=True)
    flagged = {e["file"] for e in found["problems"]["entries"]}
    missed = [(f"m{n:03d}.jsonl", m) for n, m in enumerate(mutations)
              if f"m{n:03d}.jsonl" not in flagged and schema.problems(_fx_mutated(
                  report_logs.records(fx=True)[m[0]], m[1], m[2]))]
    assert not missed, missed
    assert len(found["compiles"]) == len(mutations)  # every log's compile is there
    graphs = (tmp_path / "out" / "graphs.html").read_text()
    assert graphs.count('class="fx-fallback-row"') >= len(mutations) // 2
    assert (tmp_path / "out" / "index.html").read_text().count('class="fx-graph"') >= len(mutations) // 2


FRAME_COMPILE = {
    "type": "frame_compile", "compile_id": "3/0", "start_ns": 1_796_000_000_100_000_000,
    "end_ns": 1_796_000_000_200_000_000, "outcome": "skipped", "graph": None,
    "function": ["/m.py", 9, "forward", "def forward(self, x):", True],
    "phases": [["backend_failed", 1_796_000_000_100_000_000, 1_796_000_000_150_000_000, 0, "E: boom"]],
    "failures": [{"start_ns": 1_796_000_000_100_000_000, "backend_ns": 1_796_000_000_120_000_000,
                  "end_ns": 1_796_000_000_150_000_000, "error": "E: boom",
                  "frames": [["/m.py", 10, "forward", "y = x.tolist()", True]]}],
    "more_failures": 0, "breaks": 0, "error": "Unsupported: gave up", "error_frames": [],
}


def test_wrong_fields_of_a_frame_compile_degrade_and_are_counted(tmp_path, capsys):
    """frame_compile is untrusted too: each field of the wrong type (and one of a failed backend call's) is
    counted, never a crash; the frame compiles that read are listed, the failure with its line."""
    keys = [k for k in FRAME_COMPILE if k != "type"] + ["failures.error", "failures.frames", "failures.end_ns"]
    logs = tmp_path / "logs"
    wrong = []  # the logs whose record the schema refuses: each must be listed as a problem
    for n, key in enumerate(keys):
        records = report_logs.records(rank=n, fx=True)
        value = WRONG[n % len(WRONG)]
        record = copy.deepcopy(FRAME_COMPILE)
        outer, _, inner = key.partition(".")
        if inner:
            record[outer][0][inner] = value
        else:
            record[outer] = value
        records.insert(-1, record)
        report_logs.write(logs / f"m{n:03d}.jsonl", records)
        if schema.problems(record):
            wrong.append(f"m{n:03d}.jsonl")
    good = report_logs.records(rank=len(keys), fx=True)
    good.insert(-1, FRAME_COMPILE)
    report_logs.write(logs / "good.jsonl", good)
    out = tmp_path / "out"
    code, err = report(capsys, logs, "-o", out, "--strict")
    assert code == 1 and "Traceback" not in err, err
    flagged = {e["file"] for e in directory(out)["problems"]["entries"]}
    assert len(wrong) > len(keys) // 2 and set(wrong) <= flagged, (wrong, flagged)
    frames = directory(out)["dynamo_graphs"]["frames"]
    assert any(f["line"] == "/m.py:10" and f["failed"] and f["outcome"] == "skipped" for f in frames), frames
    assert "y = x.tolist()" in (out / "failures.html").read_text()


def test_a_thunderfx_log_shows_its_graph_pieces_split_and_break(tmp_path, capsys):
    logs = tmp_path / "logs"
    report_logs.write(logs / "a.jsonl", report_logs.records(fx=True, schema="1.4"))
    out = tmp_path / "out"
    code, err = report(capsys, logs, "-o", out, "--strict")
    assert code == 0, err
    index = (out / "index.html").read_text()
    assert index.count('class="fx-graph"') == 1 and "thunder_0" in index and "inductor_1" in index
    graphs = (out / "graphs.html").read_text()
    assert "MISSING_OP_SUPPORT" in graphs and "Failed to trace builtin operator" in graphs
    page = (out / "graphs" / "log0-g1.html").read_text()
    lines = orjson.loads(re.search(r'<script type="application/json" id="fxlines">(.*?)</script>', page, re.S).group(1))
    # the rebuilt file holds the lines the log quotes: 10 and 11 (Thunder's), 12 (the break), 13 (the fallback)
    assert [e["piece"] for e in lines["L0-10"]] == ["thunder_0"] and lines["L0-10"][0]["counts"] == [1, 1, 0]
    assert lines["L0-10"][0]["forward"] == ["t0 = torch.mul(x, 2.0)  # t0: \"cpu f32[2]\""]
    assert lines["L0-10"][0]["href"] == "../compiles/log0-c1-source.html#L0-10"
    assert lines["L0-13"] == [{"piece": "inductor_1", "fallback": "inductor", "why": [
        "MISSING_OP_SUPPORT: node with name: linalg_det and target: det only has an automatic torch fallback"]}]
    assert lines["L0-12"] == [{"break": "Failed to trace builtin operator"}]
    marks = orjson.loads(re.search(r'<script type="application/json" id="srcmarks">(.*?)</script>', page).group(1))
    assert marks["fx"] == {"L0-13": "fallback", "L0-12": "break"} and marks["c"]["L0-10"] == [1, 1, 0]
    assert 'data-show="10-13"' in page and 'class="src-data"' in page  # rebuilt: the quoted lines, in the page
    (graph,) = directory(out)["dynamo_graphs"]["graphs"]
    assert [(p["name"], p["compiler"], p["compiles"]) for p in graph["pieces"]] == [
        ("thunder_0", "thunder", ["log0-c1"]), ("inductor_1", "inductor", [])]
    assert graph["pieces"][1]["reasons"][0]["line"] == f"{report_logs.MODEL}:13"
    assert graph["breaks"] == [{"reason": "Failed to trace builtin operator", "line": f"{report_logs.MODEL}:12"}]
    (every,) = directory(out)["dynamo_graphs"]["breaks"]  # the run's breaks, each tied to its graph
    assert every["graph"] == graph["key"] and every["compile_id"] == graph["compile_id"]
    assert every["reason"] == "Failed to trace builtin operator" and every["line"] == f"{report_logs.MODEL}:12"
    assert every["stack"][-1] == every["line"]


def test_a_huge_number_string_in_final_counts(tmp_path, capsys):
    records = report_logs.records()
    records[-2]["final"]["ops"] = "1" * 400
    out = tmp_path / "out"
    code, err = report(capsys, report_logs.write(tmp_path / "a.jsonl", records), "-o", out)
    assert code == 0, err
    (entry,) = directory(out)["compiles"]
    assert entry["status"] == "ok" and entry["coverage"] is None  # unknown, not a crash
    assert "compile_end.final.ops" in err


# -- 4. highlighting is linear -------------------------------------------------------------------------
@pytest.mark.slow
def test_an_unterminated_string_is_one_token_to_the_end_of_the_line(tmp_path, capsys, browser):
    """The pages' script highlights trace lines with one regex (report.js: TOKEN): an unterminated
    string is one token to the end of its line (not tried again at every quote: a hostile line
    would otherwise take the page minutes), the next line lexes normally, and a line longer than
    MAX_LINE is plain text."""
    records = report_logs.records()
    hostile = 'x = "' + '\\"' * 9000
    huge = "z = " + "'a" * 15000
    records[8]["python"] += "\n".join(["", hostile, "y = f(1)", huge])  # the final forward trace
    out = tmp_path / "out"
    code, err = report(capsys, report_logs.write(tmp_path / "a.jsonl", records), "-o", out)
    assert code == 0, err
    page = browser.open(out / directory(out)["compiles"][0]["pages"]["compile"])
    pre = page.locator("details.trace[open] pre.code").first
    strings = pre.locator(".s").evaluate_all("ss => ss.map(s => s.textContent)")
    assert hostile[4:] in strings
    assert pre.locator(".nf", has_text="f").count() >= 1  # `f(` on the next line: a call
    assert huge in pre.inner_text() and not any("'a'a" in text for text in strings)  # not lexed
    page.close()
    assert browser.errors == []


# -- 5. a long desync is compared with bounded work -----------------------------------------------------
def test_a_long_desync_is_located_with_bounded_work(monkeypatch):
    rng = random.Random(3)
    ops = [f"op{rng.randrange(50)}|" for _ in range(16000)]
    other = list(ops)
    other[5000:] = [f"op{rng.randrange(50)}|" for _ in range(11000)]
    fed = []
    real = difflib.SequenceMatcher  # the module ranks imports when it compares

    def spy(isjunk, a, b, autojunk=True):
        fed.append(len(a) * len(b))
        return real(isjunk, a, b, autojunk=autojunk)

    monkeypatch.setattr(difflib, "SequenceMatcher", spy)
    first = 5000 + next(i for i in range(11000) if ops[5000 + i] != other[5000 + i])
    found = ranks.first_difference(ops, other)
    assert found.at == first
    assert sum(fed) <= ranks.MAX_DIFF_WORK
    assert found.ref_ops and found.ops


# -- 6. many compiles sharing one id ------------------------------------------------------------------
def test_compiles_sharing_an_id_get_pages_of_their_own(tmp_path, capsys):
    one = report_logs.records()
    body = one[1:-1]
    items = [one[0], *[r for _ in range(300) for r in body], one[-1]]
    out = tmp_path / "out"
    code, err = report(capsys, report_logs.write(tmp_path / "a.jsonl", items), "-o", out)
    assert code == 0, err
    pages = [c["pages"]["compile"] for c in directory(out)["compiles"]]
    assert len(pages) == 300 and len(set(pages)) == 300
    assert pages[:3] == ["compiles/log0-c1.html", "compiles/log0-c1-2.html", "compiles/log0-c1-3.html"]
    assert all((out / p).is_file() for p in pages)


def test_naming_compiles_that_share_an_id_takes_as_long_as_naming_distinct_ones(tmp_path):
    """In-process CPU-time ratio (the names of 3000 compiles sharing an id once took 3000^2 / 2 steps)."""
    from provenance.report.analyze.run import FilePass, LogPart, RunBuilder
    from provenance.report.read.processes import label_logs
    from provenance.report.render.directory import DirectoryWriter
    from provenance.report.render.output import ReportWriter
    from provenance.report.render.perfetto import PerfettoWriter
    from provenance.report.render.source_files import SourceCache

    header = report_logs.records()[0]
    log_path = report_logs.write(tmp_path / "a.jsonl", [header])
    took = {}
    for same in (True, False, True, False):
        out = tmp_path / f"out{len(took)}{same}"
        writer = ReportWriter(out, [])
        writer.write_assets()
        logs = label_logs([log_path], [header])
        builder = RunBuilder(writer, logs, perfetto=PerfettoWriter(str(out / "p.json"), None),
                             directory=DirectoryWriter(out), sources=SourceCache())
        part = builder.parts[0] = LogPart()
        file = FilePass(builder, logs[0], part, LogFile(str(log_path)), {})
        start = time.process_time()
        for k in range(3000):
            builder.begin(file, {"compile": 1 if same else 10**6 + k})
        took.setdefault(same, []).append(time.process_time() - start)
        builder.perfetto.close()
    assert min(took[True]) <= 3 * min(took[False]), took


# -- 7. bad lines are counted, not kept ----------------------------------------------------------------
def _peak_reading(path: Path) -> int:
    tracemalloc.start()
    try:
        log = LogFile(str(path))
        for _ in log:
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_stays_flat_in_the_number_of_bad_lines(tmp_path, capsys):
    header = report_logs.records()[0]
    small = report_logs.write(tmp_path / "small.jsonl", [header, *[b"x" * 100 + b"\n"] * 5_000])
    big = report_logs.write(tmp_path / "big.jsonl", [header, *[b"x" * 100 + b"\n"] * 100_000])
    small_peak, big_peak = _peak_reading(small), _peak_reading(big)
    assert big_peak < 1.5 * small_peak + 200_000, (small_peak, big_peak)
    log = LogFile(str(big))
    list(log)
    assert log.bad_count == 100_000 and len(log.bad) <= 200
    out = tmp_path / "out"
    code, err = report(capsys, big, "-o", out)
    assert code == 0 and "100000 bad lines" in err, err
    assert directory(out)["problems"]["counts"] == {"bad line": 100_000}


# -- 8. nothing outside the logs reaches the report ------------------------------------------------------
def test_symlinks_and_files_that_are_not_logs_are_skipped_unquoted(tmp_path, capsys):
    secret = tmp_path / "secret.txt"
    secret.write_text("password=hunter2\n" * 3)
    logs = tmp_path / "logs"
    report_logs.write(logs / "a.jsonl", report_logs.records())
    (logs / "zz.jsonl").symlink_to(secret)
    (logs / "passwd.jsonl").symlink_to("/etc/passwd")
    (logs / "notes.jsonl").write_text("token=sk-12345\nmore secrets\n")
    out = tmp_path / "out"
    code, err = report(capsys, logs, "-o", out)
    assert code == 0, err
    text = all_text(out)
    for leaked in ("hunter2", "root:", "sk-12345", "more secrets"):
        assert leaked not in text and leaked not in err, leaked
    assert "zz.jsonl: skipped: a symbolic link" in err and "notes.jsonl: not a THUNDER_TRACE log" in err
    assert [c["status"] for c in directory(out)["compiles"]] == ["ok"]
    assert report(capsys, logs, "-o", out, "--overwrite", "--strict")[0] == 1  # skipped files are problems
    # a symlink given as PATH is the user's choice
    (tmp_path / "link.jsonl").symlink_to(logs / "a.jsonl")
    code, err = report(capsys, tmp_path / "link.jsonl", "-o", tmp_path / "out2")
    assert code == 0, err


@pytest.mark.parametrize("content", ["", "just some text\n", '{"type": "compile_start", "compile": 1}\n'],
                         ids=["empty", "text", "headerless"])
def test_a_file_without_a_header_is_not_a_log(tmp_path, capsys, content):
    path = tmp_path / "x.jsonl"
    path.write_text(content)
    out = tmp_path / "out"
    code, err = report(capsys, path, "-o", out)
    assert code == 2 and "x.jsonl: not a THUNDER_TRACE log" in err and "Traceback" not in err
    assert not out.exists()
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "x.jsonl").write_text(content)
    code, err = report(capsys, logs, "-o", out)
    assert code == 2 and "no THUNDER_TRACE log" in err and not out.exists()


# -- 9. the source view embeds a local file only if the log quotes it right ------------------------------
SETTINGS = ["import os", "SECRET_KEY = 'hunter2'",
            "y = torch.mul(x, 2.0)", "z = torch.add(y, x)", "w = torch.relu(z) * 3",
            "v = w.sum(dim=0, keepdim=True)", "u = torch.tanh(v) + y", "t = u.reshape(2, -1) @ z",
            "return self.head(t)", "import sys", "from torch import nn", "return t"]


def _quoting(path: Path, lines: dict[int, str]) -> list[dict]:
    """The hand-written log, its first op's record quoting `lines` (number -> text) of `path`."""
    records = report_logs.records(file=str(path))
    prov = next(r for r in records if r["type"] == "prov" and r["id"] == 2)
    prov["source"] = [report_logs.frame(n, text, str(path)) for n, text in lines.items()]
    for r in records:  # the other records quote nothing of it
        if r["type"] == "prov" and r["id"] != 2:
            r["source"] = []
    return records


@pytest.mark.parametrize("quoted, embedded", [
    ({1: "import os"}, False),  # one guessable line: line 1 (issue 22)
    ({3: "y = torch.mul(x, 2.0)", 4: "z = torch.add(y, x)"}, False),
    ({n: SETTINGS[n - 1] for n in (3, 4, 5, 6)}, False),  # four: not beyond doubt
    ({n: SETTINGS[n - 1] for n in (3, 4, 5, 6, 7)}, True),  # five distinct non-trivial lines, all right
    ({**{n: SETTINGS[n - 1] for n in (3, 4, 5, 6, 7)}, 8: "t = u @ z"}, False),  # one wrong
    ({n: SETTINGS[n - 1] for n in (1, 3, 4, 5, 6, 10, 11, 12)}, False),  # four, and trivial ones
    ({**{n: SETTINGS[n - 1] for n in (3, 4, 5, 6, 7)}, 20: "x = 1"}, False),  # past its end
], ids=["import-os", "two", "four", "five", "one-wrong", "four-and-trivial", "past-the-end"])
def test_the_source_view_embeds_only_files_whose_quoted_lines_identify_them(tmp_path, capsys, quoted, embedded):
    settings = tmp_path / "settings.py"
    settings.write_text("\n".join(SETTINGS) + "\n")
    out = tmp_path / "out"
    code, err = report(capsys, report_logs.write(tmp_path / "a.jsonl", _quoting(settings, quoted)), "-o", out)
    assert code == 0, err
    holding = [p.relative_to(out).parts[:2] for p in out.rglob("*") if p.is_file() and b"hunter2" in p.read_bytes()]
    assert holding == ([("static", "src")] if embedded else []), quoted  # its one data file
    source = (out / directory(out)["compiles"][0]["pages"]["source"]).read_text()
    assert ("rebuilt from the log" in source) != embedded


def test_what_a_log_could_guess_of_a_file_is_trivial():
    from provenance.report.render.source_files import trivial

    for line in ("import os", "from torch import nn", "return x", "super().__init__()", "def forward(self, x):",
                 "class Net(nn.Module):", "# a comment of some length", '"""A docstring."""', "@torch.no_grad()",
                 'if __name__ == "__main__":', "else:", "x = 1"):
        assert trivial(line), line
    for line in ("y = torch.relu(self.fc(x))", "return self.fc2(x) + x", "SECRET_KEY = 'hunter2'"):
        assert not trivial(line), line


# -- 10. the output directory -------------------------------------------------------------------------
def test_the_output_directory_never_holds_or_is_an_input(tmp_path, capsys):
    log = report_logs.write(tmp_path / "a.jsonl", report_logs.records())
    rep = tmp_path / "rep"
    assert report(capsys, log, "-o", rep)[0] == 0
    inside = report_logs.write(rep / "mylog.jsonl", report_logs.records())
    code, err = report(capsys, inside, "-o", rep, "--overwrite")
    assert code == 2 and "contains the input" in err and inside.is_file()
    code, err = report(capsys, rep, "-o", rep, "--overwrite")
    assert code == 2 and inside.is_file()
    logs = tmp_path / "logs"
    report_logs.write(logs / "a.jsonl", report_logs.records())
    code, err = report(capsys, logs, "-o", logs, "--overwrite")
    assert code == 2 and (logs / "a.jsonl").is_file()


def test_output_paths_that_cannot_be_a_directory(tmp_path, capsys):
    log = report_logs.write(tmp_path / "a.jsonl", report_logs.records())
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, err = report(capsys, log, "-o", blocker / "out")
    assert code == 2 and "Traceback" not in err and "cannot" in err
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    code, err = report(capsys, log, "-o", dangling)
    assert code == 2 and "symbolic link" in err
    # a symlink to a report this tool made: replaced through the link
    real = tmp_path / "real"
    assert report(capsys, log, "-o", real)[0] == 0
    link = tmp_path / "link"
    link.symlink_to(real)
    code, err = report(capsys, log, "-o", link, "--overwrite")
    assert code == 0, err
    assert link.is_symlink() and (real / "index.html").is_file()


# -- 16. -j 2 writes what -j 1 writes ------------------------------------------------------------------
def _scoped(rank: int | None, compile_id: int = 1) -> list[dict]:
    records = report_logs.records(rank=rank, compile_id=compile_id)
    spans = [{"type": "span", "id": 7, "name": "outer", "parent": None, "attributes": {"step": 1}, "role": "custom",
              "start_ns": records[0]["time_ns"] + 10},
             {"type": "span", "id": 8, "name": "inner", "parent": 7, "attributes": {}, "role": "custom",
              "start_ns": records[0]["time_ns"] + 20}]
    for prov in records[2:7]:
        prov["span"] = 8 if prov["id"] % 2 else None
        prov["source"] = [*prov["source"], report_logs.frame(90 + prov["id"], "helper()", f"/nonexistent/h{rank}.py")]
    ends = [{"type": "span_end", "id": 8, "end_ns": records[0]["time_ns"] + 4_000_000},
            {"type": "span_end", "id": 7, "end_ns": records[0]["time_ns"] + 6_000_000}]
    return [records[0], *spans, *records[1:-2], *ends, *records[-2:]]


@pytest.mark.slow
def test_workers_write_byte_for_byte_what_one_process_writes(tmp_path, capsys):
    logs = tmp_path / "logs"
    for rank in (0, 1):
        first = _scoped(rank)
        second = report_logs.records(rank=rank, compile_id=2, error={})[1:-1]
        third = _scoped(rank, compile_id=3)[1:-1]
        third[4]["source"][0][0] = "/nonexistent/other.py"  # paths first seen by a later compile
        junk = [b"garbage\n", {"type": "trace", "compile": "x", "list": 3}, {"type": "compile_end", "compile": 9}]
        report_logs.write(logs / f"r{rank}.jsonl", [*first[:-1], *second, *junk, *third, first[-1]])
    single = tmp_path / "single.jsonl"
    single.write_bytes((logs / "r0.jsonl").read_bytes())
    for name, path in (("dir", logs), ("file", single)):
        outs = []
        for jobs in ("1", "2"):
            outs.append(tmp_path / f"{name}{jobs}")
            code, err = report(capsys, path, "-o", outs[-1], "-j", jobs)
            assert code == 0, err
        files = report_files(outs[0])
        assert files == report_files(outs[1])
        assert len(files) > 8
        for f in files:
            assert (outs[0] / f).read_bytes() == (outs[1] / f).read_bytes(), (name, f)
        trace = orjson.loads((outs[0] / "perfetto_trace.json").read_bytes())
        assert any(e.get("cat") == "scope" for e in trace["traceEvents"])


# -- 17. smaller ones -----------------------------------------------------------------------------------
def test_file_names_reach_the_terminal_escaped(tmp_path, capsys):
    logs = tmp_path / "logs"
    records = report_logs.records()
    report_logs.write(logs / "a\x1b[31mred\x07.jsonl", [*records[:3], b"garbage\n", *records[3:]])
    (logs / "b\x1b]0;title\x07.jsonl").write_text("not a log\n")
    code, err = report(capsys, logs, "-o", tmp_path / "out")
    assert code == 0, err
    assert "\x1b" not in err and "\x07" not in err
    assert "a\\x1b[31mred\\x07.jsonl" in err


@pytest.mark.parametrize("case", ["header-not-first", "compile-id", "field-type", "missing-field"])
def test_strict_notices_every_problem(tmp_path, capsys, case):
    records = report_logs.records()
    if case == "header-not-first":
        records = [records[0], *records[1:5], records[0], *records[5:]]
    elif case == "compile-id":
        for r in records:
            if "compile" in r:
                r["compile"] = "1"
    elif case == "field-type":
        records[1]["index"] = "0"
    else:
        del records[-2]["seconds"]
    log = report_logs.write(tmp_path / "a.jsonl", records)
    code, err = report(capsys, log, "-o", tmp_path / "out", "--strict")
    assert code == 1, err
    assert (tmp_path / "out" / "index.html").is_file()


def test_a_compile_whose_capture_was_disabled_says_so(tmp_path, capsys):
    records = report_logs.records()
    end = records.index(next(r for r in records if r["type"] == "compile_end"))
    records[end] = {"type": "capture_disabled", "compile": 1, "time_ns": records[0]["time_ns"] + 3_000_000,
                    "hook": "processor", "error": "RuntimeError: fault injected"}
    out = tmp_path / "out"
    code, err = report(capsys, report_logs.write(tmp_path / "a.jsonl", records), "-o", out, "--strict")
    assert code == 0, err
    (entry,) = directory(out)["compiles"]
    assert entry["status"] == "disabled"
    page = (out / entry["pages"]["compile"]).read_text()
    assert "capture disabled by an internal error in hook" in page.lower() and "processor" in page
    assert "incomplete" not in page
    assert "capture disabled" in (out / "index.html").read_text()


HOOKED = """Traceback (most recent call last):
  File "/usr/lib/python3.11/site-packages/provenance/thunder/hooks.py", line 287, in cache_info_wrapper
    return inner(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/lib/python3.11/site-packages/thunder/__init__.py", line 774, in get_computation_and_inputs
    prologue_trc, computation_trc, epilogue_trc = acquire_initial_trace(fn, args, kwargs, cd, cs, ad_hoc_executor)
  File "/usr/lib/python3.11/site-packages/provenance/thunder/hooks.py", line 315, in thunder_general_jit
    result = orig(*args, **kwargs)
  File "/home/me/th_gpt.py", line 17, in forward
    z = y @ torch.ones(3, 3)
  File "/usr/lib/python3.11/site-packages/thunder/core/baseutils.py", line 157, in check
    raise exception_type(s())
RuntimeError: boom
"""


def test_a_failure_headlines_the_user_line_without_our_frames(tmp_path, capsys):
    records = report_logs.records(error={"traceback": HOOKED})
    records = [r for r in records if r["type"] != "trace"]  # it failed before any trace
    out = tmp_path / "out"
    code, err = report(capsys, report_logs.write(tmp_path / "a.jsonl", records), "-o", out)
    assert code == 0, err
    (entry,) = directory(out)["compiles"]
    page = (out / entry["pages"]["compile"]).read_text()
    failures = (out / "failures.html").read_text()
    for html in (page, failures):
        assert "provenance/thunder/hooks.py" not in html
        assert "th_gpt.py:17" in html and "z = y @ torch.ones(3, 3)" in html
        assert "thunder/core/baseutils.py" in html  # library frames stay
    headline = page[page.index("Compile error"):]
    assert headline.index("th_gpt.py:17") < headline.index("Traceback")
    assert "Pass pipeline" not in page and "Traces after each pass" not in page
    # with the writer's own user_frame field, that frame is the headline
    records[-2]["user_frame"] = ["/home/me/model.py", 5, "Model.forward", "return self.fc(x)", True]
    out2 = tmp_path / "out2"
    assert report(capsys, report_logs.write(tmp_path / "b.jsonl", records), "-o", out2)[0] == 0
    page = (out2 / directory(out2)["compiles"][0]["pages"]["compile"]).read_text()
    assert "model.py:5" in page[page.index("Compile error"):page.index("Traceback")]


def test_records_after_a_failed_compile_keep_their_partial_traces(tmp_path, capsys):
    records = report_logs.records(error={})  # traces, then the error
    out = tmp_path / "out"
    assert report(capsys, report_logs.write(tmp_path / "a.jsonl", records), "-o", out)[0] == 0
    page = (out / directory(out)["compiles"][0]["pages"]["compile"]).read_text()
    assert "Traces after each pass" in page and "traced before the failure" in page


def test_fuzzed_pages_stay_inside_out(tmp_path, capsys):
    """A few hostile shapes at once: deep references, cycles, huge strings; nothing outside OUT."""
    records = report_logs.records()
    provs = [r for r in records if r["type"] == "prov"]
    provs[0]["derived_from"] = provs[1]["id"]  # a reference forward: written before its target
    chain = [{**copy.deepcopy(provs[2]), "id": 100 + i, "derived_from": 99 + i if i else provs[2]["id"]}
             for i in range(3000)]
    records[7]["ops"][0][4] = 3099
    records = [*records[:7], *chain, *records[7:]]
    records[1]["fn"] = "x" * 1_000_000
    log = report_logs.write(tmp_path / "a.jsonl", records)
    before = set(tmp_path.rglob("*"))
    out = tmp_path / "out"
    code, err = report(capsys, log, "-o", out)
    assert code == 0, err
    written = set(tmp_path.rglob("*")) - before
    assert all(p == out or out in p.parents for p in written), written - {out}


# -- issue 13: a TORCH_TRACE log is not ours --------------------------------------------------------
_TORCH_TRACE_PROGRAM = """
import torch

@torch.compile(backend="eager")
def f(x):
    return torch.sin(x) * 2

f(torch.ones(3))
"""


def test_a_torch_trace_log_is_refused_with_a_pointer_to_tlparse(tmp_path, capsys):
    """A real TORCH_TRACE log (torch.compile of a tiny function, eager backend: no C++ build)."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("THUNDER_TRACE", "THUNDER_TRACE_PROFILE")}
    done = subprocess.run([sys.executable, "-c", _TORCH_TRACE_PROGRAM], capture_output=True, text=True,
                          env={**env, "TORCH_TRACE": str(tmp_path / "tt")}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (log,) = (tmp_path / "tt").iterdir()
    assert log.read_bytes()[:1] == b"V"  # glog's prefix
    out = tmp_path / "out"
    for given in (log, tmp_path / "tt"):
        code, err = report(capsys, given, "-o", out)
        assert code == 2 and "this looks like a TORCH_TRACE" in err and "read it with tlparse" in err, err
        assert "thunder-trace report THUNDER_DIR TORCH_DIR" in err
        assert not out.exists()
    jsonl = tmp_path / "renamed" / "torch.jsonl"  # even under a THUNDER_TRACE name, in a directory
    jsonl.parent.mkdir()
    jsonl.write_bytes(log.read_bytes())
    code, err = report(capsys, jsonl.parent, "-o", out)
    assert code == 2 and "torch.jsonl: this looks like a TORCH_TRACE log: give it after" in err, err
    assert not out.exists()


def test_references_to_records_written_later_are_dropped_the_same_whatever_the_jobs(tmp_path, capsys):
    """An op naming a provenance record the log has not written yet is an unknown record (then
    -j 1, which renders a trace as it is read, and -j 2, which renders it later, agree)."""
    records = report_logs.records()
    provs = [r for r in records if r["type"] == "prov"]
    body = [r for r in records if r["type"] != "prov"]
    late = [*body[:2], *provs[:1], *body[2:-2], *provs[1:], *body[-2:]]  # records 2-5 after the traces
    late[4]["ops"][0][4] = [1]  # and an unhashable one
    log = report_logs.write(tmp_path / "a.jsonl", late)
    code, err = report(capsys, log, "-o", tmp_path / "out", "--strict")
    assert code == 1 and "not written before it" in err
    page = (tmp_path / "out" / directory(tmp_path / "out")["compiles"][0]["pages"]["compile"]).read_text()
    assert 2 not in report_logs.page_provs(page) and 1 in report_logs.page_provs(page)


def test_the_graph_pages_quote_op_code_within_a_budget(tmp_path, capsys, monkeypatch):
    """Past MAX_QUOTED characters of op code, a graph's source view keeps each line's counts only."""
    from provenance.report.analyze import fx_graphs

    monkeypatch.setattr(fx_graphs, "MAX_QUOTED", 10)
    report_logs.write(tmp_path / "logs" / "a.jsonl", report_logs.records(fx=True, schema="1.4"))
    code, err = report(capsys, tmp_path / "logs", "-o", tmp_path / "out", "--strict")
    assert code == 0, err
    page = (tmp_path / "out" / "graphs" / "log0-g1.html").read_text()
    lines = orjson.loads(re.search(r'<script type="application/json" id="fxlines">(.*?)</script>', page, re.S).group(1))
    assert lines["L0-10"][0]["counts"] == [1, 1, 0] and lines["L0-10"][0]["forward"] == []


def test_diff_items_escape_as_markupsafe_does():
    """html._text (diff items' fast escape) writes exactly markupsafe.escape's entities."""
    from markupsafe import escape

    from provenance.report.render.html import _text

    for text in ['t0 = f(x, "a<b>", \'c\') & d', "", "plain", "&amp; &#39;", "\u00b7\u2028<\u00e9>", "<" * 50]:
        assert _text(text) == str(escape(text))


# -- library records: the run table names them, escaped, bounded ------------------------------------
def test_library_records_name_the_model_code_in_the_run_table_and_bad_ones_are_counted(tmp_path, capsys):
    records = report_logs.records()
    libraries = [{"type": "library", "name": "transformers", "version": "5.3.0", "package": "transformers"},
                 {"type": "library", "name": "<b>evil</b>", "version": None, "package": "evil"},
                 {"type": "library", "name": 7, "version": "1", "package": "x"},  # malformed: counted, not shown
                 *({"type": "library", "name": f"lib{i}", "version": "1", "package": f"lib{i}"} for i in range(100))]
    out = tmp_path / "out"
    code, err = report(capsys, report_logs.write(tmp_path / "a.jsonl", [*records[:2], *libraries, *records[2:]]),
                       "-o", out, "--strict")
    assert code == 1 and "malformed record" in err
    index = (out / "index.html").read_text()
    shown = re.search(r'<div class="libraries"[^>]*>(.*?)</div>', index).group(1)
    assert shown.startswith("model code: transformers 5.3.0, &lt;b&gt;evil&lt;/b&gt; ?, lib0 1")
    (log,) = directory(out)["logs"]
    assert len(log["libraries"]) == 64 and log["libraries"]["transformers"] == "5.3.0"  # bounded per log


# -- issue 22: analyses bounded by the log, files only under OUT ------------------------------------
def test_the_perfetto_trace_is_sorted_in_bounded_runs_spooled_inside_out(tmp_path, capsys, monkeypatch):
    """Runs of RUN_EVENTS events sorted and merged (MAX_RUNS at a time) write the trace one sort
    writes; every spool is in OUT: with no usable temporary directory (a full TMPDIR) the report is
    made all the same."""
    import tempfile

    from provenance.report.render import perfetto

    logs = tmp_path / "logs"
    for rank in (0, 1, 2):
        records = report_logs.records(rank=rank, why=True)
        more = report_logs.records(rank=rank, why=True, compile_id=2, time_ns=records[0]["time_ns"] - 10**6 * rank)
        report_logs.write(logs / f"r{rank}.jsonl", [*records[:-1], *more[1:]])
    code, err = report(capsys, logs, "-o", tmp_path / "one")
    assert code == 0, err
    real = tempfile.SpooledTemporaryFile
    monkeypatch.setattr(tempfile, "SpooledTemporaryFile", lambda max_size=0, **kw: real(max_size=1, **kw))  # to disk
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-directory"))  # any spool outside OUT fails
    monkeypatch.setattr(perfetto, "RUN_EVENTS", 7)
    monkeypatch.setattr(perfetto, "MAX_RUNS", 2)  # runs merged into longer ones as they come, too
    code, err = report(capsys, logs, "-o", tmp_path / "two")
    assert code == 0 and "Traceback" not in err, err
    one, two = ((tmp_path / name / "perfetto_trace.json").read_bytes() for name in ("one", "two"))
    assert one == two and len(orjson.loads(one)["traceEvents"]) > 3 * 7
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == sorted(p.name for p in (tmp_path / "one").iterdir())


def test_a_module_path_deeper_than_the_roll_up_is_charged_to_its_ancestor_at_that_depth(tmp_path, capsys):
    from provenance.core import attribution
    from provenance.timing import rollup

    assert attribution.ancestors("a.b.c") == ["a.b.c", "a.b", "a", rollup.ROOT]
    deep = ".".join(f"m{i}" for i in range(1000))
    found = attribution.ancestors(deep)
    assert len(found) == attribution.MAX_MODULE_DEPTH + 1 and found[0] == ".".join(f"m{i}" for i in range(64))
    from provenance.report.analyze.cost import load_profiles

    log = report_logs.write(tmp_path / "a.jsonl", report_logs.profiled(module=deep))
    rows = {r.key: r for r in rollup.rollup(load_profiles(log), "module")}
    assert max(len(key.split(".")) for key in rows) == attribution.MAX_MODULE_DEPTH
    assert rows[found[0]].median_ns == rows["m0"].median_ns > 0  # the deeper parts' time, at depth 64
    out = tmp_path / "out"
    code, err = report(capsys, log, "-o", out, "--strict")
    assert code == 0, err
    assert 'id="time"' in (out / directory(out)["compiles"][0]["pages"]["compile"]).read_text()


def test_the_rank_table_is_capped_at_rows_times_ranks_differing_rows_first(tmp_path, capsys, monkeypatch):
    import hostile_logs

    monkeypatch.setattr(ranks, "MAX_CELLS", 40 * 5)  # 40 ranks: 5 rows
    log = hostile_logs.rank_functions(40)
    same = report_logs.records(rank=39, fn="shared.fn", compile_id=7)[1:-1]
    other = report_logs.records(rank=38, fn="shared.fn", compile_id=7)[1:-1]
    other[-4]["ops"][1][2] = "sub"  # rank 38 runs another op: a desync, listed though it comes last
    log["r00039.jsonl"] += [r for r in same if r["type"] != "prov"]
    log["r00038.jsonl"] += [r for r in other if r["type"] != "prov"]
    out = tmp_path / "out"
    code, err = report(capsys, hostile_logs.write(tmp_path / "logs", log), "-o", out)
    assert code == 0, err
    page = (out / "distributed.html").read_text()
    table = page[page.index('class="grid ranks"'):]
    assert table.count('<tr class="') == 5 and 'class="desync"' in table and "shared.fn" in table
    assert "36 more compiles across ranks not listed" in page and "200 cells" in page


def test_a_fallback_line_quotes_a_few_split_reasons_and_counts_the_rest(tmp_path, capsys):
    import hostile_logs

    from provenance.report.analyze import fx_graphs

    out = tmp_path / "out"
    code, err = report(capsys, hostile_logs.write(tmp_path / "logs", hostile_logs.fx_split(50, 30)), "-o", out)
    assert code == 0, err
    page = (out / "graphs" / "log0-g1.html").read_text()
    lines = orjson.loads(re.search(r'<script type="application/json" id="fxlines">(.*?)</script>', page, re.S).group(1))
    fallback = [e for entries in lines.values() for e in entries if "fallback" in e]
    assert len(fallback) == 50
    for entry in fallback:
        assert len(entry["why"]) == fx_graphs.MAX_WHY + 1 and entry["why"][-1].startswith("and 28 more reasons")
    assert page.count("only an automatic torch fallback") >= 30  # the piece's row: every reason, once


def test_a_prologue_diff_compares_a_bounded_stretch_and_says_so(tmp_path, capsys, monkeypatch):
    import hostile_logs

    from provenance.report.analyze import recompiles

    fed = []
    real = difflib.unified_diff  # the module recompiles imports when it diffs

    def spy(a, b, *args, **kwargs):
        fed.append((len(a), len(b)))
        return real(a, b, *args, **kwargs)

    monkeypatch.setattr(difflib, "unified_diff", spy)
    out = tmp_path / "out"
    log = hostile_logs.write(tmp_path / "logs", hostile_logs.prologue_order(3 * recompiles.MAX_DIFF_INPUT))
    code, err = report(capsys, log, "-o", out, "--strict")
    assert code == 0, err
    assert fed and max(max(f) for f in fed) <= recompiles.MAX_DIFF_INPUT + 1
    page = (out / directory(out)["compiles"][1]["pages"]["compile"]).read_text()
    assert f"the first {recompiles.MAX_DIFF_INPUT} of each were compared" in page
    # a one-line change is diffed whole, numbered in the prologues
    out2 = tmp_path / "out2"
    log = hostile_logs.write(tmp_path / "logs2", hostile_logs.prologue_order(3 * recompiles.MAX_DIFF_INPUT,
                                                                              shuffled=False))
    assert report(capsys, log, "-o", out2)[0] == 0
    page = (out2 / directory(out2)["compiles"][1]["pages"]["compile"]).read_text()
    middle = 3 * recompiles.MAX_DIFF_INPUT // 2 + 2  # its line in the prologue (after `def prologue`)
    assert f"@@ -{middle - 1},3 +{middle - 1},3 @@" in page and "were compared" not in page


def test_a_full_disk_under_out_is_one_error_line(tmp_path, capsys, monkeypatch):
    import errno

    from provenance.report.render.output import ReportWriter

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ReportWriter, "write", full)
    code, err = report(capsys, report_logs.write(tmp_path / "a.jsonl", report_logs.records()), "-o", tmp_path / "out")
    assert code == 1 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (f"thunder-trace: error: cannot write the report into {tmp_path / 'out'}: "
                                            "No space left on device")


@pytest.mark.parametrize("run_events, max_runs", [(7, 3), (5, 2), (3, 4)])
def test_the_perfetto_merge_tree_writes_what_one_sort_writes(tmp_path, monkeypatch, run_events, max_runs):
    from provenance.report.render import perfetto

    def written(name: str) -> bytes:
        writer = perfetto.PerfettoWriter(str(tmp_path / name), None)
        rng = random.Random(1)
        writer.process(0, "a")
        writer.process(1, "b")
        for i in range(2000):  # ties in every field but the name, durations or none
            writer._emit({"ph": "X", "name": f"e{i}", "pid": rng.randrange(2), "tid": rng.randrange(4)},
                         rng.randrange(100), rng.choice([None, rng.randrange(50)]))
        writer.close()
        return (tmp_path / name).read_bytes()

    one = written("one.json")
    monkeypatch.setattr(perfetto, "RUN_EVENTS", run_events)
    monkeypatch.setattr(perfetto, "MAX_RUNS", max_runs)  # several levels of runs merged
    assert written("merged.json") == one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["merged.json", "one.json"]  # no spool left


def test_a_memory_record_of_an_unknown_compile_is_skipped_not_a_phantom_compile(tmp_path, capsys):
    """Traces of a compile whose start is missing still get a page (begun for them); a memory record
    alone has nothing to show (its ops are a trace's): counted and skipped, no 'incomplete' compile."""
    records = report_logs.records()
    end = next(i for i, r in enumerate(records) if r["type"] == "compile_end")
    records[end + 1:end + 1] = report_logs.memory(compile_id=99)
    out = tmp_path / "out"
    code, err = report(capsys, report_logs.write(tmp_path / "a.jsonl", records), "-o", out)
    assert code == 0, err
    assert [(c["compile"], c["status"]) for c in directory(out)["compiles"]] == [(1, "ok")]
    assert "memory of compile 99 without its compile_start: skipped" in err


# -- an unusable part of a compile: one rule, one wording ----------------------------------------------
@pytest.mark.parametrize(("part", "target", "records"), [
    ("its memory records", "provenance.allocation.record.decode", report_logs.with_memory),
    ("its profile", "provenance.report.analyze.cost.compile_time", report_logs.profiled),
])
def test_a_part_that_cannot_be_read_costs_that_part_and_is_named_once(tmp_path, capsys, monkeypatch, part, target,
                                                                      records):
    """Whatever reading a part of a compile raises of the UNUSABLE kinds, the compile stays, the part
    is left out, and the problem says so in the one wording every part uses."""
    def unusable(*args, **kwargs):
        raise KeyError("odd field")

    monkeypatch.setattr(target, unusable)
    out = tmp_path / "out"
    code, err = report(capsys, report_logs.write(tmp_path / "a.jsonl", records()), "-o", out)
    assert code == 0 and "Traceback" not in err, err
    (entry,) = directory(out)["compiles"]
    assert entry["status"] == "ok" and (out / entry["pages"]["compile"]).is_file()
    assert f"compile {entry['key']}: {part} unusable: KeyError: 'odd field'" in all_text(out) + err
