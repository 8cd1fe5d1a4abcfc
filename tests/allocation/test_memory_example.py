"""examples/memory_nanogpt.py as users run it (small): nanoGPT's top lines by saved-for-backward
bytes and by bytes live at the peak, then the lines that grew with a longer sequence."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from paths import ROOT


@pytest.mark.slow
def test_memory_nanogpt_names_its_lines_and_what_grew():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "THUNDER_TRACE"))}
    done = subprocess.run([sys.executable, "examples/memory_nanogpt.py", "--layers", "1", "--embd", "32", "--heads",
                           "2", "--batch", "2", "--seq", "8", "--seq2", "16", "--vocab", "64", "--top", "6"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    sections = re.split(r"^(?=\S)", out, flags=re.M)
    saved, peak, grew, total = (next(s for s in sections if s.startswith(title)) for title in (
        "top lines by saved for backward (seq 8)", "top lines by live at the peak (seq 8",
        "lines whose saved-for-backward bytes grew, seq 8 -> 16", "saved for backward in all"))
    for section in (saved, peak, grew):
        rows = section.splitlines()[1:]
        assert rows and all(re.match(r"  nanogpt_model\.py:\d+ ", row) for row in rows), section
    assert "x = self.gelu(x)" in saved and "scaled_dot_product_attention" in saved
    growth = re.findall(r"nanogpt_model\.py:(\d+)\s+\+(\d+) bytes \((\d+) -> (\d+)\)  (.*)", grew)
    assert len(growth) == len(grew.splitlines()) - 1
    for _, delta, was, now, _ in growth:
        assert int(delta) == int(now) - int(was) > 0
    gelu = next(g for g in growth if g[4].startswith("x = self.gelu(x)"))
    assert int(gelu[3]) == 2 * int(gelu[2])  # twice the tokens, twice the bytes: an elementwise line
    before, after, plus = map(int, re.match(r"saved for backward in all: (\d+) -> (\d+) bytes \(\+(\d+)\)",
                                            total).groups())
    assert plus == after - before > 0 and sum(int(g[1]) for g in growth) <= plus
