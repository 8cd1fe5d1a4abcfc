"""Recompile reasons: a call that misses the cache logs, for each cached entry, the check that
rejected it in the user's terms, and the report shows it (page, index hover, OpenTelemetry)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import orjson
import pytest
import thunder
import torch
from collecting import Collect

import provenance
from provenance.cli import main as report_main
from provenance.log import schema
from provenance.thunder import capture, emit, recompile

SCALE = 2


def scaled(tokens, scale):
    return tokens * scale * SCALE


def _line(marker: str) -> int:
    return next(n for n, text in enumerate(Path(__file__).read_text().splitlines(), 1) if text.endswith(marker))


def _logged(tmp_path: Path, run) -> list[dict]:
    with provenance.tracing(tmp_path / "logs"):
        run()
    (log,) = (tmp_path / "logs").glob("*.jsonl")
    return [orjson.loads(line) for line in log.read_bytes().splitlines()]


def _calls(jf) -> None:
    x = torch.randn(2, 16)
    jf(x, 2.0)
    jf(torch.randn(2, 8), 2.0)  # <-- shape change
    jf(x.double(), 2.0)  # <-- dtype change
    jf(x, 3.0)  # <-- value change
    jf(x, 3.0)  # a cache hit


@pytest.fixture(scope="module")
def shape_dtype_value(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("recompile")
    records = _logged(tmp, lambda: _calls(thunder.jit(scaled)))
    out = tmp / "report"
    assert report_main(["report", str(tmp / "logs"), "-o", str(out), "--no-browser"]) == 0
    return records, out


def _ids(records: list[dict]) -> list[int]:
    """The compile ids in the log (process-wide: other tests' compiles came first)."""
    return [r["compile"] for r in records if r["type"] == "compile_start"]


def test_shape_dtype_and_value_changes_are_logged_in_the_users_terms(shape_dtype_value):
    records, _ = shape_dtype_value
    c1, c2, c3, c4 = _ids(records)  # four compiles: the last call was a hit
    recompiles = [r for r in records if r["type"] == "recompile"]
    assert [r["compile"] for r in recompiles] == [c2, c3, c4]
    assert all(schema.problems(r) == [] for r in recompiles)
    shape, dtype, value = recompiles

    assert shape["reason"] == "tokens: shape [2, 16] \u2192 [2, 8]"
    (entry,) = shape["rejected"]
    assert entry["compile"] == c1 and entry["subject"] == "tokens"
    assert entry["changes"] == [["shape", "[2, 16]", "[2, 8]"]]
    assert entry["check"].startswith("check_tensor_metadata(tokens, (2, 16)")
    assert entry["error"].startswith("AssertionError: expected tensor with (2, 16)")  # Thunder's words, kept
    assert shape["call"][1] == _line("# <-- shape change") and shape["call"][0] == __file__

    # newest first, as Thunder tries them: compile 2's entry, then compile 1's
    assert [e["compile"] for e in dtype["rejected"]] == [c2, c1]
    assert dtype["rejected"][1]["reason"] == "tokens: dtype float32 \u2192 float64"
    assert dtype["rejected"][0]["changes"] == [["shape", "[2, 8]", "[2, 16]"], ["dtype", "float32", "float64"]]
    assert dtype["call"][1] == _line("# <-- dtype change")

    assert [e["compile"] for e in value["rejected"]] == [c3, c2, c1]
    assert value["rejected"][2]["reason"] == "scale: value 2.0 \u2192 3.0"
    assert value["rejected"][2]["check"] == "check_number_type_and_value(f0, 2.0)"
    assert value["call"][1] == _line("# <-- value change")


def test_the_compile_page_shows_the_reasons_links_and_prologue_diff(shape_dtype_value):
    records, out = shape_dtype_value
    c1, c2, c3, c4 = _ids(records)
    directory = orjson.loads((out / "compile_directory.json").read_bytes())
    by_id = {c["compile"]: c for c in directory["compiles"]}
    assert by_id[c1]["recompile_reason"] is None
    assert by_id[c2]["recompile_reason"] == "tokens: shape [2, 16] \u2192 [2, 8]"
    # c3's entry, tried first: both inputs changed, both named
    assert by_id[c4]["recompile_reason"] == "tokens: dtype float64 \u2192 float32; scale: value 2.0 \u2192 3.0"

    page = (out / by_id[c2]["pages"]["compile"]).read_text()
    why = page[page.index('id="why"'):page.index("</section>", page.index('id="why"'))]
    assert "Why it compiled again" in why
    assert re.search(r"<code>tokens</code></b>\s*shape <code>\[2, 16\]</code> &rarr; <code>\[2, 8\]</code>", why)
    assert f'<a href="log0-c{c1}.html">compile {c1}</a>' in why  # the compile it diverged from
    assert f"test_recompile.py:{_line('# <-- shape change')}" in why
    # the prologue diff: compile 1's check against this one's
    assert "<span class=\"u-rem\">-  check_tensor_metadata(tokens, (2, 16), &#39;cpu&#39;, torch.float32, False)" in why
    assert "<span class=\"u-add\">+  check_tensor_metadata(tokens, (2, 8), &#39;cpu&#39;, torch.float32, False)" in why

    page4 = (out / by_id[c4]["pages"]["compile"]).read_text()
    assert "value <code>2.0</code> &rarr; <code>3.0</code>" in page4
    assert all(f'<a href="log0-c{n}.html">compile {n}</a>' in page4 for n in (c1, c2, c3))

    index = (out / "index.html").read_text()  # the "recompiled" chip's hover: a title, no script needed
    chip = re.search(rf'<a class="cref [^"]*rc" href="compiles/log0-c{c2}.html" title="([^"]*)"', index)
    assert chip and chip.group(1).endswith("recompiled: tokens: shape [2, 16] \u2192 [2, 8]")
    assert ('title="recompile 3 of this function: tokens: dtype float64 \u2192 float32; '
            'scale: value 2.0 \u2192 3.0"') in index


class Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.k = 3

    def forward(self, x, *, bias=0.0):
        return self.lin(x) * self.k * SCALE + bias


def _closure(k):
    def times_k(x):
        return x * k

    return times_k


def test_module_attributes_globals_closures_kwargs_and_grad_mode_are_named():
    global SCALE
    collect = Collect()
    provenance.enable()
    try:
        provenance.add_exporter(collect)
        jm = thunder.jit(Scaled())
        x = torch.randn(2, 4)
        jm(x)
        jm.eval()
        jm(x)  # self.training
        jm._model.k = 4
        jm(x)  # self.k
        SCALE = 3
        jm(x)  # global SCALE
        jm(x, bias=1.0)  # a keyword argument
        with torch.no_grad():
            jm(x, bias=1.0)
        jc = thunder.jit(_closure(2))
        jc(x)
        jc.__wrapped__.__closure__[0].cell_contents = 5
        jc(x)
    finally:
        SCALE = 2
        provenance.disable()
    reasons = [e["reason"] for e in collect.events if e["type"] == "recompile"]
    assert reasons == [
        "self.training: value True \u2192 False",
        "self.k: value 3 \u2192 4",
        "global SCALE: value 2 \u2192 3",
        "keyword arguments: count 0 \u2192 1 (bias)",
        "torch.is_grad_enabled(): value True \u2192 False",
        "closure variable k: value 2 \u2192 5",
    ]


def test_a_cache_hit_runs_no_prologue_of_ours_and_thunders_figures_are_unchanged(monkeypatch):
    ran, timers = [], []
    rejections, recompiled = recompile.rejections, emit.recompiled
    monkeypatch.setattr(recompile, "rejections", lambda *a: ran.append(1) or rejections(*a))

    def watched(state_, compile_data, stats, *args):  # Thunder's prologue timers, before and after ours
        timers.append((stats.last_prologue_execution_start, stats.last_prologue_execution_stop))
        recompiled(state_, compile_data, stats, *args)
        timers.append((stats.last_prologue_execution_start, stats.last_prologue_execution_stop))

    monkeypatch.setattr(emit, "recompiled", watched)
    with provenance.tracing():
        provenance.add_exporter(Collect())
        jf = thunder.jit(scaled)
        x = torch.randn(2, 4)
        jf(x, 2.0)
        jf(torch.randn(3, 4), 2.0)  # a miss with an entry in the cache: its prologue runs again, once
        for _ in range(5):
            jf(x, 2.0)  # hits: nothing of ours runs
        stats = thunder.compile_stats(jf)
    assert ran == [1]
    assert (stats.cache_hits, stats.cache_misses) == (5, 2)  # as Thunder counts without us
    assert len(timers) == 4 and timers[0::2] == timers[1::2]  # two compiles; the second re-ran a prologue


def test_a_fault_reading_the_reasons_warns_once_and_the_program_runs_on(monkeypatch):
    x = torch.randn(2, 4, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught, provenance.tracing():
        warnings.simplefilter("always")
        monkeypatch.setattr(capture.ACTIVE, "fault_injection", "recompile")
        collect = Collect()
        provenance.add_exporter(collect)
        jf = thunder.jit(scaled)
        first = jf(x, 2.0)  # no entry yet: the hook does not run
        y = torch.ones(3, 4, requires_grad=True)
        second = jf(y, 2.0)
        second.sum().backward()
    ours = [str(w.message) for w in caught if "thunder-provenance" in str(w.message)]
    assert len(ours) == 1 and "hook 'recompile'" in ours[0] and "disabled for this compile" in ours[0]
    torch.testing.assert_close(first, x * 2.0 * SCALE)
    torch.testing.assert_close(second, torch.ones(3, 4) * 2.0 * SCALE)
    torch.testing.assert_close(y.grad, torch.full((3, 4), 2.0 * SCALE))
    assert not [e for e in collect.events if e["type"] == "recompile"]


def test_otel_compile_span_carries_the_reason():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from exporters.otel import OtelExporter

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    from opentelemetry.sdk.metrics import MeterProvider

    exporter = OtelExporter(provider, MeterProvider())
    with provenance.tracing():
        provenance.add_exporter(exporter)
        jf = thunder.jit(scaled)
        jf(torch.ones(2, 4), 2.0)
        jf(torch.ones(2, 4), 3.0)
    compiles = sorted((s for s in spans.get_finished_spans() if s.name == "thunder.compile scaled"),
                      key=lambda s: s.start_time)
    assert len(compiles) == 2 and "thunder.recompile.reason" not in compiles[0].attributes
    attributes = compiles[1].attributes
    assert attributes["thunder.recompile.reason"] == "scale: value 2.0 \u2192 3.0"
    assert list(attributes["thunder.recompile.reasons"]) == ["scale: value 2.0 \u2192 3.0"]
    assert attributes["thunder.recompile.diverged_from"] == attributes["thunder.compile_id"] - 1


class _Loss(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(16, 4)

    def forward(self, idx, targets):
        return torch.nn.functional.cross_entropy(self.emb(idx).view(-1, 4), targets.view(-1))


def test_every_changed_input_is_named(tmp_path):
    """The prologue raises at its first failed check; the others are read too: a sequence-length
    change names `targets` as well as `idx`, on the record and on the page."""
    jm = thunder.jit(_Loss())

    def run():
        for length in (8, 4):
            jm(torch.randint(0, 4, (2, length)), torch.randint(0, 4, (2, length)))

    records = _logged(tmp_path, run)
    (rc,) = [r for r in records if r["type"] == "recompile"]
    assert schema.problems(rc) == []
    assert rc["reason"] == "idx: shape [2, 8] \u2192 [2, 4]; targets: shape [2, 8] \u2192 [2, 4]"
    (entry,) = rc["rejected"]
    assert entry["subject"] == "idx"  # the check that raised
    assert entry["inputs"] == [{"subject": "idx", "changes": [["shape", "[2, 8]", "[2, 4]"]]},
                               {"subject": "targets", "changes": [["shape", "[2, 8]", "[2, 4]"]]}]
    out = tmp_path / "report"
    assert report_main(["report", str(tmp_path / "logs"), "-o", str(out), "--no-browser"]) == 0
    directory = orjson.loads((out / "compile_directory.json").read_bytes())
    (second,) = [c for c in directory["compiles"] if c["recompile_reason"]]
    why = (out / second["pages"]["compile"]).read_text()
    assert re.search(r"<code>targets</code></b>\s*shape <code>\[2, 8\]</code> &rarr; <code>\[2, 4\]</code>", why)


class Counted:
    """A user object the jitted function reads: each read of its property is user code."""

    reads = 0

    def __init__(self, t: torch.Tensor, n: int) -> None:
        self.t, self._n = t, n

    @property
    def n(self) -> int:
        Counted.reads += 1
        return self._n


def _reading(box, other):
    return box.t * box.n + other.n


def test_explaining_a_recompile_runs_no_user_code_again(tmp_path):
    """Thunder's prologue reads the user's objects on every call (here, a property); a
    recompile's reasons come from what those prologues raised, so tracing calls user code exactly
    as often as the untraced program."""

    def run() -> int:
        Counted.reads = 0
        jf = thunder.jit(_reading)
        t = torch.ones(2)
        for n in (2, 3, 2, 4, 3):  # new values recompile, known ones hit
            torch.testing.assert_close(jf(Counted(t, n), Counted(t, n + 1)), t * n + n + 1)
        return Counted.reads

    untraced = run()
    events: list[dict] = []

    def traced() -> None:
        events.append(run())

    records = _logged(tmp_path, traced)
    assert events == [untraced] and untraced > 0
    recompiles = [r for r in records if r["type"] == "recompile"]
    assert len(recompiles) == 2  # n = 3, then n = 4
    first = recompiles[0]["rejected"]
    assert len(first) == 1 and "3" in first[0]["reason"] and first[0]["reason"] != first[0]["error"], first
    assert all("not recorded" not in e["reason"] for r in recompiles for e in r["rejected"])
