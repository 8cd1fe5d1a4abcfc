"""`thunder-trace report` on OTLP/JSON exports (issue 27): spans of a real Thunder run, received by
the real rotel collector and written as OTLP/JSON (protobuf's JSON mapping), reported alone, gzip'd,
merged with the same run's JSONL log, per rank for a 2-rank torchrun run, and fuzzed."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import hostile_logs
import pytest
from otel_collector import Collector
from paths import ROOT

from provenance.cli import main

PROGRAM = textwrap.dedent("""
    import torch, thunder, provenance

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = torch.nn.Linear(8, 8), torch.nn.Linear(8, 1)

        def forward(self, x):
            h = torch.relu(self.fc1(x))  # otlp: hidden
            return self.fc2(h * 2)  # otlp: out

    jm = thunder.jit(Net())
    with provenance.scope("train", role="custom", step=1):
        jm(torch.randn(4, 8)).sum().backward()  # otlp: first call
    jm(torch.randn(6, 8)).sum().backward()  # otlp: recompile
    jm(torch.randn(6, 8)).sum().backward()  # otlp: profiled
    try:
        thunder.jit(lambda x: x @ torch.ones(3, 3))(torch.ones(2, 2))  # otlp: fails
    except RuntimeError:
        pass
""")


def _line(marker: str) -> int:
    return next(i for i, text in enumerate(PROGRAM.splitlines(), 1) if f"# otlp: {marker}" in text)


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "THUNDER_TRACE"))}
    return {**env, **extra}


def _wait(path: Path, predicate, timeout: float = 30.0) -> None:
    """Until the export holds what the run sent (the batch processor sends within 0.5 s, rotel within 0.2 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and predicate(path.read_text()):
            time.sleep(0.5)  # the requests of the same flush
            return
        time.sleep(0.2)
    raise AssertionError(f"the collector did not deliver: {path.read_text()[-2000:] if path.exists() else 'nothing'}")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The program, traced to a JSONL log and through rotel to an OTLP/JSON export, one profiled call."""
    base = tmp_path_factory.mktemp("otlp")
    program, logs, export = base / "otlp_program.py", base / "logs", base / "export.json"
    program.write_text(PROGRAM)
    collector = Collector(base)
    collector.sink.export = export
    try:
        done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=300,
                              env=_env(THUNDER_TRACE=str(logs), THUNDER_TRACE_PROFILE="1",
                                       OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint, OTEL_SERVICE_NAME="otlp-demo"))
        assert done.returncode == 0, done.stderr[-3000:]
        _wait(export, lambda text: "thunder.profiled backward" in text and "STATUS_CODE_ERROR" in text)
    finally:
        collector.close()
    (log,) = logs.glob("*.jsonl")
    return {"program": program, "log": log, "export": export, "base": base}


def _report(path: Path, out: Path, *extra: str) -> tuple[int, dict]:
    code = main(["report", str(path), "-o", str(out), "--no-browser", *extra])
    directory = json.loads((out / "compile_directory.json").read_text()) if code in (0, 1) else {}
    return code, directory


def _essentials(entry: dict) -> dict:
    """What a compile's entry says that spans carry too."""
    return {"compile": entry["compile"], "fn": entry["fn"], "status": entry["status"], "index": entry["index"],
            "call_site": entry["call_site"],
            "recompile_reason": entry["recompile_reason"], "seconds": round(entry["seconds"], 6),
            "phases": [(p["name"], p["depth"], p["start_ns"], p["end_ns"]) for p in entry["phases"]],
            "error": entry["error"]}


def test_an_export_alone_lists_its_compiles_call_sites_phases_and_recompile_reasons(run, tmp_path, capsys):
    gz = tmp_path / "traces.json.gz"  # gzip'd, as exports usually are; told by content, not by name
    gz.write_bytes(gzip.compress(run["export"].read_bytes()))
    code, spans = _report(gz, tmp_path / "from_spans")
    assert code == 0, capsys.readouterr().err
    code, logged = _report(run["log"], tmp_path / "from_log")
    assert code == 0
    compiles = spans["compiles"]
    assert [(c["compile"], c["status"]) for c in compiles] == [(1, "ok"), (2, "ok"), (3, "failed")]
    name = run["program"].name
    assert [c["call_site"] for c in compiles] == [f"{name}:{_line('first call')}", f"{name}:{_line('recompile')}",
                                                  f"{name}:{_line('fails')}"]
    assert compiles[1]["recompile_reason"] == "x: shape [4, 8] → [6, 8]"
    assert {"acquire_trace", "grad", "codegen"} <= {p["name"] for p in compiles[0]["phases"]}
    assert compiles[2]["error"]["type"] == "builtins.RuntimeError"
    # what spans carry is what the log says, figure for figure
    assert list(map(_essentials, compiles)) == list(map(_essentials, logged["compiles"]))
    assert [c["final"] for c in compiles] == [c["final"] for c in logged["compiles"]]
    # the profiled call: its time, as the log has it (the top lines sum to the ops' share)
    profiled, measured = compiles[1]["time"], logged["compiles"][1]["time"]
    assert profiled["wall_ns"] == measured["wall_ns"] and profiled["attributed_ns"] == measured["attributed_ns"]
    top = {row["key"]: row for row in profiled["lines"]}
    for row in measured["lines"][:5]:  # the span's top lines, each with the log's time, forward and backward
        found = top[row["key"]]
        assert found["median_ns"] == pytest.approx(row["median_ns"], abs=1000), (row, found)
        assert found["forward_ns"] == pytest.approx(row["forward_ns"], abs=1000), (row, found)
        assert found["backward_ns"] + found["recompute_ns"] == pytest.approx(row["backward_ns"] + row["recompute_ns"],
                                                                             abs=1000), (row, found)
    assert f"{run['program']}:{_line('hidden')}" in top
    # the pages say what spans lack, and how to get it
    page = (tmp_path / "from_spans" / compiles[1]["pages"]["compile"]).read_text()
    assert "from OpenTelemetry spans" in page and "THUNDER_TRACE=DIR" in page and "Why it compiled again" in page
    assert "source" not in compiles[1]["pages"]  # no source view: no trace text in spans
    for page in ("memory.html", "graphs.html"):  # run pages whose data spans lack say so
        assert "read from an OTLP/JSON export" in (tmp_path / "from_spans" / page).read_text(), page
    index = (tmp_path / "from_spans" / "index.html").read_text()
    assert "read from an OTLP/JSON export (traces.json.gz)" in index and "otlp-demo" in index
    (log,) = spans["logs"]
    assert log["header"]["otlp"] == {"file": "traces.json.gz", "service": "otlp-demo", "spans": log["header"]["otlp"]
                                     ["spans"]} and log["header"]["pid"] == logged["logs"][0]["header"]["pid"]


def test_merged_with_its_jsonl_log_it_is_the_log_s_report_nothing_twice(run, tmp_path, capsys):
    both = tmp_path / "both"
    both.mkdir()
    (both / run["log"].name).write_bytes(run["log"].read_bytes())
    (both / "export.json").write_bytes(run["export"].read_bytes())
    code, merged = _report(both, tmp_path / "merged")
    err = capsys.readouterr().err
    assert code == 0 and "merged with their JSONL log" in err, err
    code, logged = _report(run["log"], tmp_path / "logged")
    assert code == 0
    assert len(merged["logs"]) == 1 and not merged["logs"][0]["header"].get("otlp")
    strip = ("generator",)
    assert {k: v for k, v in merged.items() if k not in strip} == {k: v for k, v in logged.items() if k not in strip}


def test_an_export_and_a_log_of_different_processes_are_both_reported(run, tmp_path, capsys):
    """A process whose log is missing is read from its spans, beside the logged ones."""
    both = tmp_path / "both"
    both.mkdir()
    (both / run["log"].name).write_bytes(run["log"].read_bytes())
    other = run["export"].read_text().replace('"intValue": "' + str(_pid(run["log"])) + '"', '"intValue": "1"')
    (both / "export.json").write_text(other)
    code, merged = _report(both, tmp_path / "merged")
    assert code == 0, capsys.readouterr().err
    assert [bool(log["header"].get("otlp")) for log in merged["logs"]] == [False, True]
    assert len(merged["compiles"]) == 6


def _pid(log: Path) -> int:
    return json.loads(log.read_text().splitlines()[0])["pid"]


@pytest.mark.slow
def test_two_ranks_through_one_collector_are_reported_per_rank(tmp_path, capsys):
    export = tmp_path / "export.json"
    collector = Collector(tmp_path)
    collector.sink.export = export
    try:
        done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                               str(ROOT / "examples" / "tensor_parallel.py")], capture_output=True, text=True,
                              timeout=600, env=_env(OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
                                                    OTEL_SERVICE_NAME="tp-demo"))
        assert done.returncode == 0, done.stderr[-3000:]
        _wait(export, lambda text: '"key": "thunder.rank", "value": {"intValue": "0"}' in text
              and '"key": "thunder.rank", "value": {"intValue": "1"}' in text and text.count("thunder.compile ") >= 2)
    finally:
        collector.close()
    code, report = _report(export, tmp_path / "report")
    assert code == 0, capsys.readouterr().err
    assert [log["rank"] for log in report["logs"]] == [0, 1]
    assert {log["header"]["world_size"] for log in report["logs"]} == {2}
    by_rank = {}
    for c in report["compiles"]:
        by_rank.setdefault(c["rank"], []).append(c)
    assert sorted(by_rank) == [0, 1]
    for rank, compiles in by_rank.items():
        assert all(c["call_site"].startswith("tensor_parallel.py:") for c in compiles), compiles
        assert all(c["phases"] for c in compiles) and all(c["key"].startswith(f"r{rank}-") for c in compiles)
    distributed = (tmp_path / "report" / "distributed.html").read_text()
    assert "not compared" in distributed and "in sync" not in distributed  # no traces in spans: no claim
    code, only = _report(export, tmp_path / "rank1", "--rank", "1")
    assert code == 0 and [log["rank"] for log in only["logs"]] == [1]


