"""The regression gate: `--fail-on METRIC=+LIMIT` rules, judged against the diff's significant
changes (compare.py's rule; a compile time, one sample a side, against any change: the user's limit is
the bound). A rule fails when a significant change of its metric grew by more
than its limit: `+10%` relative to A, `+5` absolute in the metric's unit (ms per call for
run_time, s for compile_time, bytes for memory, compiles for recompiles; `K`, `M`, `G` suffixes
multiply by 1024 for memory). `+0` fails on any increase. docs/diff.md, "The gate"."""

from __future__ import annotations

import re
from dataclasses import dataclass

from provenance.diff.compare import Change, Diff

__all__ = ["METRICS", "Rule", "Violation", "check", "parse_rule"]

METRICS = {"run_time": "ms", "compile_time": "s", "memory": "bytes", "recompiles": "compiles"}
_RULE = re.compile(r"^([a-z_]+)=\+?(\d+(?:\.\d+)?)([kmg]i?b?)?(%)?$", re.IGNORECASE)
_SCALE = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


@dataclass(frozen=True)
class Rule:
    metric: str
    limit: float
    relative: bool  # a percentage of A's figure
    text: str


@dataclass(frozen=True)
class Violation:
    rule: Rule
    change: Change

    def describe(self) -> str:
        c = self.change
        grew = f"{c.ratio:+.1%}" if self.rule.relative and c.ratio is not None else f"{c.delta:+g} {c.unit}"
        return f"{self.rule.text}: {c.title} [{c.compile or 'run'}] grew {grew} ({c.before:g} → {c.after:g} {c.unit})"


def parse_rule(text: str) -> Rule:
    """`run_time=+5%` -> Rule; ValueError with the reason for anything else."""
    found = _RULE.match(text.strip().replace(" ", ""))
    if found is None:
        raise ValueError(f"--fail-on {text!r}: write METRIC=+LIMIT or METRIC=+LIMIT% (e.g. run_time=+5%)")
    metric, number, suffix, percent = found.groups()
    metric = metric.lower()
    if metric not in METRICS:
        raise ValueError(f"--fail-on {text!r}: unknown metric {metric!r} (choose from {', '.join(METRICS)})")
    limit = float(number)
    if suffix:
        if percent or metric != "memory":
            raise ValueError(f"--fail-on {text!r}: a size suffix is for memory, without %")
        limit *= _SCALE[suffix[0].lower()]
    return Rule(metric, limit, bool(percent), text.strip())


def check(diff: Diff, rules: list[Rule]) -> list[Violation]:
    """The significant changes that break a rule (regressions only: a faster run never fails)."""
    out = []
    for rule in rules:
        for change in diff.changes:
            if change.metric != rule.metric or change.delta is None or change.delta <= 0:
                continue
            if not change.significant and change.metric != "compile_time":  # one sample a side: the limit judges
                continue
            if change.level != "compile":
                continue  # the gate judges each compile's figures; a line's or a module's are shown, not gated
            grew = (change.ratio or 0.0) * 100 if rule.relative else change.delta
            if grew > rule.limit:
                out.append(Violation(rule, change))
    return out
