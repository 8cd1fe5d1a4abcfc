"""Where the memory goes (docs/memory.md): the static timeline of real Thunder compiles, attributed
to the user's lines and modules, read back from the log by the report, and drawn in Chromium."""

from __future__ import annotations

import io
import os
import re
import warnings
from pathlib import Path

import pytest
import thunder
import torch
from thunder.examine.memory_calculation import get_alloc_memory

import provenance
from provenance.allocation import static_memory
from provenance.allocation.record import decode
from provenance.cli import main
from provenance.report.read.log_file import LogFile

F32 = 4


class Big(torch.nn.Module):
    """One line (`big = ...`) makes a large activation the backward needs (exp saves its output)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x):
        t = self.fc(x) * 3.0  # freed before the peak: not saved (mul by a constant needs nothing)
        wide = torch.cat([t] * 32, dim=1)
        big = torch.exp(wide)
        v = big.view(-1)  # a view: allocates nothing
        return v.sum()


def _line(fn, text: str) -> str:
    import inspect

    lines, first = inspect.getsourcelines(fn)
    found = next(first + i for i, line in enumerate(lines) if text in line)
    return f"{inspect.getsourcefile(fn)}:{found}"


def _compiled(model, x):
    jm = thunder.jit(model)
    jm(x).backward()
    return jm


def test_the_big_activation_ranks_first_with_its_exact_bytes(traced):
    jm = _compiled(Big(), torch.randn(8, 16))
    rows = provenance.memory(jm, by="line")
    big, t, view = _line(Big.forward, "big = "), _line(Big.forward, "t = self.fc"), _line(Big.forward, "v = big")
    assert rows[0].key == big
    assert rows[0].saved_bytes == 8 * 512 * F32  # shape x dtype size
    assert rows[0].label == f"{os.path.basename(big.rpartition(':')[0])}:{big.rpartition(':')[2]}"  # as cost's rows
    printed = io.StringIO()
    provenance.print_memory(jm, file=printed)
    assert rows[0].label in printed.getvalue()  # the file and line, not a path cut short in the column
    by_key = {r.key: r for r in rows}
    assert by_key[t].forward_peak_bytes == 0 and by_key[t].allocated_bytes > 0  # freed before the peak
    assert view not in by_key or by_key[view].allocated_bytes == 0  # the view allocates nothing
    [memory] = provenance.memory_compiles(jm)
    assert memory.saved_bytes == 8 * 512 * F32 and memory.saved_input_bytes == 8 * 16 * F32  # x, counted apart
    # the peak: `wide` and `big` both live after exp
    assert memory.forward.peak == 2 * 8 * 512 * F32
    assert {b.name for b in memory.forward.at_peak()} == {n for n in _names(jm, ("cat", "exp"))}


def _names(jm, symbols: tuple[str, ...]) -> list[str]:
    trace = thunder.last_traces(jm)[-1]
    return [o.name for b in trace.bound_symbols if b.sym.name in symbols for o in b.flat_proxy_outs]


def test_the_static_peak_is_get_alloc_memorys_where_both_apply(traced):
    jm = _compiled(Big(), torch.randn(8, 16))
    [memory] = provenance.memory_compiles(jm)
    forward, backward = thunder.last_traces(jm)[-1], thunder.last_backward_traces(jm)[-1]
    # the forward: Thunder counts the inputs in its peak, we count them apart
    assert get_alloc_memory(forward)[0] == memory.forward.peak + memory.forward.inputs
    # the backward: Thunder keeps the saved tensors to the end (an argument's list is cleared, the
    # tensors' own list not); we free each at its del. Keeping them, our timeline gives Thunder's figure.
    saved = {s.name for s in memory.saved}
    kept, live = memory.backward.start, memory.backward.start
    frees = {}
    for b in memory.backward.blocks:
        if b.name not in saved and b.freed is not None:
            frees[b.freed] = frees.get(b.freed, 0) + b.nbytes
    for op in memory.backward.ops:
        live += op.allocated - frees.get(op.position, 0)
        kept = max(kept, live)
    assert get_alloc_memory(backward)[0] == kept + memory.backward.inputs
    assert memory.backward.peak <= kept  # freeing the saved tensors can only lower it (here: the peak is before)


def test_the_report_rolls_the_log_up_as_the_process_did_and_draws_it(tmp_path, browser):
    provenance.enable(tmp_path / "logs")
    try:
        jm = _compiled(Big(), torch.randn(8, 16))
        live = {by: provenance.memory(jm, by=by) for by in static_memory.BY}
    finally:
        provenance.disable()
    [path] = (tmp_path / "logs").glob("*.jsonl")
    log = LogFile(str(path))
    records: dict[int, dict] = {}
    for record in log:
        if record.get("type") == "memory":
            records.setdefault(record.get("compile"), {})[record.get("trace")] = record.data
    [(cid, traces)] = records.items()
    rebuilt = decode(traces, lambda i: log.provenance(i) if isinstance(i, int) else None, cid, "?")
    for by, rows in live.items():
        assert [(r.key, r.saved_bytes, r.forward_peak_bytes, r.backward_peak_bytes, r.allocated_bytes)
                for r in static_memory.rollup([rebuilt], by)] == [
            (r.key, r.saved_bytes, r.forward_peak_bytes, r.backward_peak_bytes, r.allocated_bytes) for r in rows]
    # every `by` at once (the report's lines and modules) charges the blocks as each alone does
    together = static_memory.rollups([rebuilt], static_memory.BY)
    assert list(together) == list(static_memory.BY)
    for by, rows in together.items():
        assert [(r.key, r.kind, r.members, r.saved_bytes, r.peak_bytes, r.allocated_bytes) for r in rows] == [
            (r.key, r.kind, r.members, r.saved_bytes, r.peak_bytes, r.allocated_bytes)
            for r in static_memory.rollup([rebuilt], by)]
        assert rows, by
    with pytest.raises(ValueError, match="by must be one of"):
        static_memory.rollups([rebuilt], ("line", "file"))
    out = tmp_path / "out"
    assert main(["report", str(tmp_path / "logs"), "-o", str(out), "--no-browser", "--strict"]) == 0
    [page_path] = [p for p in (out / "compiles").glob("*.html") if not p.name.endswith("-source.html")]
    page = browser.open(page_path, "#memory")
    section = page.locator("#memory")
    assert section.is_visible()
    assert page.locator("#memory svg.memtl-forward rect.mb").count() > 0  # the timeline is drawn
    assert page.locator("#memory svg.memtl-backward rect.mb").count() > 0
    assert page.locator("#memory rect.mb.pk").count() == 2  # the peak of each trace marked
    # the page's script draws the bars from data: each hover names its op, line and bytes
    peak = page.locator("#memory svg.memtl-forward rect.mb.pk title").text_content()
    assert re.fullmatch(r"\S+ · \S+:\d+ · \+[\d.]+ (B|KiB|MiB) .*· [\d.]+ (B|KiB|MiB) live · the peak", peak), peak
    assert "peak" in page.locator("#memory svg.memtl-forward").get_attribute("aria-label")
    first = page.locator("#memory table.memory").first.locator("tbody tr").first
    assert "big = torch.exp(wide)" in first.inner_text() and "16.0 KiB" in first.inner_text()
    browser.shot(page, "memory-section")
    source = browser.open(page_path.with_name(page_path.stem + "-source.html"))
    big_line = int(_line(Big.forward, "big = ").rsplit(":", 1)[1])
    cell = source.locator(f".sl[id$='-{big_line}'] .mm")
    assert cell.first.inner_text() == "16.0 KiB"  # the gutter: the line's saved bytes
    browser.shot(source, "memory-gutter")
    assert not browser.errors


def _module_sums(jm) -> None:
    [memory] = provenance.memory_compiles(jm)
    rows = provenance.memory(jm, by="module")
    total = memory.saved_bytes
    assert total > 0
    assert sum(r.own_saved_bytes for r in rows) == total  # every saved byte in exactly one module
    root = next(r for r in rows if r.key == static_memory.ROOT)
    assert root.saved_bytes + sum(r.saved_bytes for r in rows if r.key == static_memory.NO_MODULE) == total
    assert sum(r.saved_bytes for r in provenance.memory(jm, by="line")) == total


def test_nanogpt_saved_bytes_by_module_sum_to_the_total(traced):
    from thunder.tests.nanogpt_model import GPT, GPTConfig

    model = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=16, vocab_size=64, dropout=0.0))
    idx = torch.randint(0, 64, (2, 16))
    jm = thunder.jit(model)
    logits, loss = jm(idx, idx)
    loss.backward()
    _module_sums(jm)
    modules = {r.key for r in provenance.memory(jm, by="module")}
    assert {"transformer.h.0.attn", "transformer.h.0.mlp"} <= modules


def test_litgpt_saved_bytes_by_module_sum_to_the_total(traced):
    real_models = pytest.importorskip("real_models")
    pytest.importorskip("litgpt")
    model, step, _ = real_models.litgpt_llama(n_layer=1)  # a layer's modules are every layer's
    jm = thunder.jit(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step(jm, real_models.ids()).backward()
    _module_sums(jm)


class Recompute(torch.nn.Module):
    """An MLP whose gelu the torch.compile executor fuses: rematerialization recomputes it in the
    backward rather than saving its intermediates."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(32, 128), torch.nn.Linear(128, 32)

    def forward(self, x):
        h = self.fc1(x)
        a = torch.nn.functional.gelu(h)
        return self.fc2(a).sum()


