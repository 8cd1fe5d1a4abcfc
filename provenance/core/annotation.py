"""A trace's Python source with provenance comments.

Above each top-level bound symbol whose record differs from the previous one: one header line
(module, user file:line and source text, lineage, role). Inside subsymbol comment blocks: a short
tag per line. The generated code itself is Thunder's, untouched.

This module reads records only: how a trace prints (Thunder's printing, with each op's place) is
the `Printer` its caller passes, provenance.thunder.printing (`provenance.annotate` does).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol

from provenance.core.record import Kind, Provenance, of

__all__ = ["THUNDER_SOURCE_COMMENT", "Printer", "annotate", "group_header", "header", "tag"]


class Printer(Protocol):
    """How a trace prints: provenance.thunder.printing."""

    def layout(self, trace: Any, *, print_depth: int = 1) -> tuple[list[str], list[tuple[Any, int, int]]]: ...

    def tracing_context(self, trace: Any) -> AbstractContextManager: ...


def _where(record: Provenance) -> str | None:
    frame = record.user_frame or (record.source[0] if record.source else None)
    return f"{os.path.basename(frame.file)}:{frame.line}" if frame else None


def header(record: Provenance | None) -> str:
    """One line describing a record, e.g. `h.0.mlp.c_fc (Linear) · model.py:81 `x = ...` · grad`
    (the module line where it is not the user line: `· module line modeling_llama.py:294`; under
    ThunderFX the FX node: `· fx linear_2`)."""
    if record is None:
        return "no provenance"
    if record.kind == Kind.BOOKKEEPING:
        return f"bookkeeping · made by {' > '.join(record.transforms) or '?'}"
    if record.kind == Kind.FUSION:
        return fusion_header(record)
    parts: list[str] = []
    if record.module is not None:
        parts.append(f"{record.module or '<root>'} ({record.module_type})")
    where = _where(record)
    if where:
        frame = record.user_frame
        parts.append(f"{where} `{frame.text}`" if frame is not None and frame.text else where)
    module_frame = record.module_frame
    if module_frame is not None and module_frame is not record.user_frame:  # the module's own line
        parts.append(f"module line {os.path.basename(module_frame.file)}:{module_frame.line}")
    if record.fx_node is not None:  # ThunderFX: the FX node between the user's line and the op
        parts.append(f"fx {record.fx_node}")
    if record.transforms:
        parts.append(record.lineage)
    elif record.kind not in (Kind.OP, Kind.DECOMPOSITION):
        parts.append(record.kind)
    if record.role:
        parts.append(f"role={record.role}")
    if record.span is not None and record.span.name not in record.transforms:
        parts.append(f"scope={'/'.join(record.span.path)}")
    return " · ".join(parts) or record.kind


def fusion_header(record: Provenance) -> str:
    """`fusion · lines model.py:12,14 · modules fc1 (Linear), <root> (Net) · recompute: 1`."""
    lines: dict[str, list[int]] = {}
    modules: dict[str, None] = {}
    for member in record.members:
        frame = member.user_frame
        if frame is not None:
            lines.setdefault(os.path.basename(frame.file), [])
            if frame.line not in lines[os.path.basename(frame.file)]:
                lines[os.path.basename(frame.file)].append(frame.line)
        if member.module is not None:
            modules.setdefault(f"{member.module or '<root>'} ({member.module_type})", None)
    parts = [f"fusion of {len(record.members)} provenance(s)"]
    if lines:
        parts.append("lines " + ", ".join(f"{f}:{','.join(map(str, sorted(ls)))}" for f, ls in lines.items()))
    if modules:
        parts.append("modules " + ", ".join(modules))
    derived = sorted({m.transforms[-1] for m in record.members if m.kind in (Kind.BACKWARD, Kind.RECOMPUTE)})
    if derived:
        parts.append("with " + "/".join(derived))
    if record.role:
        parts.append(f"role={record.role}")
    return " · ".join(parts)


def group_header(record: Provenance) -> str:
    """The header of a block of ops sharing a role: `row_parallel.post · net2 (Linear) · file.py:27`."""
    parts = [record.role or "?"]
    if record.module is not None:
        parts.append(f"{record.module or '<root>'} ({record.module_type})")
    where = _where(record)
    if where:
        parts.append(where)
    if record.kind in (Kind.BACKWARD, Kind.RECOMPUTE):
        parts.append(record.transforms[-1])
    return " · ".join(parts)


def tag(record: Provenance | None) -> str:
    """A short per-line tag: `[model.py:81]`, `[grad model.py:81]`, `[del_last_used]`."""
    if record is None:
        return "[?]"
    where = _where(record)
    if record.kind == Kind.BOOKKEEPING or where is None:
        return f"[{' > '.join(record.transforms) or record.kind}]"
    prefix = f"{record.transforms[-1]} " if record.transforms else ""
    return f"[{prefix}{where}]"


def _bsym_lines(bsym: Any, indent: int, commented: bool, depth: int) -> Iterator[str]:
    """Thunder's own printing of a symbol and its subsymbols (BoundSymbol.python), tagged."""
    own = bsym.python(indent, commented=commented, print_depth=1)
    record = of(bsym)
    if commented:
        own = [f"{line}  {tag(record)}" for line in own]
    yield from own
    if depth == 1:
        return
    for sub in bsym.subsymbols:
        yield from _bsym_lines(sub, indent + 1, True, depth - 1)


# Thunder's own "# file:line: <tab>source" comments in the first trace: our headers say more
# (annotate drops them; the report's pages hide them behind the headers).
THUNDER_SOURCE_COMMENT = re.compile(r"^\s*# .+:\d+: \t")


def annotate(trace: Any, printer: Printer, *, print_depth: int = -1, group: bool = False) -> str:
    """`trace`'s Python source (as `print(trace)` shows it) with provenance comments.

    `print_depth` as in Thunder's `TraceCtx.python`: -1 shows every level of subsymbols.
    `group=True`: a run of consecutive ops sharing a distributed role is one labelled block
    (`# row_parallel.post · net2 (Linear) · model.py:27`), so the ops a transform inserted read
    as one step. Bookkeeping statements (del, return, unpack) get a short trailing tag instead
    of a header, so they never interrupt the op headers. `printer`: how the trace prints.
    """
    text, placed = printer.layout(trace, print_depth=print_depth)
    out: list[str] = []
    pos = 0
    previous = None  # the last header printed: unchanged headers are not repeated
    with printer.tracing_context(trace):
        for bsym, start, length in placed:
            out.extend(line for line in text[pos:start] if line and not THUNDER_SOURCE_COMMENT.match(line))
            record = of(bsym)
            lines = list(_bsym_lines(bsym, 1, False, print_depth))
            if record is not None and record.kind == Kind.BOOKKEEPING:
                _tag_statement(lines, len(bsym.python(1, print_depth=1)), record)
            elif (text_ := group_header(record) if group and record and record.role else header(record)) != previous:
                first = text[start]
                out.append(f"{first[: len(first) - len(first.lstrip())]}# ── {text_}")
                previous = text_
            out.extend(lines)
            pos = start + length
    out.extend(text[pos:])
    return "\n".join(out)


def _tag_statement(lines: list[str], own: int, record: Provenance) -> None:
    """Append `# tag` to the statement's last code line (never after a line continuation)."""
    for i in range(own - 1, -1, -1):
        stripped = lines[i].strip()
        if stripped and not stripped.startswith("#"):
            if not stripped.endswith("\\") and "#" not in stripped:
                lines[i] = f"{lines[i]}  # {tag(record)}"
            return
