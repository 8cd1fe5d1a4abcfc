"""ThunderFX's whole compile and Dynamo's recompiles (provenance/thunder/fx_compile.py): each Dynamo
graph's compile is named phases from Dynamo's start to the last piece compiled, covering its
first step's measured wall time; a sequence-length change is explained in the user's terms, in
the log, on the graph page and in the index."""

from __future__ import annotations

import re
import time
import warnings

import fx_recompile
import orjson
import pytest
import thunder_failures
import torch

import provenance
from provenance.cli import main as report_main
from provenance.log import schema
from provenance.thunder import dynamo_reasons

NAMED = {"dynamo_trace", "split", "inductor_compile", "dynamo_finish", "thunder_compile", "inductor_backward"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fx_compile")
    torch._dynamo.reset()  # Dynamo's frame ids from 0 (the graphs are [0/0] and [0/1]), whatever ran before
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with provenance.tracing(tmp / "logs"):
            steps = thunder_failures.run(fx_recompile.main)
    assert [str(w.message) for w in caught if "thunder-provenance" in str(w.message)] == []
    (log,) = (tmp / "logs").glob("*.jsonl")
    records = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    out = tmp / "report"
    assert report_main(["report", str(tmp / "logs"), "-o", str(out), "--no-browser"]) == 0
    return records, steps, out


def _graphs(records: list[dict]) -> dict[str, tuple[dict, list]]:
    """compile id -> (its dynamo_graph record, every phase of its compile)."""
    graphs = {r["compile_id"]: (r, list(r["phases"])) for r in records if r["type"] == "dynamo_graph"}
    number = {r["graph"]: r["compile_id"] for r, _ in graphs.values()}
    for r in records:
        if r["type"] == "graph_phases":
            graphs[number[r["graph"]]][1].extend(r["phases"])
    return graphs


def test_records_follow_the_schema(run):
    records, _, _ = run
    assert [p for r in records for p in schema.problems(r)] == []


def test_named_phases_cover_each_graphs_first_step(run):
    """Nothing else runs in a step but the graph: its phases must account for ≥ 95% of the step's
    wall time as the program measured it, and of the graph's own window."""
    records, steps, _ = run
    graphs = _graphs(records)
    assert sorted(graphs) == ["0/0", "0/1"]
    for compile_id, (start, end) in zip(("0/0", "0/1"), steps):
        graph, phases = graphs[compile_id]
        inner = [p for p in phases if p[3] == 1]  # torch's split_module inside the splitter's `split`
        phases = [p for p in phases if p[3] == 0]
        names = {p[0] for p in phases}
        # inductor_backward only where a fallback's output needs a gradient (the HF test has one)
        assert names <= NAMED and {"dynamo_trace", "split", "inductor_compile", "dynamo_finish",
                                   "thunder_compile"} <= names, names
        (split_module,) = inner
        assert split_module[0] == "split_module" and re.fullmatch(r"\d+ nodes tried on Thunder in \d+ ms",
                                                                  split_module[4])
        assert any(p[0] == "split" and p[1] <= split_module[1] <= split_module[2] <= p[2] + 1000 for p in phases)
        spans = sorted((p[1], p[2]) for p in phases)
        assert all(b[0] >= a[1] - 1000 for a, b in zip(spans, spans[1:])), "top-level phases overlap"
        named = sum(e - s for s, e in spans)
        assert start <= graph["dynamo_start_ns"] and spans[-1][1] <= end
        assert named >= 0.95 * (end - start), (compile_id, named / (end - start))
        assert named >= 0.95 * (spans[-1][1] - graph["dynamo_start_ns"])
        inductor = [p[4] for p in phases if p[0] == "inductor_compile"]
        assert inductor and all(name.startswith("inductor_") for name in inductor)
        assert {p[4] for p in phases if p[0] == "thunder_compile"} == {
            p["name"] for p in graph["pieces"] if p["compiler"] == "thunder"}


def test_the_dynamo_recompile_is_explained(run):
    records, _, _ = run
    graphs = _graphs(records)
    assert graphs["0/0"][0]["recompile"] is None
    why = graphs["0/1"][0]["recompile"]
    assert why["reason"] == "tokens: dim 1 size 16 \u2192 8"
    (failure,) = why["failures"]
    assert failure["entry"] == "0/0" and failure["subject"] == "tokens"
    assert failure["changes"] == [["dim 1 size", "16", "8"]]
    assert "size mismatch at index 1. expected 16, actual 8" in failure["guard"]  # torch's words, kept
    assert why["call"][0] == fx_recompile.__file__ and why["call"][1] == fx_recompile.line_of("fxr call")
    assert why["function"][2] == "Seq.forward" or why["function"][2] == "forward"


def test_the_graph_page_and_index_show_the_whole_compile_and_the_reason(run):
    records, _, out = run
    directory = orjson.loads((out / "compile_directory.json").read_bytes())
    graphs = {g["compile_id"]: g for g in directory["dynamo_graphs"]["graphs"]}
    second = graphs["0/1"]
    assert second["recompile_reason"] == "tokens: dim 1 size 16 \u2192 8"
    assert second["covered_pct"] >= 95.0
    page = (out / second["page"]).read_text()
    why = page[page.index('id="why"'):page.index("</section>", page.index('id="why"'))]
    assert "Why Dynamo compiled again" in why
    assert re.search(r"<code>tokens</code></b>\s*dim 1 size <code>16</code> &rarr; <code>8</code>", why)
    assert f"fx_recompile.py:{fx_recompile.line_of('fxr call')}" in why
    timing = page[page.index('id="compile-time"'):]
    # the bar's segments are data the page's script draws (report.js phaseBars): each names its phase when wide enough
    bar = orjson.loads(re.search(r'<script type="application/json" class="phases">(.*?)</script>', timing).group(1))
    shown = {segment[1] for segment in bar["s"]}
    for name in ("dynamo_trace", "split", "inductor_compile", "thunder_compile"):
        assert name in shown
    index = (out / "index.html").read_text()
    assert "1 recompile<" in index or "1 recompile " in index  # Dynamo's, counted with Thunder's (none here)
    total = float(re.search(r'<div class="num">([\d.]+) s</div><div>compile time</div>', index).group(1))
    assert total >= 0.99 * sum(g["seconds"] for g in graphs.values()) - 0.01
    perfetto = orjson.loads((out / "perfetto_trace.json").read_bytes())
    slices = {e["name"] for e in perfetto["traceEvents"] if e.get("cat") == "dynamo_graph"}
    assert slices == {"Dynamo graph [0/0]", "Dynamo graph [0/1]"}


@pytest.mark.parametrize("torch_says, subject, changes, reason", [
    ("0/0: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 16, actual 8",
     "input_ids", [["dim 1 size", "16", "8"]], "input_ids: dim 1 size 16 \u2192 8"),
    ("1/2: tensor 'L['x']' stride mismatch at index 0. expected 4, actual 8",
     "x", [["dim 0 stride", "4", "8"]], "x: dim 0 stride 4 \u2192 8"),
    ("0/0: tensor 'L['self']._modules['lin']._parameters['weight']' requires_grad mismatch. expected requires_grad=1,"
     " actual requires_grad=0", None, None, None),
    ("0/0: L['n'] == 3", "n", [], "n: guard n == 3 failed"),
])
def test_torchs_reasons_in_the_users_terms(torch_says, subject, changes, reason):
    (found,) = dynamo_reasons.failures([torch_says])
    assert found["guard"] == torch_says.split(": ", 1)[1]
    if subject is None:  # no old/new pair torch words as "expected X, actual Y" with a comma: the text is kept
        assert found["subject"] and "requires_grad" in found["reason"]
        return
    assert (found["subject"], found["changes"], found["reason"]) == (subject, changes, reason)


def test_the_executors_fusion_compiles_are_phases_of_the_graphs_compile(tmp_path):
    """With Thunder's torch.compile executor, each fusion compiles (inductor, through Dynamo) at its first
    call, inside the graph's first step: counted as the graph's `executor_compile` phases, the graph's
    named phases cover nearly all of that step (they were 'other' before: 5.8 of HF Llama's 40.6 s). "Nearly
    all" is ≥ 90%: ~99% here when quiet, 94.9% once on CI's loaded machine, where the step's own work outside
    any compile (the call, the backward's run) is preempted too; the fusions are asserted as phases above."""
    import thunder
    from thunder.executors.torch_compile import torch_compile_ex

    def step() -> tuple[int, int]:
        torch.manual_seed(0)
        model = thunder.dynamo.thunderfx(fx_recompile.Seq(), executors=[torch_compile_ex])
        start = time.time_ns()
        model(torch.randn(2, 16, 4)).sum().backward()
        return start, time.time_ns()

    torch._dynamo.reset()
    with provenance.tracing(tmp_path / "logs"):
        start, end = thunder_failures.run(step)
    out = tmp_path / "report"
    assert report_main(["report", str(tmp_path / "logs"), "-o", str(out), "--no-browser", "--strict"]) == 0
    (graph,) = orjson.loads((out / "compile_directory.json").read_bytes())["dynamo_graphs"]["graphs"]
    fusions = [p for p in graph["phases"] if p["name"] == "executor_compile"]
    assert fusions and all(re.fullmatch(r"TorchCompile\d+ \(torchcompile\)", p["detail"]) for p in fusions), fusions
    spans = sorted((p["start_ns"], p["end_ns"]) for p in graph["phases"])
    named = sum(e - s for s, e in spans)
    assert start <= graph["dynamo_start_ns"] and spans[-1][1] <= end
    print("SHARE", named / (end - start), sum(p["end_ns"] - p["start_ns"] for p in fusions) / (end - start))
    assert named >= 0.90 * (end - start), named / (end - start)
    assert graph["seconds"] * 1e9 >= 0.90 * (end - start)  # the graph's compile time: its first step, nearly all
    page = (out / graph["page"]).read_text()
    assert "executor_compile" in page
