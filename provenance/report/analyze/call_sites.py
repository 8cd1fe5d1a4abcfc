"""The index's call sites: a trie of the user's stack frames at each compile, the compiles at
the frame where their stack ends.

Two kinds of frames fold into one collapsed line (`CallSiteNode.folded`), as tlparse trims the
stack common to every compile: a run of frames that provenance.core.usercode calls library code (the
test runners and launchers a log of an older version recorded as the user's: pytest, pluggy,
`bin/torchrun`), and the chain of frames every compile shares above the first frame where their
stacks part (a test suite's harness, a training script's `main()`)."""

from __future__ import annotations

from typing import Any

from provenance.core.usercode import is_library_path, package_of
from provenance.report.model import CallSiteNode, CompileSummary, StackFrame

__all__ = ["CallSites"]

MAX_DEPTH = 48  # lines of a stack in the trie (its innermost ones): the trie is rendered nested
MIN_COMMON = 2  # frames common to every compile folded only when at least this many (one is shown as it is)
MAX_PACKAGES = 4  # named on a folded line


def _key(frame: StackFrame) -> tuple:
    return frame.file, frame.line, frame.fn, frame.text


def _steps(stack: list[StackFrame]) -> list[tuple[tuple, StackFrame | None, list[StackFrame]]]:
    """The stack as trie steps, outermost first: (key, frame, []) per frame of the user's, and
    (key, None, frames) per run of library frames (one folded line)."""
    steps: list[tuple[tuple, StackFrame | None, list[StackFrame]]] = []
    for frame in stack:
        if is_library_path(frame.file):
            if steps and steps[-1][1] is None:
                key, _, frames = steps[-1]
                frames.append(frame)
                steps[-1] = (("folded", *key[1:], _key(frame)), None, frames)
            else:
                steps.append((("folded", _key(frame)), None, [frame]))
        else:
            steps.append((_key(frame), frame, []))
    return steps


def _label(frames: list[StackFrame], common: bool) -> str:
    packages = list(dict.fromkeys(package_of(f.file) for f in frames))
    named = ", ".join(packages[:MAX_PACKAGES]) + (", \u2026" if len(packages) > MAX_PACKAGES else "")
    count = f"{len(frames)} frame{'' if len(frames) == 1 else 's'}"
    if common:
        return f"{count} common to every compile ({named})"
    return f"{count} of test runners and launchers ({named})"


class CallSites:
    def __init__(self) -> None:
        self.root: dict[str, Any] = {"children": {}, "compiles": []}

    def add(self, stack: list[StackFrame], summary: CompileSummary) -> None:
        """A compile whose user stack (outermost first) is `stack`."""
        node = self.root
        steps = _steps(stack)
        if len(steps) > MAX_DEPTH:  # a node standing for the outer lines, then the innermost ones
            elided = len(steps) - MAX_DEPTH + 1
            node = node["children"].setdefault(("elided", elided), {"frame": None, "elided": elided,
                                                                    "children": {}, "compiles": []})
            steps = steps[elided:]
        for key, frame, folded in steps:
            node = node["children"].setdefault(key, {"frame": frame, "folded": folded, "children": {},
                                                     "compiles": []})
        node["compiles"].append(summary)

    def absorb(self, other: CallSites) -> None:
        """`other`'s compiles after these (a log's trie, after the logs before it's): the trie
        adding them here in turn makes, frames first seen in `other` after those seen here."""
        def merge(into: dict[str, Any], node: dict[str, Any]) -> None:
            into["compiles"].extend(node["compiles"])
            for key, child in node["children"].items():
                mine = into["children"].get(key)
                if mine is None:
                    into["children"][key] = {**child, "children": {}, "compiles": []}
                    mine = into["children"][key]
                merge(mine, child)

        merge(self.root, other.root)

    def model(self) -> list[CallSiteNode]:
        """The outermost lines; compiles without a user stack last, under no frame."""
        def walk(node: dict) -> CallSiteNode:
            children = [walk(c) for c in node["children"].values()]
            count = len(node["compiles"]) + sum(c.count for c in children)
            folded = node.get("folded") or []
            return CallSiteNode(node.get("frame"), children, node["compiles"], count, node.get("elided", 0),
                                folded, _label(folded, common=False) if folded else "")
        root = walk(self.root)
        tops = _fold_common(root.children) if not root.compiles else root.children
        return tops + ([CallSiteNode(None, [], root.compiles, len(root.compiles))] if root.compiles else [])


def _fold_common(tops: list[CallSiteNode]) -> list[CallSiteNode]:
    """The chain of lines every compile passes through, down to the one where their stacks part
    (or above the line of the compiles, if they share one stack), as one folded line."""
    chain: list[CallSiteNode] = []
    node = tops[0] if len(tops) == 1 else None
    while node is not None and not node.elided and not node.compiles and node.children:
        chain.append(node)
        node = node.children[0] if len(node.children) == 1 else None
    frames = [f for n in chain for f in (n.folded or [n.frame])]
    if not chain or (len(frames) < MIN_COMMON and not chain[0].folded):
        return tops
    return [CallSiteNode(None, chain[-1].children, [], chain[0].count, 0, frames, _label(frames, common=True))]
