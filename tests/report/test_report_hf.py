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

from provenance.report.render.jsonsafe import json_bytes

pytestmark = pytest.mark.slow
transformers = pytest.importorskip("transformers")

MAX_RATIO = 2.3  # report bytes per log byte: tlparse's


def _run(name: str, work: Path) -> tuple[Path, Path]:
    env = {k: v for k, v in os.environ.items() if k not in ("THUNDER_TRACE", "THUNDER_TRACE_PROFILE", "CI")}
    path = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])  # this checkout's capture, installed or not
    done = subprocess.run([sys.executable, str(SUPPORT / "hf_program.py"), name], cwd=ROOT, capture_output=True,
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
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


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


def test_the_graph_page_keeps_the_lines_pane_in_view_and_anchors_below_the_bars(gpt2, browser):
    _logs, out = gpt2
    model = _model_file(out, "gpt2")
    page = browser.open(out / "graphs" / "log0-g1.html")
    assert page.locator(".srcfile h3").first.get_attribute("title") == model
    page.locator('.srcfile[data-file="0"] .sl.has').first.click()
    assert "forward ops" in page.inner_text("#fx-line")
    page.mouse.wheel(0, 4000)  # the files scroll on: the pane stays
    page.wait_for_timeout(200)
    assert page.evaluate("scrollY") > 1000
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
