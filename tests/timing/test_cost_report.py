"""Profiles in logs, the report and OpenTelemetry: the log round trip (the report's roll-up of a
log is provenance.cost() of the process that wrote it), the Time section, icicle, gutter and op
times on a small known log (in Chromium), stragglers across ranks, bad profile records, and the
OTel histogram and spans of profiled runs. The 2-rank tensor-parallel run is at the end (slow)."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import models
import orjson
import pytest
import report_logs
import thunder
import torch
from collecting import Collect
from paths import ROOT, SUPPORT

import provenance
from provenance.cli import main
from provenance.log import schema
from provenance.report.analyze.cost import load_profiles
from provenance.timing.rollup import BY, rollup, summary

ARTIFACTS = ROOT / "test-artifacts" / "report"


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _report(logs: Path, out: Path, *args: str) -> Path:
    assert main(["report", str(logs), "-o", str(out), "--no-browser", *args]) == 0
    return out


def _directory(out: Path) -> dict:
    return orjson.loads((out / "compile_directory.json").read_bytes())


# -- the log round trip, on a real compile ------------------------------------------------------------
def test_the_report_rolls_a_log_up_as_cost_did_in_the_process_that_wrote_it(tmp_path, one_thread):
    provenance.enable(tmp_path / "logs", profile=2)
    try:
        jm = thunder.jit(models.Net(n=8, depth=2))
        x = torch.randn(4, 8)
        for _ in range(3):
            models.forward_backward(jm, x)
        live = {by: provenance.cost(jm, by) for by in BY}
        (profile,) = provenance.profiles(jm)
    finally:
        provenance.disable()

    records = list(provenance.load(tmp_path / "logs"))
    logged_records = [r.data for r in records if r.type.startswith("profile_")]
    assert [(r["type"], r["trace"]) for r in logged_records] == [
        ("profile_ops", "forward"), ("profile_ops", "backward"), ("profile_call", "forward"),
        ("profile_call", "backward"), ("profile_call", "forward"), ("profile_call", "backward")]
    assert all(schema.problems(r) == [] for r in logged_records)

    (logged,) = load_profiles(tmp_path / "logs")
    for by in BY:
        assert rollup([logged], by) == live[by], by
    for name, timed in profile.traces.items():
        again = logged.traces[name]
        assert again.op_ns == timed.op_ns and again.wall_ns == timed.wall_ns and again.calls == timed.calls == 2
        assert [(o.position, o.name, o.record, o.printed) for o in again.ops] == [
            (o.position, o.name, o.record, o.printed) for o in timed.ops]

    out = _report(tmp_path / "logs", tmp_path / "out")
    (entry,) = _directory(out)["compiles"]
    time = entry["time"]
    totals = summary([profile])  # per measured call: the medians
    assert time["calls"] == 2 and time["wall_ns"] == round(totals["wall_ns"])
    assert time["attributed_ns"] == round(totals["attributed_ns"])
    assert [(r["key"], r["median_ns"], r["backward_ns"]) for r in time["lines"]] == [
        (r.key, round(r.median_ns), round(r.backward_ns)) for r in live["line"][:10]]
    page = (out / entry["pages"]["compile"]).read_text()
    assert 'id="time"' in page and 'class="icicle"' in page
    # every timed op of the two final traces shows its time: the ops table's indices name their ops
    timed = [len(t["c"]) // 3 for t in report_logs.page_traces(page) if "c" in t]  # [op, heat, time, ...]
    assert sum(timed) == sum(len(t.ops) for t in profile.traces.values()) and len(timed) == 2
    first = re.search(r'<table class="grid time" data-by="line">.*?<tr class="k-\w+" data-key="([^"]+)"', page, re.S)
    assert first.group(1) == live["line"][0].key




def test_a_call_record_goes_only_where_its_ops_table_went(tmp_path, one_thread):
    provenance.enable(tmp_path / "logs", profile=2)
    late = Collect()
    try:
        jm = thunder.jit(models.Net(n=8, depth=1))
        x = torch.randn(4, 8)
        models.forward_backward(jm, x)  # compiled: its ops tables are in the log
        provenance.add_exporter(late)  # joins now: it never gets them, nor the calls
        for _ in range(2):
            models.forward_backward(jm, x)
    finally:
        provenance.disable()
    assert not [e for e in late.events if e["type"].startswith("profile_")]
    assert [r.type for r in provenance.load(tmp_path / "logs") if r.type.startswith("profile_")] == [
        "profile_ops", "profile_ops"] + ["profile_call"] * 4


def test_no_profile_no_time(tmp_path):
    log = report_logs.write(tmp_path / "logs" / "a.jsonl", report_logs.records())
    out = _report(log, tmp_path / "out")
    (entry,) = _directory(out)["compiles"]
    assert entry["time"] is None
    assert 'id="time"' not in (out / entry["pages"]["compile"]).read_text()
    assert "No profiled call in these logs" in (out / "time.html").read_text()


# -- a small known log ------------------------------------------------------------------------------------
# report_logs.profiled(): 2 calls; per call, forward mul (line 10) 3 ms, add (line 11) 1 ms, del 20 us,
# backward mul' 2 ms, add' 0.5 ms, del 20 us, and 0.1 ms between ops in each trace: 6.74 ms per call.
WALL_MS = 3 + 1 + 0.02 + 2 + 0.5 + 0.02 + 0.2


def test_bad_profile_records_are_named_and_skipped(tmp_path, capsys):
    records = report_logs.profiled()
    at = next(i for i, r in enumerate(records) if r["type"] == "profile_ops")
    call = next(r for r in records if r["type"] == "profile_call")
    bad = [
        {**call, "compile": 7},  # no ops table for compile 7
        {**call, "op_ns": [1, 2]},  # not one time per op
        {**call, "op_ns": [-1, 2, 3]},
        {**records[at], "ops": [[0, "mul", 2, 0]]},  # a second table
        {**records[at], "compile": 8, "ops": [[0, "mul"]]},
        {**call, "trace": "sideways"},
        {**records[at], "compile": 9},  # a valid table of a compile the log never starts
    ]
    spaced = json.dumps({**call, "call": 3}).encode() + b"\n"  # `"type": "profile_call"`: found all the same
    items = records[:at + 2] + bad + [spaced] + records[at + 2:]
    log = report_logs.write(tmp_path / "logs" / "a.jsonl", items)
    assert main(["report", str(log), "-o", str(tmp_path / "out"), "--no-browser", "--strict"]) == 1
    problems = _directory(tmp_path / "out")["problems"]
    reasons = [e["reason"] for e in problems["entries"]]
    assert problems["counts"] == {"malformed record": 7}, reasons
    assert any("before its profile_ops" in r for r in reasons) and any("a second profile_ops" in r for r in reasons)
    assert any("not one per op (3)" in r for r in reasons) and any("'sideways'" in r for r in reasons)
    assert reasons[-1] == "profile records of compile 9, which this log does not start"
    assert [e["line"] for e in problems["entries"]][:6] == list(range(at + 3, at + 3 + 6))  # 1-based, as the pass
    (entry,) = _directory(tmp_path / "out")["compiles"]
    # 3 profiled: the 2 good calls, and the spaced one, forward only: the measured calls are those with both
    assert entry["time"]["profiled"] == 3 and entry["time"]["calls"] == 2


def test_workers_build_the_same_time_pages(tmp_path):
    log = report_logs.write(tmp_path / "logs" / "a.jsonl", report_logs.profiled())
    one = _report(log, tmp_path / "one", "-j", "1")
    two = _report(log, tmp_path / "two", "-j", "2")
    (entry,) = _directory(one)["compiles"]
    for page in [*entry["pages"].values(), "time.html"]:
        assert (one / page).read_text() == (two / page).read_text(), page
    traces = report_logs.page_traces((two / entry["pages"]["compile"]).read_text())
    assert any("3.00 ms" in t.get("c", ()) for t in traces)


def test_a_straggler_is_flagged_on_its_line(tmp_path):
    logs = tmp_path / "logs"
    report_logs.write(logs / "r0.jsonl", report_logs.profiled(rank=0))
    # rank 1: line 10's forward takes 18 ms: 20 ms per call there against rank 0's 5 ms (median 12.5)
    report_logs.write(logs / "r1.jsonl", report_logs.profiled(rank=1, forward=(18_000_000, 1_000_000, 20_000)))
    out = _report(logs, tmp_path / "out")
    page = (out / "time.html").read_text()
    section = page[page.index('id="ranks"'):]
    rows = {key: flagged for flagged, key in re.findall(r'<tr class="(\w*)" data-key="([^"]+)">', section)}
    line10, line11 = f"{report_logs.MODEL}:10", f"{report_logs.MODEL}:11"
    assert rows[line10] == "flagged" and rows[line11] == ""
    row = section[section.index(f'data-key="{line10}"'):]
    row = row[:row.index("</tr>")]
    cells = re.findall(r'<td class="r( straggler)?" data-rank="(\d)">(.*?)</td>', row, re.S)
    assert [(flag, rank) for flag, rank, _ in cells] == [("", "0"), (" straggler", "1")]
    assert "5.000 ms" in cells[0][2] and "20.000 ms" in cells[1][2] and "12.500 ms" in row  # the median
    assert "1 line with one" in section


# -- in Chromium -----------------------------------------------------------------------------------------------


def _close(actual: float, expected: float, tolerance: float = 0.01) -> bool:
    return math.isclose(actual, expected, abs_tol=tolerance)


def test_the_time_section_icicle_gutter_and_op_times_of_a_known_log(tmp_path, browser):
    log = report_logs.write(tmp_path / "logs" / "a.jsonl", report_logs.profiled())
    out = _report(log, tmp_path / "out")
    (entry,) = _directory(out)["compiles"]

    page = browser.open(out / entry["pages"]["compile"], "#time")
    section = page.locator("#time")
    assert f"{WALL_MS:.3f} ms per call" in section.inner_text()
    rows = section.locator('table[data-by="line"] tbody tr')
    cells = [[c.strip() for c in rows.nth(i).locator("td").all_inner_texts()] for i in range(rows.count())]
    # heat, line, ms/call (median), range, share, forward, backward, recompute, shared, bars
    assert [rows.nth(i).get_attribute("data-key") for i in range(rows.count())] == [
        f"{report_logs.MODEL}:10", f"{report_logs.MODEL}:11", "(between ops)", "(bookkeeping)"]
    assert cells[0][1].startswith("report_model.py:10")
    assert cells[0][2:7] == ["5.000", "5.000–5.000", f"{100 * 5 / WALL_MS:.1f}%", "3.000", "2.000"]
    assert cells[1][2:7] == ["1.500", "1.500–1.500", f"{100 * 1.5 / WALL_MS:.1f}%", "1.000", "0.500"]
    assert "median 5.000 ms, 5.000–5.000 ms over 2 calls" in rows.nth(0).locator("td").nth(2).get_attribute("title")
    assert cells[0][1].endswith("y = x * 2") and rows.nth(0).locator("td.heat.h5").count() == 1
    assert rows.nth(3).locator("td.heat.h2").count() == 1  # bookkeeping: 0.6% of the time
    roles = section.locator('table[data-by="role"] tbody tr').all_inner_texts()
    assert roles[0].split("\t")[1:3] == ["(no role)", "6.540"]  # every op; the time between them is its own row

    # the icicle: the model, ops outside any module (the dels), time between ops; to scale
    icicle = section.locator(".icicle")
    width = icicle.bounding_box()["width"] - 2  # its border
    boxes = icicle.locator(".ib")
    assert boxes.all_inner_texts() == ["Model", "(no module)", "(between ops)"]
    for i, ms in enumerate((6.5, 0.04, 0.2)):
        assert _close(boxes.nth(i).bounding_box()["width"] / width, ms / WALL_MS, 0.005), i
    assert "Model (the jitted module)" in boxes.nth(0).get_attribute("title")
    browser.shot(page, "time-known-log-section")

    # op times on the final traces, colored by their share of the trace's time
    forward = page.locator("#computation-1 .op[data-t]")
    assert forward.count() == 3
    assert [forward.nth(i).get_attribute("data-t") for i in range(3)] == ["3.00 ms", "1.00 ms", "20.0 us"]
    assert [forward.nth(i).get_attribute("data-c") for i in range(3)] == ["5", "5", "2"]
    assert page.evaluate("(el) => getComputedStyle(el, '::before').content", forward.nth(0).element_handle()) == \
        '"3.00 ms"'
    assert page.locator("#backward-0 .op[data-t]").count() == 3
    assert page.locator("#computation-0 .op[data-t]").count() == 0  # not the profiled trace
    forward.nth(0).hover()
    assert "3.00 ms per call" in page.inner_text("#tip")
    page.close()

    page = browser.open(out / entry["pages"]["source"])
    line10, line11 = page.locator("#L0-10"), page.locator("#L0-11")
    assert line10.locator(".tm").inner_text() == "5.000" and line10.get_attribute("data-c") == "5"
    assert line11.locator(".tm").inner_text() == "1.500"
    assert "forward 3.000, backward 2.000" in line10.locator(".tm").get_attribute("title")
    assert page.evaluate("(el) => getComputedStyle(el).backgroundColor", line10.locator(".tm").element_handle()) \
        != "rgba(0, 0, 0, 0)"  # colored by its cost
    assert page.locator('pre.pane[data-pane="forward"] .op[data-t]').count() == 3
    browser.shot(page, "time-known-log-source")
    page.close()

    page = browser.open(out / "time.html")
    lines = page.locator('table[data-by="line"] tbody tr').all_inner_texts()
    assert lines[0].split()[:4] == ["report_model.py:10", "y", "=", "x"]
    assert lines[0].split("\t")[2:4] == ["5.000", "5.000–5.000"]  # per call, as on the compile's page
    assert page.locator("#ranks").count() == 0  # one process
    page.close()
    assert browser.errors == [] and browser.dialogs == []


XSS = "</script><img src=x onerror=alert(1)>"


def test_log_text_on_the_time_pages_never_runs(tmp_path, browser):
    records = report_logs.profiled(text_mul=XSS, module=XSS, role=XSS, fn=XSS, file="/x/" + XSS + ".py")
    logs = tmp_path / "logs"
    report_logs.write(logs / "a.jsonl", records)
    report_logs.write(logs / "b.jsonl", report_logs.profiled(text_mul=XSS, module=XSS, role=XSS, rank=1))
    out = _report(logs, tmp_path / "out")
    before = len(browser.errors)
    for entry in _directory(out)["compiles"]:
        for page in entry["pages"].values():
            browser.open(out / page).close()
    page = browser.open(out / "time.html")
    assert XSS in page.inner_text("main")  # shown as text
    page.close()
    assert browser.dialogs == [] and browser.errors[before:] == []


# -- OpenTelemetry --------------------------------------------------------------------------------------------
_OTEL_APP = """
import inspect, json, sys, torch, thunder
sys.path.insert(0, {tests!r})
import models, provenance
from otel_in_memory import data_points, install
from provenance.timing.rollup import line_key

