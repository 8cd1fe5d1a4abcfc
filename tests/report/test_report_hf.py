"""Reports of Hugging Face models under ThunderFX (tests/support/hf_program.py: tiny GPT2 and Llama
built from configs, forward and backward; Llama called again at another length, a recompile):
the report stays proportional to the log (each user file sent once), the Dynamo graph page (its
crumbs, the model file first, split reasons once, the line's pane in view, anchors below the
sticky bars) and the run table naming the model code's distributions.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from paths import ROOT, SUPPORT

from provenance import Kind
from provenance.core.attribution import charged, line_frame, module_line_frame
from provenance.report.incremental import STATE_DIR
from provenance.report.read.log_file import LogFile
from provenance.report.render.jsonsafe import json_bytes

pytestmark = pytest.mark.slow
transformers = pytest.importorskip("transformers")

MAX_RATIO = 2.3  # report bytes per log byte: tlparse's


def _run(name: str, work: Path) -> tuple[Path, Path]:
    env = {k: v for k, v in os.environ.items() if k not in ("THUNDER_TRACE", "THUNDER_TRACE_PROFILE", "CI")}
    path = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])  # this checkout's capture, installed or not
    done = subprocess.run([sys.executable, str(SUPPORT / "hf_program.py"), name, str(work / "guards.json")], cwd=ROOT,
                          capture_output=True,
                          text=True, timeout=600, env={**env, "THUNDER_TRACE": str(work / "logs"), "PYTHONPATH": path})
    assert done.returncode == 0, done.stderr[-3000:]
    out = work / "report"
    done = subprocess.run([sys.executable, "-m", "provenance.report", "report", str(work / "logs"), "-o", str(out),
                           "--no-browser"], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return work / "logs", out


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> tuple[Path, Path]:
    return _run("gpt2", tmp_path_factory.mktemp("gpt2"))


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> tuple[Path, Path]:
    return _run("llama", tmp_path_factory.mktemp("llama"))


def _size(path: Path) -> int:
    """The bytes of a log directory, or of a report (its state, the build's memory, aside: bench/README.md
    gives its size)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and STATE_DIR not in p.parts)


def _model_file(out: Path, name: str) -> str:
    directory = orjson.loads((out / "compile_directory.json").read_bytes())
    assert directory["dynamo_graphs"]["graphs"]
    return str(Path(transformers.__file__).parent / "models" / name / f"modeling_{name}.py")


@pytest.mark.parametrize("model", ["gpt2", "llama"])
def test_the_report_stays_proportional_to_the_log_each_user_file_sent_once(model, request):
    logs, out = request.getfixturevalue(model)
    assert _size(out) <= MAX_RATIO * _size(logs), (_size(out), _size(logs))
    path = _model_file(out, model)
    # A line of the model file that made no op (a comment): in the report only as the file's data
    comment = max((line for line in Path(path).read_text().splitlines() if line.strip().startswith("#")), key=len)
    needle = json_bytes(comment)
    holding = [p.relative_to(out) for p in out.rglob("*") if p.is_file() and needle in p.read_bytes()]
    assert len(holding) == 1 and holding[0].parts[:2] == ("static", "src"), holding
    asset = holding[0].name
    viewers = [p for p in (*out.glob("compiles/*-source.html"), *out.glob("graphs/*.html"))
               if f'title="{path}"' in p.read_text()]
    assert len(viewers) >= 3  # the pieces' source views and the graphs' pages show it ...
    assert all(f'static/src/{asset}"></script>' in p.read_text() for p in viewers)  # ... all from its one file
    pages = [*out.glob("compiles/*-source.html"), *out.glob("graphs/*.html")]
    shown = {m for p in pages for m in re.findall(r'static/src/(\w+\.js)"', p.read_text())}
    assert shown == {p.name for p in (out / "static" / "src").iterdir()}  # one file per user file, none unused


