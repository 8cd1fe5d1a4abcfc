"""Cost of per-op profiling (issue 12's benchmark), and how much of the time the ops cover.

nanoGPT (thunder.tests.nanogpt_model), N layers, CPU, one training call = forward + backward.
One model, three `thunder.jit`s of it in one process:
- profiled: compiled with `provenance.enable(profile=10**9)`: every call after the first is timed;
- plain: compiled with `profile=0`: Thunder's code, no dispatcher;
- after: compiled with `profile=2`, called 3 times first: its window is over, it runs Thunder's
  generated code again.
Rounds of one call each, the order rotating between rounds; ratios are taken within a round
(neighbours in time share the machine's state) and the median ratio is reported, of wall time
and of process CPU time (less sensitive to other processes on a shared machine).

Coverage: attributed op time / profiled wall time (`CompileProfile.coverage`, computed in process
from the same timestamps), for nanoGPT and llama2 (thunder.tests.llama2_model).

    python bench/profile_overhead.py [--layers 4] [--rounds 200] [--threads 1] [--json out.json]
"""

from __future__ import annotations

import gc
import json
import statistics
import time
import warnings

import harness

warnings.filterwarnings("ignore")


def step(jm, x) -> tuple[float, float]:
    """One forward + backward: (wall, process CPU time) in seconds."""
    began, cpu = time.perf_counter(), time.process_time()
    out = jm(x)
    (out[0] if isinstance(out, tuple) else out).sum().backward()
    return time.perf_counter() - began, time.process_time() - cpu


def jit_with(profile: int, model, x):
    """Jit and compile now: the profile setting applies at compile time (the first call)."""
    import thunder

    import provenance

    provenance.enable(profile=profile)
    jm = thunder.jit(model)
    step(jm, x)
    return jm


def overhead(layers: int, rounds: int) -> dict:
    import torch

    import provenance

    torch.manual_seed(0)
    model = harness.nanogpt(layers)
    x = torch.randint(0, 128, (2, 32))
    fns = {"profiled": jit_with(10**9, model, x), "plain": jit_with(0, model, x), "after": jit_with(2, model, x)}
    for jm in fns.values():  # warm up; `after` runs its window out
        for _ in range(3):
            step(jm, x)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
    names = list(fns)
    gc.collect()
    gc.disable()  # a collection would land on one call of a round
    try:
        for i in range(rounds):
            for name in names[i % 3:] + names[:i % 3]:
                times[name].append(step(fns[name], x))
            if i % 20 == 19:
                gc.enable(), gc.collect(), gc.disable()
    finally:
        gc.enable()
    def ratio(name: str, clock: int) -> float:
        return statistics.median(p[clock] / q[clock] for p, q in zip(times[name], times["plain"]))

    def ms(name: str) -> float:
        return statistics.median(t[0] for t in times[name]) * 1e3

    (profile,) = provenance.profiles(fns["profiled"])
    ops = sum(len(t.ops) for t in profile.traces.values())
    assert profile.calls >= rounds, profile.calls  # every round's call was timed
    return {
        "layers": layers, "rounds": rounds, "ops_timed_per_call": ops,
        "plain_ms": ms("plain"), "profiled_ms": ms("profiled"), "after_ms": ms("after"),
        "profiled_over_plain": ratio("profiled", 0), "after_over_plain": ratio("after", 0),
        "profiled_over_plain_cpu": ratio("profiled", 1), "after_over_plain_cpu": ratio("after", 1),
        "coverage_nanogpt": profile.coverage, "coverage_nanogpt_median_call": per_call_coverage(profile),
        "profiled_calls": profile.calls,
    }


def per_call_coverage(profile) -> float:
    """Median over the last calls (forward and backward together) of attributed / wall."""
    forward, backward = (profile.traces[name].recent for name in ("forward", "backward"))
    return statistics.median(
        (sum(f.op_ns) + sum(b.op_ns)) / (f.wall_ns + b.wall_ns) for f, b in zip(forward, backward))


def coverage_llama2(layers: int, calls: int) -> tuple[float, float]:
    import torch
    from thunder.tests.llama2_model import ModelArgs, Transformer

    import provenance

    torch.manual_seed(0)
    model = Transformer(ModelArgs(dim=64, n_layers=layers, n_heads=4, vocab_size=128, multiple_of=16,
                                  max_seq_len=32))
    x = torch.randint(0, 128, (2, 32))
    jm = jit_with(calls, model, x)
    for _ in range(calls):
        step(jm, x)
    (profile,) = provenance.profiles(jm)
    return profile.coverage, per_call_coverage(profile)


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    result = overhead(args.layers, args.rounds)
    result["coverage_llama2"], result["coverage_llama2_median_call"] = coverage_llama2(args.layers, 8)
    result["threads"] = torch.get_num_threads()
    for key, value in result.items():
        print(f"{key:>22}: {value:.3f}" if isinstance(value, float) else f"{key:>22}: {value}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
