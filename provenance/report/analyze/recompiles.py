"""Why a compile happened: its `recompile` record -> the compile page's view (model.Recompile):
which cached compile rejected the call, what changed, and a diff of their prologues.

Every field comes from an untrusted log: anything of the wrong type is skipped, never raised.
"""

from __future__ import annotations

import re
from typing import Any

from provenance.report.model import RecompileView, Rejection, StackFrame
from provenance.report.numbers import as_int

__all__ = ["recompile_view"]

MAX_DIFF_LINES = 400
MAX_DIFF_INPUT = 2000  # lines of each prologue's differing stretch given to difflib (its cost is not linear)
MAX_REJECTED = 64
MAX_INPUTS = 64  # changed inputs shown per rejected entry


def _frame(value: Any) -> StackFrame | None:
    if isinstance(value, list) and len(value) >= 4:
        path = str(value[0])
        return StackFrame(path, path.rsplit("/", 1)[-1], as_int(value[1]) or 0, str(value[2]), str(value[3]),
                          bool(value[4]) if len(value) > 4 else True)
    return None


def _rejection(entry: Any, pages: dict) -> Rejection | None:
    if not isinstance(entry, dict):
        return None
    cid = entry.get("compile")
    changes = _changes(entry.get("changes"))
    subject, check = entry.get("subject"), entry.get("check")
    subject = subject if isinstance(subject, str) else None
    raw = entry.get("inputs")
    inputs = [(i["subject"], _changes(i.get("changes"))) for i in (raw if isinstance(raw, list) else [])[:MAX_INPUTS]
              if isinstance(i, dict) and isinstance(i.get("subject"), str)]
    if not inputs and subject is not None and changes:  # a log before 1.5: the first input only
        inputs = [(subject, changes)]
    return Rejection(cid if isinstance(cid, int) else None, pages.get(cid) if isinstance(cid, int) else None,
                     str(entry.get("reason") or ""), subject, changes,
                     check if isinstance(check, str) else None, str(entry.get("error") or ""), inputs)


def _changes(raw: Any) -> list[tuple[str, ...]]:
    return [tuple(str(x) for x in c) for c in (raw if isinstance(raw, list) else [])[:64]
            if isinstance(c, list) and len(c) == 3]


def recompile_view(record: dict | None, prologue: list[str] | None) -> RecompileView | None:
    """A recompile record -> the page's view; `prologue`: this compile's final prologue (lines).
    The run attaches `_pages` (compile id -> page) and `_prologue` (the newest rejected entry's
    final prologue) to the record it hands over."""
    if not isinstance(record, dict):
        return None
    pages = record.get("_pages") if isinstance(record.get("_pages"), dict) else {}
    raw = record.get("rejected")
    rejected = [r for r in (_rejection(e, pages) for e in (raw if isinstance(raw, list) else [])[:MAX_REJECTED])
                if r is not None]
    older = record.get("_prologue")
    diff = _diff(older.split("\n"), prologue) if isinstance(older, str) and prologue else None
    reason = str(record.get("reason") or (rejected[0].reason if rejected else ""))
    return RecompileView(reason, _frame(record.get("call")), rejected, as_int(record.get("more")) or 0,
                         rejected[0] if rejected else None, diff)


def _diff(old: list[str], new: list[str]) -> list[tuple[str, str]]:
    """A unified diff of two prologues (without Thunder's `# Constructed by` line, which names the
    pass and its time), as (kind, line). Linear in their length: the common head and tail are
    skipped, and of the stretches that differ the first MAX_DIFF_INPUT lines of each are compared
    (a line of the diff says so when there were more)."""
    def body(lines: list[str]) -> list[str]:
        return [line for line in lines if not line.startswith("# Constructed by")]

    a, b = body(old), body(new)
    n = min(len(a), len(b))
    head = next((k for k in range(n) if a[k] != b[k]), n)
    tail = 0
    while tail < n - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    start = max(0, head - 1)  # one line of context, as the diff shows (n=1)
    cut = max(len(a) - tail - head, len(b) - tail - head) > MAX_DIFF_INPUT
    stop_a = min(len(a), (head + MAX_DIFF_INPUT) if cut else len(a) - tail + 1)
    stop_b = min(len(b), (head + MAX_DIFF_INPUT) if cut else len(b) - tail + 1)
    import difflib  # only for a recompile's prologue

    out: list[tuple[str, str]] = []
    for line in difflib.unified_diff(a[start:stop_a], b[start:stop_b], "cached", "this call", lineterm="", n=1):
        if line.startswith(("---", "+++")):
            continue
        kind = {"@": "hunk", "+": "add", "-": "rem"}.get(line[:1], "ctx")
        if kind == "hunk" and start:  # numbered in the prologues, not in the stretch compared
            line = _HUNK.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + start}", line)
        out.append((kind, line))
        if len(out) >= MAX_DIFF_LINES:
            out.append(("hunk", "..."))
            break
    if cut:
        out.append(("hunk", f"... the prologues differ from line {head + 1} on, in {len(a) - tail - head} and "
                            f"{len(b) - tail - head} lines: the first {MAX_DIFF_INPUT} of each were compared"))
    return out


_HUNK = re.compile(r"([-+])(\d{1,18})")
