"""The memory metrics in OpenTelemetry (exporters/otel.py): `thunder.memory.saved_for_backward`
and `thunder.memory.peak`, bytes by module and role per compile, against provenance.memory()."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from paths import SUPPORT

_APP = """
import json, sys, torch, thunder
sys.path.insert(0, {tests!r})
import models, provenance
from otel_in_memory import install
from provenance.allocation import static_memory

_, reader = install()
torch.set_num_threads(1)
provenance.enable()
jm = thunder.jit(models.Net(n=8, depth=2))
models.forward_backward(jm, torch.randn(4, 8))
models.forward_backward(jm, torch.randn(6, 8))  # a 2nd compile (another shape)
compiles = provenance.memory_compiles(jm)
expected = [{{by: {{r.key: [r.saved_bytes, r.forward_peak_bytes, r.backward_peak_bytes]
                  for r in static_memory.rollup([m], by)}} for by in ("module", "role")}} for m in compiles]
totals = [[m.saved_bytes, m.forward.peak, m.backward.peak] for m in compiles]
provenance.disable()
points = [[m.name, m.unit, dict(p.attributes), p.sum, p.count, p.min, p.max]
          for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics for m in sm.metrics
          if m.name.startswith("thunder.memory.") for p in m.data.data_points]  # with each metric's name
print(json.dumps({{"expected": expected, "totals": totals, "points": points}}))
"""


def _inside(points, module: str) -> list:
    return [p for p in points if module == "<root>" or p[2]["thunder.module"] == module
            or p[2]["thunder.module"].startswith(module + ".")]


@pytest.mark.slow
def test_saved_for_backward_and_peak_bytes_by_module_and_role_per_compile():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "THUNDER_TRACE"))}
    done = subprocess.run([sys.executable, "-c", _APP.format(tests=str(SUPPORT))], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    expected, totals, points = result["expected"], result["totals"], result["points"]
    saved = [p for p in points if p[0] == "thunder.memory.saved_for_backward"]
    peak = [p for p in points if p[0] == "thunder.memory.peak"]
    assert saved and peak and all(p[1] == "By" for p in points)
    # bounded labels: no op id, shape, tensor or line
    assert all(set(p[2]) == {"thunder.function", "thunder.module", "thunder.role"} for p in saved)
    assert all(set(p[2]) == {"thunder.function", "thunder.trace", "thunder.module", "thunder.role"} for p in peak)
    assert {p[2]["thunder.trace"] for p in peak} == {"forward", "backward"}
    assert {"blocks.0.mlp.fc1", "blocks.1.mlp.fc1"} <= {p[2]["thunder.module"] for p in saved}
    # one value per label set and compile: 2 compiles; each point's values are the two compiles' bytes
    assert len(totals) == 2 and all(p[4] <= 2 for p in points) and any(p[4] == 2 for p in points)
    # the points sum to each trace's figures over the two compiles, exactly
    assert sum(p[3] for p in saved) == sum(t[0] for t in totals)
    for index, trace in ((1, "forward"), (2, "backward")):
        assert sum(p[3] for p in peak if p[2]["thunder.trace"] == trace) == sum(t[index] for t in totals)
    # by module (hierarchical, as provenance.memory(by="module")) and by role: exact bytes
    for module in ("<root>", "blocks.0", "blocks.1.mlp", "blocks.1.mlp.fc1", "head"):
        want = [sum(e["module"].get(module, [0, 0, 0])[i] for e in expected) for i in range(3)]
        assert sum(p[3] for p in _inside(saved, module)) == want[0], module
        for index, trace in ((1, "forward"), (2, "backward")):
            got = sum(p[3] for p in _inside(peak, module) if p[2]["thunder.trace"] == trace)
            assert got == want[index], (module, trace)
    roles = {k for e in expected for k in e["role"]}
    for role in roles:
        label = "" if role == "(no role)" else role
        want = sum(e["role"][role][0] for e in expected if role in e["role"])
        assert sum(p[3] for p in saved if p[2]["thunder.role"] == label) == want, role
    # per compile: the smallest and largest values are the two compiles' (batch 4 then 6: 6/4 the bytes)
    fc1 = [p for p in saved if p[2]["thunder.module"] == "blocks.0.mlp.fc1"]
    assert fc1 and all(p[4] == 2 and p[6] * 4 == p[5] * 6 for p in fc1)


_MEASURED_APP = """
import json, sys, torch, thunder
sys.path.insert(0, {tests!r})
import models, provenance
from cuda_stand_ins import FakeCudaEvent, LiveTensors
from otel_in_memory import data_points, install
from provenance.thunder import capture

spans, reader = install()
torch.set_num_threads(1)
provenance.enable(profile=2)
model, x = models.OneBigLine(), torch.randn(384, 384)
allocator = LiveTensors(held=[*model.parameters(), x])
capture.ACTIVE.force_clock, capture.ACTIVE.cuda_event_factory = "cuda", FakeCudaEvent
capture.ACTIVE.cuda_memory = (allocator.allocated, allocator.max_allocated)
jm = thunder.jit(model)
for _ in range(4):
    models.forward_backward(jm, x)
(profile,) = provenance.profiles(jm)
readings = {{name: list(next(c for c in t.recent if c.memory is not None).memory)
            for name, t in profile.traces.items()}}
provenance.disable()
counts = [p.count for p in data_points(reader, "thunder.op.duration")]
print(json.dumps({{"readings": readings, "counts": counts,
                  "spans": [dict(s.attributes) for s in spans.get_finished_spans()
                            if s.name.startswith("thunder.profiled")]}}))
"""


@pytest.mark.slow
def test_a_run_that_read_the_allocator_says_so_and_stays_out_of_the_op_histogram():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "THUNDER_TRACE"))}
    done = subprocess.run([sys.executable, "-c", _MEASURED_APP.format(tests=str(SUPPORT))], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    flagged = {(s["thunder.trace"], s["thunder.call"]): s for s in result["spans"]
               if s.get("thunder.profile.excluded") == "memory"}
    assert sorted(flagged) == [("backward", 1), ("forward", 1)]
    for (name, _), span in flagged.items():
        readings = result["readings"][name]
        assert span["thunder.memory.allocated_start"] == readings[0]
        assert span["thunder.memory.allocated_peak"] == max(readings)  # the stand-in's peak is its readings'
    assert len(result["spans"]) == 6  # calls 1-3, forward and backward
    assert result["counts"] and set(result["counts"]) == {2}  # calls 2 and 3: the measured runs
