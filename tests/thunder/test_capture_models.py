"""nanoGPT and llama2 (shipped with Thunder), forward + backward: every op has provenance."""

from __future__ import annotations

import models
import pytest
import thunder

import provenance
from provenance import Kind


@pytest.mark.parametrize("build", [models.nanogpt, pytest.param(models.llama2, marks=pytest.mark.slow)],
                         ids=["nanogpt", "llama2"])
def test_forward_and_backward_execution_traces_are_covered(traced, build):
    model, x = build()
    model_file = models.GPT.__module__ if build is models.nanogpt else models.Transformer.__module__
    model_file = __import__(model_file, fromlist=["_"]).__file__
    jm = thunder.jit(model)
    models.forward_backward(jm, x)

    fw = thunder.last_traces(jm)[-1]
    bw = thunder.last_backward_traces(jm)[-1]
    for trace in (fw, bw):
        cov = provenance.coverage(trace)
        assert cov.missing == [] and cov.with_provenance == cov.total > 0
        assert provenance.coverage(trace, deep=True).missing == []  # every nesting level
        compute = [b for b in trace.bound_symbols if provenance.of(b).kind != Kind.BOOKKEEPING]
        at_model = [b for b in compute
                    if provenance.of(b).user_frame is not None
                    and provenance.of(b).user_frame.file == model_file
                    and provenance.of(b).module is not None]
        assert len(compute) > 20
        assert len(at_model) / len(compute) >= 0.95, provenance.coverage(trace)

    backward_ops = [provenance.of(b) for b in bw.bound_symbols if provenance.of(b).kind == Kind.BACKWARD]
    assert len(backward_ops) > 50
    forward_records = {provenance.of(b) for t in thunder.last_traces(jm) for b in t.bound_symbols}
    for record in backward_ops:
        assert "grad" in record.transforms
        origin = record.derived_from
        assert origin is not None and origin.kind in (Kind.OP, Kind.DECOMPOSITION)
        assert (origin.source, origin.module) == (record.source, record.module)
    # the forward ops they link to are ops of the forward traces
    assert {r.derived_from for r in backward_ops} <= forward_records


def test_every_trace_of_every_pass_is_covered(traced):
    model, x = models.nanogpt()
    jm = thunder.jit(model)
    models.forward_backward(jm, x)
    traces = (thunder.last_prologue_traces(jm) + thunder.last_traces(jm)
              + thunder.last_backward_traces(jm) + thunder.compile_stats(jm).last_epilogue_traces)
    assert len(traces) >= 8
    for trace in traces:
        assert provenance.coverage(trace, deep=True).missing == [], trace.get_provenance()
    # bookkeeping names the pass that made it
    fw = thunder.last_traces(jm)[-1]
    dels = [provenance.of(b) for b in fw.bound_symbols if b.sym.name == "python_del"]
    assert dels and all(r.kind == Kind.BOOKKEEPING and r.transforms == ("del_last_used",) for r in dels)


@pytest.mark.slow
def test_records_are_shared_not_copied(traced):
    model, x = models.nanogpt()
    jm = thunder.jit(model)
    jm(x)
    traces = thunder.last_traces(jm)
    records = [provenance.of(b) for t in traces for b in t.bound_symbols]
    distinct = {id(r) for r in records}
    assert len(distinct) < len(records) / 5  # one record per distinct provenance, shared
    # equal records are the same object (interned)
    by_value = {}
    for r in records:
        assert by_value.setdefault(r, r) is r
