"""The roll-up rules of provenance.timing.rollup (provenance.cost()) on hand-made profiles (no Thunder: the
same code rolls up profiles rebuilt from logs). Every expected figure is derived here from the ops' times."""

from __future__ import annotations

import subprocess
import sys

import pytest

from provenance.core.record import Frame, Kind, Provenance, intern
from provenance.timing.profile import BACKWARD, FORWARD, CompileProfile, Op, ProfiledCall, TraceProfile
from provenance.timing.rollup import BETWEEN, BOOKKEEPING, NO_ROLE, ROOT, merge, rollup, summary

FILE = "/src/model.py"


def op_record(line: int, module: str | None = None, role: str | None = None) -> Provenance:
    frames = (Frame("/lib/torch/linear.py", 7, "forward", user=False), Frame(FILE, line, "forward", f"line {line}"))
    return intern(Provenance(source=frames, module=module, module_type="M", role=role))


def grad(record: Provenance) -> Provenance:
    return record.derive(transforms=("grad",), kind=Kind.BACKWARD, derived_from=record)


def recompute(record: Provenance) -> Provenance:
    return record.derive(transforms=("recompute",), kind=Kind.RECOMPUTE, derived_from=record)


def fusion(*members: Provenance) -> Provenance:
    return intern(Provenance(members=members, kind=Kind.FUSION, transforms=("fusion",)))


BOOK = intern(Provenance(transforms=("del_last_used",), kind=Kind.BOOKKEEPING))
L10 = op_record(10, "blocks.0.attn", role="column_parallel.post")
L11 = op_record(11, "blocks.0.mlp")
L12 = op_record(12, "blocks.1")
L20 = op_record(20, "")  # the root module


def profile(forward: list[tuple[Provenance, int]], backward: list[tuple[Provenance, int]],
            between: tuple[int, int] = (100, 50), calls: int = 1, compile_id: int = 1) -> CompileProfile:
    result = CompileProfile(compile_id, "net", requested=calls)
    for name, ops, extra in ((FORWARD, forward, between[0]), (BACKWARD, backward, between[1])):
        timed = tuple(Op(i, "fused" if r.kind == Kind.FUSION else f"op{i}", r, i) for i, (r, _) in enumerate(ops))
        result.traces[name] = TraceProfile(name, timed)
        for call in range(1, calls + 1):
            ns = tuple(t for _, t in ops)
            result.add(ProfiledCall(compile_id, call, name, "cpu", sum(ns) + extra, ns))
    return result


def rows_by_key(rows):
    return {r.key: r for r in rows}


def test_backward_and_recompute_are_charged_to_the_forward_line():
    p = profile([(L10, 1000), (L11, 300), (BOOK, 5)], [(grad(L10), 2000), (recompute(L11), 70), (grad(L11), 400)])
    rows = rollup([p], "line")
    assert [r.key for r in rows[:2]] == [f"{FILE}:10", f"{FILE}:11"]
    r10, r11 = rows[0], rows[1]
    assert (r10.forward_ns, r10.backward_ns, r10.recompute_ns) == (1000, 2000, 0)
    assert (r11.forward_ns, r11.backward_ns, r11.recompute_ns) == (300, 400, 70)
    assert r10.label == "model.py:10" and r10.ops == 2 and r10.calls == 1
    wall = 1305 + 100 + 2470 + 50
    assert r10.share == pytest.approx(3000 / wall)
    between = rows_by_key(rows)[BETWEEN]
    assert (between.forward_ns, between.backward_ns, between.kind) == (100, 50, "between")
    assert rows_by_key(rows)[BOOKKEEPING].forward_ns == 5
    assert sum(r.median_ns for r in rows) == wall  # every ns once


