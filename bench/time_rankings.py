"""Do the time figures survive noise? The top lines of real models with the machine quiet and loaded.

For each model (nanoGPT under thunder.jit; litgpt, HF Llama and HF GPT2 under ThunderFX), one child process
per run profiles N calls (THUNDER_TRACE_PROFILE, one intra-op thread) of a few training steps and
prints its top lines by `provenance.cost()`: by the median per measured call (the ranking we
show) and, for comparison, by the sum over every profiled call, one-offs included (what the
tables ranked by before issue 21). Runs alternate quiet / loaded; "loaded" starts LOAD busy processes (pure-Python spin
loops, as a CI neighbour would be) for the child's lifetime. Reported per model: the top-5 lines of
each run, whether the top 5 is the same set in every run, and the calls left out (stalls,
executor compiles).

    python bench/time_rankings.py [--models nanogpt,litgpt,hf-llama,hf-gpt2] [--rounds 2] [--calls 5] [--load 3]
                                  [--seq 32]
"""

from __future__ import annotations

import json
import os
import time

import harness

ROOT = harness.ROOT
TOP = 5


def run(name: str, calls: int, load: int, seq: int) -> dict:
    with harness.busy(load):
        env = {**os.environ, "THUNDER_TRACE_PROFILE": str(calls), "PYTHONPATH": str(ROOT)}
        env.pop("THUNDER_TRACE", None)
        start = time.perf_counter()
        done = harness.run_child("time_rankings_child.py", name, calls, seq, TOP, env=env, timeout=1800)
        if done.returncode:
            raise SystemExit(f"{name}: {done.stderr[-2000:]}")
        out = json.loads(done.stdout.strip().splitlines()[-1])
        out["seconds"] = time.perf_counter() - start
        out["loadavg"] = os.getloadavg()[0]
        return out


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--models", default="nanogpt,litgpt,hf-llama")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--load", type=int, default=3, help="busy processes in a loaded run")
    parser.add_argument("--seq", type=int, default=32, help="sequence length of the ThunderFX models' batch")
    args = parser.parse_args()
    for name in args.models.split(","):
        runs = []
        for r in range(args.rounds):
            for state, load in (("quiet", 0), ("loaded", args.load)):
                out = run(name, args.calls, load, args.seq)
                out["state"] = state
                runs.append(out)
                print(f"{name} round {r + 1} {state} (load avg {out['loadavg']:.1f}, {out['seconds']:.0f} s): "
                      f"{out['calls']} measured of {out['profiled']} profiled calls")
                for label, ms, low, high in out["median"]:
                    print(f"    {ms:8.3f} ms  [{low:.3f}-{high:.3f}]  {label}")
                for e in out["excluded"]:
                    print(f"    left out: {e}")
        medians = [[label for label, *_ in r["median"]] for r in runs]
        sums = [[label for label, _ in r["sum"]] for r in runs]
        same = all(set(m) == set(medians[0]) for m in medians)
        same_sum = all(set(m) == set(sums[0]) for m in sums)
        first = all(m[0] == medians[0][0] for m in medians)
        print(f"{name}: top {TOP} by median the same set in all {len(runs)} runs: {same} (same first line: {first}); "
              f"by sum: {same_sum}")


if __name__ == "__main__":
    main()
