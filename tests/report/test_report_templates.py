"""The report's templates compiled at install time (provenance/report/render/templating.py, hatch_build.py):
used when fresh (no template is compiled in the report process), ignored when stale (a template
whose source changed, another Python, another jinja2 or environment), and the report is the same
bytes with them and without them.

The tests that need the installed file fail (never skip) when it is missing: the build hook runs
at install (`pip install -e .`, which ./dev does); a checkout used without installing gets it with
`python provenance/report/render/templating.py`.
"""

from __future__ import annotations

import io
import marshal
import pickle
import sys
from pathlib import Path

import jinja2
import pytest
import real_log
import report_logs

from provenance.cli import main
from provenance.report.incremental import STATE_DIR
from provenance.report.render import html, templating

COMPILED = Path(templating.__file__).with_name(templating.COMPILED)
TEMPLATES = Path(templating.__file__).with_name("templates")
NAMES = sorted(p.name for p in TEMPLATES.glob("*.html"))


def _installed() -> dict:
    """The installed file's contents; fails the test, saying why, when the report would not use it."""
    if not COMPILED.is_file():
        pytest.fail(f"{COMPILED} is missing: the build hook (hatch_build.py) did not run. Install the package "
                    "(./dev test, or pip install -e .), or in a checkout used without installing run "
                    "`python provenance/report/render/templating.py`")
    data = marshal.loads(COMPILED.read_bytes())
    env = html.environment([])
    if data["fingerprint"] != templating.fingerprint(env):
        pytest.fail(f"{COMPILED} was compiled for another environment (by jinja2 {data.get('jinja2')}, Python "
                    f"{data.get('python')}; this is jinja2 {jinja2.__version__}): reinstall the package so that its "
                    "build uses the jinja2 it runs with")
    assert isinstance(env.bytecode_cache, templating.PackagedTemplates)
    stale = []
    for name, code in sorted(data["templates"].items()):
        f = io.BytesIO(code)
        f.read(len(jinja2.bccache.bc_magic))
        source = env.loader.get_source(env, name)[0]
        if pickle.load(f) != env.bytecode_cache.get_source_checksum(source):
            stale.append(name)
    if stale:
        pytest.fail(f"{', '.join(stale)} changed since {COMPILED} was made (reports compile them from source: same "
                    "pages, slower): reinstall (pip install -e .), or run "
                    "`python provenance/report/render/templating.py`")
    return data


@pytest.fixture
def compiled() -> dict:
    return _installed()


@pytest.fixture
def compiles(monkeypatch) -> list[str]:
    """The names of the templates jinja2 compiles from here on."""
    names: list[str] = []
    compile_ = jinja2.Environment.compile

    def counted(self, source, name=None, filename=None, raw=False, defer_init=False):
        names.append(name)
        return compile_(self, source, name, filename, raw, defer_init)

    monkeypatch.setattr(jinja2.Environment, "compile", counted)
    return names


@pytest.fixture
def no_compiler(monkeypatch) -> None:
    """jinja2's parser and compiler raise: every template must come compiled."""
    def refuse(self, source, name=None, *args, **kwargs):
        raise AssertionError(f"template {name} compiled in the report process")

    monkeypatch.setattr(jinja2.Environment, "compile", refuse)
    monkeypatch.setattr(jinja2.Environment, "_parse", refuse)


def _logs(directory: Path) -> Path:
    """A run whose report renders every template of the package: two ranks whose final forward
    traces differ (desync), a recompile, profiled calls, a failed compile, a ThunderFX graph."""
    r0 = report_logs.profiled(rank=0, why=True, fx=True)
    r1 = report_logs.records(rank=1)
    for record in r1:
        if record["type"] == "trace" and record["list"] == "computation" and record["index"] == 1:
            record["ops"][0][2] = "div"
            record["python"] = record["python"].replace("mul", "div")
    end = next(i for i, r in enumerate(r0) if r["type"] == "compile_end")  # a memory timeline (memory_section.html)
    r0.insert(end, {"type": "memory", "compile": r0[end]["compile"], "trace": "forward", "list": "computation",
                    "index": None, "inputs": 64, "start": 0, "ops": [[1, "mul", None, 32, 0, 32]],
                    "blocks": [["t0", 32, None, 1, None]], "saved": [["t0", 32, None, False]], "remat": []})
    failed = report_logs.records(rank=1, compile_id=2, fn="other", error={})
    r1[-1:-1] = [r for r in failed[1:-1] if r["type"] != "prov"]
    report_logs.write(directory / "r0.jsonl", r0)
    report_logs.write(directory / "r1.jsonl", r1)
    return directory


