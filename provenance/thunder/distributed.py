"""Hooks for the ops distributed transforms insert, and for rematerialization inside fusions.

- Tensor parallel: `ComputationTraceTransformVisitorForTensorParallel.__call__` processes one
  layer op; its pre/post-processing (`PrePostProcessInterface` subclasses) inserts
  `synchronize_tensor_parallel_input/output`, later lowered to all_gather/wait/chunk/cat or
  all_reduce/wait/bias-add. They get the layer op's record with role `column_parallel.pre`,
  `row_parallel.post`, ... and the transform in their lineage.
- FSDP/DDP: `transform_traces_pre_prologue` inserts a `synchronize` per parameter. Each gets
  the record of the op that consumes the parameter (the layer it serves) with role
  `fsdp.unshard` / `ddp.sync_param`; autograd turns their backward into `fsdp.reduce_scatter` /
  `ddp.grad_all_reduce` (see passes.derived).
- Rematerialization moves producer ops into a consumer fusion: the fusion's members say
  `recompute(...)` for them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from provenance.core.caches import CACHES
from provenance.core.record import BSYM_ATTR as ATTR
from provenance.core.record import Kind, Provenance, of
from provenance.thunder import passes
from provenance.thunder.compat import api
from provenance.thunder.patching import Patcher
from provenance.thunder.state import Processing, check_fault, current_compile, fail, processing

T = api()  # this Thunder's objects (compat.py)
Proxy, TensorParallelLayerType = T.Proxy, T.TensorParallelLayerType
# The tensor-parallel pre/post-processors, one per layer type.
PRE_POST_PROCESSORS = (T.ColumnParallelLinear, T.ColumnParallelEmbedding, T.RowParallelLinear, T.RowParallelEmbedding)

_TP_TRANSFORM = {
    TensorParallelLayerType.COLUMN_PARALLEL_LINEAR: "column_parallel",
    TensorParallelLayerType.COLUMN_PARALLEL_EMBED: "column_parallel",
    TensorParallelLayerType.ROW_PARALLEL_LINEAR: "row_parallel",
    TensorParallelLayerType.ROW_PARALLEL_EMBED: "row_parallel",
}

_roles = CACHES.memo("distributed.roles", 1 << 16)  # (record, transform, role) -> record


def with_role(record: Provenance | None, transform: str, role: str) -> Provenance:
    """`record` as made by a distributed transform in a role (cached)."""
    key = (record, transform, role)
    found = _roles.get(key)
    if found is None:
        base = record or Provenance(kind=Kind.PASS)
        found = _roles.put(key, base.derive(role=role, transforms=base.transforms + (transform,)))
    return found


def _visitor_call(orig: Callable) -> Callable:
    """The layer op being rewritten is the context of everything the visitor creates."""

    def __call__(self: Any, bsym: Any) -> Any:
        token = None
        try:
            check_fault("distributed")
            if not current_compile().disabled:
                token = processing.set(Processing(bsym.__dict__.get(ATTR)))
        except Exception as exc:
            fail("distributed", exc)
        try:
            return orig(self, bsym)
        finally:
            if token is not None:
                processing.reset(token)

    return __call__


def _pre_post(orig: Callable, stage: str) -> Callable:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        token = None
        try:
            check_fault("distributed")
            proc = processing.get()
            if proc is not None and not current_compile().disabled:
                transform = _TP_TRANSFORM.get(type(self).layer_type, "tensor_parallel")
                record = with_role(proc.record, transform, f"{transform}.{stage}")
                token = processing.set(Processing(record))
        except Exception as exc:
            fail("distributed", exc)
        try:
            return orig(self, *args, **kwargs)
        finally:
            if token is not None:
                processing.reset(token)

    return method


def _data_parallel(orig: Callable, transform: str, role: str) -> Callable:
    """FSDP/DDP: each inserted op takes the record of the op consuming its output."""

    def transform_traces_pre_prologue(self: Any, *args: Any, **kwargs: Any) -> Any:
        proc = token = None
        try:
            check_fault("distributed")
            if not current_compile().disabled:
                proc = Processing(None, created=[])
                token = processing.set(proc)
        except Exception as exc:
            fail("distributed", exc)
        try:
            result = orig(self, *args, **kwargs)
        finally:
            if token is not None:
                processing.reset(token)
        try:
            if proc is not None and proc.created and not current_compile().disabled:
                _attribute_to_consumers(result[1].bound_symbols, proc.created, transform, role)
        except Exception as exc:
            fail("distributed", exc)
        return result

    return transform_traces_pre_prologue


def _attribute_to_consumers(bsyms: list, created: list, transform: str, role: str) -> None:
    # What the transform bound itself (copies of the user's ops kept their records; the pass
    # fix-up has given the new ones a bare `pass` record).
    inserted = {id(b) for b in created if not passes.is_bookkeeping(b.sym)
                and (b.__dict__.get(ATTR) is None or b.__dict__[ATTR].kind == Kind.PASS)}
    consumers: dict[str, Provenance] = {}
    for bsym in bsyms:
        record = bsym.__dict__.get(ATTR)
        if id(bsym) in inserted or record is None or record.kind == Kind.BOOKKEEPING:
            continue
        for arg in bsym.flat_args:
            if isinstance(arg, Proxy):
                consumers.setdefault(arg.name, record)
    # Walk backwards so a chain of inserted ops (sync -> unpad slice) reaches the real consumer.
    for bsym in reversed(bsyms):
        if id(bsym) not in inserted:
            continue
        served = next((consumers[o.name] for o in bsym.flat_proxy_outs if o.name in consumers), None)
        passes.stamp(bsym, with_role(served, transform, role))
        for arg in bsym.flat_args:
            if isinstance(arg, Proxy) and served is not None:
                consumers.setdefault(arg.name, served)


def _rematerialize_for_consumer(orig: Callable) -> Callable:
    def apply_rematerialization_for_consumer(producer: Any, consumer: Any, *args: Any, **kwargs: Any) -> Any:
        new = orig(producer, consumer, *args, **kwargs)
        try:
            check_fault("rematerialize")
            state = current_compile()
            if new is not consumer and not state.disabled:
                moved = {id(b) for b in producer.subsymbols}
                record = passes.fusion_of(
                    passes.derived(of(b), "recompute") if id(b) in moved else of(b)
                    for b in new.subsymbols
                )
                new.__dict__[ATTR] = record
                state.remember_fusion(new.subsymbols, record)  # the fusion is rebuilt later
        except Exception as exc:
            fail("rematerialize", exc)
        return new

    return apply_rematerialization_for_consumer


def install(patcher: Patcher) -> None:
    patcher.wrap(T.TensorParallelVisitor, "__call__", _visitor_call)
    for cls in PRE_POST_PROCESSORS:
        patcher.wrap(cls, "preprocess", lambda f: _pre_post(f, "pre"))
        patcher.wrap(cls, "postprocess", lambda f: _pre_post(f, "post"))
    patcher.wrap(T.FSDPTransform, "transform_traces_pre_prologue", lambda f: _data_parallel(f, "fsdp", "fsdp.unshard"))
    patcher.wrap(T.DDPTransform, "transform_traces_pre_prologue", lambda f: _data_parallel(f, "ddp", "ddp.sync_param"))
    patcher.wrap(T.rematerialization, "apply_rematerialization_for_consumer", _rematerialize_for_consumer)