def test_rematerialization_shows_its_effect_by_line(traced):
    from thunder.executors.torch_compile import torch_compile_ex

    jm = thunder.jit(Recompute(), executors=[torch_compile_ex, *thunder.get_default_executors()])
    # the forward call compiles both traces (remat runs then) and inductor compiles only the
    # forward's fusion: running the backward would compile its fusion too, for nothing shown here
    jm(torch.randn(4, 32))
    [memory] = provenance.memory_compiles(jm)
    assert memory.remat, "rematerialization changed nothing"
    removed = [c for c in memory.remat if c.change == "removed"]
    assert removed
    final_saved = {s.name for s in memory.saved}
    assert not {c.name for c in removed} & final_saved  # what it removed is not saved
    rows = {r.key: r for r in provenance.memory(jm, by="line")}
    gelu = _line(Recompute.forward, "a = torch")
    assert rows[gelu].remat_removed_bytes > 0


def test_nothing_is_kept_alive(traced):
    import gc
    import weakref

    model = Big()
    ref = weakref.ref(model)
    jm = _compiled(model, torch.randn(8, 16))
    assert provenance.memory_compiles(jm)
    del model, jm
    gc.collect()
    assert ref() is None
    assert all(not isinstance(v, torch.Tensor) for m in static_memory.compiles() for v in vars(m).values())


