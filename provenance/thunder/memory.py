"""The static memory timeline of a compile's final execution traces, read off Thunder's traces at
the end of the compile (provenance.allocation.static_memory holds the data; docs/memory.md the rules).

Thunder's own rules (thunder/examine/memory_calculation.py) decide what allocates: the symbols
it skips (return, unpacking), the ones it treats as aliases of their first input (reshape,
expand, permute, ... `thunder_alias_operator_list`), `del`; every other symbol allocates its
tensor outputs (numel × dtype size). Two differences, both toward what the program does:
- The backward's saved tensors are freed at their `del` (Thunder's backward empties the lists
  that hold them; `get_alloc_memory` keeps every argument of a trace to its end); the forward's
  inputs are held by the caller, counted apart, as there.
- A symbol whose output is a tensor already live (an op returning its own input) allocates
  nothing here (`get_alloc_memory` counts it again).
Sizes are read as ints: nothing here keeps a proxy, trace or tensor after the compile.

Rematerialization (inside the fusion executors' fusion pass, on the joint forward-backward trace):
the tensors the forward would save are worked out before and after it with the rule Thunder's
`split_into_forward_and_backward` splits by, and the difference is kept on the compile's state.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from provenance.allocation.static_memory import (
    BACKWARD,
    FORWARD,
    Block,
    CompileMemory,
    MemOp,
    RematChange,
    Saved,
    TraceMemory,
    register,
)
from provenance.core.record import BSYM_ATTR as ATTR
from provenance.core.record import Provenance
from provenance.thunder.compat import api, loaded
from provenance.thunder.state import check_fault, current_compile, fail

T = api()
_MC = T.memory_calculation
_SKIP = frozenset(_MC.memory_calculate_skip_list)
_TENSORS = (T.TensorProxy, _MC.FutureTensorProxy)
PrimIDs = T.PrimIDs


# Ops PyTorch always runs as views that Thunder's alias list misses: their outputs share their
# input's storage. The CUDA allocator's readings showed it (a slice kept its base alive past its
# `del`; provenance.allocation.measured_memory). Thunder's contiguous and reshape stay views, as Thunder has
# them, though they copy a non-contiguous input: a proxy has no strides to tell.
VIEWS = frozenset({"view", "view_as", "torch_slice_prim_impl", "narrow", "select", "t", "unflatten", "unbind",
                   "chunk", "tensor_split", "diagonal", "as_strided", "movedim", "expand_as", "unfold"})


# A fusion's members are prims, whose ids are not the names Thunder's alias list holds
# (prims.reshape's is PrimIDs.RESHAPE): inside a fusion the alias ops are known by name.
_FUSED_VIEWS = frozenset(_MC.thunder_alias_operator_list) | VIEWS


def _impl(bsym: Any) -> Callable | None:
    if bsym.sym.id in VIEWS or bsym.sym.name in VIEWS:
        return _MC.track_alias_op_memory
    return _MC.memory_calculate_impls.get(bsym.sym.id)


class SymbolicSize(Exception):
    """A tensor whose size is a symbol (`cache="symbolic values"`): its bytes are not known once
    tracing has ended, so neither is the compile's memory timeline."""


def _nbytes(proxy: Any) -> int:
    """numel × dtype size. `proxy.numel` goes through Thunder's language context on every read
    (~100 µs, and a class made per read); the proxy's own `_numel` (an int for a static shape) is
    what it returns. Read as an attribute: `proxy.__dict__` would materialize a dict per proxy."""
    numel = getattr(proxy, "_numel", None)
    if type(numel) is not int:
        try:
            numel = int(proxy.numel)
        except NotImplementedError as exc:  # Thunder: a symbol "outside of a tracing context"
            raise SymbolicSize(f"{getattr(proxy, 'name', '?')} has a symbolic size") from exc
    return numel * int(proxy.dtype.bytes)


def _record(bsym: Any) -> Provenance | None:
    return bsym.__dict__.get(ATTR)


def _fused_ops(bsym: Any) -> Iterator[Any]:
    """A fusion's ops in order, the ops of a fusion inside it in its place."""
    for sub in bsym.subsymbols:
        if sub.sym.is_fusion and sub.subsymbols:
            yield from _fused_ops(sub)
        else:
            yield sub


