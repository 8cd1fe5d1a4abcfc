"""The fault points that run only in some programs, each injected where it runs: one warning, the
program's results unchanged, the log still whole (report --strict clean). The hooks of every compile
are tests/thunder/test_safety.py's (hooks.CORE_HOOKS)."""

from __future__ import annotations

import warnings

import fx_recompile
import models
import orjson
import thunder
import thunder_failures
import torch

import provenance
from provenance.cli import main as report_main
from provenance.thunder import capture


def _ours(caught) -> list[str]:
    return [str(w.message) for w in caught if "thunder-provenance" in str(w.message)]


def _strict(logs, tmp_path) -> list[dict]:
    assert report_main(["report", str(logs), "-o", str(tmp_path / "report"), "--strict", "--no-browser"]) == 0
    (log,) = logs.glob("*.jsonl")
    return [orjson.loads(line) for line in log.read_bytes().splitlines()]


def test_a_fault_logging_a_profile_leaves_it_profiled_and_the_log_without_it(tmp_path, monkeypatch):
    model, x = models.Net(n=8, depth=1), torch.randn(4, 8)
    expected = model(x)
    provenance.enable(tmp_path / "logs", profile=2)
    try:
        monkeypatch.setattr(capture.ACTIVE, "fault_injection", "profile_log")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            jm = thunder.jit(model)
            outs = [jm(x) for _ in range(3)]
        (profile,) = provenance.profiles(jm)
    finally:
        provenance.disable()
    (message,) = _ours(caught)
    assert "cannot log the profile" in message and "InjectedFault" in message
    for out in outs:
        torch.testing.assert_close(out, expected)
    assert profile.calls == 2 and profile.error is None  # profiled all the same
    records = _strict(tmp_path / "logs", tmp_path)
    assert [r["type"] for r in records].count("compile_end") == 1
    assert not any(r["type"] in ("profile_ops", "profile_call") for r in records)


def _faulted_fx_run(tmp_path, monkeypatch, fault_injection: str) -> tuple[str, list[dict]]:
    """tests/support/fx_recompile.py (the sequence length changes, Dynamo compiles graph [0/1]), logged,
    that hook faulted: our one warning, and the log's records (report --strict clean)."""
    provenance.enable(tmp_path / "logs")
    try:
        monkeypatch.setattr(capture.ACTIVE, "fault_injection", fault_injection)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch._dynamo.reset()
            thunder_failures.run(fx_recompile.main)
    finally:
        provenance.disable()
    (message,) = _ours(caught)
    assert f"hook {fault_injection!r}" in message
    return message, _strict(tmp_path / "logs", tmp_path)


def test_a_fault_reading_torchs_trace_warns_once_and_stops_only_torchs_trace(tmp_path, monkeypatch):
    message, records = _faulted_fx_run(tmp_path, monkeypatch, fault_injection="torch_trace")
    assert "torch's structured trace is no longer logged" in message
    assert not any(r["type"] == "torch_trace" for r in records)  # the fault hit the first artifact
    assert sum(r["type"] == "dynamo_graph" for r in records) == 2  # the rest of the log is whole


def test_a_fault_reading_dynamos_recompile_reasons_warns_once_and_the_run_is_whole(tmp_path, monkeypatch):
    message, records = _faulted_fx_run(tmp_path, monkeypatch, fault_injection="dynamo_recompile")
    assert "that step was skipped" in message
    graphs = [r for r in records if r["type"] == "dynamo_graph"]
    assert len(graphs) == 2 and graphs[1]["recompile"] is None  # [0/1] is there, without Dynamo's reasons
    ends = sum(r["type"] == "compile_end" for r in records)
    assert ends == sum(r["type"] == "compile_start" for r in records) > 0


