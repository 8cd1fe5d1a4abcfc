"""The source view of a compile: the user files behind its final traces, each line with the
forward ops, backward ops and fusions it made, and the keys that link ops to lines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from provenance.core.record import Kind
from provenance.report.analyze.prov_table import ProvTable
from provenance.report.model import (
    LINE,
    PROV,
    CompileSummary,
    FrameRef,
    N,
    SourceFileView,
    SourcePage,
    SourcePane,
    TraceView,
)

if TYPE_CHECKING:
    from provenance.report.analyze.ports import SourceLines

__all__ = ["source_view"]

MAX_LINE_OPS = 12  # ops quoted per line and kind in `line_ops` (the counts are complete)
MAX_LINES = 2000  # lines kept in `line_ops`


def source_view(summary: CompileSummary, finals: list[TraceView], table: ProvTable,
                sources: SourceLines, line_time: dict[tuple[str, int], Any] | None = None,
                line_ops: dict[tuple[str, int], list] | None = None) -> SourcePage:
    """The user files behind the final traces, each line with what it produced (and with
    `line_time`, a profiled compile's (path, line) -> model.LineTime, what it cost). With
    `line_ops`, also fills it (see _quote): (path, line) -> what the final traces made there (a
    ThunderFX piece: its graph's page shows every piece's)."""
    provs = table.closure({op[PROV] for view in finals for op in view.ops if op[PROV] is not None})
    files: dict[str, int] = {}
    quoted: dict[str, dict[int, str]] = {}
    wanted: dict[str, set[int]] = {}
    keys: dict[int, list[list[int]]] = {}  # prov id -> [[file index, line], ...], direct first

    paths = table.paths

    def key_of(frame: FrameRef) -> list[int]:
        path = paths[frame.path]
        if path not in files:
            files[path] = len(files)
            quoted[path], wanted[path] = {}, set()
        quoted[path].setdefault(frame.line, frame.text)
        return [files[path], frame.line]

    # prov id -> the lines an op counts at: its user line, and its module line where that differs
    # (a line of modeling_llama.py lights up the ops made through it in a helper)
    direct_keys: dict[int, list[tuple[int, int]]] = {}
    for prov_id, info in provs.items():
        frames = table.user_frames(info)
        if frames:
            keys[prov_id] = [key_of(f) for f in frames]
            wanted[paths[frames[0].path]].add(frames[0].line)
            direct_keys[prov_id] = [tuple(keys[prov_id][0])]
            if info.module_frame is not None:
                module_key = key_of(info.module_frame)
                wanted[paths[info.module_frame.path]].add(info.module_frame.line)
                if module_key not in keys[prov_id]:
                    keys[prov_id].insert(1, module_key)
                direct_keys[prov_id].append(tuple(module_key))
    counts: dict[tuple[int, int], list[int]] = {}
    path_of = {index: path for path, index in files.items()}
    panes = []
    counted: dict[Any, tuple[int | None, tuple]] = {}  # prov id -> (its column, None: the trace's; its lines)
    for view in finals:
        slot = 0 if view.list == "computation" else 1
        for op in view.ops:
            prov = op[PROV]
            found = counted.get(prov)
            if found is None:  # a record's ops count at the same lines: worked out once per record
                info = provs.get(prov) if prov is not None else None
                if info is None or info.kind == Kind.BOOKKEEPING:
                    found = (None, ())
                elif info.kind == Kind.FUSION:
                    found = (2, tuple({k for m in info.members for k in direct_keys.get(m, ())}))
                else:
                    found = (None, tuple(set(direct_keys.get(prov, ()))))
                counted[prov] = found
            column = slot if found[0] is None else found[0]
            for key in found[1]:
                counts.setdefault(key, [0, 0, 0])[column] += 1
                if line_ops is not None:
                    _quote(line_ops, (path_of[key[0]], key[1]), column, view, op, key[0],
                           quoted[path_of[key[0]]].get(key[1], ""))
        panes.append(SourcePane("forward" if slot == 0 else "backward", view))
    made = [0] * len(files)  # ops per file, in one pass over the lines (sorted by it: the model's files first)
    for (index, _line), c in counts.items():
        made[index] += c[0] + c[1] + c[2]
    order = sorted(files, key=lambda p: -made[files[p]])
    # each file opens at its hottest line: the most time per call where profiled, else the most ops
    hottest: dict[int, tuple[float, int]] = {}
    for (index, line), c in counts.items():
        weight = (line_time[(path_of[index], line)].ms if line_time and (path_of[index], line) in line_time else 0.0,
                  c[0] + c[1] + c[2])
        if index not in hottest or (weight, -line) > (hottest[index][0], -hottest[index][1]):
            hottest[index] = (weight, line)
    shown = []
    for path in order:
        source = sources.get(path, quoted[path], wanted[path])
        top = hottest.get(files[path])
        shown.append(SourceFileView(files[path], path, path.rsplit("/", 1)[-1], source.from_disk, source.ranges,
                                    source.asset, source.data, open_at=top[1] if top is not None else None))
    # A file's lines are the same for every compile that shows it (sent once): what this one adds is data.
    marks: dict[str, dict[str, list]] = {"c": {f"L{k[0]}-{k[1]}": c for k, c in counts.items()}}
    if line_time:
        marks["t"] = _time_marks(line_time, files)
    return SourcePage(summary=summary, files=shown, panes=panes, provs=provs, paths=table.paths_of(provs),
                      line_keys=keys, marks=marks)


def _time_marks(line_time: dict[tuple[str, int], Any], files: dict[str, int]) -> dict[str, list]:
    """The gutter's time per line: [text, heat, title, fusion]. The lines whose time is all in one fusion
    share it: the fusion's time is shown once, at its first line here; its other lines say where."""
    marks: dict[str, list] = {}
    first: dict[str, str] = {}  # fusion -> its first line shown ("model.py:12")
    for (path, line), t in sorted(line_time.items(), key=lambda item: (files.get(item[0][0], -1), item[0][1])):
        if path not in files:
            continue
        text, title = f"{t.ms:.3f}", t.title
        if t.fusion:
            at = first.setdefault(t.fusion, f"{path.rsplit('/', 1)[-1]}:{line}")
            if at != f"{path.rsplit('/', 1)[-1]}:{line}":
                text, title = "", f"{t.fusion}: its time ({t.shared_ms:.3f} ms per call) is shown at {at}"
        marks[f"L{files[path]}-{line}"] = [text, t.heat, title, t.fusion]
    return marks


def _quote(line_ops: dict[tuple[str, int], list], key: tuple[str, int], column: int, view: TraceView, op: Any,
           file_index: int, text: str) -> None:
    """Count the op at its line; quote its code (the first MAX_LINE_OPS of each kind). An entry:
    [counts, forward ops, backward ops, fusions, the line's text, its anchor on this compile's source page]."""
    entry = line_ops.get(key)
    if entry is None:
        if len(line_ops) >= MAX_LINES:
            return
        entry = line_ops[key] = [[0, 0, 0], [], [], [], text, f"L{file_index}-{key[1]}"]
    entry[0][column] += 1
    if len(entry[column + 1]) < MAX_LINE_OPS:
        entry[column + 1].append(" ".join(line.strip() for line in view.lines[op[LINE]:op[LINE] + op[N]])[:200])
