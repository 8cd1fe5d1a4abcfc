"""ThunderFX (thunderfx() and torch.compile(backend=ThunderCompiler())): every op points at the
user's line and the original model's module, not at FX's generated code; the Dynamo graphs, the
splitter's pieces (with reasons) and the graph breaks are recorded."""

from __future__ import annotations

import collections
import gc
import re
import types
import warnings
import weakref

import models
import pytest
import thunder
import thunder.dynamo
import thunder_failures
import torch
from collecting import Collect
from paths import EXAMPLES

import provenance
from provenance import Kind
from provenance.log import schema
from provenance.thunder import capture, state
from provenance.thunder.state import COMPILE_ATTR

L = models.line_of
# Breaky's compute lines -> the module (path, class) their ops must name
EXPECTED = {
    L("fx up"): ("up", "Linear"),
    L("fx fallback"): ("", "Breaky"),
    L("fx tanh"): ("", "Breaky"),
    L("fc1 call"): ("inner.mlp.fc1", "Linear"),
    L("helper"): ("inner.mlp", "Mlp"),
    L("fc2 call"): ("inner.mlp.fc2", "Linear"),
    L("fx block residual"): ("inner", "BreakingBlock"),
    L("fx head"): ("head", "Linear"),
}


def _compile(entry: str, model: torch.nn.Module, **options):
    """(compiled callable, what to ask provenance.fx_graphs about)"""
    if entry == "thunderfx":
        compiled = thunder.dynamo.thunderfx(model, **options)
        return compiled, compiled
    backend = thunder.dynamo.ThunderCompiler(**options)
    return torch.compile(model, backend=backend), backend


