"""ThunderFX in the report: the Dynamo graphs (`dynamo_graph` records), the pieces Thunder's
splitter cut them into and why (split reasons), Dynamo's graph breaks (`graph_break`), and each
piece's compiles (`compile_start.piece`).

The run hands the records here as it reads them; `finish` links breaks to the graphs they ended
(same log and Dynamo compile id) and builds each graph's source view: the user lines of all its
pieces, each with what every Thunder piece's final traces made there (source_view's `line_ops`,
carried by the piece compile's summary) and which lines ran in a torch fallback, and why.
Records are untrusted: a field of the wrong type is unknown here (read/validate.py counted it), and
what is kept is bounded (MAX_GRAPHS, MAX_BREAKS: the rest are counted).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from provenance.core.record import user_frame
from provenance.dynamo.graphs import untimed
from provenance.log.events import FRAME_OUTCOMES, MAX_PHASES
from provenance.report.analyze.compile import frames_of
from provenance.report.analyze.phases import fusion_phase, phase_view, phases_of
from provenance.report.analyze.torch_trace import TorchTraces
from provenance.report.analyze.torch_trace import view as torch_view
from provenance.report.model import (
    BackendFailureView,
    CompileSummary,
    DynamoRecompileView,
    ExecutorCompileView,
    FrameCompileView,
    FxRun,
    GraphBreakView,
    GraphView,
    GuardFailureView,
    PieceView,
    SourceFileView,
    SplitView,
    TorchTraceView,
)
from provenance.report.numbers import as_int
from provenance.report.read.coerce import hashable
from provenance.report.read.processes import RunLog

if TYPE_CHECKING:
    from provenance.report.analyze.ports import SourceLines

__all__ = ["FxGraphs"]

MAX_GRAPHS = 2000  # graphs kept per run; more are counted
MAX_BREAKS = 2000
MAX_FRAMES = 4000  # frame compiles kept per run
MAX_FAILURES = 8  # failed backend calls kept per frame compile
MAX_PIECES = 256  # per graph
MAX_REASON = 4000  # characters of a reason or message kept
MAX_QUOTED = 16 << 20  # characters of op code kept for the graphs' source views; then counts only
MAX_WHY = 2  # split reasons quoted on each line of a fallback piece (the piece's row lists them all)
MAX_WHY_TEXT = 200  # characters of each


def _text(value: Any, limit: int = MAX_REASON) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _opt(value: Any) -> str | None:
    return value[:MAX_REASON] if isinstance(value, str) else None


def _split(data: Any) -> SplitView | None:
    if not isinstance(data, dict):
        return None
    frames = frames_of(data.get("frames"))
    return SplitView(piece=_opt(data.get("piece")), kind=_text(data.get("kind"), 200) or "?",
                     info=_text(data.get("info")), exception=_opt(data.get("exception")), node=_opt(data.get("node")),
                     frame=user_frame(frames), module=_opt(data.get("module")),
                     module_type=_opt(data.get("module_type")))


def _changes(raw: Any) -> list[tuple[str, str, str]]:
    return [(str(c[0])[:200], str(c[1])[:200], str(c[2])[:200]) for c in (raw if isinstance(raw, list) else [])[:64]
            if isinstance(c, list) and len(c) == 3]


def _recompile(data: Any) -> DynamoRecompileView | None:
    """dynamo_graph.recompile -> the view (None when absent or not an object)."""
    if not isinstance(data, dict):
        return None
    raw = data.get("failures") if isinstance(data.get("failures"), list) else []
    failures = [GuardFailureView(_opt(f.get("entry")), _opt(f.get("subject")), _changes(f.get("changes")),
                                 _text(f.get("reason")), _text(f.get("guard")))
                for f in raw[:64] if isinstance(f, dict)]
    function, call = frames_of([data.get("function")]), frames_of([data.get("call")])
    return DynamoRecompileView(_text(data.get("reason")) or "(no reason in the log)", function[0] if function else None,
                               call[0] if call else None, failures, as_int(data.get("more")) or 0)


class FxGraphs:
    """Collects the run's ThunderFX records as the logs are read (run.py)."""

    def __init__(self) -> None:
        self._graphs: dict[tuple[int, Any], GraphView] = {}  # (log, graph number) -> graph
        self._breaks: list[GraphBreakView] = []
        self._frames: list[FrameCompileView] = []
        self.dropped_frames = 0
        self._pieces: dict[str, tuple[int, int, str]] = {}  # compile page key -> (log, graph, piece)
        self._piece_keys: dict[tuple[int, Any], str] = {}  # (log, compile id) -> the latest piece compile's key
        self._compiled: dict[str, CompileSummary] = {}  # compile page key -> a piece compile's summary
        self._lines: dict[str, dict] = {}  # compile page key -> its piece_lines
        self.dropped_graphs = self.dropped_breaks = 0
        self.torch_unmatched = self.torch_dropped = 0  # torch_trace records: of no graph, not kept
        self._unnumbered = 0
        self._quoted = 0  # characters of op code kept (MAX_QUOTED)
        self._torch = TorchTraces()

    def graph(self, log: RunLog, data: dict) -> None:
        number = as_int(data.get("graph"))
        if number is None or number < 0:
            number, self._unnumbered = -1 - self._unnumbered, self._unnumbered + 1
        if (log.index, number) in self._graphs or len(self._graphs) >= MAX_GRAPHS:
            self.dropped_graphs += 1  # the writer numbers each graph once: a repeat is not a graph of its own
            return
        pieces = []
        for raw in (data.get("pieces") if isinstance(data.get("pieces"), list) else [])[:MAX_PIECES]:
            if isinstance(raw, dict):
                compiler = _text(raw.get("compiler"), 40) or "?"
                pieces.append(PieceView(name=_text(raw.get("name"), 200) or "?", index=as_int(raw.get("index")),
                                        compiler=compiler, nodes=as_int(raw.get("nodes")),
                                        frames=frames_of(raw.get("frames"))))
        raw_reasons = data.get("reasons") if isinstance(data.get("reasons"), list) else []
        reasons: list[SplitView] = []
        seen: set[Any] = set()
        for reason in map(_split, raw_reasons[:4 * MAX_PIECES]):
            if reason is None:
                continue
            key = (reason.piece, reason.kind, reason.info, reason.exception, reason.node,
                   reason.frame and (reason.frame.file, reason.frame.line))
            if key not in seen:  # Thunder lists some reasons twice (a node's, once per use)
                seen.add(key)
                reasons.append(reason)
        by_name = {p.name: p for p in pieces}
        for reason in reasons:
            piece = by_name.get(reason.piece) if reason.piece is not None else None
            if piece is not None:
                piece.reasons.append(reason)
        # unique: one graph per (log, number), and logs' prefixes differ; made from integers only
        key = f"{log.prefix}-g{number}" if number >= 0 else f"{log.prefix}-gx{-1 - number}"
        self._graphs[(log.index, number)] = GraphView(
            key=key, log=log.index, rank_label=log.page_label, number=number if number >= 0 else None,
            compile_id=_opt(data.get("compile_id")), start_ns=as_int(data.get("start_ns")),
            time_ns=as_int(data.get("time_ns")), pieces=pieces, reasons=reasons,
            dropped_pieces=max(0, len(data.get("pieces") or []) - MAX_PIECES) if isinstance(data.get("pieces"), list)
            else 0, dynamo_start_ns=as_int(data.get("dynamo_start_ns")), recompile=_recompile(data.get("recompile")))
        self.graph_phases(log, {"graph": number, "phases": data.get("phases")})

    def graph_phases(self, log: RunLog, data: dict) -> None:
        """Phases of a graph's compile (its dynamo_graph's, or a later graph_phases record)."""
        graph = self._graphs.get((log.index, as_int(data.get("graph"))))
        if graph is None or not isinstance(data.get("phases"), list):
            return  # a graph not kept (or not logged): nothing to add them to
        _, found = phases_of({"start_ns": 0, "end_ns": 0, "phases": data["phases"][:MAX_PHASES]})
        graph.phases.extend(found[:max(0, MAX_PHASES - len(graph.phases))])

    def graph_break(self, log: RunLog, data: dict) -> None:
        if len(self._breaks) >= MAX_BREAKS:
            self.dropped_breaks += 1
            return
        stack = frames_of(data.get("frames"))[:64]
        reason = _text(data.get("reason"))
        self._breaks.append(GraphBreakView(rank_label=log.page_label, log=log.index,
                                           compile_id=_opt(data.get("compile_id")),
                                           summary=reason.strip().partition("\n")[0][:300] or "?", reason=reason,
                                           frame=user_frame(stack), stack=stack,
                                           call_stack=frames_of(data.get("call_stack"))[:64]))

    def frame_compile(self, log: RunLog, data: dict) -> None:
        compile_id, start, end = _opt(data.get("compile_id")), as_int(data.get("start_ns")), as_int(data.get("end_ns"))
        if compile_id is None or start is None or end is None or end < start:
            return  # read/validate.py counted the malformed record
        if len(self._frames) >= MAX_FRAMES:
            self.dropped_frames += 1
            return
        failures = []
        raw = data.get("failures") if isinstance(data.get("failures"), list) else []
        for failure in raw[:MAX_FAILURES]:
            if not isinstance(failure, dict):
                continue
            stack = frames_of(failure.get("frames"))[:64]
            begun, ended = as_int(failure.get("start_ns")), as_int(failure.get("end_ns"))
            failures.append(BackendFailureView(
                _text(failure.get("error")) or "(no error in the log)", user_frame(stack), stack,
                (ended - begun) / 1e9 if begun is not None and ended is not None and ended >= begun else 0.0))
        stack = frames_of(data.get("error_frames"))[:64]
        function = frames_of([data.get("function")])
        outcome = _text(data.get("outcome"), 40)
        self._frames.append(FrameCompileView(
            rank_label=log.page_label, log=log.index, compile_id=compile_id,
            outcome=outcome if outcome in FRAME_OUTCOMES else "?", function=function[0] if function else None,
            start_ns=start, end_ns=end, graph_number=as_int(data.get("graph")), failures=failures,
            more_failures=max(0, len(raw) - MAX_FAILURES) + max(0, as_int(data.get("more_failures")) or 0),
            breaks=max(0, as_int(data.get("breaks")) or 0), error=_opt(data.get("error")),
            error_frame=user_frame(stack), error_stack=stack))

    def torch_trace(self, log: RunLog, data: dict) -> None:
        self._torch.add(log.index, data)

    def piece_compile(self, log: RunLog, key: str, start: dict) -> None:
        """A compile_start: if it compiles a piece, remember which (its summary comes later)."""
        piece = start.get("piece")
        if isinstance(piece, dict) and (log.index, as_int(piece.get("graph"))) in self._graphs \
                and isinstance(piece.get("name"), str):  # a graph not kept (or not logged) lists nothing
            self._pieces[key] = (log.index, piece["graph"], piece["name"])
            self._piece_keys[(log.index, hashable(start.get("compile")))] = key

    def untimed(self, log: RunLog, start: dict) -> str | None:
        """A ThunderFX piece's compile (its compile_start): what its profile does not time, the torch
        pieces of its graph (provenance.dynamo.graphs.untimed); None for a graph with none."""
        piece = start.get("piece")
        graph = self._graphs.get((log.index, as_int(piece.get("graph")))) if isinstance(piece, dict) else None
        return _untimed(graph) if graph is not None else None

    def untimed_notes(self) -> list[str]:
        """Every graph's torch pieces, for time.html (once the logs are read)."""
        return [note for g in self._graphs.values() if (note := _untimed(g)) is not None]

    def executor_compile(self, log: RunLog, compile_id: Any, found: ExecutorCompileView) -> None:
        """A fusion an executor compiled at its first call: if a piece's, a phase of its graph's compile
        (the graph's first step runs it; by then other pieces may have compiled, so not left to the
        piece's compile, which keeps only those before the next compile)."""
        key = self._piece_keys.get((log.index, hashable(compile_id)))
        graph = self._graphs.get(self._pieces[key][:2]) if key is not None else None
        if graph is not None and len(graph.phases) < MAX_PHASES:
            graph.phases.append(fusion_phase(found))

    def compiled(self, summary: CompileSummary) -> None:
        """A compile's summary (run._finished, in whatever order workers deliver them): a piece's
        is listed under its piece at the end."""
        lines, summary.piece_lines = summary.piece_lines, None
        if summary.key in self._pieces:
            self._compiled[summary.key] = summary
            if isinstance(lines, dict):
                self._lines[summary.key] = lines
                self._quoted += sum(len(code) for entry in lines.values() for quoted in entry[1:4] for code in quoted)
                if self._quoted > MAX_QUOTED:  # the counts stay; the page says how many ops are not quoted
                    for entry in lines.values():
                        entry[1:4] = [], [], []

    @classmethod
    def merged(cls, logs: list[FxGraphs]) -> FxGraphs:
        """The run's: each log's (kept apart while the logs are read: analyze/run.py's LogPart), in
        order, within the run's bounds."""
        run = cls()
        for part in logs:
            run.dropped_graphs += part.dropped_graphs
            run.dropped_breaks += part.dropped_breaks
            run.dropped_frames += part.dropped_frames
            room = max(0, MAX_FRAMES - len(run._frames))
            run._frames.extend(part._frames[:room])
            run.dropped_frames += max(0, len(part._frames) - room)
            for key, graph in part._graphs.items():
                if len(run._graphs) < MAX_GRAPHS:
                    run._graphs[key] = graph
                else:
                    run.dropped_graphs += 1
            room = max(0, MAX_BREAKS - len(run._breaks))
            run._breaks.extend(part._breaks[:room])
            run.dropped_breaks += max(0, len(part._breaks) - room)
            run._pieces.update(part._pieces)
            run._piece_keys.update(part._piece_keys)
            run._compiled.update(part._compiled)
            run._lines.update(part._lines)
            run._torch.absorb(part._torch)
        return run

    # -- the end of the run -------------------------------------------------------------------
    def timed_graphs(self) -> list[GraphView]:
        """The graphs with a whole-compile timing (their phases in time order, from Dynamo's
        start, else the first phase, to the last piece compiled); for Perfetto and the pages."""
        timed = []
        for graph in self._graphs.values():
            if not graph.phases:
                continue
            graph.phases.sort(key=lambda p: (p.start_ns, p.depth))
            start = min(graph.phases[0].start_ns, graph.dynamo_start_ns or graph.phases[0].start_ns)
            graph.timing = phase_view((start, max(p.end_ns for p in graph.phases)), graph.phases, [])
            timed.append(graph)
        return timed

    def finish(self, sources: SourceLines) -> FxRun | None:
        if not self._graphs and not self._breaks and not self._frames:
            return None
        graphs = sorted(self._graphs.values(), key=lambda g: (g.log, g.start_ns or 0, g.number or 0, g.key))
        by_id: dict[tuple[int, str | None], GraphView] = {}
        for graph in graphs:
            by_id.setdefault((graph.log, graph.compile_id), graph)
        self._skipped_breaks()
        for found in self._breaks:
            graph = by_id.get((found.log, found.compile_id)) if found.compile_id is not None else None
            if graph is not None:
                found.graph = graph
                graph.breaks.append(found)
        outcomes = {(f.log, f.compile_id): f.outcome for f in self._frames}
        for found in self._breaks:
            if found.graph is None:
                found.outcome = outcomes.get((found.log, found.compile_id)) if found.compile_id is not None else None
        for frame in self._frames:
            if frame.graph_number is not None:
                frame.graph = self._graphs.get((frame.log, frame.graph_number))
        for key, (log, number, name) in self._pieces.items():
            summary, graph = self._compiled.get(key), self._graphs.get((log, number))
            piece = next((p for p in graph.pieces if p.name == name), None) if graph is not None else None
            if summary is not None and piece is not None:
                piece.compiles.append(summary)
        self.timed_graphs()
        self._torch_views(graphs)
        for graph in graphs:
            for piece in graph.pieces:
                piece.compiles.sort(key=lambda s: (as_int(s.compile) is None, as_int(s.compile) or 0, s.key))
            self._source(graph, sources)
        self._lines.clear()
        self._compiled.clear()
        frames = sorted(self._frames, key=lambda f: (f.log, f.start_ns))
        return FxRun(graphs, self._breaks, self.dropped_graphs, self.dropped_breaks, frames, self.dropped_frames)

    def _skipped_breaks(self) -> None:
        """A frame Dynamo gave up on at a graph break it raised (Unsupported: no restart, so torch logged no
        break record) is a break too, at the line its error names."""
        for frame in self._frames:
            if frame.outcome == "skipped" and frame.error and not frame.breaks and len(self._breaks) < MAX_BREAKS:
                stack = frame.error_stack
                self._breaks.append(GraphBreakView(rank_label=frame.rank_label, log=frame.log,
                                                   compile_id=frame.compile_id, summary=frame.summary,
                                                   reason=frame.error, frame=frame.error_frame, stack=stack))

    def _torch_views(self, graphs: list[GraphView]) -> None:
        """Each graph's view of torch's trace of its frame compile, the guards later calls failed marked."""
        failed: dict[tuple[int, str | None], list] = {}  # (log, compile id) -> failures naming that entry
        for graph in graphs:
            for failure in graph.recompile.failures if graph.recompile is not None else ():
                failed.setdefault((graph.log, failure.entry), []).append(failure)
        for graph in graphs:
            frame = self._torch.pop(graph.log, graph.compile_id)
            if frame is not None:
                pieces = [(p.start_ns, p.end_ns, p.detail) for p in graph.phases
                          if p.name == "inductor_compile" and p.detail]
                graph.torch = torch_view(frame, failed.get((graph.log, graph.compile_id), []), pieces)
                thunder = [c for p in graph.pieces if p.thunder for c in p.compiles]
                if thunder:  # Thunder compiles a piece for the sizes it is given: a dynamic dim is fixed there
                    graph.torch.fixed = sorted({f"{s.subject} ({s.symbol})" if s.symbol else s.subject
                                                for s in graph.torch.shapes if s.kind == "symbol" and s.subject})
                    graph.torch.recompiled = sum(1 for c in thunder if c.recompile_reason)
        self._also_changed(graphs)
        for compiled in self._frames:  # a frame compile that made no graph: its own view (its error, metrics)
            if compiled.graph is None and (found := self._torch.pop(compiled.log, compiled.compile_id)) is not None:
                compiled.torch = torch_view(found, [])
        self.torch_unmatched = len(self._torch.frames)  # frame compiles of no ThunderFX graph (torch.compile's)
        self.torch_dropped = self._torch.dropped
        self._torch.frames.clear()

    @staticmethod
    def _also_changed(graphs: list[GraphView]) -> None:
        """What else changed since the cached graph a recompile failed first: torch's guards stop at the first
        failure (grad mode, at an eval), so an input's new size shows only in the two graphs' tensor guards."""
        by_id = {(g.log, g.compile_id): g for g in graphs}
        for graph in graphs:
            why = graph.recompile
            old = by_id.get((graph.log, why.failures[0].entry)) if why is not None and why.failures else None
            if why is None or old is None or old.torch is None or graph.torch is None:
                continue
            named = {f.subject for f in why.failures if f.changes}
            before, after = _sizes(old.torch), _sizes(graph.torch)
            why.also = [f"{subject}: size {before[subject]} \u2192 {after[subject]}" for subject in before
                        if subject in after and before[subject] != after[subject] and subject not in named][:16]

    def _source(self, graph: GraphView, sources: SourceLines) -> None:
        """The graph's source view: every user line its pieces, split reasons and breaks name."""
        quoted: dict[str, dict[int, str]] = {}
        entries: dict[tuple[str, int], list[dict]] = {}
        counts: dict[tuple[str, int], list[int]] = {}
        marks: dict[tuple[str, int], set[str]] = {}

        def quote(path: str, line: int, text: str) -> tuple[str, int]:
            quoted.setdefault(path, {}).setdefault(line, text)
            return path, line

        for piece in graph.pieces:
            if piece.thunder:
                for summary in piece.compiles:
                    for (path, line), entry in sorted((self._lines.get(summary.key) or {}).items()):
                        key = quote(path, line, entry[4])
                        total = counts.setdefault(key, [0, 0, 0])
                        for i in range(3):
                            total[i] += entry[0][i]
                        href = f"../{summary.pages.source}#{entry[5]}" if summary.pages.source else None
                        entries.setdefault(key, []).append(
                            {"piece": piece.name, "compile": str(summary.compile), "href": href, "counts": entry[0],
                             "forward": entry[1], "backward": entry[2], "fusions": entry[3]})
                for frame in piece.frames:
                    quote(frame.file, frame.line, frame.text)
            else:
                # every line of the piece: a few of its reasons, not all (lines x reasons is unbounded)
                why = [f"{r.kind}: {r.info}"[:MAX_WHY_TEXT] for r in piece.reasons[:MAX_WHY]] or [
                    "(no reason in the log)"]
                if len(piece.reasons) > MAX_WHY:
                    why.append(f"and {len(piece.reasons) - MAX_WHY} more reasons: see the piece {piece.name[:200]} "
                               f"in the table above")
                for frame in piece.frames:
                    key = quote(frame.file, frame.line, frame.text)
                    marks.setdefault(key, set()).add("fallback")
                    entries.setdefault(key, []).append({"piece": piece.name, "fallback": piece.compiler, "why": why})
        for found in graph.breaks:
            if found.frame is not None:
                key = quote(found.frame.file, found.frame.line, found.frame.text)
                marks.setdefault(key, set()).add("break")
                entries.setdefault(key, []).append({"break": found.summary})
        # The files that made the most (the model's, ahead of the library helpers it calls) first
        weight: dict[str, list[int]] = {}
        for (path, _line), total in counts.items():
            weight.setdefault(path, [0, 0])[0] -= sum(total)
        for path, _line in entries:
            weight.setdefault(path, [0, 0])[1] -= 1
        order = sorted(quoted, key=lambda p: (*weight.get(p, (0, 0)), p))
        index_of = {path: index for index, path in enumerate(order)}
        files = [sources.get(path, quoted[path], set(quoted[path]), windows=True) for path in order]
        for (path, line), entry in entries.items():
            if files[index_of[path]].shows(line):
                graph.lines[f"L{index_of[path]}-{line}"] = entry
        graph.marks = {"c": {f"L{index_of[path]}-{line}": total for (path, line), total in counts.items()},
                       "fx": {f"L{index_of[path]}-{line}": " ".join(sorted(found))
                              for (path, line), found in marks.items()}}
        graph.files = [SourceFileView(index, f.path, f.path.rsplit("/", 1)[-1], f.from_disk, f.ranges, f.asset,
                                      f.data) for index, f in enumerate(files)]


_SIZE = re.compile(r"\bsize=(\[[^\]]*\])")


def _sizes(view: TorchTraceView) -> dict[str, str]:
    """Each input's size in the graph's tensor guards (`size=[2, None]`: dim 1 dynamic), by its name."""
    found: dict[str, str] = {}
    for group in view.groups:
        for guard in group.guards:
            size = _SIZE.search(guard.code) if guard.kind == "TENSOR_MATCH" else None
            if size is not None:
                found.setdefault(group.subject, size[1])
    return found


def _untimed(graph: GraphView) -> str | None:
    fallback = graph.fallbacks
    if not fallback:
        return None
    label = f"{graph.rank_label} {graph.compile_id}".strip() if graph.compile_id else f"#{graph.number}"
    return untimed(label, [p.compiler for p in fallback], [f"{f.name}:{f.line}" for p in fallback for f in p.frames])