def test_a_fusion_of_several_lines_is_its_own_row_and_its_members_show_it_shared():
    fused = fusion(L10, L11, grad(L12))
    one_line = fusion(grad(L12), recompute(L12))
    p = profile([(fused, 900), (L12, 40)], [(one_line, 300), (grad(L10), 10)])
    rows = rows_by_key(rollup([p], "line"))
    row = rows["fused (forward, compile 1)"]
    assert row.kind == "fusion" and row.forward_ns == 900 and row.median_ns == 900
    assert row.members == (f"{FILE}:10", f"{FILE}:11", f"{FILE}:12")
    for line in (10, 11):
        assert rows[f"{FILE}:{line}"].shared_ns == 900
    # a fusion whose members are all one line is charged to it, whole (nothing is split):
    # in the backward, with a grad member, it is backward time
    assert rows[f"{FILE}:12"].forward_ns == 40 and rows[f"{FILE}:12"].backward_ns == 300
    assert rows[f"{FILE}:12"].shared_ns == 900
    assert rows[f"{FILE}:10"].median_ns == 10


def test_a_backward_fusion_of_recomputed_ops_only_is_recompute_time():
    p = profile([(L10, 1)], [(fusion(recompute(L10), recompute(L11)), 77)])
    row = rows_by_key(rollup([p], "line"))["fused (backward, compile 1)"]
    assert (row.recompute_ns, row.backward_ns) == (77, 0)
    assert rows_by_key(rollup([p], "kind"))["fusion"].recompute_ns == 77


def test_modules_are_hierarchical():
    ops = [(L10, 1000), (L11, 300), (L12, 50), (L20, 7), (BOOK, 3)]
    p = profile(ops, [(grad(L10), 2000), (fusion(L10, L11), 500)])
    rows = rows_by_key(rollup([p], "module"))
    assert rows["blocks.0.attn"].median_ns == 3000
    assert rows["blocks.0.mlp"].median_ns == 300
    assert rows["blocks.0"].median_ns == 3000 + 300 + 500  # children, and the fusion of both
    assert rows["blocks.0.attn"].shared_ns == rows["blocks.0.mlp"].shared_ns == 500
    assert rows["blocks"].median_ns == rows["blocks.0"].median_ns + rows["blocks.1"].median_ns
    assert rows[ROOT].median_ns == rows["blocks"].median_ns + 7
    assert rows["(no module)"].median_ns == 3
    assert rollup([p], "module")[0].key == ROOT


def test_roles_kinds_and_ops():
    p = profile([(L10, 100), (L11, 10), (BOOK, 1), (fusion(L10, L11), 20)], [(grad(L10), 200)])
    roles = rows_by_key(rollup([p], "role"))
    assert roles["column_parallel.post"].median_ns == 300
    assert roles[NO_ROLE].median_ns == 11
    assert roles["fused (forward, compile 1)"].members == ("column_parallel.post", NO_ROLE)
    kinds = rows_by_key(rollup([p], "kind"))
    assert (kinds["forward"].median_ns, kinds["backward"].median_ns) == (110, 200)
    assert (kinds["bookkeeping"].median_ns, kinds["fusion"].median_ns) == (1, 20)
    ops = rows_by_key(rollup([p], "op"))
    assert ops["op0"].median_ns == 100 + 200  # position 0 in both traces: same name
    assert ops["fused (forward)"].median_ns == 20


def test_figures_are_per_call_medians_that_add_up_over_compiles():
    a = profile([(L10, 10)], [(grad(L10), 20)], calls=3, compile_id=1)
    b = profile([(L10, 5)], [], calls=2, compile_id=2)
    row = rows_by_key(rollup([a, b], "line"))[f"{FILE}:10"]
    # per call: 10 + 20 in compile 1, 5 in compile 2; medians of distinct compiles add up
    assert row.calls == 5 and row.forward_ns == 10 + 5 and row.backward_ns == 20 and row.median_ns == 35
    assert row.sum_ns == 3 * 30 + 2 * 5
    totals = summary([a, b])
    assert totals["calls"] == 5 and totals["wall_ns"] == a.wall_ns / 3 + b.wall_ns / 2
    assert totals["coverage"] == pytest.approx((a.attributed_ns + b.attributed_ns) / (a.wall_ns + b.wall_ns))


