"""Where the Perfetto trace's events and compile_directory.json's entries wait for the end of a build.

A fresh report of no kept state spools everything into one anonymous file of OUT. An incremental report
(incremental.py) spools each log apart, in files of its state directory, so that a log taken up has its
own spool cut back to where its kept state was, whatever the other logs did meanwhile. Each keyed
spool keeps a running SHA-256 of what it holds: the kept state records it, and a spool taken up must
still hold those bytes (OUT may come from anywhere). At most MAX_OPEN files are open at once, whatever
the number of logs.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from provenance.report.render.files import open_regular

__all__ = ["MAX_OPEN", "Spools"]

MAX_OPEN = 32
_CHUNK = 1 << 20


class Spools:
    """Spooled lines by key (a log's index; -1: the run's end), read back in key order.

    `folder`: the incremental report's state directory (files `log-<key>.<kind>`, `end.<kind>`), or
    None: one anonymous file in `out` for every key (nothing to take up)."""

    def __init__(self, kind: str, out: Path, folder: Path | None = None) -> None:
        self.kind, self._folder = kind, folder
        self._open: OrderedDict[int, IO[bytes]] = OrderedDict()
        self._hash: dict[int, hashlib._Hash] = {}
        self._keys: set[int] = set()
        self._single: IO[bytes] | None = None if folder is not None else tempfile.TemporaryFile(dir=out)

    def _path(self, key: int) -> Path:
        assert self._folder is not None
        return self._folder / (f"log-{key}.{self.kind}" if key >= 0 else f"end.{self.kind}")

    def _file(self, key: int) -> IO[bytes]:
        if self._single is not None:
            return self._single
        f = self._open.get(key)
        if f is None:
            if key not in self._keys:  # a key not taken up starts empty
                self._keys.add(key)
                self._hash[key] = hashlib.sha256()
                f = open(self._path(key), "w+b")
            else:
                f = open(self._path(key), "ab")
            self._open[key] = f
            while len(self._open) > MAX_OPEN:
                self._open.popitem(last=False)[1].close()
        else:
            self._open.move_to_end(key)
        return f

    def write(self, key: int, data: bytes) -> None:
        self._file(key).write(data)
        if self._single is None:
            self._hash[key].update(data)

    def mark(self, key: int) -> tuple[int, str]:
        """Where `key`'s spool is now: its length and the SHA-256 of its bytes (for a kept state)."""
        self._file(key).flush()
        return self._file(key).tell(), self._hash[key].hexdigest()

    def take_up(self, key: int, length: int, digest: str) -> bool:
        """`key`'s spool cut back to `length` bytes, which must hash to `digest` (a kept state's
        mark); False (the spool started anew) if the file is not there, is not a regular file, is
        shorter, or holds other bytes."""
        assert self._folder is not None
        self._keys.add(key)
        found = hashlib.sha256()
        try:
            with open_regular(self._path(key), write=True) as f:
                left = length
                while left > 0 and (block := f.read(min(_CHUNK, left))):
                    found.update(block)
                    left -= len(block)
                if left == 0 and found.hexdigest() == digest:
                    f.truncate(length)
                    self._hash[key] = found
                    return True
        except OSError:
            pass
        self._keys.discard(key)  # written anew
        return False

    def restart(self, key: int) -> None:
        """`key`'s spool started anew (a log taken up is read whole after all)."""
        f = self._open.pop(key, None)
        if f is not None:
            f.close()
        self._keys.discard(key)

    def lines(self) -> Iterator[bytes]:
        """Every spooled line, key by key in order (the run's end, -1, first), each file closed after."""
        if self._single is not None:
            self._single.flush()
            self._single.seek(0)
            yield from self._single
            return
        for f in self._open.values():
            f.close()
        self._open.clear()
        for key in sorted(self._keys):
            with open(self._path(key), "rb") as f:
                yield from f

    def close(self) -> None:
        for f in self._open.values():
            f.close()
        self._open.clear()
        if self._single is not None:
            self._single.close()

