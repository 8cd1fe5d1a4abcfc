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

import torch

from provenance.core.record import Frame
from provenance.dynamo.torch_trace import subject_of, user_name
from provenance.log.events import DynamoGuardFailure, DynamoRecompile, frame_json
from provenance.thunder.frames import frame_at

MAX_REASONS = 16  # cached entries explained per recompile
MAX_TEXT = 1000

_ENTRY = re.compile(r"^(?P<entry>\d+/\d+): (?P<text>.*)$", re.S)
_TENSOR = re.compile(r"tensor '(?P<name>.+?)' (?P<what>[\w ]+?) mismatch(?: at index (?P<index>\d+))?\. "
                     r"expected (?P<old>.+?), actual (?P<new>.+?)$", re.S)
_SIZE = re.compile(r"^(?P<name>.+?)\.size\(\)\[(?P<index>\d+)\]")
_WHERE = re.compile(r"(?P<file>\S+):(?P<line>\d+) in \S+\s*$")


_GLOBAL = "GLOBAL_STATE changed:"
# torch's global-state guard names what changed (torch/csrc/dynamo/guards.cpp, GlobalStateGuard::reason), not
# the values; a switch was the other way round when the entry was compiled: its value now tells both.
_SWITCHES: dict[str, tuple[str, Any]] = {
    "grad_mode": ("grad mode", torch.is_grad_enabled),
    "autocast": ("autocast", torch.is_autocast_enabled),
    "torch_function": ("torch function", torch._C._is_torch_function_enabled),
    "deterministic_algorithms": ("deterministic algorithms", torch.are_deterministic_algorithms_enabled),
    "allow_tf32": ("TF32 matmul", lambda: torch.backends.cuda.matmul.allow_tf32),
}
_VALUES: dict[str, tuple[str, Any]] = {  # not switches: the value now only
    "num_threads": ("threads", torch.get_num_threads),
    "default_dtype": ("default dtype", torch.get_default_dtype),
}


def _global_state(text: str) -> list[list[str]]:
    """[what, then, now] for each state torch's guard names, read now (at the recompile: the caller's state)."""
    changes = []
    for name in text.removeprefix(_GLOBAL).split():
        if name in _SWITCHES:
            label, read = _SWITCHES[name]
            now = bool(read())
            changes.append([label, "off" if now else "on", "on" if now else "off"])
        elif name in _VALUES:
            label, read = _VALUES[name]
            changes.append([label, "?", str(read()).removeprefix("torch.")])
        else:
            changes.append([name.replace("_", " "), "?", "?"])
    return changes


def _failure(entry: str | None, text: str) -> DynamoGuardFailure:
    text = text.strip()[:MAX_TEXT]
    if text.startswith(_GLOBAL):
        changes = _global_state(text)
        shown = ", ".join(f"{what}: {old} \u2192 {new}" if old != "?" else f"{what} (now {new})" if new != "?"
                          else what for what, old, new in changes)
        return {"entry": entry, "subject": None, "changes": changes,
                "reason": shown or "global state changed", "guard": text}
    tensor = _TENSOR.search(text)
    if tensor is not None:
        subject = user_name(tensor["name"])
        what = tensor["what"].strip()
        if tensor["index"] is not None:
            what = f"dim {tensor['index']} {what}"  # "dim 1 size", "dim 0 stride"
        changes = [[what, tensor["old"].strip(), tensor["new"].strip()]]
        reason = f"{subject}: {what} {changes[0][1]} \u2192 {changes[0][2]}"
    else:
        # torch appends the guard's source line and where it is: `X is None  # if X is None:  # f.py:92 in g`
        code, *comments = text.split("  # ")
        guard = user_name(code.strip())
        size = _SIZE.match(guard)
        subject = size["name"] if size else (subject_of(guard) if guard else None)
        changes = []
        reason = f"{subject}: guard {guard} failed" if subject and subject != guard else f"guard {guard} failed"
        where = _WHERE.search(comments[-1]) if comments else None
        if where is not None:
            reason += f" (at {where['file'].rsplit('/', 1)[-1]}:{where['line']})"
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
