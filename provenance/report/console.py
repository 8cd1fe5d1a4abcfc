"""What the commands print on stderr: their messages, made safe for a terminal."""

from __future__ import annotations

import sys

__all__ = ["fail", "printable", "say"]


def printable(text: str) -> str:
    """`text` safe for a terminal: control characters (escape sequences in a file name) escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def say(message: str) -> None:
    print(printable(message), file=sys.stderr)


def fail(message: str) -> int:
    """Print `thunder-trace: error: message`; the exit status of a command that could not run (2)."""
    say(f"thunder-trace: error: {message}")
    return 2
