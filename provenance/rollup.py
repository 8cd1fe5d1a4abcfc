"""Where the time goes: per-op times rolled up by user line, module, role, kind or op.

Pure data in, rows out (no torch or thunder import): the input is `CompileProfile`s, live ones
or ones rebuilt from a log, so the in-process API and the report roll up the same way.

Rules (docs/cost.md):
- Columns. An op of the forward trace is forward time. In the backward trace, an op whose record
  is `recompute(...)` (or a forward op re-run there) is recompute time, every other op backward time.
- Keys (provenance.attribution, shared with the OTel exporter). A backward or recomputed op is
  charged to the forward op it came from (`derived_from`): its user line and module. An op with
  no user line is `(bookkeeping)` or `(no user line)`.
- Fusions. A fusion's time is never split among its members. If its members all have one key,
  the fusion is charged to it; otherwise the fusion is a row of its own listing the members' keys,
  and each of those keys' rows shows the fusion's time in `shared_ns` (not in its total).
  By module, a fusion is charged to the members' innermost common module (a real subtree).
- Modules are hierarchical: a module's row includes the time of its submodules.
- `(between ops)`: wall time of the profiled functions minus the sum of their ops' times.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from provenance import attribution
from provenance.attribution import BOOKKEEPING, NO_LINE, ROOT, line_key
from provenance.profile import BACKWARD, FORWARD, CompileProfile, Op
from provenance.record import Frame, Kind, Provenance

# BOOKKEEPING, NO_LINE, ROOT, line_key: attribution's, re-exported as the cost tables' keys
__all__ = ["BOOKKEEPING", "BY", "NO_LINE", "ROOT", "CostRow", "line_key", "merge", "rollup", "summary", "table"]

BY = ("line", "module_line", "module", "role", "kind", "op")
BETWEEN = "(between ops)"
NO_MODULE = "(no module)"
NO_ROLE = "(no role)"
_FORWARD_KINDS = (Kind.OP, Kind.DECOMPOSITION, Kind.RECOMPUTE)


@dataclass
class CostRow:
    """One row of a cost table. Times are sums over the profiled calls (`calls`)."""

    key: str
    forward_ns: int = 0
    backward_ns: int = 0
    recompute_ns: int = 0
    shared_ns: int = 0  # time of fusions this key shares with other keys (not in total_ns)
    calls: int = 0  # profiled calls summed (per-call time: total_ns / calls)
    share: float = 0.0  # total_ns / the profiled wall time
    kind: str = "key"  # "key" | "fusion" (a fusion spanning several keys) | "between"
    label: str = ""  # for display: `model.py:12 · x = self.fc(x)`, `h.0.attn (CausalSelfAttention)`
    members: tuple[str, ...] = ()  # a fusion row: the keys of its members
    ops: int = 0  # distinct ops (trace positions) whose time is in the row
    _compiles: set = field(default_factory=set, repr=False)

    @property
    def total_ns(self) -> int:
        return self.forward_ns + self.backward_ns + self.recompute_ns

    def _add(self, column: str, ns: int) -> None:
        setattr(self, f"{column}_ns", getattr(self, f"{column}_ns") + ns)


def column(trace: str, record: Provenance | None) -> str:
    """'forward', 'backward' or 'recompute': where an op's time goes."""
    if trace == FORWARD:
        return "forward"
    if record is None:
        return "backward"
    if record.kind == Kind.FUSION:
        kinds = {m.kind for m in record.members}
        return "recompute" if kinds and kinds <= set(_FORWARD_KINDS) else "backward"
    return "recompute" if record.kind in _FORWARD_KINDS else "backward"


def user_frame(record: Provenance | None) -> Frame | None:
    """The user frame an op's time goes to (a backward op: its forward op's)."""
    return attribution.line_frame(record)


def role_key(record: Provenance | None) -> str:
    return attribution.role_of(record) or NO_ROLE


def _kind_key(trace: str, record: Provenance | None) -> str:
    if record is not None and record.kind == Kind.BOOKKEEPING:
        return "bookkeeping"
    if record is not None and record.kind == Kind.FUSION:
        return "fusion"
    return column(trace, record)


