"""The run's pages: each one registered Page class and its template. build.py writes every
registered page from the run's model once the logs are read, and every page's top bar links
them (in registration order).

To add a page, write `templates/kernels.html` (extending base.html; it gets `m`, the RunModel,
and `root`, the way back to the report's directory) and register its class:

    @register
    class KernelsPage(Page):
        file = "kernels.html"
        template = "kernels.html"
        title = "Kernels"
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from provenance.report.model import RunModel
from provenance.report.render.html import source_rows

__all__ = ["PAGES", "DistributedPage", "FailuresPage", "GraphsPage", "IndexPage", "MemoryPage", "Page", "TimePage",
           "register"]


class Page:
    file: ClassVar[str]  # its name in the output directory: a constant, never made from a log
    template: ClassVar[str]
    title: ClassVar[str]  # its link in the top bar
    templates: ClassVar[str | None] = None  # a directory holding its template, if not templates/

    @classmethod
    def name(cls) -> str:
        """Its key in compile_directory.json's `files`."""
        return cls.file.removesuffix(".html")

    @classmethod
    def context(cls, model: RunModel) -> dict[str, Any]:
        """What its template gets besides `root`."""
        return {"m": model}

    @classmethod
    def subpages(cls, model: RunModel) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Pages of its own it links to, in a directory of the report: (template, file, context);
        `root` is set from the file's depth."""
        return iter(())


PAGES: list[type[Page]] = []


def register(page: type[Page]) -> type[Page]:
    PAGES.append(page)
    return page


@register
class IndexPage(Page):
    """The run, its totals, bad input, the call sites and every compile (the report's home)."""

    file = template = "index.html"
    title = "Index"


@register
class FailuresPage(Page):
    """Every compile_error: message, traceback, provenance of the last op."""

    file = template = "failures.html"
    title = "Failures"


@register
class GraphsPage(Page):
    """ThunderFX: every graph break and every piece that fell back to torch, with the user's line
    and the reason (tlparse's "failures and restarts"); and a page per Dynamo graph, its source
    view across its pieces (graphs/<key>.html)."""

    file = template = "graphs.html"
    title = "Graph breaks"

    @classmethod
    def subpages(cls, model: RunModel) -> Iterator[tuple[str, str, dict[str, Any]]]:
        for graph in model.fx.graphs if model.fx is not None else ():
            yield "fxgraph.html", graph.page, {"m": model, "g": graph, "rows": source_rows}


@register
class DistributedPage(Page):
    """Per-rank compile times, compiles compared across ranks, ops by distributed role."""

    file = template = "distributed.html"
    title = "Distributed"


@register
class TimePage(Page):
    """Where the profiled calls' time went, over the run: lines and roles across compiles, and
    each line's time per rank side by side, stragglers flagged (analyze/cost.py)."""

    file = template = "time.html"
    title = "Time"


@register
class MemoryPage(Page):
    """Where the memory goes, over the run: each compile's static saved-for-backward bytes and
    peaks, ranks side by side, a rank whose peak differs from the others' flagged (analyze/memory.py)."""

    file = template = "memory.html"
    title = "Memory"