# -- hostile exports --------------------------------------------------------------------------

JUNK = [None, -1, 0, 2**63, 2**64 - 1, 1.5, True, "", "\x1b[31m", "</script><img src=x onerror=alert(1)>", "x" * 5000,
        [], [[[[[]]]]], {}, {"resourceSpans": None}, "ZZZZ", "00", 1e300]


def _compile_of(request: str) -> int | None:
    """The compile id of a one-span request's compile span, None for any other span."""
    (span,) = json.loads(request)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    if not span["name"].startswith("thunder.compile "):
        return None
    return next(int(a["value"]["intValue"]) for a in span["attributes"] if a["key"] == "thunder.compile_id")


def _mutate(value, rng: random.Random, depth: int = 0):
    """A JSON value with one of its parts replaced by junk (dicts and lists walked at random)."""
    if isinstance(value, dict) and value and depth < 12:
        key = rng.choice(list(value))
        out = dict(value)
        roll = rng.random()
        if roll < 0.15:
            del out[key]
        elif roll < 0.35:
            out[key] = rng.choice(JUNK)
        else:
            out[key] = _mutate(value[key], rng, depth + 1)
        return out
    if isinstance(value, list) and value and depth < 12:
        i = rng.randrange(len(value))
        out = list(value)
        roll = rng.random()
        if roll < 0.1:
            out.append(out[i])  # a span (or attribute) twice
        elif roll < 0.3:
            out[i] = rng.choice(JUNK)
        else:
            out[i] = _mutate(value[i], rng, depth + 1)
        return out
    return rng.choice(JUNK)


