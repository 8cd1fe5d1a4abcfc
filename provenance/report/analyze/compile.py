"""One compile's records -> the models of its pages, streamed.

Each trace is turned into its page fragment as soon as its record is read (its ops
annotated, diffed against the previous trace of the same list: trace_diff.py) and handed to the page
writer; only the previous trace of each list is kept, which at the end of the compile is the
final one the source view (source_view.py) needs. So memory follows the largest trace, not the log.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable
from itertools import chain
from operator import add, itemgetter, le
from typing import TYPE_CHECKING, Any

from provenance.allocation import record as memory_record
from provenance.core.record import Kind
from provenance.report.analyze.memory import compile_memory_view, line_memory, measured_view
from provenance.report.analyze.phases import phase_view, phases_of
from provenance.report.analyze.prov_table import ProvTable
from provenance.report.analyze.recompiles import recompile_view
from provenance.report.analyze.source_view import source_view
from provenance.report.analyze.trace_diff import diff
from provenance.report.analyze.tracebacks import user_frame_of, without_our_frames
from provenance.report.model import (
    LISTS,
    OUTS,
    PROV,
    SYM,
    CacheCounts,
    CompilePage,
    CompilePages,
    CompileSummary,
    DisabledCapture,
    ErrorSummary,
    ErrorView,
    Fused,
    Fusion,
    FusionLine,
    Op,
    PassList,
    PassSummary,
    ProvInfo,
    RoleCount,
    SourcePage,
    StackFrame,
    TraceView,
    coverage,
    site_of,
)
from provenance.report.numbers import as_float, as_int, int_of_text
from provenance.report.read.coerce import UNUSABLE
from provenance.report.read.profile_records import LoggedProfile, compile_profile

if TYPE_CHECKING:
    from provenance.report.analyze.ports import PageSink, SourceLines

__all__ = ["CompileBuilder", "frames_of", "parse_ops"]


_PROV = itemgetter(PROV)


_INT, _STR, _LIST = frozenset({int}), frozenset({str}), frozenset({list})
_PROV_TYPES = frozenset({int, type(None)})


def _well_formed(raw: list, n_lines: int) -> list[Op] | None:
    """The ops of a trace record whose every entry is valid, checked a column at a time (C
    loops: a trace has thousands of ops); None if any entry is not, for parse_ops to sort out."""
    if not raw:
        return []
    if set(map(type, raw)) != _LIST or set(map(len, raw)) != {5}:
        return None
    lines, ns, syms, outs, provs = zip(*raw)
    if not (set(map(type, lines)) == set(map(type, ns)) == _INT and set(map(type, syms)) == _STR
            and set(map(type, provs)) <= _PROV_TYPES and set(map(type, outs)) == _LIST
            and set(map(type, chain.from_iterable(outs))) <= _STR and min(ns) > 0 and lines[0] >= 0):
        return None
    ends = list(map(add, lines, ns))
    if ends[-1] > n_lines or not all(map(le, ends, lines[1:])):  # in order, inside the text
        return None
    return list(zip(lines, ns, syms, outs, provs))


def parse_ops(raw: Any, n_lines: int) -> tuple[list[Op], int]:
    """The valid ops of a trace record, in order, and how many entries were not."""
    if isinstance(raw, list):
        ops = _well_formed(raw, n_lines)
        if ops is not None:
            return ops, 0
    ops: list[Op] = []
    bad = 0
    end = 0
    for entry in raw if isinstance(raw, list) else ():
        try:
            line, n, sym, outs, prov = entry
            # ints, in order, inside the text
            if not (type(line) is int and type(n) is int and 0 < n and end <= line and line + n <= n_lines):
                raise ValueError
            outs = list(map(str, outs))
        except (TypeError, ValueError):
            bad += 1
            continue
        ops.append((line, n, sym if type(sym) is str else str(sym), outs, prov if type(prov) is int else None))
        end = line + n
    return ops, bad


def parse_fused(raw: Any, n_ops: int) -> tuple[list[Fused], int]:
    """The valid entries of a trace record's `fused` (the ops each fusion fused: [fusion's index in
    `ops`, text, prov id]), in order, and how many were not."""
    out: list[Fused] = []
    bad = 0
    for entry in raw if isinstance(raw, list) else ():
        if (type(entry) is list and len(entry) == 3 and type(entry[0]) is int and 0 <= entry[0] < n_ops
                and type(entry[1]) is str and type(entry[2]) in _PROV_TYPES):
            out.append((entry[0], entry[1], entry[2]))
        else:
            bad += 1
    return out, bad


def _cache(value: Any) -> CacheCounts | None:
    if not isinstance(value, dict):
        return None
    return CacheCounts(as_int(value.get("hits")), as_int(value.get("misses")), as_int(value.get("calls")))


def frames_of(value: Any) -> list[StackFrame]:
    """A stack from the log ([file, line, function, text, user] lists), tolerating junk."""
    out = []
    for frame in value if isinstance(value, list) else ():
        if isinstance(frame, list) and len(frame) >= 2:
            out.append(StackFrame(file=str(frame[0]), name=str(frame[0]).rsplit("/", 1)[-1],
                                  line=as_int(frame[1]) or 0, fn=str(frame[2]) if len(frame) > 2 else "",
                                  text=str(frame[3]) if len(frame) > 3 and frame[3] is not None else "",
                                  user=bool(frame[4]) if len(frame) > 4 else True))
    return out


class CompileBuilder:
    """Accumulates one compile's records (compile_start, traces, end or error)."""

    def __init__(self, *, key: str, log: int, rank: int | None, rank_label: str, start: dict | None,
                 provs: ProvTable, sink: PageSink, sources: SourceLines,
                 pages: CompilePages, malformed: Callable[[str], None], compare: bool = True,
                 profile: LoggedProfile | None = None, otlp: bool = False, untimed: str | None = None) -> None:
        start = start or {}
        self.key, self.log, self.rank, self.rank_label = key, log, rank, rank_label
        self.untimed = untimed  # a ThunderFX piece's: its graph's torch pieces, which no profile times
        self.start = start
        self.compile = start.get("compile")
        self.fn = str(start.get("fn") or "?")
        self.index = as_int(start.get("index")) or 0
        self.start_ns = as_int(start.get("time_ns"))
        self.provs, self.sink, self.sources = provs, sink, sources
        self.pages = pages
        self.malformed = malformed
        self.compare = compare  # keep the final traces' op sequences, to compare ranks
        self.latest: dict[str, TraceView] = {}  # per list: the previous trace, at the end the final
        self.passes: list[TraceView] = []  # without their text: the timeline
        self.prov_ids: set[int] = set()
        self.page_roles: list[RoleCount] = []  # set by finish(), for the run's totals
        self.assets: list[str] = []  # set by finish(): the user files' data files its source view loads
        self.error: ErrorView | None = None
        self.recompile: dict | None = None  # the recompile record (with what the run attached)
        self.phases: dict | None = None
        self.executor_compiles: list = []
        self.profile = profile  # its profile records (read ahead: they come after its end)
        self.memory: dict[str, dict] = {}  # its `memory` records, by trace (analyze/memory.py)
        self.closing: dict = {}  # the record that closed it (close()), and the status it gave
        self.status = "incomplete"
        self.otlp = otlp  # its log was rebuilt from spans (read/otlp_json.py): the pages say what spans lack

    def close(self, status: str, data: dict) -> None:
        """The record that closed the compile, and the status it gives it (analyze/handlers.py)."""
        self.closing, self.status = data, status

    # -- traces ----------------------------------------------------------------------------
    def add_trace(self, data: dict) -> None:
        list_name = str(data.get("list") or "?")
        index = as_int(data.get("index"))
        index = index if index is not None else len([p for p in self.passes if p.list == list_name])
        anchor = f"{list_name}-{index}" if list_name in LISTS else f"other-{len(self.passes)}"
        same_as = as_int(data.get("same_as"))
        if same_as is not None:
            view = TraceView(list_name, index, "(repeat)", None, None, anchor, same_as=same_as)
            self.passes.append(view)
            self.sink.trace(view, self.provs)
            return
        python = data.get("python")
        if not isinstance(python, str):
            self.malformed(f"trace record without python text (compile {self.compile!r})")
            return
        lines = python.split("\n")
        ops, bad_ops = parse_ops(data.get("ops"), len(lines))
        if bad_ops:
            self.malformed(f"{bad_ops} malformed op entr{'y' if bad_ops == 1 else 'ies'} in trace {anchor}")
        fused, bad_fused = parse_fused(data.get("fused"), len(ops))
        if bad_fused:
            self.malformed(f"{bad_fused} malformed fused op entr{'y' if bad_fused == 1 else 'ies'} in trace {anchor}")
        label = data.get("label")
        # Sent to the page as data (render/output.py's CompileWriter): its script renders the trace.
        view = TraceView(list_name, index, str(data.get("pass") or "?"), label if isinstance(label, str) else None,
                         as_float(data.get("ms")), anchor, lines=lines, ops=ops, n_ops=len(ops), fused=fused)
        previous = self.latest.get(list_name)
        if previous is not None:
            view.diff = diff(previous, view)
        if self.profile is not None:  # a profiled final trace: its ops' times, shown on it
            from provenance.report.analyze import cost  # the time analysis: for a profiled compile only

            measured = self.profile.measured()
            for timed in self.profile.traces.values():
                if timed.list == list_name and timed.index == index:
                    view.times = cost.op_times(view, timed, measured)
        self.prov_ids.update(map(_PROV, ops))  # None too: dropped when the compile ends
        self.prov_ids.update(f[2] for f in fused)
        self.latest[list_name] = view
        self.passes.append(view)
        self.sink.trace(view, self.provs)
        # The text is dropped once it is no longer the latest of its list: the pass list keeps
        # only names and figures.
        if previous is not None:
            previous.lines, previous.ops, previous.keyed, previous.fused = [], [], None, []

    # -- end ---------------------------------------------------------------------------------
    def finish(self) -> CompileSummary:
        """The compile's summary, once closed (close()) or once the log ended (incomplete)."""
        closing, status = self.closing, self.status
        end = closing if status == "ok" else {}
        error = closing if status == "failed" else None
        disabled = closing if status == "disabled" else None
        end_ns = as_int(closing.get("time_ns"))
        seconds = as_float(closing.get("seconds"))
        if seconds is None and end_ns is not None and self.start_ns is not None:
            seconds = (end_ns - self.start_ns) / 1e9
        if seconds is not None:  # the fusion executors' compiles at the first call are the compile's too
            seconds += sum(e.end_ns - e.start_ns for e in self.executor_compiles) / 1e9
        final_views = [self.latest[name] for name in ("computation", "backward") if name in self.latest]
        if not final_views:  # no trace reached the log (a failed compile): no source view
            self.pages = CompilePages(self.pages.compile, None)
        for view in final_views:
            view.final = True
        compile_error = self._part("its error", self._error, error, default=self._bare_error(error)) \
            if error is not None else None
        final = end.get("final") if isinstance(end.get("final"), dict) else None
        prologue = self.latest.get("prologue")
        recompile = self._part("its recompile record", recompile_view, self.recompile,
                               prologue.lines if prologue is not None else None)
        window, phases = self._part("its phases", phases_of, self.phases, default=(None, []))
        summary = CompileSummary(
            key=self.key, log=self.log, rank=self.rank, rank_label=self.rank_label, compile=self.compile,
            fn=self.fn, index=self.index, status=status, start_ns=self.start_ns, end_ns=end_ns, seconds=seconds,
            cache=_cache(end.get("cache")), final=final, coverage=coverage(final),
            passes=[PassSummary(v.list, v.index, v.pass_name, v.ms, v.n_ops if v.same_as is None else None, v.counts)
                    for v in self.passes],
            pages=self.pages, call_stack=frames_of(self.start.get("call_stack")),
            jit_stack=frames_of(self.start.get("jit_stack")),
            call_site=site_of(frames_of(self.start.get("call_stack")) or frames_of(self.start.get("jit_stack"))),
            error=ErrorSummary(compile_error.type, compile_error.message[:500]) if compile_error else None,
            disabled=DisabledCapture(str(disabled.get("hook", "?")), str(disabled.get("error", ""))[:500])
            if disabled else None,
            signature={v.list: zlib.compress("\n".join(self._signature(v)).encode()) for v in final_views}
            if self.compare else {},
            finals={v.list: v.anchor for v in final_views},
            recompile_reason=recompile.reason if recompile is not None else None, window=window, phases=phases,
            executor_compiles=list(self.executor_compiles), otlp=self.otlp,
        )
        self.prov_ids.discard(None)
        provs = self.provs.closure(self.prov_ids | ({compile_error.last_prov} if compile_error and
                                                    compile_error.last_prov is not None else set()))
        unbuilt = len(provs.keys() & self.provs.malformed_ids)
        if unbuilt:
            self.malformed(f"{unbuilt} provenance record{'s' if unbuilt != 1 else ''} of compile "
                           f"{self.key} could not be rebuilt")
        page = self._page(summary, provs, compile_error, as_float(end.get("log_seconds")))
        page.recompile = recompile
        unknown = end.get("memory_unknown")
        page.memory_unknown = unknown[:300] if isinstance(unknown, str) else None
        page.phases = self._part("its phases", phase_view, window, phases, summary.executor_compiles)
        self.page_roles, self.error = page.roles, compile_error
        line_time = None
        if self.profile is not None and self.profile.calls:
            from provenance.report.analyze import cost

            page.time, summary.time, line_time = self._part("its profile", cost.compile_time, self.profile,
                                                            self.provs.record, self.fn, default=(None, None, None))
            if page.time is not None:
                page.time.untimed = self.untimed
        line_ops: dict | None = {} if isinstance(self.start.get("piece"), dict) else None  # a ThunderFX piece
        source = self._part("its source view", source_view, summary, final_views, self.provs, self.sources,
                            line_time, line_ops) if final_views else None
        summary.piece_lines = line_ops
        self.assets = [f.asset for f in source.files if f.asset] if source is not None else []
        if page.time is not None and source is not None:  # the Time section links lines to the source view
            _link_lines(page.time, summary.time, source, self.pages.source)
        if self.memory:
            self._part("its memory records", self._memory, page, summary, source)
        self.sink.finish(page, source)
        self.latest.clear()
        return summary

    def _memory(self, page: CompilePage, summary: CompileSummary, source: SourcePage | None) -> None:
        """The Memory section, the run's figures and the source view's memory gutter."""
        from provenance.allocation.static_memory import rollups
        from provenance.allocation.static_memory import summary as totals_of

        found = memory_record.decode(self.memory, self.provs.record, self.compile or 0, self.fn)
        if found is None:
            return
        totals, rows = totals_of([found]), rollups([found], ("line", "module"))
        by_line = rows["line"]
        page.memory = compile_memory_view(found, summary.finals, totals, by_line, rows["module"])
        page.static_memory = found
        summary.memory = totals
        if self.profile is not None and self.profile.has_memory:  # CUDA: the allocator's readings
            profile = page.time.profile if page.time is not None else None  # the Time section's, rebuilt once
            page.memory.measured = measured_view(
                found, profile or compile_profile(self.profile, self.provs.record, self.fn))
        if source is not None:
            files = {f.path: f.index for f in source.files}
            source.marks["m"] = {f"L{files[path]}-{line}": [saved, title]
                                 for (path, line), (saved, title) in line_memory(by_line).items() if path in files}

    def _part(self, what: str, fn: Callable[..., Any], *args: Any, default: Any = None) -> Any:
        """fn(*args), or `default` if the records it reads cannot be used: a compile is never lost
        for one odd part (the part is unknown on its page, and named among the problems)."""
        try:
            return fn(*args)
        except UNUSABLE as exc:
            self.malformed(f"compile {self.key}: {what} unusable: {type(exc).__name__}: {str(exc)[:200]}")
            return default

    @staticmethod
    def _bare_error(error: dict) -> ErrorView:
        """A failure as its type and message only (when its traceback cannot be read)."""
        return ErrorView(type=str(error.get("error_type") or "?"), message=str(error.get("message") or ""),
                            traceback="", last_prov=None, last_info=None, last_stack=[])

    def _signature(self, view: TraceView) -> list[str]:
        """The op sequence ranks are compared by: symbol and role (names may differ per rank)."""
        out = []
        for _line, _n, sym, _outs, prov in view.ops:
            info = self.provs.info(prov)
            out.append(f"{sym}|{info.role if info is not None and info.role else ''}")
        return out

    def _error(self, error: dict) -> ErrorView:
        last = as_int(error.get("last_prov"))
        info = self.provs.info(last)
        text = without_our_frames(str(error.get("traceback") or ""))
        logged = frames_of([error["user_frame"]]) if error.get("user_frame") else []
        headline = logged[0] if logged else user_frame_of(text)
        return ErrorView(type=str(error.get("error_type") or "?"), message=str(error.get("message") or ""),
                         traceback=text, last_prov=last, last_info=info,
                         last_stack=[self.provs.stack_frame(f) for f in info.stack] if info else [],
                         user_frame=headline, statement=self.sources.statement(headline.file, headline.line,
                                                                               headline.text) if headline else None)

    def _page(self, summary: CompileSummary, provs: dict[int, ProvInfo], error: ErrorView | None,
              log_seconds: float | None) -> CompilePage:
        timed = [p for p in self.passes if p.ms]
        total_ms = sum(p.ms for p in timed) or 0.0
        lists = []
        for name in [*LISTS, *sorted({p.list for p in self.passes} - set(LISTS))]:
            views = [p for p in self.passes if p.list == name]
            if views:
                lists.append(PassList(name, views))
        roles: Counter = Counter()
        fusions = []
        for view in self.latest.values():
            for op in view.ops:
                info = provs.get(op[PROV]) if op[PROV] is not None else None
                if info is None:
                    continue
                if info.role:
                    roles[(info.role, info.role_color)] += 1
                if info.kind == Kind.FUSION and view.final:
                    fusions.append(self._fusion(view, op, info, provs))
        return CompilePage(summary=summary, error=error, lists=lists, timeline=timed, total_ms=total_ms,
                           log_seconds=log_seconds, fusions=fusions,
                           roles=[RoleCount(r, c, n) for (r, c), n in roles.most_common()],
                           provs=provs, paths=self.provs.paths_of(provs))

    def _fusion(self, view: TraceView, op: Op, info: ProvInfo, provs: dict[int, ProvInfo]) -> Fusion:
        members = [provs[m] for m in info.members if m in provs]
        lines: dict[str, tuple[str, set[str]]] = {}  # where -> text, kinds
        for member in members:
            if member.user_frame:
                frame = self.provs.stack_frame(member.user_frame)
                lines.setdefault(f"{frame.name}:{frame.line}", (frame.text, set()))[1].add(member.kind)
        return Fusion(sym=op[SYM], outs=list(op[OUTS]), trace=view.list, anchor=view.anchor, prov=op[PROV],
                      members=members,
                      lines=[FusionLine(where, text, sorted(kinds)) for where, (text, kinds) in lines.items()])


def _link_lines(time: Any, kept: Any, source: SourcePage, page: str | None) -> None:
    """Each timed line shown in the source view gets its link there (`#L<file>-<line>`)."""
    from provenance.report.analyze import cost

    if page is None:
        return
    files = {f.path: f.index for f in source.files}
    name = page.rsplit("/", 1)[-1]
    for row in time.lines:
        path, _, line = row.key.rpartition(":")
        if path in files and int_of_text(line) is not None:
            row.href = f"{name}#L{files[path]}-{line}"
    for row in kept.lines[:cost.HREFS_KEPT]:
        path, _, line = row.key.rpartition(":")
        if path in files and int_of_text(line) is not None:
            kept.hrefs[row.key] = f"{page}#L{files[path]}-{line}"
