"""The report's structure: pages come from the registry (pages.py), the JSON for the pages' script
has the keys report.js reads, and the report's modules import each other without a cycle.

Hand-written logs (tests/support/report_logs.py), the command run in-process: no Thunder, no browser.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
import report_logs

from provenance.cli import main
from provenance.report.model import ProvInfo
from provenance.report.render import pages

REPORT = Path(pages.__file__).parent

HELLO = """{% extends "base.html" %}
{% block title %}hello{% endblock %}
{% block main %}
<h1 id="hello">{{ greeting }}: {{ m.totals.compiles }} compile{% for c in m.compiles %} {{ c.fn }}{% endfor %}</h1>
{% endblock %}
"""


def build(tmp_path: Path, name: str, *args: str) -> Path:
    log = tmp_path / "logs" / "a.jsonl"
    if not log.exists():
        report_logs.write(log, report_logs.records())
    out = tmp_path / name
    assert main(["report", str(log), "-o", str(out), "--no-browser", *args]) == 0
    return out


@pytest.fixture
def registry(monkeypatch):
    """The registered pages, restored after the test."""
    monkeypatch.setattr(pages, "PAGES", list(pages.PAGES))
    return pages


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_registered_page_is_written_and_linked_from_every_page(tmp_path, registry, jobs):
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "hello.html").write_text(HELLO)

    @registry.register
    class HelloPage(pages.Page):
        file = template = "hello.html"
        title = "Hello"
        templates = str(tmp_path / "templates")

        @classmethod
        def context(cls, model):
            return {**super().context(model), "greeting": "compiled"}

    out = build(tmp_path, f"out{jobs}", "-j", jobs)
    assert '<h1 id="hello">compiled: 1 compile report_model.Model</h1>' in (out / "hello.html").read_text()
    directory = orjson.loads((out / "compile_directory.json").read_bytes())
    assert directory["files"]["hello"] == "hello.html"
    (entry,) = directory["compiles"]
    for page, root in [(out / p.file, "") for p in pages.PAGES] + [(out / p, "../") for p in entry["pages"].values()]:
        nav = re.search(r"<nav>(.*?)</nav>", page.read_text(), re.S).group(1)  # built in a worker with -j 2
        assert f'<a href="{root}hello.html">Hello</a>' in nav, page


def test_the_run_pages_are_the_registered_ones(tmp_path, registry):
    assert [p.file for p in pages.PAGES] == ["index.html", "failures.html", "graphs.html", "distributed.html",
                                             "time.html", "memory.html"]
    registry.PAGES.remove(pages.FailuresPage)
    out = build(tmp_path, "out")
    assert not (out / "failures.html").exists()
    assert (out / "index.html").is_file() and (out / "distributed.html").is_file()
    nav = re.search(r"<nav>(.*?)</nav>", (out / "index.html").read_text(), re.S).group(1)
    assert "distributed.html" in nav and "failures.html" not in nav
    assert "failures" not in orjson.loads((out / "compile_directory.json").read_bytes())["files"]


def test_the_script_data_has_every_key_report_js_reads(tmp_path):
    """The one place compact keys are made (ProvInfo.compact) agrees with the script."""
    out = build(tmp_path, "out")
    script = (REPORT / "templates" / "report.js").read_text()
    read = set(re.findall(r"\binfo\.(\w+)", script))
    assert {"h", "k", "mem"} <= read  # the regex still finds what the script reads
    entry = orjson.loads((out / "compile_directory.json").read_bytes())["compiles"][0]
    for page in entry["pages"].values():  # both load the compile's records (output.PROVS_SUFFIX)
        (src,) = re.findall(r'<script src="([^"/]+\.provs\.js)"></script>', (out / page).read_text())
        text = (out / page).parent.joinpath(src).read_text()
        data = orjson.loads(text.removeprefix("self.thunderTraceProvs = ").removesuffix(";\n"))
        infos = data["provs"].values()
        assert infos and all(read <= info.keys() for info in infos), read - set().union(*infos)
        frames = [f for info in infos for f in [*info["st"], *([info["f"]] if info["f"] else [])]]
        assert frames and all(str(f[0]) in data["paths"] and len(f) == 5 for f in frames)
    assert set(ProvInfo.__dataclass_fields__) - {"_compact", "script_json"} == {
        "id", "kind", "header", "module", "module_type", "user_frame", "module_frame", "stack", "lineage", "role",
        "role_color", "scope", "derived_from", "members"}  # a new field needs its compact key (and report.js) too
