"""Fields of log records, which are untrusted input, as the types the report expects: the value
if it has that type, else None (numbers: provenance/report/numbers.py)."""

from __future__ import annotations

from typing import Any

__all__ = ["hashable"]


def hashable(value: Any) -> Any:
    """The value, or its repr if it cannot be a dict key (a compile id may be any JSON value)."""
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)