def test_log_has_the_section_types():
    text = (Path(__file__).parents[2] / "docs" / "log-schema.md").read_text()
    assert "## `memory`" in text


def test_a_module_path_deeper_than_the_roll_up_is_charged_to_its_ancestor_at_that_depth():
    """A log's module path is untrusted: 1 000 levels would be 500 000 parts of ancestors (15x the time
    and 30x the memory of a flat name). Memory, as time does (provenance.core.attribution.ancestors), rolls
    up MAX_MODULE_DEPTH levels; the deeper parts' bytes are their ancestor's at that depth."""
    from provenance.core import attribution
    from provenance.core.record import Kind, Provenance

    deep = ".".join(f"m{i}" for i in range(1000))
    record = Provenance(module=deep, module_type="Linear", kind=Kind.OP)
    forward = static_memory.TraceMemory(
        "forward", ops=(static_memory.MemOp(0, "mul", record, 64, 0, 64),),
        blocks=(static_memory.Block("t0", 64, record, 0, None),), inputs=0)
    memory = static_memory.CompileMemory(1, "f", forward, saved=(static_memory.Saved("t0", 64, record, False),))
    rows = {r.key: r for r in static_memory.rollup([memory], "module")}
    at_depth = ".".join(f"m{i}" for i in range(attribution.MAX_MODULE_DEPTH))
    assert max(len(key.split(".")) for key in rows if key != attribution.ROOT) == attribution.MAX_MODULE_DEPTH
    assert len(rows) == attribution.MAX_MODULE_DEPTH + 1
    assert rows[at_depth].saved_bytes == rows["m0"].saved_bytes == rows[attribution.ROOT].saved_bytes == 64
    assert rows[at_depth].own_saved_bytes == 64
