"""What corresponds to what across two runs: compiles, fusions, graph breaks, pieces.

A compile is matched by its rank, its function (qualified name; a ThunderFX piece's is its
Dynamo graph and piece, `[0/0] thunder_0`), its call site (file name and line of the user's call,
or of thunder.jit) and its recompile index; what is left is matched again without the call site
(an edit above the call moved its line). Within one key, compiles pair in the order the logs have
them. What one side has alone is added (B only) or removed (A only).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

from provenance.diff.summarize import CompileDigest

__all__ = ["Matched", "compile_keys", "match", "match_compiles"]

T = TypeVar("T")
Matched = tuple[list[tuple[T, T]], list[T], list[T]]  # pairs (a, b), removed (a only), added (b only)


def match(a: Iterable[T], b: Iterable[T], keys: list[Callable[[T], Hashable]]) -> Matched:
    """Pair the items of `a` and `b` by each key in turn (the strictest first); linear."""
    left, right = list(a), list(b)
    pairs: list[tuple[T, T]] = []
    for key in keys:
        waiting: dict[Hashable, deque[T]] = defaultdict(deque)
        for item in left:
            waiting[key(item)].append(item)
        unmatched_right = []
        taken = set()
        for item in right:
            queue = waiting.get(key(item))
            if queue:
                found = queue.popleft()
                pairs.append((found, item))
                taken.add(id(found))
            else:
                unmatched_right.append(item)
        left = [item for item in left if id(item) not in taken]
        right = unmatched_right
    return pairs, left, right


def compile_keys() -> list[Callable[[CompileDigest], Hashable]]:
    return [lambda c: (c.rank, c.fn, c.call_site, c.index), lambda c: (c.rank, c.fn, c.index)]


def match_compiles(a: list[CompileDigest], b: list[CompileDigest]) -> Matched:
    return match(a, b, compile_keys())