def test_the_graph_page_lists_the_model_file_first_and_each_split_reason_once(llama):
    _logs, out = llama
    for page in sorted(out.glob("graphs/*.html")):
        html = page.read_text()
        crumbs = re.search(r'<p class="crumbs">(.*?)</p>', html).group(1)
        # Index › graph breaks › [0/0]: no empty crumb for the rank of a run of one process
        assert not re.search(r"&rsaquo;\s*&rsaquo;", crumbs) and crumbs.count("&rsaquo;") == 2, crumbs
        files = re.findall(r'<section class="srcfile" data-file="(\d+)">\s*<h3 title="([^"]*)"', html)
        assert files[0] == ("0", _model_file(out, "llama")), files
        reasons = re.findall(r"<div><b>(.*?)</div>", html)
        assert reasons and len(reasons) == len(set(reasons))  # Thunder lists the cat's reasons several times
        # what Dynamo and Thunder decided first, the source last, and of each file only the lines around its ops
        assert html.index('id="pieces"') < html.index('id="guards"') < html.index('id="source"')
        shown = re.findall(r'<div class="code src" data-show="([^"]*)"', html)
        lines = sum(int(b) - int(a) + 1 for runs in shown for a, b in (r.split("-") for r in runs.split(",") if r))
        whole = sum(len(Path(f).read_text().splitlines()) for _, f in files if Path(f).is_file())
        assert 0 < lines < whole / 2, (lines, whole)


def test_the_graph_page_keeps_the_lines_pane_in_view_and_anchors_below_the_bars(gpt2, browser):
    _logs, out = gpt2
    model = _model_file(out, "gpt2")
    page = browser.open(out / "graphs" / "log0-g1.html")
    assert page.locator(".srcfile h3").first.get_attribute("title") == model
    page.locator('.srcfile[data-file="0"] .sl.has').first.click()
    assert "forward ops" in page.inner_text("#fx-line")
    # the source comes last (its lines around the ops): from its top, the files scroll on and the pane stays
    page.locator("#source").evaluate("e => e.scrollIntoView()")
    height = page.locator(".fx-src .files").evaluate("e => e.getBoundingClientRect().height")
    assert height > 2 * page.evaluate("innerHeight"), height
    start = page.evaluate("scrollY")
    page.evaluate(f"scrollBy(0, {height / 2})")  # the window (a wheel over a file's box scrolls that box)
    page.wait_for_timeout(200)
    assert page.evaluate("scrollY") > start + 1000
    box = page.locator(".fx-src .panes").evaluate("e => [e.getBoundingClientRect().top, innerHeight]")
    bars = page.evaluate("document.querySelector('.status').getBoundingClientRect().bottom")
    assert bars <= box[0] < box[1] / 4, (bars, box)
    page.close()
    for path in (out / "graphs" / "log0-g1.html", next(out.glob("compiles/*-source.html"))):
        page = browser.open(path)
        anchor = page.locator(".sl.has").nth(3).get_attribute("id")  # a line well down its file
        page.close()
        page = browser.open(path, f"#{anchor}")
        line = page.locator(f"#{anchor}")
        assert "sel" in line.get_attribute("class").split()
        top, bottom = line.evaluate("e => [e.getBoundingClientRect().top, e.getBoundingClientRect().bottom]")
        bars = page.evaluate("document.querySelector('.status').getBoundingClientRect().bottom")
        assert bars <= top and bottom <= page.evaluate("innerHeight"), (path.name, bars, top)
        page.close()
    assert browser.errors == []


@pytest.mark.parametrize("model", ["gpt2", "llama"])
def test_the_run_table_names_the_model_codes_distributions(model, request):
    logs, out = request.getfixturevalue(model)
    (log,) = logs.glob("*.jsonl")
    libraries = [r for r in map(orjson.loads, log.read_bytes().splitlines()) if r["type"] == "library"]
    assert [(r["name"], r["version"], r["package"]) for r in libraries] == [
        ("transformers", transformers.__version__, "transformers")]  # not torch: the header names it
    index = (out / "index.html").read_text()
    row = re.search(r'<div class="libraries"[^>]*>(.*?)</div>', index).group(1)
    assert row == f"model code: transformers {transformers.__version__}"
    (entry,) = orjson.loads((out / "compile_directory.json").read_bytes())["logs"]
    assert entry["libraries"] == {"transformers": transformers.__version__}


