"""The process's event stream: compile ids, interned record ids, and fan-out to exporters.

Capture hooks call the `Session` with plain values; it turns them into events (the TypedDicts of
`provenance.log.events`, schema in docs/log-schema.md), emits each provenance record and span once
with an id before its first reference (and, before a record whose user frames lie in an installed
distribution not named yet, that distribution: a `library` event, provenance.core.libraries), and
hands every event to every exporter (`provenance.log.exporter.Exporter`). With no exporter, nothing is
built: capture alone costs nothing here.
Integrations name what they add to the header (`add_version`) and hand over plain values (a
compiled function's call counters come from the reader it passes): this module knows nothing of
Thunder or torch.

Importing this module registers nothing. The session hooks into the process when it gets its
first exporter (enable() with a log, or add_exporter): an exit handler that closes the exporters,
and the scope listeners that log spans; `close()` (disable(), or the exit) removes both. Its fork
handlers are registered then too, once per process (os.register_at_fork cannot unregister):
they do nothing while the session has no exporter.

Nothing here keeps a user's object alive: jitted functions' owners are held weakly, scope
attributes are plain values (provenance.core.scope converts them). A process forked from a logging
one (os.fork, multiprocessing) starts afresh: its own header, record ids from 1, and each
exporter's `after_fork()` (the JSONL log opens a file of the child's own at its first event).
"""

from __future__ import annotations

import atexit
import itertools
import os
import platform
import socket
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from provenance._version import __version__
from provenance.core.libraries import Libraries
from provenance.core.record import Provenance, Span
from provenance.core.scope import attribute_value, span_end_listeners, span_start_listeners, text
from provenance.log.events import (
    MAX_NESTING,
    SCHEMA_VERSION,
    Calls,
    Event,
    Header,
    Library,
    Prov,
    SpanEnd,
    SpanStart,
    frames_json,
)

if TYPE_CHECKING:
    from provenance.log.exporter import Exporter


def _env_int(*names: str) -> int | None:
    for name in names:
        value = os.environ.get(name)
        digits = value.strip().removeprefix("-") if value is not None else ""
        if digits.isascii() and digits.isdigit() and len(digits) <= 18:  # a rank, a world size: ASCII digits
            return int(value)
    return None


def process_rank() -> tuple[int | None, int | None]:
    """(rank, world size): torchrun's environment, else an initialized default process group."""
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    if rank is None:
        dist = sys.modules.get("torch.distributed")  # never imported here: only if the program did
        if dist is not None and dist.is_available() and dist.is_initialized():
            rank, world = dist.get_rank(), dist.get_world_size()
    return rank, world


