"""Counts in words: "1 compile", "2 compiles". The one helper for every page (the `plural`
filter) and message, so no count reads "1 recompiles"."""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: object, singular: str, plural_form: str | None = None) -> str:
    """`n` and the word: `singular` when n is 1, else `plural_form` (default: singular + "s").
    Either may be a phrase whose verb agrees ("compile differs", "compiles differ")."""
    word = singular if n == 1 else plural_form if plural_form is not None else singular + "s"
    return f"{n} {word}"
