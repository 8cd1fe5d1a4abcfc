"""The compile page's traces read like code (Chromium): ops line after line with no blank line
between them, long lines wrapped with each op's time kept in view in a gutter at the left, the
click panel showing an op's time, and a fusion's panel grouping what it fused by user line and
module, each once with a count, then listing the fused ops in order.

One hand-written log (tests/support/report_logs.py: reading), reported once for the module; the
nanoGPT report of test_report_browser.py checks the blank lines on a real trace."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
import report_logs
from browser import CHROMIUM, UNEXPLAINED_GAPS

from provenance.cli import main
from provenance.report.model import OpTime, TraceView
from provenance.report.render.trace_data import LineTable, lazy_trace

browser_only = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed")

SPREAD = "median 2.4 ms, 2.3–2.6 ms over 3 calls"


@pytest.fixture(scope="module")
def reading_report(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("reading")
    report_logs.write(work / "logs" / "a.jsonl", report_logs.reading())
    report_logs.write(work / "old" / "a.jsonl", report_logs.reading(fused=False))
    assert main(["report", str(work / "logs"), "-o", str(work / "report"), "--no-browser"]) == 0
    assert main(["report", str(work / "old"), "-o", str(work / "old-report"), "--no-browser"]) == 0
    return work


def _compile_page(report: Path) -> Path:
    (entry,) = orjson.loads((report / "compile_directory.json").read_bytes())["compiles"]
    return report / entry["pages"]["compile"]


def test_the_page_data_carries_spreads_and_fused_ops_only_where_there_are():
    view = TraceView("computation", 1, "del_last_used", None, None, "computation-1", lines=["a", "b"],
                     ops=[(0, 1, "mul", ["t0"], 2), (1, 1, "TorchCompile0", ["t1"], 3)],
                     times={0: OpTime("1.00 ms", 5), 1: OpTime("2.00 ms", 5, SPREAD)},
                     fused=[(1, "t1 = ltorch.add(t0, t0)", 4)])
    data = orjson.loads(lazy_trace(view, LineTable()).data)
    assert data["c"] == [0, 5, "1.00 ms", 1, 5, "2.00 ms"] and data["s"] == [1, SPREAD]
    assert data["f"] == [1, "t1 = ltorch.add(t0, t0)", 4]
    view.times, view.fused = {0: OpTime("1.00 ms", 5)}, []
    assert set(orjson.loads(lazy_trace(view, LineTable()).data)) == {"l", "o", "c"}


@browser_only
def test_ops_follow_line_after_line_and_long_lines_wrap_with_the_time_in_the_gutter(reading_report, browser):
    page = browser.open(_compile_page(reading_report / "report"))
    pre = page.locator("#computation-1 > pre.code:not(.lazy)")
    assert pre.evaluate(UNEXPLAINED_GAPS) == [0] * (len(report_logs.READ_OPS) - 1)
    assert pre.locator(".ph").count() == 4 and pre.locator(".tsc").count() == 2  # headers between, comments hidden
    # the long line wraps: nothing to scroll to, and its time lies in the gutter, in view
    assert pre.evaluate("p => p.scrollWidth <= p.clientWidth")
    long = pre.locator(".op", has_text="torch.cat")
    assert long.evaluate("o => o.getBoundingClientRect().height") > 3 * 18
    assert long.get_attribute("data-t") == "1.65 ms"  # the median of 1.5, 1.65, 1.8 ms
    gutter = long.evaluate("""o => {
        const s = getComputedStyle(o, '::before'), r = o.getBoundingClientRect();
        const box = o.closest('pre').getBoundingClientRect();
        const left = r.left + parseFloat(getComputedStyle(o).borderLeftWidth) + parseFloat(s.left);  // its padding box
        return {content: s.content, left: left - box.left, right: box.right - (left + parseFloat(s.width))};
    }""")
    assert gutter["content"] == '"1.65 ms"' and gutter["left"] >= 0 and gutter["right"] > 0
    code_left = long.evaluate("o => o.getBoundingClientRect().left - o.closest('pre').getBoundingClientRect().left")
    assert code_left > 50  # the code starts after the gutter
    browser.shot(page, "trace-reads-like-code")
    page.close()
    assert browser.errors == []


@browser_only
def test_the_click_panel_shows_the_ops_time_and_its_spread(reading_report, browser):
    page = browser.open(_compile_page(reading_report / "report"))
    page.locator("#computation-1 .op", has_text="TorchCompile0").click()
    panel = page.inner_text("#panel")
    assert "2.75 ms per call" in panel  # the median of its 3 calls
    assert "median 2.750 ms, 2.500–3.000 ms over 3 calls" in panel  # analyze/cost.py's spread
    page.locator("#backward-0 .op", has_text="torch.mul").click()  # not profiled: no time
    assert "per call" not in page.inner_text("#panel")
    page.close()
    assert browser.errors == []


@browser_only
def test_a_fusions_panel_groups_its_lines_and_modules_and_lists_its_ops_in_order(reading_report, browser):
    page = browser.open(_compile_page(reading_report / "report"))
    fusion = page.locator("#computation-1 .op.qf")
    header = fusion.evaluate("o => o.previousElementSibling.textContent.trim()")
    assert header == "# \u2500\u2500 fusion of 5 ops from 2 user lines in 3 modules"
    fusion.click()
    panel = page.locator("#panel")
    assert panel.locator("h3").first.inner_text() == "fusion TorchCompile0"
    lines = panel.locator("li.fline > .fl-head").all_inner_texts()
    assert [" ".join(t.split()) for t in lines] == ["\u00d74 report_model.py:20 y = self.ln(x)",
                                                   "\u00d71 report_model.py:21 return self.mlp(y)"]  # once each
    modules = panel.locator("li.fline").first.locator("li.fmod").all_inner_texts()
    assert [" ".join(t.split()) for t in modules] == ["\u00d73 blocks.0.ln (LayerNorm) decomposition, op",
                                                     "\u00d71 blocks.1.ln (LayerNorm) decomposition"]
    assert panel.locator("ol.fops > li code").all_inner_texts() == [text for _, text, _ in report_logs.READ_FUSED]
    panel.locator("ol.fops > li").nth(3).click()  # a fused op opens its own record
    assert "blocks.1.ln (LayerNorm)" in page.inner_text("#panel")
    browser.shot(page, "fusion-panel")
    page.close()

    page = browser.open(_compile_page(reading_report / "old-report"))  # a log without trace.fused (1.5)
    page.locator("#computation-1 .op.qf").click()
    panel = page.locator("#panel")
    assert " ".join(panel.locator("li.fline > .fl-head").first.inner_text().split()) == \
        "\u00d73 report_model.py:20 y = self.ln(x)"  # its member records, counted
    assert panel.locator("ol.fops").count() == 0 and "does not list this fusion's ops" in panel.inner_text()
    page.close()
    assert browser.errors == []
