"""A compile page's cache card. The page is written when its compile ends, but the compile's own
cache hits come with the log's `calls` record, at the process's exit: the card is written into a
slot of fixed size (the card, then a comment of padding), which `fill` overwrites in place once
every log is read. No page is read or written whole again (a big model's page stays on disk)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from pathlib import Path

from markupsafe import Markup

from provenance.report.model import CompileSummary

__all__ = ["MARK", "SLOT_BYTES", "fill", "slot"]

MARK = b"<!--@@thunder-trace-report:cache@@-->"
SLOT_BYTES = 512  # the longest card (fixed words, four counts of up to 23 characters) is ~300 bytes
_CHUNK = 1 << 16


def slot(html: str) -> Markup:
    """`html` (a card) in a slot of SLOT_BYTES bytes, as UTF-8."""
    body = html.strip().encode()
    pad = SLOT_BYTES - len(MARK) - len(body) - len(b"<!---->")
    if pad < 0:
        raise ValueError(f"a cache card of {len(body)} bytes does not fit its slot")
    return Markup((MARK + body + b"<!--" + b" " * pad + b"-->").decode())


def fill(out: Path, summaries: Iterable[CompileSummary], render: Callable[..., str],
         unfill: Collection[str] = ()) -> list[str]:
    """Write each ended compile's final card (its hits, its function's) into its page's slot; the
    pages filled. `unfill`: pages an earlier report filled (incremental.py): one not filled now gets
    its first card back."""
    filled = []
    for summary in summaries:
        final = summary.status == "ok" and bool(summary.fn_compiles)  # else failed, or no calls record for it
        if not final and summary.pages.compile not in unfill:
            continue
        new = slot(render("cache_card.html", c=summary, final=final)).encode()
        if final:
            filled.append(summary.pages.compile)
        try:
            with open(out / summary.pages.compile, "r+b") as f:
                at = _find(f)
                if at is not None:
                    f.seek(at)
                    f.write(new)
        except OSError:  # a page that is not there (its compile's pages failed): nothing to fill
            continue
    return filled


def _find(f) -> int | None:
    """The offset of MARK in the open file (read in chunks: it is near the top of the page)."""
    offset, tail = 0, b""
    while chunk := f.read(_CHUNK):
        data = tail + chunk
        at = data.find(MARK)
        if at >= 0:
            return offset - len(tail) + at
        tail = data[-(len(MARK) - 1):]
        offset += len(chunk)
    return None
