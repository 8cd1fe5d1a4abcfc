"""Never change what runs; never break the user's program; disabled means no hook at all."""

from __future__ import annotations

import gc
import re
import subprocess
import sys
import textwrap
import warnings

import models
import pytest
import thunder
import torch
from paths import SUPPORT
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import TraceCtx
from thunder.core.trace_interpreter import TraceSubstitutionProcessor

import provenance
from provenance.thunder import UnsupportedThunderVersion, capture, check_version, compat, hooks, state

_PRINT_CODE = textwrap.dedent("""
    import re, sys, torch, thunder
    sys.path.insert(0, {tests!r})
    import models
    if {enable}:
        import provenance
        provenance.enable()
    torch.manual_seed(0)
    model, x = models.nanogpt()
    jm = thunder.jit(model)
    models.forward_backward(jm, x)
    for trace in (thunder.last_traces(jm)[-1], thunder.last_backward_traces(jm)[-1]):
        code = trace.python()
        print("\\n".join(l for l in code.splitlines() if l.strip() and not l.strip().startswith("#")))
        print("=====")
    {extra}
""")


def _run(enable: bool, extra: str = "") -> str:
    code = _PRINT_CODE.format(tests=str(SUPPORT), enable=enable, extra=extra)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout



@pytest.mark.slow
def test_generated_code_is_identical_with_tracing_on_and_off():
    off = _run(False)
    on = _run(True, extra=textwrap.dedent("""
        import provenance
        for trace in (thunder.last_traces(jm)[-1], thunder.last_backward_traces(jm)[-1]):
            # drop comment lines and the "  # [tag]" annotate appends to bookkeeping statements
            print("\\n".join(re.sub(r"  # \\[[^\\]]*\\]$", "", l) for l in provenance.annotate(trace).splitlines()
                             if l.strip() and not l.strip().startswith("#")))
            print("=====")
    """))
    assert off.count("=====") == 2 and "def backward_fn" in off
    # the first two blocks are Thunder's own code; the next two are annotate() without comments
    on_blocks = on.split("=====\n")
    assert "=====\n".join(on_blocks[:2]) + "=====\n" == off
    assert on_blocks[2:4] == on_blocks[:2]  # annotate adds comments only


def _reference(net, x):
    out = net(x)
    out.sum().backward()
    return out.detach(), [p.grad.clone() for p in net.parameters()]


