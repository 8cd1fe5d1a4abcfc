"""Fields of log records, which are untrusted input, as the types the report expects: the value
if it has that type, else None (numbers: provenance/report/numbers.py)."""

from __future__ import annotations

from typing import Any

__all__ = ["UNUSABLE", "hashable"]

# What reading a record the report cannot use may raise (a field of the wrong type, a missing key, an
# id past the end, a structure nested or sized past what Python takes): the one rule every stage of the
# report catches, so an odd record costs a part of a page and is named among the problems, never the report.
UNUSABLE = (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError, OverflowError)


def hashable(value: Any) -> Any:
    """The value, or its repr if it cannot be a dict key (a compile id may be any JSON value)."""
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)
