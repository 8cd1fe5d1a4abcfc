"""A log's numbers as values every consumer can hold: the one place that says what a number of a
log may be and how the report computes with them (Perfetto, compile_directory.json, the totals,
profiles, tracebacks).

A log is untrusted. orjson reads an integer up to 2**64 - 1 as an int (a larger one as a float)
and any finite float; the report then adds, subtracts and scales them (sums over compiles,
seconds to nanoseconds), which can pass what its writers hold (orjson: 64 bits; Perfetto: int64
timestamps) or overflow a float to infinity. So:

- a field's integer is at most `MAX_INT` (2**63 - 1: an int64, nanoseconds since 1970 until
  2262) and a float field (a number of seconds) finite and at most `MAX_SECONDS` (its nanoseconds
  are an int64): `provenance.log.schema` checks every field against these bounds, so read/validate.py
  drops, counts and lists a field out of range as it does a field of the wrong type (the pages
  show it as unknown; its compile is kept). `as_int`, `as_float` and `as_count` apply the same
  bounds to values the schema does not reach (array entries their readers check);
- a number read out of text (a traceback's line numbers) is read by `int_of_text`: at most
  `MAX_DIGITS` digits, else unknown (Python refuses to convert more than 4300 digits);
- sums (`total`) saturate at `MAX_INT`; a duration (`ns_of_seconds`, `ns_of_ms`, `duration_ns`)
  is clamped to [0, MAX_INT];
- what is written as JSON goes through `dumps`: an integer orjson cannot write (past 64 bits)
  saturates at the int64 bounds (a sum that large is at least MAX_INT, as `total` says), a
  non-finite float is null, never a failure.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable
from typing import Any

import orjson

from provenance.core.scope import text as valid_text  # a file name's bytes as \xNN: the writer's rule
from provenance.log.schema import MAX_INT, MAX_SECONDS

__all__ = ["MAX_DIGITS", "MAX_INT", "MAX_SECONDS", "as_count", "as_float", "as_int", "clamp", "dumps",
           "duration_ns", "int_of_text", "json_safe", "ns_of_ms", "ns_of_seconds", "path_text", "total", "valid_text"]

MIN_INT = -MAX_INT - 1
MAX_DIGITS = 18  # digits of a number read from text: every such number fits MAX_INT


def as_int(value: Any) -> int | None:
    """An integer of a log as an int64, else None (unknown)."""
    return value if type(value) is int and MIN_INT <= value <= MAX_INT else None


def as_count(value: Any) -> int | None:
    """A count, a time in ns, an id: an integer in [0, MAX_INT], else None."""
    return value if type(value) is int and 0 <= value <= MAX_INT else None


def as_float(value: Any) -> float | None:
    """A number of a log as a finite float within ±MAX_SECONDS (a field's bound), else None."""
    if type(value) is int or type(value) is float:
        value = float(value)
        return value if -MAX_SECONDS <= value <= MAX_SECONDS else None  # NaN fails both
    return None


def clamp(value: int) -> int:
    """An int computed from a log's numbers, within [MIN_INT, MAX_INT]."""
    return MAX_INT if value > MAX_INT else MIN_INT if value < MIN_INT else value


def total(values: Iterable[int | None]) -> int:
    """The sum of counts (None and non-ints count 0), saturating at MAX_INT."""
    out = 0
    for value in values:
        if type(value) is int:
            out += value
    return clamp(out)


def ns_of_seconds(seconds: float | None) -> int:
    """Seconds as nanoseconds in [0, MAX_INT] (None, NaN: 0)."""
    if seconds is None or not seconds > 0:
        return 0
    return MAX_INT if seconds >= MAX_SECONDS else min(int(seconds * 1e9), MAX_INT)


def ns_of_ms(ms: float | None) -> int:
    """Milliseconds as nanoseconds in [0, MAX_INT]."""
    return ns_of_seconds(None if ms is None else ms / 1e3)


def duration_ns(start: int, end: int) -> int:
    """end - start, in [0, MAX_INT]."""
    return max(0, min(end - start, MAX_INT))


def int_of_text(text: str) -> int | None:
    """A run of decimal digits as an int, or None past MAX_DIGITS digits (or not digits)."""
    if not text or len(text) > MAX_DIGITS or not text.isascii() or not text.isdigit():
        return None
    return int(text)


def json_safe(value: Any) -> Any:
    """`value` (dicts, lists, tuples, dataclasses, scalars) with every integer past the int64 bounds
    saturated at them and every non-finite float as None."""
    if type(value) is int:
        return min(max(value, MIN_INT), MAX_INT)
    if type(value) is float:
        return value if math.isfinite(value) else None
    if type(value) is str:
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_text(k) if type(k) is str else k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: json_safe(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def dumps(value: Any, option: int = 0) -> bytes:
    """orjson.dumps of `value`; where a number cannot be written (an integer past 64 bits, made
    by adding a log's numbers), the same with that number made safe (`json_safe`)."""
    try:
        return orjson.dumps(value, option=option)
    except TypeError:
        return orjson.dumps(json_safe(value), option=option)


def path_text(path: str | os.PathLike[str]) -> str:
    """The base name of `path` as text a page can show (a file name need not be UTF-8)."""
    return valid_text(os.path.basename(os.fspath(path)))
