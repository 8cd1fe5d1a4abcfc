"""Compile + first call overhead of provenance capture (issue 2's benchmark).

nanoGPT (thunder.tests.nanogpt_model), N layers, forward + backward: `thunder.jit(model)` plus
the first forward and backward, on a freshly built model each time.

- on/off: one process, after a warm-up compile in each mode, pairs of compiles with tracing
  enabled and disabled, the order alternating between pairs; the ratio is taken within each
  pair (neighbours in time share the machine's state), and the median ratio is reported.
- disabled/plain: fresh processes, package imported but not enabled vs not imported at all.
- with --log-dir: from the logs' own `phases` records (timed in process, immune to the machine's
  noise), the share of each compile's wall time in named phases and in this package's own
  `provenance` phases; and a recompile (a new sequence length) of the same model: what reading
  its reason (re-running the cached entry's prologue) costs, next to Thunder's own cache lookup.

    python bench/compile_overhead.py [--pairs 9] [--layers 4] [--processes 5] [--log-dir DIR]
                                     [--versus off|no-phase-hooks]
"""

from __future__ import annotations

import gc
import json
import statistics
import time
import warnings

import harness

warnings.filterwarnings("ignore")


def compile_once(layers: int) -> tuple[float, float, int]:
    import thunder
    import torch

    torch.manual_seed(0)
    model = harness.nanogpt(layers)
    x = torch.randint(0, 128, (2, 32))
    gc.collect()  # the previous sample's garbage must not be collected on this sample's clock
    wall, cpu = time.perf_counter(), time.process_time()
    jm = thunder.jit(model)
    logits, _ = jm(x)
    logits.sum().backward()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    bsyms = len(thunder.last_traces(jm)[-1].bound_symbols) + len(thunder.last_backward_traces(jm)[-1].bound_symbols)
    return wall, cpu, bsyms


def on_off(pairs: int, layers: int, log_dir: str | None, versus: str = "off") -> None:
    """`on`: capture (provenance.enable()), or with `log_dir` capture + JSONL logs (what
    THUNDER_TRACE does); against `off` (provenance.disable()), or, with versus="no-phase-hooks",
    against the same with the compile-phase wrappers of provenance/thunder/phases.py left out
    (what timing every phase costs)."""
    import provenance
    from provenance.thunder import phases

    def run(mode: str) -> tuple[float, float, int]:
        provenance.disable()
        if mode == "on":
            provenance.enable(log_dir)
        elif versus == "no-phase-hooks":
            install, phases.install = phases.install, lambda patcher: None
            try:
                provenance.enable(log_dir)
            finally:
                phases.install = install
        return compile_once(layers)

    run("on"), run("off")  # warm-up: imports, kernels, caches
    walls, cpus = [], []
    for i, order in harness.pairs(pairs, "on", "off"):
        got = {mode: run(mode) for mode in order}
        walls.append(got["on"][0] / got["off"][0])
        cpus.append(got["on"][1] / got["off"][1])
        print(f"pair {i + 1}: on {got['on'][0]:.2f}s {versus} {got['off'][0]:.2f}s  ratio {walls[-1]:.3f}",
              flush=True)
    provenance.disable()
    what = f"capture + JSONL logs in {log_dir}" if log_dir else "capture only"
    print(f"nanoGPT {layers} layers fwd+bwd ({got['on'][2]} bound symbols in the final traces), {pairs} pairs, "
          f"on = {what}")
    print(f"median ratio on/{versus}: wall {statistics.median(walls):.3f}, cpu {statistics.median(cpus):.3f}")


def disabled_vs_plain(processes: int, layers: int) -> None:
    ratios = []
    for i, order in harness.pairs(processes, "imported", "plain"):
        got = {}
        for mode in order:
            out = harness.run_child("compile_overhead_child.py", mode, layers, check=True)
            got[mode] = json.loads(out.stdout.strip().splitlines()[-1])[0]
        ratios.append(got["imported"] / got["plain"])
        print(f"process pair {i + 1}: imported-disabled {got['imported']:.2f}s plain {got['plain']:.2f}s", flush=True)
    print(f"median ratio imported-but-disabled/plain: {statistics.median(ratios):.3f}")