def test_every_fault_point_is_injected_by_a_test():
    """Every name the capture hooks check (state.check_fault) is injected somewhere in the suite:
    named in a test's fault_injection, or one of the hooks test_safety.py injects one by one."""
    import pathlib
    import re

    from provenance.thunder import hooks

    root, tests = pathlib.Path(provenance.__file__).parent, pathlib.Path(__file__).parent.parent
    checked = {m for p in root.rglob("*.py") for m in re.findall(r'check_fault\("(\w+)"\)', p.read_text())}
    injected = {m for p in tests.rglob("*.py")
                for m in re.findall(r'fault_injection"?,?\s*=?\s*"(\w+)"', p.read_text())}
    injected |= set(hooks.CORE_HOOKS) | {hooks.RECOMPILE_HOOK}
    assert {"memory", "dynamo_recompile", "profile_log"} <= checked
    assert checked <= injected, checked - injected


def test_a_compile_with_symbolic_values_is_logged_whole_without_a_warning(tmp_path):
    """cache="symbolic values" (Thunder's own test_cache_symbolic_values_basic): a size that is a symbol
    cannot be read once tracing has ended, so the compile has no memory timeline; the rest is captured,
    with no warning, and the log is whole."""
    def foo(a, scalar):
        return (a * scalar).sum(scalar)

    a = torch.randn(2, 2, 2)
    provenance.enable(tmp_path / "logs")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            jfoo = thunder.jit(foo, cache="symbolic values")
            outs = [jfoo(a, b) for b in (1, 2)]
    finally:
        provenance.disable()
    assert _ours(caught) == []
    for out, b in zip(outs, (1, 2)):
        torch.testing.assert_close(out, foo(a, b))
    records = _strict(tmp_path / "logs", tmp_path)
    types = [r["type"] for r in records]
    assert types.count("compile_start") == types.count("compile_end") == 1 and "capture_disabled" not in types
    assert "trace" in types and "memory" not in types
    (end,) = [r for r in records if r["type"] == "compile_end"]
    unknown = end["memory_unknown"]
    assert unknown.startswith("its sizes are symbols (") and "has a symbolic size" in unknown
    page = tmp_path / "report" / "compiles" / "log0-c1.html"  # the page says so rather than leave it out
    memory = page.read_text().split('id="memory"')[1].split("</section>")[0]
    assert "Unknown: its sizes are symbols (" in memory and "symbolic values" in memory


def test_a_compile_with_symbolic_values_and_a_backward_is_logged_whole_without_a_warning(tmp_path):
    """Thunder's test_cache_symbolic_values_grad_matmul: with a backward, rematerialization runs after
    tracing too (its hook reads the saved tensors' sizes): no warning there either."""
    def foo(a, w):
        return torch.nn.functional.linear(a, w)

    a, w = torch.randn(2, 8, 6, requires_grad=True), torch.randn(4, 6, requires_grad=True)
    provenance.enable(tmp_path / "logs")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = thunder.jit(foo, cache="symbolic values")(a, w)
            out.sum().backward()
    finally:
        provenance.disable()
    assert _ours(caught) == []
    torch.testing.assert_close(out, foo(a, w))
    records = _strict(tmp_path / "logs", tmp_path)
    (end,) = [r for r in records if r["type"] == "compile_end"]
    assert "has a symbolic size" in end["memory_unknown"] and "capture_disabled" not in {r["type"] for r in records}


def test_a_fault_in_the_memory_hook_closes_its_compile_once(tmp_path, monkeypatch):
    """The memory hook runs last at a compile's end: its fault writes capture_disabled, and nothing more
    of that compile follows it in the log (no compile_end: the compile is closed once)."""
    model, x = models.Net(n=8, depth=1), torch.randn(4, 8)
    expected = model(x)
    provenance.enable(tmp_path / "logs")
    try:
        monkeypatch.setattr(capture.ACTIVE, "fault_injection", "memory")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = thunder.jit(model)(x)
    finally:
        provenance.disable()
    (message,) = _ours(caught)
    assert "hook 'memory'" in message
    torch.testing.assert_close(out, expected)
    types = [r["type"] for r in _strict(tmp_path / "logs", tmp_path)]
    closed = types.index("capture_disabled")
    assert types.count("compile_start") == 1 and "compile_end" not in types
    assert not any(t in ("trace", "memory", "phases") for t in types[closed + 1:]), types
