"""The diff's two rules on their own: when a run-time change is significant (large enough, and unlikely
by chance among the figures compared: provenance.timing.significance) and what a --fail-on rule says
(docs/diff.md)."""

from __future__ import annotations

import pytest

from provenance.diff.compare import compile_significant
from provenance.diff.gate import parse_rule
from provenance.timing.significance import (
    ALPHA,
    MIN_ROW_RATIO,
    MIN_ROW_SHARE,
    MIN_TIME_NS,
    MIN_TIME_RATIO,
    Compared,
    judge,
    large_enough,
    least_calls,
)
from provenance.timing.spread import spread


def _runs(*ms: float) -> object:
    return spread([(n, x * 1e6) for n, x in enumerate(ms, 1)], keep=True)


def _significant(a, b, ratio: float = MIN_TIME_RATIO, floor_ns: float = 0.0, others: int = 0) -> bool:
    """A's and B's change judged in a family of itself and `others` figures that did not change."""
    same = _runs(1.0, 1.1, 1.2, 1.05, 0.95)
    family = {0: Compared(a, b, ratio, floor_ns), **{k: Compared(same, same) for k in range(1, others + 1)}}
    p = judge(family)[0]
    return p is not None and p <= ALPHA


def test_a_change_is_significant_when_large_enough_and_unlikely_by_chance():
    a = _runs(1.0, 1.1, 1.2, 1.05, 0.98)
    slower = _runs(1.5, 1.6, 1.55, 1.52, 1.7)
    assert _significant(a, slower) and _significant(slower, a)  # every call apart: p = 2/252
    assert not _significant(a, _runs(1.15, 1.5, 1.6, 1.0, 1.7))  # the calls interleave: noise
    assert not _significant(_runs(1.0, 1.1, 1.2), _runs(1.5, 1.6, 1.55))  # 3 calls a side: p = 0.1 at best
    assert least_calls(1) == 5 and not _significant(a, _runs(1.5))  # one call: nothing to rank
    tiny = _runs(0.010, 0.011, 0.010, 0.0105, 0.0101)  # 10 µs: below the floor, however far apart
    assert not _significant(tiny, _runs(0.012, 0.013, 0.012, 0.0125, 0.0121)) and MIN_TIME_NS == 10_000
    assert not _significant(_runs(100.0, 100.1, 100.05, 100.02, 100.08),
                            _runs(101.0, 101.1, 101.05, 101.02, 101.08))  # 1%: under the 5% floor
    # a row of the call (a line, an op) needs 50%: the same program's runs differ per op by 20-40%
    assert not _significant(a, slower, MIN_ROW_RATIO)
    assert _significant(a, _runs(1.8, 1.9, 1.85, 1.82, 2.0), MIN_ROW_RATIO) and MIN_ROW_RATIO == 0.5
    # the whole call's ranges must not overlap too: two processes' paces differ by more than their calls show
    overlapping = _runs(1.15, 1.5, 1.6, 1.55, 1.7)  # B's fastest call under A's slowest
    assert large_enough(Compared(a, overlapping)) and not large_enough(Compared(a, overlapping, apart=True))
    assert large_enough(Compared(a, slower, apart=True))


def test_the_more_figures_compared_the_more_calls_a_change_needs():
    """Five calls a side all apart are a change alone (p = 0.008) and noise among 40 figures compared:
    one of them would be that far apart by chance too often. With 8 calls a side it is a change there."""
    a, b = _runs(1.0, 1.1, 1.2, 1.05, 0.98), _runs(1.5, 1.6, 1.55, 1.52, 1.7)
    assert _significant(a, b) and not _significant(a, b, others=39)
    assert least_calls(40) == 8
    a8, b8 = _runs(1.0, 1.1, 1.2, 1.05, 0.98, 1.01, 1.12, 1.03), _runs(1.5, 1.6, 1.55, 1.52, 1.7, 1.51, 1.58, 1.62)
    assert _significant(a8, b8, others=39)


