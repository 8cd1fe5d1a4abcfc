"""Where a compile's time goes: every step Thunder 0.2.6 takes to compile, timed with its real
start and end.

`thunder/__init__.py` compiles in two functions: `acquire_initial_trace` (the interpreter:
`thunder_general_jit`, timed by the compile hook) and `apply_transforms_and_build_cache_entry`,
a straight sequence of calls to functions it looks up as globals of the `thunder` module or as
attributes of Thunder's modules. Each of those is wrapped here (reversibly, by the Patcher) with a
timer that records a phase on the compile in progress; called outside a compile, the wrapper only
forwards. Calls nested inside a timed phase (executor claiming inside `transform_for_execution`,
a fusion pass, rematerialization, the torch.compile executor's setup, generated code for its
regions) are recorded one level deeper. Transforms (`thunder.jit(transforms=...)`) are timed by
wrapping the class that defines their two compile-time methods, the first time a compile uses
them; the traces a transform returns are tagged with its name (Thunder gives them no label).

The torch.compile executor compiles each fusion lazily, when the generated code first calls it
(after Thunder's compile has ended): dynamo's compile-start/-end callbacks time that, and the
fusion is found on the Python stack (`executor_compile` events). Nothing here runs on a cache hit.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
import time
import types
from collections.abc import Callable
from typing import Any

from provenance.log.session import SESSION
from provenance.thunder import capture, emit
from provenance.thunder.capture import Capture
from provenance.thunder.compat import api, loaded
from provenance.thunder.state import MADE_BY, CompileState, check_fault, current_compile, fail

T = api()  # this Thunder's objects (compat.py)
thunder, autodiff, TraceCtx, TraceTag = T.thunder, T.autodiff, T.TraceCtx, T.TraceTag

TRANSFORM_METHODS = ("transform_traces_pre_prologue", "transform_trace_post_optimization")

_lock = threading.Lock()


def _active() -> CompileState | None:
    state = current_compile()
    return state if state.id and not state.disabled else None


def timed(orig: Callable, name: str, detail: Callable[..., str | None] | None = None) -> Callable:
    """`orig`, recording a phase `name` on the compile in progress (`detail(*args, **kwargs)`
    names what it works on)."""

    @functools.wraps(orig)
    def phase(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # pytest hides this frame in a failure's traceback
        state = _active()
        if state is None:
            return orig(*args, **kwargs)
        log = state.phases
        try:
            check_fault("phases")
            index = log.begin(name, detail(*args, **kwargs) if detail is not None else None)
        except Exception as exc:
            fail("phases", exc)
            return orig(*args, **kwargs)
        try:
            return orig(*args, **kwargs)
        finally:
            log.end(index)

    return phase


def _trace_list(trace: Any, *_: Any, **__: Any) -> str | None:
    if isinstance(trace, TraceCtx):
        return "backward" if TraceTag.BACKWARD in trace.tags else "computation"
    return None


def _executors_for(trace: Any, executors_list: Any = (), **_: Any) -> str:
    names = [getattr(e, "name", "?") for e in executors_list or ()]
    return "prologue" if names == ["python"] else "computation"


def _codegen(orig: Callable) -> Callable:
    """TraceCtx.python_callable: the phase is named after the function it generates."""

    def python_callable(self: TraceCtx, **kwargs: Any) -> Callable:
        state = _active()
        if state is None:
            return orig(self, **kwargs)
        log = state.phases
        index = log.begin("codegen")
        fn = None
        try:
            fn = orig(self, **kwargs)
            return fn
        finally:
            log.end(index, _generated(fn))

    return python_callable


def _generated(fn: Any) -> str | None:
    return _generated_name(getattr(fn, "__name__", None))


def _generated_name(name: str | None) -> str | None:
    """What a generated function is, from its name."""
    return {"backward_fn": "backward", "to_be_compiled": "fusion region"}.get(name, name) if name else None


# -- transforms --------------------------------------------------------------------------------------
def pass_name_of(transform: Any) -> str:
    """`TransformForColumnWiseParallel` -> `transform_for_column_wise_parallel`."""
    name = type(transform).__name__
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _transform_method(orig: Callable, which: str) -> Callable:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        state = _active()
        if state is None:
            return orig(self, *args, **kwargs)
        log = state.phases
        index = log.begin("transform", f"{type(self).__name__}.{which}")
        try:
            result = orig(self, *args, **kwargs)
        finally:
            log.end(index)
        try:
            name = pass_name_of(self)
            given = {id(a) for a in args}
            for trace in result if isinstance(result, tuple) else (result,):
                if isinstance(trace, TraceCtx) and id(trace) not in given:
                    trace.__dict__.setdefault(MADE_BY, name)
        except Exception as exc:
            fail("phases", exc)
        return result

    return method


def watch_transforms(transforms: Any) -> None:
    """Time the compile-time methods of these transforms' classes from now on (once per class)."""
    running = capture.ACTIVE
    if running is None:
        return
    patched = running.patched_transforms
    for transform in transforms or ():
        for which in TRANSFORM_METHODS:
            owner = next((k for k in type(transform).__mro__ if which in vars(k)), None)
            # a plain function only: a staticmethod or classmethod is not called with the instance
            if owner is None or (owner, which) in patched or not isinstance(vars(owner)[which], types.FunctionType):
                continue
            with _lock:
                if (owner, which) not in patched:
                    patched.add((owner, which))
                    running.patcher.wrap(owner, which,
                                         lambda f, w=which: _transform_method(f, w.removeprefix("transform_")))


# -- the torch.compile executor's own (lazy) compile ----------------------------------------------------
# Capture.fusions: compiled function (the closure of Thunder's `compiled_func_wrapper`) -> (compile
# id, fusion, executor); Capture.fusion_wrapper_code: the code object of that wrapper, once seen.
_pending = threading.local()  # per thread: the executor compile dynamo is running


