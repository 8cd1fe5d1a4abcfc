"""provenance.scope(): stamps exactly the ops bound inside it; per thread and per asyncio task."""

from __future__ import annotations

import asyncio
import threading

import pytest
import thunder
import torch
from paths import EXAMPLES

import provenance
from provenance import Kind


def _records(jfn):
    return [(b.sym.name, provenance.of(b)) for b in thunder.last_traces(jfn)[-1].bound_symbols
            if provenance.of(b).kind != Kind.BOOKKEEPING]


class Scoped(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        with provenance.scope("inner", role="custom.role", note="x"):
            with provenance.scope("innermost"):
                z = y * 2
        return z + 1


def test_scope_inside_model_stamps_exactly_its_ops(traced):
    jm = thunder.jit(Scoped())
    jm(torch.randn(2, 4))
    got = {name: r for name, r in _records(jm)}
    assert got["mul"].span.path == ("inner", "innermost")
    assert got["mul"].role == "custom.role"  # inherited from the enclosing scope
    assert got["mul"].span.parent.attribute("note") == "x"
    assert got["linear"].span is None and got["add"].span is None
    assert got["mul"].module == "" and got["mul"].user_frame.text == "z = y * 2"


def test_scope_around_a_compile_stamps_all_its_ops_and_nothing_after(traced):
    def f(x):
        return torch.sin(x) + 1

    with provenance.scope("step", phase="warmup") as span:
        jf = thunder.jit(f)
        jf(torch.randn(3))
    assert all(r.span is span for _, r in _records(jf))
    assert provenance.current_span() is None
    jg = thunder.jit(lambda x: torch.cos(x))
    jg(torch.randn(3))
    assert all(r.span is None for _, r in _records(jg))


def test_scopes_are_per_thread(traced):
    barrier = threading.Barrier(2)
    results: dict[str, list] = {}
    errors: list[BaseException] = []

    def work(name: str, op) -> None:
        try:
            with provenance.scope(name):
                barrier.wait(timeout=30)  # both scopes are open at once
                jfn = thunder.jit(lambda x: op(x) * 3)
                jfn(torch.randn(4))
                results[name] = _records(jfn)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=("thread-a", torch.exp)),
               threading.Thread(target=work, args=("thread-b", torch.log1p))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for name in ("thread-a", "thread-b"):
        assert results[name] and {r.span.name for _, r in results[name]} == {name}


def test_scopes_are_per_asyncio_task():
    async def task(name: str):
        with provenance.scope(name):
            await asyncio.sleep(0.01)  # interleave with the other task
            return provenance.current_span().path

    async def main():
        return await asyncio.gather(task("a"), task("b"))

    assert asyncio.run(main()) == [("a",), ("b",)]


def test_scope_rejects_empty_name():
    with pytest.raises(ValueError, match="non-empty name"):
        with provenance.scope(""):
            pass


def test_scope_in_a_user_transform_labels_exactly_its_ops_through_to_execution(traced):
    import sys

    sys.path.insert(0, str(EXAMPLES))
    from custom_transform import ClampLinearOutputs, Mlp

    jm = thunder.jit(Mlp(), transforms=[ClampLinearOutputs(limit=0.5)])
    jm(torch.randn(4, 8, requires_grad=True)).sum().backward()
    fw = thunder.last_traces(jm)[-1]
    bw = thunder.last_backward_traces(jm)[-1]
    labelled = [(b.sym.name, provenance.of(b)) for b in fw.bound_symbols
                if provenance.of(b).span is not None]
    # clamp decomposes into ne/gt/lt/where; nothing else carries the scope
    assert {name for name, _ in labelled} == {"ne", "gt", "lt", "where"}
    unlabelled = {b.sym.name for b in fw.bound_symbols if provenance.of(b).span is None
                  and provenance.of(b).kind != Kind.BOOKKEEPING}
    assert unlabelled == {"linear", "gt", "where"}  # the layers and relu (gt/where) stay the user's
    for _, record in labelled:
        assert record.span.name == "clamp_linear_outputs" and record.span.attribute("limit") == 0.5
        assert record.role == "activation_clamp"
        assert record.module in ("up", "down") and record.user_frame.function == "Mlp.forward"
    grads = [provenance.of(b) for b in bw.bound_symbols if provenance.of(b).span is not None]
    assert grads and all(r.kind == Kind.BACKWARD and r.role == "activation_clamp" for r in grads)
    text = provenance.annotate(fw, group=True)
    assert "# ── activation_clamp · up (Linear) · custom_transform.py:" in text