spans, reader = install()
torch.set_num_threads(1)
provenance.enable(profile=2)
jm = thunder.jit(models.Net(n=8, depth=2))
x = torch.randn(4, 8)
models.forward_backward(jm, x)  # the compile's call
# the 1st profiled call's forward tells the window an executor compiled in it, as phases.py would
# (the torch.compile executor's real compile: tests/timing/test_cost.py): left out, one call more
from provenance.thunder import capture
(window,) = capture.ACTIVE.profile_windows
namespace = inspect.unwrap(window.forward.fn).__globals__
clock, seen = namespace["_provenance_clock"], []
def compiling_clock():
    if not seen:
        seen.append(1)
        capture.ACTIVE.call_compiles.value.append(("TorchCompile0", "torchcompile", 1000))
    return clock()
namespace["_provenance_clock"] = compiling_clock
for _ in range(3):
    models.forward_backward(jm, x)
(profile,) = provenance.profiles(jm)
measured = profile.measured()[0]
attributed = sum(sum(c.op_ns) for t in profile.traces.values() for c in t.recent if not c.compiled)
from provenance.timing.profile import CompileProfile, TraceProfile
from provenance.timing.rollup import rollup
ran = []  # the runs the histogram holds, per trace: all but the compiling one
for name, timed in profile.traces.items():
    one = CompileProfile(profile.compile_id, profile.fn_name, 2)
    one.traces[name] = TraceProfile(name, timed.ops, clock=timed.clock)
    one.traces[name].recent.extend(c for c in timed.recent if not c.compiled)
    ran.append(one)
