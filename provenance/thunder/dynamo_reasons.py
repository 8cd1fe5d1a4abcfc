"""Dynamo's recompile reasons in the user's terms.

torch gives one string per cached entry whose guards failed, `"<its compile id>: <failure>"`,
failures joined by "; " (torch/_dynamo/guards.py, get_guard_fail_reason; the C++ tensor checks
word theirs as `tensor 'kwargs['input_ids']' size mismatch at index 1. expected 16, actual 8`,
other guards are their Python source, `L['n'] == 3`). Each becomes: what changed as the user
wrote it (`input_ids`, `self.n`), and `[what, cached, now]` (`["dim 1 size", "16", "8"]`), with
torch's text kept.
"""

from __future__ import annotations

import re
from typing import Any

from provenance.core.record import Frame
from provenance.dynamo.torch_trace import user_name
from provenance.log.events import DynamoGuardFailure, DynamoRecompile, frame_json
from provenance.thunder.frames import frame_at

MAX_REASONS = 16  # cached entries explained per recompile
MAX_TEXT = 1000

_ENTRY = re.compile(r"^(?P<entry>\d+/\d+): (?P<text>.*)$", re.S)
_TENSOR = re.compile(r"tensor '(?P<name>.+?)' (?P<what>[\w ]+?) mismatch(?: at index (?P<index>\d+))?\. "
                     r"expected (?P<old>.+?), actual (?P<new>.+?)$", re.S)
_SIZE = re.compile(r"^(?P<name>.+?)\.size\(\)\[(?P<index>\d+)\]")


def _failure(entry: str | None, text: str) -> DynamoGuardFailure:
    text = text.strip()[:MAX_TEXT]
    tensor = _TENSOR.search(text)
    if tensor is not None:
        subject = user_name(tensor["name"])
        what = tensor["what"].strip()
        if tensor["index"] is not None:
            what = f"dim {tensor['index']} {what}"  # "dim 1 size", "dim 0 stride"
        changes = [[what, tensor["old"].strip(), tensor["new"].strip()]]
        reason = f"{subject}: {what} {changes[0][1]} \u2192 {changes[0][2]}"
    else:
        guard = user_name(text)
        size = _SIZE.match(guard)
        subject = size["name"] if size else (guard.split()[0] if guard else None)
        changes = []
        reason = f"{subject}: guard {guard} failed" if subject and subject != guard else f"guard {guard} failed"
    return {"entry": entry, "subject": subject, "changes": changes, "reason": reason, "guard": text}


def failures(reasons: list[Any]) -> list[DynamoGuardFailure]:
    """Each cached entry's failed guards (torch's strings), newest first as torch lists them."""
    out: list[DynamoGuardFailure] = []
    for raw in reasons[:MAX_REASONS]:
        matched = _ENTRY.match(str(raw))
        entry, text = (matched["entry"], matched["text"]) if matched else (None, str(raw))
        out.extend(_failure(entry, part) for part in text.split("; ") if part.strip())
    return out


def recompile(reasons: list[Any], code: tuple[str, int, str], call: Frame | None) -> DynamoRecompile:
    """The `dynamo_graph.recompile` object: the failures, the function Dynamo compiled again (its
    file, first line, name) and the user's line of the call."""
    found = failures(reasons)
    first_entry = found[0]["entry"] if found else None
    reason = "; ".join(f["reason"] for f in found if f["entry"] == first_entry) or "(torch gave no reason)"
    file, line, name = code
    return {"reason": reason, "function": frame_json(frame_at(file, line, name)),
            "call": frame_json(call) if call is not None else None, "failures": found,
            "more": max(0, len(reasons) - MAX_REASONS)}
