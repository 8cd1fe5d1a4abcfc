"""Records checked against their definitions (provenance.log.events) as they are read.

A log is untrusted input: any field may have any JSON value. A field of the wrong type or value
is dropped from the record (the pages then show it as unknown), a bad element of an array of
frames is dropped from the array, and the record is reported as malformed, with where and why.
The checks are built once from the TypedDicts, so checking every record of a large log costs
little next to parsing it.
"""

from __future__ import annotations

import reprlib
import typing
from typing import Any

from provenance.log import schema

__all__ = ["check"]

# Kept even when malformed: a compile's records are tied together by their compile id, whatever
# JSON value it is (the pages name such a compile `...-x<n>`, never after the value).
_KEEP = frozenset({"type", "compile"})
# Arrays whose entries the code that reads them checks one by one (analyze/compile.parse_ops):
# only their type is checked here.
_SHALLOW = frozenset({("trace", "ops")})

_short = reprlib.Repr()
_short.maxstring = _short.maxother = 40
_short.maxlist = _short.maxdict = 4


class _Field:
    """One field of a record type (provenance.log.schema's node): how to check it, and how to keep
    what is good in it."""

    __slots__ = ("name", "required", "check", "explain", "element", "nested")

    def __init__(self, name: str, required: bool, node: schema.Node) -> None:
        self.name, self.required, self.check, self.explain = name, required, node.check, node.explain
        # a nested object's fields, repaired one by one
        self.nested = [_Field(*f) for f in node.fields] if node.fields is not None else None
        # an array's entries, when bad ones can be dropped alone (frames, objects)
        element = node.element
        self.element = element.check if element is not None and _is_record(element.hint) else None


def _is_record(hint: Any) -> bool:
    """A frame-like tuple or an object, or a union of them: an array of them drops its bad entries alone."""
    union = typing.get_args(hint) if typing.get_origin(hint) is not tuple else ()
    return all(typing.get_origin(h) is tuple or typing.is_typeddict(h) for h in (union or (hint,)))


# Each type's forms, built at its first record: a log has few of the types (and building all of
# them, their TypedDicts' hints evaluated, was most of what importing the reader cost).
_FORMS: dict[str, list[list[_Field]]] = {}


def _forms(event_type: str) -> list[list[_Field]]:
    found = _FORMS[event_type] = [
        [_Field(k, required, schema.node(list) if (event_type, k) in _SHALLOW else n)
         for k, required, n in form.fields if k != "type"]
        for form in schema.forms(event_type)]
    return found


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
        said = field.explain(value, f"{where}.{name}", False) if type(value) in (int, float) else []
        out.append(said[0] if len(said) == 1 else f"{where}.{name}: {_what(value)}")  # a number: why (its range)
        if name not in _KEEP:
            del record[name]


def check(record: dict) -> list[str]:
    """What is wrong with a record of a known type ([] if nothing); what is wrong is removed from
    it. Fields this reader does not know (a newer minor schema's) are left alone."""
    event_type = record["type"]
    forms = _FORMS.get(event_type) or _forms(event_type)
    fields = forms[0] if len(forms) == 1 or "same_as" not in record else forms[1]
    out: list[str] = []
    _fix(fields, record, event_type, out)
    return out
