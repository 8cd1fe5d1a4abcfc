"""The writer's promises under interruption and odd nesting: an id is referenced only once its
record is written (a Ctrl-C mid-write leaves none dangling), the writer nests records and spans no
deeper than the reader follows, and an empty THUNDER_TRACE_PROFILE means off."""

from __future__ import annotations

import contextlib
import warnings

import pytest
import thunder
import torch

import provenance
from provenance.cli import main
from provenance.log.events import MAX_NESTING
from provenance.report.read.log_file import Log


class Interrupting:
    """An exporter that raises KeyboardInterrupt (what Ctrl-C raises) at the first event of a type."""

    name, needs_trace_text = "interrupting", False

    def __init__(self, on: str) -> None:
        self.on, self.fired = on, False

    def emit(self, event) -> None:
        if event["type"] == self.on and not self.fired:
            self.fired = True
            raise KeyboardInterrupt

    def close(self) -> None:
        pass

    def stats(self) -> dict:
        return {}


def _resolves(directory, tmp_path) -> None:
    """Every id the log references is written before it: the report is clean under --strict."""
    log = Log(directory)
    records = list(log)
    assert log.bad == [], log.bad
    assert main(["report", str(directory), "-o", str(tmp_path / "out"), "--no-browser", "--strict"]) == 0
    ops = [op for r in records if r.type == "trace" and "ops" in r.data for op in r["ops"]]
    assert ops and all(op[4] is None or log.files[0].provenance(op[4]) is not None for op in ops)


@pytest.mark.parametrize("first", ["log", "interrupter"])
def test_ctrl_c_while_a_record_is_written_leaves_no_id_dangling(tmp_path, first):
    """Ctrl-C lands while a provenance record is being handed to the exporters: after the log got it
    (the interrupter comes second) or before (first). Either way the id is not kept, the next
    compile writes the record again, and every reference in the log resolves."""
    interrupter = Interrupting("prov")
    if first == "interrupter":
        provenance.add_exporter(interrupter)
        provenance.enable(tmp_path / "logs")
    else:
        provenance.enable(tmp_path / "logs")
        provenance.add_exporter(interrupter)
    try:
        jf = thunder.jit(lambda x: torch.sin(x) * 2 + 1)
        with pytest.raises(KeyboardInterrupt):
            jf(torch.ones(3))
        assert interrupter.fired
        jg = thunder.jit(lambda x: torch.sin(x) * 2 + 1)  # the same line's records, written this time
        torch.testing.assert_close(jg(torch.ones(3)), torch.sin(torch.ones(3)) * 2 + 1)
    finally:
        provenance.remove_exporter(interrupter)
        provenance.disable()
    _resolves(tmp_path / "logs", tmp_path)


def test_scopes_nested_deeper_than_the_reader_follows_are_written_as_it_reads_them(tmp_path):
    depth = MAX_NESTING + 36
    provenance.enable(tmp_path / "logs")
    try:
        jf = thunder.jit(lambda x: torch.cos(x) + 1)
        with contextlib.ExitStack() as stack:
            for i in range(depth):
                stack.enter_context(provenance.scope(f"level{i}"))
            jf(torch.ones(3))
    finally:
        provenance.disable()
    _resolves(tmp_path / "logs", tmp_path)
    spans = {r["id"]: r["parent"] for r in Log(tmp_path / "logs") if r.type == "span"}
    assert len(spans) == depth

    def chain(span_id: int) -> int:
        n = 0
        while span_id is not None:
            span_id, n = spans[span_id], n + 1
        return n

    # no chain longer than the bound; the innermost scope still reaches MAX_NESTING levels up
    assert max(chain(s) for s in spans) == MAX_NESTING


def test_an_empty_profile_variable_means_off_silently(monkeypatch):
    monkeypatch.setenv("THUNDER_TRACE_PROFILE", " ")
    monkeypatch.setenv("THUNDER_TRACE_PROFILE_WARMUP", "")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        provenance.enable()
    try:
        from provenance import thunder as integration

        assert integration.profile_setting() == 0
    finally:
        provenance.disable()
