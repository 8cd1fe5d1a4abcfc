"""Two sides -> their changes, sorted by impact (the diff's render model: render.py shows it,
gate.py judges it). docs/diff.md says what is compared and the significance rule:

- **run time** (per measured call: the whole call's time, and each line's, module's, role's and op's):
  provenance.timing.significance's rule. A change is significant when it is large enough (the medians
  differ by 5% and the ranges do not overlap for the call, by 50% and 2% of the call for a row) and
  unlikely by chance: a rank test of the two runs' calls, judged with its family (every matched
  compile's call; every row of them) by Benjamini-Hochberg at ALPHA; otherwise it is noise, listed
  only with --all. A family whose calls are too few for any change to be significant says so
  (Diff.notes);
- **compile time** is one sample per compile (no spread to judge by): shown with its change, and
  significant only when it changed by at least COMPILE_RATIO and COMPILE_MIN_S *and* its phases all
  moved that way (`compile_significant`: each phase group with at least PHASE_SHARE of the compile,
  MIN_PHASES of them at least, by COMPILE_RATIO or more): a cold cache, an import or a preemption
  lands in one phase; a `--fail-on compile_time=...` bound is the user's and is judged on any change
  (gate.py);
- **memory** (the static timeline, provenance.allocation.static_memory) and **structure** (ops, fusions,
  recompiles, status, graph breaks, pieces) are exact: any difference counts.

Impact order: significant regressions (slower, more memory: the largest relative increase
first), then improvements, then structural changes, then the run's versions and arguments.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from provenance.allocation.static_memory import size
from provenance.diff.match import align_lines, match, match_compiles
from provenance.diff.read import Side
from provenance.diff.summarize import DIMENSIONS, CompileDigest, TimeFigure
from provenance.timing.significance import ALPHA, MIN_ROW_RATIO, MIN_ROW_SHARE, Compared, judge, least_calls
from provenance.timing.spread import Spread
from provenance.timing.units import ms_json

__all__ = ["COMPILE_MIN_S", "COMPILE_RATIO", "MIN_PHASES", "PHASE_SHARE", "Change", "Diff", "compare",
           "compile_significant"]

COMPILE_RATIO = 0.25
COMPILE_MIN_S = 0.1
PHASE_SHARE = 0.1  # a phase group with this share of the compile (either side) must have moved too
MIN_PHASES = 3  # ... and at least so many such groups: two could move together by chance
MAX_CHANGES = 5000  # listed; the rest are counted (a diff of two unrelated runs stays bounded)

# group order: regressions, improvements, structure, run
REGRESSION, IMPROVEMENT, STRUCTURE, RUN = range(4)
_LEVELS = {"compile": 1, "line": 2, "row": 3}


@dataclass
class Change:
    """One difference between the runs, as every output shows it."""

    kind: str  # line | time | fusion | compile | recompile | graph | run
    title: str
    compile: str | None = None  # the matched compile's label
    details: list[str] = field(default_factory=list)
    metric: str | None = None  # run_time | compile_time | memory (what a --fail-on rule judges)
    before: float | None = None  # in `unit`
    after: float | None = None
    unit: str = ""  # ms (per measured call) | s | bytes | ops | compiles
    significant: bool = True
    group: int = STRUCTURE
    ops: dict[str, dict[str, int]] = field(default_factory=dict)  # added / removed: `trace:symbol` -> count
    links: dict[str, str] = field(default_factory=dict)  # a, a_source, b, b_source: paths in each side's report
    level: str = "compile"  # compile | line | row (a module's, role's or op's time): the gate judges compiles'

    @property
    def delta(self) -> float | None:
        return None if self.before is None or self.after is None else self.after - self.before

    @property
    def ratio(self) -> float | None:
        """after / before - 1 (None without both, inf from nothing)."""
        if self.before is None or self.after is None:
            return None
        if self.before == 0:
            return 0.0 if self.after == 0 else float("inf")
        return self.after / self.before - 1

    def impact(self) -> tuple:
        """The sort key: significant first; regressions, improvements, structure, the run; within
        a group the lines whose ops changed (a cause before its effects), a compile's totals, the
        other lines, then modules, roles and ops; then the largest relative change."""
        ratio = self.ratio
        size_ = abs(ratio) if ratio is not None else 0.0
        cause = self.level == "line" and bool(self.ops.get("added") or self.ops.get("removed"))
        return (not self.significant, self.group, 0 if cause else _LEVELS.get(self.level, 4), -size_,
                -abs(self.delta or 0.0), self.title)

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["delta"], out["ratio"] = self.delta, _finite(self.ratio)
        return out


def _finite(x: float | None) -> float | str | None:
    return "inf" if x == float("inf") else x


@dataclass
class Diff:
    a: Side
    b: Side
    changes: list[Change]
    matched: list[tuple[CompileDigest, CompileDigest]]
    removed: list[CompileDigest]
    added: list[CompileDigest]
    more: int = 0  # changes past MAX_CHANGES
    notes: list[str] = field(default_factory=list)  # what the diff could not judge, and why

    @property
    def significant(self) -> list[Change]:
        return [c for c in self.changes if c.significant]


def compile_significant(a_s: float, b_s: float, a_phases: dict[str, float], b_phases: dict[str, float]) -> bool:
    """A compile time changed (one sample a side, seconds; its phase groups in ms): by at least
    COMPILE_RATIO and COMPILE_MIN_S, and every phase group of at least PHASE_SHARE of either side's
    compile — MIN_PHASES of them at least — moved the same way by at least COMPILE_RATIO."""
    grew = b_s - a_s
    if abs(grew) < COMPILE_MIN_S or abs(grew) < COMPILE_RATIO * max(a_s, 1e-9):
        return False
    floor = PHASE_SHARE * 1000 * max(a_s, b_s)
    groups = [g for g in set(a_phases) | set(b_phases) if max(a_phases.get(g, 0.0), b_phases.get(g, 0.0)) >= floor]
    if len(groups) < MIN_PHASES:
        return False
    for g in groups:
        before, after = a_phases.get(g, 0.0), b_phases.get(g, 0.0)
        if (after - before) * grew <= 0 or abs(after - before) < COMPILE_RATIO * max(before, 1e-9):
            return False
    return True


def _row_floor(a: CompileDigest, b: CompileDigest) -> float:
    """The least change of a row's median that can count: MIN_ROW_SHARE of the call's time."""
    walls = [w.median_ns for w in (a.wall, b.wall) if w is not None]
    return MIN_ROW_SHARE * max(walls) if walls else 0.0


CALL = "call"  # the whole call's figure in a Verdicts family (the rows': DIMENSIONS)


class Verdicts:
    """The run-time figures of every matched compile, judged by family (provenance.timing.significance):
    the whole calls together, the rows (every table's) together. `p(pair, by, key)`: the adjusted
    p-value (None: not judged); `notes`: a family whose calls are too few for any change to count."""

    def __init__(self, pairs: list[tuple[CompileDigest, CompileDigest]]) -> None:
        calls: dict[tuple[int, str, str], Compared] = {}
        rows: dict[tuple[int, str, str], Compared] = {}
        for i, (a, b) in enumerate(pairs):
            if a.wall is None or b.wall is None:
                continue
            calls[i, CALL, ""] = Compared(a.wall, b.wall, apart=True)
            if a.time is None or b.time is None:
                continue
            floor = _row_floor(a, b)
            for by in DIMENSIONS:
                ta, tb = a.time[by], b.time[by]
                for key in ta.keys() & tb.keys():
                    rows[i, by, key] = Compared(ta[key].time, tb[key].time, MIN_ROW_RATIO, floor)
        self._p = {**judge(calls), **judge(rows)}
        self.notes = []
        for what, family in (("a compile's run time per call", calls),
                             ("a line's, module's, role's or op's time", rows)):
            # a row has its compile's measured calls: the fewest a side of any pair in the family
            n = min((min(pairs[i][0].wall.calls, pairs[i][1].wall.calls) for i in {k[0] for k in family}), default=0)
            need = least_calls(len(family))
            if family and n < need:
                self.notes.append(
                    f"{what}: {n} measured calls a side can show no significant change among the {len(family)} "
                    f"compared (at a false discovery rate of {ALPHA:g}); it takes {need} or more: profile "
                    f"{need} calls (THUNDER_TRACE_PROFILE={need}, docs/diff.md)")

    def p(self, pair: int, by: str, key: str = "") -> float | None:
        return self._p.get((pair, by, key))

    def significant(self, pair: int, by: str, key: str = "") -> bool:
        p = self.p(pair, by, key)
        return p is not None and p <= ALPHA

    def text(self, pair: int, by: str, key: str = "") -> str:
        """How a figure was judged, for its details: `p 3.2e-06`, `within the noise, p 0.41`."""
        p = self.p(pair, by, key)
        if p is None:
            return "within the noise"
        return f"p {p:.2g}" if p <= ALPHA else f"within the noise, p {p:.2g}"


def label(c: CompileDigest) -> str:
    rank = f" · {c.rank_label}" if c.rank_label else ""
    again = f" (recompile {c.index})" if c.index else ""
    return f"{c.fn}{again}{rank}"


def _range(s: Spread) -> str:
    return f"median {s.median_ns / 1e6:.3f} ms ({s.low_ns / 1e6:.3f}–{s.high_ns / 1e6:.3f} over {s.calls} calls)"


def _time_group(a: Spread, b: Spread) -> int:
    """Slower is a regression, faster an improvement; the same median is neither (a run against itself)."""
    return REGRESSION if b.median_ns > a.median_ns else IMPROVEMENT if b.median_ns < a.median_ns else STRUCTURE


def _counter_delta(a: Counter, b: Counter) -> dict[str, dict[str, int]]:
    added = {k: b[k] - a.get(k, 0) for k in b if b[k] > a.get(k, 0)}
    removed = {k: a[k] - b.get(k, 0) for k in a if a[k] > b.get(k, 0)}
    return {"added": dict(sorted(added.items())), "removed": dict(sorted(removed.items()))}


def _ops_text(delta: dict[str, dict[str, int]]) -> list[str]:
    out = []
    for what, sign in (("added", "+"), ("removed", "−")):
        if delta[what]:
            out.append(f"{what}: " + ", ".join(f"{sign}{n} {k}" if n > 1 else f"{sign}{k}"
                                               for k, n in delta[what].items()))
    return out


def _links(a: CompileDigest | None, b: CompileDigest | None, line: str | None = None) -> dict[str, str]:
    out = {}
    for side, c in (("a", a), ("b", b)):
        if c is None:
            continue
        out[side] = c.page
        href = c.hrefs.get(line) if line is not None else c.source
        if href:
            out[f"{side}_source"] = href
    return out


def _short(key: str) -> str:
    path, _, line = key.rpartition(":")
    return f"{path.rsplit('/', 1)[-1]}:{line}" if path and line.isdigit() else key


def compare(a: Side, b: Side) -> Diff:
    matched, removed, added = match_compiles(a.compiles, b.compiles)
    pairs, moved = [], {}  # B's lines keyed by A's (match.align_lines): a copied script, lines an edit moved
    for ca, cb in matched:
        aligned, renamed = align_lines(ca, cb)
        pairs.append((ca, aligned))
        moved.update(renamed)
    changes: list[Change] = []
    changes += _run(a, b)
    verdicts = Verdicts(pairs)
    for path_a, path_b in sorted(moved.items()):
        verdicts.notes.append(f"A's {path_a} is B's {path_b}: its lines are matched by their statements (a copied "
                              f"or renamed script); the two files differ")
    for i, (ca, cb) in enumerate(pairs):
        changes += _compile(ca, cb, verdicts, i)
    for c in removed:
        changes.append(Change("recompile" if c.index else "compile", f"compile removed: {label(c)}", label(c),
                              [f"called at {c.call_site}" if c.call_site else "no call site in the log"],
                              links=_links(c, None)))
    for c in added:
        details = [f"called at {c.call_site}"] if c.call_site else []
        if c.recompile_reason:
            details.append(f"why: {c.recompile_reason}")
        kind = "recompile" if c.index else "compile"
        changes.append(Change(kind, f"{'recompile' if c.index else 'compile'} added: {label(c)}", label(c), details,
                              metric="recompiles" if c.index else None, before=0, after=1, unit="compiles",
                              links=_links(None, c)))
    changes += _fx(a, b)
    changes.sort(key=Change.impact)
    more = max(0, len(changes) - MAX_CHANGES)
    return Diff(a, b, changes[:MAX_CHANGES], pairs, removed, added, more, verdicts.notes)


def _run(a: Side, b: Side) -> list[Change]:
    """The runs' versions, arguments, ranks and libraries (each side's first log's header)."""
    out = []

    def header(side: Side) -> Any:
        return next((log.header for log in side.model.logs if log.header is not None), None)

    ha, hb = header(a), header(b)
    if ha is not None and hb is not None:
        for name in sorted(set(ha.versions) | set(hb.versions)):
            va, vb = ha.versions.get(name), hb.versions.get(name)
            if va != vb:
                out.append(Change("run", f"{name} {va or '(none)'} → {vb or '(none)'}", group=RUN))
        if ha.argv != hb.argv:
            out.append(Change("run", "arguments changed", details=[f"A: {' '.join(ha.argv)[:300]}",
                                                                    f"B: {' '.join(hb.argv)[:300]}"], group=RUN))
        if ha.world_size != hb.world_size:
            out.append(Change("run", f"world size {ha.world_size} → {hb.world_size}", group=RUN))
    la, lb = _libraries(a), _libraries(b)
    for name in sorted(set(la) | set(lb)):
        if la.get(name) != lb.get(name):
            out.append(Change("run", f"library {name} {la.get(name, '(none)')} → {lb.get(name, '(none)')}", group=RUN))
    ranks_a, ranks_b = a.model.ranks, b.model.ranks
    if ranks_a != ranks_b:
        out.append(Change("run", f"ranks {', '.join(ranks_a) or '(none)'} → {', '.join(ranks_b) or '(none)'}",
                          group=RUN))
    return out


def _libraries(side: Side) -> dict[str, str]:
    out: dict[str, str] = {}
    for log in side.model.logs:
        out.update(log.libraries)
    return out


def _compile(a: CompileDigest, b: CompileDigest, verdicts: Verdicts, pair: int) -> list[Change]:
    name = label(a)
    out: list[Change] = []
    if a.status != b.status:
        details = [f"B: {b.error}"] if b.error else ([f"A: {a.error}"] if a.error else [])
        out.append(Change("compile", f"status {a.status} → {b.status}", name, details, links=_links(a, b)))
    if a.index and a.recompile_reason != b.recompile_reason:
        out.append(Change("recompile", "recompile reason changed", name,
                          [f"A: {a.recompile_reason}", f"B: {b.recompile_reason}"], links=_links(a, b)))
    if a.seconds is not None and b.seconds is not None and round(a.seconds, 4) != round(b.seconds, 4):
        grew = b.seconds - a.seconds
        judged = compile_significant(a.seconds, b.seconds, a.phases, b.phases)
        phases = [f"{g}: {a.phases.get(g, 0):.0f} → {b.phases.get(g, 0):.0f} ms"
                  for g in sorted(set(a.phases) | set(b.phases),  # ties by name: the same runs, the same page
                                  key=lambda g: (-abs(b.phases.get(g, 0) - a.phases.get(g, 0)), g))[:5]]
        out.append(Change("compile", "compile time", name, phases, metric="compile_time", before=round(a.seconds, 4),
                          after=round(b.seconds, 4), unit="s", significant=judged,
                          group=REGRESSION if grew > 0 else IMPROVEMENT, links=_links(a, b)))
    if a.kinds != b.kinds:
        delta = _counter_delta(a.kinds, b.kinds)
        out.append(Change("compile", "final traces' ops by kind", name, _ops_text(delta), unit="ops",
                          before=sum(a.kinds.values()), after=sum(b.kinds.values()), ops=delta, links=_links(a, b)))
    if a.wall is not None and b.wall is not None and a.wall.median_ns != b.wall.median_ns:
        out.append(Change("time", "run time per call (forward + backward)", name,
                          [f"A: {_range(a.wall)}", f"B: {_range(b.wall)}", verdicts.text(pair, CALL)],
                          metric="run_time", before=ms_json(a.wall.median_ns), after=ms_json(b.wall.median_ns),
                          unit="ms", significant=verdicts.significant(pair, CALL), group=_time_group(a.wall, b.wall),
                          links=_links(a, b)))
    if a.memory_totals is not None and b.memory_totals is not None:
        for key, what in (("saved_bytes", "saved for backward"), ("peak", "peak live memory")):
            va, vb = _memory_total(a.memory_totals, key), _memory_total(b.memory_totals, key)
            if va != vb:
                out.append(Change("memory", what, name, [f"{size(va)} → {size(vb)}"], metric="memory", before=va,
                                  after=vb, unit="bytes", group=REGRESSION if vb > va else IMPROVEMENT,
                                  links=_links(a, b)))
    out += _lines(a, b, name, verdicts, pair)
    out += _time_rows(a, b, name, verdicts, pair)
    out += _fusions(a, b, name)
    return out


def _memory_total(totals: dict[str, int], key: str) -> int:
    if key == "peak":
        return max(totals.get("forward_peak_bytes", 0), totals.get("backward_peak_bytes", 0))
    return totals.get(key, 0)


def _lines(a: CompileDigest, b: CompileDigest, name: str, verdicts: Verdicts, pair: int) -> list[Change]:
    """Per user line: the ops it became, its time per call and its memory."""
    out = []
    ta = (a.time or {}).get("line", {})
    tb = (b.time or {}).get("line", {})
    ma, mb = a.memory or {}, b.memory or {}
    for key in _ordered(a.lines, b.lines, ta, tb, ma, mb):
        if key.startswith("(") and key not in a.lines and key not in b.lines:
            continue  # bookkeeping, between ops, no user line: the module and op rows show them
        la, lb = a.lines.get(key), b.lines.get(key)
        ops = _counter_delta(la.ops + la.fused if la else Counter(), lb.ops + lb.fused if lb else Counter())
        details = _ops_text(ops)
        fused_a, fused_b = _fused_by_trace(la), _fused_by_trace(lb)
        for trace in sorted(set(fused_a) | set(fused_b)):
            if fused_a.get(trace, 0) != fused_b.get(trace, 0):
                into = sorted((lb.fusions if lb else set()) | (la.fusions if la else set()))
                names = ", ".join(f.split(":", 1)[1] for f in into if f.startswith(f"{trace}:"))
                details.append(f"fused ({trace}): {fused_a.get(trace, 0)} → {fused_b.get(trace, 0)} ops"
                               + (f" in {names}" if names else ""))
        structural = bool(ops["added"] or ops["removed"]) or fused_a != fused_b
        fa, fb = ta.get(key), tb.get(key)
        timed = fa is not None and fb is not None and verdicts.significant(pair, "line", key)
        if fa is not None and fb is not None:
            details.append(f"time: {_range(fa.time)} → {_range(fb.time)} ({verdicts.text(pair, 'line', key)})")
        mem_a, mem_b = ma.get(key), mb.get(key)
        memory = (mem_a or (0, 0)) != (mem_b or (0, 0)) and (ma or mb)
        if memory:
            details.append(f"saved for backward {size((mem_a or (0, 0))[0])} → {size((mem_b or (0, 0))[0])}, "
                           f"live at the peak {size((mem_a or (0, 0))[1])} → {size((mem_b or (0, 0))[1])}")
        if not (structural or timed or memory):
            continue
        text = (lb or la).text if (lb or la) else ""
        module = (lb or la).module if (lb or la) else None
        own = b.own_keys.get(key) if lb is not None else None  # B's own line, where it is not A's key
        where = _short(key) if own is None else f"{_short(own)} (A: {_short(key)})"
        title = where + (f" ({module})" if module else "") + (f": {text}" if text else "")
        if timed:
            change = Change("line", title, name, details, metric="run_time", before=ms_json(fa.time.median_ns),
                            after=ms_json(fb.time.median_ns), unit="ms", group=_time_group(fa.time, fb.time))
        elif memory:
            before, after = (mem_a or (0, 0))[0], (mem_b or (0, 0))[0]
            change = Change("line", title, name, details, metric="memory", before=before, after=after, unit="bytes",
                            group=(REGRESSION if after > before else IMPROVEMENT) if after != before else STRUCTURE)
        else:
            change = Change("line", title, name, details, unit="ops", before=sum((la.ops + la.fused).values()) if la
                            else 0, after=sum((lb.ops + lb.fused).values()) if lb else 0)
        change.ops, change.level = ops, "line"
        change.links = _links(a if la else None, b if lb else None, key)
        if la is None:
            change.title = f"line added: {title}"
        elif lb is None:
            change.title = f"line removed: {title}"
        out.append(change)
    return out


def _fused_by_trace(line: Any) -> dict[str, int]:
    out: Counter = Counter()
    for key, n in (line.fused.items() if line is not None else ()):
        out[key.split(":", 1)[0]] += n
    return dict(out)


def _ordered(*tables: dict) -> list[str]:
    seen: dict[str, None] = {}
    for table in tables:
        seen.update(dict.fromkeys(table))
    return list(seen)


def _time_rows(a: CompileDigest, b: CompileDigest, name: str, verdicts: Verdicts, pair: int) -> list[Change]:
    """Significant time changes of modules, roles and ops (lines are _lines')."""
    out = []
    if a.time is None or b.time is None:
        return out
    for by in DIMENSIONS[1:]:
        ta, tb = a.time[by], b.time[by]
        for key in ta.keys() & tb.keys():
            if verdicts.significant(pair, by, key):
                change = _time_change(by, key, ta[key], tb[key], name, a, b)
                change.details.append(verdicts.text(pair, by, key))
                out.append(change)
    return out


def _time_change(by: str, key: str, fa: TimeFigure, fb: TimeFigure, name: str, a: CompileDigest,
                 b: CompileDigest) -> Change:
    return Change("time", f"{by} {fb.label or key}", name, [f"A: {_range(fa.time)}", f"B: {_range(fb.time)}"],
                  metric="run_time", before=ms_json(fa.time.median_ns), after=ms_json(fb.time.median_ns), unit="ms",
                  group=_time_group(fa.time, fb.time), links=_links(a, b), level="row")


def _fusions(a: CompileDigest, b: CompileDigest, name: str) -> list[Change]:
    """Fusions formed (B only) or split (A only), matched by their members' lines, not their names."""
    pairs, split, formed = match(a.fusions, b.fusions, [lambda f: f.signature])
    out = []
    for what, fusions, side in (("formed", formed, "b"), ("split", split, "a")):
        for f in fusions:
            out.append(Change("fusion", f"fusion {what}: {f.sym} ({f.trace}, {f.ops} ops)", name,
                              [f"{len(f.lines)} line{'s' if len(f.lines) != 1 else ''}: "
                               + ", ".join(map(_short, f.lines[:12])) + (" …" if len(f.lines) > 12 else "")],
                              unit="fusions", before=0 if side == "b" else 1, after=1 if side == "b" else 0,
                              links=_links(a if side == "a" else None, b if side == "b" else None)))
    return out


def _fx(a: Side, b: Side) -> list[Change]:
    """ThunderFX: graph breaks and pieces (the Dynamo graphs' split)."""
    out = []
    fa, fb = a.model.fx, b.model.fx
    breaks_a = fa.breaks if fa is not None else []
    breaks_b = fb.breaks if fb is not None else []

    def where(g: Any) -> str:
        return f"{g.frame.name}:{g.frame.line}" if g.frame is not None else "(no user line)"

    _, gone, new = match(breaks_a, breaks_b, [lambda g: (g.rank_label, where(g), g.summary),
                                              lambda g: (g.rank_label, g.summary)])
    for what, items in (("added", new), ("removed", gone)):
        for g in items:
            out.append(Change("graph", f"graph break {what}: {where(g)}", g.rank_label or None,
                              [g.summary] + ([g.frame.text.strip()] if g.frame is not None and g.frame.text else []),
                              unit="breaks", before=0 if what == "added" else 1, after=1 if what == "added" else 0))
    graphs_a = fa.graphs if fa is not None else []
    graphs_b = fb.graphs if fb is not None else []
    pairs, gone_g, new_g = match(graphs_a, graphs_b, [lambda g: (g.rank_label, g.compile_id)])
    for ga, gb in pairs:
        pa = Counter(f"{p.name} ({p.compiler})" for p in ga.pieces)
        pb = Counter(f"{p.name} ({p.compiler})" for p in gb.pieces)
        if pa != pb:
            delta = _counter_delta(pa, pb)
            out.append(Change("graph", f"Dynamo graph [{ga.compile_id}]: pieces changed", ga.rank_label or None,
                              _ops_text(delta), unit="pieces", before=len(ga.pieces), after=len(gb.pieces), ops=delta))
    for what, items in (("added", new_g), ("removed", gone_g)):
        for g in items:
            out.append(Change("graph", f"Dynamo graph [{g.compile_id}] {what}", g.rank_label or None,
                              [", ".join(f"{p.name} ({p.compiler})" for p in g.pieces)], unit="graphs",
                              before=0 if what == "added" else 1, after=1 if what == "added" else 0))
    return out