def _one_span_per_request(lines: list[str]) -> list[str]:
    """The export as one request per span: still valid OTLP/JSON, and a shape that does not depend on how
    the collector happened to batch the spans (a loaded machine sends fewer, larger requests)."""
    out = []
    for text in lines:
        for resource in json.loads(text)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    out.append(json.dumps({"resourceSpans": [{**resource, "scopeSpans": [{**scope,
                                                                                          "spans": [span]}]}]}))
    return out


def test_hostile_exports_are_counted_never_fatal(run, tmp_path, capsys, monkeypatch):
    """Seeded mutations of the real export (junk values, spans twice, cut and non-UTF-8 lines, deep
    nesting, another signal, gzip cut short): never a crash, bad input counted, the spool removed, and
    every compile whose span came through intact reported."""
    spool = tmp_path / "tmp"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    lines = _one_span_per_request(run["export"].read_text().splitlines())
    assert len(lines) > 20
    rng = random.Random(27)
    reported = []
    for n in range(20):
        hostile, intact = [], set()
        for text in lines:
            roll = rng.random()
            if roll < 0.5:
                hostile.append(json.dumps(_mutate(json.loads(text), rng), ensure_ascii=rng.random() < 0.5))
            elif roll < 0.6:
                hostile.append(text[: rng.randrange(len(text))])  # cut
            elif roll < 0.65:
                hostile.append("\xff\xfe" + text)
            else:
                hostile.append(text)
                intact.add(_compile_of(text))
        hostile.insert(rng.randrange(len(hostile) + 1), '{"resourceSpans": [' * 5000)  # deep nesting
        hostile.insert(rng.randrange(len(hostile) + 1), '{"resourceMetrics": []}')  # another signal: passed over
        path = tmp_path / f"hostile{n}.json"
        data = ("\n".join(hostile) + ("\n" if rng.random() < 0.7 else "")).encode("utf-8", "surrogateescape")
        cut_short = n % 2 and rng.random() >= 0.7
        path.write_bytes(gzip.compress(data)[: -20 if cut_short else None] if n % 2 else data)
        out = tmp_path / f"out{n}"
        code = main(["report", str(path), "-o", str(out), "--no-browser", "--strict"])
        err = capsys.readouterr().err
        assert code in (1, 2), err  # bad input is counted (--strict), or the export had no span left
        if code == 1:
            index = (out / "index.html").read_text()
            assert "problems" in index and "<img src=x" not in index
            compiles = json.loads((out / "compile_directory.json").read_text())["compiles"]
            reported.append(len(compiles))
            if not cut_short:  # an intact compile span is reported (a mangled copy sent first may stand for it)
                assert len(compiles) >= len(intact - {None}), (intact, compiles)
        else:
            assert cut_short or intact <= {None}, intact
            assert "without thunder-provenance spans" in err or "not a THUNDER_TRACE log" in err, err
        assert not list(spool.iterdir())
    assert len(reported) >= 10 and max(reported) >= 2, reported  # what was good in them is reported


