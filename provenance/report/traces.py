"""A trace after a pass, as the report keeps it: its lines, their highlighted HTML and its ops
(each op's lines, symbol, outputs and provenance record id, from the `trace` record's `ops`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["LISTS", "Op", "TraceView", "parse_ops"]

LISTS = ("prologue", "computation", "epilogue", "backward")


class Op(NamedTuple):
    line: int  # first line in the trace's python (0-based)
    n: int
    sym: str
    outs: tuple[str, ...]
    prov: int | None


_new_op = functools.partial(tuple.__new__, Op)  # without NamedTuple's Python-level __new__: many ops


@dataclass
class TraceView:
    """One trace after one pass, ready to render."""

    list: str
    index: int
    pass_name: str
    label: str | None
    ms: float | None
    anchor: str
    same_as: int | None = None
    lines: list[str] = field(default_factory=list)  # the python, as lines
    html: list[str] = field(default_factory=list)  # the same lines highlighted
    ops: list[Op] = field(default_factory=list)
    diff: dict[str, Any] | None = None
    final: bool = False
    n_ops: int = 0  # kept when the text is dropped
    code: str | None = None  # the rendered code, kept for the source view of a final trace
    keyed: dict | None = None  # its ops by identity, once diffed (the next pass diffs against it)

    @property
    def counts(self) -> dict[str, int]:
        return {k: self.diff[k] for k in ("added", "removed", "rewritten")} if self.diff else {}


def parse_ops(raw: Any, n_lines: int) -> tuple[list[Op], int]:
    """The valid ops of a trace record, in order, and how many entries were not."""
    ops: list[Op] = []
    bad = 0
    end = 0
    for entry in raw if isinstance(raw, list) else ():
        try:
            line, n, sym, outs, prov = entry
            # ints, in order, inside the text
            if not (type(line) is int and type(n) is int and 0 < n and end <= line and line + n <= n_lines):
                raise ValueError
            outs = tuple(map(str, outs))
        except (TypeError, ValueError):
            bad += 1
            continue
        ops.append(_new_op((line, n, sym if type(sym) is str else str(sym), outs, prov if type(prov) is int else None)))
        end = line + n
    return ops, bad


