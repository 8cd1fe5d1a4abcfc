"""Ops that no torch call made (comparisons, operator syntax, in-place updates) get the line that
made them under both entry points: nothing takes its neighbour's line, a function's first ops
included. Thunder's interpreter runs comparisons uninterpreted, so its own `# file:line` comment
keeps the line before; ours is right there, and the test says so."""

from __future__ import annotations

import os

import pytest
import thunder
import thunder.dynamo
import torch

import provenance
from provenance import Kind

HERE = os.path.abspath(__file__)


def line_of(marker: str) -> int:
    with open(HERE) as f:
        return next(n for n, line in enumerate(f, 1) if line.rstrip().endswith(f"# <-- {marker}"))


def operators(a, b, c):
    m = a <= b  # <-- le first
    n = c != 1  # <-- ne
    y = a * 2  # <-- mul
    g = a > b  # <-- gt after mul
    e = y == c  # <-- eq
    z = a.clone()  # <-- clone
    z += b  # <-- iadd
    w = -a  # <-- neg
    v = ~m  # <-- invert
    s = 2 < a  # <-- reflected
    q = (a < b) & (b > c)  # <-- two on one line
    return m, n, g, e, y.sin(), z, w, v, s, q  # <-- sin


# ltorch/prims name -> the marker of its line (in the order of the function)
EXPECTED = [("le", "le first"), ("ne", "ne"), ("mul", "mul"), ("gt", "gt after mul"), ("eq", "eq"),
            ("neg", "neg"), ("bitwise_not", "invert"), ("gt", "reflected"), ("lt", "two on one line"),
            ("gt", "two on one line"), ("bitwise_and", "two on one line"), ("sin", "sin")]


def _lines(trace) -> list[tuple[str, int | None]]:
    """(symbol name, the op's user line) of the trace's compute ops of EXPECTED's kinds."""
    names = {name for name, _ in EXPECTED}
    found = []
    for bsym in trace.bound_symbols:
        record = provenance.of(bsym)
        name = bsym.sym.name.removeprefix("__").removesuffix("__")
        if name in names and record.kind != Kind.BOOKKEEPING:
            frame = record.user_frame
            found.append((name, frame.line if frame is not None and frame.file == HERE else None))
    return found


def _final_forward(entry: str, inputs):
    if entry == "thunder.jit":
        jf = thunder.jit(operators)
        jf(*inputs)
        return thunder.last_traces(jf)
    compiled = thunder.dynamo.thunderfx(operators)
    compiled(*inputs)
    (piece,) = [p for g in provenance.fx_graphs(compiled) for p in g.pieces if p.thunder]
    return thunder.last_traces(piece.fn)


@pytest.mark.parametrize("entry", ["thunder.jit", "thunderfx"])
def test_every_operator_op_has_its_own_line(traced, entry):
    inputs = [torch.randn(4) for _ in range(3)]
    traces = _final_forward(entry, inputs)
    expected = [(name, line_of(marker)) for name, marker in EXPECTED]
    assert _lines(traces[0]) == expected  # as traced
    assert sorted(_lines(traces[-1])) == sorted(expected)  # the final trace (ThunderFX's reorders them)
    in_place = [provenance.of(b) for b in traces[-1].bound_symbols if b.sym.name in ("add", "copy_")]
    assert {r.user_frame.line for r in in_place} == {line_of("iadd")}
    # a plain function has no module (under ThunderFX its piece is Dynamo's GraphModule: no module either)
    assert {provenance.of(b).module for t in (traces[0], traces[-1]) for b in t.bound_symbols} == {None}


def test_where_thunders_comment_disagrees_ours_is_right(traced):
    inputs = [torch.randn(4) for _ in range(3)]
    jf = thunder.jit(operators)
    jf(*inputs)
    first = thunder.last_traces(jf)[0]
    gt = next(b for b in first.bound_symbols if b.sym.name == "gt")
    # Thunder's location is the multiplication's (the op before); ours is the comparison's
    assert gt.source_positions is not None and gt.source_positions.lineno == line_of("mul")
    assert provenance.of(gt).user_frame.line == line_of("gt after mul")
    le = first.bound_symbols[next(i for i, b in enumerate(first.bound_symbols) if b.sym.name == "le")]
    assert le.source_filename is None  # Thunder has none for the function's first op
    assert provenance.of(le).module is None and provenance.of(le).kind == Kind.OP
