"""bench/gpu_check.py (issue 26), the one prepared GPU run: its CPU dry run works on this GPU-less
machine, says what it skipped and why, and writes the results the device run would write."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "gpu_check.py"


@pytest.mark.slow
def test_the_dry_run_skips_what_needs_a_gpu_and_writes_its_results(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path),
                           "--steps", "cuda_profile,memory"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    results = {r["step"]: r for r in json.loads((tmp_path / "gpu_check.json").read_text())}
    assert list(results) == ["environment", "cuda_profile", "memory"]
    assert results["environment"]["status"] == "PASS" and results["environment"]["data"]["gpu"] is None
    assert results["cuda_profile"]["status"] == "SKIP" and "no CUDA device" in results["cuda_profile"]["detail"]
    assert results["memory"]["status"] == "PASS" and "stand-ins" in results["memory"]["detail"]
    table = (tmp_path / "gpu_check.md").read_text()
    assert table.startswith("gpu_check dry run (CPU)") and "| memory | PASS |" in table
    assert (tmp_path / "logs" / "cuda_profile.txt").exists()


def test_an_unknown_step_is_a_clear_error(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path), "--steps", "warp"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "unknown step(s) warp" in done.stderr
