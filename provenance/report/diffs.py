"""What a pass changed: a trace diffed against the previous trace of its list."""

from __future__ import annotations

from collections import Counter
from typing import Any

from provenance.report.traces import Op, TraceView

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


def _item(op: Op, text: str) -> dict[str, Any]:
    return {"sym": op.sym, "outs": list(op.outs), "text": text[:300], "p": op.prov}


def diff(old: TraceView, new: TraceView) -> dict[str, Any]:
    """What the pass that made `new` did to `old`: ops added, removed, rewritten (same outputs,
    different symbol or code), and how many kept their provenance record."""
    before, after = _keyed(old), _keyed(new)
    result: dict[str, Any] = {"added": 0, "removed": 0, "rewritten": 0, "reattributed": 0,
                              "items": {"added": [], "removed": [], "rewritten": []}, "from": old.anchor}
    items = result["items"]
    for key, (op, text) in after.items():
        prior = before.get(key)
        if prior is None:
            result["added"] += 1
            if len(items["added"]) < MAX_DIFF_ITEMS:
                items["added"].append(_item(op, text))
        elif prior[1] != text or prior[0].sym != op.sym:
            result["rewritten"] += 1
            if len(items["rewritten"]) < MAX_DIFF_ITEMS:
                items["rewritten"].append({**_item(op, text), "old": prior[1][:300], "old_sym": prior[0].sym})
        elif prior[0].prov != op.prov:
            result["reattributed"] += 1
    for key, (op, text) in before.items():
        if key not in after:
            result["removed"] += 1
            if len(items["removed"]) < MAX_DIFF_ITEMS:
                items["removed"].append(_item(op, text))
    return result


