"""Where the memory goes: the static memory timeline of a compile's execution traces, rolled up by
user line, module, role or op. Pure data (no torch or thunder import): the records are filled by
provenance/thunder/memory.py at the end of a compile, or rebuilt from a log's `memory` records
(provenance/allocation/record.py's `decode`, which the report's compile builder calls), and `rollup` treats
both alike. `provenance.memory(jfn)` is the API.

Rules (docs/memory.md):
- A trace's timeline: each top-level op allocates the bytes of the tensors it outputs (numel ×
  dtype size; views and aliases — Thunder's `thunder_alias_operator_list` — allocate nothing, they
  share their input's storage), and a `del` frees a storage when its last name is deleted. The
  inputs the caller holds (parameters, the batch; the backward's cotangents) are counted apart,
  never freed. In the backward, the tensors saved for it start live and are freed at their `del`
  (Thunder's backward clears the lists holding them).
- `peak`: the most bytes live after any op (inputs apart); the blocks live at it are charged to
  the ops that allocated them.
- Saved for backward: the distinct storages the forward returns for the backward, each charged to
  the op that allocated it; saved inputs (parameters) are counted apart.
- Charging (provenance.core.attribution, the rule cost uses): an allocation is charged to the op that
  made it, a backward op's to its forward line and module through `derived_from`; a fusion's
  output to the member that produced it (capture resolves it), else as the fusion's members (a
  fusion of several keys is a row of its own). Modules are hierarchical (a module's row includes
  its submodules'); `own_saved_bytes` is the part of no submodule.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

from provenance.core import attribution
from provenance.core.attribution import ROOT
from provenance.core.kept import Kept
from provenance.core.record import Provenance

# ROOT: attribution's, re-exported as the module rows' root key (as provenance.timing.rollup does)
__all__ = ["BY", "ROOT", "Block", "CompileMemory", "MemOp", "MemoryRow", "RematChange", "Saved", "TraceMemory",
           "compiles", "live_after", "peak_position", "register", "rollup", "rollups", "summary", "table"]

FORWARD, BACKWARD = "forward", "backward"
BY = ("line", "module_line", "module", "role", "op")
NO_MODULE = "(no module)"
NO_ROLE = "(no role)"
MAX_COMPILES = 256  # compiles whose memory timelines the process keeps (the oldest go first)


class MemOp(NamedTuple):
    """One top-level symbol of an execution trace, in the timeline (a tuple: a trace has thousands,
    rebuilt by every report)."""

    position: int  # index in the trace's bound_symbols
    name: str  # the symbol's name
    record: Provenance | None
    allocated: int  # bytes its outputs allocated
    freed: int  # bytes freed at it (a del)
    live: int  # bytes live after it (inputs apart)


class Block(NamedTuple):
    """One storage a trace allocated (or, in the backward, received as saved for backward)."""

    name: str  # the tensor that allocated it
    nbytes: int
    record: Provenance | None  # the op that allocated it (a saved block in the backward: the forward op's)
    position: int  # the op that allocated it; -1: live at the trace's start (saved for backward)
    freed: int | None  # the op that freed it; None: live at the end (returned, saved)


@dataclass(frozen=True, slots=True)
class Saved:
    """A storage the forward saves for the backward."""

    name: str
    nbytes: int
    record: Provenance | None  # the op that made it (None for an input)
    input: bool  # an input of the forward (a parameter, the batch): counted apart


@dataclass(frozen=True, slots=True)
class RematChange:
    """A tensor rematerialization stopped saving ("removed": recomputed in the backward instead)
    or started saving ("added": a cheaper tensor saved in its place)."""

    name: str
    nbytes: int
    record: Provenance | None
    change: str  # "removed" | "added"


@dataclass(frozen=True)
class TraceMemory:
    """A trace's static memory timeline: its ops and the storages they allocate and free."""

    name: str  # FORWARD | BACKWARD
    ops: tuple[MemOp, ...]
    blocks: tuple[Block, ...]
    inputs: int  # bytes of the inputs the caller holds (counted apart)
    start: int = 0  # bytes live at the start (the backward: saved for backward)
    list: str = ""  # the logged trace list ("computation" | "backward")
    index: int | None = None  # its index in that list

    @cached_property  # the trace is immutable; its figures are read by each roll-up and view
    def peak(self) -> int:
        return max([self.start, *(op.live for op in self.ops)])

    @cached_property
    def peak_position(self) -> int:
        return peak_position(self.start, ((op.position, op.live) for op in self.ops))

    @property
    def allocated(self) -> int:
        return sum(op.allocated for op in self.ops)

    def at_peak(self) -> list[Block]:
        where = self.peak_position
        return [b for b in self.blocks if live_after(b.position, b.freed, where)]