@pytest.mark.parametrize("hook", hooks.CORE_HOOKS)  # "distributed": dist_worker; "rematerialize": test_fusion
def test_fault_in_any_hook_warns_once_and_results_stay_correct(traced, hook, monkeypatch, tmp_path):
    net = models.Net(n=8, depth=1)
    x = torch.randn(3, 8)
    expected_out, expected_grads = _reference(net, x)
    net.zero_grad()

    monkeypatch.setattr(capture.ACTIVE, "fault_injection", hook)
    with warnings.catch_warnings(record=True) as caught, provenance.tracing(tmp_path):  # logging hooks too
        warnings.simplefilter("always")
        jm = thunder.jit(net)
        out = jm(x)
        out.sum().backward()
    ours = [w for w in caught if "thunder-provenance" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert f"hook {hook!r}" in str(ours[0].message)
    if hook != "jit":  # thunder.jit() itself is not a compile: only that step is skipped
        assert "disabled for this compile" in str(ours[0].message)
    torch.testing.assert_close(out, expected_out)
    for p, g in zip(net.parameters(), expected_grads):
        torch.testing.assert_close(p.grad, g)

    # the next compile traces again
    monkeypatch.setattr(capture.ACTIVE, "fault_injection", None)
    jm2 = thunder.jit(models.Net(n=8, depth=1))
    models.forward_backward(jm2, x)
    assert provenance.coverage(thunder.last_traces(jm2)[-1]).missing == []


_TARGETS = [
    (BoundSymbol, "__post_init__"), (BoundSymbol, "from_bsym"), (BoundSymbol, "python"),
    (TraceCtx, "set_current_source_location"),
    (TraceCtx, "set_provenance"), (TraceSubstitutionProcessor, "__call__"), (thunder, "thunder_general_jit"),
    (thunder, "CacheEntry"),
    (__import__("thunder.transforms.autodiff", fromlist=["_"]), "split_into_forward_and_backward"),
    (__import__("thunder.dynamo", fromlist=["_"]).ThunderCompiler, "__call__"),
    # Dynamo's graph-break log, wherever this torch keeps it (a function on 2.9, a method from 2.10)
    (lambda owner, attribute: (getattr(compat.api(), owner), attribute))(*compat.present_one("graph_break_log")),
]


def test_disable_removes_every_hook():
    before = {(owner, name): vars(owner)[name] for owner, name in _TARGETS}
    provenance.enable()
    assert provenance.enabled()
    assert all(vars(owner)[name] is not before[(owner, name)] for owner, name in _TARGETS)
    assert vars(BoundSymbol)[state.ATTR] is None  # the record's default, read by the hooks
    provenance.disable()
    assert not provenance.enabled()
    assert all(vars(owner)[name] is before[(owner, name)] for owner, name in _TARGETS)
    assert state.ATTR not in vars(BoundSymbol)
    jf = thunder.jit(lambda x: x * 2)
    jf(torch.ones(2))
    assert all(provenance.of(b) is None for b in thunder.last_traces(jf)[-1].bound_symbols)


def _cyclic_garbage_of_a_compile(capture: bool) -> int:
    """Objects only the garbage collector frees (reference cycles) left by one compile + fwd/bwd."""
    provenance.enable() if capture else provenance.disable()
    try:
        torch.manual_seed(0)
        model, x = models.Net(n=8, depth=2), torch.randn(3, 8)
        gc.collect()
        gc.disable()
        try:
            models.forward_backward(thunder.jit(model), x)
            return gc.collect()
        finally:
            gc.enable()
    finally:
        provenance.disable()


def test_capture_leaves_no_reference_cycles_behind():
    """What Thunder drops during a compile (each pass's intermediate traces) is freed by reference
    counting with capture as without: a cycle through a hook (e.g. a processor and its wrappers)
    would keep thousands of symbols for the garbage collector, slowing every compile."""
    _cyclic_garbage_of_a_compile(True), _cyclic_garbage_of_a_compile(False)  # warm-up: imports, caches
    off, on = _cyclic_garbage_of_a_compile(False), _cyclic_garbage_of_a_compile(True)
    assert off > 0 and on <= off + 50, (on, off)


def test_tracing_context_restores_previous_state():
    with provenance.tracing():
        assert provenance.enabled()
        with provenance.tracing():
            pass
        assert provenance.enabled()  # the inner block does not disable the outer one
    assert not provenance.enabled()


def test_version_gate():
    assert check_version("0.2.6") == "0.2.6"
    assert check_version("0.2.6.post1")
    assert check_version("0.2.7.dev0+g1e22aac") == "0.2.7.dev0+g1e22aac"  # Thunder's head, as tested
    for bad in ("0.2.7", "0.3.0", "0.2.60", "0.2.7.dev3", "0.2.6.1"):
        with pytest.raises(UnsupportedThunderVersion, match=re.escape(f"but {bad} is installed")):
            check_version(bad)


def test_disable_in_another_thread_while_compiling_never_raises_or_warns_in_the_users_thread():
    """Another thread turns tracing on and off as fast as it can while this one compiles: every
    compile finishes (traced or not) with the right result, and nothing of ours reaches the user."""
    import threading

    errors, done = [], threading.Event()

    def compiles() -> None:
        try:
            for i in range(60):
                f = eval(f"lambda x: torch.sin(x) * {i} + torch.cos(x)", {"torch": torch})  # a new compile each
                torch.testing.assert_close(thunder.jit(f)(torch.ones(3)), torch.sin(torch.ones(3)) * i + torch.cos(
                    torch.ones(3)))
        except BaseException as exc:  # what the user's thread would see
            errors.append(repr(exc))
        finally:
            done.set()

    worker = threading.Thread(target=compiles)
    toggles = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        worker.start()
        try:
            while not done.is_set():
                provenance.enable()
                provenance.disable()
                toggles += 1
        finally:
            worker.join()
    assert errors == [] and toggles > 30
    assert [str(w.message) for w in caught if "thunder-provenance" in str(w.message)] == []
