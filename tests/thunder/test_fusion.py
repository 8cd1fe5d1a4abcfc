"""Executor fusion: a fusion's record lists exactly its fused ops' provenances, flat."""

from __future__ import annotations

import os

import models
import pytest
import thunder
import torch

import provenance
from provenance import Kind


def _fusions(trace):
    return [b for b in trace.bound_symbols if b.sym.is_fusion]


def _lines(records):
    return {(r.module, os.path.basename(r.user_frame.file), r.user_frame.line) for r in records if r.user_frame}


def _check_fusions(trace, *, expect_backward: bool) -> None:
    fusions = _fusions(trace)
    assert fusions, "the executor fused nothing"
    text = provenance.annotate(trace, print_depth=2)
    for fusion in fusions:
        record = provenance.of(fusion)
        assert record.kind == Kind.FUSION and record.transforms == ("fusion",)
        assert all(m.kind != Kind.FUSION for m in record.members)  # flat: never a fusion of fusions
        assert len(set(record.members)) == len(record.members)  # deduplicated
        fused = [provenance.of(s) for s in fusion.subsymbols]
        assert all(r is not None for r in fused)  # every fused op keeps its own record
        assert _lines(record.members) == _lines(fused)  # members cover exactly the fused ops' lines
        for r in fused:  # each fused op is a member, as itself or as recomputed (rematerialization)
            assert r in record.members or any(m.kind == Kind.RECOMPUTE and m.derived_from is r
                                              for m in record.members)
        lines = sorted({line for _, _, line in _lines(fused)})
        assert f"lines models.py:{','.join(map(str, lines))}" in text
        if expect_backward:
            assert any(m.kind == Kind.BACKWARD for m in record.members), [
                (m.kind, m.lineage, sorted(_lines([m]))) for m in record.members]
    # each fused line is tagged with its own provenance
    fused_lines = [line for line in text.splitlines() if line.startswith("    # ") and " = " in line]
    assert fused_lines and all(line.endswith("]") for line in fused_lines)


@pytest.mark.slow  # inductor's C++ build
def test_torch_compile_fusion_on_cpu(traced):
    from thunder.executors.torch_compile import torch_compile_ex

    jm = thunder.jit(models.Net(n=8, depth=1), executors=[torch_compile_ex, *thunder.get_default_executors()])
    models.forward_backward(jm, torch.randn(3, 8))
    fw, bw = thunder.last_traces(jm)[-1], thunder.last_backward_traces(jm)[-1]
    _check_fusions(fw, expect_backward=False)
    _check_fusions(bw, expect_backward=True)
    # rematerialization: forward ops recomputed inside a backward fusion say so
    recomputed = [m for f in _fusions(bw) for m in provenance.of(f).members if m.kind == Kind.RECOMPUTE]
    for member in recomputed:
        assert member.derived_from is not None and member.lineage.endswith("recompute(op)")
    for trace in (fw, bw):
        cov = provenance.coverage(trace, deep=True)
        assert cov.missing == [] and cov.compute_with_user_source == cov.compute
        _check_fused_ops_logged(trace)


def _check_fused_ops_logged(trace) -> None:
    """The trace record's `fused` (schema 1.6): each fusion's subsymbols, in order, as printed,
    with their own records."""
    from provenance.log.session import SESSION
    from provenance.thunder.emit import fused_ops

    fusions = [(i, b) for i, b in enumerate(trace.bound_symbols) if b.sym.is_fusion]
    fused = fused_ops(trace, fusions)
    assert [(i, prov) for i, _, prov in fused] == [
        (i, SESSION.prov_id(provenance.of(s))) for i, b in fusions for s in b.subsymbols]
    subs = [s for _, b in fusions for s in b.subsymbols]
    assert all(not text.startswith("#") and s.sym.name in text for (_, text, _), s in zip(fused, subs))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="nvFuser needs a CUDA GPU")
def test_nvfuser_fusion_on_gpu(traced):
    from thunder.executors.nvfuserex import nvfuserex  # None where neither nvfuser nor nvfuser_direct imports

    if nvfuserex is None:
        pytest.skip("nvFuser does not import here")
    net = models.Net(n=8, depth=1).cuda()
    x = torch.randn(3, 8, device="cuda")
    jm = thunder.jit(net, executors=[nvfuserex, *thunder.get_default_executors()])
    torch.testing.assert_close(jm(x), net(x))  # the fusions compute what eager does
    models.forward_backward(jm, x)
    fw, bw = thunder.last_traces(jm)[-1], thunder.last_backward_traces(jm)[-1]
    assert any(f.sym.name.startswith("nvFusion") for f in _fusions(fw))
    _check_fusions(fw, expect_backward=False)
    _check_fusions(bw, expect_backward=True)


@pytest.mark.slow  # inductor's C++ build
def test_fault_in_rematerialization_hook_warns_once_and_results_stay_correct(traced, monkeypatch):
    import warnings

    from thunder.executors.torch_compile import torch_compile_ex

    from provenance.thunder import capture

    net = models.Net(n=8, depth=1)
    x = torch.randn(3, 8)
    expected = net(x)
    monkeypatch.setattr(capture.ACTIVE, "fault_injection", "rematerialize")
    jm = thunder.jit(net, executors=[torch_compile_ex, *thunder.get_default_executors()])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = jm(x)
    ours = [str(w.message) for w in caught if "thunder-provenance" in str(w.message)]
    assert len(ours) == 1 and "'rematerialize'" in ours[0]
    torch.testing.assert_close(out, expected)