def test_an_overlong_line_and_a_truncated_tail_are_counted_and_the_rest_read(run, tmp_path, capsys, monkeypatch):
    from provenance.report.read import otlp_json

    lines = run["export"].read_bytes().splitlines(keepends=True)
    monkeypatch.setattr(otlp_json, "MAX_LINE_BYTES", max(map(len, lines)) + 10)
    path = tmp_path / "export.json"
    path.write_bytes(b"".join(lines) + b'{"resourceSpans": [' + b" " * (max(map(len, lines)) + 100) + b"]}\n"
                     + b"not json\n" + lines[0][:-30])
    out = tmp_path / "out"
    code = main(["report", str(path), "-o", str(out), "--no-browser"])
    err = capsys.readouterr().err
    assert code == 0 and "3 bad lines" in err, err
    directory = json.loads((out / "compile_directory.json").read_text())
    assert len(directory["compiles"]) == 3
    reasons = " ".join(p["reason"] for p in directory["problems"]["entries"])
    assert "longer than" in reasons and "truncated last line" in reasons and "not an OTLP/JSON" in reasons
    # a whole last line without its newline (a writer that does not end the file with one) is read, not counted
    whole = tmp_path / "no_newline.json"
    whole.write_bytes(b"".join(lines).rstrip(b"\n"))
    code, unterminated = _report(whole, tmp_path / "whole")
    assert code == 0 and "bad line" not in capsys.readouterr().err
    assert [c["compile"] for c in unterminated["compiles"]] == [1, 2, 3]


def test_pages_from_spans_show_phases_and_why_and_say_what_spans_lack(run, tmp_path, browser, capsys):
    """In Chromium: the index says the run was read from an export, a recompile's page shows its
    phase bar, its reason and its time, and the note that names THUNDER_TRACE; no script error."""
    out = tmp_path / "report"
    assert main(["report", str(run["export"]), "-o", str(out), "--no-browser"]) == 0, capsys.readouterr().err
    index = browser.open(out / "index.html")
    assert "read from an OTLP/JSON export (export.json)" in index.inner_text(".otlp-note")
    assert index.locator(".trie .cref").count() == 3
    index.close()
    (page_file,) = [p for p in (out / "compiles").glob("*-c2.html")]
    page = browser.open(page_file)
    assert "THUNDER_TRACE=DIR" in page.inner_text(".otlp-note") and page.locator(".otlp-note").is_visible()
    assert "x: shape [4, 8] → [6, 8]" in page.inner_text("#why")
    # acquire_trace in the bar: its title names it (its label shows only if it took 2% of the compile)
    assert page.locator(".timeline.phases .seg").count() >= 5
    assert page.locator(".timeline.phases .seg[title*='acquire_trace']").count() >= 1
    assert page.locator("#time").count() == 1 and f"otlp_program.py:{_line('hidden')}" in page.inner_text("#time")
    browser.shot(page, "otlp-compile")
    page.close()
    assert browser.errors == [] and browser.dialogs == []


