"""Provenance spans opened by user code: `with provenance.scope("name", role=..., **attrs):`.

The span stack lives in a ContextVar, so each thread and each asyncio task sees its own
innermost span; every bound symbol bound while a span is active is stamped with it.

Attributes are converted as they are given, in the spirit of OpenTelemetry's attribute rules:
str, bool, int (64-bit), float and lists of those are kept; anything else becomes its repr
(shortened), or a placeholder if its repr raises. So a span holds plain values only (never the
user's tensor or model), and no attribute can fail a log or reach the user's code as an error.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

TYPE_CHECKING = False  # typing is not imported: `import provenance` stays light

if TYPE_CHECKING:  # Span: imported by scope() itself, so importing the package loads no dataclass machinery
    from typing import Any

    from provenance.core.record import Span

__all__ = ["attribute_value", "current_span", "scope", "text"]

MAX_REPR = 200  # characters of an attribute's repr

# The innermost span of this thread/task (capture's bind hook reads it for every new symbol).
innermost_span: ContextVar[Span | None] = ContextVar("provenance_span", default=None)
# Observers of span starts and ends: the session, while it has exporters (empty at import).
# A span's end is an event, not part of the record.
span_start_listeners: list = []
span_end_listeners: list = []


def current_span() -> Span | None:
    """The innermost active span of this thread/task, or None."""
    return innermost_span.get()


def text(value: str) -> str:
    """`value` as valid UTF-8 text: lone surrogates (a command-line argument or a path of bytes
    that are not UTF-8, which Python keeps as surrogate escapes) become `\\xNN` escapes."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        try:
            return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")


def _repr(value: Any) -> str:
    try:
        shown = repr(value)
        if not isinstance(shown, str):
            raise TypeError("__repr__ returned a non-string")
    except Exception:
        try:
            name = type(value).__qualname__
        except Exception:
            name = "object"
        return f"<unrepresentable {name}>"
    shown = text(shown)
    return shown if len(shown) <= MAX_REPR else shown[: MAX_REPR - 1] + "\u2026"


def _scalar(value: Any) -> Any:
    if value is None or value is True or value is False:
        return value
    if type(value) is str:
        return text(value)
    if type(value) is int:
        return value if -(1 << 63) <= value < (1 << 63) else _repr(value)
    if type(value) is float:
        return value
    return _repr(value)


def attribute_value(value: Any) -> Any:
    """A scope attribute as the span keeps it: a plain JSON value. Never raises."""
    if type(value) in (list, tuple):
        return [_scalar(v) for v in value]
    return _scalar(value)


@contextmanager
def scope(name: str, *, role: str | None = None, **attributes: Any) -> Iterator[Span]:
    """Open a provenance span; ops bound inside it carry it (and its role, if given).

    A nested scope without a role inherits its parent's role.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"provenance.scope() needs a non-empty name, got {_repr(name)}")
    if role is not None and not isinstance(role, str):
        raise TypeError(f"provenance.scope() needs a string role, got {_repr(role)}")
    parent = innermost_span.get()
    if role is None and parent is not None:
        role = parent.role
    from provenance.core.record import Span

    values = tuple(sorted((key, attribute_value(value)) for key, value in attributes.items()))
    span = Span(name=text(name), parent=parent, attributes=values, role=None if role is None else text(role))
    token = innermost_span.set(span)
    for listener in span_start_listeners:
        listener(span)
    try:
        yield span
    finally:
        innermost_span.reset(token)
        for listener in span_end_listeners:
            listener(span)
