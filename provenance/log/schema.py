"""Events checked against their definitions (provenance.log.events): the one walker of the TypedDicts.

Each type hint becomes a `Node` once: `check(value)`, a fast yes/no (what a log reader runs on
every record: extra keys of a nested object are a newer minor schema's and pass), and
`explain(value, where)`, what is wrong, field by field (strict: extra keys are named too). Scalars
(and arrays of their tuples: a memory record's ops, a phase list) are also checked a column at a
time (`column`: C loops over all the values, the same answer as `check` on each). Writers'
tests call `problems(event)`; the log reader (provenance/report/read/validate.py) builds its
repairs on the same nodes, so a record the tests call valid is one the reader keeps whole.

Integers are non-negative (ids, counts, line numbers, times) except where a field is declared
signed, and at most MAX_INT (an int64: nanoseconds since 1970 until 2262); a float is a number of
seconds, finite and at most MAX_SECONDS (its nanoseconds are an int64). A reader holds every value
in these bounds in any 64-bit type, and sums of them (provenance/report/numbers.py) safely.
Arrays are JSON arrays, or tuples for events built in process.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, Literal

from provenance.log import events

__all__ = ["MAX_INT", "MAX_SECONDS", "SIGNED", "Node", "node", "problems"]

MAX_INT = 2**63 - 1
MAX_SECONDS = MAX_INT / 1e9  # about 292 years
SIGNED = frozenset({"compile"})  # fields any integer is valid for (a compile id from the log is only a key)
_ARRAY = (list, tuple)
_INT, _STR, _LIST = frozenset({int}), frozenset({str}), frozenset({list})


class Node:
    """One type hint, compiled."""

    __slots__ = ("check", "column", "explain_value", "fields", "element", "hint")

    def __init__(self, hint: Any, check: Callable[[Any], bool], explain: Callable[[Any, str, bool], list[str]],
                 fields: list[tuple[str, bool, Node]] | None = None, element: Node | None = None,
                 column: Callable[[Sequence[Any]], bool] | None = None) -> None:
        self.hint, self.check, self.explain_value = hint, check, explain
        self.fields = fields  # an object's (name, required, node)
        self.element = element  # an array's entries
        self.column = column  # all(map(check, values)), in C loops; None where there is none

    def explain(self, value: Any, where: str, strict: bool = True) -> list[str]:
        """What is wrong with `value` ([] if nothing); `strict`: unexpected keys too."""
        return self.explain_value(value, where, strict)


def _scalar(hint: Any, signed: bool) -> Node:
    column: Callable[[Sequence[Any]], bool] | None = None
    if hint is bool:
        check = lambda v: v is True or v is False  # noqa: E731
    elif hint is str:
        check = lambda v: type(v) is str  # noqa: E731
    elif hint is list:  # an array whose entries its reader checks (see validate.py)
        check = lambda v: type(v) is list  # noqa: E731
    elif hint is int:
        low = -MAX_INT - 1 if signed else 0
        check = lambda v: type(v) is int and low <= v <= MAX_INT  # noqa: E731
        column = lambda vs: not vs or (set(map(type, vs)) == _INT and low <= min(vs) and max(vs) <= MAX_INT)  # noqa: E731
    elif hint is float:  # no column check: min and max are not defined over a NaN
        low = -MAX_SECONDS if signed else 0
        check = lambda v: (type(v) is int or type(v) is float) and low <= v <= MAX_SECONDS  # noqa: E731
    else:
        raise TypeError(f"no check for {hint!r}")  # a new kind of field: teach this module
    if hint in (bool, str, list):
        kind = frozenset({hint})
        column = lambda vs: set(map(type, vs)) <= kind  # noqa: E731

    def explain(v: Any, where: str, strict: bool) -> list[str]:
        if check(v) or (hint is list and type(v) is tuple):
            return []
        wrong = type(v) is not hint and not (hint is float and type(v) is int)
        if not wrong and hint in (int, float) and (signed or not v < 0):  # too large (or NaN)
            bound = "2**63 - 1" if hint is int else f"{MAX_SECONDS:.4g}"
            return [f"{where}: {type(v).__name__} {v!r:.40} out of range (at most {bound} in size)"]
        return [f"{where}: {type(v).__name__} {v!r:.40}, not {'' if wrong else 'a non-negative '}{hint.__name__}"]

    return Node(hint, check, explain, column=column)


def node(hint: Any, signed: bool = False) -> Node:
    """The compiled check of a type hint of provenance.log.events."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return Node(hint, lambda v: True, lambda v, where, strict: [], column=lambda vs: True)
    if origin in (typing.Union, types.UnionType):
        nullable = type(None) in args
        parts = [node(a, signed) for a in args if a is not type(None)]
        column = None
        if len(parts) == 1:
            only = parts[0].check
            check = (lambda v: v is None or only(v)) if nullable else only
            if parts[0].column is not None:
                only_column = parts[0].column
                column = (lambda vs: only_column([v for v in vs if v is not None])) if nullable else only_column
        else:
            checks = [p.check for p in parts]
            check = lambda v: (nullable and v is None) or any(c(v) for c in checks)  # noqa: E731

        def explain(v: Any, where: str, strict: bool) -> list[str]:
            if nullable and v is None:
                return []
            found = [p.explain(v, where, strict) for p in parts]
            return [] if any(not f for f in found) else min(found, key=len)

        return Node(hint, check, explain, column=column)
    if origin is Literal:
        allowed = frozenset(args)
        return Node(hint, lambda v: type(v) is str and v in args,
                    lambda v, where, strict: [] if v in args else [f"{where}: {v!r} is not one of {args}"],
                    column=lambda vs: set(map(type, vs)) <= _STR and set(vs) <= allowed)
    if typing.is_typeddict(hint):
        return _object(hint)
    if origin is tuple:
        parts = [node(a, signed) for a in args]
        checks, n = [p.check for p in parts], len(parts)

        def explain(v: Any, where: str, strict: bool) -> list[str]:
            if not isinstance(v, _ARRAY):
                return [f"{where}: not an array"]
            if len(v) != n:
                return [f"{where}: {len(v)} items, not {n}"]
            return [p for i, (x, part) in enumerate(zip(v, parts)) for p in part.explain(x, f"{where}[{i}]", strict)]

        columns = [p.column for p in parts]
        rows = None  # a column of these tuples (an array's entries), checked a column of theirs at a time
        if all(c is not None for c in columns):
            rows = lambda vs: (set(map(type, vs)) <= _LIST and set(map(len, vs)) <= {n}  # noqa: E731
                               and all(c(col) for c, col in zip(columns, zip(*vs))))
        return Node(hint, lambda v: type(v) is list and len(v) == n and all(c(x) for c, x in zip(checks, v)), explain,
                    column=rows)
    if origin is list:
        element = node(args[0], signed)
        each, rows = element.check, element.column

        def explain(v: Any, where: str, strict: bool) -> list[str]:
            if not isinstance(v, _ARRAY):
                return [f"{where}: not an array"]
            return [p for i, x in enumerate(v) for p in element.explain(x, f"{where}[{i}]", strict)]

        check = (lambda v: type(v) is list and rows(v)) if rows is not None else (
            lambda v: type(v) is list and all(map(each, v)))
        return Node(hint, check, explain, element=element)
    if origin is dict:
        value = node(args[1], signed)
        each = value.check

        def explain(v: Any, where: str, strict: bool) -> list[str]:
            if not isinstance(v, dict):
                return [f"{where}: not an object"]
            return [p for k, x in v.items() for p in value.explain(x, f"{where}.{k}", strict)]

        return Node(hint, lambda v: type(v) is dict and all(map(each, v.values())), explain)
    return _scalar(hint, signed)


