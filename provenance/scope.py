"""Provenance spans opened by user code: `with provenance.scope("name", role=..., **attrs):`.

The span stack lives in a ContextVar, so each thread and each asyncio task sees its own
innermost span; every bound symbol bound while a span is active is stamped with it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from provenance.record import Span

__all__ = ["scope", "current_span"]

_current_span: ContextVar[Span | None] = ContextVar("provenance_span", default=None)
# Observers of span starts and ends (the session); a span's end is an event, not part of the record.
span_start_listeners: list = []
span_end_listeners: list = []


def current_span() -> Span | None:
    """The innermost active span of this thread/task, or None."""
    return _current_span.get()


@contextmanager
def scope(name: str, *, role: str | None = None, **attributes: Any) -> Iterator[Span]:
    """Open a provenance span; ops bound inside it carry it (and its role, if given).

    A nested scope without a role inherits its parent's role.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"provenance.scope() needs a non-empty name, got {name!r}")
    parent = _current_span.get()
    if role is None and parent is not None:
        role = parent.role
    span = Span(name=name, parent=parent, attributes=tuple(sorted(attributes.items())), role=role)
    token = _current_span.set(span)
    for listener in span_start_listeners:
        listener(span)
    try:
        yield span
    finally:
        _current_span.reset(token)
        for listener in span_end_listeners:
            listener(span)
