"""Passes name what they make; recomputation says so."""

from __future__ import annotations

import thunder
import torch

import provenance
from provenance import Kind
from provenance.thunder.passes import pass_name


class Checkpointed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def inner(self, x):
        return torch.sin(self.fc(x)) * 2

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(self.inner, x, use_reentrant=False).sum()


def test_recomputed_ops_say_so(traced):
    jm = thunder.jit(Checkpointed())
    jm(torch.randn(2, 4, requires_grad=True)).backward()
    bw = thunder.last_backward_traces(jm)[-1]
    recomputed = [(b.sym.name, provenance.of(b)) for b in bw.bound_symbols
                  if provenance.of(b).kind == Kind.RECOMPUTE]
    assert recomputed, "activation checkpointing recomputes the forward in the backward"
    for _name, record in recomputed:
        assert record.transforms[-1] == "recompute" and record.lineage.endswith("recompute(op)")
        assert record.derived_from is not None and record.derived_from.kind != Kind.RECOMPUTE
        assert record.module == "fc" and record.user_frame.function == "Checkpointed.inner"
    assert "linear" in {name for name, _ in recomputed}


def test_alias_updates_and_dels_name_their_pass(traced):
    def f(a, b):
        a.add_(1)
        c = a * b
        c.mul_(2)
        return c

    jf = thunder.jit(f)
    jf(torch.randn(3), torch.randn(3))
    aliases = [provenance.of(b) for t in thunder.last_traces(jf) for b in t.bound_symbols
               if b.sym.name == "update_aliases"]
    assert aliases and {(r.kind, r.transforms) for r in aliases} == {(Kind.BOOKKEEPING, ("update_aliases",))}
    final = thunder.last_traces(jf)[-1]
    named = {provenance.of(b).transforms for b in final.bound_symbols if b.sym.name in ("python_del", "python_return")}
    assert ("del_last_used",) in named


def test_pass_names():
    assert pass_name("Delete Last Used (took 9 milliseconds)") == "del_last_used"
    assert pass_name("Grad transform pass (took 234 milliseconds)") == "grad"
    assert pass_name("My Custom pass!") == "my_custom_pass"
    assert pass_name("") == "unnamed_pass"


def test_a_backward_ops_decomposition_is_backward_too(traced, monkeypatch):
    """What an executor that claims prims fuses (nvFuser: bench/README.md, issue 26) is a backward op's
    decomposition: it carries the backward record, not the forward op's autograd was processing."""
    import models

    seen = []
    transform = thunder.transform_for_execution

    def transform_for_execution(trace, *args, **kwargs):
        seen.append(trace)
        return transform(trace, *args, **kwargs)

    monkeypatch.setattr(thunder, "transform_for_execution", transform_for_execution)
    jm = thunder.jit(models.Net(n=8, depth=1))
    models.forward_backward(jm, torch.randn(3, 8))

    def decomposition(bsym):
        for sub in bsym.subsymbols:
            yield sub
            yield from decomposition(sub)

    checked = 0
    for trace in seen:
        for bsym in trace.bound_symbols:
            record = provenance.of(bsym)
            if record is not None and record.kind == Kind.BACKWARD:
                for sub in decomposition(bsym):
                    assert provenance.of(sub) is record, (bsym.sym.name, sub.sym.name, provenance.of(sub))
                    checked += 1
    assert checked > 20  # the Net's backward: linear, gelu and tanh gradients, in prims
