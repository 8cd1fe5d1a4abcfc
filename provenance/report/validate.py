"""Records checked against their definitions (provenance.events) as they are read.

A log is untrusted input: any field may have any JSON value. A field of the wrong type or value
is dropped from the record (the pages then show it as unknown), a bad element of an array of
frames is dropped from the array, and the record is reported as malformed, with where and why.
The checks are built once from the TypedDicts, so checking every record of a large log costs
little next to parsing it.
"""

from __future__ import annotations

import reprlib
import types
import typing
from collections.abc import Callable
from typing import Any, Literal

from provenance import events

__all__ = ["check"]

Check = Callable[[Any], bool]

# Kept even when malformed: a compile's records are tied together by their compile id, whatever
# JSON value it is (the pages name such a compile `...-x<n>`, never after the value).
_KEEP = frozenset({"type", "compile"})
# Read and checked by profiles.scan, ahead of the pass (a bad one is counted there, once).
_CHECKED_ELSEWHERE = frozenset({"profile_ops", "profile_call"})
# Arrays whose entries the code that reads them checks one by one (compiles.parse_ops): only
# their type is checked here.
_SHALLOW = frozenset({("trace", "ops")})

_short = reprlib.Repr()
_short.maxstring = _short.maxother = 40
_short.maxlist = _short.maxdict = 4


def _scalar(hint: Any, signed: bool) -> Check:
    if hint is bool:
        return lambda v: v is True or v is False
    if hint is str:
        return lambda v: type(v) is str
    if hint is list:
        return lambda v: type(v) is list
    if hint is int:
        return (lambda v: type(v) is int) if signed else (lambda v: type(v) is int and v >= 0)
    if hint is float:
        return lambda v: (type(v) is int or type(v) is float) and (signed or v >= 0)
    raise TypeError(f"no check for {hint!r}")  # a new kind of field: teach this module


class _Field:
    """One field of a record type: how to check it, and how to keep what is good in it."""

    __slots__ = ("name", "required", "check", "element", "nested")

    def __init__(self, name: str, hint: Any, required: bool) -> None:
        self.name, self.required = name, required
        self.element: Check | None = None  # a list's elements, when bad ones can be dropped alone
        self.nested: list[_Field] | None = None  # a nested object's fields
        self.check = self._build(hint, signed=name == "compile", top=True)

    def _build(self, hint: Any, signed: bool, top: bool = False) -> Check:
        """The check of `hint`; `top`: the field's own type (whose parts may be dropped alone)."""
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if hint is Any:
            return lambda v: True
        if origin in (typing.Union, types.UnionType):
            others = [a for a in args if a is not type(None)]
            checks = [self._build(a, signed) for a in others]
            if len(checks) == 1:
                only = checks[0]
                return (lambda v: v is None or only(v)) if len(others) < len(args) else only
            nullable = len(others) < len(args)
            return lambda v: (nullable and v is None) or any(c(v) for c in checks)
        if origin is Literal:
            return lambda v: type(v) is str and v in args
        if typing.is_typeddict(hint):
            hints = typing.get_type_hints(hint)
            fields = [_Field(k, h, k in hint.__required_keys__) for k, h in hints.items()]
            if top:
                self.nested = fields
            keys = frozenset(k for k in hints if k in hint.__required_keys__)
            return lambda v: type(v) is dict and keys <= v.keys() and all(f.check(v[f.name]) for f in fields
                                                                          if f.name in v)
        if origin is tuple:
            parts = [self._build(a, signed) for a in args]
            n = len(parts)
            return lambda v: type(v) is list and len(v) == n and all(c(x) for c, x in zip(parts, v))
        if origin is list:
            element = self._build(args[0], signed)
            union = typing.get_origin(args[0]) in (typing.Union, types.UnionType)
            if top and all(map(_is_record, typing.get_args(args[0]) if union else args)):
                self.element = element
            return lambda v: type(v) is list and all(map(element, v))
        if origin is dict:
            value = self._build(args[1], signed)
            return lambda v: type(v) is dict and all(map(value, v.values()))
        return _scalar(hint, signed)


def _is_record(hint: Any) -> bool:
    """A frame-like tuple or an object: an array of them drops its bad entries alone."""
    return typing.get_origin(hint) is tuple or typing.is_typeddict(hint)


def _forms() -> dict[str, list[list[_Field]]]:
    out: dict[str, list[list[_Field]]] = {}
    for event_type in events.EVENTS:
        for form in events.forms(event_type):
            hints = typing.get_type_hints(form)
            out.setdefault(event_type, []).append(
                [_Field(k, list if (event_type, k) in _SHALLOW else h, k in form.__required_keys__)
                 for k, h in hints.items() if k != "type"])
    return out


_FORMS = _forms()


def _what(value: Any) -> str:
    return f"{type(value).__name__} {_short.repr(value)}"


def _fix(fields: list[_Field], record: dict, where: str, out: list[str]) -> None:
    for field in fields:
        name = field.name
        if name not in record:
            if field.required:
                out.append(f"{where}: missing {name!r}")
            continue
        value = record[name]
        if field.check(value):
            continue
        if field.nested is not None and type(value) is dict:
            _fix(field.nested, value, f"{where}.{name}", out)
            continue
        if field.element is not None and type(value) is list:
            kept = [v for v in value if field.element(v)]
            out.append(f"{where}.{name}: {len(value) - len(kept)} malformed entr"
                       f"{'y' if len(value) - len(kept) == 1 else 'ies'} dropped")
            record[name] = kept
            continue
        out.append(f"{where}.{name}: {_what(value)}")
        if name not in _KEEP:
            del record[name]


def check(record: dict) -> list[str]:
    """What is wrong with a record of a known type ([] if nothing); what is wrong is removed from
    it. Fields this reader does not know (a newer minor schema's) are left alone."""
    event_type = record["type"]
    if event_type in _CHECKED_ELSEWHERE:
        return []
    forms = _FORMS[event_type]
    fields = forms[0] if len(forms) == 1 or "same_as" not in record else forms[1]
    out: list[str] = []
    _fix(fields, record, event_type, out)
    return out
