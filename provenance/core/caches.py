"""The registry of capture's memo tables: each bounded, all emptied by `provenance.disable()`.

Capture remembers what it derived (interned records; backward, recompute, fusion, role and
scope variants; stack frames; collective-wait call sites; traceback files' modules), keyed by
values that keep coming in a long job (every `provenance.scope` entry is a new span, every generated function a
new code object). Each table has a bound: when full, its oldest entries go first. Forgetting costs only
recomputation: a record derived again is equal to the old one, if no longer the same object.
Every memo table keyed by values is registered here; the weak tables keyed by Thunder's objects
live on the running capture (provenance/thunder/capture.py), dropped with it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["CACHES", "Caches", "Memo"]

F = TypeVar("F", bound=Callable)


class Memo(OrderedDict):
    """A memo table with at most `maxsize` entries. Read with `get` (as fast as a dict's);
    write with `put`, which drops the oldest entries beyond the bound."""

    def __init__(self, name: str, maxsize: int) -> None:
        super().__init__()
        self.name, self.maxsize = name, maxsize

    def put(self, key: Any, value: Any) -> Any:
        self[key] = value
        while len(self) > self.maxsize:
            self.popitem(last=False)
        return value


class _Cached:
    """An `functools.lru_cache` function seen as a table (it bounds itself)."""

    def __init__(self, name: str, fn: Any) -> None:
        self.name, self.fn, self.maxsize = name, fn, fn.cache_info().maxsize

    def clear(self) -> None:
        self.fn.cache_clear()

    def __len__(self) -> int:
        return self.fn.cache_info().currsize


class Caches:
    """The registry of every capture memo table."""

    def __init__(self) -> None:
        self._tables: dict[str, Memo | _Cached] = {}

    def memo(self, name: str, maxsize: int) -> Memo:
        table = self._tables[name] = Memo(name, maxsize)
        return table

    def lru(self, name: str) -> Callable[[F], F]:
        """Decorator: register a function wrapped in a bounded `functools.lru_cache`."""

        def register(fn: F) -> F:
            if fn.cache_info().maxsize is None:  # type: ignore[attr-defined]
                raise ValueError(f"{name}: an unbounded lru_cache grows with the process")
            self._tables[name] = _Cached(name, fn)
            return fn

        return register

    def clear(self) -> None:
        for table in self._tables.values():
            table.clear()

    def sizes(self) -> dict[str, tuple[int, int]]:
        """{table name: (entries, bound)}."""
        return {name: (len(table), table.maxsize) for name, table in self._tables.items()}


CACHES = Caches()
