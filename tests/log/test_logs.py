"""THUNDER_TRACE JSONL logs: no-code-change activation, torchrun ranks, crash safety, round trip."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import models
import pytest
import thunder
import torch
from paths import ROOT

import provenance
from provenance.log.events import SCHEMA_VERSION
from provenance.report.read.log_file import Log, SchemaError


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "THUNDER_TRACE"}
    env.update(extra)
    return env


def _types(path) -> list[str]:
    return [r.type for r in Log(path)]


@pytest.mark.slow
def test_thunder_trace_env_logs_an_unmodified_program(tmp_path):
    logs = tmp_path / "logs"
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "train_nanogpt.py"), "--layers", "1",
                           "--steps", "2"],
                          env=_env(THUNDER_TRACE=str(logs)), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    files = list(logs.glob("*.jsonl"))
    assert len(files) == 1 and "pid" in files[0].name and "norank" in files[0].name
    log = Log(logs)
    records = list(log)
    assert log.bad == [] and not log.files[0].truncated
    assert records[0].type == "header" and records[0]["schema"] == SCHEMA_VERSION
    header = records[0].data
    assert header["versions"]["thunder"] == "0.2.6" and header["argv"][0].endswith("train_nanogpt.py")
    kinds = [r.type for r in records]
    assert kinds.count("compile_start") == kinds.count("compile_end") == 1
    start = next(r for r in records if r.type == "compile_start")
    assert start["fn"].endswith("GPT") and any(f[0].endswith("train_nanogpt.py") for f in start["jit_stack"])
    assert any(f[2] == "main" for f in start["call_stack"])
    calls = next(r for r in records if r.type == "calls")
    assert (calls["calls"], calls["cache_misses"], calls["cache_hits"]) == (2, 1, 1)
    traces = [r for r in records if r.type == "trace" and "python" in r.data]
    assert {t["list"] for t in traces} == {"prologue", "computation", "epilogue", "backward"}
    assert any(t["pass"] == "grad" and t["ms"] is not None for t in traces)
    for trace in traces:  # every op points at a provenance record emitted before it
        lines = trace["python"].splitlines()
        for start_line, length, _sym, _outs, prov in trace["ops"]:
            assert log.files[0].provenance(prov) is not None
            assert 0 <= start_line < start_line + length <= len(lines)


@pytest.mark.slow
def test_without_the_variable_nothing_is_written_or_installed(tmp_path):
    code = ("import sys, runpy; sys.argv = ['train_nanogpt.py', '--layers', '1', '--steps', '1']; "
            f"runpy.run_path({str(ROOT / 'examples' / 'train_nanogpt.py')!r}, run_name='__main__'); "
            "import thunder; print('PROVENANCE_IMPORTED', 'provenance' in sys.modules, "
            "thunder.jit.__module__)")
    done = subprocess.run([sys.executable, "-c", code], env=_env(), cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "PROVENANCE_IMPORTED False thunder" in done.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_unwritable_directory_warns_once_and_the_program_runs_untraced(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "train_nanogpt.py"), "--layers", "1",
                           "--steps", "1"],
                          env=_env(THUNDER_TRACE=str(blocker / "logs")), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    untraced = subprocess.run([sys.executable, str(ROOT / "examples" / "train_nanogpt.py"), "--layers", "1",
                               "--steps", "1"], env=_env(), capture_output=True, text=True, timeout=300)
    assert done.stdout == untraced.stdout  # same losses
    assert done.stderr.count("thunder-provenance: cannot write THUNDER_TRACE logs") == 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert provenance.enable(blocker / "logs") is False
    assert not provenance.enabled() and len(caught) == 1


@pytest.mark.slow
def test_torchrun_ranks_write_one_complete_file_each(tmp_path):
    logs = tmp_path / "logs"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
           str(ROOT / "examples" / "tensor_parallel.py")]
    done = subprocess.run(cmd, env=_env(THUNDER_TRACE=str(logs)), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    files = sorted(logs.glob("*.jsonl"))
    assert [f.name.split(".")[-2] for f in files] == ["rank0", "rank1"]
    for rank, path in enumerate(files):
        log = Log(path)
        kinds = [r.type for r in log]
        header = log.files[0].header
        assert (header["rank"], header["world_size"]) == (rank, 2)
        assert log.bad == [] and kinds[0] == "header" and "compile_end" in kinds and kinds[-1] == "calls"


_SLOW_COMPILE = """
import sys, time, pathlib, torch, thunder
from thunder.core.transform_common import Transform
marker = pathlib.Path(sys.argv[1])

class Stall(Transform):  # holds the second compile open until the test kills the process
    def transform_traces_pre_prologue(self, pro, comp, epi, **kwargs):
        marker.write_text("compiling")
        time.sleep(120)
        return pro, comp, epi

