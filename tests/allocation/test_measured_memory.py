"""Memory measured on the device (docs/memory.md, "Measured on the device"): the CUDA clock's first
timed call reads the allocator at every op boundary, the readings are logged, and each op's
measured change is checked against the static timeline. On this GPU-less machine the CUDA clock
runs with stand-ins (tests/support/cuda_stand_ins.py): events paired by number, and an allocator
read from the running program's own tensors, so the static rule is checked against what the
program really holds."""

from __future__ import annotations

import dataclasses
import io
import json

import models
import pytest
import thunder
import torch
from cuda_stand_ins import FakeCudaEvent, LiveTensors

import provenance
from provenance.allocation import measured_memory
from provenance.cli import main
from provenance.core.attribution import line_key
from provenance.thunder import capture
from provenance.timing.profile import FORWARD


def _on_cuda_stand_ins(model, args, monkeypatch) -> LiveTensors:
    allocator = LiveTensors(held=[*model.parameters(), *args])
    monkeypatch.setattr(capture.ACTIVE, "force_clock", "cuda")
    monkeypatch.setattr(capture.ACTIVE, "cuda_event_factory", FakeCudaEvent)
    monkeypatch.setattr(capture.ACTIVE, "cuda_memory", (allocator.allocated, allocator.max_allocated))
    return allocator


def _run(model, x, calls: int = 4):
    jm = thunder.jit(model)
    for _ in range(calls):
        jm(x).sum().backward()
    return jm