modules = {{r.key: r.sum_ns for r in rollup(ran, "module", keep_all=True)}}
runs = {{}}  # (trace, call) -> each line's time in that run, from the live profile
for name, timed in profile.traces.items():
    for call in timed.recent:
        lines = {{}}
        for op, ns in zip(timed.ops, call.op_ns):
            lines[line_key(op.record)] = lines.get(line_key(op.record), 0) + ns
        runs[f"{{name}} {{call.call}}"] = sorted(lines.items(), key=lambda kv: -kv[1])[:3]
provenance.disable()
points = [[dict(p.attributes), p.sum, p.count] for p in data_points(reader, "thunder.op.duration")]
print(json.dumps({{"attributed_ns": attributed, "measured": measured, "modules": modules, "runs": runs,
                  "points": points,
                  "spans": [{{"name": s.name, "attributes": dict(s.attributes), "start": s.start_time,
                             "end": s.end_time}} for s in spans.get_finished_spans()
                            if s.name.startswith("thunder.profiled")]}}))
"""


@pytest.mark.slow
def test_otel_op_duration_by_module_and_role_and_a_span_per_profiled_run(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "THUNDER_TRACE"))}
    done = subprocess.run([sys.executable, "-c", _OTEL_APP.format(tests=str(SUPPORT))], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    points = result["points"]
    # bounded labels: no op id, symbol, shape or line; one point per (function, trace, module, role)
    assert points and all(set(a) == {"thunder.function", "thunder.trace", "thunder.module", "thunder.role"}
                          for a, _, _ in points)
    assert {a["thunder.module"] for a, _, _ in points} == {"", "<root>", "head", "blocks.0", "blocks.1"} | {
        f"blocks.{i}.{m}" for i in (0, 1) for m in ("norm", "mlp", "mlp.fc1", "mlp.fc2")}
    # calls 2 and 3, not the compiling one; on a loaded machine one may be a stall (a 1 ms preemption in this
    # tiny model's call), left out too; the histogram holds the runs that were no compile
    assert result["measured"] in ([2, 3], [2], [3])
    # one value per run but the compiling one (the 1st call's forward; its backward compiled nothing)
    assert all(count == (2 if a["thunder.trace"] == "forward" else 3) for a, _, count in points)
    assert math.isclose(sum(s for _, s, _ in points), result["attributed_ns"] / 1e9, rel_tol=1e-9)
    for module in ("blocks.0", "blocks.1.mlp", "head"):  # rolled up like cost(by="module")
        inside = sum(s for a, s, _ in points if a["thunder.module"] == module
                     or a["thunder.module"].startswith(module + "."))
        assert math.isclose(inside, result["modules"][module] / 1e9, rel_tol=1e-9), module

    spans = result["spans"]
    assert sorted(s["name"] for s in spans) == ["thunder.profiled backward Net"] * 3 + [
        "thunder.profiled forward Net"] * 3
    # the run an executor compiled in says so
    flagged = [(s["attributes"]["thunder.trace"], s["attributes"]["thunder.call"], s["attributes"].get(
        "thunder.profile.excluded"), s["attributes"].get("thunder.profile.compiled")) for s in spans]
    assert sorted(f for f in flagged if f[2]) == [("forward", 1, "compile", ["TorchCompile0"])]
    for span in spans:
        a = span["attributes"]
        expected = result["runs"][f"{a['thunder.trace']} {a['thunder.call']}"]
        assert list(a["thunder.top_lines"][:3]) == [key for key, _ in expected]
        assert [round(ms, 6) for ms in a["thunder.top_lines.ms"][:3]] == [round(ns / 1e6, 6) for _, ns in expected]
        top = expected[0][0]
        if top.startswith("("):  # a line-less op on top (a stall in bookkeeping, on a loaded machine): no code.*
            assert "code.file.path" not in a and "code.line.number" not in a, a
        else:
            assert a["code.file.path"] + ":" + str(a["code.line.number"]) == top
            assert a["thunder.top_lines.text"][0].endswith(f"# <-- {_marker(top)}")
        assert span["start"] < span["end"] and 0.5 < a["thunder.coverage"] <= 1.0


def _marker(key: str) -> str:
    line = int(key.rpartition(":")[2])
    text = Path(models.__file__).read_text().splitlines()[line - 1]
    return text.rpartition("# <-- ")[2]


@pytest.mark.slow
def test_a_real_collector_receives_the_histogram_and_the_profiled_spans(tmp_path):
    from otel_collector import Collector

    collector = Collector(tmp_path)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "THUNDER_TRACE"))}
        env.update(THUNDER_TRACE_PROFILE="2", OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
                   OTEL_SERVICE_NAME="profiled")
        code = (f"import sys; sys.path.insert(0, {str(SUPPORT)!r}); import torch, thunder, models; "
                "jm = thunder.jit(models.Net(n=8, depth=1)); x = torch.randn(4, 8)\n"
                "for _ in range(3): models.forward_backward(jm, x)")
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        sink = collector.sink
        assert sink.wait_for(lambda s: sum(x["name"].startswith("thunder.profiled") for x in s.spans) == 4)
        spans = [x for x in sink.spans if x["name"] == "thunder.profiled forward Net"]
        for span in spans:  # one call's top lines, slowest first: the model's lines (a call preempted in
            # its bookkeeping on a loaded machine can put `(bookkeeping)` first: CI, once)
            lines, times = span["attributes"]["thunder.top_lines"], span["attributes"]["thunder.top_lines.ms"]
            assert times == sorted(times, reverse=True) and len(times) == len(lines)
            assert any(k.startswith(models.__file__ + ":") for k in lines), lines
            assert all(k.startswith((models.__file__ + ":", "(")) for k in lines), lines
            assert span["resource"]["service.name"] == "profiled"
        assert len(spans) == 2
        assert sink.wait_for(lambda s: any(m["name"] == "thunder.op.duration" for m in s.metrics), timeout=20)
        points = [p for m in sink.metrics if m["name"] == "thunder.op.duration" for p in m["points"]]
        assert {"blocks.0.mlp.fc1", "head"} <= {p["thunder.module"] for p in points}
        assert all(set(p) == {"thunder.function", "thunder.trace", "thunder.module", "thunder.role"} for p in points)
    finally:
        collector.close()


# -- 2 ranks, tensor parallel, under torchrun ------------------------------------------------------------------
@pytest.fixture(scope="module")
def tp_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("tp-profile")
    env = {k: v for k, v in os.environ.items() if k not in ("THUNDER_TRACE", "CI")}
    env.update(THUNDER_TRACE=str(work / "logs"), THUNDER_TRACE_PROFILE="2")
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           str(SUPPORT / "tp_profile_worker.py"), str(work)], env=env, capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    out = work / "report"
    done = subprocess.run([sys.executable, "-m", "provenance.report", "report", str(work / "logs"), "-o", str(out),
                           "--no-browser"], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    return work


@pytest.mark.slow
def test_tensor_parallel_ranks_time_their_roles_and_the_log_keeps_it(tp_run):
    for rank in (0, 1):
        (log,) = (tp_run / "logs").glob(f"*.rank{rank}.jsonl")
        logged = load_profiles(log)
        written = json.loads((tp_run / f"cost{rank}.json").read_text())
        for by in BY:
            assert [[r.key, r.forward_ns, r.backward_ns, r.recompute_ns, r.shared_ns, r.calls]
                    for r in rollup(logged, by)] == written[by], (rank, by)
        roles = {key: fw + bw for key, fw, bw, *_ in written["role"]}
        assert roles["row_parallel.post"] > 0 and roles["column_parallel.pre"] > 0


@pytest.mark.slow
def test_the_report_compares_ranks_and_flags_the_one_that_waited(tp_run, browser):
    out = tp_run / "report"
    page = browser.open(out / "time.html", "#ranks")
    ranks = page.locator("#ranks")
    assert ranks.locator("thead th").all_inner_texts()[1:3] == ["rank 0", "rank 1"]
    row = ranks.locator('table[data-by="role"] tr[data-key="row_parallel.post"]')
    cells = row.locator("td[data-rank]")
    times = [float(re.search(r"([\d.]+) ms", cells.nth(i).inner_text()).group(1)) for i in range(2)]
    assert all(t > 0 for t in times)
    # rank 1 slept 0.3 s before each profiled call: rank 0 waited for it in the all-reduce
    assert times[0] > 250 and times[0] > 3 * times[1]
    assert "straggler" in cells.nth(0).get_attribute("class") and "straggler" not in cells.nth(1).get_attribute("class")
    line = ranks.locator('table[data-by="line"] tr.flagged').first
    assert "toy_model.py:29" in line.inner_text()
    browser.shot(page, "time-tp-ranks")
    page.close()

    for entry in _directory(out)["compiles"]:
        page = browser.open(out / entry["pages"]["compile"], "#time")
        for role in ("row_parallel.post", "column_parallel.pre"):
            row = page.locator(f'#time table[data-by="role"] tbody tr[data-key="{role}"]')
            assert float(row.locator("td").nth(2).inner_text()) > 0, role  # ms per call
        collective = page.locator("details.trace[open] .op.role3[data-t]")  # row_parallel.post, timed
        assert collective.count() >= 2
        page.close()
    assert browser.errors == [] and browser.dialogs == []
