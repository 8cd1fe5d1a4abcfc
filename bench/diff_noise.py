"""How often does `thunder-trace diff` call noise a change? Two processes of one program, one after the other.

For each program, ROUNDS pairs of runs (each its own process, logged with THUNDER_TRACE and
profiled: THUNDER_TRACE_PROFILE=CALLS), run one after the other, optionally with LOAD busy
processes (pure-Python spin loops) beside them; each pair diffed (provenance.diff.compare). Reported
per program: the pairs with any significant change, the significant changes by metric, and the
compile-time changes the rule before issue 47 (25% and 0.1 s alone) would have called significant
against the rule now (the phases must all have moved that way: docs/diff.md).

    python bench/diff_noise.py [--programs diff,hf-llama] [--rounds 5] [--calls 5] [--load 1]
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

import harness

PROGRAMS = {  # name -> (the program's command line, its environment)
    "diff": ([str(harness.SUPPORT / "diff_program.py")], {"OMP_NUM_THREADS": "1"}),
    "hf-llama": ([str(harness.SUPPORT / "hf_program.py"), "llama"], {"OMP_NUM_THREADS": "1"}),
}


def _run(program: str, logs: Path, calls: int) -> Path:
    import subprocess

    args, env = PROGRAMS[program]
    base = {k: v for k, v in os.environ.items() if not k.startswith("THUNDER_TRACE")}
    env = {**base, **env, "THUNDER_TRACE": str(logs), "THUNDER_TRACE_PROFILE": str(calls),
           "PYTHONPATH": os.pathsep.join([str(harness.ROOT), str(harness.SUPPORT)])}
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise SystemExit(f"{program}: {done.stderr[-2000:]}")
    return logs


def _old_rule(change) -> bool:
    from provenance.diff.compare import COMPILE_MIN_S, COMPILE_RATIO

    grew = change.after - change.before
    return abs(grew) >= COMPILE_MIN_S and abs(grew) >= COMPILE_RATIO * max(change.before, 1e-9)


def measure(program: str, rounds: int, calls: int, load: int) -> list[object]:
    from provenance.diff.compare import compare
    from provenance.diff.read import read_side

    flagged = 0
    metrics: Counter[str] = Counter()
    compile_changes = old = new = 0
    with harness.busy(load), tempfile.TemporaryDirectory() as tmp:
        for k in range(rounds):
            a = _run(program, Path(tmp) / f"{k}a", calls)
            b = _run(program, Path(tmp) / f"{k}b", calls)
            diff = compare(read_side(str(a)), read_side(str(b)))
            flagged += bool(diff.significant)
            for c in diff.significant:  # what a false positive was, for the record
                print(f"{program} pair {k}: {c.title}: {c.before} -> {c.after} {c.unit}; {'; '.join(c.details[:2])}",
                      file=sys.stderr)
            metrics.update(c.metric or c.kind for c in diff.significant)
            for change in diff.changes:
                if change.metric == "compile_time":
                    compile_changes += 1
                    old += _old_rule(change)
                    new += change.significant
    by_metric = ", ".join(f"{m}: {n}" for m, n in metrics.most_common()) or "none"
    return [program, load, rounds, flagged, by_metric, compile_changes, old, new]


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--programs", default="diff,hf-llama")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--load", type=int, default=1, help="busy processes beside the runs")
    args = parser.parse_args()
    rows = [measure(p, args.rounds, args.calls, args.load) for p in args.programs.split(",")]
    print(harness.markdown(["program", "busy processes", "pairs", "pairs with a significant change",
                            "significant changes by metric", "compile-time changes compared",
                            "significant by the rule before", "significant now"], rows))


if __name__ == "__main__":
    main()
