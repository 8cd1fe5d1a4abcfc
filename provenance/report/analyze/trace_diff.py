"""What a pass changed: a trace diffed against the previous trace of its list."""

from __future__ import annotations

from collections import Counter

from provenance.report.model import DiffItem, TraceDiff, TraceView

__all__ = ["diff"]

MAX_DIFF_ITEMS = 60  # per category and trace; the counts are always complete


def _op_text(lines: list[str], line: int, n: int) -> str:
    return "\n".join(text.strip() for text in lines[line: line + n])


def _keyed(view: TraceView) -> dict[str | tuple, tuple[str, str, int | None]]:
    """Ops by identity: their first output (names are unique in a trace), else symbol and text; each
    with what a pass may change (text, symbol, provenance record)."""
    if view.keyed is not None:
        return view.keyed
    out: dict[str | tuple, tuple[str, str, int | None]] = {}
    seen: Counter = Counter()
    lines = view.lines
    for line, n, sym, outs, prov in view.ops:
        text = lines[line].strip() if n == 1 else _op_text(lines, line, n)
        if outs:  # its first output's name (unique in a trace): a str, never equal to the keys below
            key: str | tuple = outs[0]
        else:
            base = (sym, text)
            seen[base] += 1
            key = (*base, seen[base])
        out[key] = (text, sym, prov)
    view.keyed = out
    return out


def diff(old: TraceView, new: TraceView) -> TraceDiff:
    """What the pass that made `new` did to `old`: ops added, removed, rewritten (same outputs,
    different symbol or code), and how many kept their code but changed provenance record."""
    before, after = _keyed(old), _keyed(new)
    result = TraceDiff(old.anchor)
    for key, now in after.items():
        prior = before.get(key)
        if prior == now:  # most ops: one comparison
            continue
        if prior is None:
            result.added += 1
            if len(result.added_items) < MAX_DIFF_ITEMS:
                result.added_items.append(DiffItem(now[0][:300]))
        elif prior[0] != now[0] or prior[1] != now[1]:
            result.rewritten += 1
            if len(result.rewritten_items) < MAX_DIFF_ITEMS:
                result.rewritten_items.append(DiffItem(now[0][:300], prior[0][:300]))
        else:
            result.reattributed += 1
    for key in [key for key in before if key not in after]:
        result.removed += 1
        if len(result.removed_items) < MAX_DIFF_ITEMS:
            result.removed_items.append(DiffItem(before[key][0][:300]))
    return result