def test_a_dynamo_recompile_is_explained_and_each_graphs_whole_compile_counted(llama):
    _logs, out = llama
    graphs = orjson.loads((out / "compile_directory.json").read_bytes())["dynamo_graphs"]["graphs"]
    assert [g["compile_id"] for g in graphs] == ["0/0", "0/1"]
    first, second = graphs
    assert first["recompile_reason"] is None
    assert second["recompile_reason"] == "input_ids: dim 1 size 16 → 8"
    for graph in graphs:  # from Dynamo's start to the last piece compiled, in named phases
        assert graph["covered_pct"] >= 95 and graph["dynamo_start_ns"] < graph["start_ns"], graph
        names = {p["name"] for p in graph["phases"]}
        assert {"dynamo_trace", "split", "inductor_compile", "thunder_compile"} <= names, names
    page = (out / second["page"]).read_text()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    assert "Why Dynamo compiled again input_ids dim 1 size 16 &rarr; 8" in text
    assert "size mismatch at index 1. expected 16, actual 8" in text  # torch's guard, kept
    assert "hf_program.py:" in text  # the user's call that failed the guards
    assert 'recompiled: input_ids: dim 1 size 16 → 8' in (out / "index.html").read_text()


def test_the_module_line_lights_up_the_ops_made_through_it(llama, browser):
    """An SDPA op's innermost user frame is transformers' attention helper; its module line is
    LlamaAttention.forward's call of it: that line of modeling_llama.py counts the op, and the op's
    panel names it."""
    _logs, out = llama
    model = _model_file(out, "llama")
    line = next(n for n, text in enumerate(Path(model).read_text().splitlines(), 1)
                if "= attention_interface(" in text)
    page = (out / "graphs" / "log0-g1.html").read_text()
    files = dict((path, index) for index, path in re.findall(
        r'<section class="srcfile" data-file="(\d+)">\s*<h3 title="([^"]*)"', page))
    marks = orjson.loads(re.search(r'id="srcmarks"[^>]*>(.*?)</script>', page, re.S).group(1))
    forward, backward, _ = marks["c"][f"L{files[model]}-{line}"]
    assert forward > 0 and backward > 0
    through, compile_page = [], None
    for data in sorted((out / "compiles").glob("*.provs.js")):  # the piece with the attention
        records = orjson.loads(data.read_text().split("=", 1)[1].strip().rstrip(";"))["provs"].values()
        through = [r for r in records if r["ml"] is not None and r["ml"][1] == line]
        if through:
            compile_page = data.with_name(data.name.replace(".provs.js", ".html"))
            break
    assert through and all(r["f"][1] != line for r in through)  # the user line is the helper's
    tab = browser.open(compile_page)
    tab.locator(f'.op[data-p="{through[0]["id"]}"]').first.click()
    panel = tab.inner_text(".panel")
    assert f"module line\n{os.path.basename(model)}:{line}" in panel, panel
    tab.close()
    assert browser.errors == []


@pytest.mark.parametrize("model", ["gpt2", "llama"])
def test_every_op_in_the_log_is_at_the_model_file_by_its_module_line(model, request):
    """The records as the log has them (module_file, schema 1.5): >= 95% of the compute ops of the
    final traces are at a line of modeling_<model>.py by their module line, fewer by their
    innermost user frame (HF's helpers: sdpa_attention.py, activations.py, pytorch_utils.py)."""
    logs, out = request.getfixturevalue(model)
    (path,) = logs.glob("*.jsonl")
    log = LogFile(path)
    finals = {}
    for record in log:
        if record.get("type") == "trace" and record.get("list") in ("computation", "backward") and record.get("ops"):
            finals[(record["compile"], record["list"])] = record  # the last of each list is the final trace
    records = []
    for trace in finals.values():
        for op in trace["ops"]:
            found = log.provenance(op[4])
            if found is not None and found.kind != Kind.BOOKKEEPING:
                records.extend(charged(found))  # a fusion as its members
    model_file = _model_file(out, model)
    by_module_line = sum(1 for r in records if (f := module_line_frame(r)) is not None and f.file == model_file)
    by_user_line = sum(1 for r in records if (f := line_frame(r)) is not None and f.file == model_file)
    assert len(records) > 500
    assert by_module_line / len(records) >= 0.95 and by_user_line / len(records) < 0.9, (
        by_module_line, by_user_line, len(records))


