"""The contract between the session and an exporter: where the events of provenance.log.events go
(exporters/base.py re-exports it for the exporters there).

The session hands every event, in order, to every attached exporter: a JSON-able dict with a
"type" key, one of `provenance.log.events.EVENTS` (docs/log-schema.md). Attach one with
`provenance.add_exporter`, detach (and close) it with `provenance.remove_exporter`. An exporter
whose `emit` raises is removed and closed by the session, with one warning; the program runs on.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from provenance.log.events import Event

__all__ = ["Event", "Exporter"]


@runtime_checkable
class Exporter(Protocol):
    name: str  # short, for warnings and provenance.stats(): "jsonl", "otel"
    # Whether trace events should carry the trace's Python text and op layout (`python`, `ops`):
    # printing traces is most of the cost of logging, so the session prints only if one asks.
    needs_trace_text: bool

    def emit(self, event: Event) -> None:
        """Handle one event. Called with the session's lock held: be quick."""

    def close(self) -> None:
        """Flush and release resources. Called once, at removal, disable() or process exit."""

    def stats(self) -> dict[str, Any]:
        """A few figures about what this exporter did (events, bytes, drops), for provenance.stats()."""

    # Optional: `after_fork(self) -> None`, called in a child process forked from this one
    # (os.fork, multiprocessing), before its first event: the JSONL exporter opens a file of the
    # child's own there. The session then starts afresh (a new header, record ids from 1).
