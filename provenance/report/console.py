"""What the commands print on stderr: their messages, made safe for a terminal."""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["fail", "open_in_browser", "printable", "say"]


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


def open_in_browser(index: Path) -> None:
    """Open the report if a graphical browser can be: never blocks, never fails."""
    if os.environ.get("CI") or not (sys.stdout.isatty() and sys.stderr.isatty()):
        return
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return  # a console browser would take over the terminal
    import threading
    import webbrowser  # (and subprocess, shlex): imported only to open one

    def run() -> None:
        try:
            webbrowser.open(index.resolve().as_uri())
        except Exception:  # a browser is a convenience: never fail for it
            pass

    opener = threading.Thread(target=run, daemon=True)
    opener.start()
    opener.join(timeout=3)  # time to launch one (the process exits next), but never a hang