def test_reading_bad_lines_and_repeated_spans_keeps_memory_flat(run, tmp_path):
    """tracemalloc's peak while reading: 10x the bad lines, or the same spans sent 3 times (an
    exporter's retries), costs no more memory (the first bad lines and each span once are kept)."""
    import tracemalloc

    from provenance.report.read.otlp_json import OtlpExport

    good = run["export"].read_bytes()

    def peak(data: bytes) -> int:
        path = tmp_path / "export.json"
        path.write_bytes(data)
        export = OtlpExport()
        tracemalloc.start()
        try:
            export.read(path)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    bad = b'{"resourceSpans": [{"resource": 7}]}\n'
    assert peak(good + bad * 2_000) < 1.5 * peak(good + bad * 200)
    assert peak(good * 3) < 1.5 * peak(good)


def _as_collector_writes(line: str) -> str:
    """An export request as the OpenTelemetry Collector's file exporter writes it (OTLP/JSON's own
    rules over protobuf's): ids in hex, enums as integers."""
    import base64

    request = json.loads(line)
    for resource_spans in request["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64decode(span[key]).hex()
                span["kind"] = 1
                if span.get("status", {}).get("code"):
                    span["status"]["code"] = 2
    return json.dumps(request)


def test_an_export_as_the_collector_writes_it_reads_the_same(run, tmp_path, capsys):
    hexed = tmp_path / "hex" / "traces.json"
    hexed.parent.mkdir()
    hexed.write_text("".join(_as_collector_writes(line) + "\n" for line in run["export"].read_text().splitlines()))
    assert '"spanId": "' in hexed.read_text() and "SPAN_KIND" not in hexed.read_text()
    code, collector = _report(hexed, tmp_path / "from_hex")
    assert code == 0, capsys.readouterr().err
    base = tmp_path / "b64" / "traces.json"
    base.parent.mkdir()
    base.write_bytes(run["export"].read_bytes())
    code, sdk = _report(base, tmp_path / "from_b64")
    assert code == 0
    assert collector["compiles"] == sdk["compiles"] and collector["compiles"][1]["phases"]


FUSING = textwrap.dedent("""
    import torch, thunder
    from thunder.executors.torch_compile import torch_compile_ex

    def f(x):
        return torch.sin(x) * 2 + torch.cos(x)  # otlp: fused

    jf = thunder.jit(f, executors=[torch_compile_ex, *thunder.get_default_executors()])
    jf(torch.randn(8))  # otlp: fusing call
""")


@pytest.mark.slow
def test_executor_compiles_from_spans_are_the_log_s(tmp_path, capsys):
    """torch.compile's fusion, compiled at the first call (inductor's C++ build): its span is the
    compile's executor compile on the page, as the log has it."""
    program, logs, export = tmp_path / "fusing.py", tmp_path / "logs", tmp_path / "export.json"
    program.write_text(FUSING)
    collector = Collector(tmp_path)
    collector.sink.export = export
    try:
        done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=600,
                              env=_env(THUNDER_TRACE=str(logs), OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint))
        assert done.returncode == 0, done.stderr[-3000:]
        _wait(export, lambda text: "thunder.executor_compile " in text and "thunder.compile " in text)
    finally:
        collector.close()
    code, spans = _report(export, tmp_path / "from_spans")
    assert code == 0, capsys.readouterr().err
    (log,) = logs.glob("*.jsonl")
    code, logged = _report(log, tmp_path / "from_log")
    (compiled,) = spans["compiles"]
    assert compiled["executor_compiles"] and compiled["executor_compiles"] == logged["compiles"][0]["executor_compiles"]
    assert compiled["seconds"] == pytest.approx(logged["compiles"][0]["seconds"])
    page = (tmp_path / "from_spans" / compiled["pages"]["compile"]).read_text()
    assert "Executor compiles at the first call" in page and compiled["executor_compiles"][0]["fusion"] in page


