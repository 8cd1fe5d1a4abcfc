"""The interface every exporter implements: it receives the session's events, in order.

An event is a JSON-able dict with a "type" key, one of `provenance.events.EVENTS` (see
docs/log-schema.md). Exporters must not raise into the program: the session disables an exporter
whose emit fails, with one warning.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from provenance.events import Event


@runtime_checkable
class Exporter(Protocol):
    name: str

    def emit(self, event: Event) -> None:
        """Handle one event. Called with the session's lock held: be quick."""

    def close(self) -> None:
        """Flush and release resources; called once, at disable() or process exit."""
