"""End to end: THUNDER_TRACE runs -> `thunder-trace report` -> the pages in headless Chromium.

Real runs (nanoGPT forward+backward in one process; the 2-rank tensor-parallel example under
torchrun), the real CLI in a subprocess, Debian's Chromium driven by playwright: no console
errors on any page, source lines highlight their forward and backward ops (and ops their line),
tensor-parallel ops show their role, and log text cannot run script. Screenshots go to
test-artifacts/report/.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import report_logs
from browser import CHROMIUM, UNEXPLAINED_GAPS
from paths import ROOT, report_files

sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("THUNDER_TRACE", "CI")}
    env.update(extra)
    return env


def _run(command: list[str], **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT, **kw)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _report(logs: Path, out: Path) -> Path:
    done = _run([sys.executable, "-m", "provenance.report", "report", str(logs), "-o", str(out), "--no-browser"],
                env=_env())
    assert "warning" not in done.stderr, done.stderr
    return out


@pytest.fixture(scope="module")
def nanogpt_report(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("nanogpt")
    _run([sys.executable, "examples/train_nanogpt.py", "--layers", "1", "--steps", "1"],
         env=_env(THUNDER_TRACE=str(work / "logs")))
    return _report(work / "logs", work / "report")


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, list[str]]:
    """`./dev demo`'s program as users run it (examples/demo.py): nanoGPT under thunder.jit with the
    torch.compile executor (profiled; a recompile; a failed compile), ThunderFX with a graph break,
    examples/tensor_parallel.py on 2 ranks (torchrun), all logged to one directory; its report and
    the lines it printed. Its tensor-parallel logs serve the tensor-parallel test too."""
    work = tmp_path_factory.mktemp("demo")
    env = {k: v for k, v in _env().items() if k != "THUNDER_TRACE_PROFILE"}
    done = subprocess.run([sys.executable, "examples/demo.py", "--out", str(work)], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(list((work / "thunder_trace").glob("*rank[01].jsonl"))) == 2
    return work / "thunder_trace_report", done.stdout.splitlines()


def _pages(report: Path) -> dict[str, Path]:
    import orjson

    directory = orjson.loads((report / "compile_directory.json").read_bytes())
    return {"directory": directory, "compiles": [
        {k: report / v for k, v in c["pages"].items()} for c in directory["compiles"]]}


@pytest.mark.slow
def test_nanogpt_report_links_source_lines_to_forward_and_backward_ops(nanogpt_report, browser):
    pages = _pages(nanogpt_report)
    (compile_pages,) = pages["compiles"]

    index = browser.open(nanogpt_report / "index.html")
    assert "thunder.tests.nanogpt_model.GPT" in index.inner_text("table.compiles")
    assert index.locator(".trie .cref.s-ok").count() == 1
    browser.shot(index, "nanogpt-index")
    index.close()

    page = browser.open(compile_pages["compile"])
    assert page.locator(".timeline .seg").count() >= 3  # timed passes, to scale
    # The pass lists are drawn from their data (html.py pass_rows): a row per logged trace of the
    # list, in order, with its pass, ops and what it changed
    (entry,) = pages["directory"]["compiles"]
    drawn = page.locator("table.passes").evaluate_all("""ts => ts.map(t => [t.querySelector("th").textContent,
        [...t.querySelectorAll("tbody tr")].map(r => [...r.cells].map(c => c.textContent))])""")
    logged = {}
    for p in entry["passes"]:
        changed = f"+{p['added']} \u2212{p['removed']} ~{p['rewritten']}" if "added" in p else ""
        ops = "" if p["ops"] is None else str(p["ops"])  # a repeat of an earlier trace: named by its index
        logged.setdefault(p["list"], []).append([f"#{p['index']}", p["pass"], ops, changed])
    got = {name: [[r[0], re.sub(r" = #\d+$", "", r[1].removesuffix(" final")), r[3], r[4]] for r in rows]
           for name, rows in drawn}
    assert got == logged and any(p["ops"] is None for p in entry["passes"])
    # the final traces: the computation's and the backward's last ones (a repeat names the trace it repeats)
    finals = {name: [r[0] for r in rows if r[1].endswith(" final")] for name, rows in drawn}
    assert finals == {name: [r[0] for r in rows if "= #" not in r[1]][-1:] if name in ("computation", "backward")
                      else [] for name, rows in drawn}
    assert page.locator("table.passes tr.final a").first.get_attribute("href").startswith("#")
    # the pipeline bar and every phase in its table, drawn from their data too (html.py phase_bar)
    rows = page.locator("table.phases tbody tr").evaluate_all(
        "rs => rs.map(r => [r.className, r.cells[0].textContent, r.cells[1].textContent])")
    assert rows == [[f"d{min(p['depth'], 4)}", p["name"], p["detail"] or ""] for p in entry["phases"]] and rows
    titles = page.locator(".timeline.phases .seg").evaluate_all("ss => ss.map(s => s.title)")
    assert any(t.startswith("acquire_trace \u00b7 ") and t.endswith(" ms") for t in titles)
    final = page.locator("details.trace[open] .op.qb").first  # the final backward trace is open
    final.click()
    panel = page.inner_text("#panel")
    assert "grad(op)" in panel and "derived from" in panel and "nanogpt_model.py" in panel
    browser.shot(page, "nanogpt-compile")
    page.close()

    page = browser.open(compile_pages["source"])
    # The user file is highlighted by the page's script: its module docstring is a string on every
    # line it spans (a quote and the keyword `and` inside it included), the code after it is code
    spans = "ss => ss.map(s => [s.className, s.textContent])"
    doc = page.locator(".sl code", has_text='(the "Software"), to deal').first
    assert doc.locator("span").evaluate_all(spans) == [["s", doc.inner_text()]]
    assert page.locator(".sl code", has_text="import inspect").first.locator("span").evaluate_all(spans) == [
        ["k", "import"]]
    forward = page.locator(".sl code", has_text="def forward(self, x):").first.locator("span").evaluate_all(spans)
    assert ["k", "def"] in forward and ["nf", "forward"] in forward
    line = page.locator(".sl", has_text="x = self.c_fc(x)").first
    line.click()
    forward = page.locator('pre.pane[data-pane="forward"] .op.hl')
    backward = page.locator('pre.pane[data-pane="backward"] .op.hl')
    assert forward.count() >= 1 and backward.count() >= 1
    assert "forward ops" in page.inner_text("#status")
    browser.shot(page, "nanogpt-source-line")
    backward.first.click()  # an op finds its line again
    assert page.locator(".sl.sel").first.inner_text().find("x = self.c_fc(x)") >= 0
    assert "grad" in page.inner_text("#panel")
    browser.shot(page, "nanogpt-source-op")
    page.close()

    for name in ("failures.html", "distributed.html"):
        browser.open(nanogpt_report / name).close()
    assert browser.errors == [] and browser.dialogs == []


@pytest.mark.slow
def test_tensor_parallel_report_shows_roles_and_ranks(demo, browser):
    tp_report = demo[0]
    pages = _pages(tp_report)
    tp = [i for i, c in enumerate(pages["directory"]["compiles"]) if c["fn"].endswith("ToyModel")]
    assert sorted(pages["directory"]["compiles"][i]["rank_label"] for i in tp) == ["rank 0", "rank 1"]
    pages["compiles"] = [pages["compiles"][i] for i in tp]

    page = browser.open(tp_report / "distributed.html")
    text = page.inner_text("main")
    assert "2 ranks" in text and "in sync" in text and "row_parallel.post" in text
    browser.shot(page, "tp-distributed")
    page.close()

    page = browser.open(pages["compiles"][0]["compile"])
    op = page.locator("details.trace[open] .op.role3").first  # row_parallel.post's color
    op.hover()
    assert "row_parallel.post" in page.inner_text("#tip")
    op.click()
    assert "row_parallel.post" in page.inner_text("#panel")
    browser.shot(page, "tp-compile-roles")
    page.close()

    page = browser.open(pages["compiles"][1]["source"])
    page.locator(".sl", has_text="return self.net2(new_gelu(self.net1(x)))").first.click()
    assert page.locator('pre.pane[data-pane="forward"] .op.hl[class*=role]').count() >= 2
    assert page.locator('pre.pane[data-pane="backward"] .op.hl').count() >= 1
    browser.shot(page, "tp-source")
    page.close()
    browser.open(tp_report / "index.html").close()
    assert browser.errors == [] and browser.dialogs == []


# What a page says when it has nothing to show (the templates' empty states)
EMPTY = ("No compile failed", "No ThunderFX graph in the log", "nothing to compare", "No op carries a distributed role",
         "No profiled call in these logs")


@pytest.mark.slow
def test_the_demo_prints_a_short_summary_and_every_page_of_its_report_has_content(demo, browser):
    """Issue 21: `./dev demo` shows the whole report. What it printed: a few labelled lines (compiles,
    top lines by time, where the report is). Every page of its report, opened in Chromium, shows
    something (no empty state), each compile's page and source view its traces; a compile's cache
    hits read the same on its index row and on its page."""
    report, printed = demo
    assert printed and all(line.startswith("demo: ") for line in printed), printed
    assert len(printed) <= 40
    assert f"demo: report: {report / 'index.html'}" in printed
    assert any("top lines by time" in line for line in printed)
    assert any("recompiled: " in line for line in printed) and any("AssertionError" in line for line in printed)

    directory = orjson.loads((report / "compile_directory.json").read_bytes())
    compiles = directory["compiles"]
    # what the demo is for: a fusion executor, a recompile, a failed compile, profiles, ThunderFX, ranks
    assert any((c["final"] or {}).get("fusions") for c in compiles)
    assert any(c["recompiled"] and c["status"] == "ok" for c in compiles)
    assert [c["status"] for c in compiles].count("failed") == 1
    assert sum(1 for c in compiles if c["time"]) >= 3 and directory["dynamo_graphs"]["graphs"]
    assert {c["rank_label"] for c in compiles} >= {"rank 0", "rank 1"}

    run_pages = [name for name in directory["files"].values() if name.endswith(".html")]
    assert sorted(run_pages) == ["distributed.html", "failures.html", "graphs.html", "index.html", "memory.html",
                                "time.html"]
    wanted = {  # each page's own content, beyond having no empty state
        "index.html": "table.compiles tbody tr", "failures.html": "section.failure", "graphs.html": "tr.fx-break-row",
        "distributed.html": "table.ranks tbody tr", "time.html": "main table tbody tr",
        "memory.html": "#ranks table tbody tr"}
    tab = browser.open(report / "index.html")  # one tab for every page: it goes to each in turn

    def visit(path: str, selector: str, least: int = 1, shot: bool = True) -> str:
        tab.goto((report / path).resolve().as_uri())
        tab.wait_for_load_state("load")
        text = tab.inner_text("main")
        assert not [e for e in EMPTY if e in text], path
        assert tab.locator(selector).count() >= least, (path, selector)
        if shot:  # test-artifacts/report/demo-*.png: every page but the source views
            browser.shot(tab, "demo-" + path.removesuffix(".html").replace("/", "-"))
        return text

    rows: list[str] = []
    for name in run_pages:
        visit(name, wanted[name])
        if name == "index.html":
            rows = tab.locator("table.compiles tbody tr").all_inner_texts()
    assert len(rows) == len(compiles)
    for graph in directory["dynamo_graphs"]["graphs"]:
        assert "thunder_0" in visit(graph["page"], ".sl", least=5)
    for c, row in zip(compiles, rows):
        compiled = c["pages"]["compile"]
        if c["status"] == "failed":
            assert "AssertionError" in visit(compiled, "section.cards")
        else:
            visit(compiled, "details.trace[open] .op")  # its final traces, drawn
            card = tab.inner_text(".card.cache")
            assert card.startswith(f"{c['compile_hits']}\ncache hits (this compile)"), card
            badge = re.search(r"(\d+) cache hits? \(this compile\)", row)  # the index row says the same
            assert (int(badge.group(1)) if badge else 0) == c["compile_hits"], row
        if c["pages"].get("source"):
            visit(c["pages"]["source"], "pre.pane .op" if c["status"] == "ok" else ".sl", shot=False)
    tab.close()
    assert browser.errors == [] and browser.dialogs == []


XSS = "</script><img src=x onerror=alert(1)>"
XSS_FLAG = '<img src=x onerror="window.__xss=1">'


def test_log_text_never_runs_as_script(tmp_path, browser):
    records = report_logs.records(text_mul=XSS, text_add=XSS_FLAG + "<!--", fn=XSS, module=XSS_FLAG, argv=[XSS],
                                  error={"message": XSS, "traceback": XSS_FLAG, "error_type": XSS})
    records[0]["host"] = XSS_FLAG
    records[7]["label"] = records[7]["pass"] = XSS  # a pass name is drawn by the page's script (passRows)
    records[7]["python"] = records[7]["python"].replace("import torch", "import torch  # " + XSS)
    records.insert(3, {"type": XSS, "x": XSS})  # an unknown record type, listed on the index
    log = report_logs.write(tmp_path / "logs" / "a.jsonl", [*records, XSS.encode() + b"\n"])
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "provenance.report", "report", str(log), "-o", str(out),
                           "--no-browser"], capture_output=True, text=True, timeout=120, cwd=ROOT, env=_env())
    assert done.returncode == 0, done.stderr
    pages = _pages(out)
    targets = [out / "index.html", out / "failures.html", out / "distributed.html", pages["compiles"][0]["source"],
               pages["compiles"][0]["compile"]]
    errors_before = len(browser.errors)
    for path in targets:
        page = browser.open(path)
        page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")  # lazy traces too
        page.wait_for_timeout(100)
        visible_ops = page.locator(".op[data-p]:visible")
        if visible_ops.count():
            visible_ops.first.click()
        page.wait_for_timeout(100)  # let an injected <img> fail to load and fire onerror
        assert page.evaluate("window.__xss") is None
        assert page.locator("main img").count() == 0
        if path.name in ("index.html", "failures.html") or path == targets[3]:
            assert XSS in page.inner_text("main")  # shown as text
        if path == targets[-1]:
            assert XSS in page.inner_text("#panel") or XSS in page.inner_text("main")
            assert XSS in page.inner_text("table.passes")
            browser.shot(page, "xss-compile")
        page.close()
    assert browser.dialogs == []
    assert browser.errors[errors_before:] == []


@pytest.fixture(scope="module")
def fx_report(tmp_path_factory) -> Path:
    """tests/support/fx_program.py (ThunderFX: a graph break, a torch fallback) run unchanged under THUNDER_TRACE."""
    work = tmp_path_factory.mktemp("fx")
    _run([sys.executable, "tests/support/fx_program.py"], env=_env(THUNDER_TRACE=str(work / "logs")))
    return _report(work / "logs", work / "report")


@pytest.mark.slow
def test_thunderfx_report_shows_graphs_pieces_splits_breaks_and_lines_across_pieces(fx_report, browser):
    import fx_program

    L = fx_program.line_of
    index = browser.open(fx_report / "index.html")
    graphs = index.locator("table.fx-graphs tr.fx-graph")
    assert graphs.count() == 2  # [0/0] (split by the fallback, ended by the break) and [1/0] after it
    first = graphs.first.inner_text()
    assert "[0/0]" in first and "split" in first
    assert [p in first for p in ("thunder_0", "inductor_1", "thunder_2", "MISSING_OP_SUPPORT")] == [True] * 4
    assert graphs.first.locator("a.cref.s-ok").count() == 2  # the two Thunder pieces' compiles
    browser.shot(index, "fx-index")
    index.close()

    page = browser.open(fx_report / "graphs.html")
    breaks, fallbacks = page.locator("tr.fx-break-row"), page.locator("tr.fx-fallback-row")
    assert breaks.count() == 1 and f"fx_program.py:{L('fxp print')}" in breaks.first.inner_text()
    assert "Failed to trace builtin operator" in breaks.first.inner_text()
    assert fallbacks.count() == 2  # detach and linalg_det, both in inductor_1
    assert all("inductor_1" in t and "MISSING_OP_SUPPORT" in t and f"fx_program.py:{L('fxp fallback')}" in t
               for t in fallbacks.all_inner_texts())
    browser.shot(page, "fx-graph-breaks")
    fallbacks.first.locator("a.fx-line").click()  # the user line: the graph's source view, at that line
    page.wait_for_load_state("load")
    assert page.locator(".sl.sel").inner_text().find("torch.linalg.det") >= 0
    box = page.inner_text("#fx-line")
    assert "inductor_1" in box and "ran in torch (inductor)" in box and "MISSING_OP_SUPPORT" in box
    assert "thunder_2" in box  # the line's multiply by det ran in Thunder's piece after the fallback
    page.close()

    page = browser.open(fx_report / "graphs" / "log0-g1.html")
    assert page.locator(".sl.fx-fallback").count() == 1 and page.locator(".sl.fx-break").count() == 1
    # the graph's compile to scale and every phase in a table, drawn from their data (report.js phaseBars)
    # dynamo_trace in the bar: its title names it (its label shows only if it took 2% of the compile,
    # which a loaded machine's slower Inductor compile can take from it)
    assert page.locator("#compile-time .timeline.phases .seg[title*='dynamo_trace']").count() >= 1
    assert page.locator("#compile-time table.phases tbody tr").count() >= page.locator(
        "#compile-time .timeline.phases .seg:not(.g-other)").count() >= 3
    page.locator(".sl", has_text="h = self.up(x)").click()
    entries = page.locator("#fx-line .fx-is-thunder")
    assert entries.count() == 1 and "thunder_0" in entries.inner_text()
    text = entries.inner_text()
    assert "1 forward ops" in text and "linear" in text and "backward ops" in text and "0 backward ops" not in text
    browser.shot(page, "fx-graph-source")
    entries.locator("a").click()  # the piece's own source view, at the same line, its ops highlighted
    page.wait_for_load_state("load")
    assert "h = self.up(x)" in page.locator(".sl.sel").inner_text()
    assert page.locator('pre.pane[data-pane="forward"] .op.hl').count() >= 1
    assert page.locator('pre.pane[data-pane="backward"] .op.hl').count() >= 1
    page.close()
    assert browser.errors == [] and browser.dialogs == []


def test_thunderfx_log_text_never_runs_as_script(tmp_path, browser):
    records = report_logs.records(fx=True, schema="1.4")
    records[1]["reason"] = XSS + XSS_FLAG
    records[1]["frames"][0][3] = XSS_FLAG
    records[2]["reasons"][0].update(info=XSS, node=XSS_FLAG, kind=XSS)
    records[2]["pieces"][1]["name"] = XSS_FLAG
    records[2]["compile_id"] = XSS
    log = report_logs.write(tmp_path / "logs" / "a.jsonl", records)
    out = tmp_path / "out"
    _run([sys.executable, "-m", "provenance.report", "report", str(log), "-o", str(out), "--no-browser"], env=_env())
    errors_before = len(browser.errors)
    for path in (out / "index.html", out / "graphs.html", *sorted((out / "graphs").glob("*.html"))):
        page = browser.open(path)
        for line in page.locator(".sl.has").all():
            line.click()
        page.wait_for_timeout(100)
        assert page.evaluate("window.__xss") is None and page.locator("main img").count() == 0
        assert XSS in page.inner_text("main")
        page.close()
    assert browser.dialogs == [] and browser.errors[errors_before:] == []


# -- big pages: traces rendered when opened, the find box, desyncs, legends (issue 13) ---------------
OPEN_TRACES = ("() => Array.from(document.querySelectorAll('details.trace[open] > pre.code'))"
               ".map(p => [p.closest('details').id, p.innerHTML])")
IN_VIEW = "o => { const r = o.getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; }"

def _trace_records(logs: Path) -> list[dict]:
    return [r for f in sorted(logs.glob("*.jsonl")) for r in map(orjson.loads, f.read_bytes().splitlines())
            if r.get("type") == "trace"]


KIND_CLASS = {"op": "qo", "decomposition": "qd", "backward": "qb", "recompute": "qr", "fusion": "qf",
              "bookkeeping": "qk", "pass": "qp", "scope": "qs"}  # report.js: an op's border by its record's kind
RENDERED = """pre => Array.from(pre.querySelectorAll('.op')).map(o => [o.dataset.p, o.textContent,
    o.className.split(' ')[1] || null])"""


@pytest.mark.slow
def test_traces_are_rendered_from_data_as_the_log_has_them(nanogpt_report, browser):
    """No trace is HTML in the pages: the compile page renders the final traces when it loads and
    the others when opened, the source page its panes (the final traces again), all from data."""
    from provenance.core.annotation import THUNDER_SOURCE_COMMENT

    logs = nanogpt_report.parent / "logs"
    traces = _trace_records(logs)
    kinds = {r["id"]: r["kind"] for f in sorted(logs.glob("*.jsonl"))
             for r in map(orjson.loads, f.read_bytes().splitlines()) if r.get("type") == "prov"}
    pages = _pages(nanogpt_report)["compiles"][0]
    for name in ("compile", "source"):
        assert '<span class="op' not in pages[name].read_text()
    finals = {}
    for r in traces:
        if r.get("same_as") is None and r["list"] in ("computation", "backward"):
            finals[r["list"]] = r

    def expected(r: dict) -> list:
        lines = r["python"].split("\n")
        return [[None if prov is None else str(prov), "\n".join(lines[line:line + n]),
                 KIND_CLASS[kinds[prov]] if prov in kinds else None] for line, n, _sym, _outs, prov in r["ops"]]

    page = browser.open(pages["compile"])
    final_html = {}
    for r in finals.values():  # rendered on load, open
        pre = page.locator(f"#{r['list']}-{r['index']}[open] > pre.code:not(.lazy)")
        assert pre.evaluate(RENDERED) == expected(r)
        lines = r["python"].split("\n")
        assert pre.locator(".tsc").evaluate_all("ts => ts.map(t => t.textContent)") == [
            line for line in lines if THUNDER_SOURCE_COMMENT.match(line)]
        assert pre.locator(".ck").count() == -(-len(r["ops"]) // 64)  # blocks laid out near the screen
        assert set(pre.evaluate(UNEXPLAINED_GAPS)) == {0}  # no blank line between ops (Thunder's before its comments)
        headers = pre.locator(".ph").evaluate_all("hs => hs.map(h => h.textContent.trim())")
        assert headers and all(h.startswith("# \u2500\u2500 ") for h in headers)
        final_html[r["list"]] = pre.inner_html()
    others = [r for r in traces if r.get("same_as") is None and r not in finals.values()]
    assert len(others) >= 5 and any(r["list"] == "computation" and len(r["ops"]) > 50 for r in others)
    for r in others:  # each opened: the log's ops, with their records
        anchor = f"{r['list']}-{r['index']}"
        assert page.locator(f"#{anchor} pre.code .op").count() == 0  # not rendered yet
        page.locator(f"#{anchor} > summary").click()
        page.wait_for_selector(f"#{anchor} > pre.code:not(.lazy)", state="attached")  # rendered on `toggle`
        assert page.locator(f"#{anchor} > pre.code").evaluate(RENDERED) == expected(r)
        if r["list"] == "computation":
            assert page.locator(f"#{anchor} pre.code .op .nf").count() >= len(r["ops"]) // 2  # highlighted
    page.close()

    page = browser.open(pages["source"])  # the panes: the same traces, rendered alike from the page's own data
    for pane, name in (("forward", "computation"), ("backward", "backward")):
        assert page.locator(f'pre.pane[data-pane="{pane}"]:not(.lazy)').inner_html() == final_html[name]
    page.close()
    assert browser.errors == []


@pytest.mark.slow
def test_find_box_highlights_a_tensors_ops_and_steps_through_them(nanogpt_report, browser):
    import re

    traces = _trace_records(nanogpt_report.parent / "logs")
    final = [r for r in traces if r["list"] == "computation" and r.get("same_as") is None][-1]
    lines = final["python"].split("\n")
    # a tensor made by one op and used by others: its ops are those whose text names it
    name = next(outs[0] for _l, _n, _s, outs, _p in final["ops"] if outs and re.fullmatch(r"t\d+", outs[0])
                and sum(bool(re.search(rf"\b{outs[0]}\b", "\n".join(lines[a:a + b])))
                        for a, b, *_ in final["ops"]) >= 3)
    expected = [str(p) for a, b, _s, _o, p in final["ops"] if re.search(rf"\b{name}\b", "\n".join(lines[a:a + b]))]
    compile_pages = _pages(nanogpt_report)["compiles"][0]

    page = browser.open(compile_pages["compile"])
    assert page.locator(".legend.ops .lk.qb").count() == 1 and page.locator(".legend.tlists .key.l-backward").count()
    page.keyboard.press("/")  # focuses the box
    page.keyboard.type(name)
    found = page.locator(f"#computation-{final['index']} .op.found")
    assert found.evaluate_all("os => os.map(o => o.dataset.p)") == expected
    total = page.locator(".op.found").count()  # the backward trace may name it too
    assert page.inner_text("#find-count").startswith(f"1 of {total}")
    current = page.locator(".op.found-cur")
    assert current.count() == 1 and current.evaluate("o => o.dataset.p") == expected[0]
    assert current.evaluate(IN_VIEW)
    page.keyboard.press("Enter")
    assert page.inner_text("#find-count").startswith(f"2 of {total}")
    assert page.locator(".op.found-cur").evaluate("o => o.dataset.p") == expected[1]
    page.keyboard.press("Shift+Enter")
    page.keyboard.press("Shift+Enter")  # wraps to the last
    assert page.inner_text("#find-count").startswith(f"{total} of {total}")
    page.locator(".find button[data-step='1']").click()
    assert page.inner_text("#find-count").startswith(f"1 of {total}")
    browser.shot(page, "nanogpt-find")
    page.keyboard.press("Escape")
    assert page.locator(".op.found").count() == 0
    page.close()

    page = browser.open(compile_pages["source"])
    assert page.locator(".legend.ops").count() == 1
    page.locator(".sl.has").last.click()  # its ops lie in blocks not laid out yet: still scrolled into the pane
    assert page.locator('pre.pane[data-pane="forward"] .op.hl').first.evaluate(
        "o => { const r = o.getBoundingClientRect(), b = o.closest('pre').getBoundingClientRect();"
        " return r.top >= b.top && r.bottom <= b.bottom; }")
    page.fill("#find", name)
    assert page.locator('pre.pane[data-pane="forward"] .op.found').evaluate_all(
        "os => os.map(o => o.dataset.p)") == expected
    page.close()
    assert browser.errors == []


def test_desync_banner_links_to_the_first_differing_op_on_each_rank(tmp_path, browser):
    logs = tmp_path / "logs"
    report_logs.write(logs / "r0.jsonl", report_logs.records(rank=0))
    other = report_logs.records(rank=1)
    other[8]["ops"][1][2] = "sub"  # rank 1's final forward trace runs another op second
    report_logs.write(logs / "r1.jsonl", other)
    outs = []
    for jobs in ("1", "2"):
        outs.append(tmp_path / f"out{jobs}")
        _run([sys.executable, "-m", "provenance.report", "report", str(logs), "-o", str(outs[-1]), "--no-browser",
              "-j", jobs], env=_env())
    for path in report_files(outs[0]):
        assert (outs[0] / path).read_bytes() == (outs[1] / path).read_bytes(), path
    out = outs[0]

    index = browser.open(out / "index.html")
    links = index.locator(".desync-banner a[href*='#op-']")
    assert links.count() == 2 and "1 compile differs" in index.inner_text(".desync-banner")
    hrefs = links.evaluate_all("as => as.map(a => [a.textContent, a.getAttribute('href')])")
    index.close()
    assert [rank for rank, _ in hrefs] == ["rank 0", "rank 1"]
    for _rank, href in hrefs:
        path, _, fragment = href.partition("#")
        page = browser.open(out / path, "#" + fragment)
        target = page.locator(f"#{fragment}")  # given by the script as it renders the final trace
        assert target.count() == 1 and {"op", "tgt"} <= set(target.get_attribute("class").split())
        assert target.evaluate("o => Array.from(o.closest('pre').querySelectorAll('.op')).indexOf(o)") == 1
        assert "torch.add" in target.inner_text()  # the op the two ranks name differently (add, sub)
        assert target.evaluate(IN_VIEW)
        banner = page.locator(".desync-banner")
        assert banner.count() == 1 and "add" in banner.inner_text() and "sub" in banner.inner_text()
        assert banner.locator("a").count() == 2
        page.close()
    page = browser.open(out / "distributed.html")
    assert page.locator("tr.desync a[href*='#op-computation-1']").count() == 2
    page.close()
    assert browser.errors == []


def test_the_source_view_opens_each_file_at_its_hottest_line(nanogpt_report, browser):
    """Not at line 1 (a license header, imports): at the line that made the most ops (the most time,
    where profiled), within the file's box; a link to a line still opens there instead."""
    pages = _pages(nanogpt_report)
    (compile_pages,) = pages["compiles"]
    page = browser.open(compile_pages["source"])
    page.wait_for_timeout(300)  # reveal() settles a frame after the load
    found = page.evaluate("""() => [...document.querySelectorAll("section.srcfile[data-open]")].map(f => {
        const line = document.getElementById("L" + f.dataset.file + "-" + f.dataset.open);
        const box = line.closest(".code.src"), a = line.getBoundingClientRect(), b = box.getBoundingClientRect();
        return [f.dataset.open, box.scrollTop, a.top >= b.top && a.bottom <= b.bottom];
    })""")
    assert found and all(visible for _, _, visible in found), found
    assert any(int(line) > 40 and top > 0 for line, top, _ in found), found  # scrolled down to it
    # the code is the larger part of the view (a long line, the gutter's fusion names: not cut at 40%)
    code, whole = page.evaluate("""() => [document.querySelector('.srcview .files').getBoundingClientRect().width,
                                           document.querySelector('.srcview').getBoundingClientRect().width]""")
    assert code >= 0.55 * whole, (code, whole)
    page.close()
