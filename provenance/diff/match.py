"""What corresponds to what across two runs: compiles, their user lines, fusions, graph breaks, pieces.

A compile is matched by its rank, its function (qualified name; a ThunderFX piece's is its
Dynamo graph and piece, `[0/0] thunder_0`), its call site (file name and line of the user's call,
or of thunder.jit) and its recompile index; what is left is matched again without the call site
(an edit above the call moved its line). Within one key, compiles pair in the order the logs have
them. What one side has alone is added (B only) or removed (A only).

A matched compile's user lines are keyed `file:line`; an edit above a line moves it, and a copied or renamed
script (`train_b.py` beside `train.py`) moves every line to another file. `align_lines` pairs them as a text
diff does: each file of A with B's file of the same path, else with the file of B's that holds the most of
its statements (a copy); within a pair of files, the lines in order by their statements (difflib), and a
changed region's lines one for one where both sides have as many (the edited line). B's digest is then keyed
by A's lines, and remembers its own keys to show.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

from provenance.diff.summarize import CompileDigest

__all__ = ["Matched", "align_lines", "compile_keys", "match", "match_compiles"]

MIN_COPY_SHARE = 0.5  # of a file's statements found in another file: a copy of it

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


def _split(key: str) -> tuple[str, int] | None:
    path, _, line = key.rpartition(":")
    return (path, int(line)) if path and line.isdigit() else None


def _by_file(lines: dict[str, Any]) -> dict[str, list[tuple[int, str, str]]]:
    """path -> [(line, statement, key)] in line order."""
    files: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    for key, found in lines.items():
        where = _split(key)
        if where is not None:
            files[where[0]].append((where[1], found.text.strip(), key))
    for entries in files.values():
        entries.sort()
    return files


def _files(a: dict[str, list], b: dict[str, list]) -> dict[str, str]:
    """A's path -> B's: the same path; else, for a file only one side has, the other side's file (only
    there) that holds most of its statements (a copied or renamed script)."""
    paired = {path: path for path in a if path in b}
    spare = [path for path in b if path not in a]
    for path in (p for p in a if p not in b):
        texts = Counter(t for _, t, _ in a[path] if t)
        best, share = None, 0.0
        for other in spare:
            common = sum((texts & Counter(t for _, t, _ in b[other] if t)).values())
            fraction = common / max(1, min(sum(texts.values()), len(b[other])))
            if fraction > share:
                best, share = other, fraction
        if best is not None and share >= MIN_COPY_SHARE:
            paired[path] = best
            spare.remove(best)
    return paired


def align_lines(a: CompileDigest, b: CompileDigest) -> tuple[CompileDigest, dict[str, str]]:
    """B's digest keyed by A's lines where they correspond; and the files paired under another path
    (A's -> B's: a copied or renamed script), for the diff's notes."""
    files_a, files_b = _by_file(a.lines), _by_file(b.lines)
    mapping: dict[str, str] = {}  # B's key -> A's
    paths = _files(files_a, files_b)
    for path_a, path_b in paths.items():
        left, right = files_a[path_a], files_b[path_b]
        matcher = difflib.SequenceMatcher(None, [t for _, t, _ in left], [t for _, t, _ in right], autojunk=False)
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op == "equal" or (op == "replace" and i2 - i1 == j2 - j1):
                for (_, _, key_a), (_, _, key_b) in zip(left[i1:i2], right[j1:j2]):
                    mapping[key_b] = key_a
    mapping = {kb: ka for kb, ka in mapping.items() if kb != ka}
    renamed = {path_a: path_b for path_a, path_b in paths.items() if path_a != path_b}
    if not mapping:
        return b, renamed
    taken = set(mapping.values())  # A's keys B's lines take: a B line of that key that moved is keyed anew

    def key(k: str) -> str:
        return mapping.get(k, k if k not in taken else f"{k} (B)")

    def rekey(table: dict[str, Any] | None) -> dict[str, Any] | None:
        return {key(k): v for k, v in table.items()} if table is not None else None

    lines = {key(k): dataclasses.replace(v, key=key(k)) for k, v in b.lines.items()}
    time = {by: (rekey(rows) if by == "line" else rows) for by, rows in b.time.items()} if b.time is not None else None
    fusions = [dataclasses.replace(f, lines=tuple(sorted(key(k) for k in f.lines))) for f in b.fusions]
    own = {key(k): k for k in b.lines if key(k) != k}
    return dataclasses.replace(b, lines=lines, time=time, fusions=fusions, memory=rekey(b.memory),
                               hrefs=rekey(b.hrefs) or {}, own_keys=own), renamed
