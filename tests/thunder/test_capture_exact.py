"""A model defined in the tests (helper function, nested modules): exact lines and module paths."""

from __future__ import annotations

import os

import models
import thunder
import torch

import provenance
from provenance import Kind


def _ops(trace, name):
    return [b for b in trace.bound_symbols if b.sym.name == name]


def _where(record):
    frame = record.user_frame
    return os.path.basename(frame.file), frame.line


def test_exact_lines_and_module_paths_forward_and_backward(traced):
    net = models.Net(n=8, depth=2)
    jm = thunder.jit(net)
    models.forward_backward(jm, torch.randn(3, 8, requires_grad=True))
    fw = thunder.last_traces(jm)[-1]
    bw = thunder.last_backward_traces(jm)[-1]

    linears = [provenance.of(b) for b in _ops(fw, "linear")]
    got = [(r.module, r.module_type, _where(r)) for r in linears]
    fc1, fc2 = models.line_of("fc1 call"), models.line_of("fc2 call")
    assert got == [
        ("blocks.0.mlp.fc1", "Linear", ("models.py", fc1)),
        ("blocks.0.mlp.fc2", "Linear", ("models.py", fc2)),
        ("blocks.1.mlp.fc1", "Linear", ("models.py", fc1)),
        ("blocks.1.mlp.fc2", "Linear", ("models.py", fc2)),
        ("head", "Linear", ("models.py", models.line_of("head call"))),
    ]
    # the library frame is kept, marked, innermost; the user's call line comes after it
    fc1_record = linears[0]
    assert fc1_record.source[0].file.endswith(os.path.join("nn", "modules", "linear.py"))
    assert not fc1_record.source[0].user
    assert [f.function for f in fc1_record.source if f.user][:3] == ["Mlp.forward", "Block.forward", "Net.forward"]

    # the helper function: innermost user frame is the helper's line, module is the caller's
    gelus = [provenance.of(b) for b in fw.bound_symbols if b.sym.name == "gelu"]
    muls = [provenance.of(b) for b in fw.bound_symbols
            if b.sym.name == "mul" and provenance.of(b).user_frame.line == models.line_of("helper")]
    for record in gelus + muls:
        assert _where(record) == ("models.py", models.line_of("helper"))
        assert record.source[1].line == models.line_of("helper call")
        assert record.module in ("blocks.0.mlp", "blocks.1.mlp")
    assert {r.module for r in muls} == {"blocks.0.mlp", "blocks.1.mlp"}

    tanh = [provenance.of(b) for b in _ops(fw, "tanh")]
    expected = [("", "Net", ("models.py", models.line_of("root tanh")))]
    assert [(r.module, r.module_type, _where(r)) for r in tanh] == expected

    # backward: the grad of blocks.1.mlp.fc2's linear points at the same line and module
    grads = {(r.module, _where(r)) for r in map(provenance.of, bw.bound_symbols) if r.kind == Kind.BACKWARD}
    assert ("blocks.1.mlp.fc2", ("models.py", fc2)) in grads
    assert ("blocks.0.mlp.fc1", ("models.py", fc1)) in grads
    assert ("", ("models.py", models.line_of("root tanh"))) in grads
    assert ("blocks.0.norm", ("models.py", models.line_of("block residual"))) in grads
    tanh_grads = [r for r in map(provenance.of, bw.bound_symbols)
                  if r.kind == Kind.BACKWARD and r.user_frame.line == models.line_of("root tanh")]
    assert tanh_grads and all(r.derived_from is tanh[0] or r.derived_from.source == tanh[0].source
                              for r in tanh_grads)
    assert all(r.lineage.startswith("grad(") for r in tanh_grads)
