"""The hooks into Thunder 0.2.6: each wraps one Thunder function and never raises into Thunder.

Where Thunder creates and rewrites bound symbols, and what each hook does there:
- `BoundSymbol.__post_init__`: every new symbol is stamped from its context (the op being traced,
  or the op a pass is processing, plus the innermost user scope).
- `BoundSymbol.from_bsym`: a copy keeps its original's record (Thunder copies fields explicitly).
- `BoundSymbol.python`: when logging prints a trace, reports where each op lands in the text.
- `TraceCtx.set_current_source_location`: the interpreter is at a new user op: read the stack.
- `TraceSubstitutionProcessor.__call__`: passes built on it (autograd, executor claiming, ...)
  process one symbol at a time; what they create descends from that symbol. Autograd's symbols
  tagged BACKWARD become `grad(...)`, recomputed ones `recompute(...)`.
- `TraceCtx.set_provenance`, the `bound_symbols` setter and a few pass functions: the trace a pass produced is fixed up,
  naming the pass on what it made by itself (del, return, unpack, ...).
- `thunder.jit`, `thunder_general_jit`, `CacheEntry`, `_with_cache_info_ctx`: where a compile was
  asked for, when it starts, ends, or raises (the events of provenance.log.session). With profiling
  on, the CacheEntry stored runs a profiling window first (provenance/thunder/profiling.py).
- ThunderFX's backend and Dynamo's graph-break log: see thunderfx.py.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from provenance.core.record import Kind, of
from provenance.core.scope import current_span
from provenance.log.session import SESSION
from provenance.thunder import (
    capture,
    distributed,
    emit,
    fx_compile,
    memory,
    passes,
    phases,
    profiling,
    recompile,
    thunderfx,
    torch_trace,
)
from provenance.thunder.capture import Capture
from provenance.thunder.compat import api
from provenance.thunder.printing import printed_ops
from provenance.thunder.stack import python_stack
from provenance.thunder.state import (
    ATTR,
    COMPILE_ATTR,
    COUNTS_ATTR,
    LABELLED_AT,
    MADE_BY,
    NO_DICT,
    TRACE_SOURCE_ATTR,
    Processing,
    active_compile,
    ambient_record,
    check_fault,
    compile_of,
    current_compile,
    end_compile,
    fail,
    get_compile_stats,
    processing,
    read_compile_data,
    start_compile,
)

# Fault-injection names (state.check_fault) of the hooks that run in every compile with autograd
# (memory.py's "memory": its timeline at the compile's end); distributed.py's are "distributed" and
# "rematerialize"; the rest are injected where they run (tests/thunder/test_fault_points.py).
CORE_HOOKS = ("bind", "from_bsym", "source_location", "processor", "set_provenance", "pass", "compile", "jit",
              "phases", "memory")
# Run only when a call misses a cache that holds entries (tests/thunder/test_recompile.py injects its fault).
RECOMPILE_HOOK = "recompile"

T = api()  # this Thunder's objects (compat.py)
thunder, autodiff, get_compile_data = T.thunder, T.autodiff, T.get_compile_data
BoundSymbol, TraceCtx, TraceSubstitutionProcessor = T.BoundSymbol, T.TraceCtx, T.TraceSubstitutionProcessor

_BACKWARD = T.BoundSymbolTag.BACKWARD
# Autograd's processors (local classes of grad_transform_on_trace) and what their output is.
_PROCESSOR_MODES = {T.names["grad_processor"]: "grad", T.names["recompute_processor"]: "recompute"}


def _post_init(orig: Callable, running: Capture) -> Callable:
    # Runs for every bound symbol Thunder creates (~30 000 in a small model's compile): the
    # lookups of current_compile() and stamp() are inlined, module globals bound to locals.
    get_compile_data, get_processing, get_active = read_compile_data, processing.get, active_compile.get
    no_dict = NO_DICT
    fill, is_bookkeeping, fusion_of = passes.fill_subsymbols, passes.is_bookkeeping, passes.fusion_of

    def __post_init__(self: BoundSymbol) -> None:
        orig(self)
        try:
            if running.fault_injection is not None:
                check_fault("bind")
            cs, state = get_compile_data()[1], get_active()  # compile_of(cs), inlined
            if state is None or state.stats_id != id(cs):
                state = getattr(cs, "__dict__", no_dict).get(COMPILE_ATTR) or current_compile()
            if state.disabled:  # e.g. the splitter's trial symbols: as cheap as possible
                return
            proc = get_processing()
            record = state.copying
            if record is not None:  # a copy (from_bsym) keeps its original's record: nothing to derive
                state.copying = None
                self._provenance = record
                if state.copying_fill and self.subsymbols:  # new subsymbols (the original's are filled)
                    fill(self.subsymbols, record)
            else:
                sym = self.sym
                if sym.is_fusion:  # built from its region's symbols, which keep their records
                    record = state.fusion_record(self.subsymbols) or fusion_of(map(of, self.subsymbols))
                else:
                    record = ambient_record(is_bookkeeping(sym), proc)
                if record is not None:
                    self._provenance = record
                    if self.subsymbols:
                        fill(self.subsymbols, record)
            if proc is not None and proc.created is not None:
                proc.created.append(self)
        except Exception as exc:  # never raise into Thunder
            fail("bind", exc)

    return __post_init__


def _from_bsym(orig: Callable, running: Capture) -> Callable:
    get_compile_data = read_compile_data

    def from_bsym(self: BoundSymbol, **kwargs: Any) -> BoundSymbol:
        # A copy is not a new op: it keeps its original's record (and is not stamped with a
        # scope opened around the copying), unless it is a fusion with new members, whose
        # record the bind hook derives from them. In a compile, the bind hook stamps the copy
        # (the record is handed over on the CompileState); outside one, this hook does.
        state = compile_of(get_compile_data()[1])
        record = getattr(self, ATTR, None)  # disable() may have removed the class default meanwhile
        new_members = "subsymbols" in kwargs
        if new_members and kwargs.get("sym", self.sym).is_fusion:
            record = None
        if state is not None and record is not None and not state.disabled:
            state.copying, state.copying_fill = record, new_members
            try:
                new = orig(self, **kwargs)
            finally:
                state.copying = None
            if running.fault_injection is not None:
                _check_copy_fault()
            return new
        new = orig(self, **kwargs)
        try:
            if running.fault_injection is not None:
                check_fault("from_bsym")
            if record is not None and not current_compile().disabled:
                new._provenance = record
        except Exception as exc:
            fail("from_bsym", exc)
        return new

    return from_bsym


def _check_copy_fault() -> None:
    try:
        check_fault("from_bsym")
    except Exception as exc:
        fail("from_bsym", exc)


def _python(orig: Callable) -> Callable:
    def python(self: BoundSymbol, indent: int, commented: bool = False, print_depth: int = 1) -> list[str]:
        lines = orig(self, indent, commented, print_depth)
        try:
            placed = printed_ops.get()
            if placed is not None and indent == 1 and not commented:
                placed.append((self, lines))
        except Exception as exc:
            fail("printing", exc)
        return lines

    return python


def _set_current_source_location(orig: Callable) -> Callable:
    def set_current_source_location(self: TraceCtx, filename: Any, positions: Any) -> None:
        orig(self, filename, positions)
        try:
            check_fault("source_location")
            _locate(self, filename is not None)
        except Exception as exc:
            fail("source_location", exc)

    return set_current_source_location


def _locate(trace: TraceCtx, located: bool = True) -> None:
    """The interpreter is at a new user op: what it binds next gets the record of its stack."""
    state = current_compile()
    if state.disabled:
        return
    trace.__dict__[TRACE_SOURCE_ATTR] = state.stack.current(current_span()) if located else None
    state.acquiring = trace


_Proxy, _unwrap, _get_tracectx = T.Proxy, T.unwrap, T.tracectx_var.get


def _compare_op(orig: Callable) -> Callable:
    """Thunder's COMPARE_OP handler runs `a <= b` on the proxies uninterpreted (no lookaside sets
    the source location): the op took the line of the op before it, or none as a function's first
    op. Here the comparison of a proxy is located first (Thunder's own `# file:line` comment stays
    as Thunder wrote it)."""

    def compare_op_handler(inst: Any, /, stack: Any, **kwargs: Any) -> Any:
        try:
            if any(isinstance(_unwrap(v), _Proxy) for v in stack.getitem_wrapped(slice(-2, None))):
                trace = _get_tracectx(None)
                if trace is not None:
                    _locate(trace)
        except Exception as exc:
            fail("source_location", exc)
        return orig(inst, stack=stack, **kwargs)

    return compare_op_handler


def _processor_call(orig: Callable) -> Callable:
    def __call__(self: TraceSubstitutionProcessor) -> Any:
        hooks = None
        try:
            check_fault("processor")
            if not current_compile().disabled:
                hooks = _ProcessorHooks(self)
                hooks.install()
        except Exception as exc:
            fail("processor", exc)
        try:
            return orig(self)
        finally:
            if hooks is not None:
                hooks.uninstall()

    return __call__


_PROCESS, _ADD_UNPROCESSED = T.names["process_bsym"], T.names["add_unprocessed_bsyms"]


class _ProcessorHooks:
    """Per-processor wrappers: the symbol being processed is the context of what gets created."""

    def __init__(self, processor: TraceSubstitutionProcessor) -> None:
        self.processor = processor
        self.mode = _PROCESSOR_MODES.get(type(processor).__name__)
        self.current: BoundSymbol | None = None
        # Subsymbols a pass flattened to the top level, by id (held, so ids are not reused).
        self.decomposed: dict[int, BoundSymbol] = {}
        self.inner_process = getattr(processor, _PROCESS)
        self.inner_add_unprocessed = getattr(processor, _ADD_UNPROCESSED)

    def install(self) -> None:
        # Instance attributes shadow the class's methods for this processor only.
        setattr(self.processor, _PROCESS, self.process_bsym)
        setattr(self.processor, _ADD_UNPROCESSED, self.add_unprocessed_bsyms)

    def uninstall(self) -> None:
        # The processor and these wrappers refer to each other: left in place, the cycle would
        # keep the processor's traces (every symbol the pass made or dropped) for the garbage
        # collector to find, instead of letting reference counting free them.
        for name in (_PROCESS, _ADD_UNPROCESSED):
            vars(self.processor).pop(name, None)
        self.decomposed.clear()

    def add_unprocessed_bsyms(self, bsyms: list) -> None:
        try:
            current = self.current
            if current is not None and current.subsymbols:
                subs = {id(s) for s in current.subsymbols}
                self.decomposed.update((id(b), b) for b in bsyms if id(b) in subs)
        except Exception as exc:
            fail("processor", exc)
        return self.inner_add_unprocessed(bsyms)

    def process_bsym(self, bsym: BoundSymbol) -> None:
        token = None
        try:
            if not current_compile().disabled:
                record = bsym._provenance
                if record is not None and record.kind == Kind.OP and self.decomposed.get(id(bsym)) is bsym:
                    record = record.derive(kind=Kind.DECOMPOSITION)
                proc = Processing(record, [] if self.mode else None)
                token = processing.set(proc)
                self.current = bsym
                current_compile().last_record = record
        except Exception as exc:
            fail("processor", exc)
        try:
            return self.inner_process(bsym)
        finally:
            if token is not None:
                processing.reset(token)
                self.current = None
                try:
                    if self.mode:
                        self._derive(bsym, proc)
                except Exception as exc:
                    fail("processor", exc)

    def _derive(self, bsym: BoundSymbol, proc: Processing) -> None:
        if proc.record is None or proc.record.kind == Kind.BOOKKEEPING:
            return  # e.g. autograd's handling of the return: attributed by data flow
        if self.mode == "recompute" and _BACKWARD in bsym.tags:
            return  # a backward op processed as itself, not recomputed
        record = passes.derived(proc.record, self.mode)
        for new in proc.created:
            if _BACKWARD in new.tags:
                passes.restamp(new, record)


def _fix_up_labelled(trace: TraceCtx) -> None:
    """Fix up a trace that a pass has labelled (`set_provenance`), whatever the order in which
    the pass set the label and the symbols."""
    try:
        check_fault("set_provenance")
        label = trace.get_provenance()
        if label is not None:
            trace.__dict__.setdefault(LABELLED_AT, time.time_ns())
        if label is not None and trace.bound_symbols and not current_compile().disabled:
            passes.fix_up(trace.bound_symbols, passes.pass_name(passes.label_text(label)))
    except Exception as exc:
        fail("set_provenance", exc)


def _set_provenance(orig: Callable) -> Callable:
    def set_provenance(self: TraceCtx, provenance: Any) -> None:
        orig(self, provenance)
        _fix_up_labelled(self)

    return set_provenance


def _bound_symbols_property(orig: property) -> property:
    def fset(self: TraceCtx, bsyms: list) -> None:
        orig.fset(self, bsyms)
        _fix_up_labelled(self)

    return property(orig.fget, fset, orig.fdel, orig.__doc__)


def _pass(orig: Callable, name: str) -> Callable:
    """A pass function whose output traces carry no TraceProvenance of their own."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # pytest hides this frame in a failure's traceback
        result = orig(*args, **kwargs)
        try:
            check_fault("pass")
            if not current_compile().disabled:
                for trace in result if isinstance(result, tuple) else (result,):
                    if isinstance(trace, TraceCtx):
                        passes.fix_up(trace.bound_symbols, name)
        except Exception as exc:
            fail("pass", exc)
        return result

    return wrapped


