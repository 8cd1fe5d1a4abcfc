"""Fields of log records, which are untrusted input, as the types the report expects: the value
if it has that type, else None."""

from __future__ import annotations

from typing import Any

__all__ = ["as_float", "as_int", "hashable"]


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def hashable(value: Any) -> Any:
    """The value, or its repr if it cannot be a dict key (a compile id may be any JSON value)."""
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)
