"""annotate(): Thunder's code untouched, compact headers, a tag per subsymbol line."""

from __future__ import annotations

import re
import subprocess
import sys

import models
import pytest
import thunder
import torch
from paths import ROOT

import provenance

HEADER = re.compile(r"^\s*# ── ")


def _compile_net():
    jm = thunder.jit(models.Net(n=8, depth=2))
    models.forward_backward(jm, torch.randn(3, 8))
    return thunder.last_traces(jm)[-1], thunder.last_backward_traces(jm)[-1]


def test_headers_name_module_line_lineage_and_are_not_repeated(traced):
    fw, bw = _compile_net()
    for trace, lineage in ((fw, None), (bw, "grad(op)")):
        text = provenance.annotate(trace)
        headers = [line.strip() for line in text.splitlines() if HEADER.match(line)]
        ops = [b for b in trace.bound_symbols if provenance.of(b).kind != provenance.Kind.BOOKKEEPING]
        assert 3 <= len(headers) < len(ops)  # grouped: one header per change of provenance
        assert all(a != b for a, b in zip(headers, headers[1:]))
        fc2 = f"models.py:{models.line_of('fc2 call')} `return self.fc2(h)  # <-- fc2 call`"
        matching = [h for h in headers if "blocks.1.mlp.fc2 (Linear)" in h and fc2 in h]
        assert matching
        if lineage:
            assert all(lineage in h for h in matching)
    # bookkeeping statements get a short trailing tag naming their pass
    assert re.search(r"^\s*del t\w+.*  # \[del_last_used\]$", provenance.annotate(fw), re.M)


def test_every_subsymbol_line_is_tagged(traced):
    fw, _ = _compile_net()
    text = provenance.annotate(fw, print_depth=-1)
    sub_lines = [line for line in text.splitlines() if re.match(r"^\s{4,}# \S", line) and " = " in line]
    assert sub_lines
    assert all(re.search(r"  \[[^\]]+\]$", line) for line in sub_lines), sub_lines[:3]
    assert any(line.endswith(f"[models.py:{models.line_of('helper')}]") for line in sub_lines)


def test_annotate_of_untraced_trace_says_so():
    jf = thunder.jit(lambda x: x + 1)
    jf(torch.ones(2))
    assert "# ── no provenance" in provenance.annotate(thunder.last_traces(jf)[-1])


@pytest.mark.slow
def test_example_prints_annotated_forward_and_backward():
    root = ROOT
    done = subprocess.run([sys.executable, str(root / "examples" / "annotate_nanogpt.py")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for title in ("forward", "backward"):  # every symbol of both traces has a record
        assert re.search(rf"^#### final {title} execution trace: (\d+)/\1 with provenance", out, re.M)
    assert "# ── lm_head (Linear) · nanogpt_model.py:240 `logits = self.lm_head(x)` · grad(op)" in out
    assert "def backward_fn(saved_for_backward, cotangents):" in out