def _report(logs: Path, out: Path) -> dict[str, bytes]:
    assert main(["report", str(logs), "-o", str(out), "--no-browser", "-j", "1"]) == 0
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and STATE_DIR not in p.relative_to(out).parts}  # the state: the build's memory


def test_every_template_is_compiled_at_install(compiled):
    assert sorted(compiled["templates"]) == NAMES
    assert compiled["python"] == list(sys.version_info[:2])


def test_every_template_loads_without_the_compiler(compiled, no_compiler):
    env = html.environment([])
    for name in NAMES:
        assert env.get_template(name).name == name


def test_a_report_compiles_no_template_and_is_the_same_bytes_without_the_compiled_ones(
        compiled, tmp_path, monkeypatch):
    logs = _logs(tmp_path / "logs")
    loaded: set[str] = set()
    load = templating.PackagedTemplates.load_bytecode

    def recorded(self, bucket):
        loaded.add(bucket.key)
        load(self, bucket)

    with monkeypatch.context() as patch:
        patch.setattr(templating.PackagedTemplates, "load_bytecode", recorded)
        for method in ("compile", "_parse"):
            patch.setattr(jinja2.Environment, method, lambda *a, **k: pytest.fail("a template was compiled"))
        with_compiled = _report(logs, tmp_path / "compiled")
    assert sorted(loaded) == NAMES  # the log renders every template

    monkeypatch.setattr(html, "load_compiled", lambda env: None)
    from_source = _report(logs, tmp_path / "source")
    assert with_compiled.keys() == from_source.keys()
    assert [name for name in with_compiled if with_compiled[name] != from_source[name]] == []


@pytest.mark.slow
def test_a_real_run_s_report_is_the_same_bytes_without_the_compiled_templates(compiled, tmp_path, monkeypatch):
    """A THUNDER_TRACE log of Thunder itself (tests/support/real_log.py: forward and backward, a scope, a
    recompile, a failed compile, profiled calls, ThunderFX), reported with no template compiled,
    then with all of them compiled."""
    logs = real_log.write(tmp_path / "logs").parent
    with monkeypatch.context() as patch:
        for method in ("compile", "_parse"):
            patch.setattr(jinja2.Environment, method, lambda *a, **k: pytest.fail("a template was compiled"))
        with_compiled = _report(logs, tmp_path / "compiled")
    monkeypatch.setattr(html, "load_compiled", lambda env: None)
    from_source = _report(logs, tmp_path / "source")
    assert any(name.startswith("compiles/") for name in from_source) and "failures.html" in from_source
    assert with_compiled.keys() == from_source.keys()
    assert [name for name in with_compiled if with_compiled[name] != from_source[name]] == []


def test_a_template_changed_after_install_renders_from_its_source(compiled, compiles, tmp_path, monkeypatch):
    get_source = jinja2.PackageLoader.get_source

    def edited(self, environment, template):
        source, filename, uptodate = get_source(self, environment, template)
        if template == "base.html":
            source += "<!-- edited after install -->\n"
        return source, filename, uptodate

    monkeypatch.setattr(jinja2.PackageLoader, "get_source", edited)
    out = tmp_path / "out"
    assert main(["report", str(_logs(tmp_path / "logs")), "-o", str(out), "--no-browser", "-j", "1"]) == 0
    assert compiles == ["base.html"]
    assert (out / "index.html").read_text().endswith("</html>\n<!-- edited after install -->")


