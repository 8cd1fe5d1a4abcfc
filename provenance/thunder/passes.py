"""Pass names, bookkeeping symbols, derived records, and the fix-up run after every pass."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from provenance.core.caches import CACHES
from provenance.core.record import Kind, Provenance, intern
from provenance.thunder.compat import api
from provenance.thunder.state import set_record

T = api()  # this Thunder's objects (compat.py)
PrimIDs, Proxy = T.PrimIDs, T.Proxy

# Thunder's TraceProvenance labels -> short lineage names (unknown labels are slugified).
_PASS_NAMES = {
    "Grad transform pass": "grad",
    "Dead Code Elimination": "dce",
    "Common Subexpression Elimination": "cse",
    "Nvfuser Common Subexpression Elimination": "cse",
    "Delete Last Used": "del_last_used",
    "Rematerialization": "rematerialization",
    "Transform for execution": "transform_for_execution",
    "Transform for operator executor execution": "transform_for_execution",
    "Update aliases for in-place ops": "update_aliases",
    "Return arguments to track copies onto them": "wrap_return_value",
    "Unwrap the actual return value": "unwrap_return_value",
    "Remove context manager prims": "remove_context_manager_prims",
    "Update Call Context": "update_fusion_call_ctx",
    "Sort Waits": "sort_waits",
    "Fusion": "fusion",
    "Extraction only prologue pass": "extraction_only_prologue",  # ThunderFX's prologue pruning
    "Constant Folding pass": "constant_folding",
}
# Thunder appends its timing to a pass's label: "Delete Last Used (took 9 milliseconds)".
_TOOK = re.compile(r"\s*\(took (?:(\d+) milliseconds|[^)]*)\)\s*$")


def pass_label(label: str) -> tuple[str, int | None]:
    """A TraceProvenance label -> (short pass name, Thunder's measured milliseconds or None):
    `Delete Last Used (took 9 milliseconds)` -> (`del_last_used`, 9)."""
    took = _TOOK.search(label)
    ms = int(took.group(1)) if took and took.group(1) else None
    label = (label[: took.start()] if took else label).strip()
    if label in _PASS_NAMES:
        return _PASS_NAMES[label], ms
    return re.sub(r"[^0-9a-zA-Z]+", "_", label).strip("_").lower() or "unnamed_pass", ms


def label_text(label: Any) -> str | None:
    """The text of a trace's provenance label: a TraceProvenance (`.pss`), or a plain string as
    some passes set it (Thunder 0.2.6's ExtractionOnlyPrologueTransform, constant folding)."""
    if label is None:
        return None
    text = getattr(label, "pss", label)
    return text if isinstance(text, str) else str(text)


def pass_name(label: str) -> str:
    """`Delete Last Used (took 9 milliseconds)` -> `del_last_used`."""
    return pass_label(label)[0]


_BOOKKEEPING_IDS = frozenset(
    p for p in PrimIDs if p.name.startswith(("UNPACK_", "CHECK_", "ASSERT_", "PACK_"))
) | {PrimIDs.RETURN, PrimIDs.DEL, PrimIDs.COMMENT, PrimIDs.PRINT, PrimIDs.PYTHON_VARS,
     PrimIDs.CONSTRUCT_TUPLE, PrimIDs.DATACLASS_NEW, PrimIDs.UPDATE_ALIASES}
_BOOKKEEPING_NAMES = frozenset({"clear_mutable_collection", "unpack_sequence", "python_return", "python_del",
                                "update_aliases"})


# Executors re-create the checks and unpacks as their own symbols (ids are then strings).
_BOOKKEEPING_PREFIXES = ("check_", "unpack_", "assert_", "pack_")


# By identity: PrimIDs members live as long as the process, so no other object has their id, and
# `id()` avoids Enum's Python-level __hash__ (this runs for every new bound symbol).
_BOOKKEEPING_ID_IDS = frozenset(map(id, _BOOKKEEPING_IDS))


def is_bookkeeping(sym: Any) -> bool:
    name = sym.name
    return id(sym.id) in _BOOKKEEPING_ID_IDS or name in _BOOKKEEPING_NAMES or name.startswith(_BOOKKEEPING_PREFIXES)


# Data-parallel syncs do different work in the backward; tensor-parallel roles stay as they are.
_GRAD_ROLES = {"fsdp.unshard": "fsdp.reduce_scatter", "ddp.sync_param": "ddp.grad_all_reduce"}

_derived = CACHES.memo("passes.derived", 1 << 16)  # (record, "grad" | "recompute") -> record


def derived(record: Provenance | None, how: str) -> Provenance | None:
    """The backward (`grad`) or recomputed (`recompute`) counterpart of a forward op's record."""
    if record is None:
        return None
    key = (record, how)
    found = _derived.get(key)
    if found is None:
        kind = Kind.BACKWARD if how == "grad" else Kind.RECOMPUTE
        role = _GRAD_ROLES.get(record.role, record.role) if how == "grad" else record.role
        found = _derived.put(key, record.derive(
            transforms=record.transforms + (how,), kind=kind, derived_from=record, role=role
        ))
    return found


_made_by = CACHES.memo("passes.made_by", 1 << 12)  # (pass, kind) -> record


def made_by(pass_: str, kind: str) -> Provenance:
    """The record of a symbol a pass made on its own (bookkeeping, or compute with no origin)."""
    key = (pass_, kind)
    found = _made_by.get(key)
    if found is None:
        found = _made_by.put(key, intern(Provenance(transforms=(pass_,), kind=kind)))
    return found


def fix_up(bsyms: list, pass_: str) -> None:
    """Give every symbol of a trace that no hook stamped a record naming the pass that made it.

    A compute op with no record (a pass bound it outside any per-op context) takes the record
    of the op producing its first attributed input: it is part of that op's computation.
    """
    producers: dict[str, Provenance] | None = None  # built only if some compute op needs it
    for i, bsym in enumerate(bsyms):
        record = bsym._provenance  # ATTR (hooks.install gives BoundSymbol its default)
        if record is None:
            if is_bookkeeping(bsym.sym):
                record = made_by(pass_, Kind.BOOKKEEPING)
            else:
                if producers is None:
                    producers = {}
                    for earlier in bsyms[:i]:
                        _note_outputs(producers, earlier, earlier._provenance)
                record = next(
                    (producers[a.name] for a in bsym.flat_args if isinstance(a, Proxy) and a.name in producers),
                    None,
                ) or made_by(pass_, Kind.PASS)
            set_record(bsym, record)
        if bsym.subsymbols:
            fill_subsymbols(bsym.subsymbols, record)
        if producers is not None:
            _note_outputs(producers, bsym, record)


def _note_outputs(producers: dict[str, Provenance], bsym: Any, record: Provenance | None) -> None:
    if record is not None and record.kind != Kind.BOOKKEEPING:
        for out in bsym.flat_outs:
            if isinstance(out, Proxy):
                producers[out.name] = record


def stamp(bsym: Any, record: Provenance) -> None:
    """Give `bsym` `record` (replacing any); its subsymbols without one inherit it."""
    set_record(bsym, record)
    if bsym.subsymbols:
        fill_subsymbols(bsym.subsymbols, record)


def restamp(bsym: Any, record: Provenance) -> None:
    """Give `bsym` `record`, and the symbols of its decomposition that carry its old record too.

    Autograd binds a backward op (and its decomposition, bound first) while it processes a forward
    op: all of them get that op's record, and the backward one is derived only once autograd has
    tagged the op. The decomposition shares the op's old record; an executor that claims prims
    (nvFuser) fuses it, so it must be the backward's too. Other records in it are kept."""
    old = bsym._provenance  # ATTR
    set_record(bsym, record)
    todo = list(bsym.subsymbols)
    while todo:
        sub = todo.pop()
        if sub._provenance is None or sub._provenance is old:
            sub._provenance = record
            todo.extend(sub.subsymbols)


def fill_subsymbols(subsymbols: Iterable[Any], record: Provenance) -> None:
    """Subsymbols with no record inherit their parent's (decomposition).

    A symbol that has a record has a filled subtree: every place that gives a symbol a record
    fills its subsymbols (or, for a copy, shares its original's, filled when that got its
    record), so the walk stops there instead of visiting every level of every decomposition
    again for each parent and after each pass."""
    for sub in subsymbols:
        if sub._provenance is None:  # ATTR
            sub._provenance = record
            if sub.subsymbols:
                fill_subsymbols(sub.subsymbols, record)


_fusions = CACHES.memo("passes.fusions", 1 << 14)  # members -> fusion record


def fusion_of(members: Iterable[Provenance | None]) -> Provenance:
    """A fusion's record: its members flat (a fusion of fusions lists their members) and
    deduplicated in first-seen order, like MLIR's FusedLoc. A role all members share is kept."""
    flat: dict[Provenance, None] = {}
    for record in members:
        if record is None:
            continue
        for member in record.members if record.kind == Kind.FUSION else (record,):
            flat.setdefault(member, None)
    key = tuple(flat)
    found = _fusions.get(key)
    if found is None:
        roles = {m.role for m in key}
        modules = {m.module for m in key}
        found = _fusions.put(key, intern(Provenance(
            members=key,
            kind=Kind.FUSION,
            transforms=("fusion",),
            role=roles.pop() if len(roles) == 1 else None,
            module=modules.pop() if len(modules) == 1 else None,
            module_type=key[0].module_type if len({m.module_type for m in key}) == 1 and key else None,
            module_file=key[0].module_file if len({m.module_file for m in key}) == 1 and key else None,
        )))
    return found
