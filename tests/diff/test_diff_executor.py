"""Thunder's torch.compile executor switched on: the diff names the fusions it formed, by the
lines they fused (inductor's C++ build makes this the one slow diff test)."""

from __future__ import annotations

import pytest
from diff_program import line_of

from provenance.diff.compare import compare
from provenance.diff.read import read_side


@pytest.mark.slow
def test_the_torch_compile_executor_switched_on_forms_fusions_named_by_their_lines(diff_logs):
    base, fused = (read_side(str(p)) for p in diff_logs("base1", "torch_compile"))
    diff = compare(base, fused)
    formed = [c for c in diff.changes if c.title.startswith("fusion formed: TorchCompile")]
    assert formed and not [c for c in diff.changes if c.title.startswith("fusion split")]
    lines = " ".join(d for c in formed for d in c.details)
    for marker in ("act", "out"):  # the elementwise lines are in a fusion
        assert f"diff_program.py:{line_of(marker)}" in lines, lines
    assert {"computation", "backward"} <= {c.title.split("(")[1].split(",")[0] for c in formed}
    assert all(c.links.get("b") and "a" not in c.links for c in formed)  # B's compile page: where it is
    act = f"diff_program.py:{line_of('act')}"
    now_fused = [c for c in diff.changes if c.kind == "line" and c.title.startswith(act)]
    assert now_fused and any(d.startswith("fused (computation): 0 → ") and "TorchCompile" in d
                             for d in now_fused[0].details), now_fused[0].details
