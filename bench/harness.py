"""What the benchmarks share: where things are, the model they time, paired runs, medians, tables.

Every script here is run by hand (`python bench/NAME.py --help`) and writes its figures down in
bench/README.md. They share one protocol, kept here so that it is written once:

- **paired, alternating**: two configurations are timed as neighbours in time, the order
  swapped from one pair to the next (`pairs`), and a ratio is taken within each pair, because
  this machine's speed drifts by ±10% between minutes and a neighbour shares its state;
- **medians and spread**: a figure is the median of its samples with their range (`Spread`),
  never a sum or a single run;
- **child programs are files** (bench/children/), run with this Python (`run_child`), so they
  are linted and readable like any other module.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
CHILDREN = BENCH / "children"
SUPPORT = ROOT / "tests" / "support"  # the tests' programs (real logs, real models), reused as workloads

# nanoGPT (thunder.tests.nanogpt_model) as the benchmarks time it unless a script says otherwise:
# small enough for a 2-core CPU, large enough that a compile is mostly Thunder's own work.
NANOGPT = {"n_head": 4, "n_embd": 64, "block_size": 32, "vocab_size": 128, "dropout": 0.0}


def nanogpt(layers: int, **overrides: Any):
    """A freshly built nanoGPT of `layers` blocks, NANOGPT's config with `overrides`."""
    from thunder.tests.nanogpt_model import GPT, GPTConfig

    return GPT(GPTConfig(n_layer=layers, **{**NANOGPT, **overrides}))


def parser(doc: str | None, full: bool = False) -> argparse.ArgumentParser:
    """The script's argument parser, described by its docstring (its first line, or all of it)."""
    text = (doc or "").strip()
    if full:
        return argparse.ArgumentParser(description=text, formatter_class=argparse.RawDescriptionHelpFormatter)
    return argparse.ArgumentParser(description=text.splitlines()[0] if text else None)


def pairs(count: int, a: str, b: str) -> Iterator[tuple[int, tuple[str, str]]]:
    """`count` pairs of the two configurations, the order alternating: (a, b), (b, a), ..."""
    for i in range(count):
        yield i, (a, b) if i % 2 == 0 else (b, a)


def paired(count: int, a: str, b: str, run: Callable[[str], float]) -> list[float]:
    """Time `a` against `b` in `count` alternating pairs: the ratios run(a) / run(b), one per pair."""
    ratios = []
    for _, order in pairs(count, a, b):
        got = {mode: run(mode) for mode in order}
        ratios.append(got[a] / got[b])
    return ratios


@dataclass(frozen=True)
class Spread:
    """A figure's samples: their median and range."""

    median: float
    low: float
    high: float
    n: int

    def text(self, digits: int = 3, unit: str = "") -> str:
        return f"{self.median:.{digits}f}{unit} (range {self.low:.{digits}f}–{self.high:.{digits}f}, n={self.n})"


def spread(values: Sequence[float]) -> Spread:
    """The median and range of `values` (at least one)."""
    return Spread(statistics.median(values), min(values), max(values), len(values))


def median(values) -> float:
    return statistics.median(list(values))


def markdown(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table, as bench/README.md quotes them."""
    lines = ["| " + " | ".join(map(str, header)) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join("" if cell is None else str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def child(name: str) -> Path:
    """A child program of bench/children/ (its file name)."""
    path = CHILDREN / name
    if not path.is_file():
        raise FileNotFoundError(f"no child program {path}")
    return path


def child_command(name: str, *args: object, python: str = sys.executable) -> list[str]:
    """The command that runs child program `name` with `args`."""
    return [python, str(child(name)), *map(str, args)]


def run_child(name: str, *args: object, **kwargs: Any) -> subprocess.CompletedProcess:
    """Run child program `name` with `args` (subprocess.run's keywords; output captured as text unless said)."""
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    return subprocess.run(child_command(name, *args), **kwargs)


def _spin() -> None:
    while True:
        pass


@contextlib.contextmanager
def busy(load: int) -> Iterator[None]:
    """`load` busy processes (pure-Python spin loops, as a CI neighbour would be) while the block runs."""
    import multiprocessing

    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(load)]
    for s in spinners:
        s.start()
    try:
        yield
    finally:
        for s in spinners:
            s.terminate()
