"""What the process keeps of its compiles for the user to read later (per-op profiles, memory
timelines): the last `maxlen` of them, each with its owner (Thunder's CompileStats of the jitted
function) held weakly, so nothing kept holds a model alive. No torch or thunder import."""

from __future__ import annotations

import threading
import weakref
from collections import deque
from typing import Any, Generic, Protocol, TypeVar


class Owned(Protocol):
    owner: Any  # a weak reference to the owner, or None


T = TypeVar("T", bound=Owned)


class Kept(Generic[T]):
    def __init__(self, maxlen: int) -> None:
        self._items: deque[T] = deque(maxlen=maxlen)
        self._lock = threading.Lock()

    def add(self, item: T, owner: Any = None) -> T:
        """Keep `item` (the oldest goes past `maxlen`); `owner` is held weakly."""
        if owner is not None:
            item.owner = weakref.ref(owner)
        with self._lock:
            self._items.append(item)
        return item

    def items(self, owner: Any = None) -> list[T]:
        """The kept items, oldest first; with `owner`, only its compiles'."""
        with self._lock:
            kept = list(self._items)
        return kept if owner is None else [k for k in kept if k.owner is not None and k.owner() is owner]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