thunder.jit(lambda x: torch.sin(x) * 2)(torch.ones(3))
thunder.jit(lambda x: torch.cos(x) + 1, transforms=[Stall()])(torch.ones(3))
"""


def test_sigkill_mid_compile_leaves_a_readable_log(tmp_path):
    logs, marker = tmp_path / "logs", tmp_path / "marker"
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_COMPILE, str(marker)], env=_env(THUNDER_TRACE=str(logs)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the script died before compiling"
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    log = Log(logs)
    kinds = [r.type for r in log]
    assert log.bad == []  # every line written is complete
    assert kinds.count("compile_start") == 2 and kinds.count("compile_end") == 1  # the second was cut short

    # a process killed while writing a line: the reader reports the truncated tail, keeps the rest
    path = log.files[0].path
    data = Path(path).read_bytes()
    Path(path).write_bytes(data + b'{"type": "trace", "compile": 2, "pyth')
    cut = Log(path)
    assert [r.type for r in cut] == kinds
    assert cut.files[0].truncated and len(cut.bad) == 1 and "truncated" in cut.bad[0].reason


@pytest.mark.slow
def test_round_trip_every_final_op_resolves_to_its_record(tmp_path):
    model, x = models.nanogpt()
    with provenance.tracing(tmp_path):
        jm = thunder.jit(model)
        models.forward_backward(jm, x)
    finals = {"computation": thunder.last_traces(jm)[-1], "backward": thunder.last_backward_traces(jm)[-1]}
    log = Log(tmp_path)
    traces = {}
    for record in log:
        if record.type == "trace" and "python" in record.data:
            traces[record["list"]] = record  # the last of each list is the final one
    checked = 0
    for name, trace in finals.items():
        logged = traces[name]
        assert logged["python"] == trace.python()
        by_line = {op[0]: op for op in logged["ops"]}
        from provenance.thunder.printing import layout

        _, placed = layout(trace)
        for bsym, start, _ in placed:
            op = by_line[start]
            assert op[2] == bsym.sym.name
            assert log.files[0].provenance(op[4]) == provenance.of(bsym)
            checked += 1
    assert checked > 100


def test_compile_failure_is_logged_and_reaches_the_user_unchanged(tmp_path):
    def bad(x):
        return torch.nn.functional.conv2d(x, x, stride=(1, 2, 3))  # invalid stride

    with provenance.tracing(tmp_path):
        with pytest.raises(Exception) as raised:
            thunder.jit(bad)(torch.ones(1, 1, 3, 3))
    errors = [r for r in Log(tmp_path) if r.type == "compile_error"]
    assert len(errors) == 1
    assert errors[0]["error_type"].endswith(type(raised.value).__qualname__)
    assert errors[0]["message"] == str(raised.value) and "Traceback" in errors[0]["traceback"]
    # the failure's traceback as pytest shows it: the user's and Thunder's frames, none of ours
    ours = str(Path(provenance.__file__).parent)
    shown = [str(entry.path) for entry in raised.traceback.filter(raised)]
    assert any("thunder" in path for path in shown) and not [p for p in shown if p.startswith(ours)], shown
    assert [e for e in raised.traceback if str(e.path).startswith(ours)]  # they are there, hidden


def test_reader_tolerates_bad_lines_and_refuses_another_major(tmp_path):
    path = tmp_path / "x.jsonl"
    major, minor = map(int, SCHEMA_VERSION.split("."))
    header = {"type": "header", "schema": f"{major}.{minor + 1}"}  # a newer minor than this reader's
    path.write_text("\n".join([json.dumps(header), "garbage", "[1, 2]", json.dumps({"type": "future_thing"}),
                               json.dumps({"type": "calls", "fn": "f", "calls": 1})]) + "\n")
    log = Log(path)
    assert [r.type for r in log] == ["header", "calls"]
    f = log.files[0]
    assert f.newer_minor and dict(f.unknown) == {"future_thing": 1}
    assert [b.line for b in f.bad] == [2, 3]
    path.write_text(json.dumps({"type": "header", "schema": "2.0"}) + "\n")
    with pytest.raises(SchemaError, match="written with log schema 2.0"):
        list(Log(path))


def test_a_log_opened_while_tracing_is_on_is_self_contained(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    provenance.enable(first)
    try:
        jf = thunder.jit(lambda x: torch.sin(x) + 1)
        jf(torch.ones(3))
        with provenance.tracing(second):  # joins the running session
            jf2 = thunder.jit(lambda x: torch.sin(x) + 1)  # same line: records already interned
            jf2(torch.ones(3))
        assert provenance.enabled()
    finally:
        provenance.disable()
    log = Log(second)
    records = list(log)
    assert records[0].type == "header" and log.bad == []
    ops = [op for r in records if r.type == "trace" and "ops" in r.data for op in r["ops"]]
    assert ops and all(log.files[0].provenance(op[4]) is not None for op in ops)
    assert [r.type for r in records].count("compile_start") == 1  # only what ran inside the block
