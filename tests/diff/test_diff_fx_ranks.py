"""The diff under ThunderFX (a graph break added: matched by Dynamo graph and piece) and across
two ranks (torchrun, gloo: one rank's line changed), on real runs of tests/support/diff_program.py."""

from __future__ import annotations

import re

import pytest
from diff_program import line_of

from provenance.diff.compare import compare
from provenance.diff.read import read_side

pytestmark = pytest.mark.slow  # real Thunder runs in subprocesses (made once per session)


@pytest.fixture(scope="module")
def fx(diff_logs):
    return [read_side(str(p)) for p in diff_logs("fx", "fx_break")]


@pytest.fixture(scope="module")
def ranks(diff_logs):
    return [read_side(str(p)) for p in diff_logs("ranks", "ranks_relu1")]


def test_a_thunderfx_graph_break_added_is_named_at_its_line(fx):
    a, b = fx
    assert {c.fn for c in a.compiles} == {"[0/0] thunder_0"}  # one Dynamo graph, one Thunder piece
    diff = compare(a, b)
    (brk,) = [c for c in diff.changes if c.title.startswith("graph break added")]
    assert brk.title == f"graph break added: diff_program.py:{line_of('break')}"
    assert any("print" in d for d in brk.details), brk.details
    graphs = [c.title for c in diff.changes if c.title.startswith("Dynamo graph")]
    assert "Dynamo graph [1/0] added" in graphs, graphs
    # the piece before the break is matched by graph and piece: its lines after the break left it
    assert [(x.fn, y.fn) for x, y in diff.matched] == [("[0/0] thunder_0", "[0/0] thunder_0")]
    (added,) = diff.added
    assert added.fn == "[1/0] thunder_0"
    removed = {re.match(r"line removed: (\S+?:\d+)", c.title) for c in diff.changes if c.kind == "line"}
    assert {f"diff_program.py:{line_of(m)}" for m in ("fc2", "out")} <= {m.group(1) for m in removed if m}


def test_two_ranks_are_matched_rank_by_rank_and_only_rank_1_changed(ranks):
    a, b = ranks
    assert a.model.ranks == b.model.ranks == ["rank 0", "rank 1"]
    diff = compare(a, b)
    assert sorted(x.rank for x, _ in diff.matched) == [0, 1] and all(x.rank == y.rank for x, y in diff.matched)
    changed = [c for c in diff.changes if c.kind == "line" and (c.ops["added"] or c.ops["removed"])]
    assert [c.title.split(": ")[0] for c in changed] == [f"diff_program.py:{line_of('act')}"]
    assert changed[0].compile.endswith("rank 1")
    assert [c for c in diff.significant if c.kind == "line"][0] is changed[0]  # the first line named
    assert not [c for c in diff.changes if c.compile and c.compile.endswith("rank 0") and c.kind in ("line", "compile")
                and c.unit == "ops"]