# The peak's rule, for these records and for the OTel exporter's view of the `memory` events.
def peak_position(start: int, lives: Iterable[tuple[int, int]]) -> int:
    """The op after which a trace's peak is reached, from its (position, live bytes after it) in order
    and the bytes live at its `start`: the first, if several; -1: at the start."""
    best, where = start, -1
    for position, live in lives:
        if live > best:
            best, where = live, position
    return where


def live_after(allocated_at: int, freed_at: int | None, where: int) -> bool:
    """Whether a storage is live after op `where`: allocated at or before it (-1: live at the start),
    freed after it or never."""
    return allocated_at <= where and (freed_at is None or freed_at > where)


@dataclass(eq=False)
class CompileMemory:
    """The static memory of one compile: its forward and (if any) backward timelines, what the
    forward saves for the backward, and what rematerialization changed in it."""

    compile_id: int
    fn_name: str
    forward: TraceMemory | None
    backward: TraceMemory | None = None
    saved: tuple[Saved, ...] = ()
    remat: tuple[RematChange, ...] = ()
    owner: Any = None  # weak reference to Thunder's CompileStats of the jitted function

    @property
    def traces(self) -> dict[str, TraceMemory]:
        return {t.name: t for t in (self.forward, self.backward) if t is not None}

    @property
    def saved_bytes(self) -> int:
        return sum(s.nbytes for s in self.saved if not s.input)

    @property
    def saved_input_bytes(self) -> int:
        return sum(s.nbytes for s in self.saved if s.input)



_kept: Kept[CompileMemory] = Kept(MAX_COMPILES)


def register(memory: CompileMemory, owner: Any = None) -> CompileMemory:
    return _kept.add(memory, owner)


def compiles(owner: Any = None) -> list[CompileMemory]:
    """The kept compiles' memory, oldest first; with `owner` (a CompileStats), only its compiles'."""
    return _kept.items(owner)


def clear() -> None:
    _kept.clear()


# -- the roll-up ---------------------------------------------------------------------------------

@dataclass
class MemoryRow:
    """One row of a memory table: bytes (summed over compiles)."""

    key: str
    saved_bytes: int = 0  # saved for backward (a module: with its submodules')
    forward_peak_bytes: int = 0  # live at the forward's peak
    backward_peak_bytes: int = 0  # live at the backward's peak (saved blocks still held, backward allocations)
    allocated_bytes: int = 0  # allocated by its ops, forward and backward
    remat_removed_bytes: int = 0  # no longer saved: rematerialization recomputes them
    remat_added_bytes: int = 0  # saved in their place
    own_saved_bytes: int = 0  # a module: saved by its own ops (none of a submodule's); else = saved_bytes
    kind: str = "key"  # "key" | "fusion" (a fusion output charged to several keys)
    label: str = ""
    members: tuple[str, ...] = ()

    @property
    def peak_bytes(self) -> int:
        return max(self.forward_peak_bytes, self.backward_peak_bytes)

    def add(self, figures: list[int], *, own: bool) -> None:
        """Add a charge's bytes (indexed by _SAVED … _ADDED); `own`: the row is the charged record's own one."""
        saved, fwd_peak, bwd_peak, allocated, removed, added = figures
        self.saved_bytes += saved
        self.forward_peak_bytes += fwd_peak
        self.backward_peak_bytes += bwd_peak
        self.allocated_bytes += allocated
        self.remat_removed_bytes += removed
        self.remat_added_bytes += added
        if own:
            self.own_saved_bytes += saved


# A charge's figures, in MemoryRow.add's order
_SAVED, _FORWARD_PEAK, _BACKWARD_PEAK, _ALLOCATED, _REMOVED, _ADDED = range(6)


