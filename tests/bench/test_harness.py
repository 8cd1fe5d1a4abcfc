"""bench/harness.py, what the benchmarks share (issue 45): pairs alternate, a spread is a median
with its range, and every child program a benchmark runs is a file of bench/children/ that a
benchmark names (no program left in a string constant, none left over)."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
# loaded from its file: bench/ on sys.path would shadow the tests' helpers (bench/real_models.py)
_spec = importlib.util.spec_from_file_location("bench_harness", BENCH / "harness.py")
harness = sys.modules["bench_harness"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(harness)


def test_pairs_alternate_their_order():
    assert [order for _, order in harness.pairs(4, "on", "off")] == [("on", "off"), ("off", "on")] * 2
    ran = []
    ratios = harness.paired(3, "a", "b", lambda mode: ran.append(mode) or {"a": 2.0, "b": 4.0}[mode])
    assert ratios == [0.5, 0.5, 0.5] and ran == ["a", "b", "b", "a", "a", "b"]


def test_a_spread_is_a_median_and_its_range():
    found = harness.spread([3.0, 1.0, 2.0, 10.0])
    assert (found.median, found.low, found.high, found.n) == (2.5, 1.0, 10.0, 4)
    assert found.text(1, " s") == "2.5 s (range 1.0–10.0, n=4)"
    assert harness.markdown(["a", "b"], [[1, None]]) == "| a | b |\n| --- | --- |\n| 1 |  |"


def test_nanogpt_takes_the_shared_config_with_overrides():
    model = harness.nanogpt(1, n_embd=32)
    assert model.config.n_layer == 1 and model.config.n_embd == 32
    assert model.config.vocab_size == harness.NANOGPT["vocab_size"]


def _scripts() -> list[Path]:
    return sorted(BENCH.glob("*.py")) + sorted((BENCH / "children").glob("*.py"))


def test_every_child_program_is_a_file_a_benchmark_names():
    named = set()
    for path in _scripts():
        text = path.read_text()
        named |= set(re.findall(r"""child(?:_command)?\(\s*["']([\w.]+)["']""", text))
        for node in ast.walk(ast.parse(text)):  # no program in a string: a one-liner at most (`-c "pass"`)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\nimport " in node.value:
                raise AssertionError(f"{path.name}:{node.lineno}: a program in a string constant")
    children = {p.name for p in (BENCH / "children").iterdir() if p.is_file()}
    assert named == children, (named ^ children)
    for name in named:
        assert harness.child(name).is_file()
    with pytest.raises(FileNotFoundError, match="no child program"):
        harness.child("missing.py")
