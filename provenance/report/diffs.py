"""What a pass changed: a trace diffed against the previous trace of its list."""

from __future__ import annotations

from collections import Counter
from operator import itemgetter

from provenance.report.model import DiffItem, Op, TraceDiff, TraceView

__all__ = ["diff"]

MAX_DIFF_ITEMS = 60  # per category and trace; the counts are always complete
_LINE, _N, _SYM, _OUTS, _PROV = map(itemgetter, range(5))  # an Op's fields


def _op_text(lines: list[str], op: Op) -> str:
    if op.n == 1:
        return lines[op.line].strip()
    return "\n".join(line.strip() for line in lines[op.line: op.line + op.n])


def _keyed(view: TraceView) -> dict[tuple, tuple[str, str, int | None]]:
    """Ops by identity: their outputs (names are unique in a trace), else symbol and text; each
    with what a pass may change (text, symbol, provenance record). Column at a time (C loops:
    a trace has thousands of ops); in op order."""
    if view.keyed is not None:
        return view.keyed
    lines, ops = view.lines, view.ops
    texts = list(map(str.strip, map(lines.__getitem__, map(_LINE, ops))))
    for i in [i for i, n in enumerate(map(_N, ops)) if n != 1]:
        texts[i] = _op_text(lines, ops[i])
    syms = list(map(_SYM, ops))
    keys: list[tuple] = list(map(_OUTS, ops))  # the outputs themselves: strs only, never equal to the keys below
    seen: Counter = Counter()
    for i in [i for i, outs in enumerate(keys) if not outs]:
        base = (syms[i], texts[i])
        seen[base] += 1
        keys[i] = (*base, seen[base])
    view.keyed = dict(zip(keys, zip(texts, syms, map(_PROV, ops))))
    return view.keyed


def diff(old: TraceView, new: TraceView) -> TraceDiff:
    """What the pass that made `new` did to `old`: ops added, removed, rewritten (same outputs,
    different symbol or code), and how many kept their code but changed provenance record."""
    before, after = _keyed(old), _keyed(new)
    result = TraceDiff(old.anchor)
    changed = after.items() - before.items()  # most ops are unchanged: found by set operations (C loops)
    for key, now in filter(changed.__contains__, after.items()) if changed else ():  # in op order
        prior = before.get(key)
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
    gone = before.keys() - after.keys()
    for key in filter(gone.__contains__, before) if gone else ():
        result.removed += 1
        if len(result.removed_items) < MAX_DIFF_ITEMS:
            result.removed_items.append(DiffItem(before[key][0][:300]))
    return result
