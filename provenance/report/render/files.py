"""Every file of a report is written whole: into a temporary file beside it, then renamed over it.
A page open in a browser (a live report's pages reload while the next rebuild writes; a report
rebuilt while someone reads it) is always some build's whole page, never a half-written or empty
one, and a rewritten file is a new file (incremental.py tells what a rebuild wrote that way)."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

__all__ = ["is_temporary", "open_regular", "write_whole", "written_whole"]

_TEMPORARY = re.compile(r"\..+\.[0-9]+\.tmp")


@contextmanager
def written_whole(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """A binary file to write `path`'s bytes into; renamed over `path` when the block ends, deleted
    if it raises. The temporary's name is the process's own (worker processes write side by side)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # is_temporary
    try:
        with open(tmp, "wb") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def open_regular(path: str | os.PathLike[str], write: bool = False) -> IO[bytes]:
    """A regular file of OUT opened for reading (or reading and writing), never through a symbolic
    link and never a FIFO or a device (it could hang, or never end): OSError if it is not one. OUT is
    the user's directory, and anyone may have put anything there."""
    fd = os.open(path, (os.O_RDWR if write else os.O_RDONLY) | os.O_NOFOLLOW | os.O_NONBLOCK)
    f = open(fd, "r+b" if write else "rb")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
    except BaseException:
        f.close()
        raise
    return f


def write_whole(path: str | os.PathLike[str], data: bytes) -> None:
    with written_whole(path) as f:
        f.write(data)


def is_temporary(name: str) -> bool:
    """Whether a file name is one of written_whole's temporaries (another process's, being written)."""
    return _TEMPORARY.fullmatch(name) is not None