def _module_keys(record: Provenance | None) -> tuple[list[str], str]:
    """A record's module rows (every ancestor, `<root>` first, at most MAX_MODULE_DEPTH levels) and its
    own one (the deepest of them)."""
    paths = attribution.modules(record)
    if not paths:
        return [NO_MODULE], NO_MODULE
    keys = attribution.ancestors(attribution.common_module(paths) if len(paths) > 1 else paths[0])[::-1]
    return keys, keys[-1]


def _keys(record: Provenance | None, by: str, trace: str, compile_id: int) -> tuple[list[str], str, tuple]:
    """(the rows a block is charged to, the one its own bytes go to, a fusion row's members)."""
    if by == "module":
        keys, own = _module_keys(record)
        return keys, own, ()
    if by == "role":
        roles = list(dict.fromkeys(attribution.role_of(r) or NO_ROLE for r in attribution.charged(record)))
        key = roles[0] if len(roles) == 1 else "(mixed)"
        return [key], key, ()
    key_of = attribution.line_key if by == "line" else attribution.module_line_key
    found = attribution.keys(record, key_of)
    if len(found) == 1:
        return found, found[0], ()
    key = f"fusion ({trace}, compile {compile_id})"
    return [key], key, tuple(found)


def rollup(memories: Iterable[CompileMemory], by: str = "line") -> list[MemoryRow]:
    """Rows by `by`, sorted by saved-for-backward bytes, then by peak bytes (largest first)."""
    return rollups(memories, (by,))[by]


def rollups(memories: Iterable[CompileMemory], bys: Iterable[str]) -> dict[str, list[MemoryRow]]:
    """`rollup` by each of `bys`, the blocks charged once for all of them (a report's compile
    shows its lines and its modules)."""
    bys = tuple(bys)
    for by in bys:
        if by not in BY:
            raise ValueError(f"by must be one of {', '.join(BY)}, got {by!r}")
    memories = list(memories)
    charged: dict[bool, _Charges] = {}  # by op or not: every key but "op" shares the one charging
    out: dict[str, list[MemoryRow]] = {}
    for by in bys:
        by_op = by == "op"
        if by_op not in charged:
            charged[by_op] = _charges(memories, by_op)
        out[by] = _rows(charged[by_op], by)
    return out


# (id(record), trace, compile, op) -> (record, trace, compile, op, its figures)
_Charges = dict[tuple[int, str, int, str | None], tuple[Provenance | None, str, int, str | None, list[int]]]


def _charges(memories: list[CompileMemory], by_op: bool) -> _Charges:
    """Bytes by (record, trace, compile, op) first, each then charged to its rows once: a record
    has many blocks (its outputs, saved, live at the peak) and few rows. Keyed by id: the
    records outlive the call, held by `memories`."""
    charges: _Charges = {}

    def charge(record: Provenance | None, trace: str, cid: int, op: str | None, figure: int, value: int) -> None:
        key = (id(record), trace, cid, op if by_op else None)
        entry = charges.get(key)
        if entry is None:
            entry = charges[key] = (record, trace, cid, op, [0] * 6)
        entry[4][figure] += value

    for memory in memories:
        cid = memory.compile_id
        names = {}  # (trace, block name) -> the symbol of the op that allocated it (for by="op")
        if by_op:
            for trace in memory.traces.values():
                by_position = {op.position: op.name for op in trace.ops}
                for block in trace.blocks:
                    if block.position >= 0:
                        names.setdefault((trace.name, block.name), by_position.get(block.position))
        for saved in memory.saved:
            if not saved.input:
                charge(saved.record, FORWARD, cid, names.get((FORWARD, saved.name)), _SAVED, saved.nbytes)
        for trace in memory.traces.values():
            name = trace.name
            column = _FORWARD_PEAK if name == FORWARD else _BACKWARD_PEAK
            for block in trace.at_peak():
                op = (names.get((name, block.name)) or names.get((FORWARD, block.name))) if by_op else None
                charge(block.record, name, cid, op, column, block.nbytes)
            for block in trace.blocks:
                if block.position >= 0:
                    charge(block.record, name, cid, names.get((name, block.name)) if by_op else None, _ALLOCATED,
                           block.nbytes)
        for change in memory.remat:
            charge(change.record, FORWARD, cid, None, _REMOVED if change.change == "removed" else _ADDED,
                   change.nbytes)
    return charges


