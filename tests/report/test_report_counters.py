"""Cache hits, counted per compile and per function, agree everywhere (issue 21): Thunder's own
counters, the log's `calls` record (`compile_hits`, schema 1.6), compile_directory.json, the index
(each compile's row and chip: its own hits; the totals: all compiles) and each compile's page
(its own hits, and its function's over all its compiles). A real log of Thunder, in process."""

from __future__ import annotations

import re

import orjson
import pytest
import thunder
import torch

import provenance
from provenance.cli import main
from provenance.report.read.log_file import Log

SHAPES = [3, 3, 5, 5, 5, 3, 7]  # compile 1 (batch 3): 2 hits, compile 2 (batch 5): 2 hits, compile 3: none


@pytest.mark.parametrize("profile", [0, 2], ids=["plain", "profiled"])
def test_cache_hits_agree_per_compile_and_per_function(tmp_path, capsys, profile):
    provenance.enable(tmp_path / "logs", profile=profile)
    try:
        jm = thunder.jit(torch.nn.Linear(4, 2))
        for n in SHAPES:
            jm(torch.randn(n, 4))
        once = thunder.jit(lambda x: x * 2)
        once(torch.ones(2))
    finally:
        provenance.disable()
    hits, calls = thunder.cache_hits(jm), len(SHAPES)
    assert (hits, thunder.cache_misses(jm)) == (4, 3)

    (linear, lam) = sorted((r.data for r in Log(tmp_path / "logs") if r.type == "calls"), key=lambda r: -r["calls"])
    assert (linear["calls"], linear["cache_hits"], linear["compile_hits"]) == (calls, hits, [2, 2, 0])
    assert (lam["compiles"], lam["cache_hits"], lam["compile_hits"]) == ([4], 0, [0])

    out = tmp_path / "out"
    assert main(["report", str(tmp_path / "logs"), "-o", str(out), "--no-browser"]) == 0, capsys.readouterr().err
    entries = orjson.loads((out / "compile_directory.json").read_bytes())["compiles"]
    assert [(e["compile"], e["compile_hits"], e["cache_hits"], e["calls"]) for e in entries] == [
        (1, 2, 4, 7), (2, 2, 4, 7), (3, 0, 4, 7), (4, 0, 0, 1)]

    index = (out / "index.html").read_text()
    assert f"{calls + 1} calls &middot; {hits} cache hits (all compiles)<" in index
    rows = re.findall(r"<tr>.*?</tr>", index.split("<h2>Compiles</h2>")[1].split("<tbody>")[1], re.S)
    assert [re.findall(r">(\d+) cache hits? \(this compile\)<", row) for row in rows] == [["2"], ["2"], [], []]
    chips = index.split("<h2>Call sites</h2>")[1].split("<h2>Compiles</h2>")[0]
    assert re.findall(r'class="hits"[^>]*>(\d+) hits?<', chips) == ["2", "2"]

    for entry in entries:
        page = (out / entry["pages"]["compile"]).read_text()
        card = page.split("<!--@@thunder-trace-report:cache@@-->")[1].split("<!--")[0]
        number = re.search(r'<div class="num">(\d+)</div><div>cache hits \(this compile\)</div>', card)
        assert number and int(number.group(1)) == entry["compile_hits"], card
        if entry["fn"].endswith("Linear"):
            assert f"the function, all 3 compiles: {hits} hits of {calls} calls" in card
        else:
            assert "the function's only compile, of its 1 call" in card
        assert page.rstrip().endswith("</html>")  # the card was written in place: the page is whole