def phase_shares(log_dir: str) -> None:
    """Median shares of the compiles' wall time, from the logs' phases records."""
    import glob

    import orjson

    named, ours = [], []
    for path in glob.glob(f"{log_dir}/*.jsonl"):
        for line in open(path, "rb"):
            record = orjson.loads(line)
            if record.get("type") != "phases":
                continue
            window = record["end_ns"] - record["start_ns"]
            top = [p for p in record["phases"] if p[3] == 0]
            named.append(sum(p[2] - p[1] for p in top) / window)
            ours.append(sum(p[2] - p[1] for p in top if p[0] == "provenance") / window)
    print(f"{len(named)} logged compiles: named phases cover a median {statistics.median(named):.2%} "
          f"(min {min(named):.2%}) of the wall time; this package's own phases {statistics.median(ours):.2%}")


def wrapper_cost(log_dir: str) -> None:
    """What one phase wrapper costs inside a compile (timeit on a no-op), times the phases a
    logged compile records: the phase hooks' whole cost per compile."""
    import glob
    import timeit

    import orjson
    from thunder.common import CompileStats
    from thunder.core.compile_data import compile_data_and_stats

    from provenance.thunder import phases
    from provenance.thunder.state import COMPILE_ATTR, CompileState

    counts = [len(r["phases"]) for path in glob.glob(f"{log_dir}/*.jsonl")
              for r in map(orjson.loads, open(path, "rb")) if r.get("type") == "phases"]
    stats = CompileStats()
    setattr(stats, COMPILE_ATTR, CompileState(id=1))
    noop = phases.timed(lambda: None, "bench")
    with compile_data_and_stats(None, stats):
        n = 100_000
        wrapped = min(timeit.repeat(noop, number=n, repeat=5)) / n
        getattr(stats, COMPILE_ATTR).phases.items.clear()
    plain = min(timeit.repeat(lambda: None, number=n, repeat=5)) / n
    per = wrapped - plain
    print(f"one phase wrapper: {per * 1e9:.0f} ns; a logged compile records a median {statistics.median(counts)} "
          f"phases: {per * statistics.median(counts) * 1e6:.1f} us per compile")


def recompile_cost(layers: int, log_dir: str, repeats: int = 5) -> None:
    """A recompile of nanoGPT (a new sequence length): reading why (our re-run of the rejected
    entry's prologue) against Thunder's cache lookup, both from the log's phases."""
    import glob
    import tempfile

    import orjson
    import thunder
    import torch

    import provenance

    ours, lookups = [], []
    for _ in range(repeats):
        out = tempfile.mkdtemp(dir=log_dir)
        provenance.enable(out)
        jm = thunder.jit(harness.nanogpt(layers))
        jm(torch.randint(0, 128, (2, 32)))
        jm(torch.randint(0, 128, (2, 16)))  # rejected by the first entry's prologue: a recompile
        provenance.disable()
        found = [r for r in map(orjson.loads, open(glob.glob(f"{out}/*.jsonl")[0], "rb"))
                 if r.get("type") == "phases"]
        phases = found[1]["phases"]  # the recompile's
        ours.append(next(p[2] - p[1] for p in phases if p[4] == "compile start") / 1e6)
        lookups.append(next(p[2] - p[1] for p in phases if p[0] == "cache_lookup") / 1e6)
    print(f"recompile of nanoGPT {layers} layers, {repeats} runs: reading its reason "
          f"(provenance 'compile start' phase) median {statistics.median(ours):.2f} ms; "
          f"Thunder's cache lookup {statistics.median(lookups):.2f} ms")


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--pairs", type=int, default=9)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--processes", type=int, default=5, help="process pairs for disabled/plain (0: skip)")
    parser.add_argument("--log-dir", help="also write JSONL logs there when on (THUNDER_TRACE's cost)")
    parser.add_argument("--versus", choices=("off", "no-phase-hooks"), default="off",
                        help="what `on` is compared with: tracing off, or on without the phase wrappers")
    args = parser.parse_args()
    on_off(args.pairs, args.layers, args.log_dir, args.versus)
    if args.log_dir:
        phase_shares(args.log_dir)
        wrapper_cost(args.log_dir)
        recompile_cost(args.layers, args.log_dir)
    if args.processes:
        disabled_vs_plain(args.processes, args.layers)


if __name__ == "__main__":
    main()
