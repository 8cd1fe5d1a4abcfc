"""Reversible monkey-patching: uninstall restores Thunder exactly as it was."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_MISSING = object()


class Patcher:
    def __init__(self) -> None:
        self._undo: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, name: str, factory: Callable[[Any], Any]) -> None:
        """Replace `owner.name` by `factory(original)`."""
        # The owner's own attribute (not an inherited one) is what uninstall must put back.
        own = vars(owner).get(name, _MISSING)
        original = getattr(owner, name)
        self._replace(owner, name, own, factory(original))

    def wrap_attribute(self, owner: type, name: str, factory: Callable[[Any], Any]) -> None:
        """Replace a class attribute as stored (a property, not what it returns)."""
        own = vars(owner)[name]
        self._replace(owner, name, own, factory(own))

    def set_attribute(self, owner: Any, name: str, value: Any) -> None:
        """Set `owner.name` (new or not)."""
        self._replace(owner, name, vars(owner).get(name, _MISSING), value)

    def set_item(self, mapping: dict, key: str, value: Any) -> None:
        """Replace one entry of a dict Thunder reads at run time."""
        self._undo.append((mapping, key, mapping.get(key, _MISSING)))
        mapping[key] = value

    def _replace(self, owner: Any, name: str, own: Any, replacement: Any) -> None:
        setattr(owner, name, replacement)
        self._undo.append((owner, name, own))

    def undo(self) -> None:
        while self._undo:
            owner, name, own = self._undo.pop()
            if isinstance(owner, dict):
                if own is _MISSING:
                    owner.pop(name, None)
                else:
                    owner[name] = own
            elif own is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, own)

    def points(self) -> list[tuple[Any, str]]:
        """(owner, attribute or key) of every replacement in place, oldest first."""
        return [(owner, name) for owner, name, _ in self._undo]

    def __bool__(self) -> bool:
        return bool(self._undo)
