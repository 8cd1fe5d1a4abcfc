"""Hostile and unlucky programs, on the writer's side (issue 10, items 11-15 and 17; issue 13's
failure headline): forked workers, dropped models, odd scope attributes, command lines that are
not UTF-8, THUNDER_TRACE plus enable(), internal faults, failing compiles. Real Thunder, real
processes; the logs are read back and reported.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import warnings
import weakref
from collections import Counter
from pathlib import Path

import orjson
import pytest
import thunder
import torch
from paths import report_files

import provenance
from provenance.cli import main
from provenance.log import schema
from provenance.thunder import capture


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("THUNDER_TRACE", "THUNDER_TRACE_PROFILE")}
    env.update(extra)
    return env


def _records(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _report(capsys, *args) -> tuple[int, str]:
    code = main(["report", *map(str, args), "--no-browser"])
    return code, capsys.readouterr().err


def schema_refs(record: dict) -> list:
    """The provenance ids a record names, by its type's declared references (events.TYPES)."""
    from provenance.log.events import TYPES

    declared = TYPES.get(record["type"])
    return [i for ref in (declared.provs if declared is not None else ()) for i in ref.ids(record)]


def _self_contained(records: list[dict]) -> None:
    """One process's log: a header first, each id defined once, every reference defined before."""
    assert records[0]["type"] == "header" and all(r["type"] != "header" for r in records[1:])
    assert all(schema.problems(r) == [] for r in records), [schema.problems(r) for r in records]
    starts = Counter(r["compile"] for r in records if r["type"] == "compile_start")
    assert all(n == 1 for n in starts.values()), starts
    defined: set[int] = set()
    for r in records:
        if r["type"] == "prov":
            assert r["id"] not in defined, f"prov {r['id']} defined twice"
            assert r["derived_from"] is None or r["derived_from"] in defined
            defined.add(r["id"])
        for op in (r.get("ops") or ()) if r["type"] == "trace" else ():
            assert op[4] is None or op[4] in defined
        for prov in schema_refs(r):
            assert prov is None or prov in defined, (r["type"], prov)
        if r["type"] in ("trace", "compile_end", "compile_error"):
            assert r["compile"] in starts


# -- 11. fork ------------------------------------------------------------------------------------------
_FORKING = """
import os, sys, time, torch, thunder, provenance
provenance.enable(sys.argv[1])
thunder.jit(lambda x: torch.sin(x) * 2)(torch.ones(3))        # before the fork: the parent's
pid = os.fork()
if pid == 0:                                                   # the child compiles on its own
    jf = thunder.jit(lambda x: torch.cos(x) + 1)
    jf(torch.ones(3)); jf(torch.ones(3))
    thunder.jit(lambda x: torch.exp(x) - 1)(torch.ones(3))
    provenance.disable()
    os._exit(0)
thunder.jit(lambda x: torch.tanh(x) / 2)(torch.ones(3))        # the parent, at the same time
os.waitpid(pid, 0)
provenance.disable()
print(pid)
"""