def _rows(charges: _Charges, by: str) -> list[MemoryRow]:
    rows: dict[str, MemoryRow] = {}
    for record, trace, cid, op, figures in charges.values():
        if by == "op":
            keys, own, members = [op or "(unknown)"], op or "(unknown)", ()
        else:
            keys, own, members = _keys(record, by, trace, cid)
        for key in keys:
            row = rows.get(key)
            if row is None:
                row = rows[key] = MemoryRow(key, label=attribution.key_label(by, key),
                                            kind="fusion" if members else "key", members=members)
            row.add(figures, own=key == own)
    return sorted(rows.values(), key=lambda r: (-r.saved_bytes, -r.peak_bytes, -r.allocated_bytes, r.key))


def summary(memories: Iterable[CompileMemory]) -> dict[str, int]:
    """Totals over compiles: saved (activations, and inputs apart), peaks, inputs."""
    out = {"compiles": 0, "saved_bytes": 0, "saved_input_bytes": 0, "forward_peak_bytes": 0,
           "backward_peak_bytes": 0, "forward_input_bytes": 0, "remat_removed_bytes": 0, "remat_added_bytes": 0}
    for m in memories:
        out["compiles"] += 1
        out["saved_bytes"] += m.saved_bytes
        out["saved_input_bytes"] += m.saved_input_bytes
        if m.forward is not None:
            out["forward_peak_bytes"] += m.forward.peak
            out["forward_input_bytes"] += m.forward.inputs
        if m.backward is not None:
            out["backward_peak_bytes"] += m.backward.peak
        for c in m.remat:
            out[f"remat_{c.change}_bytes"] += c.nbytes
    return out


def size(nbytes: float) -> str:
    """`1.5 MiB`, `12.0 KiB`, `512 B`."""
    magnitude = abs(nbytes)
    if magnitude < 1 << 10:
        return f"{int(nbytes)} B"
    if magnitude < 1 << 20:
        return f"{nbytes / (1 << 10):.1f} KiB"
    if magnitude < 1 << 30:
        return f"{nbytes / (1 << 20):.1f} MiB"
    return f"{nbytes / (1 << 30):.1f} GiB"


def table(rows: list[MemoryRow], *, by: str, title: str, top: int | None = 20, texts: dict[str, str] | None = None):
    """A rich Table of the rows (imported lazily: rich only where one is printed)."""
    from rich.table import Table

    out = Table(title=title, title_justify="left")
    out.add_column(by)
    if texts is not None:
        out.add_column("source", overflow="fold", max_width=60)
    for name in ("saved for backward", "live at fwd peak", "live at bwd peak", "allocated", "remat −/+"):
        out.add_column(name, justify="right")
    for row in rows[:top] if top else rows:
        cells = [row.label]
        if texts is not None:
            cells.append(texts.get(row.key, ""))
        remat = (f"−{size(row.remat_removed_bytes)} / +{size(row.remat_added_bytes)}"
                 if row.remat_removed_bytes or row.remat_added_bytes else "")
        cells += [size(row.saved_bytes), size(row.forward_peak_bytes), size(row.backward_peak_bytes),
                  size(row.allocated_bytes), remat]
        out.add_row(*cells)
    return out


def line_texts(memories: Iterable[CompileMemory]) -> dict[str, str]:
    """`file:line` -> the line's source text, from the records' user frames."""
    texts: dict[str, str] = {}
    seen: set[int] = set()  # ids of the records looked at (a record's blocks share its lines; `memories` holds them)
    for m in memories:
        for trace in m.traces.values():
            for block in trace.blocks:
                if id(block.record) in seen:
                    continue
                seen.add(id(block.record))
                for record in attribution.charged(block.record):
                    for frame in (attribution.line_frame(record), attribution.module_line_frame(record)):
                        if frame is not None:
                            texts.setdefault(attribution.location(frame), frame.text.strip())
    return texts

