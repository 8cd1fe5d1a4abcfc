"""The support matrix, measured: on one stack (a venv that `./dev test --torch X` or `--thunder head`
made), the fast suite's counts, each example's and the demo's exit code (each logged with THUNDER_TRACE),
`thunder-trace report --strict` of those logs, and whether a failing example fails untraced too (then
it is Thunder's failure on that stack, not ours). Prints one row of bench/README.md's table.

    python bench/stack_matrix.py --venv .venv-torch2.12 [--out DIR] [--no-suite]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness

ROOT = harness.ROOT
EXAMPLES = ["toy_model.py", "custom_transform.py", "train_nanogpt.py", "annotate_nanogpt.py", "cost_nanogpt.py",
            "memory_nanogpt.py", "thunderfx.py", "tensor_parallel.py"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THUNDER_TRACE", "OTEL_"))}
    env.update(extra)
    return env


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _command(python: Path, example: str) -> list[str]:
    if example == "tensor_parallel.py":
        return [str(python), "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                str(ROOT / "examples" / example)]
    return [str(python), str(ROOT / "examples" / example)]


def run_example(python: Path, example: str, logs: Path) -> str:
    """'0', or the exit code with the error, and 'untraced too' where the same run untraced fails alike."""
    command = _command(python, example)
    done = subprocess.run(command, cwd=ROOT / "examples", env=_env(THUNDER_TRACE=str(logs), OMP_NUM_THREADS="1"),
                          capture_output=True, text=True, timeout=1200)
    if done.returncode == 0:
        return "0"
    error = _last_line(done.stderr)
    again = subprocess.run(command, cwd=ROOT / "examples", env=_env(OMP_NUM_THREADS="1"), capture_output=True,
                           text=True, timeout=1200)
    same = again.returncode != 0 and _last_line(again.stderr) == error
    return f"{done.returncode} ({'Thunder: untraced too' if same else 'OURS'}: {error[:100]})"


def suite(python: Path) -> str:
    began = time.perf_counter()
    done = subprocess.run([str(python), "-m", "pytest", "-m", "not slow", "-q", "-p", "no:logging"], cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=3600)
    counts = re.findall(r"(\d+) (passed|failed|skipped|xfailed|error|errors|deselected)", _last_line(done.stdout))
    failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    return (", ".join(f"{n} {what}" for n, what in counts) + f" ({time.perf_counter() - began:.0f} s)"
            + "".join(f"\n  {line}" for line in failed))


def report(python: Path, logs: Path, out: Path) -> str:
    done = subprocess.run([str(python), "-m", "provenance.report", "report", str(logs), "-o", str(out), "--strict",
                           "--overwrite", "--no-browser"], env=_env(), capture_output=True, text=True, timeout=1200)
    return f"{done.returncode}" + ("" if done.returncode == 0 else f" ({_last_line(done.stderr)[:160]})")


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--venv", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=None, help="where the logs and reports go (default: a temp dir)")
    parser.add_argument("--no-suite", action="store_true", help="skip the fast suite")
    args = parser.parse_args()
    python = (args.venv / "bin" / "python").absolute()
    out = args.out or Path(tempfile.mkdtemp(prefix="stack_matrix."))
    probe = "import torch, thunder; print(torch.__version__, thunder.__version__)"
    versions = subprocess.run([str(python), "-c", probe], env=_env(), capture_output=True, text=True).stdout.split()
    print(f"stack: torch {versions[0]}, lightning-thunder {versions[1]} ({args.venv})", flush=True)
    if not args.no_suite:
        print(f"fast suite: {suite(python)}", flush=True)
    logs = out / "examples"
    for example in EXAMPLES:
        print(f"{example}: exit {run_example(python, example, logs)}", flush=True)
    print(f"report --strict of the examples' logs: exit {report(python, logs, out / 'examples_report')}", flush=True)
    demo = subprocess.run([str(python), str(ROOT / "examples" / "demo.py"), "--out", str(out / "demo")], env=_env(),
                          capture_output=True, text=True, timeout=1800)
    said = [line for line in demo.stdout.splitlines() if "could not run" in line]
    print(f"demo: exit {demo.returncode}" + "".join(f"; {line.removeprefix('demo:').strip()}" for line in said),
          flush=True)
    if demo.returncode != 0:
        print("\n".join(demo.stdout.splitlines()[-15:]), file=sys.stderr)
    demo_report = report(python, out / "demo" / "thunder_trace", out / "demo_report")
    print(f"report --strict of the demo's logs: exit {demo_report}", flush=True)


if __name__ == "__main__":
    main()
