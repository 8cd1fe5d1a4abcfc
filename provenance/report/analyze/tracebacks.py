"""A failed compile's traceback, as the log has it: without this package's own wrapper frames,
and its innermost user frame, the line to headline.

The writer already leaves its frames out and logs the user frame (`compile_error.user_frame`,
schema 1.1); this is for older logs, and defensive: the text is parsed as Python prints it.
"""

from __future__ import annotations

import os
import re

from provenance.core.record import user_frame
from provenance.core.usercode import is_library_path
from provenance.report.model import StackFrame
from provenance.report.numbers import int_of_text

__all__ = ["user_frame_of", "without_our_frames"]

_FRAME = re.compile(r'  File "(?P<file>[^"\n]*)", line (?P<line>\d+), in (?P<fn>[^\n]*)\n(?:    (?P<text>[^\n]*)\n)?')
# The hooks that wrap Thunder's functions (provenance/thunder/): never part of the user's story.
_OURS = re.compile(r"(^|[/\\])provenance[/\\]thunder[/\\][^/\\]+\.py$")


def _frame_blocks(text: str) -> list[tuple[int, int, re.Match]]:
    """(start, end, match) of each frame: its `File` line, its source line and any caret lines."""
    out = []
    for match in _FRAME.finditer(text):
        end = match.end()
        while text.startswith("    ", end) and text[end + 4: end + 5] in ("^", "~", " "):  # 3.11's markers
            stop = text.find("\n", end)
            end = len(text) if stop < 0 else stop + 1
        out.append((match.start(), end, match))
    return out


def without_our_frames(text: str) -> str:
    """The traceback without the frames of this package's hooks."""
    if "provenance" not in text:
        return text
    parts, pos = [], 0
    for start, end, match in _frame_blocks(text):
        if _OURS.search(match.group("file")):
            parts.append(text[pos:start])
            pos = end
    parts.append(text[pos:])
    return "".join(parts)


def user_frame_of(text: str) -> StackFrame | None:
    """The innermost frame of the traceback that is the user's code, by the one user-code rule
    (provenance.core.usercode, read from a path: third-party model code counts as the user's)."""
    frames = [match for _start, _end, match in _frame_blocks(text)]  # outermost first, as printed
    found = user_frame(reversed(frames), is_user=lambda m: not is_library_path(m.group("file")))
    if found is None:
        return None
    path = found.group("file")
    # a line number of thousands of digits is unknown (0), not a failure
    return StackFrame(file=path, name=os.path.basename(path), line=int_of_text(found.group("line")) or 0,
                      fn=found.group("fn"),
                      text=(found.group("text") or "").strip(), user=True)
