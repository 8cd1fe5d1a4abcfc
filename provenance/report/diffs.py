"""What a pass changed: a trace diffed against the previous trace of its list."""

from __future__ import annotations

from collections import Counter

from provenance.report.model import DiffItem, Op, TraceDiff, TraceView

__all__ = ["diff"]

MAX_DIFF_ITEMS = 60  # per category and trace; the counts are always complete


def _op_text(lines: list[str], op: Op) -> str:
    if op.n == 1:
        return lines[op.line].strip()
    return "\n".join(line.strip() for line in lines[op.line: op.line + op.n])


def _keyed(view: TraceView) -> dict[tuple, tuple[Op, str]]:
    """Ops by identity: their outputs (names are unique in a trace), else symbol and text."""
    if view.keyed is not None:
        return view.keyed
    out: dict[tuple, tuple[Op, str]] = {}
    seen: Counter = Counter()
    for op in view.ops:
        text = _op_text(view.lines, op)
        if op.outs:
            key: tuple = ("o", *op.outs)
        else:
            base = ("t", op.sym, text)
            seen[base] += 1
            key = (*base, seen[base])
        out[key] = (op, text)
    view.keyed = out
    return out


def diff(old: TraceView, new: TraceView) -> TraceDiff:
    """What the pass that made `new` did to `old`: ops added, removed, rewritten (same outputs,
    different symbol or code), and how many kept their code but changed provenance record."""
    before, after = _keyed(old), _keyed(new)
    result = TraceDiff(old.anchor)
    for key, (op, text) in after.items():
        prior = before.get(key)
        if prior is None:
            result.added += 1
            if len(result.added_items) < MAX_DIFF_ITEMS:
                result.added_items.append(DiffItem(text[:300]))
        elif prior[1] != text or prior[0].sym != op.sym:
            result.rewritten += 1
            if len(result.rewritten_items) < MAX_DIFF_ITEMS:
                result.rewritten_items.append(DiffItem(text[:300], prior[1][:300]))
        elif prior[0].prov != op.prov:
            result.reattributed += 1
    for key, (_op, text) in before.items():
        if key not in after:
            result.removed += 1
            if len(result.removed_items) < MAX_DIFF_ITEMS:
                result.removed_items.append(DiffItem(text[:300]))
    return result