def _producers(bsym: Any) -> dict[str, Provenance | None]:
    """A fusion's outputs by name -> the record of the member that produced each."""
    out: dict[str, Provenance | None] = {}
    for sub in _fused_ops(bsym):
        record = _record(sub)
        if record is not None:
            for o in sub.flat_proxy_outs:
                out[o.name] = record
    return out


def _fusion_views(bsym: Any) -> dict[str, str]:
    """A fusion's outputs its members make as views (Thunder's alias ops and VIEWS, followed through
    chains) -> the name they view. nvFuser returns such an output as a view of its base, another
    output or an input, allocating nothing for it (the CUDA allocator showed it:
    bench/gpu_check.py's memory step)."""
    base_of: dict[str, str] = {}
    alias = _MC.track_alias_op_memory
    for sub in _fused_ops(bsym):
        args = sub.flat_proxy_args
        if args and (_impl(sub) is alias or sub.sym.name in _FUSED_VIEWS):
            base = base_of.get(args[0].name, args[0].name)
            for out in sub.flat_proxy_outs:
                base_of[out.name] = base
    outs = {o.name for o in bsym.flat_proxy_outs}
    return {name: base_of[name] for name in outs if name in base_of}


class _Storage:
    __slots__ = ("name", "nbytes", "record", "position", "freed", "refs", "held")

    def __init__(self, name: str, nbytes: int, record: Provenance | None, position: int, held: bool) -> None:
        self.name, self.nbytes, self.record, self.position = name, nbytes, record, position
        self.freed: int | None = None
        self.refs = 0
        self.held = held  # an input the caller holds: never freed, counted apart


def _flat_tensors(value: Any) -> list:
    from thunder.core.pytree import tree_iter

    return [x for x in tree_iter(value) if isinstance(x, _TENSORS)]


def timeline(trace: Any, name: str, saved_in: dict[str, tuple[int, int, Provenance | None]] | None = None,
             held: frozenset[str] = frozenset()) -> tuple[TraceMemory, dict[str, _Storage]]:
    """The trace's timeline. The backward's: `saved_in`, saved tensor name -> (storage key, bytes,
    record) of the activations the forward saved, and its cotangents start live and are freed at
    their del (Thunder's backward empties the lists holding them); `held`, the forward's inputs it
    saved, are the caller's (counted apart)."""
    storages: dict[str, _Storage] = {}  # tensor name -> its storage (aliases share one)
    by_key: dict[int, _Storage] = {}
    for arg in _flat_tensors((trace.args, trace.kwargs)):
        if arg.name in storages:
            continue
        found = saved_in.get(arg.name) if saved_in is not None else None
        if found is None and saved_in is not None and arg.name not in held:  # a cotangent: freed at its del
            found = (id(arg), _nbytes(arg), None)
        if found is not None:
            key, nbytes, record = found
            storage = by_key.get(key)
            if storage is None:
                storage = by_key[key] = _Storage(arg.name, nbytes, record, -1, held=False)
        else:
            storage = _Storage(arg.name, _nbytes(arg), None, -1, held=True)
        storage.refs += 1
        storages[arg.name] = storage
    inputs = sum(s.nbytes for s in {id(s): s for s in storages.values() if s.held}.values())
    live = start = sum(s.nbytes for s in {id(s): s for s in storages.values() if not s.held}.values())
    ops: list[MemOp] = []
    blocks: list[_Storage] = [s for s in {id(s): s for s in storages.values() if not s.held}.values()]
    alias, delete = _MC.track_alias_op_memory, _MC.del_op_memory
    for position, bsym in enumerate(trace.bound_symbols):
        if bsym.sym.id in _SKIP:
            continue
        impl = _impl(bsym)
        allocated = freed = 0
        if impl is alias:
            args = bsym.flat_proxy_args
            base = storages.get(args[0].name) if args else None
            for out in bsym.flat_proxy_outs:
                if base is not None and isinstance(out, _TENSORS):
                    base.refs += 1
                    storages[out.name] = base
        elif impl is delete:
            for a in bsym.flat_proxy_args:
                storage = storages.pop(a.name, None) if isinstance(a, _TENSORS) else None
                if storage is None:
                    continue
                storage.refs -= 1
                if storage.refs == 0 and not storage.held:
                    storage.freed = position
                    freed += storage.nbytes
        elif impl is None:  # Thunder's default: its tensor outputs allocate
            producers = _producers(bsym) if bsym.sym.is_fusion else None
            views = _fusion_views(bsym) if bsym.sym.is_fusion else {}
            outs = [out for out in bsym.flat_proxy_outs if isinstance(out, _TENSORS)]
            for out in sorted(outs, key=lambda o: o.name in views):  # a view's base first
                if out.name in storages:
                    continue
                base = storages.get(views.get(out.name, ""))
                if base is not None:  # a view of an input or of another output: no allocation
                    base.refs += 1
                    storages[out.name] = base
                    continue
                record = producers.get(out.name) or _record(bsym) if producers is not None else _record(bsym)
                storage = _Storage(out.name, _nbytes(out), record, position, held=False)
                storage.refs = 1
                storages[out.name] = storage
                blocks.append(storage)
                allocated += storage.nbytes
        # clear_mutable_collection: frees nothing itself (the del of each tensor does)
        live += allocated - freed
        ops.append(MemOp(position, bsym.sym.name, _record(bsym), allocated, freed, live))
    memory = TraceMemory(name, tuple(ops), tuple(Block(s.name, s.nbytes, s.record, s.position, s.freed)
                                              for s in blocks), inputs, start)
    return memory, storages