def test_file_names_that_are_not_utf8_are_shown_escaped(run, tmp_path, capsys):
    """A log and an export whose names hold a byte that is not UTF-8 (0xff), in a directory given to
    report: both reported, each name shown as `\\xff` on the pages and in compile_directory.json."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (Path(os.fsdecode(bytes(logs) + b"/thunder_trace.\xff.jsonl"))).write_bytes(run["log"].read_bytes())
    other = tmp_path / "other"
    other.mkdir()
    (Path(os.fsdecode(bytes(other) + b"/export\xfe.json"))).write_bytes(run["export"].read_bytes())
    for given, shown in ((logs, "thunder_trace.\\xff.jsonl"), (other, "export\\xfe.json")):
        out = tmp_path / f"out_{given.name}"
        code, directory = _report(given, out, "--strict")
        assert code == 0, capsys.readouterr().err
        assert len(directory["compiles"]) == 3
        (file,) = [log["file"] for log in directory["logs"]]  # an export's: named after it, as a log of its process
        assert file == shown if given is logs else file.startswith("export_xfe.json.")
        assert file in (out / "index.html").read_text()


def test_a_compressed_export_that_expands_without_bound_is_cut_at_its_bound(run, tmp_path, capsys, monkeypatch):
    """A few KB of gzip that inflate to many MB: read up to MAX_EXPANSION times the file's size (or
    MIN_EXPANDED_BYTES), the rest skipped and counted; what came before the bomb is reported."""
    import gzip

    from provenance.report.read import exports

    monkeypatch.setattr(exports, "MIN_EXPANDED_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(run["export"].read_bytes() + b"\n" * (64 << 20)))
    assert bomb.stat().st_size * exports.MAX_EXPANSION < 64 << 20  # so the bound is what stops the reading
    code, directory = _report(bomb, tmp_path / "out")
    assert code == 0, capsys.readouterr().err
    assert len(directory["compiles"]) == 3
    reasons = [p["reason"] for p in directory["problems"]["entries"]]
    assert any("expands past" in r and "the rest is skipped" in r for r in reasons), reasons


@pytest.mark.parametrize("damage", ["cut short", "bytes after its end"])
def test_a_damaged_compressed_export_is_bad_lines_never_refused_whole(run, tmp_path, capsys, damage):
    """docs/report.md: a cut file is counted as bad lines, never fatal; so is a gzip file with bytes
    after its end (a second write appended to it)."""
    import gzip

    lines = run["export"].read_bytes()
    whole = gzip.compress(lines + lines)  # the same requests twice (a resent batch): cut in the second
    path = tmp_path / "export.json.gz"
    path.write_bytes(whole[: len(whole) * 3 // 4] if damage == "cut short" else whole + b"not gzip at all")
    code, directory = _report(path, tmp_path / "out")
    err = capsys.readouterr().err
    assert code == 0, err
    assert "not a THUNDER_TRACE log" not in err and len(directory["compiles"]) == 3
    reasons = [p["reason"] for p in directory["problems"]["entries"]]
    assert any("the compressed file ends early or is corrupt" in r for r in reasons), reasons



def test_a_small_compressed_export_cut_short_is_read_as_far_as_it_goes(tmp_path, capsys):
    """Python 3.11's GzipFile drops what it decompressed of a file cut short (EOFError): a small export
    cut at 60% of its bytes was refused whole ("not a THUNDER_TRACE log"). Every request before the cut
    is read, the one it cut is the problem that says so."""
    import zlib

    export = hostile_logs.write(tmp_path / "in", hostile_logs.otlp_export(20_000, per_line=2))
    whole = gzip.compress(export.read_bytes())
    cut = whole[: len(whole) * 6 // 10]
    path = tmp_path / "export.json.gz"
    path.write_bytes(cut)
    before = zlib.decompressobj(wbits=31).decompress(cut).count(b"\n")  # the whole requests before the cut
    assert 0 < before < len(export.read_bytes().splitlines())
    code, directory = _report(path, tmp_path / "out")
    err = capsys.readouterr().err
    assert code == 0, err
    assert "not a THUNDER_TRACE log" not in err and len(directory["compiles"]) == 2 * before
    (problem,) = directory["problems"]["entries"]
    assert "the compressed file ends early" in problem["reason"] and "cut short" in problem["reason"], problem


def test_millions_of_blank_lines_in_a_compressed_export_are_skipped_in_bulk(tmp_path, capsys, monkeypatch):
    """A few KB of gzip that expand to 4 million newlines (within MIN_EXPANDED_BYTES) cost the reader
    a few reads, not one per blank line; the requests around them are read, a bad line after them is
    listed with its own line number."""
    import contextlib

    from provenance.report.read import otlp_json

    reads = 0
    opened = otlp_json.open_export

    @contextlib.contextmanager
    def counting(path):
        with opened(path) as f:
            readline = f.readline

            def counted(size: int) -> bytes:
                nonlocal reads
                reads += 1
                return readline(size)

            f.readline = counted
            yield f

    monkeypatch.setattr(otlp_json, "open_export", counting)
    first = hostile_logs.write(tmp_path / "in", hostile_logs.otlp_export(1, per_line=1)).read_bytes()
    second = hostile_logs.write(tmp_path / "in2", hostile_logs.otlp_export(1, per_line=2)).read_bytes()
    blank = 4 << 20
    path = tmp_path / "blank.json.gz"
    path.write_bytes(gzip.compress(first + b"\n" * blank + b" \t\r\n" * 1000 + b"not json\n" + second))
    code, directory = _report(path, tmp_path / "out")
    assert code == 0, capsys.readouterr().err
    assert reads < 10, reads  # one per line that is not blank, and the end
    assert len(directory["compiles"]) == 2  # compile 1, twice (the first sent is kept), and compile 2
    (problem,) = directory["problems"]["entries"]
    assert problem["line"] == 1 + blank + 1000 + 1 and "not an OTLP/JSON export request" in problem["reason"], problem


def test_a_full_tmpdir_spools_the_export_beside_out(run, tmp_path, capsys, monkeypatch):
    """TMPDIR full (a real 16 KB tmpfs, filled) while OUT has room: the logs read from the export are
    written beside OUT instead, and removed after; the report is the same."""
    import errno
    import tempfile

    full = tmp_path / "full"
    full.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(full)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root, or no mount namespace of our own)")
    try:
        with pytest.raises(OSError) as filled:
            (full / "filler").write_bytes(b"x" * (1 << 20))
        assert filled.value.errno == errno.ENOSPC
        monkeypatch.setattr(tempfile, "tempdir", str(full))
        code, directory = _report(run["export"], tmp_path / "out")
        assert code == 0, capsys.readouterr().err
        assert len(directory["compiles"]) == 3
        assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "out"]  # the spool beside OUT: gone
        assert sorted(p.name for p in full.iterdir()) == ["filler"]
    finally:
        subprocess.run(["umount", str(full)], check=True)


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_a_report_ended_by_a_signal_removes_its_spool(run, tmp_path, signame):
    import signal

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    program = textwrap.dedent(f"""
        import sys, time
        import provenance.report.build as build
        from provenance.cli import main
        def slow(*args, **kwargs):
            print("building", flush=True)
            time.sleep(60)
        build.build_report = slow
        import provenance.report.report_command as command
        command.build_report = slow
        sys.exit(main(["report", {str(run["export"])!r}, "-o", {str(tmp_path / "out")!r}, "--no-browser"]))
    """)
    child = subprocess.Popen([sys.executable, "-c", program], env=_env(TMPDIR=str(tmp)), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "building\n", child.stderr.read()
        (spool,) = tmp.iterdir()
        assert spool.name.startswith("thunder-trace-otlp-") and any(spool.iterdir())
        child.send_signal(getattr(signal, signame))
        assert child.wait(timeout=30) == 128 + getattr(signal, signame)
    finally:
        child.kill()
    assert list(tmp.iterdir()) == []


def test_unicode_digits_in_a_top_line_are_not_a_line_number(run, tmp_path, capsys):
    """`str.isdigit()` takes '١٢' (Arabic-Indic digits) and superscripts; a line number is ASCII digits:
    such a top line is a line of its own name, and nothing raises."""
    text = run["export"].read_text()
    program = str(run["program"])
    assert f'"{program}:10"' in text
    for digits in ("\u0661\u0662", "\u00b2"):
        path = tmp_path / f"export_{len(digits)}.json"
        path.write_text(text.replace(f'"{program}:10"', f'"{program}:{digits}"'))
        code, directory = _report(path, tmp_path / f"out_{len(digits)}")
        assert code == 0, capsys.readouterr().err
        assert len(directory["compiles"]) == 3
