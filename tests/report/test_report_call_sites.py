"""The index's call-site trie: test runners' and launchers' frames are not the user's (capture
leaves them out; an older log's fold into one line), and the chain of frames every compile
shares folds into one collapsed line (issue 25).

A real log of a Thunder program run by pytest; an older log's stacks (with pytest's frames
marked as the user's) written by hand (tests/support/report_logs.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import report_logs
from paths import ROOT

from provenance.cli import main

PROGRAM = '''
import thunder, torch

def compile_one(fn):
    return thunder.jit(fn)(torch.ones(3))

def train():
    compile_one(lambda x: x.sin())
    compile_one(lambda x: x * 2 + 1)

def run_all():
    train()

def test_compiles():
    run_all()
'''


def _trie(index: str) -> str:
    """The call-site section of index.html, its compile links and whitespace squeezed out."""
    section = index[index.index('class="trie"'):index.index("</section>", index.index('class="trie"'))]
    return re.sub(r"\s+", " ", re.sub(r'<a class="cref.*?</a>', "", section))


def _summaries(trie: str) -> list[str]:
    """Each line of the trie (a summary), as text, outermost first."""
    return [re.sub(r"<[^>]+>", "", s).strip() for s in re.findall(r"<summary[^>]*>(.*?)</summary>", trie)]


def test_a_pytest_run_logs_none_of_pytest_and_its_common_frames_fold(tmp_path):
    (tmp_path / "test_program.py").write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THUNDER_TRACE", "PYTEST_"))}
    env.update(THUNDER_TRACE=str(tmp_path / "logs"), PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_program.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (log,) = (tmp_path / "logs").glob("*.jsonl")
    starts = [r for r in map(orjson.loads, log.read_bytes().splitlines()) if r["type"] == "compile_start"]
    assert len(starts) == 2
    for start in starts:  # pytest's ~30 frames (pluggy's hooks, _pytest's runner) are no user code
        files = [f[0] for f in start["call_stack"] + start["jit_stack"]]
        assert files and all(f.endswith("test_program.py") for f in files), files
        assert [f[2] for f in start["call_stack"]][:3] == ["test_compiles", "run_all", "train"]

    out = tmp_path / "report"
    assert main(["report", str(log), "-o", str(out), "--no-browser"]) == 0
    trie = _trie((out / "index.html").read_text())
    lines = _summaries(trie)
    # test_compiles and run_all: every compile's; train's two lines are where they part
    assert lines[0] == "2 frames common to every compile (test_program.py) 2", lines
    assert lines[1] == "the 2 frames, outermost first", lines
    assert lines[2] == "test_program.py:8 train compile_one(lambda x: x.sin()) 1", lines
    assert [x for x in lines if " train " in x] == [
        lines[2], "test_program.py:9 train compile_one(lambda x: x * 2 + 1) 1"]
    assert "test_compiles" in trie and 'class="folded"' in trie  # the folded frames, one click away
    assert "site-packages" not in trie and "pluggy" not in trie


def _old_log(tmp_path: Path, branch: bool = True) -> Path:
    """Two compiles of a log whose writer took pytest's frames for the user's: 4 runner frames,
    then the test file; the compiles part at the test's two lines (with `branch`), or the
    second has no runner frames at all."""
    site = "/opt/venv/lib/python3.11/site-packages"
    runner = [report_logs.frame(9, "raise SystemExit(_console_main())", f"{site}/pytest/__main__.py", "<module>"),
              report_logs.frame(197, "return self._hookexec(", f"{site}/pluggy/_callers.py", "HookCaller.__call__"),
              report_logs.frame(184, "item.runtest()", f"{site}/_pytest/runner.py", "pytest_runtest_call"),
              report_logs.frame(187, "result = testfunction(**testargs)", f"{site}/_pytest/python.py",
                                "pytest_pyfunc_call")]
    first = report_logs.records()
    second = report_logs.records(compile_id=2)[1:-1]
    test = "/home/u/tests/test_model.py"
    first[1]["call_stack"] = [*runner, report_logs.frame(5, "jm(x)", test, "test_model")]
    second[0]["call_stack"] = [*(runner if branch else []), report_logs.frame(7, "jm(y)", test, "test_model")]
    first[-1]["compiles"] = [1, 2]
    return report_logs.write(tmp_path / "logs" / "a.jsonl", [*first[:-1], *second, first[-1]])


def test_an_older_logs_runner_frames_fold_into_one_line(tmp_path):
    out = tmp_path / "report"
    assert main(["report", str(_old_log(tmp_path)), "-o", str(out), "--no-browser"]) == 0
    lines = _summaries(_trie((out / "index.html").read_text()))
    assert lines == ["4 frames common to every compile (pytest, pluggy, _pytest) 2", "the 4 frames, outermost first",
                     "test_model.py:5 test_model jm(x) 1", "test_model.py:7 test_model jm(y) 1"], lines

    out = tmp_path / "report2"  # not every compile's: the runner's frames fold alone
    assert main(["report", str(_old_log(tmp_path / "b", branch=False)), "-o", str(out), "--no-browser"]) == 0
    lines = _summaries(_trie((out / "index.html").read_text()))
    assert lines == ["4 frames of test runners and launchers (pytest, pluggy, _pytest) 1",
                     "the 4 frames, outermost first", "test_model.py:5 test_model jm(x) 1",
                     "test_model.py:7 test_model jm(y) 1"], lines


def test_the_folded_line_opens_on_a_click_in_chromium(tmp_path, browser):
    """The folded line is one line of the trie; its frames stay collapsed until it is clicked,
    and the compiles under it are shown at once."""
    out = tmp_path / "report"
    assert main(["report", str(_old_log(tmp_path)), "-o", str(out), "--no-browser"]) == 0
    errors = len(browser.errors)
    page = browser.open(out / "index.html")
    fold = page.locator(".trie .fold")
    assert fold.count() == 1 and fold.inner_text() == "4 frames common to every compile (pytest, pluggy, _pytest)"
    frames = page.locator(".trie details.folded ol.stack li")
    assert frames.count() == 4 and not frames.first.is_visible()
    assert page.locator(".trie .cref").count() == 2 and page.locator(".trie .cref").first.is_visible()
    page.locator(".trie details.folded > summary").click()
    assert frames.first.is_visible() and "runner.py:184" in page.locator(".trie details.folded").inner_text()
    page.close()
    assert browser.errors[errors:] == []
