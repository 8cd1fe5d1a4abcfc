"""Desyncs shown where users look. Compile pages are written as their compiles end, before the
ranks are compared (ranks.py), so once they are, each compile page a desync touches is rewritten
once: a banner at its marker, and the first differing op of each final trace it touches, which
the page's script gives an anchor (`id="op-<list>-<index>"`) when it renders the trace: the
banner, the index and distributed.html link to it."""

from __future__ import annotations

from collections.abc import Callable

from provenance.report.model import CompileSummary, Desync, RunModel

__all__ = ["MARK", "mark_desyncs"]

MARK = "<!--@@thunder-trace-report:desync@@-->"


def _target(summary: CompileSummary, list_name: str, at: int, length: int) -> tuple[str, int | None]:
    """The link to an op of a final trace (the trace itself when the op is past its end)."""
    if at < length and list_name in summary.finals:
        return f"#op-{list_name}-{at}", at
    return f"#{summary.finals.get(list_name, '')}", None


def mark_desyncs(model: RunModel, render: Callable[..., str], fill: Callable[[str, str, str], None],
                 keep: Callable[[str], None] | None = None) -> None:
    """Fill each desync's links; the banners and anchors into the compile pages: `fill(page, MARK,
    html)` (the writer's; `keep(page)` first: an incremental report keeps the page as it was, to
    write it again later)."""
    d = model.distributed
    pages: dict[str, list[tuple[Desync, str, str, int | None]]] = {}  # page -> (desync, its rank, peer, op)
    for row in d.rows:
        cells = {d.labels[i]: c for i, c in enumerate(row.cells) if c is not None}
        for x in row.differences:
            ref, other = cells.get(x.ref_rank), cells.get(x.rank)
            if ref is None or other is None:
                continue
            x.links = []
            for label, summary, peer, at, length in ((x.ref_rank, ref, x.rank, x.at, x.ref_length),
                                                     (x.rank, other, x.ref_rank, x.other_at, x.length)):
                fragment, op = _target(summary, x.list_name, at, length)
                x.links.append((label, summary.page + fragment))
                pages.setdefault(summary.page, []).append((x, label, peer, op))
    for page, found in pages.items():
        if keep is not None:
            keep(page)
        anchors = sorted({(x.list_name, op) for x, _, _, op in found if op is not None})
        banner = render("desync.html", found=found, page=page.rsplit("/", 1)[-1], anchors=anchors)
        fill(page, MARK, banner)