@pytest.mark.slow
def test_a_forked_child_writes_its_own_log_with_fresh_ids(tmp_path, capsys):
    logs = tmp_path / "logs"
    done = subprocess.run([sys.executable, "-c", _FORKING, str(logs)], env=_env(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    child = int(done.stdout.split()[-1])
    files = sorted(logs.glob("*.jsonl"))
    assert len(files) == 2, files
    by_pid = {}
    for path in files:
        records = _records(path)
        _self_contained(records)
        pid = records[0]["pid"]
        assert f".pid{pid}." in path.name
        by_pid[pid] = records
    assert child in by_pid
    parent = next(p for p in by_pid if p != child)
    fns = {pid: [r["fn"].rsplit(".", 1)[-1] for r in recs if r["type"] == "compile_start"]
           for pid, recs in by_pid.items()}
    assert fns[parent] == ["<lambda>", "<lambda>"] and len(fns[child]) == 2
    assert [r["compile"] for r in by_pid[child] if r["type"] == "compile_start"] == [1, 2]  # counted afresh
    (calls,) = [r for r in by_pid[child] if r["type"] == "calls" and r["calls"] == 2]  # the child's summary...
    assert not [r for r in by_pid[parent] if r["type"] == "calls" and r["calls"] == 2]  # ...only in its log
    texts = {pid: b"".join(orjson.dumps(r) for r in recs) for pid, recs in by_pid.items()}
    assert b"cos" in texts[child] and b"cos" not in texts[parent]
    assert b"tanh" in texts[parent] and b"tanh" not in texts[child]
    outs = []
    for jobs in ("1", "2"):
        outs.append(tmp_path / f"out{jobs}")
        code, err = _report(capsys, logs, "-o", outs[-1], "-j", jobs, "--strict")
        assert code == 0, err
    for f in report_files(outs[0]):
        assert (outs[0] / f).read_bytes() == (outs[1] / f).read_bytes(), f
    assert orjson.loads((outs[0] / "compile_directory.json").read_bytes())["totals"]["compiles"] == 4


# -- 12. nothing of ours keeps a model alive --------------------------------------------------------------
def test_a_dropped_model_is_collected_with_logging_on(tmp_path):
    provenance.enable(tmp_path)
    try:
        refs = []
        for _ in range(3):
            model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
            weights = torch.ones(1000)
            with provenance.scope("step", weights=weights):
                jm = thunder.jit(model)
                jm(torch.randn(2, 8)).sum().backward()
            refs += [weakref.ref(model), weakref.ref(model[0].weight), weakref.ref(weights), weakref.ref(jm)]
            del model, jm, weights
        gc.collect()
        alive = [r() for r in refs if r() is not None]
        assert not alive, [type(a).__name__ for a in alive]
    finally:
        provenance.disable()
    assert len([r for r in _records(next(tmp_path.glob("*.jsonl"))) if r["type"] == "compile_start"]) == 3


def test_a_function_collected_before_exit_still_gets_its_summary(tmp_path):
    def train() -> None:  # the usual shape: the jitted function lives in main() only
        jf = thunder.jit(lambda x: torch.sin(x) * 2)
        for _ in range(3):
            jf(torch.ones(3))

    provenance.enable(tmp_path)
    try:
        train()
        gc.collect()
        kept = thunder.jit(lambda x: torch.cos(x) + 1)
        kept(torch.ones(3))
        kept(torch.ones(3))
    finally:
        provenance.disable()
    records = _records(next(tmp_path.glob("*.jsonl")))
    first, second = [r["compile"] for r in records if r["type"] == "compile_start"]  # ids are per process
    calls = sorted((r["calls"], r["cache_hits"], r["cache_misses"], r["compiles"], r["compile_hits"])
                   for r in records if r["type"] == "calls")
    assert calls == [(2, 1, 1, [second], [1]), (3, 2, 1, [first], [2])]  # a collected function's own hits too


# -- 13. scope attributes ----------------------------------------------------------------------------------
class _NoRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


def test_odd_scope_attributes_never_cost_the_log_nor_reach_the_user(tmp_path):
    provenance.enable(tmp_path)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="thunder-provenance")  # no exporter is dropped
            with provenance.scope("s", big=2**64, neg=-(2**70), bad=_NoRepr(), tensor=torch.ones(2),
                                  seq=[1, "a", 2**80, None], text="caf\udce9", nan=float("nan")) as span:
                thunder.jit(lambda x: torch.sin(x) * 2)(torch.ones(3))
            thunder.jit(lambda x: torch.cos(x) + 1)(torch.ones(3))  # the log goes on
    finally:
        provenance.disable()
    assert span.attribute("big") == str(2**64) and span.attribute("bad") == "<unrepresentable _NoRepr>"
    records = _records(next(tmp_path.glob("*.jsonl")))
    _self_contained(records)
    assert [r["type"] for r in records].count("compile_end") == 2
    (logged,) = [r for r in records if r["type"] == "span"]
    assert logged["attributes"] == {"bad": "<unrepresentable _NoRepr>", "big": str(2**64), "nan": None,
                                    "neg": str(-(2**70)), "seq": [1, "a", str(2**80), None],
                                    "tensor": "tensor([1., 1.])", "text": "caf\\xe9"}


# -- 14 and 15: argv that is not UTF-8; THUNDER_TRACE plus enable() -----------------------------------------
_ENABLED_TWICE = """
import sys, torch, thunder, provenance
provenance.enable(sys.argv[1])                    # the same directory THUNDER_TRACE names
with provenance.tracing(sys.argv[1]):
    thunder.jit(lambda x: torch.sin(x) * 2)(torch.ones(3))
thunder.jit(lambda x: torch.cos(x) * 2)(torch.ones(3))
"""


@pytest.fixture(scope="module")
def odd_process(tmp_path_factory) -> Path:
    logs = tmp_path_factory.mktemp("odd") / "logs"
    done = subprocess.run([sys.executable, "-c", _ENABLED_TWICE, str(logs), b"caf\xe9.txt"],
                          env=_env(THUNDER_TRACE=str(logs)), capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return logs


@pytest.mark.slow
def test_a_command_line_that_is_not_utf8_is_logged_escaped(odd_process, tmp_path, capsys):
    (path,) = odd_process.glob("*.jsonl")
    records = _records(path)
    assert records[0]["argv"][-1] == "caf\\xe9.txt"
    code, err = _report(capsys, odd_process, "-o", tmp_path / "out", "--strict")
    assert code == 0, err


@pytest.mark.slow
def test_thunder_trace_and_enable_write_one_log(odd_process):
    files = list(odd_process.glob("*.jsonl"))
    assert len(files) == 1, files
    records = _records(files[0])
    _self_contained(records)
    assert [r["type"] for r in records].count("compile_start") == 2


# -- 17. capture disabled by an internal fault ------------------------------------------------------------
@pytest.mark.parametrize("hook", ["processor", "set_provenance"])
def test_a_compile_whose_capture_failed_says_so_in_the_log(tmp_path, monkeypatch, hook, capsys):
    with warnings.catch_warnings(record=True), provenance.tracing(tmp_path / "logs"):
        warnings.simplefilter("always")
        monkeypatch.setattr(capture.ACTIVE, "fault_injection", hook)
        out = thunder.jit(lambda x: torch.sin(x) * 2)(torch.ones(3))
    torch.testing.assert_close(out, torch.sin(torch.ones(3)) * 2)
    records = _records(next((tmp_path / "logs").glob("*.jsonl")))
    (disabled,) = [r for r in records if r["type"] == "capture_disabled"]
    assert disabled["hook"] == hook and "fault injected" in disabled["error"]
    assert schema.problems(disabled) == []
    assert not [r for r in records if r["type"] in ("compile_end", "compile_error")]
    code, err = _report(capsys, tmp_path / "logs", "-o", tmp_path / "out", "--strict")
    assert code == 0, err
    (entry,) = orjson.loads((tmp_path / "out" / "compile_directory.json").read_bytes())["compiles"]
    assert entry["status"] == "disabled" and entry["disabled"]["hook"] == hook


# -- 17 and issue 13: a failing compile's page ---------------------------------------------------------------
class _Mismatch(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        return y @ torch.ones(3, 3)  # the failing line: shapes do not match


def test_a_failed_compile_headlines_the_user_line_without_our_frames(tmp_path, capsys):
    with provenance.tracing(tmp_path / "logs"), pytest.raises(RuntimeError):
        thunder.jit(_Mismatch())(torch.randn(2, 4))
    records = _records(next((tmp_path / "logs").glob("*.jsonl")))
    (error,) = [r for r in records if r["type"] == "compile_error"]
    assert schema.problems(error) == []
    assert "provenance/thunder" not in error["traceback"] and "hooks.py" not in error["traceback"]
    assert "thunder/core/interpreter.py" in error["traceback"]  # Thunder's own frames stay
    path, line, function, text, user = error["user_frame"]
    assert (Path(path).name, function, text, user) == ("test_hostile_writer.py", "_Mismatch.forward",
                                                       "return y @ torch.ones(3, 3)  # the failing line: shapes do not "
                                                       "match", True)
    out = tmp_path / "out"
    code, err = _report(capsys, tmp_path / "logs", "-o", out)
    assert code == 0, err
    (entry,) = orjson.loads((out / "compile_directory.json").read_bytes())["compiles"]
    page = (out / entry["pages"]["compile"]).read_text()
    headline = page[page.index("Compile error"):page.index("Traceback")]
    assert f"test_hostile_writer.py:{line}" in headline and "return y @ torch.ones(3, 3)" in headline
    assert f"test_hostile_writer.py:{line}" in (out / "failures.html").read_text()
    # what did trace before the failure: the linear, then the interpreter stopped at the matmul
    assert "traced before the failure" in page and "ltorch.linear" in page and "matmul" not in page.split(
        "traced before the failure")[1].split("Traceback")[0]


def test_an_integer_past_64_bits_is_written_saturated_not_as_text(tmp_path):
    """A count or sum the writer is handed past the log's 64-bit integers is written as the largest
    one (at least that large), as the report reads sums; never as a string the reader refuses."""
    from exporters.jsonl import JsonlExporter

    exporter = JsonlExporter(str(tmp_path))
    exporter.emit({"type": "calls", "fn": "f", "calls": 2**70, "cache_hits": -(2**70), "cache_misses": 1})
    (line,) = Path(exporter.path).read_bytes().splitlines()
    assert orjson.loads(line) == {"type": "calls", "fn": "f", "calls": 2**63 - 1, "cache_hits": -(2**63),
                                  "cache_misses": 1}