def _run(entry: str, model: torch.nn.Module, x: torch.Tensor, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled, handle = _compile(entry, model, **options)
        out = compiled(x)
        out.sum().backward()
    ours = [str(w.message) for w in caught if "thunder-provenance" in str(w.message)]
    assert ours == [], ours
    return compiled, handle, out


@pytest.fixture(scope="module", params=["thunderfx", "torch.compile"])
def breaky(request):
    """Breaky compiled once per entry point (forward + backward), with tracing on (and the events
    the session emits collected)."""
    provenance.enable()
    try:
        collect = Collect()
        provenance.add_exporter(collect)
        model, x = models.Breaky(), torch.randn(8, 8)
        expected = model(x)
        compiled, handle, out = thunder_failures.run(lambda: _run(request.param, model, x))
        yield types.SimpleNamespace(entry=request.param, compiled=compiled, handle=handle, out=out,
                                    expected=expected, events=collect.events)
    finally:
        provenance.disable()


def _compute(trace) -> list:
    return [b for b in trace.bound_symbols if provenance.of(b).kind != Kind.BOOKKEEPING]


def _thunder_pieces(handle):
    return [p for g in provenance.fx_graphs(handle) for p in g.pieces if p.thunder]


class TwoLinears(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = torch.nn.Linear(4, 8), torch.nn.Linear(8, 4)

    def forward(self, x):
        h = self.up(x)
        print("between")
        return self.down(h)


def test_two_linears_with_a_print_between(traced):
    """The issue's first try: a 'str' label (ThunderFX's prologue pass) faulted the compile hook."""
    compiled, handle, _ = _run("thunderfx", TwoLinears(), torch.randn(2, 4, requires_grad=True))
    linears = [provenance.of(b) for t in compiled.last_traces for b in t.bound_symbols if b.sym.name == "linear"]
    assert [(r.module, r.module_type, r.user_frame.text) for r in linears] == [
        ("up", "Linear", "h = self.up(x)"), ("down", "Linear", "return self.down(h)")]
    prologues = [t for p in _thunder_pieces(handle) for t in thunder.last_prologue_traces(p.fn)]
    assert sum(isinstance(t.get_provenance(), str) for t in prologues) == 2  # one per piece
    assert all(provenance.coverage(t, deep=True).missing == [] for t in prologues)


def test_graph_breaks_lines_modules_and_pieces(breaky):
    handle = breaky.handle
    torch.testing.assert_close(breaky.out, breaky.expected)

    pieces = _thunder_pieces(handle)
    assert len(pieces) == 6
    seen_lines = set()
    for piece in pieces:
        fw = thunder.last_traces(piece.fn)[-1]
        bw = thunder.last_backward_traces(piece.fn)[-1]
        for trace in (fw, bw):
            cov = provenance.coverage(trace)
            assert cov.missing == [] and cov.compute_with_user_source == cov.compute == cov.compute_with_module
            for bsym in _compute(trace):
                record = provenance.of(bsym)
                frame = record.user_frame
                # the user's exact line in the model file, and the original model's module
                assert frame.file == models.__file__ and frame.line in EXPECTED, (bsym.sym.name, record)
                assert (record.module, record.module_type) == EXPECTED[frame.line], (bsym.sym.name, record)
                # FX's generated line is kept, marked generated (not the user's), with its node
                generated = record.generated_frame
                assert generated.file.startswith("<eval_with_key>") and not generated.user
                assert record.fx_node in piece.nodes
                seen_lines.add(frame.line)
                if trace is bw:
                    assert record.kind == Kind.BACKWARD and record.derived_from.source == record.source
        # the piece's user lines are what its ops say
        assert {f.line for f in piece.frames} <= set(EXPECTED)
    assert seen_lines == set(EXPECTED)

    # the helper: its line, then the line that called it
    helper = [provenance.of(b) for p in pieces for b in _compute(thunder.last_traces(p.fn)[-1])
              if provenance.of(b).user_frame.line == L("helper")]
    assert helper and all([f.line for f in r.source if f.user] == [L("helper"), L("helper call"), L("fx block mlp")]
                          for r in helper)

    # each Thunder piece's compiles are linked to it (CompileState on Thunder's CompileStats)
    for piece in pieces:
        state_ = getattr(thunder.compile_stats(piece.fn), COMPILE_ATTR)
        assert piece.compiles == [state_.id] and state_.piece is piece


def test_splits_and_graph_breaks_are_recorded_with_reasons_and_lines(breaky):
    compiled, handle = breaky.compiled, breaky.handle
    graphs = provenance.fx_graphs(handle)
    assert [g.number for g in graphs] == sorted(g.number for g in graphs)
    assert all(re.fullmatch(r"\d+/\d+", g.compile_id) for g in graphs)
    if breaky.entry == "torch.compile":
        assert provenance.fx_graphs(compiled) == graphs  # the OptimizedModule finds its backend

    # the first graph: Thunder, the det fallback (torch's inductor), Thunder
    first = graphs[0]
    assert [(p.name, p.compiler) for p in first.pieces] == [
        ("thunder_0", "thunder"), ("inductor_1", "inductor"), ("thunder_2", "thunder")]
    fallback = first.pieces[1]
    assert first.split and fallback.nodes == ("detach", "linalg_det") and fallback.compiles == []
    assert [(r.kind, r.node, r.user_frame.line, r.module, r.module_type) for r in fallback.reasons] == [
        ("MISSING_OP_SUPPORT", "detach", L("fx fallback"), "", "Breaky"),
        ("MISSING_OP_SUPPORT", "linalg_det", L("fx fallback"), "", "Breaky"),
    ]
    assert all("only has an automatic torch fallback" in r.info for r in fallback.reasons)
    assert first.split_reasons == fallback.reasons
    assert [f.line for f in fallback.frames] == [L("fx fallback")]
    assert not any(p.reasons for g in graphs for p in g.pieces if p.thunder)

    # Dynamo's graph breaks: torch's reason, the user's line; the first one ended the first graph
    breaks = provenance.graph_breaks(handle)
    assert [(b.user_frame.line, b.user_frame.file) for b in breaks] == [
        (L("fx print"), models.__file__), (L("fx block break"), models.__file__),
        (L("fx block break"), models.__file__)]
    assert "print" in breaks[0].reason and "graph_break()" in breaks[1].summary
    assert first.breaks == (breaks[0],) and breaks[0].compile_id == first.compile_id
    # the break inside the block: its stack goes up to the call of the block
    assert [f.line for f in breaks[1].frames if f.user] == [L("fx block break"), L("fx inner call")]
    assert provenance.graph_breaks() and provenance.graph_breaks(object()) == []


def test_the_log_names_graphs_pieces_splits_and_breaks(breaky):
    """The session's events: a dynamo_graph per graph (pieces, split reasons at the user's line),
    a graph_break per break, and each piece's compile named after its graph and piece."""
    emitted = [e for e in breaky.events if e["type"] in ("dynamo_graph", "graph_break", "compile_start")]
    assert all(schema.problems(e) == [] for e in emitted), [schema.problems(e) for e in emitted]
    graphs = provenance.fx_graphs(breaky.handle)
    logged = [e for e in emitted if e["type"] == "dynamo_graph"]
    assert [(e["graph"], e["compile_id"]) for e in logged] == [(g.number, g.compile_id) for g in graphs]
    first = logged[0]
    assert [(p["name"], p["compiler"], p["nodes"]) for p in first["pieces"]] == [
        ("thunder_0", "thunder", 1), ("inductor_1", "inductor", 2), ("thunder_2", "thunder", 1)]
    assert [(r["piece"], r["node"], r["kind"], r["frames"][0][1], r["module_type"]) for r in first["reasons"]] == [
        ("inductor_1", "detach", "MISSING_OP_SUPPORT", L("fx fallback"), "Breaky"),
        ("inductor_1", "linalg_det", "MISSING_OP_SUPPORT", L("fx fallback"), "Breaky")]
    assert first["start_ns"] <= first["time_ns"]
    breaks = [e for e in emitted if e["type"] == "graph_break"]
    assert [(b["compile_id"], b["frames"][0][1]) for b in breaks] == [
        (graphs[0].compile_id, L("fx print")), (graphs[1].compile_id, L("fx block break")),
        (graphs[2].compile_id, L("fx block break"))]
    # where the script called the compiled model (the test's `compiled(x)`), outermost first
    assert list(breaks[0]["call_stack"][-1][:3]) == [__file__, _run.__code__.co_firstlineno + 4, "_run"]
    # a break comes before the graph it ended; a piece's compile after its graph
    order = [(e["type"], e.get("compile_id") or (e.get("piece") or {}).get("compile_id")) for e in emitted]
    first_id = graphs[0].compile_id
    assert order.index(("graph_break", first_id)) < order.index(("dynamo_graph", first_id))
    starts = [e for e in emitted if e["type"] == "compile_start"]
    pieces = {(g.number, p.name): p for g in graphs for p in g.pieces}
    assert starts and all(pieces[(e["piece"]["graph"], e["piece"]["name"])].compiles.count(e["compile"]) == 1
                          for e in starts)
    assert [e["fn"] for e in starts][:2] == [f"[{first_id}] thunder_0", f"[{first_id}] thunder_2"]
    assert all(e["index"] == 0 for e in starts)


def test_generated_frames_round_trip_through_the_log(tmp_path):
    """The log writes a generated frame's two extra fields; the reader rebuilds the very records
    the process had (FX's generated line and node included)."""
    from provenance.report.read.log_file import Log

    with provenance.tracing(tmp_path):
        compiled = thunder.dynamo.thunderfx(TwoLinears())
        compiled(torch.randn(2, 4)).sum()
        records = {b.sym.name: provenance.of(b) for t in compiled.last_traces for b in t.bound_symbols
                   if b.sym.name == "linear"}
    log = Log(tmp_path)
    provs = [r for r in log if r.type == "prov"]
    rebuilt = [log.files[0].provenance(r["id"]) for r in provs]
    generated = [f for r in provs for f in r["source"] if len(f) == 7]
    assert generated and all(f[4] is False and f[5] is True and isinstance(f[6], str) for f in generated)
    assert all(len(f) == 5 for r in provs for f in r["source"] if f not in generated)
    assert records["linear"] in rebuilt and records["linear"].generated_frame is not None
    assert any(p.generated_frame == records["linear"].generated_frame and p.fx_node for p in rebuilt)


def _key(record) -> tuple:
    users = tuple((f.file, f.line) for f in record.source if f.user)
    return record.kind, record.module, record.module_type, users, record.transforms, record.role


def _signature(traces) -> collections.Counter:
    """What provenance says about the compute ops of `traces`, order aside."""
    found = collections.Counter()
    for trace in traces:
        for bsym in _compute(trace):
            record = provenance.of(bsym)
            if record.kind == Kind.FUSION:
                found[("fusion", frozenset(map(_key, record.members)))] += 1
            else:
                found[(bsym.sym.name, *_key(record))] += 1
    return found


def _as_on_thunder_jit(model, x, **options) -> tuple:
    jm = thunder.jit(model, **options)
    jm(x).sum().backward()
    compiled, _, _ = _run("thunderfx", model, x, **options)
    jit_ops = _signature([thunder.last_traces(jm)[-1], thunder.last_backward_traces(jm)[-1]])
    return jit_ops, _signature(compiled.last_traces + compiled.last_backward_traces)


def test_provenance_is_as_on_thunder_jit(traced):
    """Same model, same scope: thunder.jit and thunderfx give the same records (module, user
    frames, kind, lineage, role), backward and roles included."""
    with provenance.scope("step", role="ddp.sync_param"):
        jit_ops, fx_ops = _as_on_thunder_jit(models.Net(n=8, depth=1), torch.randn(3, 8))
    assert fx_ops == jit_ops
    assert {k[5] for k in fx_ops} >= {(), ("grad",)} and {k[6] for k in fx_ops} >= {"ddp.grad_all_reduce"}


@pytest.mark.slow
def test_fusions_and_recompute_as_on_thunder_jit(traced):
    """The torch.compile executor's fusions (members, rematerialization's recompute) as on thunder.jit."""
    from thunder.executors.torch_compile import torch_compile_ex

    executors = [torch_compile_ex, *thunder.get_default_executors()]
    jit_ops, fx_ops = _as_on_thunder_jit(models.Net(n=8, depth=1), torch.randn(3, 8), executors=executors)
    assert fx_ops == jit_ops
    members = [m for key in fx_ops if key[0] == "fusion" for m in key[1]]
    assert members and all(users and users[0][0] == models.__file__ and module is not None
                           for _, module, _, users, _, _ in members)
    assert {kind for kind, *_ in members} >= {Kind.BACKWARD, Kind.RECOMPUTE}  # rematerialization


def test_checkpointed_region_points_at_the_checkpoint_call(traced):
    """Known limit: Thunder traces a checkpointed FX body as one symbol (its nodes, rewritten to
    Thunder ops, lose Dynamo's metadata): its ops, forward and recomputed, name the line and
    module of the `checkpoint(...)` call."""

    class Checkpointed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = models.Mlp(8)

        def forward(self, x):
            return torch.utils.checkpoint.checkpoint(self.inner, x, use_reentrant=False)

    compiled, _, _ = _run("thunderfx", Checkpointed(), torch.randn(3, 8, requires_grad=True))
    bw = compiled.last_backward_traces[-1]
    recomputed = [provenance.of(b) for b in _compute(bw) if provenance.of(b).kind == Kind.RECOMPUTE]
    assert recomputed and all(r.lineage.endswith("recompute(op)") and r.derived_from for r in recomputed)
    for record in recomputed + [provenance.of(b) for b in _compute(compiled.last_traces[-1])]:
        assert record.user_frame.text == "return torch.utils.checkpoint.checkpoint(self.inner, x, use_reentrant=False)"
        assert (record.module, record.module_type) == ("", "Checkpointed")


def test_generated_code_is_never_user_source(traced):
    """A GraphModule without Dynamo's metadata (symbolic_trace): its ops keep the generated
    frame and its node, and coverage() counts no user source; nor does exec()'d code."""
    gm = torch.fx.symbolic_trace(models.Mlp(4))
    jm = thunder.jit(gm)
    jm(torch.randn(2, 4))
    fw = thunder.last_traces(jm)[-1]
    records = [provenance.of(b) for b in _compute(fw)]
    assert records and all(r.user_frame is None for r in records)
    assert {r.fx_node for r in records} >= {"fc1", "fc2"} and all(r.generated_frame.generated for r in records)
    cov = provenance.coverage(fw)
    assert cov.compute > 0 and cov.compute_with_user_source == 0

    # a GraphModule without torch's line map: the generated frame alone, without a node
    bare = torch.fx.symbolic_trace(models.Mlp(4))
    bare._lineno_map = None
    jm = thunder.jit(bare)
    jm(torch.randn(2, 4))
    records = [provenance.of(b) for b in _compute(thunder.last_traces(jm)[-1])]
    assert records and all(r.generated_frame is not None and r.fx_node is None for r in records)

    scope: dict = {}
    exec("def double(x):\n    return x * 2\n", {"torch": torch}, scope)
    jf = thunder.jit(scope["double"])
    jf(torch.ones(2))
    record = provenance.of(_compute(thunder.last_traces(jf)[-1])[0])
    assert record.source[0].file == "<string>" and record.source[0].generated and record.user_frame is None


def test_listeners_see_graphs_and_breaks_and_their_errors_stay_ours(traced, monkeypatch):
    from provenance.thunder import thunderfx

    seen: list = []
    monkeypatch.setattr(thunderfx, "graph_listeners", [seen.append])
    monkeypatch.setattr(thunderfx, "break_listeners", [seen.append])
    compiled, handle, _ = _run("thunderfx", TwoLinears(), torch.randn(2, 4))
    graphs, breaks = provenance.fx_graphs(handle), provenance.graph_breaks(handle)
    assert len(graphs) == 2 and len(breaks) == 1
    assert sorted(map(id, seen)) == sorted(map(id, graphs + breaks))
    # in order: a graph ended by a break is announced after it
    assert seen.index(graphs[0]) > seen.index(breaks[0])

    def broken(_):
        raise RuntimeError("listener bug")

    monkeypatch.setattr(thunderfx, "graph_listeners", [broken])
    model, x = models.Net(n=8, depth=1), torch.randn(3, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = thunder.dynamo.thunderfx(model)(x)
    ours = [str(w.message) for w in caught if "thunder-provenance" in str(w.message)]
    assert len(ours) == 1 and "listener bug" in ours[0]
    torch.testing.assert_close(out, model(x))


@pytest.mark.slow
def test_example_prints_graphs_breaks_and_annotated_pieces():
    import subprocess
    import sys

    example = EXAMPLES / "thunderfx.py"
    done = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    out = done.stdout
    assert re.search(r"#### graph break \[0/0\] at thunderfx.py:\d+: Failed to trace builtin operator", out)
    assert out.count("#### Dynamo graph ") == 2
    coverage = re.findall(r"final \w+ trace: \d+/\d+ with provenance, (\d+)/(\d+) compute ops at user source, "
                          r"(\d+)/(\d+) with module", out)
    assert len(coverage) == 4 and all(a == b == c == d for a, b, c, d in coverage)
    assert "# ── blocks.0.attn.qkv (Linear) · thunderfx.py:" in out and "# ── blocks.1.mlp.0 (Linear)" in out
    assert "<eval_with_key>" not in out


def test_the_splitters_trial_runs_are_not_captured(traced, monkeypatch):
    """The splitter runs each node's Thunder symbol on proxies to see if Thunder takes it: those
    symbols are thrown away, and capture stays out of them (it cost as much as a compile's)."""
    from provenance.thunder import hooks

    worked = collections.Counter()  # symbols capture looked at: inside a trial run or not
    inside = [False]
    ambient_record = hooks.ambient_record

    def counting(*args):
        worked[inside[0]] += 1
        return ambient_record(*args)

    original = thunder.dynamo.utils.try_execute_thunder_symbol

    def trying(*args, **kwargs):
        inside[0] = True
        try:
            return original(*args, **kwargs)
        finally:
            inside[0] = False

    provenance.disable()  # (disable restores Thunder's own function)
    monkeypatch.setattr(hooks, "ambient_record", counting)
    monkeypatch.setattr(thunder.dynamo.utils, "try_execute_thunder_symbol", trying)
    provenance.enable()  # our hook now wraps `trying`
    try:
        _run("thunderfx", models.Net(n=8, depth=1), torch.randn(3, 8))
        assert worked[False] > 0 and worked[True] == 0
        monkeypatch.setattr(state, "_SUSPENDED", state._DETACHED)  # without the suspension
        torch._dynamo.reset()  # else Dynamo reuses its graph for the new instance: no new split
        _run("thunderfx", models.Net(n=8, depth=1), torch.randn(3, 8))
        assert worked[True] > 0
    finally:  # restore in order: our hooks, then the test's patches
        provenance.disable()
        monkeypatch.undo()
        provenance.enable()


def test_fault_in_thunderfx_hook_warns_once_and_results_stay_correct(traced, monkeypatch):
    model, x = models.Net(n=8, depth=1), torch.randn(3, 8)
    expected = model(x)
    monkeypatch.setattr(capture.ACTIVE, "fault_injection", "thunderfx")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = thunder_failures.run(lambda: thunder.dynamo.thunderfx(model)(x))  # (it reads capture.ACTIVE)
    ours = [str(w.message) for w in caught if "thunder-provenance" in str(w.message)]
    assert len(ours) == 1 and "'thunderfx'" in ours[0]
    torch.testing.assert_close(out, expected)


def test_nothing_of_ours_keeps_the_model_alive(traced):
    model = models.Breaky()
    compiled, handle, _ = _run("thunderfx", model, torch.randn(8, 8))
    graphs = provenance.fx_graphs(handle)
    assert graphs and all(p.fn is not None for g in graphs for p in g.pieces)
    alive = weakref.ref(model)
    del model, compiled, handle
    torch._dynamo.reset()  # Dynamo's own caches hold the compiled frames
    gc.collect()
    assert alive() is None
    # The pieces may live on (Dynamo keeps its compiled functions in the model file's globals),
    # but not through us: nothing of ours refers to them (Piece holds a weak reference).
    ours = (provenance.Piece, provenance.DynamoGraph, state.CompileState)
    for piece in (p for g in graphs for p in g.pieces):
        fn = piece.fn
        if fn is not None:
            assert not [r for r in gc.get_referrers(fn) if isinstance(r, ours)]
            assert not [r for r in gc.get_referrers(fn) if type(r).__module__.startswith("provenance")]
        del fn


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["thunderfx", "torch.compile"])
@pytest.mark.parametrize("build", [models.nanogpt, models.llama2], ids=["nanogpt", "llama2"])
def test_real_models_under_thunderfx(traced, build, entry):
    model, x = build()
    model_file = __import__(type(model).__module__, fromlist=["_"]).__file__
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled, handle = _compile(entry, model)
        models.forward_backward(compiled, x)
    assert [str(w.message) for w in caught if "thunder-provenance" in str(w.message)] == []
    pieces = _thunder_pieces(handle)
    for traces in ([thunder.last_traces(p.fn)[-1] for p in pieces],
                   [thunder.last_backward_traces(p.fn)[-1] for p in pieces]):
        compute = [provenance.of(b) for t in traces for b in _compute(t)]
        at_model = [r for r in compute if r.user_frame is not None and r.user_frame.file == model_file
                    and r.module is not None]
        assert len(compute) > 20 and len(at_model) / len(compute) >= 0.95
