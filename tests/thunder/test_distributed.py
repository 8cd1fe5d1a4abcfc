"""Real torch.distributed on 2 CPU ranks (torchrun, gloo): tensor parallel, DDP and FSDP roles."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from paths import ROOT, SUPPORT

from provenance.log import schema

pytestmark = pytest.mark.slow  # one torchrun run (about 25 s) serves most tests here


@pytest.fixture(scope="module")
def dist_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
           str(SUPPORT / "dist_worker.py"), str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def ranks(dist_run):
    return [json.loads((dist_run / f"rank{r}.json").read_text()) for r in (0, 1)]


def _ops(rank, mode, trace):
    ops = rank[mode][trace]["ops"]
    assert all(op is not None for op in ops), "every op has a provenance"
    return ops


def test_tensor_parallel_roles_on_every_rank(ranks):
    for rank in ranks:
        fw = _ops(rank, "tensor_parallel", "forward")
        bw = _ops(rank, "tensor_parallel", "backward")
        by_role = {}
        for op in fw + bw:
            if op["role"]:
                by_role.setdefault(op["role"], []).append(op)
        assert set(by_role) == {"column_parallel.pre", "row_parallel.post"}
        # the ops serve their layer: module and its forward line, transform in the lineage
        for role, module in (("column_parallel.pre", "net1"), ("row_parallel.post", "net2")):
            assert {(op["module"], op["file"], op["line"]) for op in by_role[role]} == {(module, "toy_model.py", 29)}
            assert all(role.split(".")[0] in op["transforms"] for op in by_role[role])
        post = [op["sym"] for op in fw if op["role"] == "row_parallel.post"]
        assert post[0] == "torch_all_reduce_prim_impl" and "torch_wait_prim_impl" in post and post[-1] == "add"
        assert [op["sym"] for op in fw if op["role"] == "column_parallel.pre"] == ["shallow_copy"]
        # backward of the pre-processing is the all-reduce of the input gradient
        pre_bw = [op for op in bw if op["role"] == "column_parallel.pre"]
        assert {op["sym"] for op in pre_bw} >= {"torch_all_reduce_prim_impl", "torch_wait_prim_impl"}
        assert all(op["kind"] == "backward" and "grad" in op["transforms"] for op in pre_bw)
        # no collective without a role
        collectives = [op for op in fw + bw if op["sym"].startswith("torch_") and "prim_impl" in op["sym"]]
        assert collectives and all(op["role"] for op in collectives)


def test_grouped_annotation_reads_as_the_rfc_asked(ranks):
    text = ranks[0]["tensor_parallel"]["forward"]["grouped"]
    lines = text.splitlines()
    start = lines.index("  # ── row_parallel.post · net2 (Linear) · toy_model.py:29")
    block = []
    for line in lines[start + 1:]:
        if line.lstrip().startswith("# ──") or line.lstrip().startswith("return"):
            break
        block.append(line)
    code = [line.strip() for line in block if not line.strip().startswith("del ")]
    assert code[0].startswith("ft") and "torch_all_reduce_prim_impl" in code[0]
    assert any("torch_wait_prim_impl" in line for line in code) and "torch.add(" in code[-1]
    assert "# ── column_parallel.pre · net1 (Linear) · toy_model.py:29" in text


@pytest.mark.parametrize("mode, fw_role, bw_role, bw_collective", [
    ("ddp", "ddp.sync_param", "ddp.grad_all_reduce", "torch_all_reduce_prim_impl"),
    ("fsdp", "fsdp.unshard", "fsdp.reduce_scatter", "torch_reduce_scatter_prim_impl"),
])
def test_data_parallel_roles(ranks, mode, fw_role, bw_role, bw_collective):
    for rank in ranks:
        fw, bw = _ops(rank, mode, "forward"), _ops(rank, mode, "backward")
        fw_roles = [op for op in fw if op["role"]]
        bw_roles = [op for op in bw if op["role"]]
        assert fw_roles and {op["role"] for op in fw_roles} == {fw_role}
        assert bw_roles and {op["role"] for op in bw_roles} == {bw_role}
        assert {op["module"] for op in fw_roles} == {op["module"] for op in bw_roles} == {"net1", "net2"}
        assert bw_collective in {op["sym"] for op in bw_roles}
        assert all(mode in op["transforms"] for op in fw_roles + bw_roles)
        if mode == "fsdp":  # the unshard is an all-gather
            assert "torch_all_gather_prim_impl" in {op["sym"] for op in fw_roles}
        collectives = [op for op in fw + bw if op["sym"].startswith("torch_") and "prim_impl" in op["sym"]]
        assert collectives and all(op["role"] for op in collectives)


def test_tensor_parallel_example_prints_the_grouped_trace():
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
           str(ROOT / "examples" / "tensor_parallel.py")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    out = done.stdout
    assert out.count("#### final forward execution trace, grouped by role") == 1  # rank 0 prints
    assert "# ── row_parallel.post · net2 (Linear) · toy_model.py:29" in out
    assert "# ── column_parallel.pre · net1 (Linear) · toy_model.py:29 · grad" in out
    assert re.search(r"#### final backward execution trace, grouped by role: (\d+)/\1 with provenance", out)


def test_fault_in_distributed_hooks_warns_once_and_results_stay_correct(ranks):
    for rank in ranks:
        fault = rank["fault"]
        assert len(fault["warnings"]) == 1 and "'distributed'" in fault["warnings"][0]
        assert fault["same_output"] and fault["same_grad"]


def test_wait_counter_grows_while_a_rank_is_held_back(ranks):
    samples = ranks[0]["waits"]  # rank 0 waited for rank 1, which slept 4 s
    key = {"thunder.role": "row_parallel.post", "thunder.module": "net2"}

    def value(points, name):
        return next((v for n, attrs, v in points if n == name and {k: attrs.get(k) for k in key} == key), None)

    blocked = [(t, value(p, "thunder.wait.time")) for t, p in samples if value(p, "thunder.wait.active") == 1]
    assert len(blocked) >= 3, samples[:5]  # observed several times while the wait was in progress
    seconds = [s for _, s in blocked]
    assert all(b > a for a, b in zip(seconds, seconds[1:]))  # growing while still blocked
    assert seconds[-1] > 1.0
    final = samples[-1][1]
    assert value(final, "thunder.wait.active") == 0 and value(final, "thunder.wait.time") >= seconds[-1]


def test_the_held_back_wait_is_in_rank_0s_log_while_it_blocks_and_once_it_returned(dist_run):
    """The same wait, in the THUNDER_TRACE log (the `wait` records: docs/log-schema.md): written as
    blocked while rank 0 still waited, and as done with how long it blocked."""
    logs = {}
    for path in (dist_run / "logs").glob("*.jsonl"):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        logs[records[0]["rank"]] = records
    assert sorted(logs) == [0, 1]
    every = [r for r in logs[0] if r["type"] == "wait"]
    waits = [r for r in every if r["role"] == "row_parallel.post"]
    assert [w["state"] for w in waits] == ["blocked", "done"], every
    blocked, done = waits
    for record in waits:
        assert schema.problems(record) == [], schema.problems(record)
        assert (record["role"], record["module"], record["op"]) == (
            "row_parallel.post", "net2", "torch_all_reduce_prim_impl")
    assert blocked["start_ns"] == done["start_ns"] and done["seconds"] > 4
    returned = done["start_ns"] + done["seconds"] * 1e9
    assert blocked["start_ns"] + 1e9 <= blocked["time_ns"] < returned <= done["time_ns"]  # written while it blocked
    assert sorted(w["state"] for w in every) == sorted(["blocked", "done"] * (len(every) // 2))  # each in pairs
