"""A compile page's cache card. The page is written when its compile ends, but the compile's own
cache hits come with the log's `calls` record, at the process's exit: the card is written into a
slot of fixed size (the card, then a comment of padding), which `fill` overwrites in place once
every log is read. No page is read or written whole again (a big model's page stays on disk)."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from markupsafe import Markup

from provenance.report.model import CompileSummary
from provenance.report.render.files import open_regular

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
         on_disk: Mapping[str, int] | None = None) -> dict[str, int]:
    """Write each ended compile's final card (its hits, its function's) into its page's slot; the
    pages filled, with a hash of their card's figures. `on_disk`: pages whose slot holds a final card
    already (an incremental report's, incremental.py), by that hash: the same card is neither rendered nor
    written again, and one not final any more gets the first card back."""
    on_disk = on_disk or {}
    filled = {}
    for summary in summaries:
        page = summary.pages.compile
        final = summary.status == "ok" and bool(summary.fn_compiles)  # else failed, or no calls record for it
        if not final and page not in on_disk:
            continue
        if final:
            filled[page] = key = _shown(summary)
            if on_disk.get(page) == key:  # the same figures: the same card (not rendered again to tell)
                continue
        new = slot(render("cache_card.html", c=summary, final=final)).encode()
        try:  # never through a link (OUT is the user's: a page there may have been replaced by one)
            with open_regular(out / page, write=True) as f:
                at = _find(f)
                if at is not None:
                    f.seek(at)
                    f.write(new)
        except OSError:  # a page that is not there (its compile's pages failed): nothing to fill
            continue
    return filled


def _shown(summary: CompileSummary) -> int:
    """What a final card shows (cache_card.html's figures), hashed: equal for the same card."""
    return zlib.crc32(repr((summary.compile_hits, summary.fn_compiles, summary.cache_hits, summary.calls)).encode())


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
