"""Real model code (transformers, litgpt; tiny configs, random weights) under each entry point:
provenance coverage, the compile time the report shows against the measured wall time, and the
report's size against the log's.

For each model × entry point, one child process traces with THUNDER_TRACE (no code change):
`compiled = entry(model)`, then two training steps at sequence length 16 and two at 8 (a
Dynamo recompile under ThunderFX, a Thunder recompile under thunder.jit; the last is warm). The child measures
the wall time of each step and, from the live records, the share of compute ops (a fusion's
members, final forward and backward traces of every Thunder piece) whose innermost user frame
is in the model's file, and whose module line is (docs/capture.md, `module_file`). The parent
then builds the report of the log and reads what it shows (compile_directory.json): the index's
total compile time against the compiling steps' measured time (steps 1 to 3 less the warm step 4 each).

    python bench/real_models.py [--models litgpt,hf-llama,hf-gpt2] [--entries thunderfx,thunder.jit] [--keep DIR]

Also: hf-t5, hf-vit, hf-whisper, hf-mixtral (issue 58's models; Mixtral's first step is minutes of failing
frame compiles, which the report counts).

Hugging Face models run under ThunderFX only: Thunder 0.2.6's thunder.jit fails on them itself
(see bench/README.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness

ROOT = harness.ROOT
HF_ONLY_FX = {"hf-llama", "hf-gpt2", "hf-t5", "hf-vit", "hf-whisper", "hf-mixtral"}

def _shown(report: Path) -> dict:
    """What the report shows: the index's total compile time (every compile, and each Dynamo
    graph's own phases) and the graphs'."""
    directory = json.loads((report / "compile_directory.json").read_text())
    graphs = directory.get("dynamo_graphs", {}).get("graphs", [])  # none under thunder.jit
    return {"compiles": directory["totals"]["compiles"], "compile_s": directory["totals"]["seconds"],
            "graphs": len(graphs), "graph_s": sum(g.get("seconds") or 0 for g in graphs)}


def _compiling(steps: list[float]) -> float:
    """The first three steps' wall time less a warm step's each (the fourth, at the third's length): what
    they spent compiling, whichever compiled (a Hugging Face model can recompile at its second step: ViT's
    loss sets `config.problem_type` on the first call, a guard of its graph)."""
    return sum(s - steps[3] for s in steps[:3])


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size


def run(model: str, entry: str, work: Path) -> dict:
    logs, report = work / f"{model}-{entry}", work / f"{model}-{entry}-report"
    shutil.rmtree(logs, ignore_errors=True)  # a kept folder from an earlier run: this run's log alone
    env = dict(os.environ, THUNDER_TRACE=str(logs))
    out = harness.run_child("real_models_child.py", model, entry, env=env)
    if out.returncode:
        return {"model": model, "entry": entry, "error": out.stderr.strip().splitlines()[-1:]}
    measured = json.loads(out.stdout.strip().splitlines()[-1])
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "provenance.cli", "report", str(logs), "-o", str(report),
                    "--overwrite", "--no-browser"], check=True, capture_output=True, cwd=ROOT)
    built = time.perf_counter() - start
    return {"model": model, "entry": entry, **measured, **_shown(report), "log_bytes": _size(logs),
            "report_bytes": _size(report), "report_s": built}


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--models", default="litgpt,hf-llama,hf-gpt2")
    parser.add_argument("--entries", default="thunderfx,thunder.jit")
    parser.add_argument("--keep", type=Path, help="keep the logs and reports here")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="real-models-"))
    work.mkdir(parents=True, exist_ok=True)
    print("| model | entry point | compute ops | at model file: innermost user frame | by module line "
          "| compiling steps, measured (s) | compile time shown (s) | graphs shown (s) | report / log |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for model in args.models.split(","):
        for entry in args.entries.split(","):
            if entry == "thunder.jit" and model in HF_ONLY_FX:
                continue
            r = run(model, entry, work)
            if "error" in r:
                print(f"| {model} | {entry} | failed: {r['error']} |||||||", flush=True)
                continue
            print(f"| {model} | {entry} | {r['compute']} | {r['user']:.1%} | {r['module_line']:.1%} "
                  f"| {_compiling(r['steps']):.1f} | {r['compile_s']:.1f} ({r['compiles']} compiles) "
                  f"| {r['graph_s']:.1f} ({r['graphs']} graphs) | {r['report_bytes'] / r['log_bytes']:.2f} "
                  f"({r['log_bytes'] / 1e6:.1f} MB log) |", flush=True)
    print(f"logs and reports: {work}")


if __name__ == "__main__":
    main()
