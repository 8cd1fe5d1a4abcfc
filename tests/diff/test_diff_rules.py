"""The diff's two rules on their own: when a run-time change is significant (outside both runs'
spread) and what a --fail-on rule says (docs/diff.md)."""

from __future__ import annotations

import pytest

from provenance.diff.compare import MIN_ROW_RATIO, MIN_TIME_NS, significant
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