def test_the_index_says_how_much_is_the_model_files_own_code(llama):
    """Ops at a user line are not all the model's: HF's attention and mask helpers (sdpa_attention.py,
    masking_utils.py) are user code too (site-packages model code), so the index says both figures."""
    _, out = llama
    totals = orjson.loads((out / "compile_directory.json").read_bytes())["totals"]
    assert 0 < totals["compute_at_module_file"] < totals["compute_with_user_source"] <= totals["compute"]
    assert totals["module_file_pct"] == pytest.approx(100 * totals["compute_at_module_file"] / totals["compute"])
    assert "in the model's own files, the rest in code it calls" in (out / "index.html").read_text()


@pytest.mark.parametrize("model", ["gpt2", "llama"])
def test_each_graph_page_shows_torchs_trace_every_guard_as_torch_counts_them(model, request):
    """torch's structured trace, captured into THUNDER_TRACE's log (no TORCH_TRACE): each Dynamo graph's
    page lists every guard check of its cache entry (as many as torch's guard manager has: the program
    counts them, tests/support/torch_guards.py), Dynamo's output graph, and a fallback piece's inductor code."""
    logs, out = request.getfixturevalue(model)
    checks = orjson.loads((logs.parent / "guards.json").read_bytes())
    graphs = orjson.loads((out / "compile_directory.json").read_bytes())["dynamo_graphs"]["graphs"]
    fallbacks = 0
    for graph in graphs:
        page = (out / graph["page"]).read_text()
        assert f"Guards: {checks[graph['compile_id']]} checks" in page, graph["compile_id"]
        assert "Dynamo&#39;s output graph" in page and "class GraphModule" in page
        if any(p["compiler"] != "thunder" for p in graph["pieces"]):
            fallbacks += 1
            assert "inductor&#39;s code" in page and "def call(self, args):" in page  # inductor's module
    assert fallbacks


def test_a_thunder_piece_recompiles_for_the_dim_dynamo_made_dynamic_in_the_users_words(llama):
    """Lengths 16, 8, 12: Dynamo makes input_ids' length dynamic in [0/1] (its guards on it listed as
    the user wrote the input); at 12 [0/1] is reused and its Thunder pieces, compiled for 8, compile
    again: their reasons name input_ids and the user's call, and the graph page says why."""
    logs, out = llama
    graphs = orjson.loads((out / "compile_directory.json").read_bytes())["dynamo_graphs"]["graphs"]
    dynamic = next(g for g in graphs if g["compile_id"] == "0/1")
    page = (out / dynamic["page"]).read_text()
    assert "made dynamic</td><td><code>input_ids dim 1</code>" in page
    assert "<td>LAMBDA_GUARD</td><td><code>2 &lt;= input_ids.size()[1]</code>" in page  # a guard on the dim
    assert [f.split(" (")[0] for f in dynamic["torch"]["fixed_by_thunder"]] == ["input_ids dim 1"]
    assert re.search(r"\(\d+ piece recompiles here\)", page)
    (log,) = logs.glob("*.jsonl")
    recompiles = [r for r in map(orjson.loads, log.read_bytes().splitlines()) if r["type"] == "recompile"]
    call = next(n for n, line in enumerate((SUPPORT / "hf_program.py").read_text().splitlines(), 1)
                if line.endswith("# <-- hf call"))
    assert recompiles and all("input_ids dim 1: value 8 → 12" in r["reason"] for r in recompiles)
    assert all("l_kwargs_input_ids_" not in r["reason"] and "s27" not in r["reason"] for r in recompiles)
    assert all(r["call"][:2] == [str(SUPPORT / "hf_program.py"), call] for r in recompiles)
