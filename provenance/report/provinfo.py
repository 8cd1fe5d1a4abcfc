"""Provenance records of one log file, as small JSON-able dicts for the pages' scripts.

Labels come from `provenance.annotation` (the same text `provenance.annotate()` prints), applied
to the `Provenance` the reader rebuilds. A malformed record never raises: it becomes a minimal
entry and is counted.
"""

from __future__ import annotations

import os
import zlib
from typing import Any

from markupsafe import escape

from provenance.annotation import header
from provenance.record import Kind, Provenance
from provenance.report.reader import LogFile

__all__ = ["ProvTable", "role_color"]

# Tensor/data-parallel roles get fixed colors; any other role a stable one of the rest.
_ROLE_COLORS = {"column_parallel.pre": 0, "column_parallel.post": 1, "row_parallel.pre": 2,
                "row_parallel.post": 3, "fsdp.unshard": 4, "fsdp.reduce_scatter": 5,
                "ddp.sync_param": 6, "ddp.grad_all_reduce": 7}
N_ROLE_COLORS = 10


def role_color(role: str | None) -> int | None:
    """The palette index (CSS class `role{n}`) of a role: fixed for known roles, else a hash."""
    if not role:
        return None
    color = _ROLE_COLORS.get(role)
    return color if color is not None else 8 + zlib.crc32(role.encode("utf-8", "replace")) % 2


# A frame in the pages' JSON: [path index into ProvTable.paths, line, function, text, user].
PATH, LINE, FUNCTION, TEXT, USER = range(5)
# CSS classes of op kinds: short (every op of every trace carries one), and none of pygments'
_KIND_CLASS = {"op": "qo", "decomposition": "qd", "backward": "qb", "recompute": "qr", "fusion": "qf",
               "bookkeeping": "qk", "pass": "qp", "scope": "qs"}


def ascii_html(text: str) -> str:
    """Escaped, and ASCII if the text is but for the labels' middle dots: an ASCII page is
    joined and written at memcpy speed."""
    return str(escape(text)).replace("\u00b7", "&middot;")


def _valid(frame: Any) -> bool:
    """A frame the pages can place: a file name and a line number."""
    return frame is not None and isinstance(frame.file, str) and type(frame.line) is int


class ProvTable:
    """Compact provenance info by record id, for one log file (record ids are per process)."""

    def __init__(self, log_file: LogFile) -> None:
        self.file = log_file
        self._info: dict[int, dict[str, Any]] = {}
        self._spans: dict[Any, tuple[str, str | None]] = {}
        self.paths: list[str] = []  # the files frames name, each once
        self._path_index: dict[str, int] = {}
        self.malformed = 0

    def _frame(self, frame: Any) -> list:
        index = self._path_index.get(frame.file)
        if index is None:
            index = self._path_index[frame.file] = len(self.paths)
            self.paths.append(frame.file)
        return [index, frame.line, str(frame.function), "" if frame.text is None else str(frame.text), bool(frame.user)]

    def paths_of(self, infos: dict[int, dict[str, Any]]) -> dict[int, str]:
        """The paths the frames of these infos name, by index (what a page's script needs)."""
        used = {f[PATH] for info in infos.values() for f in info["st"]}
        used.update(info["f"][PATH] for info in infos.values() if info.get("f"))
        return {i: self.paths[i] for i in sorted(used)}

    def frame_dict(self, frame: list) -> dict[str, Any]:
        """A frame of an info, for templates."""
        path = self.paths[frame[PATH]]
        return {"file": path, "name": os.path.basename(path), "line": frame[LINE], "fn": frame[FUNCTION],
                "text": frame[TEXT], "user": frame[USER]}

    def op_span(self, prov_id: int | None) -> tuple[str, str | None]:
        """The opening tag of an op with this record in a trace, and its header line as HTML (None
        for bookkeeping and ops without a record), cached: every trace repeats them."""
        found = self._spans.get(prov_id)
        if found is None:
            info = self.info(prov_id)
            if info is None:
                found = ('<span class="op">' if prov_id is None else f'<span class="op" data-p="{prov_id}">', None)
            else:
                classes = "op " + _KIND_CLASS.get(info["k"], "qx")
                if info.get("rc") is not None:
                    classes += f" role{info['rc']}"
                found = (f'<span class="{classes}" data-p="{prov_id}">',
                         None if info["k"] == Kind.BOOKKEEPING else ascii_html(info["h"]))
            self._spans[prov_id] = found
        return found

    def record(self, prov_id: Any) -> Provenance | None:
        if not isinstance(prov_id, int):
            return None
        try:
            return self.file.provenance(prov_id)
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError):
            return None

    def info(self, prov_id: Any) -> dict[str, Any] | None:
        """{"k": kind, "h": header (what provenance.annotate prints), "m": module, "mt": its type,
        "f": user frame, "st": stack, "lin": lineage, "r": role, "rc": role color, "sp": span path,
        "d": derived_from id, "mem": member ids} or None for an unknown id."""
        if not isinstance(prov_id, int):
            return None
        found = self._info.get(prov_id)
        if found is not None:
            return found
        raw = self.file._prov.get(prov_id)
        if raw is None:
            return None
        record = self.record(prov_id)
        try:
            info = self._describe(prov_id, raw, record) if record is not None else None
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError):
            info = None
        if info is None:
            self.malformed += 1
            info = {"id": prov_id, "k": str(raw.get("kind", "?")), "h": "malformed provenance record", "m": None,
                    "mt": None, "f": None, "st": [], "lin": None, "r": None, "rc": None, "sp": None, "d": None,
                    "mem": []}
        self._info[prov_id] = info
        return info

    def closure(self, ids: set[int]) -> dict[int, dict[str, Any]]:
        """Infos of `ids` and of every record they reference (derived_from, members)."""
        out: dict[int, dict[str, Any]] = {}
        todo = [i for i in ids if isinstance(i, int)]
        while todo:
            prov_id = todo.pop()
            if prov_id in out:
                continue
            info = self.info(prov_id)
            if info is None:
                continue
            out[prov_id] = info
            todo.extend(m for m in info["mem"] if m not in out)
            if info["d"] is not None and info["d"] not in out:
                todo.append(info["d"])
        return out

    def _describe(self, prov_id: int, raw: dict, record: Provenance) -> dict[str, Any]:
        user = record.user_frame
        if user is None and record.derived_from is not None:
            user = record.derived_from.user_frame  # a backward op shows its forward op's line
        members = raw.get("members") if isinstance(raw.get("members"), list) else []
        derived = raw.get("derived_from")
        role = None if record.role is None else str(record.role)
        return {
            "id": prov_id, "k": str(record.kind), "h": header(record),
            "m": None if record.module is None else str(record.module),
            "mt": None if record.module_type is None else str(record.module_type),
            "f": self._frame(user) if _valid(user) else None,
            "st": [self._frame(f) for f in record.source if _valid(f)],
            "lin": record.lineage if record.transforms else None,
            "r": role, "rc": role_color(role),
            "sp": "/".join(map(str, record.span.path)) if record.span is not None else None,
            "d": derived if isinstance(derived, int) else None,
            "mem": [m for m in members if isinstance(m, int)],
        }

    def user_frames(self, info: dict[str, Any]) -> list[dict[str, Any]]:
        """The user frames of a record (innermost first); a backward record without source
        uses its forward record's."""
        frames = [f for f in info["st"] if f[USER]]
        if not frames and info["d"] is not None:
            forward = self.info(info["d"])
            if forward is not None and forward is not info:
                frames = [f for f in forward["st"] if f[USER]]
        return frames
