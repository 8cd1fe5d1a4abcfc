"""The process's event stream: compile ids, interned record ids, and fan-out to exporters.

Capture hooks call the `Session` with plain values; it turns them into events (the TypedDicts of
`provenance.events`, schema in docs/log-schema.md), emits each provenance record and span once
with an id before its first reference, and hands every event to every exporter
(`exporters.base.Exporter`). With no exporter, nothing is built: capture alone costs nothing here.
Integrations name what they add to the header (`add_version`): this module knows nothing of
Thunder or torch.
"""

from __future__ import annotations

import atexit
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
from provenance.events import SCHEMA_VERSION, Calls, Event, Header, Prov, SpanEnd, SpanStart, frames_json
from provenance.record import Provenance, Span
from provenance.scope import span_end_listeners, span_start_listeners

if TYPE_CHECKING:
    from exporters.base import Exporter


def _env_int(*names: str) -> int | None:
    for name in names:
        value = os.environ.get(name)
        if value is not None and value.strip().lstrip("-").isdigit():
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
        self._prov_ids: dict[Provenance, int] = {}
        self._span_ids: set[int] = set()
        self._interned: list[Event] = []  # prov and span events, replayed to a joining exporter
        # (CompileStats, fn name, compile ids) of jitted functions, for the exit summary. Held
        # strongly (a function that died before exit still gets its summary), the oldest
        # beyond MAX_TRACKED weakly, so a program that jits in a loop does not keep them all.
        self._compiles: list[tuple[Any, str, list[int]]] = []

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
        """Summarize runtime calls, then close every exporter (at disable() or exit)."""
        with self._lock:
            if not self.exporters:
                return
            self.emit_call_summaries()
            for exporter in self.exporters:
                self._close(exporter)
            self.exporters.clear()
            self._compiles.clear()
            self._header_sent = False
            self._prov_ids.clear()
            self._span_ids.clear()
            self._interned.clear()

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
            "argv": sys.argv, "pid": os.getpid(), "host": socket.gethostname(), "rank": rank, "world_size": world,
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
            new_id = self._prov_ids.setdefault(record, len(self._prov_ids) + 1)
            event: Prov = {
                "type": "prov", "id": new_id, "kind": record.kind, "source": frames_json(record.source),
                "module": record.module, "module_type": record.module_type, "transforms": list(record.transforms),
                "role": record.role, "span": span, "derived_from": derived, "members": members,
            }
            self._emit_interned(event)
            return new_id

    def _span_ref(self, span: Span | None) -> int | None:
        if span is None:
            return None
        if span.id not in self._span_ids:
            parent = self._span_ref(span.parent)
            self._span_ids.add(span.id)
            event: SpanStart = {
                "type": "span", "id": span.id, "name": span.name, "parent": parent,
                "attributes": {k: _jsonable(v) for k, v in span.attributes}, "role": span.role,
                "start_ns": span.start_ns,
            }
            self._emit_interned(event)
        return span.id

    def _emit_interned(self, event: Prov | SpanStart) -> None:
        self._interned.append(event)
        self.emit(event)

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
    def track_compile(self, compile_stats: Any, fn_name: str, compile_id: int) -> int:
        """Remember a jitted function's stats for the runtime summary; its compile's index."""
        with self._lock:
            for held, _, ids in self._compiles:
                if _deref(held) is compile_stats:
                    ids.append(compile_id)
                    return len(ids) - 1
            self._compiles.append((compile_stats, fn_name, [compile_id]))
            if len(self._compiles) > MAX_TRACKED:
                old, name, ids = self._compiles[-MAX_TRACKED - 1]
                if not isinstance(old, weakref.ref):
                    self._compiles[-MAX_TRACKED - 1] = (weakref.ref(old), name, ids)
                # functions that died have no summary to give: forget them
                self._compiles = [c for c in self._compiles if _deref(c[0]) is not None]
            return 0

    def emit_call_summaries(self) -> None:
        """Runtime calls per jitted function, read from Thunder's own counters (no per-call hook)."""
        for held, fn_name, ids in self._compiles:
            cs = _deref(held)
            if cs is not None:
                event: Calls = {"type": "calls", "fn": fn_name, "compiles": ids, "calls": cs.calls,
                                "cache_hits": cs.cache_hits, "cache_misses": cs.cache_misses,
                                "time_ns": time.time_ns()}
                self.emit(event)


MAX_TRACKED = 64


def _deref(held: Any) -> Any:
    return held() if isinstance(held, weakref.ref) else held


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return repr(value)


SESSION = Session()
atexit.register(SESSION.close)
span_start_listeners.append(SESSION.span_started)
span_end_listeners.append(SESSION.span_ended)