@pytest.fixture
def profiled(tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    provenance.enable(tmp_path / "logs", profile=2)
    try:
        yield tmp_path / "logs"
    finally:
        provenance.disable()
        torch.set_num_threads(threads)


def test_the_readings_agree_with_the_static_timeline_op_by_op(profiled, monkeypatch):
    model, x = models.OneBigLine(), torch.randn(384, 384)
    allocator = _on_cuda_stand_ins(model, [x], monkeypatch)
    jm = _run(model, x)
    (profile,) = provenance.profiles(jm)
    checks = provenance.memory_checks(jm)
    assert [c.trace for c in checks] == ["forward", "backward"] and all(c.call == 1 for c in checks)
    for check, trace in zip(checks, profile.traces.values()):
        assert check.ops == len(trace.ops) and check.agree == check.ops and not check.differ, check.differ
        assert check.measured_peak == check.static_peak > 0
    # the forward's peak: the big matmul's 384 x 384 floats (and the tiny ones, each a 512-byte block)
    assert checks[0].static_peak >= 384 * 384 * 4
    # only the window's first timed call read the allocator (one read per op boundary of each trace);
    # it is no measured run, and the window took one more call for it: 2 measured, as asked
    assert allocator.reads == sum(len(t.ops) + 1 for t in profile.traces.values())
    measured, excluded = profile.measured()
    assert measured == [2, 3] and {(e.call, e.reason) for e in excluded} == {(1, "memory")}
    assert "read the CUDA allocator" in excluded[0].describe()
    # print_memory says it, after the static table
    out = io.StringIO()
    provenance.print_memory(jm, file=out)
    assert f"Measured (CUDA allocator): {checks[0].describe()}" in out.getvalue()


def test_a_difference_is_named_at_its_line(profiled, monkeypatch):
    model, x = models.OneBigLine(), torch.randn(384, 384)
    _on_cuda_stand_ins(model, [x], monkeypatch)
    jm = _run(model, x)
    (profile,) = provenance.profiles(jm)
    (memory,) = provenance.memory_compiles(jm)
    forward = profile.traces[FORWARD]
    call = next(c for c in forward.recent if c.memory is not None)
    k = next(i for i, op in enumerate(forward.ops) if op.name == "matmul")
    # the device held 4 KiB more from the matmul on (a workspace the trace does not show)
    leaked = dataclasses.replace(call, memory=tuple(m + 4096 * (i > k) for i, m in enumerate(call.memory)))
    check = measured_memory.check(memory.forward, forward.ops, leaked)
    assert check.agree == check.ops - 1
    (op,) = check.differ
    assert op.name == "matmul" and op.difference == 4096
    assert line_key(op.record).endswith(f"models.py:{_line_of(models.OneBigLine.forward, 'b = x @ self.w')}")
    # a block over 1 MiB may come from a larger cached block: 1 MiB of slack for it, no more
    assert measured_memory.check(memory.forward, forward.ops, call).agree == check.ops


def _line_of(fn, text: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return next(first + i for i, line in enumerate(lines) if text in line)


def test_the_log_carries_the_readings_and_the_report_checks_them(profiled, monkeypatch, tmp_path):
    model, x = models.OneBigLine(), torch.randn(384, 384)
    _on_cuda_stand_ins(model, [x], monkeypatch)
    jm = _run(model, x)
    live = [c.describe() for c in provenance.memory_checks(jm)]
    provenance.disable()
    (log,) = profiled.glob("*.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    ops = {r["trace"]: len(r["ops"]) for r in records if r["type"] == "profile_ops"}
    read = [r for r in records if r["type"] == "profile_call" and "memory" in r]
    assert sorted((r["trace"], r["call"]) for r in read) == [("backward", 1), ("forward", 1)]
    assert all(len(r["memory"]) == ops[r["trace"]] + 1 and r["memory_peak"] == max(r["memory"]) for r in read)
    out = tmp_path / "report"
    assert main(["report", str(profiled), "-o", str(out), "--no-browser", "--strict"]) == 0
    (entry,) = json.loads((out / "compile_directory.json").read_text())["compiles"]
    page = (out / entry["pages"]["compile"]).read_text()
    assert "Measured on the device" in page
    for text in live:  # the report's check of the logged readings is the process's own
        assert text.replace("→", "&rarr;") in page or text in page, text
    assert entry["time"]["calls"] == 2  # the call that read the allocator is no measured run


def test_a_bad_memory_field_is_named_and_skipped(profiled, monkeypatch, tmp_path):
    model, x = models.OneBigLine(), torch.randn(384, 384)
    _on_cuda_stand_ins(model, [x], monkeypatch)
    _run(model, x)
    provenance.disable()
    (log,) = profiled.glob("*.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    for record in records:
        if record["type"] == "profile_call" and "memory" in record and record["trace"] == "forward":
            record["memory"] = record["memory"][:-1]  # not one reading per op boundary
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "report"
    assert main(["report", str(profiled), "-o", str(out), "--no-browser", "--strict"]) == 1
    directory = json.loads((out / "compile_directory.json").read_text())
    assert any("`memory` is not one byte count per op boundary" in e["reason"]
               for e in directory["problems"]["entries"])
    (entry,) = directory["compiles"]
    page = (out / entry["pages"]["compile"]).read_text()
    assert "Measured on the device" in page and "forward of" not in page.split("Measured on the device")[1][:2000]


def test_readings_off_leave_the_window_as_asked(profiled, monkeypatch):
    model, x = models.OneBigLine(), torch.randn(384, 384)
    allocator = _on_cuda_stand_ins(model, [x], monkeypatch)
    monkeypatch.setattr(capture.ACTIVE, "profile_memory", False)  # THUNDER_TRACE_PROFILE_MEMORY=0
    jm = _run(model, x)
    (profile,) = provenance.profiles(jm)
    assert allocator.reads == 0 and not provenance.memory_checks(jm)
    assert profile.calls == 2 and profile.measured() == ([1, 2], [])


def test_the_cpu_clock_reads_nothing(profiled):
    jm = _run(models.OneBigLine(), torch.randn(384, 384), calls=3)
    (profile,) = provenance.profiles(jm)
    assert all(c.memory is None for t in profile.traces.values() for c in t.recent)
    assert not provenance.memory_checks(jm) and profile.measured()[0] == [1, 2]


def test_the_environment_turns_the_readings_off(monkeypatch):
    monkeypatch.setenv("THUNDER_TRACE_PROFILE_MEMORY", "0")
    assert not capture.Capture().profile_memory
    monkeypatch.setenv("THUNDER_TRACE_PROFILE_MEMORY", "1")
    assert capture.Capture().profile_memory



@pytest.mark.slow  # inductor's C++ build
def test_a_fusion_output_that_views_another_allocates_nothing(profiled, monkeypatch):
    """A fusion returns `y` and `y.reshape(-1)`: inductor (and nvFuser: bench/gpu_check.py found it on
    the GPU) return the second as a view of the first, so the static timeline charges one block."""
    from thunder.executors.torch_compile import torch_compile_ex

    def f(x):
        y = torch.sin(x) * 2
        return y, y.reshape(-1)

    x = torch.randn(256, 256)
    _on_cuda_stand_ins(torch.nn.Module(), [x], monkeypatch)
    jf = thunder.jit(f, executors=[torch_compile_ex])
    for _ in range(4):
        y, flat = jf(x)
    assert flat.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()  # what the rule assumes
    (check,) = provenance.memory_checks(jf)
    assert check.agree == check.ops and not check.differ, check.differ
    assert check.static_peak == check.measured_peak == 256 * 256 * 4
