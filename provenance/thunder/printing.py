"""Where each op of a trace lands in its printed Python source."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from provenance.thunder.compat import api

__all__ = ["find_block", "layout", "printed_layout", "printed_ops", "tracing_context"]

tracing_context = api().tracectx  # printing a symbol reads names from its trace

# While set (by printed_layout), the hook on BoundSymbol.python (hooks.py) appends each top-level
# symbol with the lines it printed, so a trace is printed once and each op's place is known.
printed_ops: ContextVar[list | None] = ContextVar("provenance_printed_ops", default=None)


def layout(trace: Any, *, print_depth: int = 1) -> tuple[list[str], list[tuple[Any, int, int]]]:
    """`trace.python()` as lines, and where each top-level symbol is printed: (bsym, first line,
    number of lines). Symbols printed elsewhere (the signature's unpacks) are left out."""
    text = trace.python(print_depth=print_depth).splitlines()
    placed: list[tuple[Any, int, int]] = []
    pos = 0
    with tracing_context(trace):
        for bsym in trace.bound_symbols:
            plain = bsym.python(1, print_depth=print_depth)
            start = find_block(text, plain, pos) if plain else None
            if start is not None:
                placed.append((bsym, start, len(plain)))
                pos = start + len(plain)
    return text, placed


def printed_layout(trace: Any) -> tuple[list[str], list[tuple[Any, int, int]]]:
    """`layout`, printing the trace once: the ops report their lines as Thunder prints them
    (needs the hooks installed)."""
    token = printed_ops.set([])
    try:
        text = trace.python(print_depth=1).splitlines()
        printed = printed_ops.get()
    finally:
        printed_ops.reset(token)
    placed, pos = [], 0
    for bsym, lines in printed:
        start = find_block(text, lines, pos) if lines else None
        if start is not None:
            placed.append((bsym, start, len(lines)))
            pos = start + len(lines)
    return text, placed


def find_block(lines: list[str], block: list[str], start: int) -> int | None:
    first = block[0]
    for i in range(start, len(lines) - len(block) + 1):
        if lines[i] == first and lines[i : i + len(block)] == block:
            return i
    return None
