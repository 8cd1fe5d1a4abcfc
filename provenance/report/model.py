"""The render model: what the templates and compile_directory.json are made from.

Plain dataclasses with readable names, built by run.py (the run), compiles.py (a compile) and the
modules they call; templates read their attributes. Two views leave Python, each made in one
place here: compile_directory.json's entries, and the compact JSON of provenance records that
the pages' script (report.js) reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["FrameRef", "ProvInfo", "StackFrame", "site_of"]


class FrameRef(NamedTuple):
    """A frame of a provenance record; `path` indexes its log's ProvTable.paths (a file is named
    once per log, not once per frame)."""

    path: int
    line: int
    function: str
    text: str
    user: bool  # False for library frames (torch, thunder, ...)


@dataclass(slots=True)
class StackFrame:
    """A frame as the pages show it."""

    file: str
    name: str  # the file's base name
    line: int
    fn: str
    text: str
    user: bool


def site_of(stack: list[StackFrame]) -> str | None:
    """`file:line` of a stack's outermost frame."""
    return f"{stack[-1].name}:{stack[-1].line}" if stack else None


@dataclass(slots=True)
class ProvInfo:
    """A provenance record as the pages show it."""

    id: int
    kind: str
    header: str  # the line provenance.annotate() prints above its ops
    module: str | None
    module_type: str | None
    user_frame: FrameRef | None  # where the user's code made it (a backward op: its forward op's line)
    stack: list[FrameRef]  # innermost first
    lineage: str | None  # e.g. grad(row_parallel(op))
    role: str | None  # distributed role
    role_color: int | None  # its palette index (CSS class role{n})
    scope: str | None  # the provenance span path, a/b/c
    derived_from: int | None  # record id
    members: list[int]  # a fusion's member record ids
    _compact: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def compact(self) -> dict[str, Any]:
        """The record for the pages' script, report.js: one-letter keys, frames as lists (a page
        embeds hundreds of records). Made once per record."""
        if self._compact is None:
            self._compact = {
                "id": self.id, "k": self.kind, "h": self.header, "m": self.module, "mt": self.module_type,
                "f": None if self.user_frame is None else list(self.user_frame),
                "st": [list(f) for f in self.stack], "lin": self.lineage, "r": self.role, "rc": self.role_color,
                "sp": self.scope, "d": self.derived_from, "mem": self.members}
        return self._compact


def script_data(provs: dict[int, ProvInfo], paths: dict[int, str]) -> dict[str, Any]:
    """The records a page's script looks up by id, and the paths their frames index."""
    return {"provs": {prov_id: info.compact() for prov_id, info in provs.items()}, "paths": paths}
