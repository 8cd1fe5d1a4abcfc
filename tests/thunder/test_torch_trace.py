"""torch's structured trace captured into THUNDER_TRACE's log (issue 46), on a real ThunderFX run
(tests/support/fx_recompile.py: graph [0/0], a recompile [0/1] at another sequence length, a piece that
falls back to inductor): each artifact tied to its Dynamo graph, the guards as torch itself counts them,
the graph page showing them, nothing attached without a log (its fault point: test_fault_points.py)."""

from __future__ import annotations

import logging
import re

import fx_recompile
import orjson
import pytest
import thunder_failures
import torch
import torch_guards

import provenance
from provenance.cli import main as report_main
from provenance.dynamo.torch_trace import guard_tree

pytestmark = pytest.mark.slow  # Dynamo, Thunder and inductor compile in the test process


def _trace_log() -> logging.Logger:
    return logging.getLogger("torch.__trace")


def _ours() -> list[logging.Handler]:
    return [h for h in _trace_log().handlers if type(h).__name__ == "TorchTraceHandler"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    logs = tmp_path_factory.mktemp("torch_trace") / "logs"
    torch._dynamo.reset()
    provenance.enable(logs)
    try:
        assert len(_ours()) == 1
        torch._logging.set_logs()  # torch's own reset keeps handlers it did not make
        assert len(_ours()) == 1
        _trace_log().removeHandler(_ours()[0])  # removed by someone else: put back at the next frame compile
        assert _ours() == []
        thunder_failures.run(fx_recompile.main)
        assert len(_ours()) == 1
        checks = torch_guards.by_compile_id(fx_recompile.Seq.forward)
    finally:
        provenance.disable()
    assert _ours() == []  # removed with the capture
    (log,) = logs.glob("*.jsonl")
    return logs, [orjson.loads(line) for line in log.read_bytes().splitlines()], checks


def test_each_artifact_is_a_record_tied_to_its_dynamo_graph(run):
    _, records, checks = run
    graphs = {r["compile_id"] for r in records if r["type"] == "dynamo_graph"}
    assert graphs == {"0/0", "0/1"} == set(checks)
    artifacts = [r for r in records if r["type"] == "torch_trace"]
    by_graph = {cid: {r["name"] for r in artifacts if r["compile_id"] == cid} for cid in graphs}
    for names in by_graph.values():
        assert {"dynamo_output_graph", "dynamo_cpp_guards_str", "compilation_metrics", "inductor_output_code",
                "aot_forward_graph", "aot_backward_graph"} <= names
    assert "recompile_reasons" in by_graph["0/1"] and "create_symbol" in by_graph["0/1"]
    names = {r["name"] for r in artifacts}
    assert not names & {"str", "chromium_event", "describe_tensor"}  # resolved or left out
    output = next(r for r in artifacts if r["name"] == "dynamo_output_graph" and r["compile_id"] == "0/1")
    assert "class GraphModule" in output["payload"] and "Sym(s" in output["payload"]  # the dynamic dim
    symbol = next(r for r in artifacts if r["name"] == "create_symbol")
    files = {f["filename"]: f["user"] for f in symbol["metadata"]["user_stack"]}
    assert fx_recompile.__file__ in files and files[fx_recompile.__file__] is True  # a name, not torch's id


def test_the_guards_are_the_checks_torch_counts(run):
    _, records, checks = run
    for r in records:
        if r["type"] == "torch_trace" and r["name"] == "dynamo_cpp_guards_str":
            assert len(guard_tree(r["payload"])) == checks[r["compile_id"]] > 3


def test_the_graph_page_shows_guards_shapes_code_and_metrics(run, tmp_path):
    logs, records, checks = run
    out = tmp_path / "report"
    assert report_main(["report", str(logs), "-o", str(out), "--strict", "--no-browser"]) == 0
    directory = orjson.loads((out / "compile_directory.json").read_bytes())
    pages = {g["compile_id"]: (out / g["page"]).read_text() for g in directory["dynamo_graphs"]["graphs"]}
    first, second = pages["0/0"], pages["0/1"]
    assert f"Guards: {checks['0/0']} checks" in first and "1 failed by a later call" in first
    failed = re.search(r'<tr class="guard-failed"><td>TENSOR_MATCH</td><td><code>check_tensor\(tokens,', first)
    assert failed, "the check the second call failed, on the first graph's page, in the user's names"
    assert "made dynamic</td><td><code>tokens dim 1</code>" in second
    assert "fx_recompile.py:" in second.split('id="shapes"')[1].split("</table>")[0]  # the user's line
    assert "inductor&#39;s code" in first and "AOT backward graph" in first and "Dynamo&#39;s output graph" in first
    assert "<th>guards (Dynamo&#39;s)</th>" in first


def test_nothing_is_attached_without_a_log(tmp_path):
    provenance.enable()  # capture only: no exporter keeps text
    try:
        assert _ours() == []
    finally:
        provenance.disable()



def test_a_piece_compiles_call_site_is_the_users_call_not_the_compiled_functions_def(run):
    """Dynamo runs its compiled code in the frame of the function it compiled, at that function's first
    line: not a line of the user's (for HF models, transformers' `@wraps(func)`), so the call site ends
    at the call above it."""
    _, records, _ = run
    starts = [r for r in records if r["type"] == "compile_start"]
    assert starts
    for start in starts:
        innermost = start["call_stack"][-1]
        assert innermost[1] == fx_recompile.line_of("fxr call") and innermost[0] == fx_recompile.__file__, innermost


def test_a_dim_dynamo_made_dynamic_recompiles_thunders_pieces_in_the_users_names(tmp_path):
    """Lengths 16, 8, 12: Dynamo makes the length dynamic at 8 ([0/1], symbol s27); at 12 it reuses [0/1],
    and each of its Thunder pieces recompiles, since Thunder compiled it for length 8. The pieces' reasons
    name the user's input and dim, not FX's placeholders (`l_tokens_`, `s27`); the graph page says why."""
    logs = tmp_path / "logs"
    torch._dynamo.reset()
    provenance.enable(logs)
    try:
        torch.manual_seed(0)
        model = thunder_failures.run(lambda: __import__("thunder").dynamo.thunderfx(fx_recompile.Seq()))
        for length in (16, 8, 12):
            thunder_failures.run(lambda length=length: model(torch.randn(2, length, 4)).sum().backward())
    finally:
        provenance.disable()
    (log,) = logs.glob("*.jsonl")
    records = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    reasons = [r["reason"] for r in records if r["type"] == "recompile"]
    assert reasons and all("l_tokens_" not in r and "s27" not in r for r in reasons), reasons
    assert any(r.startswith(("tokens", "tokens dim 1")) for r in reasons), reasons
    out = tmp_path / "report"
    assert report_main(["report", str(logs), "-o", str(out), "--no-browser"]) == 0
    graphs = orjson.loads((out / "compile_directory.json").read_bytes())["dynamo_graphs"]["graphs"]
    dynamic = next(g for g in graphs if g["compile_id"] == "0/1")
    assert dynamic["torch"]["fixed_by_thunder"] == ["tokens dim 1 (s27)"]
    page = (out / dynamic["page"]).read_text()
    assert "a new size compiles the graph's Thunder pieces again" in page
    assert re.search(r"\(\d+ piece recompiles? here\)", page)


def test_only_thunderfx_graphs_artifacts_are_written(run, tmp_path):
    """Each record's frame compile made a ThunderFX graph; Thunder's torch.compile executor compiles its
    fusions with torch.compile too (Dynamo frames of their own): none of theirs reaches the log."""
    _, records, _ = run
    graphs = {r["compile_id"] for r in records if r["type"] == "dynamo_graph"}
    assert {r["compile_id"] for r in records if r["type"] == "torch_trace"} == graphs
    import thunder
    from thunder.executors.torch_compile import torch_compile_ex

    provenance.enable(tmp_path / "logs")
    try:
        jf = thunder.jit(lambda x: torch.nn.functional.gelu(x * 2) + 1, executors=[torch_compile_ex])
        thunder_failures.run(lambda: jf(torch.randn(8)))
        fused = [b for b in thunder.last_traces(jf)[-1].bound_symbols if b.sym.is_fusion]
        assert fused  # inductor compiled a fusion, through Dynamo
    finally:
        provenance.disable()
    (log,) = (tmp_path / "logs").glob("*.jsonl")
    assert b'"type":"torch_trace"' not in log.read_bytes()


def test_a_torch_trace_directory_of_the_same_run_gives_the_same_sections(run, tmp_path):
    """The program again in a process of its own, logged with TORCH_TRACE (tlparse's input) and
    THUNDER_TRACE without our capture of torch's trace: `report DIR TORCH_DIR` merges torch's log
    by pid and compile id, and each graph page shows what our own capture gave (guards as counted
    by torch in the first run, the dynamic dim, inductor's code)."""
    import os
    import subprocess
    import sys

    from paths import ROOT, SUPPORT

    env = {k: v for k, v in os.environ.items() if k not in ("THUNDER_TRACE_PROFILE", "CI")}
    env.update(THUNDER_TRACE=str(tmp_path / "logs"), THUNDER_TRACE_TORCH="0", TORCH_TRACE=str(tmp_path / "tt"),
               PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    cmd = [sys.executable, str(SUPPORT / "fx_recompile.py")]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    thunder_failures.check_process(cmd, env, done, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (log,) = (tmp_path / "logs").glob("*.jsonl")
    assert b'"type":"torch_trace"' not in log.read_bytes()  # THUNDER_TRACE_TORCH=0: ours off
    out = tmp_path / "report"
    assert report_main(["report", str(tmp_path / "logs"), str(tmp_path / "tt"), "-o", str(out), "--strict",
                        "--no-browser"]) == 0
    _, _, checks = run
    graphs = orjson.loads((out / "compile_directory.json").read_bytes())["dynamo_graphs"]["graphs"]
    pages = {g["compile_id"]: (out / g["page"]).read_text() for g in graphs}
    assert set(pages) == {"0/0", "0/1"}
    for compile_id, page in pages.items():
        assert f"Guards: {checks[compile_id]} checks" in page, compile_id
        assert "inductor&#39;s code" in page and "Dynamo&#39;s output graph" in page
    assert "made dynamic</td><td><code>tokens dim 1</code>" in pages["0/1"]
    assert "1 failed by a later call" in pages["0/0"]
