"""Capture's memo tables (provenance.core.caches): bounded, emptied by disable(), and capture works after."""

from __future__ import annotations

import thunder
import torch

import provenance
import provenance.thunder.wait_hooks  # registers the wait-site table
from provenance.core.caches import CACHES, Memo
from provenance.core.record import Provenance, intern


def test_a_memo_keeps_at_most_its_bound_dropping_the_oldest():
    memo = Memo("test", 3)
    for i in range(5):
        assert memo.put(i, str(i)) == str(i)
    assert list(memo.items()) == [(2, "2"), (3, "3"), (4, "4")]
    assert all(0 < bound < 1 << 20 for _, bound in CACHES.sizes().values())  # every table is bounded


def test_interning_shares_records_while_they_are_in_the_table():
    a, b = Provenance(module="x", transforms=("t",)), Provenance(module="x", transforms=("t",))
    assert a is not b and intern(a) is intern(b)


def _traced_compile():
    jm = thunder.jit(lambda x: torch.tanh(torch.sin(x) * 2))
    with provenance.scope("step", role="training"):
        jm(torch.ones(3, requires_grad=True)).sum().backward()
        _trace_by_hand()
    return jm


def _trace_by_hand():
    """Ops traced outside thunder.jit, inside a scope: the scope is all they have (state.with_span)."""
    trace = thunder.trace()(lambda x: thunder.torch.cos(x) + 1, torch.ones(3))
    assert {provenance.of(b).kind for b in trace.bound_symbols if b.sym.name in ("cos", "add")} == {"scope"}


def test_disable_empties_every_table_and_tracing_works_again():
    provenance.enable()
    _traced_compile()
    filled = {name for name, (size, _) in CACHES.sizes().items() if size}
    assert {"record.intern", "passes.derived", "passes.made_by", "state.with_span", "frames.frame_of",
            "frames.is_user_code"} <= filled
    provenance.disable()
    assert {name: size for name, (size, _) in CACHES.sizes().items() if size} == {}

    provenance.enable()
    try:
        jm = _traced_compile()
        assert CACHES.sizes()["record.intern"][0] > 0
        fw, bw = thunder.last_traces(jm)[-1], thunder.last_backward_traces(jm)[-1]
        assert provenance.coverage(fw).missing == [] and provenance.coverage(bw).missing == []
        grads = [provenance.of(b) for b in bw.bound_symbols if provenance.of(b).kind == "backward"]
        assert grads and all(r.derived_from is not None and r.span.name == "step" for r in grads)
    finally:
        provenance.disable()


def test_a_scope_per_step_does_not_grow_the_tables_without_bound(monkeypatch):
    """Each `with provenance.scope(...)` is a new span, so a new record per op and step: the
    tables keep their bound however many steps run."""
    for table in ("record.intern", "state.with_span"):
        monkeypatch.setattr(CACHES._tables[table], "maxsize", 20)
    provenance.enable()
    try:
        jf = thunder.jit(lambda x: torch.sin(x) * 2 + 1)
        for step in range(30):
            with provenance.scope("step", step=step):
                thunder.jit(lambda x: torch.sin(x) * 2 + 1)(torch.ones(3))
                _trace_by_hand()
        jf(torch.ones(3))
        sizes = CACHES.sizes()
        assert sizes["record.intern"][0] == sizes["state.with_span"][0] == 20  # 30 steps would need more
        assert provenance.coverage(thunder.last_traces(jf)[-1]).missing == []
    finally:
        provenance.disable()
