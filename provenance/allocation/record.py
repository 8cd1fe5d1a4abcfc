"""The `memory` record (provenance/log/events.py's `Memory`), both ways: `encode` makes the records of a
compile's static memory (capture writes them, provenance/thunder/emit.py), `decode` makes the static memory
back from them (the report and the diff read them: provenance/report/analyze/compile.py's `_memory`). A field added to
the record is added here, once for each side."""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
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
)
from provenance.core.record import Provenance
from provenance.log.events import Memory

__all__ = ["RecordOf", "decode", "encode"]


def encode(memory: CompileMemory, prov_id: Callable[[Provenance | None], int | None]) -> list[Memory]:
    """The `memory` records of a compile's static memory: one per final trace (the forward's with what it
    saves for the backward and what rematerialization changed); `prov_id`: the session's id of a record."""
    events: list[Memory] = []
    for trace in memory.traces.values():
        forward = trace.name == FORWARD
        events.append({
            "type": "memory", "compile": memory.compile_id, "trace": trace.name, "list": trace.list,
            "index": trace.index, "inputs": trace.inputs, "start": trace.start,
            "ops": [(o.position, o.name, prov_id(o.record), o.allocated, o.freed, o.live) for o in trace.ops],
            "blocks": [(b.name, b.nbytes, prov_id(b.record), b.position if b.position >= 0 else None, b.freed)
                       for b in trace.blocks],
            "saved": [(s.name, s.nbytes, prov_id(s.record), s.input) for s in memory.saved] if forward else [],
            "remat": [(c.name, c.nbytes, prov_id(c.record), c.change) for c in memory.remat] if forward else [],
        })
    return events


RecordOf = Callable[[Any], Provenance | None]


def _int(v: Any) -> int | None:
    return v if type(v) is int else None


def _trace(data: dict, record_of: RecordOf) -> TraceMemory | None:
    name = data.get("trace")
    if name not in (FORWARD, BACKWARD):
        return None
    raw = data.get("ops")
    ops = [e for e in raw if type(e) is list and len(e) == 6 and type(e[0]) is int and type(e[3]) is int
           and type(e[4]) is int and type(e[5]) is int] if isinstance(raw, list) else []
    raw = data.get("blocks")
    blocks = [e for e in raw if type(e) is list and len(e) == 5 and type(e[1]) is int
              and (e[3] is None or type(e[3]) is int) and (e[4] is None or type(e[4]) is int)] \
        if isinstance(raw, list) else []
    # each record looked up once: a trace's thousands of ops and blocks name a few hundred
    found = {i: record_of(i) for i in {e[2] for e in chain(ops, blocks) if isinstance(e[2], int)}}.get
    make = MemOp._make
    return TraceMemory(
        name,
        tuple(make((e[0], e[1] if type(e[1]) is str else str(e[1]),
                    found(e[2]) if isinstance(e[2], int) else None, e[3], e[4], e[5])) for e in ops),
        tuple(Block(str(e[0]), e[1], found(e[2]) if isinstance(e[2], int) else None, e[3] if e[3] is not None else -1,
                    e[4]) for e in blocks),
        _int(data.get("inputs")) or 0, _int(data.get("start")) or 0, str(data.get("list") or ""),
        _int(data.get("index")))


def _entries(value: Any) -> list[list]:
    return [e for e in value if type(e) is list and len(e) == 4] if isinstance(value, list) else []


def decode(records: dict[str, dict], record_of: RecordOf, compile_id: int, fn: str) -> CompileMemory | None:
    """A compile's memory from its `memory` records (by trace; untrusted: an entry of the wrong shape is
    left out), or None without a forward one; `record_of`: a logged record by its id."""
    traces = {name: t for name, data in records.items() if (t := _trace(data, record_of)) is not None}
    if FORWARD not in traces:
        return None
    fwd = records.get(FORWARD, {})
    saved = tuple(Saved(str(e[0]), e[1], record_of(e[2]), bool(e[3])) for e in _entries(fwd.get("saved"))
                  if type(e[1]) is int)
    remat = tuple(RematChange(str(e[0]), e[1], record_of(e[2]), e[3]) for e in _entries(fwd.get("remat"))
                  if type(e[1]) is int and e[3] in ("removed", "added"))
    return CompileMemory(compile_id, fn, traces[FORWARD], traces.get(BACKWARD), saved, remat)