class Session:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.exporters: list[Exporter] = []
        self._versions: dict[str, Callable[[], str | None]] = {}  # header versions integrations add
        self._header_sent = False
        # ids of the records written, and how deep each nests (events.MAX_NESTING); an id is kept
        # only once its record is written (a KeyboardInterrupt mid-write leaves none dangling)
        self._prov_ids: dict[Provenance, int] = {}
        self._prov_depth: dict[int, int] = {}
        self._next_prov = itertools.count(1)
        self._span_ids: dict[int, int] = {}  # span id -> its depth
        self._interned: list[Event] = []  # prov, span and library events, replayed to a joining exporter
        self._libraries = Libraries()  # the distributions the user's frames lie in (library events)
        # id(owner) -> (weak reference to it, its counter reader, fn name, compile ids, counts) of
        # the jitted functions alive, for the exit summary (the owner: what holds a function's
        # counters, Thunder's CompileStats). Weak: the owner holds the traces, which hold the model,
        # and nothing of ours may keep a model alive. `counts` ([calls, cache hits, cache misses])
        # is the list the integration copies the counters into after each call, so a function
        # collected before exit still gets its summary: its entry moves to `_dead`.
        self._compiles: dict[int, tuple[weakref.ref, CountReader, str, list[int], list[Any]]] = {}
        self._dead: list[tuple[str, list[int], list[int]]] = []
        self._hooked = False  # the exit handler and scope listeners are registered

    # -- exporters ---------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return bool(self.exporters)

    @property
    def wants_trace_text(self) -> bool:
        """Whether any exporter keeps traces' Python text (printing them is the costly part)."""
        return any(e.needs_trace_text for e in self.exporters)

    def add_exporter(self, exporter: Exporter) -> None:
        """Add an exporter; joining a running session, it first gets the header and the records
        and spans already interned, so the ids it will see referenced resolve."""
        with self._lock:
            if exporter in self.exporters:
                return
            if self._header_sent:
                for event in [self._header(), *self._interned]:
                    exporter.emit(event)
            self.exporters.append(exporter)
            self._hook()

    def _hook(self) -> None:
        """Close at exit, log scope spans, follow forks: while the session has exporters."""
        if not self._hooked:
            self._hooked = True
            atexit.register(self.close)
            span_start_listeners.append(self.span_started)
            span_end_listeners.append(self.span_ended)
            _register_fork_handlers()

    def _unhook(self) -> None:
        if self._hooked:
            self._hooked = False
            atexit.unregister(self.close)
            for listeners, listener in ((span_start_listeners, self.span_started),
                                        (span_end_listeners, self.span_ended)):
                while listener in listeners:
                    listeners.remove(listener)

    def remove_exporter(self, exporter: Exporter) -> None:
        """Detach `exporter` and close it (an exporter not attached is left alone)."""
        with self._lock:
            if exporter in self.exporters:
                self.exporters.remove(exporter)
                self._close(exporter)

    def stats(self) -> dict[str, dict[str, Any]]:
        """Each attached exporter's `stats()`, by name (a second exporter of a name gets `name#2`)."""
        with self._lock:
            out: dict[str, dict[str, Any]] = {}
            for exporter in self.exporters:
                key, n = exporter.name, 1
                while key in out:
                    n += 1
                    key = f"{exporter.name}#{n}"
                out[key] = exporter.stats()
            return out

    def add_version(self, name: str, read: Callable[[], str | None]) -> None:
        """Have the header's `versions` name `name` (read when a header is written)."""
        self._versions[name] = read

    def close(self) -> None:
        """Summarize runtime calls, then close every exporter (at disable() or exit), and remove
        the session's exit handler and scope listeners."""
        with self._lock:
            self._unhook()
            if not self.exporters:
                return
            self.emit_call_summaries()
            for exporter in self.exporters:
                self._close(exporter)
            self.exporters.clear()
            self._compiles.clear()
            self._dead.clear()
            self._header_sent = False
            self._prov_ids.clear()
            self._span_ids.clear()
            self._prov_depth.clear()
            self._next_prov = itertools.count(1)
            self._interned.clear()

    def before_fork(self) -> None:
        self._lock.acquire()  # no other thread is then halfway through an event

    def after_fork_in_parent(self) -> None:
        self._lock.release()

    def after_fork_in_child(self) -> None:
        """A forked child logs on its own: a header of its own, record ids from 1, compiles of
        its own to summarize, and exporters told (the JSONL one opens a file of the child's)."""
        self._lock = threading.RLock()
        self._header_sent = False
        self._prov_ids.clear()
        self._span_ids.clear()
        self._prov_depth.clear()
        self._next_prov = itertools.count(1)
        self._interned.clear()
        self._compiles.clear()
        self._dead.clear()
        for exporter in list(self.exporters):
            after_fork = getattr(exporter, "after_fork", None)
            if after_fork is None:
                continue
            try:
                after_fork()
            except Exception as exc:
                self.exporters.remove(exporter)
                warnings.warn(f"thunder-provenance: exporter {exporter.name!r} failed after fork ({exc!r}) and "
                              f"was removed; the program runs on.", RuntimeWarning, stacklevel=2)

    @staticmethod
    def _close(exporter: Exporter) -> None:
        try:
            exporter.close()
        except Exception as exc:  # closing must not fail the program (or its exit)
            warnings.warn(f"thunder-provenance: closing exporter {exporter.name!r} failed: {exc!r}",
                          RuntimeWarning, stacklevel=3)

    def emit(self, event: Event, only: Collection[Exporter] | None = None) -> None:
        """Hand `event` to every exporter (with `only`, to those of them: an event that refers to
        an earlier one goes where that one went)."""
        with self._lock:
            if not self.exporters:
                return
            if not self._header_sent:
                self._header_sent = True
                self.emit(self._header())
            for exporter in list(self.exporters):
                if only is not None and exporter not in only:
                    continue
                try:
                    exporter.emit(event)
                except Exception as exc:  # an exporter never breaks the program
                    self.exporters.remove(exporter)
                    warnings.warn(f"thunder-provenance: exporter {exporter.name!r} failed ({exc!r}) and "
                                  f"was removed; the program runs on.", RuntimeWarning, stacklevel=2)
                    try:
                        exporter.close()  # release its file or connection; it already warned once
                    except Exception:
                        pass

    def _header(self) -> Header:
        rank, world = process_rank()
        versions = {"python": platform.python_version(), **{name: read() for name, read in self._versions.items()},
                    "thunder_provenance": __version__}
        header: Header = {
            "type": "header", "schema": SCHEMA_VERSION, "time_ns": time.time_ns(), "versions": versions,
            "argv": [text(a) for a in sys.argv], "pid": os.getpid(), "host": text(socket.gethostname()),
            "rank": rank, "world_size": world,
        }
        return header

    # -- interned records --------------------------------------------------------------------
    def prov_id(self, record: Provenance | None) -> int | None:
        """The id of `record`, emitting it (and what it references) the first time."""
        if record is None:
            return None
        found = self._prov_ids.get(record)
        if found is not None:
            return found
        with self._lock:
            derived = self.prov_id(record.derived_from)
            members = [self.prov_id(m) for m in record.members]
            span = self._span_ref(record.span)
            depth = max([self._prov_depth.get(i, 0) for i in (derived, *members) if i is not None], default=0)
            if depth >= MAX_NESTING:  # as deep as a reader follows: the chain restarts here
                derived, members, depth = None, [], 0
            new_id = next(self._next_prov)
            event: Prov = {
                "type": "prov", "id": new_id, "kind": record.kind, "source": frames_json(record.source),
                "module": record.module, "module_type": record.module_type, "module_file": record.module_file,
                "transforms": list(record.transforms),
                "role": record.role, "span": span, "derived_from": derived, "members": members,
            }
            for name, version, package in self._libraries.new((f.file for f in record.source if f.user),
                                                              self._versions):
                library: Library = {"type": "library", "name": name, "version": version, "package": package}
                self._emit_interned(library)
            self._emit_interned(event)
            # kept once written: an interrupt before this line leaves the id unused, never dangling
            self._prov_depth[new_id] = depth + 1
            self._prov_ids[record] = new_id
            return new_id

    def _span_ref(self, span: Span | None) -> int | None:
        if span is None:
            return None
        if span.id not in self._span_ids:
            parent = self._span_ref(span.parent)
            depth = self._span_ids.get(parent, 0) if parent is not None else 0
            if depth >= MAX_NESTING:  # as deep as a reader follows: written as a root
                parent, depth = None, 0
            event: SpanStart = {
                "type": "span", "id": span.id, "name": span.name, "parent": parent,
                "attributes": {text(k): attribute_value(v) for k, v in span.attributes}, "role": span.role,
                "start_ns": span.start_ns,
            }
            self._emit_interned(event)
            self._span_ids[span.id] = depth + 1
        return span.id

    def _emit_interned(self, event: Prov | SpanStart | Library) -> None:
        self.emit(event)
        self._interned.append(event)

    def span_started(self, span: Span) -> None:
        if self.active:
            with self._lock:
                self._span_ref(span)

    def span_ended(self, span: Span) -> None:
        if self.active:
            with self._lock:
                event: SpanEnd = {"type": "span_end", "id": self._span_ref(span), "end_ns": time.time_ns()}
                self.emit(event)

    # -- compiles ----------------------------------------------------------------------------
    def track_compile(self, owner: Any, read: CountReader, fn_name: str, compile_id: int) -> tuple[int, list[Any]]:
        """Remember a jitted function (by `owner`, held weakly) for the runtime summary: its
        compile's index, and the counts list ([calls, cache hits, cache misses, hits by compile
        id]) the integration copies `read(owner)` into after each call (read once more at the
        exit, if alive), crediting each hit to the compile whose cache entry served it."""
        with self._lock:
            key = id(owner)
            entry = self._compiles.get(key)
            if entry is not None and entry[0]() is owner:
                entry[3].append(compile_id)
                return len(entry[3]) - 1, entry[4]
            if len(self._dead) > MAX_DEAD:  # a program that jits in a loop: summarize the dead now
                self._summarize_dead()

            def died(ref: weakref.ref, key: int = key) -> None:  # in the garbage collector: only moves data
                entry = self._compiles.get(key)
                if entry is not None and entry[0] is ref:
                    self._compiles.pop(key, None)
                    self._dead.append(entry[2:])

            counts = [*read(owner), {}]
            self._compiles[key] = (weakref.ref(owner, died), read, fn_name, [compile_id], counts)
            return 0, counts

    def emit_call_summaries(self) -> None:
        """Runtime calls per jitted function, read from the integration's counters (no per-call
        event): live for the functions alive, as of their last call for those collected."""
        for held, read, fn_name, ids, counts in list(self._compiles.values()):
            owner = held()
            if owner is not None:
                counts[:3] = read(owner)
                self._emit_calls(fn_name, ids, counts)
        self._summarize_dead()

    def _summarize_dead(self) -> None:
        dead, self._dead = self._dead, []
        for fn_name, ids, counts in dead:
            self._emit_calls(fn_name, ids, counts)

    def _emit_calls(self, fn_name: str, ids: list[int], counts: list[Any]) -> None:
        event: Calls = {"type": "calls", "fn": fn_name, "compiles": ids, "calls": counts[0],
                        "cache_hits": counts[1], "cache_misses": counts[2],
                        "compile_hits": [counts[3].get(i, 0) for i in ids], "time_ns": time.time_ns()}
        self.emit(event)


MAX_DEAD = 1024  # summaries of collected functions kept for the exit; beyond, written at once
CountReader = Callable[[Any], tuple[int, int, int]]  # a jitted function's (calls, cache hits, cache misses)

SESSION = Session()
_fork_handlers = False  # registered (once per process: os.register_at_fork cannot unregister)


def _register_fork_handlers() -> None:
    global _fork_handlers
    if not _fork_handlers:
        _fork_handlers = True
        os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                            after_in_child=_after_fork_in_child)


# Each does nothing while the session has no exporter (after close(), or before any).
_locked_for_fork = False


def _before_fork() -> None:
    global _locked_for_fork
    if SESSION.active:
        SESSION.before_fork()
        _locked_for_fork = True


def _after_fork_in_parent() -> None:
    global _locked_for_fork
    if _locked_for_fork:
        _locked_for_fork = False
        SESSION.after_fork_in_parent()


def _after_fork_in_child() -> None:
    global _locked_for_fork
    if _locked_for_fork:
        _locked_for_fork = False
        SESSION.after_fork_in_child()
