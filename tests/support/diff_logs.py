"""Logs of tests/support/diff_program.py's variants for the diff's tests: each made once per
test session (tests/diff/conftest.py, one run at a time), each its own THUNDER_TRACE directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from paths import SUPPORT

PROGRAM = SUPPORT / "diff_program.py"
PROFILED = "24"  # profiled calls per compile (THUNDER_TRACE_PROFILE): a per-call spread to judge noise by

# name -> (environment, ranks)
VARIANTS: dict[str, tuple[dict[str, str], int]] = {
    "base1": ({}, 1),
    "relu": ({"DIFF_ACT": "relu"}, 1),
    "wide": ({"DIFF_WIDE": "2"}, 1),
    "recompile": ({"DIFF_RECOMPILE": "1"}, 1),
    "fx": ({"DIFF_FX": "1"}, 1),
    "fx_break": ({"DIFF_FX": "1", "DIFF_BREAK": "1"}, 1),
    "ranks": ({}, 2),
    "ranks_relu1": ({"DIFF_RANK_ACT": "relu"}, 2),
    "torch_compile": ({"DIFF_EXECUTOR": "torch_compile", "DIFF_CALLS": "4"}, 1),
    "copy_relu": ({}, 1),
}
# name -> (the file a copy of the program is, the marker of its line edited, that line in the copy): a user's
# habit, a copied script with one edit beside the original
COPIES: dict[str, tuple[str, str, str]] = {
    "copy_relu": ("train_b.py", "act", "        h = F.relu(h)  # <-- act"),
}


def _command(ranks: int, program: Path = PROGRAM) -> list[str]:
    if ranks == 1:
        return [sys.executable, str(program)]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}", str(program)]


def _copy(root: Path, name: str) -> Path:
    """The program copied under another name, with one line edited (COPIES)."""
    file, marker, line = COPIES[name]
    copy = root / f"{name}-src" / file
    copy.parent.mkdir(parents=True, exist_ok=True)
    lines = PROGRAM.read_text().splitlines()
    at = next(i for i, text in enumerate(lines) if text.rstrip().endswith(f"# <-- {marker}"))
    copy.write_text("\n".join([*lines[:at], line, *lines[at + 1:]]) + "\n")
    return copy


def make(root: Path, names: list[str]) -> dict[str, Path]:
    """Run the variants `names` at once, each logging into root/<name>; their directories."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("THUNDER_TRACE") and k != "CI"}
    running = []
    for name in names:
        env, ranks = VARIANTS[name]
        logs = root / name
        program = _copy(root, name) if name in COPIES else PROGRAM
        running.append((name, logs, subprocess.Popen(
            _command(ranks, program), env={**base, **env, "THUNDER_TRACE": str(logs), "THUNDER_TRACE_PROFILE": PROFILED,
                                  "OMP_NUM_THREADS": "1"},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
    out = {}
    for name, logs, process in running:
        _, err = process.communicate(timeout=600)
        assert process.returncode == 0, f"{name}: {err[-3000:]}"
        out[name] = logs
    return out