def _ancestors(path: str) -> list[str]:
    """`h.0.attn` -> ['h.0.attn', 'h.0', 'h', ROOT]; '' (the root module) -> [ROOT]."""
    parts = path.split(".") if path else []
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)] + [ROOT]


class _Table:
    def __init__(self) -> None:
        self.rows: dict[str, CostRow] = {}
        self.ops: dict[str, set] = {}

    def row(self, key: str, **init: object) -> CostRow:
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = CostRow(key=key, **init)
            self.ops[key] = set()
        return row

    def charge(self, key: str, column_: str, ns: int, op_id: tuple, compile_id: int, **init: object) -> None:
        row = self.row(key, **init)
        row._add(column_, ns)
        row._compiles.add(compile_id)
        self.ops[key].add(op_id)

    def share(self, key: str, ns: int, compile_id: int) -> None:
        row = self.row(key)
        row.shared_ns += ns
        row._compiles.add(compile_id)


def rollup(profiles: Iterable[CompileProfile], by: str = "line") -> list[CostRow]:
    """Rows for `by` ('line', 'module_line', 'module', 'role', 'kind' or 'op'), sorted by total time.
    'module_line' charges an op to the line of its innermost user module's own code (the
    `attention_interface(...)` call in LlamaAttention.forward, not the helper's line)."""
    if by not in BY:
        raise ValueError(f"cost by {by!r}: choose one of {', '.join(BY)}")
    table = _Table()
    profiles = list(profiles)
    wall = 0
    compile_calls: dict[int, int] = {}
    for profile in profiles:
        compile_calls[profile.compile_id] = compile_calls.get(profile.compile_id, 0) + profile.calls
        for trace in profile.traces.values():
            if not trace.calls:
                continue
            wall += trace.wall_ns
            for op, ns in zip(trace.ops, trace.op_ns):
                _charge(table, by, profile.compile_id, trace.name, op, ns)
            between = trace.wall_ns - trace.attributed_ns
            table.charge(BETWEEN, "backward" if trace.name == BACKWARD else "forward", between, (),
                         profile.compile_id, kind="between", label=BETWEEN)
    rows = list(table.rows.values())
    for row in rows:
        row.calls = sum(compile_calls.get(c, 0) for c in row._compiles)
        row.share = row.total_ns / wall if wall else 0.0
        row.ops = len(table.ops[row.key] - {()})
        row.label = row.label or _label(by, row.key)
    rows.sort(key=lambda r: (-r.total_ns, -r.shared_ns, r.key))
    return rows


def merge(tables: Iterable[tuple[list[CostRow], int]]) -> list[CostRow]:
    """Several roll-ups by the same `by` as one, each given with the profiled wall time it was
    made over (`summary()["wall_ns"]`): the rows `rollup()` gives on all their profiles at once,
    when no compile is in two of them (a report keeps per compile its rows, not its ops)."""
    merged: dict[str, CostRow] = {}
    wall = 0
    for rows, wall_ns in tables:
        wall += wall_ns
        for row in rows:
            into = merged.get(row.key)
            if into is None:
                into = merged[row.key] = CostRow(key=row.key, kind=row.kind, label=row.label, members=row.members)
            into.forward_ns += row.forward_ns
            into.backward_ns += row.backward_ns
            into.recompute_ns += row.recompute_ns
            into.shared_ns += row.shared_ns
            into.calls += row.calls
            into.ops += row.ops
            into._compiles |= row._compiles
            if row.members and row.members != into.members:
                into.members = tuple(dict.fromkeys(into.members + row.members))
    rows = list(merged.values())
    for row in rows:
        row.share = row.total_ns / wall if wall else 0.0
    rows.sort(key=lambda r: (-r.total_ns, -r.shared_ns, r.key))
    return rows


