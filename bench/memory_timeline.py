"""Capture cost of the static memory timeline (docs/memory.md) and the log size it adds: nanoGPT.

    python bench/memory_timeline.py [--layers 4]                 # timed in process, and the log size
    python bench/memory_timeline.py --instructions [--layers 2]  # counted under callgrind (~10 min)

Timed: the mean of 20 rebuilds of the timeline from a compile's final traces. Counted
(bench/instructions.py's approach: `valgrind --tool=callgrind --instr-atstart=no`, only the samples
instrumented): three rebuilds of the timeline, and one whole compile of a fresh model (thunder.jit,
capture on, the first forward and backward; its own timeline included) for the ratio.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness


def _model(layers: int):
    return harness.nanogpt(layers, block_size=64, vocab_size=256)


def _compile(layers: int):
    import thunder
    import torch

    jm = thunder.jit(_model(layers))
    idx = torch.randint(0, 256, (2, 64))
    jm(idx, idx)[1].backward()
    return jm


def _symbols(jm) -> int:
    import thunder

    return len(thunder.last_traces(jm)[-1].bound_symbols) + len(thunder.last_backward_traces(jm)[-1].bound_symbols)


def timed(layers: int) -> None:
    import thunder

    import provenance
    from provenance.thunder import memory as m

    logdir = os.environ.get("LOGDIR", "/tmp/memory_bench_log")
    provenance.enable(logdir)
    jm = _compile(layers)
    entry = thunder.compile_stats(jm).interpreter_cache[0]
    t = time.perf_counter()
    for _ in range(20):
        m.compile_memory(1, "x", entry)
    print("timeline ms per compile", (time.perf_counter() - t) / 20 * 1e3, "bsyms", _symbols(jm))
    provenance.disable()
    [p] = glob.glob(os.path.join(logdir, "*.jsonl"))
    mem = sum(len(line) for line in open(p, "rb") if line.startswith(b'{"type":"memory"'))
    print("log bytes", os.path.getsize(p), "memory records bytes", mem)


def child(layers: int, helper: str) -> None:
    """Under valgrind: warm up, then the instrumented samples, each one callgrind dump."""
    import thunder
    import torch

    import provenance
    from provenance.thunder import memory as m

    torch.set_num_threads(1)
    cg = ctypes.CDLL(helper)
    provenance.enable()
    jm = _compile(layers)  # warm-up: imports, first compile
    entry = thunder.compile_stats(jm).interpreter_cache[0]
    m.compile_memory(1, "x", entry)
    for n in range(3):
        cg.cg_start()
        m.compile_memory(1, "x", entry)
        cg.cg_stop(f"timeline-{n}".encode())
    cg.cg_start()
    fresh = _compile(layers)
    cg.cg_stop(b"compile-0")
    print("symbols", _symbols(fresh), flush=True)
    provenance.disable()


def counted(layers: int) -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from instructions import _build_helper, _totals

    out = Path(tempfile.mkdtemp(prefix="memory-instructions-"))
    helper = _build_helper(out)
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}/callgrind.out.%p",
           sys.executable, os.path.abspath(__file__), "--layers", str(layers), "--helper", str(helper)]
    done = subprocess.run(cmd, check=True, env=dict(os.environ, PYTHONHASHSEED="0"), stderr=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, text=True)
    print(done.stdout.strip())
    totals = _totals(out)
    timeline = [t["Ir"] for k, t in totals.items() if k.startswith("timeline-")]
    whole = totals["compile-0"]["Ir"]
    median = statistics.median(timeline)
    print(f"nanoGPT {layers} layers: timeline {median / 1e6:.1f} M instructions (median of {len(timeline)}, "
          f"spread {(max(timeline) - min(timeline)) / min(timeline):.2%}); a whole compile with capture on "
          f"{whole / 1e9:.2f} G: the timeline is {median / whole:.2%} of it; dumps in {out}")


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--layers", type=int, default=None, help="nanoGPT layers (default: 4 timed, 2 counted)")
    parser.add_argument("--instructions", action="store_true", help="count instructions under callgrind")
    parser.add_argument("--helper", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.helper:
        return child(args.layers, args.helper)
    if args.instructions:
        return counted(args.layers or 2)
    return timed(args.layers or 4)


if __name__ == "__main__":
    main()