def test_a_page_template_from_outside_the_package_is_compiled_from_source(compiled, compiles, tmp_path):
    (tmp_path / "hello.html").write_text('{% extends "base.html" %}{% block main %}hello{% endblock %}')
    env = html.environment([], [str(tmp_path)])
    assert env.get_template("hello.html").name == "hello.html"
    env.get_template("base.html")
    assert compiles == ["hello.html"]


@pytest.mark.parametrize("change", ["trim_blocks", "autoescape", "filter", "pass_context", "jinja2"])
def test_compiled_for_another_environment_is_not_used(change, monkeypatch):
    """The options that change compiled code, the filters and how they are called, jinja2's version."""
    reference = templating.fingerprint(html.environment([]))
    env = html.environment([])
    if change == "trim_blocks":
        env.trim_blocks = False
    elif change == "autoescape":
        env.autoescape = False
    elif change == "filter":
        env.filters["extra"] = str
    elif change == "pass_context":
        ms = env.filters["ms"]
        env.filters["ms"] = jinja2.pass_context(lambda context, value: ms(value))  # (it marks the function)
    else:
        monkeypatch.setattr(jinja2, "__version__", "3.0.0")
    assert templating.fingerprint(env) != reference
    assert templating.load_compiled(env, COMPILED) is None


def test_the_build_compiles_with_the_report_environment(tmp_path):
    """hatch_build.py's environment (html.py's filters replaced by stand-ins) is the report's, as
    far as compiled code can tell: what the build writes is used by a report. Needs no install."""
    target = tmp_path / templating.COMPILED
    templating.write_compiled(TEMPLATES, target)
    assert [p.name for p in tmp_path.iterdir()] == [templating.COMPILED]
    env = html.environment([])
    cache = templating.load_compiled(env, target)
    assert cache is not None and sorted(cache.templates) == NAMES
    with pytest.raises(ValueError, match="FILTER_NAMES"):
        templating.make_environment(jinja2.BaseLoader(), {"ms": str})


def test_code_compiled_by_another_python_or_missing_is_compiled_from_source(compiles, tmp_path):
    target = tmp_path / templating.COMPILED
    templating.write_compiled(TEMPLATES, target)
    data = marshal.loads(target.read_bytes())
    magic = jinja2.bccache.bc_magic
    other = (b"j2" + pickle.dumps(jinja2.bccache.bc_version, 2)
             + pickle.dumps((sys.version_info[0] << 24) | (sys.version_info[1] + 1), 2))  # the next Python's
    assert other != magic and len(other) == len(magic)
    assert data["templates"]["desync.html"].startswith(magic)
    data["templates"]["desync.html"] = other + data["templates"]["desync.html"][len(magic):]
    target.write_bytes(marshal.dumps(data))
    env = html.environment([])
    env.bytecode_cache = templating.load_compiled(env, target)
    compiles.clear()  # the build's
    for name in NAMES:
        env.get_template(name)
    assert compiles == ["desync.html"]

    assert templating.load_compiled(env, tmp_path / "missing") is None
    (tmp_path / "garbage").write_bytes(b"\x00not marshal")
    assert templating.load_compiled(env, tmp_path / "garbage") is None


def test_the_largest_cache_card_fits_its_slot():
    """A page's cache card is written into a fixed slot (cache_card.py) and overwritten in place at
    the end: the longest card (counts past 64 bits, written as floats) fits it, a longer one is refused."""
    from types import SimpleNamespace

    from provenance.report.render import cache_card

    big = float(2 ** 65)  # a sum of a log's counts past 64 bits (numbers.py: a float, not a failure)
    env = html.environment([])
    cards = [env.get_template("cache_card.html").render(c=SimpleNamespace(
        compile_hits=hits, fn_compiles=big, cache_hits=big, calls=big,
        cache=SimpleNamespace(misses=big, hits=big, calls=big)), final=final)
        for hits in (None, big) for final in (True, False)]
    for card in cards:
        assert str(big) in card
        slot = str(cache_card.slot(card)).encode()
        assert len(slot) == cache_card.SLOT_BYTES and slot.startswith(cache_card.MARK)
    with pytest.raises(ValueError, match="does not fit"):
        cache_card.slot("x" * cache_card.SLOT_BYTES)
