"""Per-op profiling of compiled functions and its roll-ups, on real Thunder compiles (CPU)."""

from __future__ import annotations

import gc
import inspect
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import warnings
import weakref
from pathlib import Path

import models
import pytest
import thunder
import thunder.dynamo
import torch
from cuda_stand_ins import FakeCudaEvent
from paths import SUPPORT

import provenance
from provenance import Kind
from provenance.thunder import capture, profiling
from provenance.timing import rollup
from provenance.timing.profile import BACKWARD, FORWARD, MAX_CALLS, parse_count
from provenance.timing.rollup import BETWEEN

MODELS_FILE = models.__file__


@pytest.fixture
def profiled(request):
    """Capture with profiling of `request.param` calls (default 2), one intra-op thread: on this
    shared 2-core machine a second OpenMP thread stalls whenever the other one is descheduled."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    provenance.enable(profile=getattr(request, "param", 2))
    try:
        yield
    finally:
        provenance.disable()
        torch.set_num_threads(threads)


def rows_by_key(rows):
    return {r.key: r for r in rows}


def line(marker: str) -> str:
    return f"{MODELS_FILE}:{models.line_of(marker)}"


def generated(fn):
    """The generated Python function behind a Thunder callable (under its decorators)."""
    return inspect.unwrap(fn)


@pytest.mark.parametrize("profiled", [3], indirect=True)
def test_the_big_matmul_line_ranks_first_with_its_backward(profiled):
    model = models.OneBigLine(n=768)  # ~10 ms per matmul: well above this machine's preemptions
    x = torch.randn(768, 768)
    jm = thunder.jit(model)
    for _ in range(4):
        models.forward_backward(jm, x)

    (profile,) = provenance.profiles(jm)
    assert profile.calls == 3 and profile.traces[FORWARD].calls == profile.traces[BACKWARD].calls == 3
    rows = provenance.cost(jm, by="line")
    top = rows[0]
    assert top.key == line("big matmul"), [(r.key, r.median_ns) for r in rows]
    assert top.share > 0.5 and top.calls == 3
    assert top.backward_ns > 0.3 * top.forward_ns > 0  # the weight gradient: another n^3 matmul
    # the backward time reaches the line through derived_from: the backward ops' own records
    # are grad(...) records whose forward op is the matmul
    backward = profile.traces[BACKWARD]
    charged = [i for i, op in enumerate(backward.ops)
               if op.record is not None and op.record.kind == Kind.BACKWARD
               and op.record.derived_from.user_frame.line == models.line_of("big matmul")]
    measured, _ = profile.measured()
    ran = [c for c in backward.recent if c.call in measured]
    # the sum of those ops' medians over the measured calls
    assert charged and sum(statistics.median(c.op_ns[i] for c in ran) for i in charged) == top.backward_ns
    assert all(backward.ops[i].record.derived_from.kind in (Kind.OP, Kind.DECOMPOSITION) for i in charged)
    for marker in ("tiny", "tiny slice"):
        assert rows_by_key(rows)[line(marker)].median_ns < top.median_ns / 3


@pytest.mark.slow
@pytest.mark.parametrize("profiled", [2], indirect=True)
def test_ops_cover_most_of_the_profiled_wall_time_on_nanogpt(profiled):
    from thunder.tests.nanogpt_model import GPT, GPTConfig

    # ops of realistic size: with tiny ones, one preemption of this shared machine landing
    # between two ops would weigh more than the timer code it interrupted
    model = GPT(GPTConfig(n_layer=1, n_head=4, n_embd=128, block_size=64, vocab_size=256, dropout=0.0))
    x = torch.randint(0, 256, (8, 64))
    jm = thunder.jit(model)
    for _ in range(3):
        models.forward_backward(jm, x)
    (profile,) = provenance.profiles(jm)
    assert profile.calls == 2 and len(profile.traces[FORWARD].ops) > 100 and len(profile.traces[BACKWARD].ops) > 100
    assert profile.coverage >= 0.90, profile.coverage
    rows = provenance.cost(jm)
    between = rows_by_key(rows)[BETWEEN]
    assert between.sum_ns == profile.wall_ns - profile.attributed_ns  # two calls: none is a one-off
    assert sum(r.sum_ns for r in rows) == profile.wall_ns
    assert between.share <= 0.10
    # the model's lines get the time, forward and backward
    model_file = sys.modules[type(model).__module__].__file__
    at_model = sum(r.sum_ns for r in rows if r.key.startswith(model_file))
    assert at_model / profile.wall_ns > 0.8
    assert any(r.key.startswith(model_file) and r.backward_ns > 0 for r in rows)


@pytest.mark.parametrize("profiled", [2], indirect=True)
def test_calls_after_the_window_run_the_code_thunder_generated(profiled):
    x = torch.randn(4, 8)
    jm = thunder.jit(models.Net(n=8, depth=1))
    # the compile's call, 2 profiled; the window waits for the 2nd call's backward (an executor
    # compiling in it would extend the window), which never runs: the 4th call closes it, the 5th
    # runs Thunder's code
    out = [jm(x) for _ in range(5)]
    entry = thunder.compile_stats(jm).interpreter_cache[0]
    # the entry Thunder built is back in its cache, with Thunder's own generated functions
    computation = generated(entry.computation_fn)
    backward = generated(entry.backward_fn)
    assert computation.__code__.co_filename.startswith("thunder.computation")
    assert backward.__code__.co_filename.startswith("thunder.backward_fn")
    # ... which is what the last call ran (Thunder wraps it in a timer closure per call)
    ran = inspect.getclosurevars(thunder.compile_stats(jm).last_computation).nonlocals["fn"]
    assert ran is entry.computation_fn
    (profile,) = provenance.profiles(jm)
    assert profile.traces[FORWARD].calls == 2  # the 4th and 5th calls were not timed

    # the same model compiled without profiling: the same program, byte for byte
    provenance.enable(profile=0)
    plain = thunder.jit(models.Net(n=8, depth=1))
    plain(x)
    plain_entry = thunder.compile_stats(plain).interpreter_cache[0]
    assert generated(plain_entry.computation_fn).__code__.co_filename.startswith("thunder.computation")
    for ours, theirs in ((entry.computation_fn, plain_entry.computation_fn),
                         (entry.backward_fn, plain_entry.backward_fn)):
        ours, theirs = generated(ours), generated(theirs)
        assert inspect.getsource(ours) == inspect.getsource(theirs)
        assert ours.__code__.co_code == theirs.__code__.co_code
    assert provenance.profiles(plain) == []  # profiling off: no dispatcher, no profile
    assert all(torch.equal(o, out[0]) for o in out)


@pytest.mark.parametrize("profiled", [2], indirect=True)
def test_profiled_calls_compute_the_same_values_and_gradients(profiled):
    model = models.Net(n=8, depth=2)
    x = torch.randn(4, 8)
    expected = model(x)
    expected.sum().backward()
    expected_grads = [p.grad.clone() for p in model.parameters()]
    jm = thunder.jit(model)
    for call in range(4):  # warm-up, 2 profiled, 1 plain
        model.zero_grad()
        out = jm(x)
        out.sum().backward()
        torch.testing.assert_close(out, expected)
        for p, g in zip(model.parameters(), expected_grads):
            torch.testing.assert_close(p.grad, g, msg=f"call {call}")
    assert provenance.profiles(jm)[0].calls == 2


@pytest.mark.parametrize("profiled", [2], indirect=True)
def test_every_top_level_op_is_timed_by_its_position(profiled):
    jm = thunder.jit(models.Net(n=8, depth=1))
    x = torch.randn(4, 8)
    for _ in range(3):
        models.forward_backward(jm, x)
    (profile,) = provenance.profiles(jm)
    for name, trace in ((FORWARD, thunder.last_traces(jm)[-1]), (BACKWARD, thunder.last_backward_traces(jm)[-1])):
        timed = profile.traces[name]
        code_ops = [i for i, b in enumerate(trace.bound_symbols)
                    if b.sym.name not in ("python_return", "unpack_trivial", "comment")]
        assert [op.position for op in timed.ops] == code_ops
        for op in timed.ops:
            bsym = trace.bound_symbols[op.position]
            assert op.name == bsym.sym.name and op.record is provenance.of(bsym)
        assert timed.calls == 2 and len(timed.recent) == 2 and all(ns >= 0 for ns in timed.op_ns)
        assert sum(timed.op_ns) <= timed.wall_ns
    kinds = rows_by_key(provenance.cost(jm, by="kind"))
    assert kinds["bookkeeping"].forward_ns > 0 and kinds["bookkeeping"].backward_ns > 0  # dels are timed
    ops = rows_by_key(provenance.cost(jm, by="op"))
    assert ops["linear"].forward_ns > 0 and ops["python_del"].median_ns > 0


@pytest.mark.parametrize("profiled", [1], indirect=True)
def test_modules_roll_up_hierarchically(profiled):
    jm = thunder.jit(models.Net(n=8, depth=2))
    x = torch.randn(4, 8)
    for _ in range(2):
        models.forward_backward(jm, x)
    rows = rows_by_key(provenance.cost(jm, by="module"))
    (profile,) = provenance.profiles(jm)
    # recompute each module's total from the raw per-op times: the ops of it and its submodules
    per_op = [(op.record, ns) for t in profile.traces.values() for op, ns in zip(t.ops, t.op_ns)]

    def module_of(record):
        while record is not None and record.module is None:
            record = record.derived_from
        return record.module if record is not None else None

    for key in ("blocks.0", "blocks.0.mlp", "blocks.0.mlp.fc1", "blocks.1", "blocks", "head"):
        inside = sum(ns for r, ns in per_op
                     if (m := module_of(r)) is not None and (m == key or m.startswith(key + ".")))
        assert rows[key].sum_ns == inside > 0, key
    assert rows["blocks.0"].sum_ns > rows["blocks.0.mlp"].sum_ns > rows["blocks.0.mlp.fc1"].sum_ns
    assert rows["<root>"].sum_ns == sum(ns for r, ns in per_op if module_of(r) is not None)
    assert rows["<root>"].sum_ns >= rows["blocks"].sum_ns + rows["head"].sum_ns


@pytest.mark.parametrize("profiled", [3], indirect=True)
def test_rollups_by_several_groupings_work_out_each_ops_spread_once(profiled, monkeypatch):
    """The report's Time section shows five groupings of a compile: `rollups` gives each the
    rows `rollup` gives it alone, from one spread per op (and per trace's time between ops)."""
    jm = thunder.jit(models.Net(n=8, depth=2))
    x = torch.randn(4, 8)
    for _ in range(4):
        models.forward_backward(jm, x)
    kept = provenance.profiles(jm)
    bys = ("line", "module_line", "module", "role", "kind")
    alone = {by: rollup.rollup(kept, by) for by in bys}
    counted = []
    real = rollup.spread
    monkeypatch.setattr(rollup, "spread", lambda samples: counted.append(1) or real(samples))
    together = rollup.rollups(kept, bys)
    ops = sum(len(t.ops) + 1 for p in kept for t in p.traces.values() if t.recent)  # + the time between ops
    assert len(counted) == ops + len(kept)  # and each compile's wall time
    for by in bys:
        assert [(r.key, r.time, r.sum_ns, r.kind, r.members, r.share) for r in together[by]] == [
            (r.key, r.time, r.sum_ns, r.kind, r.members, r.share) for r in alone[by]], by
    assert together["line"] and together["module"]


class _Scoped(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = models.Net(n=8, depth=1)
        self.out = torch.nn.Linear(1, 4)

    def forward(self, x):
        with provenance.scope("shard", role="row_parallel.post"):
            h = self.inner(x)
        return self.out(h)


@pytest.mark.parametrize("profiled", [2], indirect=True)
def test_roles_get_their_time(profiled):
    jm = thunder.jit(_Scoped())
    x = torch.randn(4, 8)
    for _ in range(3):
        models.forward_backward(jm, x)
    rows = rows_by_key(provenance.cost(jm, by="role"))
    role = rows["row_parallel.post"]
    assert role.forward_ns > 0 and role.backward_ns > 0 and role.calls == 2
    (profile,) = provenance.profiles(jm)
    with_role = sum(ns for t in profile.traces.values() for op, ns in zip(t.ops, t.op_ns)
                    if op.record is not None and op.record.role == "row_parallel.post")
    assert role.sum_ns == with_role  # two calls: none is a one-off
    assert rows["(no role)"].sum_ns > 0  # self.out and the bookkeeping


@pytest.mark.slow
@pytest.mark.parametrize("profiled", [1], indirect=True)
def test_a_torch_compile_fusion_row_lists_its_member_lines_and_its_compile_call_is_left_out(profiled, tmp_path,
                                                                                             browser):
    from thunder.executors.torch_compile import torch_compile_ex

    from provenance.cli import main

    # the compile's own call timed too: inductor builds the fusions in it (forward and backward)
    provenance.enable(tmp_path / "logs", profile=1, profile_warmup=0)
    jm = thunder.jit(models.Net(n=8, depth=1), executors=[torch_compile_ex, *thunder.get_default_executors()])
    x = torch.randn(4, 8)
    for _ in range(3):
        models.forward_backward(jm, x)
    (profile,) = provenance.profiles(jm)
    measured, excluded = profile.measured()
    # the call that compiled is flagged and left out; the window took one more call instead
    assert profile.calls == 2 and measured == [2], (measured, excluded)
    assert [(e.call, e.trace, e.reason) for e in excluded] == [(1, "forward", "compile"), (1, "backward", "compile")]
    assert all(e.compiled and all(f.startswith("TorchCompile") for f in e.compiled) for e in excluded)
    assert "compiled TorchCompile" in excluded[0].describe() and excluded[0].describe().endswith("excluded")

    rows = provenance.cost(jm, by="line")
    fusions = [r for r in rows if r.kind == "fusion"]
    assert fusions, [(r.key, r.kind) for r in rows]
    members = {m for r in fusions for m in r.members}
    assert {line("block residual"), line("helper"), line("root tanh")} & members
    for row in fusions:
        assert row.key.startswith("TorchCompile") and len(row.members) > 1 and row.median_ns > 0
        for member in row.members:  # each member line shows the time it shares
            assert rows_by_key(rows)[member].shared_ns >= row.median_ns
    # every fusion row names its compile, by function and compile id
    assert all(re.match(r"TorchCompile\d+ \((forward|backward) of .*, compile \d+\): \d+ lines", r.label)
               for r in fusions), [r.label for r in fusions]
    # a line whose ops are all in fusions is listed with them, never as a row of 0.000
    fused_only = [r for r in rows if r.kind == "in_fusion"]
    assert fused_only and all(r.fusions and r.shared_ns > 0 and not r.ops for r in fused_only)
    assert not [r for r in rows if r.kind == "key" and r.median_ns == 0 and r.shared_ns > 0]
    provenance.disable()

    # the report says the same: the left-out call named, fused lines showing their fusion's time
    assert main(["report", str(tmp_path / "logs"), "-o", str(tmp_path / "out"), "--no-browser"]) == 0
    directory = json.loads((tmp_path / "out" / "compile_directory.json").read_text())
    entry = next(c for c in directory["compiles"] if c.get("time"))
    assert entry["time"]["calls"] == 1 and entry["time"]["profiled"] == 2
    assert [e.split(":")[0] for e in entry["time"]["excluded"]] == ["call 1 (forward)", "call 1 (backward)"]
    page = browser.open(tmp_path / "out" / entry["pages"]["compile"], "#time")
    assert "left out" in page.locator("#time .excluded").inner_text()
    page.close()
    page = browser.open(tmp_path / "out" / entry["pages"]["source"])
    gutters = page.locator(".sl .tm").all_inner_texts()
    assert gutters and "0.000" not in gutters
    fused = page.locator(".sl .cnt .c-in")
    assert fused.count() >= len({r.key for r in fused_only if r.key.startswith(MODELS_FILE)}) > 0
    assert re.fullmatch(r"TorchCompile\d+", fused.first.inner_text())  # the fusion's name; its hover the rest
    assert re.match(r"in TorchCompile\d+ \(with \d+ other lines?\)", fused.first.get_attribute("title"))
    # a fusion's time is shown once, at its first line; its other lines say where (not the same figure on each)
    shown: dict[str, list[str]] = {}
    for row in page.locator(".sl:has(.cnt .c-in)").all():
        shown.setdefault(row.locator(".c-in").get_attribute("title"), []).append(
            row.locator(".tm").inner_text().removeprefix("\u2282").strip())
    assert shown and all(sum(1 for t in texts if t) == 1 for texts in shown.values()), shown
    page.close()


@pytest.mark.parametrize("profiled", [3], indirect=True)
def test_an_injected_50ms_stall_in_one_of_three_calls_changes_neither_the_top_line_nor_its_median(profiled):
    # the big line: a few ms per call (well above the tiny lines', even when a loaded machine slows
    # some calls several-fold), and far under the 50 ms stall, so a sum would rank the stall first
    model = models.OneBigLine(n=384)
    x = torch.randn(384, 384)
    jm = thunder.jit(model)
    models.forward_backward(jm, x)  # the compile's call: its window opens
    (window,) = [w for w in capture.ACTIVE.profile_windows if w.profile.fn_name.endswith("OneBigLine")] or [
        next(iter(capture.ACTIVE.profile_windows))]
    timed = window.forward
    stalled_op = next(i for i, op in enumerate(timed.ops)
                      if op.record is not None and op.record.user_frame is not None
                      and op.record.user_frame.line == models.line_of("tiny slice"))
    namespace = generated(timed.fn).__globals__  # the twin's globals: its clock
    clock, seen = namespace["_provenance_clock"], {"marks": 0}
    marks = len(timed.ops) + 1

    def stalling_clock():  # in the 2nd profiled call, a 50 ms stall inside the tiny slice's op
        seen["marks"] += 1
        if seen["marks"] == marks + stalled_op + 2:  # the mark that ends that op, in the 2nd call
            time.sleep(0.05)
        return clock()

    namespace["_provenance_clock"] = stalling_clock
    for _ in range(3):
        models.forward_backward(jm, x)
    (profile,) = provenance.profiles(jm)
    calls = {c.call: c for c in profile.traces[FORWARD].recent}
    assert calls[2].op_ns[stalled_op] >= 50_000_000  # the stall is real, and where it was put
    rows = provenance.cost(jm, by="line")
    top = rows[0]
    assert top.key == line("big matmul"), [(r.key, r.median_ns) for r in rows[:4]]
    stalled = rows_by_key(rows)[line("tiny slice")]
    assert stalled.sum_ns > top.sum_ns or 2 not in profile.measured()[0]  # by sums, the stall would have ranked
    measured, excluded = profile.measured()
    # the stall is named: the whole call left out (its forward over 3x the others'), or the one sample an outlier
    # (under load its backward may stall as well: a call left out for a stall, either way)
    assert (2 not in measured and (2, "forward", "stall") in [(e.call, e.trace, e.reason) for e in excluded]
            and {e.reason for e in excluded} == {"stall"}) or (2, calls[2].op_ns[stalled_op]) in stalled.time.outliers
    assert stalled.median_ns < 20_000_000  # far from the 50 ms stall (a loaded machine slows a call several-fold)
    # the top line's figure: its ops' medians over the measured calls, untouched by the stall
    forward, backward = profile.traces[FORWARD], profile.traces[BACKWARD]
    big = models.line_of("big matmul")

    def on_big(op):
        record = op.record
        while record is not None and record.user_frame is None:
            record = record.derived_from
        return record is not None and record.user_frame.line == big

    expected = sum(statistics.median(c.op_ns[i] for c in trace.recent if c.call in measured)
                   for trace in (forward, backward) for i, op in enumerate(trace.ops) if on_big(op))
    assert top.median_ns == expected and top.calls == len(measured)  # its ops' medians, added up


def _stalled_window(trace: str, stall_s: float, stalled_calls: set[int]):
    """OneBigLine profiled for 3 clean calls, `stall_s` slept inside the tiny slice's op of `trace` (its
    forward op, or the first backward op of that line) in the profiled calls `stalled_calls`."""
    model = models.OneBigLine(n=384)
    x = torch.randn(384, 384)
    jm = thunder.jit(model)
    models.forward_backward(jm, x)  # the compile's call: its window opens
    (window,) = capture.ACTIVE.profile_windows
    timed = window.forward if trace == FORWARD else window.backward

    def on_slice(op) -> bool:
        record = op.record
        while record is not None and record.user_frame is None:
            record = record.derived_from
        return record is not None and record.user_frame.line == models.line_of("tiny slice")

    stalled_op = next(i for i, op in enumerate(timed.ops) if on_slice(op))
    namespace = generated(timed.fn).__globals__  # the twin's globals: its clock
    clock, seen = namespace["_provenance_clock"], {"marks": 0}
    marks = len(timed.ops) + 1

    def stalling_clock():  # the mark that ends that op, in the chosen calls
        seen["marks"] += 1
        call, mark = divmod(seen["marks"] - 1, marks)
        if call + 1 in stalled_calls and mark == stalled_op + 1:
            time.sleep(stall_s)
        return clock()

    namespace["_provenance_clock"] = stalling_clock
    for _ in range(10):  # the window takes what it needs (3 clean calls), then closes
        models.forward_backward(jm, x)
    (profile,) = provenance.profiles(jm)
    return jm, profile, stalled_op


@pytest.mark.parametrize("profiled", [3], indirect=True)
@pytest.mark.parametrize("trace, stall_s", [(FORWARD, 0.05), (BACKWARD, 0.0015)])
def test_a_stall_in_two_of_three_calls_changes_neither_the_top_line_nor_its_median(profiled, trace, stall_s):
    """Calls 1 and 3 stalled in one op (the forward by 50 ms: the call is a stall; the backward by 1.5 ms:
    the op is preempted, the call's other ops count): the window takes calls until 3 are clean, the op's
    figure rejects its preempted times, and what was left out is named. With the median of three (the
    rule before), the stalled line's median was the stall and it ranked first."""
    quiet_jm, quiet, _ = _stalled_window(trace, 0, set())
    quiet_top = provenance.cost(quiet_jm, by="line")[0]
    assert quiet_top.key == line("big matmul") and quiet.clean() >= 3  # the machine may preempt it too
    jm, profile, stalled_op = _stalled_window(trace, stall_s, {1, 3})
    calls = {c.call: c for c in profile.traces[trace].recent}
    assert calls[1].op_ns[stalled_op] >= stall_s * 1e9 and calls[3].op_ns[stalled_op] >= stall_s * 1e9
    assert profile.clean() >= 3 and profile.calls >= 5  # two more calls taken (more if the machine preempted)
    rows = provenance.cost(jm, by="line")
    top, stalled = rows[0], rows_by_key(rows)[line("tiny slice")]
    assert top.key == line("big matmul"), [(r.key, r.median_ns) for r in rows[:4]]
    assert top.median_ns <= max(2 * quiet_top.time.high_ns, quiet_top.median_ns + 2_000_000)  # its quiet spread
    quiet_slice = rows_by_key(provenance.cost(quiet_jm, by="line"))[line("tiny slice")]
    assert stalled.median_ns < quiet_slice.median_ns + stall_s * 1e9 / 2  # not the stall
    measured, left_out = profile.measured()
    # each stalled call is named: its stalled trace, or the whole call left out (a loaded machine may
    # stall its other trace first: then the call is out, and the op's time with it)
    named = {e.call for e in left_out if e.reason in ("stall", "preempted")}
    assert {1, 3} <= named and not {1, 3} & set(measured) - {e.call for e in left_out if e.trace == trace}, [
        e.describe() for e in left_out]
    described = " ".join(e.describe() for e in left_out)
    assert ("preempted" in described and f"#{stalled_op}" in described) or "a stall" in described


@pytest.mark.parametrize("profiled", [70], indirect=True)
def test_storage_is_bounded_and_nothing_keeps_the_model_alive(profiled):
    model = models.Net(n=8, depth=1)
    alive = weakref.ref(model)
    jm = thunder.jit(model)
    x = torch.randn(4, 8)
    for _ in range(71):
        models.forward_backward(jm, x)
    (profile,) = provenance.profiles(jm)
    forward = profile.traces[FORWARD]
    assert forward.calls == 70 and len(forward.recent) == MAX_CALLS
    assert len(forward.op_ns) == len(forward.ops)  # sums, not one list per call
    # during a window (a second model, its window still open) and after one: nothing of ours
    # holds the model
    other = models.Net(n=8, depth=1)
    other_alive = weakref.ref(other)
    jo = thunder.jit(other)
    models.forward_backward(jo, x)
    models.forward_backward(jo, x)  # profiled; 69 more to go
    del model, jm, other, jo
    gc.collect()
    assert alive() is None and other_alive() is None
    assert profile.calls == 70  # the profile outlives the model, for provenance.cost()


@pytest.mark.parametrize("profiled", [2], indirect=True)
def test_a_profiling_failure_warns_once_and_the_call_still_returns_the_right_result(profiled, monkeypatch):
    model = models.Net(n=8, depth=1)
    x = torch.randn(4, 8)
    expected = model(x)
    jm = thunder.jit(model)
    jm(x)
    monkeypatch.setattr(capture.ACTIVE, "fault_injection", "profile")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = [jm(x) for _ in range(3)]
    ours = [w for w in caught if "thunder-provenance" in str(w.message)]
    assert len(ours) == 1 and "profiling" in str(ours[0].message) and "InjectedFault" in str(ours[0].message)
    for out in outs:
        torch.testing.assert_close(out, expected)
    (profile,) = provenance.profiles(jm)
    assert profile.error is not None and profile.calls == 0
    # profiling is off for that compile: Thunder's own entry is back in the cache
    entry = thunder.compile_stats(jm).interpreter_cache[0]
    assert generated(entry.computation_fn).__code__.co_filename.startswith("thunder.computation")


@pytest.mark.parametrize("profiled", [2], indirect=True)
def test_a_failure_to_build_the_timed_code_leaves_the_compile_unprofiled(profiled, monkeypatch):
    monkeypatch.setattr(capture.ACTIVE, "fault_injection", "profile_build")
    jm = thunder.jit(models.Net(n=8, depth=1))
    x = torch.randn(4, 8)
    with pytest.warns(RuntimeWarning, match="cannot profile .*Net.* it runs unprofiled") as caught:
        for _ in range(3):
            models.forward_backward(jm, x)
    assert len([w for w in caught if "thunder-provenance" in str(w.message)]) == 1
    assert provenance.profiles(jm) == []
    entry = thunder.compile_stats(jm).interpreter_cache[0]
    assert generated(entry.computation_fn).__code__.co_filename.startswith("thunder.computation")


@pytest.mark.parametrize("profiled", [5], indirect=True)
def test_disable_closes_open_windows(profiled):
    jm = thunder.jit(models.Net(n=8, depth=1))
    x = torch.randn(4, 8)
    for _ in range(2):
        models.forward_backward(jm, x)
    assert provenance.profiles(jm)[0].calls == 1
    provenance.disable()
    entry = thunder.compile_stats(jm).interpreter_cache[0]
    assert generated(entry.computation_fn).__code__.co_filename.startswith("thunder.computation")
    models.forward_backward(jm, x)
    assert provenance.profiles(jm)[0].calls == 1  # the profile stays readable


@pytest.mark.parametrize("profiled", [2], indirect=True)
def test_the_cuda_clock_pairs_one_event_per_mark(profiled, monkeypatch):
    monkeypatch.setattr(capture.ACTIVE, "force_clock", "cuda")
    monkeypatch.setattr(capture.ACTIVE, "cuda_event_factory", FakeCudaEvent)
    monkeypatch.setattr(capture.ACTIVE, "profile_memory", False)  # tests/allocation/test_measured_memory.py reads it
    monkeypatch.setattr(FakeCudaEvent, "records", 0)
    jm = thunder.jit(models.OneBigLine())
    x = torch.randn(384, 384)
    for _ in range(3):
        models.forward_backward(jm, x)
    (profile,) = provenance.profiles(jm)
    forward, backward = profile.traces[FORWARD], profile.traces[BACKWARD]
    assert forward.clock == backward.clock == "cuda" and profile.calls == 2
    ops = len(forward.ops) + len(backward.ops)
    # per call and function: one event per op boundary (ops + 1), and the function's start and end
    assert FakeCudaEvent.records == 2 * (ops + 2 * (1 + 2))
    assert forward.host_ns is not None and len(forward.host_ns) == len(forward.ops)
    assert forward.recent[-1].clock == "cuda" and forward.recent[-1].host_ns is not None
    # each op is timed from the event at its start to the very next one, at its end: 1 "ms" apart
    # in each of the 2 profiled calls (op_ns sums them)
    for trace in (forward, backward):
        assert trace.op_ns == [2 * 1_000_000] * len(trace.ops)


def test_print_cost_prints_the_table(capsys):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    provenance.enable(profile=1)
    try:
        jm = thunder.jit(models.Net(n=8, depth=1))
        x = torch.randn(4, 8)
        models.forward_backward(jm, x)  # the compile's call: not timed
        provenance.print_cost(jm)
        assert "No profiled calls" in capsys.readouterr().out
        models.forward_backward(jm, x)
        provenance.print_cost(jm, by="line", top=5)
    finally:
        provenance.disable()
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert "Time by line: 1 measured call(s) of 1 compile(s)" in out
    top = provenance.cost(jm)[0]
    assert top.label in out and f"{top.median_ns / 1e6:.3f}" in out
    with pytest.raises(TypeError, match="returned by thunder.jit"):
        provenance.cost(models.Net())
    with pytest.raises(ValueError, match="profile must be a number of calls"):
        provenance.enable(profile=-1)


_SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
import torch, thunder, models
jm = thunder.jit(models.Net(n=8, depth=1))
for _ in range(4):
    models.forward_backward(jm, torch.randn(4, 8))
import provenance
from provenance.log.session import SESSION
rows = provenance.cost(jm)
print(json.dumps({{"enabled": provenance.enabled(), "exporters": len(SESSION.exporters),
                  "calls": provenance.profiles(jm)[0].calls, "top": rows[0].key, "rows": len(rows)}}))
"""


@pytest.mark.slow
def test_thunder_trace_profile_needs_no_code_change(tmp_path):
    """THUNDER_TRACE_PROFILE alone: the .pth bootstrap enables capture and profiling, no logs."""
    script = tmp_path / "run.py"
    script.write_text(_SCRIPT.format(tests=str(SUPPORT)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THUNDER_TRACE", "OTEL_"))}
    env["THUNDER_TRACE_PROFILE"] = "2"
    cmd = [sys.executable, str(script)]
    ours = Path(provenance.__file__).with_name("thunder_provenance.pth")
    installed = Path(next(p for p in sys.path if p.endswith("site-packages"))) / "thunder_provenance.pth"
    if not installed.is_file() or installed.read_text() != ours.read_text():
        # the installed .pth is another checkout's older copy: let `site` process this one, the
        # way it processes an installed one (the program itself is unchanged)
        site_dir = tmp_path / "site"
        site_dir.mkdir()
        shutil.copy(ours, site_dir / ours.name)
        cmd = [sys.executable, "-c", f"import site, runpy; site.addsitedir({str(site_dir)!r}); "
                                     f"runpy.run_path({str(script)!r}, run_name='__main__')"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["enabled"] and result["exporters"] == 0  # captured, nothing logged
    assert result["calls"] == 2 and result["rows"] > 3 and result["top"] != BETWEEN
    assert {p.name for p in tmp_path.iterdir()} <= {"run.py", "site"}  # no log directory


def test_profiling_with_logs_and_a_bad_environment_value(tmp_path, monkeypatch):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    monkeypatch.setenv("THUNDER_TRACE_PROFILE", "three")
    with pytest.warns(RuntimeWarning, match="THUNDER_TRACE_PROFILE must be a number of calls .*'three'"):
        provenance.enable()
    assert capture.ACTIVE.profile == 0 and provenance.enabled()
    monkeypatch.setenv("THUNDER_TRACE_PROFILE", "1")
    provenance.enable(tmp_path)  # logs and profiling together (the environment's setting)
    try:
        jm = thunder.jit(models.Net(n=8, depth=1))
        x = torch.randn(4, 8)
        for _ in range(2):
            models.forward_backward(jm, x)
    finally:
        provenance.disable()
        torch.set_num_threads(threads)
    assert provenance.profiles(jm)[0].calls == 1
    records = [r for r in provenance.load(tmp_path)]
    ends = [r for r in records if r.type == "compile_end"]
    assert len(ends) == 1 and ends[0]["status"] == "ok"


def test_profiling_off_installs_nothing_for_it(monkeypatch):
    from thunder.core.trace import TraceCtx

    monkeypatch.delenv("THUNDER_TRACE_PROFILE", raising=False)

    thunders_own = TraceCtx.python_callable

    def profiling_hook() -> bool:  # capture's own codegen timer (phases.py) wraps it too: look for profiling's
        return TraceCtx.python_callable.__qualname__.startswith(profiling._python_callable.__qualname__)

    provenance.enable()  # capture alone
    try:
        assert not profiling_hook() and not capture.ACTIVE.profiling_installed and capture.ACTIVE.profile == 0
        provenance.enable(profile=2)
        assert profiling_hook() and capture.ACTIVE.profiling_installed
    finally:
        provenance.disable()
    assert TraceCtx.python_callable is thunders_own and capture.ACTIVE is None


@pytest.mark.parametrize("profiled", [2], indirect=True)
def test_thunderfx_pieces_are_profiled_and_the_torch_fallback_is_said_untimed(profiled, capsys):
    import fx_program

    compiled = thunder.dynamo.thunderfx(fx_program.Fx())
    x = torch.randn(4, 4, requires_grad=True)
    for _ in range(3):
        compiled(x).sum().backward()
    capsys.readouterr()
    rows = provenance.cost(compiled)  # what thunderfx returned: its Thunder pieces' compiles
    program = fx_program.__file__
    keys = {r.key for r in rows}
    assert f"{program}:{fx_program.line_of('fxp up')}" in keys and f"{program}:{fx_program.line_of('fxp tanh')}" in keys
    assert f"{program}:{fx_program.line_of('fxp fallback')}" in keys  # the `h *` of that line ran in Thunder
    provenance.print_cost(compiled, top=5)
    out = capsys.readouterr().out
    # the det ran in torch (inductor): its time is in no row, and print_cost says so, with its line
    assert re.search(r"Not timed: 1 piece\(s\) of Dynamo graph \d+/\d+ ran in torch \(inductor\), not Thunder: "
                     rf"fx_program\.py:{fx_program.line_of('fxp fallback')}\. Their time is in no row\.", out), out


def test_the_report_says_which_thunderfx_pieces_torch_ran_untimed(tmp_path):
    """print_cost's note, on the Time page and on the profiled piece's compile page (the same rule:
    provenance.dynamo.graphs.untimed), from the log."""
    import fx_program
    import orjson

    from provenance.cli import main

    torch._dynamo.reset()
    provenance.enable(tmp_path / "logs", profile=2)
    try:
        compiled = thunder.dynamo.thunderfx(fx_program.Fx())
        x = torch.randn(4, 4, requires_grad=True)
        for _ in range(3):
            compiled(x).sum().backward()
    finally:
        provenance.disable()
    out = tmp_path / "report"
    assert main(["report", str(tmp_path / "logs"), "-o", str(out), "--no-browser", "--strict"]) == 0
    note = re.compile(r"Not timed: 1 piece\(s\) of Dynamo graph \d+/\d+ ran in torch \(inductor\), not Thunder: "
                      rf"fx_program\.py:{fx_program.line_of('fxp fallback')}\. Their time is in no row\.")
    assert note.search((out / "time.html").read_text())
    directory = orjson.loads((out / "compile_directory.json").read_bytes())
    pages = {c["key"]: (out / c["pages"]["compile"]).read_text() for c in directory["compiles"] if c.get("time")}
    for graph in directory["dynamo_graphs"]["graphs"]:  # said on its own graph's pieces only
        fallback = any(p["compiler"] != "thunder" for p in graph["pieces"])
        for key in (k for p in graph["pieces"] for k in p["compiles"] if k in pages):
            assert bool(note.search(pages[key])) == fallback, (graph["compile_id"], key)
    assert any(note.search(page) for page in pages.values())


@pytest.mark.parametrize("value", [str(2**64), "99999999999999999999999", "\u00b3", "\u0663"])
def test_a_profile_count_past_the_logs_integers_or_not_ascii_is_refused(value, monkeypatch):
    """THUNDER_TRACE_PROFILE past 64 bits was accepted and written as a string, and the report then
    refused every profile record of the log: it is refused where it is parsed, as any bad count is."""
    monkeypatch.setenv("THUNDER_TRACE_PROFILE", value)
    with pytest.warns(RuntimeWarning, match=f"THUNDER_TRACE_PROFILE must be a number of calls \\(an integer from 0 to "
                                            f"{2**63 - 1}\\), got '{value}'"):
        provenance.enable()
    try:
        assert capture.ACTIVE.profile == 0 and provenance.enabled()
    finally:
        provenance.disable()
    with pytest.raises(ValueError, match="profile must be a number of calls"):
        provenance.enable(profile=2**63)
    assert parse_count(str(2**63 - 1), "x") == 2**63 - 1