def _saved_of(forward: Any, storages: dict[str, _Storage]) -> tuple[list[Saved], dict, frozenset[str]]:
    """What the forward returns for the backward: one `Saved` per distinct storage, and the
    backward's view of them (name -> storage key, bytes, record) for the activations."""
    ret = forward.bound_symbols[-1] if forward.bound_symbols else None
    if ret is None or ret.sym.id != PrimIDs.RETURN or len(ret.args) < 2:
        return [], {}, frozenset()
    tensors = _flat_tensors(ret.args[1][0] if isinstance(ret.args[1], (tuple, list)) and ret.args[1] else ())
    saved: list[Saved] = []
    seen: set[int] = set()
    into_backward: dict[str, tuple[int, int, Provenance | None]] = {}
    for t in tensors:
        storage = storages.get(t.name)
        if storage is None:  # not known to the timeline (not a tensor it saw): its own size
            saved.append(Saved(t.name, _nbytes(t), None, True))
            continue
        if not storage.held:
            into_backward[t.name] = (id(storage), storage.nbytes, storage.record)
        if id(storage) in seen:
            continue
        seen.add(id(storage))
        saved.append(Saved(storage.name, storage.nbytes, storage.record, storage.held))
    held = frozenset(t.name for t in tensors if t.name not in into_backward)
    return saved, into_backward, held


def compile_memory(compile_id: int, fn_name: str, entry: Any, remat: tuple = ()) -> CompileMemory | None:
    """The memory of a compile's final traces (`thunder.last_traces(jfn)[-1]`,
    `thunder.last_backward_traces(jfn)[-1]`)."""
    forward = entry.computation_traces[-1] if entry.computation_traces else None
    if forward is None:
        return None
    backward = entry.backward_traces[-1] if entry.backward_traces else None
    fwd, storages = timeline(forward, FORWARD)
    fwd = _listed(fwd, "computation", entry.computation_traces, forward)
    saved, into_backward, held = _saved_of(forward, storages) if backward is not None else ([], {}, frozenset())
    bwd = None
    if backward is not None:
        bwd, _ = timeline(backward, BACKWARD, into_backward, held)
        bwd = _listed(bwd, "backward", entry.backward_traces, backward)
    return CompileMemory(compile_id, fn_name, fwd, bwd, tuple(saved), tuple(remat))


def _listed(memory: TraceMemory, list_name: str, traces: Any, trace: Any) -> TraceMemory:
    index = next((i for i, t in enumerate(traces) if t is trace), None)
    return TraceMemory(memory.name, memory.ops, memory.blocks, memory.inputs, memory.start, list_name, index)


# -- rematerialization ------------------------------------------------------------------------

