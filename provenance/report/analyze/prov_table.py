"""Provenance records of one log file as the pages show them (model.ProvInfo).

Labels come from `provenance.core.annotation` (the same text `provenance.annotate()` prints), applied
to the `Provenance` the reader rebuilds. A malformed record never raises: it becomes a minimal
entry and is counted.
"""

from __future__ import annotations

import os
import zlib
from typing import Any

from provenance.core.annotation import header
from provenance.core.attribution import line_frame, module_line_frame
from provenance.core.record import Provenance
from provenance.report.model import FrameRef, ProvInfo, StackFrame
from provenance.report.read.coerce import UNUSABLE
from provenance.report.read.log_file import LogFile

__all__ = ["ProvTable", "role_color"]

# Tensor/data-parallel roles get fixed colors; any other role a stable one of the rest.
_ROLE_COLORS = {"column_parallel.pre": 0, "column_parallel.post": 1, "row_parallel.pre": 2,
                "row_parallel.post": 3, "fsdp.unshard": 4, "fsdp.reduce_scatter": 5,
                "ddp.sync_param": 6, "ddp.grad_all_reduce": 7}
N_ROLE_COLORS = 10  # role0 .. role9 in the stylesheet: the eight above and two for the rest


def role_color(role: str | None) -> int | None:
    """The palette index (CSS class `role{n}`) of a role: fixed for known roles, else a hash."""
    if not role:
        return None
    color = _ROLE_COLORS.get(role)
    rest = N_ROLE_COLORS - len(_ROLE_COLORS)
    return color if color is not None else len(_ROLE_COLORS) + zlib.crc32(role.encode("utf-8", "replace")) % rest


def _valid(frame: Any) -> bool:
    """A frame the pages can place: a file name and a line number."""
    return frame is not None and isinstance(frame.file, str) and type(frame.line) is int


class ProvTable:
    """Compact provenance info by record id, for one log file (record ids are per process)."""

    def __init__(self, log_file: LogFile) -> None:
        self.file = log_file
        self._info: dict[int, ProvInfo] = {}
        self.paths: dict[int, str] = {}  # the files the frames made so far name, by their number in the log
        self.malformed_ids: set[int] = set()  # records that could not be rebuilt

    def _frame(self, frame: Any) -> FrameRef:
        numbers = self.file.paths
        index = numbers.get(frame.file)
        if index is None:  # every frame is numbered as its record is read: not reached
            index = numbers[frame.file] = len(numbers)
        self.paths[index] = frame.file
        return FrameRef(index, frame.line, str(frame.function), "" if frame.text is None else str(frame.text),
                        bool(frame.user))

    def paths_of(self, infos: dict[int, ProvInfo]) -> dict[int, str]:
        """The paths the frames of these infos name, by index (what a page's script needs)."""
        used = {f.path for info in infos.values() for f in info.stack}
        used.update(info.user_frame.path for info in infos.values() if info.user_frame)
        return {i: self.paths[i] for i in sorted(used)}

    def stack_frame(self, frame: FrameRef) -> StackFrame:
        """A frame of an info, for templates."""
        path = self.paths[frame.path]
        return StackFrame(path, os.path.basename(path), frame.line, frame.function, frame.text, frame.user)

    def record(self, prov_id: Any) -> Provenance | None:
        if not isinstance(prov_id, int):
            return None
        try:
            return self.file.provenance(prov_id)
        except UNUSABLE:
            return None

    def info(self, prov_id: Any) -> ProvInfo | None:
        """The record with this id as the pages show it, or None for an unknown id."""
        if not isinstance(prov_id, int):
            return None
        found = self._info.get(prov_id)
        if found is not None:
            return found
        raw = self.file.prov_record(prov_id)
        if raw is None:
            return None
        record = self.record(prov_id)
        try:
            info = self._describe(prov_id, raw, record) if record is not None else None
        except UNUSABLE:
            info = None
        if info is None:
            self.malformed_ids.add(prov_id)
            info = ProvInfo(id=prov_id, kind=str(raw.get("kind", "?")), header="malformed provenance record",
                            module=None, module_type=None, user_frame=None, module_frame=None, stack=[],
                            lineage=None, role=None,
                            role_color=None, scope=None, derived_from=None, members=[])
        self._info[prov_id] = info
        return info

    def closure(self, ids: set[int]) -> dict[int, ProvInfo]:
        """Infos of `ids` and of every record they reference (derived_from, members)."""
        out: dict[int, ProvInfo] = {}
        todo = [i for i in ids if isinstance(i, int)]
        while todo:
            prov_id = todo.pop()
            if prov_id in out:
                continue
            info = self.info(prov_id)
            if info is None:
                continue
            out[prov_id] = info
            todo.extend(m for m in info.members if m not in out)
            if info.derived_from is not None and info.derived_from not in out:
                todo.append(info.derived_from)
        return out

    def _describe(self, prov_id: int, raw: dict, record: Provenance) -> ProvInfo:
        user = line_frame(record)  # a backward op shows its forward op's line
        module_line = module_line_frame(record)
        members = raw.get("members") if isinstance(raw.get("members"), list) else []
        derived = raw.get("derived_from")
        role = None if record.role is None else str(record.role)
        return ProvInfo(
            id=prov_id, kind=str(record.kind), header=header(record),
            module=None if record.module is None else str(record.module),
            module_type=None if record.module_type is None else str(record.module_type),
            user_frame=self._frame(user) if _valid(user) else None,
            module_frame=self._frame(module_line) if _valid(module_line) and module_line != user else None,
            stack=[self._frame(f) for f in record.source if _valid(f)],
            lineage=record.lineage if record.transforms else None,
            role=role, role_color=role_color(role),
            scope="/".join(map(str, record.span.path)) if record.span is not None else None,
            derived_from=derived if isinstance(derived, int) else None,
            members=[m for m in members if isinstance(m, int)],
        )

    def user_frames(self, info: ProvInfo) -> list[FrameRef]:
        """The user frames of a record (innermost first); a backward record without source
        uses its forward record's."""
        frames = [f for f in info.stack if f.user]
        if not frames and info.derived_from is not None:
            forward = self.info(info.derived_from)
            if forward is not None and forward is not info:
                frames = [f for f in forward.stack if f.user]
        return frames