def test_merged_rollups_of_separate_compiles_are_the_rollup_of_all():
    """What the report's run page does: each compile's rows kept, merged at the end."""
    fused = fusion(L10, L11)
    a = profile([(L10, 10), (fused, 7), (BOOK, 1)], [(grad(L10), 20), (recompute(L11), 4)], calls=3, compile_id=1)
    b = profile([(L10, 5), (L12, 9), (fused, 2)], [(grad(L12), 8)], between=(3, 1), calls=2, compile_id=2)
    c = profile([(L20, 4)], [], calls=1, compile_id=3)
    for by in ("line", "module_line", "module", "role", "kind", "op"):
        parts = [(rollup([p], by), summary([p])["wall_ns"]) for p in (a, b, c)]
        assert merge(parts) == rollup([a, b, c], by), by


def test_a_bad_request_is_a_clear_error():
    with pytest.raises(ValueError, match="choose one of line, module_line, module, role, kind, op"):
        rollup([], "file")
    with pytest.raises(ValueError, match="op times for 1 ops"):
        TraceProfile(FORWARD, (Op(0, "x", None, 0),)).add(ProfiledCall(1, 1, FORWARD, "cpu", 5, (1, 2)))


def test_the_rollup_modules_do_not_import_torch_or_thunder():
    code = ("import sys, provenance.timing.rollup, provenance.timing.profile; "
            "print(sorted(m for m in ('torch', 'thunder') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr


def helper_op(helper_line: int, module_line: int | None) -> Provenance:
    """An op made in a helper (helpers.py) called from line `module_line` of model.py's module."""
    frames = (Frame("/src/helpers.py", helper_line, "attention"), Frame(FILE, module_line or 1, "Attention.forward"))
    return intern(Provenance(source=frames, module="blocks.0.attn", module_type="Attention",
                             module_file=FILE if module_line is not None else None))


def test_by_module_line_charges_a_helpers_ops_to_the_modules_line():
    a, b = helper_op(5, 30), helper_op(6, 30)
    other = helper_op(7, None)  # no module line known: its user line stands for it
    p = profile([(a, 100), (b, 200), (other, 40), (L10, 7)], [(grad(a), 300)])
    by_line = rows_by_key(rollup([p], "line"))
    assert set(by_line) >= {"/src/helpers.py:5", "/src/helpers.py:6", "/src/helpers.py:7", f"{FILE}:10"}
    rows = rows_by_key(rollup([p], "module_line"))
    assert rows[f"{FILE}:30"].forward_ns == 300 and rows[f"{FILE}:30"].backward_ns == 300
    assert rows["/src/helpers.py:7"].forward_ns == 40 and rows[f"{FILE}:10"].forward_ns == 7
    assert "/src/helpers.py:5" not in rows and rows[f"{FILE}:30"].label == "model.py:30"


# -- distributions (provenance.timing.spread) ------------------------------------------------------------
def calls_profile(per_call: list[list[tuple[Provenance, int]]], between: int = 100,
                  compiled: dict[int, tuple] | None = None, compile_id: int = 1) -> CompileProfile:
    """A forward-only profile whose call k (from 1) takes per_call[k - 1]'s op times; `compiled`:
    call -> the executor compiles during it."""
    result = CompileProfile(compile_id, "pkg.Net.forward", requested=len(per_call))
    records = [r for r, _ in per_call[0]]
    result.traces[FORWARD] = TraceProfile(FORWARD, tuple(Op(i, "fused" if r.kind == Kind.FUSION else f"op{i}", r, i)
                                                         for i, r in enumerate(records)))
    for k, ops in enumerate(per_call, 1):
        ns = tuple(t for _, t in ops)
        result.add(ProfiledCall(compile_id, k, FORWARD, "cpu", sum(ns) + between, ns,
                                compiled=(compiled or {}).get(k, ())))
    return result


MS = 1_000_000


def test_a_stall_in_one_of_three_calls_changes_neither_the_top_line_nor_its_median():
    calls = [[(L10, 2 * MS), (L11, 1 * MS)], [(L10, 2 * MS), (L11, 6 * MS)], [(L10, 2 * MS), (L11, 1 * MS)]]
    rows = rows_by_key(rollup([calls_profile(calls)], "line"))
    top = rollup([calls_profile(calls)], "line")[0]
    assert top.key == f"{FILE}:10" and top.median_ns == 2 * MS
    stalled = rows[f"{FILE}:11"]
    # the stall (5 ms over a 1 ms median) is named, and left out of the median and the range
    assert stalled.median_ns == 1 * MS and stalled.time.outliers == ((2, 6 * MS),)
    assert (stalled.time.low_ns, stalled.time.high_ns, stalled.calls) == (1 * MS, 1 * MS, 3)
    assert "1 outlier (call 2: 6.000 ms)" in stalled.time.describe()
    # with the ranking by sums, the stall would have won
    assert stalled.sum_ns > top.sum_ns


def test_a_row_keeps_its_time_in_each_measured_call_for_a_rank_test():
    """provenance.timing.significance ranks a row's calls: its time in each measured call, the sum of its
    ops' in that call (a preempted op's included: by rank it is only the slowest call), in call order.
    A row summed over two compiles keeps none: their calls are not the same calls."""
    other = op_record(10, "blocks.0.attn")  # a second op of line 10
    calls = [[(L10, 2 * MS), (other, MS), (L11, MS)], [(L10, 3 * MS), (other, 4 * MS), (L11, 2 * MS)],
             [(L10, 4 * MS), (other, MS), (L11, MS)], [(L10, 5 * MS), (other, 2 * MS), (L11, 3 * MS)]]
    rows = rows_by_key(rollup([calls_profile(calls)], "line"))
    assert rows[f"{FILE}:10"].time.samples == (3 * MS, 7 * MS, 5 * MS, 7 * MS)
    assert rows[f"{FILE}:10"].time.outliers == ((2, 4 * MS),)  # other, preempted: out of the figures, not the ranks
    assert rows[f"{FILE}:11"].time.samples == (MS, 2 * MS, MS, 3 * MS)
    assert rows[BETWEEN].time.samples == (100, 100, 100, 100)
    assert rows[f"{FILE}:10"].median_ns == 3 * MS + 1.5 * MS  # the figures stay the sums of its ops' medians
    two = rows_by_key(rollup([calls_profile(calls), calls_profile(calls, compile_id=2)], "line"))
    assert two[f"{FILE}:10"].time.samples == () and two[f"{FILE}:10"].calls == 8


def test_an_op_preempted_in_two_of_three_calls_is_left_out_against_its_fastest_time():
    """GPT2 on a loaded machine: one op took 4.2 and 8.2 ms in calls 1 and 3, 0.2 ms in call 2. The
    median of three was 4.2 ms and nothing was over 3x it: the op's line ranked first. Against the
    op's fastest time both are one-offs: left out, named, and the calls count as not clean (the
    profiling window takes more); the calls stay measured (their other ops count)."""
    big = 20 * MS  # the call is no stall: its wall is far over the preemption
    calls = [[(L10, big), (L11, 42 * MS // 10)], [(L10, big), (L11, MS // 5)], [(L10, big), (L11, 82 * MS // 10)]]
    p = calls_profile(calls)
    measured, left_out = p.measured()
    assert measured == [1, 2, 3] and p.clean() == 1
    assert [(e.call, e.reason, e.op, e.wall_ns, e.fastest_ns) for e in left_out] == [
        (1, "preempted", "op1 #1", 42 * MS // 10, MS // 5), (3, "preempted", "op1 #1", 82 * MS // 10, MS // 5)]
    assert left_out[0].describe() == ("call 1 (forward): op1 #1 preempted, 4.200 ms (0.200 ms in its fastest call), "
                                      "left out of its figures")
    rows = rows_by_key(rollup([p], "line"))
    assert rows[f"{FILE}:11"].median_ns == MS // 5 and rows[f"{FILE}:11"].time.outliers == (
        (1, 42 * MS // 10), (3, 82 * MS // 10))
    assert rollup([p], "line")[0].key == f"{FILE}:10"
    assert p.measured(keep_all=True) == ([1, 2, 3], [])  # everything counts, nothing named


def test_a_call_that_is_a_stall_or_compiled_an_executor_is_left_out_and_named():
    fast = [(L10, MS // 10)]
    stall = [(L10, 8 * MS)]  # over 3x the others' median and by more than 1 ms
    p = calls_profile([fast, fast, stall, fast])
    measured, excluded = p.measured()
    assert measured == [1, 2, 4] and [(e.call, e.reason) for e in excluded] == [(3, "stall")]
    assert rows_by_key(rollup([p], "line"))[f"{FILE}:10"].median_ns == MS // 10
    compiling = calls_profile([stall, fast, fast], compiled={1: (("TorchCompile0", "torchcompile", 1_200_000_000),)})
    measured, excluded = compiling.measured()
    assert measured == [2, 3]
    assert excluded[0].describe() == "call 1 (forward): compiled TorchCompile0, 8.00 ms, excluded"
    totals = summary([compiling])
    assert totals["calls"] == 2 and totals["profiled"] == 3 and totals["wall_ns"] == MS // 10 + 100
    # keep_all: every call counts
    assert summary([compiling], keep_all=True)["calls"] == 3
    assert rows_by_key(rollup([compiling], "line", keep_all=True))[f"{FILE}:10"].sum_ns == 8 * MS + 2 * MS // 10


def test_a_small_sample_names_no_outlier():
    """Two calls cannot say which one is the odd one: none is left out."""
    p = calls_profile([[(L10, MS // 10)], [(L10, 9 * MS)]])
    assert p.measured() == ([1, 2], [])
    assert rollup([p], "line")[0].time.outliers == ()


def test_lines_all_in_a_fusion_are_listed_with_it_and_the_fusion_names_its_compile():
    fused = fusion(L10, L11, L12)
    p = calls_profile([[(fused, 900), (L20, 50)]] * 3, compile_id=7)
    rows = rollup([p], "line")
    by_key = rows_by_key(rows)
    key = "fused (forward, compile 7)"
    assert by_key[key].kind == "fusion" and by_key[key].label == "fused (forward of Net.forward, compile 7): 3 lines"
    for n in (10, 11, 12):
        row = by_key[f"{FILE}:{n}"]
        assert row.kind == "in_fusion" and row.fusions == (key,) and row.shared_ns == 900 and row.median_ns == 0
    assert by_key[f"{FILE}:20"].kind == "key"
    # a table lists the fusion with its member lines, not three rows of nothing but shared time
    from rich.console import Console

    from provenance.timing.rollup import table

    console = Console(width=200, record=True)
    console.print(table(rows))
    text = console.export_text()
    assert "model.py:10, model.py:11, model.py:12" in text
    assert sum(line.lstrip().startswith("model.py:1") for line in text.splitlines()) == 0


def test_the_rank_comparison_lists_the_slowest_rows_and_the_stragglers_only():
    """time.html's per-rank table: a row's figures come from the ranks that have it, and only the
    listed rows get a cell per rank (1024 ranks with a line each make 1024 rows, not 1024 x 1024 cells)."""
    from provenance.report.analyze.cost import _compare
    from provenance.timing.rollup import CostRow
    from provenance.timing.spread import Spread

    def row(key: str, ms: float) -> CostRow:
        return CostRow(key=key, time=Spread(median_ns=ms * 1e6, calls=1), label=key)

    ranks = list(range(1024))
    rows = {r: {f"line{r}": row(f"line{r}", 1 + r / 1024), "shared": row("shared", 5.0 if r != 7 else 20.0)}
            for r in ranks}
    listed, stragglers, total = _compare(ranks, rows, {}, top=30)
    assert total == 1025 and stragglers == 1 and len(listed) == 30
    assert listed[0].key == "shared" and listed[0].stragglers[7] and sum(listed[0].stragglers) == 1
    assert listed[0].median == 5.0 and listed[0].cells[7] == 20.0
    assert [line.key for line in listed[1:3]] == ["line1023", "line1022"]
    assert listed[1].cells.count(None) == 1023  # one rank has it