def _closure_value(fn: Any, name: str) -> Any:
    code = getattr(fn, "__code__", None)
    if code is None or fn.__closure__ is None or name not in code.co_freevars:
        return None
    return fn.__closure__[code.co_freevars.index(name)].cell_contents


def _fuse(orig: Callable, running: Capture) -> Callable:
    """TorchCompileExecutor.fuse: remember which compile each fusion's compiled function belongs to."""

    def fuse(self: Any, region: Any, fusion_counter: int) -> Any:
        bsym = orig(self, region, fusion_counter)
        try:
            check_fault("executor_compile")
            state = _active()
            if state is not None and (SESSION.active or running.profile):  # logged, or excludes profiled calls
                wrapper = (getattr(bsym, T.names["fusion_call_ctx"]) or {}).get(bsym.sym.name)
                inner = _closure_value(wrapper, T.names["compiled_func"])
                if inner is not None:
                    if not running.fusion_wrapper_code:
                        running.fusion_wrapper_code.append(wrapper.__code__)
                    running.fusions[inner] = (state.id, bsym.sym.name, str(self.name))
        except Exception as exc:
            fail("executor_compile", exc)
        return bsym

    return fuse


def _dynamo_started(_args: Any) -> None:
    try:
        running = capture.ACTIVE
        if running is None or not running.fusion_wrapper_code:
            return
        if not SESSION.active and getattr(running.call_compiles, "value", None) is None:
            return  # neither a log nor a profiled call to tell
        code = running.fusion_wrapper_code[0]
        frame = sys._getframe(1)
        found = trace = None
        while frame is not None:
            if found is None and frame.f_code is code:
                entry = running.fusions.get(frame.f_locals.get(T.names["compiled_func"]))
                if entry is None:
                    return
                found = entry
            elif found is not None and frame.f_code.co_filename.startswith(T.names["generated_file"]):
                trace = _generated_name(frame.f_code.co_name)
                break
            frame = frame.f_back
        if found is not None:
            _pending.value = (found, trace, time.time_ns())
    except Exception:  # a callback of torch's: never raise into it
        _pending.value = None


def _dynamo_ended(_args: Any) -> None:
    pending = getattr(_pending, "value", None)
    _pending.value = None
    if pending is None:
        return
    try:
        (compile_id, fusion, executor), trace, start = pending
        end = time.time_ns()
        running = capture.ACTIVE
        during = getattr(running.call_compiles, "value", None) if running is not None else None
        if during is not None:  # a profiled call is running: it is not a measured run (profiling.py)
            during.append((fusion, executor, end - start))
        if SESSION.active:
            emit.executor_compiled(compile_id, executor, fusion, trace, start, end)
    except Exception:
        pass


def install(running: Capture) -> None:
    patcher = running.patcher
    thunder_names = {
        "wrap_return_value_together_with_arguments": ("wrap_return_value", None),
        "remove_context_manager_prims_from_trace": ("remove_context_manager_prims", None),
        "insert_alias_updates": ("update_aliases", None),
        "transform_for_execution": ("transform_for_execution", _executors_for),
        "transform_to_torch_types": ("transform_to_torch_types", None),
        "dce": ("dce", None),
        "unwrap_return_value": ("unwrap_return_value", None),
    }
    for attr, (name, detail) in thunder_names.items():
        patcher.wrap(thunder, attr, lambda f, n=name, d=detail: timed(f, n, d))
    patcher.wrap(autodiff, "grad_transform_on_trace", lambda f: timed(f, "grad"))
    patcher.wrap(autodiff, "split_into_forward_and_backward", lambda f: timed(f, "split_forward_backward"))
    patcher.wrap(T.executor_passes, "_transform_for_operator_executor_execution",
                 lambda f: timed(f, "executor_claiming"))
    patcher.wrap(T.executor_passes, "del_last_used", lambda f: timed(f, "del_last_used", _trace_list))
    patcher.wrap(T.transform_common, "_inplace_copy_sanity_check", lambda f: timed(f, "inplace_copy_check"))
    patcher.wrap(TraceCtx, "python_callable", _codegen)
    if T.distributed_utils is not None:  # None: torch without distributed
        patcher.wrap(T.distributed_utils, "maybe_sort_waits", lambda f: timed(f, "sort_waits"))
    _install_fusion_executors(running)


def _install_fusion_executors(running: Capture) -> None:
    torch_compile, patcher = T.torch_compile, running.patcher
    patcher.wrap(T.TorchCompileExecutor, "fusion_pass",
                 lambda f: timed(f, "fusion", lambda self, *_, **__: str(self.name)))
    patcher.wrap(T.TorchCompileExecutor, "fuse", lambda f: _fuse(f, running))
    patcher.wrap(torch_compile, "make_compiled", lambda f: timed(f, "torch_compile_setup"))
    patcher.wrap(torch_compile, "rematerialize", lambda f: timed(f, "rematerialization"))
    patcher.wrap(torch_compile, "update_fusion_call_ctx", lambda f: timed(f, "update_fusion_call_ctx"))
    nvfuser = loaded("nvfuser")  # Thunder imports it only where nvFuser is
    if nvfuser is not None:
        patcher.wrap(loaded("nvFuserExecutor"), "fusion_pass",
                     lambda f: timed(f, "fusion", lambda self, *_, **__: str(self.name)))
        patcher.wrap(nvfuser, "rematerialize", lambda f: timed(f, "rematerialization"))
    running.listen_to_dynamo(T.dynamo_callbacks, _dynamo_started, _dynamo_ended)
