"""The index's call sites: a trie of the user's stack frames at each compile, the compiles at
the frame where their stack ends."""

from __future__ import annotations

from typing import Any

from provenance.report.model import CallSiteNode, CompileSummary, StackFrame

__all__ = ["CallSites"]

MAX_DEPTH = 48  # frames of a stack in the trie (its innermost ones): the trie is rendered nested


class CallSites:
    def __init__(self) -> None:
        self.root: dict[str, Any] = {"children": {}, "compiles": []}

    def add(self, stack: list[StackFrame], summary: CompileSummary) -> None:
        """A compile whose user stack (outermost first) is `stack`."""
        node = self.root
        if len(stack) > MAX_DEPTH:  # a node standing for the outer frames, then the innermost ones
            elided = len(stack) - MAX_DEPTH + 1
            node = node["children"].setdefault(("elided", elided), {"frame": None, "elided": elided,
                                                                    "children": {}, "compiles": []})
            stack = stack[elided:]
        for frame in stack:
            key = (frame.file, frame.line, frame.fn, frame.text)
            node = node["children"].setdefault(key, {"frame": frame, "children": {}, "compiles": []})
        node["compiles"].append(summary)

    def model(self) -> list[CallSiteNode]:
        """The outermost frames; compiles without a user stack last, under no frame."""
        def walk(node: dict) -> CallSiteNode:
            children = [walk(c) for c in node["children"].values()]
            count = len(node["compiles"]) + sum(c.count for c in children)
            return CallSiteNode(node.get("frame"), children, node["compiles"], count, node.get("elided", 0))
        root = walk(self.root)
        return root.children + ([CallSiteNode(None, [], root.compiles, len(root.compiles))] if root.compiles else [])
