"""The diff's two rules on their own: when a run-time change is significant (outside both runs'
spread) and what a --fail-on rule says (docs/diff.md)."""

from __future__ import annotations

import pytest

from provenance.diff.compare import MIN_ROW_RATIO, MIN_ROW_SHARE, MIN_TIME_NS, compile_significant, significant
from provenance.diff.gate import parse_rule
from provenance.timing.spread import spread


def _runs(*ms: float) -> object:
    return spread([(n, x * 1e6) for n, x in enumerate(ms, 1)])


def test_a_change_is_significant_only_outside_both_runs_spread():
    a = _runs(1.0, 1.1, 1.2, 1.05)
    assert significant(a, _runs(1.5, 1.6, 1.55))  # every call slower than every call of A
    assert significant(_runs(1.5, 1.6, 1.55), a)  # and faster
    assert not significant(a, _runs(1.15, 1.5, 1.6))  # B's fastest call inside A's range: noise
    assert not significant(a, _runs(0.5, 1.25, 3.0))  # B's median outside A's range, its spread not
    assert not significant(a, _runs(1.5))  # one call: no spread to judge by
    tiny = _runs(0.010, 0.011, 0.010)  # 10 µs: below the floor, whatever the spread
    assert not significant(tiny, _runs(0.012, 0.013, 0.012)) and MIN_TIME_NS == 10_000
    assert not significant(_runs(100.0, 100.1), _runs(101.0, 101.1))  # 1%: under the 5% floor
    # a row of the call (a line, an op) needs 50%: the same program's runs differ per op by 20-40%
    assert significant(a, _runs(1.5, 1.6, 1.55)) and not significant(a, _runs(1.5, 1.6, 1.55), MIN_ROW_RATIO)
    assert significant(a, _runs(1.8, 1.9, 1.85), MIN_ROW_RATIO) and MIN_ROW_RATIO == 0.5


@pytest.mark.parametrize(("text", "metric", "limit", "relative"), [
    ("run_time=+5%", "run_time", 5.0, True), ("compile_time=+10%", "compile_time", 10.0, True),
    ("memory=+0", "memory", 0.0, False), ("memory=+2M", "memory", 2 * 1024 * 1024, False),
    ("recompiles=+0", "recompiles", 0.0, False), ("run_time=0.5", "run_time", 0.5, False)])
def test_fail_on_rules(text, metric, limit, relative):
    rule = parse_rule(text)
    assert (rule.metric, rule.limit, rule.relative, rule.text) == (metric, limit, relative, text)


@pytest.mark.parametrize("text", ["speed=+5%", "run_time", "run_time=+five", "run_time=-5%", "compile_time=+2M",
                                  "memory=+2M%", "run_time=5 percent"])
def test_bad_fail_on_rules_say_why(text):
    with pytest.raises(ValueError, match="--fail-on"):
        parse_rule(text)


def test_a_compile_time_is_significant_only_when_its_phases_all_moved_that_way():
    """One sample a side: Llama's 3.418 -> 1.527 s between two runs of one program was one phase (a cold
    cache, an import): noise. A compile that grew in every phase of a material share is a change."""
    phases = {"tracing": 1500.0, "pass": 800.0, "executors": 600.0, "inductor": 400.0, "codegen": 50.0}
    cold = dict(phases, inductor=2300.0)  # one phase took the whole difference
    assert not compile_significant(5.2, 3.35, cold, phases)
    slower = {g: 1.5 * ms for g, ms in phases.items()}
    assert compile_significant(3.35, 5.0, phases, slower)
    assert compile_significant(5.0, 3.35, slower, phases)  # faster, the same way
    assert not compile_significant(3.35, 5.0, phases, {**slower, "pass": 810.0})  # one material phase did not
    assert compile_significant(3.35, 5.0, phases, dict(slower, codegen=50.0))  # a small phase need not
    assert not compile_significant(3.35, 3.6, phases, {g: 1.07 * ms for g, ms in phases.items()})  # under 25%
    assert not compile_significant(0.2, 0.28, {"tracing": 200.0}, {"tracing": 280.0})  # under 0.1 s
    assert not compile_significant(2.0, 4.0, {"tracing": 1900.0}, {"tracing": 3800.0})  # one phase: no agreement
    assert not compile_significant(2.0, 4.0, {}, {})  # no phases (an old log): shown, not judged


def test_a_compile_time_fail_on_is_judged_on_any_change():
    """The user's bound is the bound: a compile time change the diff calls noise still fails a
    --fail-on compile_time rule it breaks (a run-time one does not: its spread judges it)."""
    from provenance.diff.compare import Change, Diff
    from provenance.diff.gate import check

    changes = [Change("compile", "compile time", "f", metric="compile_time", before=1.0, after=1.5, unit="s",
                      significant=False),
               Change("time", "run time per call", "f", metric="run_time", before=1.0, after=1.5, unit="ms",
                      significant=False)]
    diff = Diff(None, None, changes, [], [], [])
    found = check(diff, [parse_rule("compile_time=+10%"), parse_rule("run_time=+10%")])
    assert [v.rule.metric for v in found] == ["compile_time"]
    assert check(diff, [parse_rule("compile_time=+60%")]) == []


def test_a_row_measured_in_enough_calls_is_judged_by_its_quartiles():
    """A preempted call stretches a row's range on a loaded machine: a line at twice its time, its
    ranges overlapping through two slow calls, is a change by its middle half; the whole call keeps the
    range rule, and so does a row of few calls."""
    a = _runs(*([1.0] * 10 + [2.5, 2.6]))  # slow calls, not one-offs (under 3x the fastest)
    b = _runs(*([2.0] * 10 + [1.3, 3.5]))
    assert not significant(a, b, MIN_ROW_RATIO)  # the ranges overlap
    assert significant(a, b, MIN_ROW_RATIO, rows=True)  # the quartiles do not
    assert not significant(a, b)  # the whole call: by its range
    few_a, few_b = _runs(1.0, 1.0, 2.5), _runs(2.0, 2.0, 1.3)
    assert not significant(few_a, few_b, MIN_ROW_RATIO, rows=True)  # under MIN_QUARTILE_CALLS: the range
    assert not significant(a, _runs(*([1.2] * 12)), MIN_ROW_RATIO, rows=True)  # 20%: under the row floor


def test_a_rows_change_must_be_a_share_of_the_call():
    """A 36 µs op of a 2.5 ms call at 69 µs in the next process of one program: beyond both ranges
    and over 50%, but 1.3% of the call: noise (MIN_ROW_SHARE); the same change on a 1 ms call counts."""
    a, b = _runs(0.036, 0.024, 0.042, 0.030, 0.035), _runs(0.069, 0.059, 0.265, 0.070, 0.066)
    assert significant(a, b, MIN_ROW_RATIO, rows=True)
    assert not significant(a, b, MIN_ROW_RATIO, rows=True, floor_ns=MIN_ROW_SHARE * 2.5e6)
    assert significant(a, b, MIN_ROW_RATIO, rows=True, floor_ns=MIN_ROW_SHARE * 1.0e6)
