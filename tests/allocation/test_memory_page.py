"""The run's Memory page (memory.html, analyze/memory.py's run_memory): every compile's static
memory, ranks side by side, the rank whose peak differs flagged; on hand-written logs (no torch)."""

from __future__ import annotations

from pathlib import Path

import report_logs

from provenance.cli import main


def _report(logs: Path, out: Path) -> Path:
    assert main(["report", str(logs), "-o", str(out), "--no-browser", "-j", "1"]) == 0
    return out


def _lines(cell) -> list[str]:
    return [line.strip() for line in cell.inner_text().strip().split("\n")][:2]


def _rank(rank: int, nbytes: int) -> list[dict]:
    """Compile 1 (its tensors `nbytes` each) and compile 2 of another function (8 bytes on every rank)."""
    out = report_logs.with_memory(rank=rank, nbytes=nbytes)
    other = report_logs.with_memory(rank=rank, compile_id=2, fn="other")
    out[-1:-1] = [r for r in other[1:-1] if r["type"] != "prov"]
    return out


def test_ranks_side_by_side_the_larger_peak_flagged(tmp_path, browser):
    logs = tmp_path / "logs"
    report_logs.write(logs / "r0.jsonl", _rank(0, 8))
    report_logs.write(logs / "r1.jsonl", _rank(1, 16))  # compile 1 holds twice the bytes on rank 1
    out = _report(logs, tmp_path / "out")

    page = browser.open(out / "index.html")
    page.locator("nav a", has_text="Memory").click()
    assert page.url.endswith("/memory.html")
    table = page.locator("#ranks table")
    assert table.locator("thead th").all_inner_texts() == ["compile", "rank 0", "rank 1", "median peak"]
    one = table.locator('tr[data-key="report_model.Model (compile 1)"]')
    two = table.locator('tr[data-key="other (compile 2)"]')
    total = table.locator("tr.total")
    assert one.get_attribute("class") == "flagged" and two.get_attribute("class") == ""
    cells = one.locator("td[data-rank]")
    # static figures (report_logs.memory): forward peak 2 x nbytes, backward 3 x nbytes, saved 1 x
    assert _lines(cells.nth(0)) == ["peak 24 B", "saved 8 B · forward 16 B · backward 24 B"]
    assert _lines(cells.nth(1)) == ["peak 48 B", "saved 16 B · forward 32 B · backward 48 B"]
    # the flag is text (not colour alone): on rank 1's cell only
    assert "▲ peak differs" in cells.nth(1).inner_text() and "peak differs" not in cells.nth(0).inner_text()
    assert cells.nth(1).get_attribute("class") == "r straggler" and cells.nth(0).get_attribute("class") == "r"
    assert one.locator("td").last.inner_text() == "24 B"  # the (lower) median of the two ranks
    assert "peak differs" not in two.inner_text()
    assert total.locator("td").first.inner_text() == "all compiles, added up"
    assert total.locator("td[data-rank]").nth(1).inner_text().strip().startswith("peak 72 B")  # 48 B + 24 B
    assert "1 compile with a rank whose peak differs" in page.locator("#ranks").inner_text()
    # the bars are for the eye (aria-hidden, the text says it); the legend names their colours
    bars = cells.nth(1).locator(".tbar")
    assert bars.get_attribute("aria-hidden") == "true"

    def colour(locator):
        return page.evaluate("(el) => getComputedStyle(el).backgroundColor", locator.element_handle())

    legend = page.locator(".legend")
    assert "forward peak" in legend.inner_text() and "backward peak" in legend.inner_text()
    assert "▲ peak differs" in legend.inner_text()
    assert colour(legend.locator(".sw.mem-fw")) == colour(bars.locator("i.mem-fw"))
    assert colour(legend.locator(".sw.mem-bw")) == colour(bars.locator("i.mem-bw"))
    assert colour(bars.locator("i.mem-fw")) != colour(bars.locator("i.mem-bw"))
    widths = bars.locator("i").evaluate_all("els => els.map(e => e.getBoundingClientRect().width)")
    assert widths[0] > 0 and abs(widths[1] / widths[0] - 1.5) < 0.05  # backward peak 48 B vs forward 32 B
    browser.shot(page, "memory-page-ranks")
    # each cell links to its compile's Memory section
    cells.nth(1).locator("a").click()
    assert page.url.endswith("compiles/r1-c1.html#memory")
    assert page.locator("#memory").is_visible()
    page.close()
    assert browser.errors == [] and browser.dialogs == []


def test_one_process_no_rank_comparison_and_a_log_without_memory(tmp_path):
    report_logs.write(tmp_path / "one" / "a.jsonl", report_logs.with_memory())
    html = (_report(tmp_path / "one", tmp_path / "out1") / "memory.html").read_text()
    assert "peak 24 B" in html and "median peak" not in html and "peak differs" not in html
    report_logs.write(tmp_path / "none" / "a.jsonl", report_logs.records())
    html = (_report(tmp_path / "none", tmp_path / "out2") / "memory.html").read_text()
    assert "No memory timeline in these logs" in html