def _object(form: Any) -> Node:
    hints = typing.get_type_hints(form)
    fields = [(k, k in form.__required_keys__, node(h, signed=k in SIGNED)) for k, h in hints.items()]
    required = frozenset(k for k, is_required, _ in fields if is_required)
    checks = [(k, n.check) for k, _, n in fields]

    def check(v: Any) -> bool:
        return type(v) is dict and required <= v.keys() and all(c(v[k]) for k, c in checks if k in v)

    def explain(v: Any, where: str, strict: bool) -> list[str]:
        if not isinstance(v, dict):
            return [f"{where}: not an object"]
        out = [f"{where}: missing {k!r}" for k, is_required, _ in fields if is_required and k not in v]
        if strict:
            out += [f"{where}: unexpected {k!r}" for k in v if k not in hints]
        for k, _, n in fields:
            if k in v:
                out += n.explain(v[k], f"{where}.{k}", strict)
        return out

    return Node(form, check, explain, fields=fields)


_FORMS: dict[str, list[Node]] = {}


def forms(event_type: str) -> list[Node]:
    """The compiled forms of an event type (built at first use: importing this costs nothing)."""
    found = _FORMS.get(event_type)
    if found is None:
        found = _FORMS[event_type] = [_object(form) for form in events.forms(event_type)]
    return found


def problems(event: Any) -> list[str]:
    """What is wrong with `event` against its definition ([] when nothing): unknown type, missing
    or unexpected keys, values of the wrong JSON type (nested objects and arrays included)."""
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        return ["not an event (a dict with a string \"type\")"]
    if event["type"] not in events.TYPES:
        return [f"unknown event type {event['type']!r}"]
    found = [form.explain(event, event["type"]) for form in forms(event["type"])]
    return min(found, key=len)
