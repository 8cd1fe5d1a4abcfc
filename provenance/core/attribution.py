"""Which user line, module and role an op is charged to: the one rule behind provenance.timing.rollup
(cost tables, the report's Time pages) and exporters/otel.py (thunder.op.duration, the profiled
runs' spans). No torch or thunder import.

It reads anything shaped like a `Provenance` record (`kind`, `module`, `role`, `user_frame`,
`derived_from`, `members`; a frame with `file` and `line`): live records, records rebuilt from
a log, or the OTel exporter's view of the `prov` events it received.

- An op is charged as its record; a fusion as its members (a fusion's time is never split).
- A backward or recomputed op is charged to the user line and module of the forward op it
  came from (`derived_from`); its role is its own.
- An op's module line is its record's `module_frame` (the line of the innermost user module's own
  code that led to it), else its user line; backward ops take their forward op's.
- An op with no user line is `(bookkeeping)` (a bookkeeping symbol) or `(no user line)`.
- A fusion's module is its members' innermost common module; "" is the root (`<root>`).
- A module's row includes its submodules': `ancestors` are the rows a module path is charged to, at
  most MAX_MODULE_DEPTH levels (a deeper path is charged to its ancestor at that depth).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from provenance.core.record import Kind

__all__ = ["BOOKKEEPING", "LINE_GROUPINGS", "MAX_MODULE_DEPTH", "NO_LINE", "ROOT", "ancestors", "charged",
           "common_module", "key_label", "keys", "short_place",
           "line_frame", "line_key", "location", "module_line_frame", "module_line_key", "module_of", "modules",
           "role_of", "at_module_file"]

BOOKKEEPING = "(bookkeeping)"
NO_LINE = "(no user line)"
ROOT = "<root>"
MAX_DEPTH = 64  # derived_from chains are a few records long; a bound against a cyclic log
MAX_MODULE_DEPTH = 64  # module tree levels rolled up; a deeper path is charged to its ancestor at this depth


def ancestors(path: str) -> list[str]:
    """`h.0.attn` -> ['h.0.attn', 'h.0', 'h', ROOT]; '' (the root module) -> [ROOT]. A path of more
    than MAX_MODULE_DEPTH parts counts as its ancestor at that depth (what a log names is
    untrusted: every ancestor of a path of n parts is n**2 / 2 parts)."""
    parts = path.split(".", MAX_MODULE_DEPTH)[:MAX_MODULE_DEPTH] if path else []
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)] + [ROOT]


class Located(Protocol):
    file: str
    line: int


class Attributed(Protocol):
    kind: str | None
    module: str | None
    role: str | None

    @property
    def user_frame(self) -> Any: ...

    @property
    def derived_from(self) -> Attributed | None: ...

    @property
    def members(self) -> Sequence[Attributed | None]: ...


def charged(record: Attributed | None) -> Sequence[Attributed | None]:
    """The records an op is charged as: a fusion's members, else the op's own (None: it has none)."""
    if record is not None and record.kind == Kind.FUSION:
        return record.members
    return (record,)


def _follow(record: Attributed | None, get: Callable[[Attributed], Any]) -> Any:
    """`get` of the record, else of the record it derives from (a backward op's forward op)."""
    for _ in range(MAX_DEPTH):
        if record is None:
            return None
        value = get(record)
        if value is not None:
            return value
        record = record.derived_from
    return None


def line_frame(record: Attributed | None) -> Any:
    """The user frame a record is charged to (a backward op: its forward op's), or None."""
    return _follow(record, lambda r: r.user_frame)


def module_line_frame(record: Attributed | None) -> Any:
    """The module line a record is charged to: its module frame, else its user frame (a backward
    op: its forward op's)."""
    return _follow(record, lambda r: getattr(r, "module_frame", None) or r.user_frame)


def at_module_file(record: Attributed | None) -> bool:
    """Whether the user line a record is charged to lies in its module's own file: the model's code,
    not a helper it calls (transformers' sdpa_attention.py under modeling_llama.py's attention)."""
    frame = line_frame(record)
    module_file = _follow(record, lambda r: getattr(r, "module_file", None))
    return frame is not None and module_file is not None and frame.file == module_file


def module_of(record: Attributed | None) -> str | None:
    """The module path a record is charged to (a backward op: its forward op's), or None."""
    return _follow(record, lambda r: r.module)


def role_of(record: Attributed | None) -> str | None:
    return record.role if record is not None else None


def location(frame: Located) -> str:
    """A line's key: `file:line`."""
    return f"{frame.file}:{frame.line}"


LINE_GROUPINGS = ("line", "module_line")  # the groupings whose keys are `file:line`


def key_label(by: str, key: str) -> str:
    """A row's key as a table shows it: a line's `file:line` as `modeling_llama.py:391` (the whole path,
    cut to fit, showed only site-packages), other keys as they are."""
    if by in LINE_GROUPINGS and not key.startswith("("):
        path, _, line = key.rpartition(":")
        return f"{os.path.basename(path)}:{line}"
    return key


def line_key(record: Attributed | None) -> str:
    frame = line_frame(record)
    if frame is not None:
        return location(frame)
    return BOOKKEEPING if record is not None and record.kind == Kind.BOOKKEEPING else NO_LINE


def short_place(record: Attributed | None, most: int = 4) -> str:
    """Where an op is, to name it in a sentence: its line (`model.py:12`); a fusion's, its members'
    lines (`model.py:12, 13, model.py:20`... at most `most`, then how many more); else line_key's
    `(bookkeeping)` / `(no user line)`."""
    places: list[str] = []
    for member in charged(record):
        frame = line_frame(member)
        if frame is not None:
            place = f"{os.path.basename(frame.file)}:{frame.line}"
            if place not in places:
                places.append(place)
    if not places:
        return line_key(record)
    more = f" and {len(places) - most} more" if len(places) > most else ""
    return ", ".join(places[:most]) + more


def module_line_key(record: Attributed | None) -> str:
    frame = module_line_frame(record)
    if frame is not None:
        return location(frame)
    return BOOKKEEPING if record is not None and record.kind == Kind.BOOKKEEPING else NO_LINE


def keys(record: Attributed | None, key_of: Callable[[Attributed | None], str]) -> list[str]:
    """The distinct keys of an op's charged records, in order: one, or a fusion's several."""
    return list(dict.fromkeys(map(key_of, charged(record)))) or [key_of(None)]


def modules(record: Attributed | None) -> list[str]:
    """The distinct modules of an op's charged records (none: an op outside every module)."""
    return list(dict.fromkeys(p for p in map(module_of, charged(record)) if p is not None))


def common_module(paths: Sequence[str]) -> str:
    """The innermost module containing every path ("": the root)."""
    split = [p.split(".") if p else [] for p in paths]
    common: list[str] = []
    for parts in zip(*split):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return ".".join(common)
