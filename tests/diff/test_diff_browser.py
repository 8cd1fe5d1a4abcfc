"""The diff page in Chromium: `thunder-trace diff A B -o OUT` writes OUT/index.html beside both
runs' reports (OUT/a, OUT/b); every change's links resolve into them, to the compile page and to
the changed line in each source view."""

from __future__ import annotations

import subprocess
import sys
from urllib.parse import unquote, urlparse

import pytest
from diff_program import line_of

pytestmark = pytest.mark.slow  # real Thunder runs in subprocesses (made once per session)


def test_the_diff_page_links_each_change_into_both_reports(diff_logs, browser, tmp_path):
    base, relu = diff_logs("base1", "relu")
    out = tmp_path / "diff"
    done = subprocess.run([sys.executable, "-m", "provenance.report", "diff", str(base), str(relu), "-o", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (out / "a" / "index.html").is_file() and (out / "b" / "index.html").is_file()

    page = browser.open(out / "index.html")
    rows = page.locator("#diff-changes tbody tr")
    assert rows.count() >= 3
    # the first line named (two processes' paces may differ: a whole-call time change may come first)
    first = rows.filter(has_text="diff_program.py:").first
    assert f"diff_program.py:{line_of('act')}" in first.inner_text()
    hrefs = page.eval_on_selector_all("#diff-changes a", "els => els.map(e => e.href)")
    assert any("/a/compiles/" in h for h in hrefs) and any("/b/compiles/" in h for h in hrefs)
    for href in set(hrefs):  # every link is a file of one of the two reports
        path = unquote(urlparse(href).path)
        assert path.startswith(str(out / "a")) or path.startswith(str(out / "b")), href
        assert (out / path[len(str(out)) + 1:]).is_file(), href
    browser.shot(page, "diff-index")

    source = first.locator("a.b-source")
    assert source.get_attribute("href").endswith(f"-{line_of('act')}")
    source.click()
    page.wait_for_load_state("load")
    line = page.locator(".sl", has_text="F.relu(h) if ACT").first  # B's source view, at the changed line
    assert line.count() == 1
    line.click()
    assert page.locator('pre.pane[data-pane="forward"] .op.hl').count() >= 1
    page.go_back()
    first = page.locator("#diff-changes tbody tr").first
    first.locator("a.a-compile").click()
    page.wait_for_load_state("load")
    assert "__main__.MLP" in page.inner_text("h1")
    page.close()
    for report in ("a", "b"):
        browser.open(out / report / "index.html").close()
    assert browser.errors == [] and browser.dialogs == []