def saved_names(joint: Any) -> dict[str, tuple[int, Provenance | None]] | None:
    """The tensors `split_into_forward_and_backward` would save for the backward from this joint
    trace (its rule, on names): name -> (bytes, record of its producer). None: not a joint trace."""
    bsyms = joint.bound_symbols
    ret = bsyms[-1] if bsyms else None
    if ret is None or ret.sym.id != PrimIDs.RETURN or not ret.args or not isinstance(ret.args[0], dict):
        return None
    outs = ret.args[0]
    if "fw_flat_out" not in outs:
        return None
    from thunder.core.pytree import tree_iter

    forward = {o.name for o in tree_iter(outs["fw_flat_out"]) if isinstance(o, T.Proxy)}
    forward.update(a.name for a in outs.get("flat_args", ()) if isinstance(a, T.Proxy))
    producer: dict[str, Provenance | None] = {}
    backward: list = []
    for bsym in reversed(bsyms[:-1]):
        if bsym.sym.id == PrimIDs.GET_GRAD:
            continue
        arg_names = {a.name for a in bsym.flat_proxy_args}
        out_names = {o.name for o in bsym.flat_proxy_outs}
        if out_names & forward or bsym.sym.id == PrimIDs.UNPACK_TRIVIAL:
            forward |= arg_names
            forward |= out_names - arg_names
            members = _producers(bsym) if bsym.sym.is_fusion else {}
            for name in out_names - arg_names:
                producer[name] = members.get(name) or _record(bsym)
            continue
        if (bsym.sym.id == PrimIDs.COPY_ or bsym.sym.name == "copy_") and len(bsym.args) > 1 \
                and getattr(bsym.args[1], "name", None) in forward:
            forward |= arg_names
            continue
        backward.append(bsym)
    found: dict[str, tuple[int, Provenance | None]] = {}
    for bsym in reversed(backward):
        for a in bsym.flat_proxy_args:
            if a.name in forward and isinstance(a, T.TensorProxy) and a.name not in found:
                found[a.name] = (_nbytes(a), producer.get(a.name))
    return found


def remat_changes(before: Any, after: Any) -> list[RematChange]:
    was, now = saved_names(before), saved_names(after)
    if was is None or now is None:
        return []
    changes = [RematChange(n, b, r, "removed") for n, (b, r) in was.items() if n not in now]
    changes += [RematChange(n, b, r, "added") for n, (b, r) in now.items() if n not in was]
    return changes


def _rematerialize(orig: Callable) -> Callable:
    def rematerialize(trace: Any, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        result = orig(trace, *args, **kwargs)
        try:
            check_fault("memory")
            state = current_compile()
            if state.id and not state.disabled and state.memory_unknown is None:
                began = time.perf_counter_ns()
                try:
                    state.remat.extend(remat_changes(trace, result))
                except SymbolicSize as exc:
                    _unknown(state, exc)
                state.memory_ns += time.perf_counter_ns() - began
        except Exception as exc:
            fail("memory", exc)
        return result

    return rematerialize


def install(patcher: Any) -> None:
    patcher.wrap(T.torch_compile, "rematerialize", _rematerialize)
    nvfuser = loaded("nvfuser")
    if nvfuser is not None:
        patcher.wrap(nvfuser, "rematerialize", _rematerialize)


def _unknown(state: Any, exc: SymbolicSize) -> None:
    """No timeline for this compile: its sizes are symbols (the rest is captured); compile_end says why."""
    state.remat = []
    state.memory_unknown = f"its sizes are symbols ({exc})"


def captured(state: Any, entry: Any, compile_stats: Any) -> None:
    """At the end of a compile (its traces final): its memory timeline, kept for
    `provenance.memory()` (the process keeps the last MAX_COMPILES) and, with a log, written at
    the compile's end (emit.py). An internal error stops capture for this compile, as in every hook."""
    if not state.id or state.disabled or state.memory_unknown is not None:
        return
    began = time.perf_counter_ns()
    try:
        check_fault("memory")
        found = compile_memory(state.id, state.fn_name, entry, tuple(state.remat))
        state.remat = []
        if found is not None:
            state.memory = register(found, compile_stats)
    except SymbolicSize as exc:
        _unknown(state, exc)
    except Exception as exc:
        fail("memory", exc)
    finally:
        state.memory_ns += time.perf_counter_ns() - began
