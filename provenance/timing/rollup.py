"""Where the time goes: per-op times rolled up by user line, module, role, kind or op.

Pure data in, rows out (no torch or thunder import): the input is `CompileProfile`s, live ones
or ones rebuilt from a log, so the in-process API and the report roll up the same way.

Rules (docs/cost.md):
- Figures are per measured call (provenance.timing.spread: warm-up, executor compiles and stalls left
  out). Every figure of a row is the sum of its ops' (a preemption hits some op in most calls of
  a large model, rarely the same op in most calls; and the ops' times on a trace page add up to
  their line's): the median ranks the rows, with the range and the one-off samples named.
- Columns. An op of the forward trace is forward time. In the backward trace, an op whose record
  is `recompute(...)` (or a forward op re-run there) is recompute time, every other op backward time.
- Keys (provenance.core.attribution, shared with the OTel exporter). A backward or recomputed op is
  charged to the forward op it came from (`derived_from`): its user line and module. An op with
  no user line is `(bookkeeping)` or `(no user line)`.
- Fusions. A fusion's time is never split among its members. If its members all have one key,
  the fusion is charged to it; otherwise the fusion is a row of its own listing the members' keys,
  named with its compile, and each of those keys' rows shows the fusion's time in `shared_ns`
  (not in its own). A key whose time is all in such fusions is an `in_fusion` row: tables list
  it with its fusion, not on its own.
  By module, a fusion is charged to the members' innermost common module (a real subtree).
- Modules are hierarchical: a module's row includes the time of its submodules (MAX_MODULE_DEPTH
  levels: a deeper path is charged to its ancestor at that depth).
- `(between ops)`: wall time of the profiled functions minus the sum of their ops' times.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from provenance.core import attribution
from provenance.core.attribution import BOOKKEEPING, NO_LINE, ROOT, ancestors, line_key
from provenance.core.record import Frame, Kind, Provenance
from provenance.timing.profile import BACKWARD, FORWARD, CompileProfile, Op
from provenance.timing.spread import Excluded, Spread, spread
from provenance.timing.units import ms_cell

# BOOKKEEPING, NO_LINE, ROOT, line_key: attribution's, re-exported as the cost tables' keys
__all__ = ["BOOKKEEPING", "BY", "NO_LINE", "ROOT", "CostRow", "line_key", "merge", "rollup", "rollups", "summary",
           "table"]

BY = ("line", "module_line", "module", "role", "kind", "op")
BETWEEN = "(between ops)"
NO_MODULE = "(no module)"
NO_ROLE = "(no role)"
_FORWARD_KINDS = (Kind.OP, Kind.DECOMPOSITION, Kind.RECOMPUTE)


@dataclass
class CostRow:
    """One row of a cost table. Times are per measured call (provenance.timing.spread), each the sum of
    its ops' figures: the columns their medians, `time` (median: it ranks the rows; range,
    quartiles, the ops' outliers) that of the row's own columns; `sum_ns` its time over every
    measured call."""

    key: str
    time: Spread = field(default_factory=Spread)
    forward_ns: float = 0.0
    backward_ns: float = 0.0
    recompute_ns: float = 0.0
    shared_ns: float = 0.0  # time of fusions this key shares with other keys (not in its time)
    sum_ns: int = 0
    calls: int = 0  # measured calls the figures are over (summed over compiles)
    share: float = 0.0  # median / the median profiled wall time per call
    kind: str = "key"  # "key" | "fusion" (a fusion spanning several keys) | "in_fusion" | "between"
    label: str = ""  # for display: `model.py:12`, `TorchCompile1 (backward of GPT.forward, compile 2): 15 lines`
    members: tuple[str, ...] = ()  # a fusion row: the keys of its members
    fusions: tuple[str, ...] = ()  # the fusion rows it shares (an in_fusion row: they hold all its time)
    ops: int = 0  # distinct ops (trace positions) whose time is in the row
    _compiles: set = field(default_factory=set, repr=False)

    @property
    def median_ns(self) -> float:
        return self.time.median_ns


class _Acc:
    """One compile's figures of one row, each the sum of its ops' (provenance.timing.spread.Spread):
    column -> [median, low, high, q1, q3]; the ops' outliers; its ops' times in each measured call
    (`per_call`: a tuple per op, in the compile's call order), summed per call at the end (`totals`:
    the row's time in each call, a rank test's samples; their sum, its time over every call)."""

    __slots__ = ("figures", "outliers", "ops", "init", "per_call")

    def __init__(self, init: dict) -> None:
        self.figures = {c: [0.0] * 5 for c in _COLUMNS}
        self.outliers: list[tuple[int, int]] = []
        self.ops: set = set()
        self.init = init
        self.per_call: list[tuple[int, ...]] = []

    def add(self, column_: str, op: Spread, times: tuple[int, ...]) -> None:
        """One op's figures, and its time in each of the compile's measured calls."""
        into = self.figures[column_]
        into[0] += op.median_ns
        into[1] += op.low_ns
        into[2] += op.high_ns
        into[3] += op.q1_ns
        into[4] += op.q3_ns
        if column_ != "shared":
            self.outliers.extend(op.outliers)
            self.per_call.append(times)

    def totals(self) -> list[int]:
        return list(map(sum, zip(*self.per_call)))


_COLUMNS = ("forward", "backward", "recompute", "shared")


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


class _Compile:
    """The rows of one compile while its ops are added: key -> figures."""

    def __init__(self) -> None:
        self.rows: dict[str, _Acc] = {}

    def acc(self, key: str, **init: object) -> _Acc:
        acc = self.rows.get(key)
        if acc is None:
            acc = self.rows[key] = _Acc(init)
        return acc


# An op's charges, worked out once per op: (key, column, op counted, init) for each row it goes to.
Charge = tuple[str, str, bool, dict]


def rollup(profiles: Iterable[CompileProfile], by: str = "line", *, keep_all: bool = False) -> list[CostRow]:
    """Rows for `by` ('line', 'module_line', 'module', 'role', 'kind' or 'op'), sorted by median
    time per measured call. 'module_line' charges an op to the line of its innermost user module's
    own code (the `attention_interface(...)` call in LlamaAttention.forward, not the helper's
    line). `keep_all`: every profiled call counts, one-offs included (provenance.timing.spread)."""
    return rollups(profiles, (by,), keep_all=keep_all)[by]


def rollups(profiles: Iterable[CompileProfile], bys: Iterable[str], *, keep_all: bool = False,
            ) -> dict[str, list[CostRow]]:
    """`rollup` by each of `bys` at once: each op's spread over the calls is worked out once, and
    charged to the rows of every grouping (a report's Time section shows five)."""
    bys = tuple(dict.fromkeys(bys))
    for by in bys:
        if by not in BY:
            raise ValueError(f"cost by {by!r}: choose one of {', '.join(BY)}")
    rows: dict[str, dict[str, CostRow]] = {by: {} for by in bys}
    wall = 0.0
    for profile in profiles:
        calls, _ = profile.measured(keep_all)
        if not calls:
            continue
        tables, walls = _compile_rows(profile, bys, calls)
        wall += spread(list(zip(calls, walls))).median_ns
        for by in bys:
            _add_rows(rows[by], tables[by], calls, profile.compile_id)
    return {by: _finish(rows[by], wall, by) for by in bys}


def _compile_rows(profile: CompileProfile, bys: tuple[str, ...], calls: list[int],
                  ) -> tuple[dict[str, _Compile], list[int]]:
    """One compile's rows by each grouping over its measured calls, and its wall time in each of them."""
    index = {k: i for i, k in enumerate(calls)}
    tables = {by: _Compile() for by in bys}
    walls = [0] * len(calls)
    for trace in profile.traces.values():
        ran = [c for c in trace.recent if c.call in index]
        if not ran:
            continue
        for c in ran:
            walls[index[c.call]] += c.wall_ns
        numbers = [c.call for c in ran]
        aligned = _aligner(numbers, index)
        per_op = zip(*(c.op_ns for c in ran))  # each op's times over the measured calls
        for op, times in zip(trace.ops, per_op):
            figures = spread(list(zip(numbers, times)))
            times = aligned(times)
            for by, table in tables.items():
                for key, col, counted, init in _charges(by, profile, trace.name, op):
                    acc = table.acc(key, **init)
                    acc.add(col, figures, times)
                    if counted:
                        acc.ops.add((profile.compile_id, trace.name, op.position))
        gaps = tuple(c.wall_ns - sum(c.op_ns) for c in ran)
        between = spread(list(zip(numbers, gaps)))
        for table in tables.values():
            table.acc(BETWEEN, kind="between", label=BETWEEN).add(
                "backward" if trace.name == BACKWARD else "forward", between, aligned(gaps))
    return tables, walls


def _aligner(numbers: list[int], index: dict[int, int]) -> Any:
    """times over the calls `numbers` -> times over all the compile's measured calls (`index`: call ->
    position; 0 where this trace did not run: a forward-only call of a compile with a backward)."""
    if len(numbers) == len(index):
        return lambda times: times
    at = [index[n] for n in numbers]

    def aligned(times: tuple[int, ...]) -> tuple[int, ...]:
        out = [0] * len(index)
        for i, ns in zip(at, times):
            out[i] = ns
        return tuple(out)

    return aligned


def _charges(by: str, profile: CompileProfile, trace: str, op: Op) -> list[Charge]:
    record, col = op.record, column(trace, op.record)
    if by == "kind":
        return [(_kind_key(trace, record), col, True, {})]
    if by == "op":
        key = op.name if record is None or record.kind != Kind.FUSION else f"{op.name} ({trace})"
        return [(key, col, True, {})]
    if by == "module":
        paths = attribution.modules(record)
        if not paths:
            return [(NO_MODULE, col, True, {})]
        common = attribution.common_module(paths)
        above = ancestors(common)
        below = dict.fromkeys(a for path in paths for a in ancestors(path) if a not in above)
        return [(k, col, True, {}) for k in above] + [(k, "shared", False, {}) for k in below]
    key_of = {"line": line_key, "module_line": attribution.module_line_key}.get(by, role_key)
    found = attribution.keys(record, key_of)
    if len(found) == 1:
        return [(found[0], col, True, {})]
    fn = profile.fn_name.rsplit(".", 2)
    fn = ".".join(fn[-2:]) if len(fn) > 1 else profile.fn_name
    init = {"kind": "fusion", "members": tuple(found),
            "label": f"{op.name} ({trace} of {fn}, compile {profile.compile_id}): {len(found)} {by}s"}
    return [(f"{op.name} ({trace}, compile {profile.compile_id})", col, True, init)] + [
        (key, "shared", False, {}) for key in found]


def _add_rows(rows: dict[str, CostRow], table: _Compile, calls: list[int], compile_id: int) -> None:
    for key, acc in table.rows.items():
        row = rows.get(key)
        if row is None:
            row = rows[key] = CostRow(key=key, **acc.init)
        elif acc.init.get("members"):
            row.members = tuple(dict.fromkeys(row.members + acc.init["members"]))
        own = [sum(acc.figures[c][i] for c in ("forward", "backward", "recompute")) for i in range(5)]
        totals = acc.totals()
        row.time = row.time + Spread(*own, calls=len(calls), outliers=tuple(acc.outliers),
                                     samples=tuple(map(float, totals)))
        for name in _COLUMNS:
            setattr(row, f"{name}_ns", getattr(row, f"{name}_ns") + acc.figures[name][0])
        row.sum_ns += sum(totals)
        row.calls += len(calls)
        row.ops += len(acc.ops)
        row._compiles.add(compile_id)


def _finish(rows: dict[str, CostRow], wall: float, by: str) -> list[CostRow]:
    fusion_keys: dict[str, list[str]] = {}
    for row in rows.values():
        for member in row.members:
            fusion_keys.setdefault(member, []).append(row.key)
    for row in rows.values():
        row.share = row.median_ns / wall if wall else 0.0
        row.label = row.label or _label(by, row.key)
        row.fusions = tuple(fusion_keys.get(row.key, ()))
        if row.kind == "key" and not row.ops and row.shared_ns:
            row.kind = "in_fusion"  # all its time is in fusions it shares: shown with them
    out = list(rows.values())
    out.sort(key=lambda r: (-r.median_ns, -r.shared_ns, r.key))
    return out


def merge(tables: Iterable[tuple[list[CostRow], float]]) -> list[CostRow]:
    """Several roll-ups by the same `by` as one, each given with the median profiled wall time
    per call it was made over (`summary()["wall_ns"]`): figures of distinct compiles add up
    (provenance.timing.spread), as `rollup()` adds them (a report keeps per compile its rows, not its ops)."""
    merged: dict[str, CostRow] = {}
    wall = 0.0
    for rows, wall_ns in tables:
        wall += wall_ns
        for row in rows:
            into = merged.get(row.key)
            if into is None:
                into = merged[row.key] = CostRow(key=row.key, kind=row.kind, label=row.label, members=row.members,
                                                 fusions=row.fusions)
            into.time = into.time + row.time
            for name in _COLUMNS:
                setattr(into, f"{name}_ns", getattr(into, f"{name}_ns") + getattr(row, f"{name}_ns"))
            into.sum_ns += row.sum_ns
            into.calls += row.calls
            into.ops += row.ops
            into._compiles |= row._compiles
            if row.members and row.members != into.members:
                into.members = tuple(dict.fromkeys(into.members + row.members))
            if row.fusions and row.fusions != into.fusions:
                into.fusions = tuple(dict.fromkeys(into.fusions + row.fusions))
            if into.kind == "in_fusion" and row.kind == "key":
                into.kind = "key"  # it has ops of its own in another compile
    rows = list(merged.values())
    for row in rows:
        row.share = row.median_ns / wall if wall else 0.0
    rows.sort(key=lambda r: (-r.median_ns, -r.shared_ns, r.key))
    return rows


_label = attribution.key_label


def summary(profiles: Iterable[CompileProfile], *, keep_all: bool = False) -> dict[str, Any]:
    """Totals over profiles, per measured call: the median wall time (summed over compiles), the
    attributed and between-ops time, coverage; the measured and profiled calls, the compiles;
    and `excluded`: (function, compile id, provenance.timing.spread.Excluded) of each call left out."""
    import statistics  # here, not at import: provenance.timing.spread says why

    wall = attributed = 0.0
    calls = profiled = compiles = 0
    wall_sum = attributed_sum = 0
    excluded: list[tuple[str, int, Excluded]] = []
    for profile in profiles:
        compiles += 1
        profiled += profile.calls
        measured, left_out = profile.measured(keep_all)
        excluded.extend((profile.fn_name, profile.compile_id, e) for e in left_out)
        if not measured:
            continue
        index = {k: i for i, k in enumerate(measured)}
        walls, ops = [0] * len(measured), [0] * len(measured)
        for trace in profile.traces.values():
            for c in trace.recent:
                if c.call in index:
                    walls[index[c.call]] += c.wall_ns
                    ops[index[c.call]] += sum(c.op_ns)
        calls += len(measured)
        wall += statistics.median(walls)
        attributed += statistics.median(ops)
        wall_sum += sum(walls)
        attributed_sum += sum(ops)
    return {"compiles": compiles, "calls": calls, "profiled": profiled, "wall_ns": wall,
            "attributed_ns": attributed, "between_ns": wall - attributed,
            "coverage": attributed_sum / wall_sum if wall_sum else 1.0, "excluded": excluded}


def spread_text(time: Spread) -> str:
    """`1.100–1.400` (ms, the measured calls' range), with `+1 outlier` where one was left out."""
    if time.calls < 2:
        return ""
    text = f"{time.low_ns / 1e6:.3f}–{time.high_ns / 1e6:.3f}"
    return f"{text} +{len(time.outliers)} outlier{'s' if len(time.outliers) > 1 else ''}" if time.outliers else text


def table(rows: list[CostRow], *, by: str = "line", title: str | None = None, top: int | None = 20,
          texts: dict[str, str] | None = None) -> object:
    """A rich Table of `rows` (ms per measured call: the median, the range; the columns' medians).
    A row whose time is all in fusions it shares is listed with those fusions, not on its own."""
    from rich.table import Table

    rows = [r for r in rows if r.kind != "in_fusion"]
    shown = rows if top is None else rows[:top]
    grid = Table(title=title, title_justify="left")
    grid.add_column(by)
    grid.add_column("median ms", justify="right")
    grid.add_column("range ms", justify="right")
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
        share = f"{row.share:.1%}" if row.median_ns else "·"
        grid.add_row(label, ms_cell(row.median_ns), spread_text(row.time), share, ms_cell(row.forward_ns),
                     ms_cell(row.backward_ns), ms_cell(row.recompute_ns), ms_cell(row.shared_ns), str(row.calls))
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