def _charge(table: _Table, by: str, compile_id: int, trace: str, op: Op, ns: int) -> None:
    record, col = op.record, column(trace, op.record)
    op_id = (compile_id, trace, op.position)
    if by == "kind":
        table.charge(_kind_key(trace, record), col, ns, op_id, compile_id)
        return
    if by == "op":
        key = op.name if record is None or record.kind != Kind.FUSION else f"{op.name} ({trace})"
        table.charge(key, col, ns, op_id, compile_id)
        return
    if by == "module":
        _charge_module(table, compile_id, op, col, ns, op_id)
        return
    key_of = {"line": line_key, "module_line": attribution.module_line_key}.get(by, role_key)
    found = attribution.keys(record, key_of)
    if len(found) == 1:
        table.charge(found[0], col, ns, op_id, compile_id)
        return
    fusion_key = f"{op.name} ({trace}, compile {compile_id})"
    table.charge(fusion_key, col, ns, op_id, compile_id, kind="fusion", members=tuple(found),
                 label=f"fusion {op.name} ({trace}) of {len(found)} {by}s")
    for key in found:
        table.share(key, ns, compile_id)


def _charge_module(table: _Table, compile_id: int, op: Op, col: str, ns: int, op_id: tuple) -> None:
    paths = attribution.modules(op.record)
    if not paths:
        table.charge(NO_MODULE, col, ns, op_id, compile_id)
        return
    common = attribution.common_module(paths)
    for key in _ancestors(common):
        table.charge(key, col, ns, op_id, compile_id)
    below = {a for path in paths for a in _ancestors(path)} - set(_ancestors(common))
    for key in below:  # the members' own modules, under their common one
        table.share(key, ns, compile_id)


def _label(by: str, key: str) -> str:
    if by in ("line", "module_line") and not key.startswith("("):
        path, _, line = key.rpartition(":")
        return f"{os.path.basename(path)}:{line}"
    return key


def summary(profiles: Iterable[CompileProfile]) -> dict[str, float | int]:
    """Totals over profiles: wall, attributed and between-ops time, coverage, calls, compiles."""
    profiles = list(profiles)
    wall = sum(p.wall_ns for p in profiles)
    attributed = sum(p.attributed_ns for p in profiles)
    return {"compiles": len(profiles), "calls": sum(p.calls for p in profiles), "wall_ns": wall,
            "attributed_ns": attributed, "between_ns": wall - attributed,
            "coverage": attributed / wall if wall else 1.0}


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.3f}" if ns else "·"


def table(rows: list[CostRow], *, by: str = "line", title: str | None = None, top: int | None = 20,
          texts: dict[str, str] | None = None) -> object:
    """A rich Table of `rows` (times in ms, summed over the profiled calls)."""
    from rich.table import Table

    shown = rows if top is None else rows[:top]
    grid = Table(title=title, title_justify="left")
    grid.add_column(by)
    grid.add_column("total ms", justify="right")
    grid.add_column("share", justify="right")
    for name in ("forward", "backward", "recompute", "shared"):
        grid.add_column(name, justify="right")
    grid.add_column("calls", justify="right")
    for row in shown:
        label = row.label
        if texts and row.key in texts:
            label = f"{label}  {texts[row.key]}"
        if row.members:
            label = f"{label}: {', '.join(_label(by, m) for m in row.members)}"
        share = f"{row.share:.1%}" if row.total_ns else "·"
        grid.add_row(label, _ms(row.total_ns), share, _ms(row.forward_ns), _ms(row.backward_ns),
                     _ms(row.recompute_ns), _ms(row.shared_ns), str(row.calls))
    if top is not None and len(rows) > top:
        grid.caption = f"{len(rows) - top} more rows"
    return grid


def line_texts(profiles: Iterable[CompileProfile]) -> dict[str, str]:
    """line key (a user line or a module line) -> the source text of that line, as the records
    captured it."""
    texts: dict[str, str] = {}
    for profile in profiles:
        for trace in profile.traces.values():
            for op in trace.ops:
                for record in attribution.charged(op.record):
                    for frame in (attribution.line_frame(record), attribution.module_line_frame(record)):
                        if frame is not None and frame.text:
                            texts.setdefault(attribution.location(frame), frame.text)
    return texts
