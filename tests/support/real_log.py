"""A real THUNDER_TRACE log, of a program with what a log can hold: a scope, forward and backward,
a recompile, a failed compile, profiled calls (THUNDER_TRACE_PROFILE) and ThunderFX (a graph break,
a piece that falls back to torch). For report tests that want Thunder's own records."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROGRAM = """
import torch, thunder, provenance
net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
jm = thunder.jit(net)
with provenance.scope("train", role="custom", step=1):
    jm(torch.randn(4, 8)).sum().backward()
jm(torch.randn(6, 8)).sum().backward()  # a recompile
jm(torch.randn(6, 8)).sum().backward()  # a profiled call
try:
    thunder.jit(lambda x: x @ torch.ones(3, 3))(torch.ones(2, 2))
except RuntimeError:
    pass
import fx_program  # ThunderFX: a graph break, a piece that falls back to torch
fx_program.main()
"""


def write(logs: Path, profile: bool = True) -> Path:
    """Run the program with THUNDER_TRACE=logs (and one profiled call, unless not `profile`); its log file."""
    env = {k: v for k, v in os.environ.items() if k not in ("THUNDER_TRACE", "THUNDER_TRACE_PROFILE", "CI")}
    done = subprocess.run([sys.executable, "-c", PROGRAM],
                          env={**env, "THUNDER_TRACE": str(logs), "THUNDER_TRACE_PROFILE": "1" if profile else "0",
                               "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), env.get("PYTHONPATH", "")])},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = logs.glob("*.jsonl")
    return path
