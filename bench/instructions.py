"""Capture's compile overhead counted in instructions (callgrind), not timed.

On a shared 2-core machine one wall-clock pair of compiles ranges 0.8-1.5 (bench/thunderfx.py),
so a median of a dozen resolves about ±5%; instruction counts of the same work differ by a few
hundredths of a percent between runs. This runs bench/thunderfx.py's sample (nanoGPT, a fresh
model, `thunderfx(model)` plus the first forward and backward) under
`valgrind --tool=callgrind --instr-atstart=no`: only the samples are instrumented (client
requests from a five-line C helper built here with gcc), everything else (imports, warm-ups,
the untimed compile after each on/off switch) runs uninstrumented. Each sample is one callgrind
dump, kept for `callgrind_annotate` (the dump directory is printed).

What it does not see: cache misses and branch mispredictions (instructions are not cycles), and
time spent waiting. What it does see, unlike cProfile: every instruction of the interpreter, the
garbage collector and torch's C++ code, with no profiler overhead distorting small calls.

    python bench/instructions.py [--layers 2] [--rounds 2] [--entry thunderfx|thunder.jit] [--model nanoGPT|hf-llama]
                                 [--versus off|torch-trace] [--cache-sim] [--out DIR]

`--versus torch-trace`: both sides log (THUNDER_TRACE's JSONL exporter), "on" with torch's structured
trace captured (provenance/thunder/torch_trace.py), "off" with THUNDER_TRACE_TORCH=0.

Needs valgrind (with its headers: Debian's `valgrind` package has them) and gcc. Slow: a 2-layer
thunderfx sample is ~5 s natively and ~5 min instrumented; rounds are on,off then off,on.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import statistics
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import harness


def _build_helper(directory: Path) -> Path:
    lib = directory / "libcg.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(lib), str(harness.child("cg.c"))], check=True)
    return lib


def child(args: argparse.Namespace) -> None:
    """Runs under valgrind: warm up, then the rounds, each sample instrumented and dumped."""
    import warnings

    warnings.filterwarnings("ignore")
    import thunderfx
    import torch

    import provenance

    torch.set_num_threads(1)
    thunderfx.join_frame_threads()  # else ~80% of the instructions are a spin on time
    thunderfx.ENTRY, thunderfx.MODEL = args.entry, args.model
    cg = ctypes.CDLL(args.helper)

    logs = tempfile.mkdtemp(prefix="instructions-logs-")

    def switch(mode: str) -> None:
        provenance.disable()
        if args.versus == "torch-trace":  # both logged (THUNDER_TRACE); off: without torch's structured trace
            os.environ["THUNDER_TRACE_TORCH"] = "1" if mode == "on" else "0"
            provenance.enable(logs)
        elif mode == "on":
            provenance.enable()
        thunderfx._compile_once(args.layers)  # untimed: the switch's own effects stay out

    def sample(mode: str, n: int) -> None:
        @contextmanager
        def region():
            cg.cg_start()
            try:
                yield
            finally:
                cg.cg_stop(f"{mode}-{n}".encode())

        switch(mode)
        thunderfx._compile_once(args.layers, region)
        print(f"sample {mode}-{n} done", flush=True)

    switch("on"), switch("off")  # warm-up: imports, Dynamo, caches
    for n, order in harness.pairs(args.rounds, "on", "off"):
        for mode in order:
            sample(mode, n)


def _totals(out: Path) -> dict[str, dict[str, int]]:
    """Each dump's label (`on-0`, ...) -> its events (Ir: instructions executed; with
    --cache-sim, the cache misses too) and `CEst`, callgrind_annotate's cycle estimate
    (Ir + 10 per first-level miss + 100 per last-level miss)."""
    found = {}
    for dump in out.glob("callgrind.out.*"):
        text = dump.read_text(errors="replace")
        label = re.search(r"^desc: Trigger: Client Request: (\S+)", text, re.M)
        names = re.search(r"^events: (.+)$", text, re.M)
        total = re.search(r"^(?:totals|summary): ([\d ]+)$", text, re.M)
        if label and names and total:
            events = dict(zip(names.group(1).split(), map(int, total.group(1).split())))
            l1 = sum(events.get(e, 0) for e in ("I1mr", "D1mr", "D1mw"))
            ll = sum(events.get(e, 0) for e in ("ILmr", "DLmr", "DLmw"))
            if "D1mr" in events:  # simulated caches: a cycle estimate
                events["CEst"] = events["Ir"] + 10 * l1 + 100 * ll
            found[label.group(1)] = events
    return found


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2, help="pairs of samples (on,off then off,on ...)")
    parser.add_argument("--entry", choices=("thunderfx", "thunder.jit"), default="thunderfx")
    parser.add_argument("--model", choices=("nanoGPT", "hf-llama"), default="nanoGPT")
    parser.add_argument("--out", type=Path, help="where callgrind's dumps go (default: a new temporary folder)")
    parser.add_argument("--cache-sim", action="store_true",
                        help="simulate the caches too (about twice as slow): adds a cycle estimate")
    parser.add_argument("--versus", choices=("off", "torch-trace"), default="off",
                        help="off: capture on vs off; torch-trace: logged with torch's structured trace vs without")
    parser.add_argument("--helper", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.helper:
        return child(args)
    out = args.out or Path(tempfile.mkdtemp(prefix="instructions-"))
    out.mkdir(parents=True, exist_ok=True)
    helper = _build_helper(out)
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
           f"--cache-sim={'yes' if args.cache_sim else 'no'}", f"--callgrind-out-file={out}/callgrind.out.%p",
           sys.executable, os.path.abspath(__file__), "--layers", str(args.layers), "--rounds", str(args.rounds),
           "--entry", args.entry, "--model", args.model, "--versus", args.versus, "--helper", str(helper)]
    env = dict(os.environ, PYTHONHASHSEED="0")
    subprocess.run(cmd, check=True, env=env, stderr=subprocess.DEVNULL)
    totals = _totals(out)
    for key in sorted(totals, key=lambda k: (k.split("-")[1], k)):
        print(f"{key}: " + ", ".join(f"{e} {n / 1e9:.3f} G" for e, n in totals[key].items()))
    measures = ("Ir", "CEst") if args.cache_sim else ("Ir",)
    for measure in measures:
        on = [t[measure] for k, t in totals.items() if k.startswith("on-")]
        off = [t[measure] for k, t in totals.items() if k.startswith("off-")]
        if on and off:
            ratio = statistics.median(on) / statistics.median(off)
            print(f"{args.entry}({args.model} {args.layers} layers) fwd+bwd, {len(on)}+{len(off)} samples, {measure}: "
                  f"median on {statistics.median(on) / 1e9:.3f} G, off {statistics.median(off) / 1e9:.3f} G, "
                  f"ratio {ratio:.4f}; spread on {(max(on) - min(on)) / min(on):.2%}, "
                  f"off {(max(off) - min(off)) / min(off):.2%}")
    print(f"dumps in {out} (callgrind_annotate FILE)")


if __name__ == "__main__":
    main()