def test_with_no_real_change_a_diff_names_none_in_99_of_100():
    """The rule's promise (ALPHA): 400 diffs of 30 figures each, both runs' calls drawn alike from a busy
    machine's times (a fifth of the calls preempted by 1-5 ms, the rest spread by 20%), 8 calls a side,
    judged at a 5% floor (so the rank test does the work). Before this rule, a row's quartiles apart
    (6% of the time for one row of 8 calls a side) named a change in most such diffs."""
    import random

    rng = random.Random(47)

    def calls() -> object:
        return _runs(*(1.0 + rng.uniform(0, 0.2) + (rng.uniform(1, 5) if rng.random() < 0.2 else 0) for _ in range(8)))

    named = 0
    for _ in range(400):
        verdicts = judge({k: Compared(calls(), calls()) for k in range(30)})
        named += any(p is not None and p <= ALPHA for p in verdicts.values())
    assert named <= 2 * ALPHA * 400, named  # at most 1% expected; 2% allows for the draw


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


def test_preempted_calls_do_not_hide_a_change():
    """A preempted call stretches a row's range on a loaded machine: a line at twice its time, its
    ranges overlapping through two slow calls, is a change by rank (a preempted call is only the
    slowest call, however slow)."""
    a = _runs(*(1.0 + k / 100 for k in range(20)), 2.5, 2.6, 2.9, 2.7)  # slow calls, not one-offs (< 3x)
    b = _runs(*(2.0 + k / 100 for k in range(20)), 1.3, 3.5, 3.6, 3.4)
    assert a.high_ns > b.low_ns  # the ranges overlap
    assert _significant(a, b, MIN_ROW_RATIO, others=39)
    assert not _significant(a, _runs(*([1.2] * 12)), MIN_ROW_RATIO)  # 20%: under the row floor


def test_a_rows_change_must_be_a_share_of_the_call():
    """A 36 µs op of a 2.5 ms call at 69 µs in the next process of one program: every call apart and
    over 50%, but 1.3% of the call: noise (MIN_ROW_SHARE); the same change on a 1 ms call counts."""
    a = _runs(0.036, 0.024, 0.042, 0.030, 0.035, 0.031)
    b = _runs(0.069, 0.059, 0.265, 0.070, 0.066, 0.061)
    assert _significant(a, b, MIN_ROW_RATIO)
    assert not _significant(a, b, MIN_ROW_RATIO, floor_ns=MIN_ROW_SHARE * 2.5e6)
    assert _significant(a, b, MIN_ROW_RATIO, floor_ns=MIN_ROW_SHARE * 1.0e6)


def _digest(lines: dict[str, str]):
    from collections import Counter

    from provenance.diff.summarize import CompileDigest, LineOps

    return CompileDigest(key="c1", log=0, rank=None, rank_label="", fn="f", call_site=None, index=0, status="ok",
                         error=None, recompile_reason=None, seconds=None, phases={}, page="", source=None,
                         kinds=Counter(), lines={k: LineOps(k, text, None, Counter({"computation:add": 1}))
                                                 for k, text in lines.items()},
                         fusions=[], hrefs={k: f"#{k}" for k in lines})


def test_lines_an_edit_moved_or_a_copy_renamed_are_matched_by_their_statements():
    from provenance.diff.match import align_lines

    a = _digest({"m.py:10": "h = fc1(x)", "m.py:11": "h = gelu(h)", "m.py:12": "return fc2(h)"})
    # a line inserted above: every line moved down one
    b = _digest({"m.py:11": "h = fc1(x)", "m.py:12": "h = gelu(h)", "m.py:13": "return fc2(h)", "m.py:9": "# new"})
    aligned, renamed = align_lines(a, b)
    assert set(aligned.lines) == {"m.py:10", "m.py:11", "m.py:12", "m.py:9"} and renamed == {}
    assert aligned.own_keys["m.py:12"] == "m.py:13" and aligned.hrefs["m.py:12"] == "#m.py:13"
    # a copy under another name, one line edited: the edited line matched by its place
    c = _digest({"m_b.py:10": "h = fc1(x)", "m_b.py:11": "h = relu(h)", "m_b.py:12": "return fc2(h)"})
    aligned, renamed = align_lines(a, c)
    assert renamed == {"m.py": "m_b.py"} and set(aligned.lines) == set(a.lines)
    assert aligned.lines["m.py:11"].text == "h = relu(h)" and aligned.own_keys["m.py:11"] == "m_b.py:11"
    # an unrelated file is no copy
    d = _digest({"other.py:1": "import os", "other.py:2": "print(1)"})
    aligned, renamed = align_lines(a, d)
    assert renamed == {} and set(aligned.lines) == {"other.py:1", "other.py:2"}
