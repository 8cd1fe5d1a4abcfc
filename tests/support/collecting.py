"""An in-memory exporter for tests: every event a session emits, kept in order."""

from __future__ import annotations


class Collect:
    """An exporter keeping every event (the contract of exporters.base.Exporter)."""

    name = "collect"
    needs_trace_text = True

    def __init__(self) -> None:
        self.events: list[dict] = []

    def emit(self, event) -> None:
        self.events.append(event)

    def close(self) -> None:
        pass

    def stats(self) -> dict:
        return {"events": len(self.events)}
