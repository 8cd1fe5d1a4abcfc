"""JSON for the pages' scripts, safe inside <script>: `<`, `>`, `&` are written as \\u003c,
\\u003e, \\u0026, so no log text can close the element or open a comment; line separators are
escaped too (they would end a JS string literal)."""

from __future__ import annotations

from typing import Any

import orjson
from markupsafe import Markup

from provenance.report.numbers import dumps

__all__ = ["json_bytes", "json_script"]


def json_bytes(value: Any) -> bytes:
    """`value` as JSON safe inside <script> (UTF-8)."""
    data = dumps(value, orjson.OPT_NON_STR_KEYS)  # a number past 64 bits as a float
    if b"<" in data or b">" in data or b"&" in data:
        data = data.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")
    if not data.isascii():  # labels' middle dots; line separators would end a JS string literal
        data = (data.replace("\u00b7".encode(), b"\\u00b7").replace("\u2028".encode(), b"\\u2028")
                .replace("\u2029".encode(), b"\\u2029"))
    return data


def json_script(value: Any) -> Markup:
    """json_bytes, for a template."""
    return Markup(json_bytes(value).decode())