def _jit(orig: Callable, running: Capture) -> Callable:
    """thunder.jit: remember where the user called it (the compile's call site)."""

    @functools.wraps(orig)
    def jit(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # pytest hides this frame in a failure's traceback
        jfn = orig(*args, **kwargs)
        try:
            check_fault("jit")
            if SESSION.active:
                running.jit_stacks[thunder.compile_data(jfn)] = python_stack()
        except Exception as exc:
            fail("jit", exc)
        return jfn

    return jit


def _with_cache_info_ctx(orig: Callable) -> Callable:
    """Wraps each jitted function's compile-or-fetch step: a compile that raises is logged, and
    the exception reaches the user unchanged. After each call, the function's counters are
    copied for its runtime summary (the session holds the function's stats only weakly, so the
    summary of a function collected before exit comes from that copy), and a cache hit is
    credited to the compile that built the entry it returned. No event on the call path."""

    def _with_cache_info_ctx(fn: Callable) -> Callable:
        inner = orig(fn)
        stats = _closure(fn, T.names["stats_closure"])  # Thunder's weak reference to the function's CompileStats

        def cache_info_wrapper(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # pytest hides this frame in a failure's traceback
            try:
                result = inner(*args, **kwargs)
            except BaseException as exc:
                _compile_raised(exc)
                if stats is not None:
                    _copy_counts(stats, None)
                raise
            if stats is not None:
                _copy_counts(stats, result)
            return result

        return cache_info_wrapper

    return _with_cache_info_ctx


def _closure(fn: Callable, name: str) -> Any:
    code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None) or ()
    if code is None or name not in code.co_freevars:
        return None
    return cells[code.co_freevars.index(name)].cell_contents


def _copy_counts(stats: Callable[[], Any], result: Any) -> None:
    """Copy the function's counters into the session's counts list ([calls, hits, misses, hits by
    compile id]); `result`: the call's (cache entry, inputs, ...), or None when it raised. The
    call was a hit if Thunder's hit counter moved since the last copy: the entry it returned is
    the compile's that built it (Capture.entry_compiles, by its prologue)."""
    try:
        cs = stats()
        counts = cs.__dict__.get(COUNTS_ATTR) if cs is not None else None
        if counts is not None:
            running = capture.ACTIVE
            if result is not None and running is not None and cs.cache_hits != counts[1]:
                compile_id = running.entry_compiles.get(result[0].prologue_fn)
                if compile_id is not None:
                    by_compile = counts[3]
                    by_compile[compile_id] = by_compile.get(compile_id, 0) + cs.cache_hits - counts[1]
            counts[0], counts[1], counts[2] = cs.calls, cs.cache_hits, cs.cache_misses
    except Exception as exc:
        fail("calls", exc)


def _compile_raised(exc: BaseException) -> None:
    state = active_compile.get()
    try:
        if state is not None and not state.ended and not state.disabled and SESSION.active:
            emit.compile_failed(state, exc)
    except Exception as internal:
        fail("compile", internal)
    finally:
        if state is not None:
            end_compile(state)


def _general_jit(orig: Callable) -> Callable:
    """thunder_general_jit (the interpreter) starts a compile: its phase is `acquire_trace`; what
    capture does around it is timed as `provenance` phases."""

    def thunder_general_jit(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # pytest hides this frame in a failure's traceback
        state = ours = None
        try:
            state = start_compile()
            check_fault("compile")
            if state is not None:
                thunderfx.attach(state, get_compile_data())  # a ThunderFX piece's compile
                _open_window(state)
                ours = state.phases.begin("provenance", "compile start")
                compile_data = get_compile_data()
                phases.watch_transforms(getattr(compile_data, "transforms", None))
                if SESSION.active:
                    emit.compile_started(state, compile_data, get_compile_stats())
        except Exception as exc:
            fail("compile", exc)
        if state is not None and not state.disabled and SESSION.active and len(args) >= 3:
            try:  # thunder_general_jit(fn, args, kwargs, ...): the call's inputs
                emit.recompiled(state, get_compile_data(), get_compile_stats(), args[1], args[2])
            except Exception as exc:
                fail("recompile", exc)
        if ours is not None:
            state.phases.end(ours)
        timed = state is not None and not state.disabled
        acquire = state.phases.begin("acquire_trace") if timed else -1
        try:
            result = orig(*args, **kwargs)
        finally:
            if timed:
                state.phases.end(acquire)
        try:
            if not current_compile().disabled:
                ours = current_compile().phases.begin("provenance", "fix-up")
                for trace in (result.prologue_trace, result.computation_trace, result.epilogue_trace):
                    if trace is not None:
                        trace.__dict__.pop(TRACE_SOURCE_ATTR, None)
                        passes.fix_up(trace.bound_symbols, "acquire_trace")
                current_compile().phases.end(ours)
        except Exception as exc:
            fail("compile", exc)
        return result

    return thunder_general_jit


def _open_window(state: Any) -> None:
    """The compile's wall time starts with the call that missed the cache: Thunder's own timers
    (CompileStats.last_trace_*) say when the call started and how long its cache lookup took."""
    stats = get_compile_stats()
    host = getattr(stats, "last_trace_host_start", -1)
    lookup = getattr(stats, "last_trace_cache_start", -1)
    missed = getattr(stats, "last_trace_cache_stop", -1)
    tracing = getattr(stats, "last_trace_tracing_start", -1)
    log = state.phases
    if isinstance(host, int) and 0 < host <= lookup <= missed <= tracing <= log.window_start:
        log.window_start = host
        log.add("cache_lookup", host, missed)


def _rejected() -> Any:
    running = capture.ACTIVE
    return running.rejected if running is not None else None


def _cache_entry(orig: type, running: Capture) -> type:
    class CacheEntry(orig):  # type: ignore[misc, valid-type]
        """Thunder's CacheEntry; building one ends a compile: every trace gets fixed up."""

        __slots__ = ()

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            entry = orig.__new__(cls, *args, **kwargs)
            state = current_compile()  # this thread's: once ended, the function's latest may be another's
            try:
                if SESSION.active:  # its prologue keeps why it rejects a call, for the recompile that follows
                    entry = entry._replace(prologue_fn=recompile.recording(entry.prologue_fn, _rejected))
                if not state.disabled:
                    ours = state.phases.begin("provenance", "fix-up")
                    for traces in (entry.prologue_traces, entry.computation_traces,
                                   entry.epilogue_traces, entry.backward_traces):
                        for trace in traces or ():
                            label = passes.label_text(trace.get_provenance())
                            name = passes.pass_name(label) if label else trace.__dict__.get(MADE_BY, "final")
                            passes.fix_up(trace.bound_symbols, name)
                    state.phases.end(ours)
                    memory.captured(state, entry, get_compile_stats())  # never raises
                    # (a hook that failed has closed the compile in the log: capture_disabled)
                    if SESSION.active and state.id and not state.disabled:
                        running.entry_compiles[entry.prologue_fn] = state.id
                        emit.compile_finished(state, entry, get_compile_stats())
            except Exception as exc:
                fail("compile", exc)
            finally:
                end_compile(state)
            if running.profile:  # never raises: a failure is one warning and Thunder's entry
                entry = profiling.profiled_entry(running, entry, state, get_compile_stats())
            return entry

    CacheEntry.__qualname__ = orig.__qualname__
    return CacheEntry


def install(running: Capture) -> None:
    patcher = running.patcher
    running.rejected = recompile.Rejected()
    # The record is an attribute (`ATTR`) with a class default: hooks read and write it as
    # `bsym._provenance`, which keeps CPython's inline instance values (no per-symbol dict).
    patcher.set_attribute(BoundSymbol, ATTR, None)
    patcher.wrap(BoundSymbol, "__post_init__", lambda f: _post_init(f, running))
    patcher.wrap(BoundSymbol, "from_bsym", lambda f: _from_bsym(f, running))
    patcher.wrap(BoundSymbol, "python", _python)
    patcher.wrap(TraceCtx, "set_current_source_location", _set_current_source_location)
    handlers = T.opcode_handlers
    patcher.set_item(handlers, "COMPARE_OP", _compare_op(handlers["COMPARE_OP"]))
    patcher.wrap(TraceCtx, "set_provenance", _set_provenance)
    patcher.wrap_attribute(TraceCtx, "bound_symbols", _bound_symbols_property)
    patcher.wrap(TraceSubstitutionProcessor, "__call__", _processor_call)
    patcher.wrap(autodiff, "split_into_forward_and_backward", lambda f: _pass(f, "split_forward_backward"))
    patcher.wrap(thunder, "thunder_general_jit", _general_jit)
    patcher.wrap(thunder, "CacheEntry", lambda c: _cache_entry(c, running))
    patcher.wrap(thunder, "jit", lambda f: _jit(f, running))
    patcher.wrap(thunder, "_with_cache_info_ctx", _with_cache_info_ctx)
    distributed.install(patcher)
    phases.install(running)
    thunderfx.install(patcher)
    fx_compile.install(running)
    torch_trace.install(running)
    memory.install(patcher)
