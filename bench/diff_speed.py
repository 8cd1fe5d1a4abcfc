"""`thunder-trace diff` on two large logs vs `thunder-trace report` on one: wall time and peak RSS.

Two real, profiled THUNDER_TRACE logs of tests/support/diff_program.py (A: gelu, B: relu, each
with its per-call profile and static memory records) are each replicated into one large log, as
one long process that recompiled many times would write it: every record of a compile (start,
traces, phases, memory, profile records, end) is copied with a new compile id, the next
recompile index and later times; the provenance records are written once. So every compile of B
matches one of A and differs from it (the line changed): the diff's worst case of real changes.

Alternating, --runs times: the report of A (`-j 1`, as the diff reads: one process), the diff
(terminal summary, nothing written), the diff with its page (`-o`: both reports and the page).
Each is a fresh subprocess; wall seconds and peak RSS (bench/report_throughput.py's measure),
medians printed with their ratios to the report's.

    python bench/diff_speed.py [--size-mb 60] [--runs 3] [--work DIR] [--no-html]
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import harness
import orjson
from report_throughput import LogWriter, measure  # bench/: the script's own folder, first on the path

ROOT = harness.ROOT

PROGRAM = ROOT / "tests" / "support" / "diff_program.py"
ONCE = ("prov", "span", "span_end", "library")


def base_log(work: Path, name: str, **env: str) -> Path:
    logs = work / name
    shutil.rmtree(logs, ignore_errors=True)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("THUNDER_TRACE")}
    subprocess.run([sys.executable, str(PROGRAM)], check=True, capture_output=True,
                   env={**clean, **env, "THUNDER_TRACE": str(logs), "THUNDER_TRACE_PROFILE": "8"})
    return next(logs.glob("*.jsonl"))


def replicate(base: Path, target: Path, size: int) -> int:
    """Copies of the base log's compiles (renumbered) until `target` holds `size` bytes."""
    records = [orjson.loads(line) for line in base.read_bytes().splitlines() if line.strip()]
    header = records[0]
    once = [r for r in records if r["type"] in ONCE]
    compiled = [r for r in records if r["type"] not in ONCE and r["type"] not in ("header", "calls")]
    calls = [r for r in records if r["type"] == "calls"]
    ids = sorted({r["compile"] for r in compiled if isinstance(r.get("compile"), int)})
    times = [r[k] for r in compiled for k in ("time_ns", "start_ns", "end_ns") if isinstance(r.get(k), int)]
    span = max(times) - min(times) + 1_000_000
    copy = 0
    every: list[int] = []
    with open(target, "wb") as f:
        log = LogWriter(f)
        put = log.put
        put(header)
        for r in once:
            put(r)
        while log.written < size:
            for record in compiled:
                r = dict(record)
                if isinstance(r.get("compile"), int):
                    r["compile"] = record["compile"] + copy * len(ids)
                for key in ("time_ns", "start_ns", "end_ns"):
                    if isinstance(r.get(key), int):
                        r[key] += copy * span
                if r["type"] == "compile_start":
                    r["index"] = copy
                    every.append(r["compile"])
                put(r)
            copy += 1
        for c in calls:
            rest = {k: v for k, v in c.items() if k != "compile_hits"}  # each copy's own hits: not known
            put({**rest, "compiles": every, "calls": c["calls"] + copy, "cache_misses": copy})
    return copy


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--size-mb", type=float, default=60)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--no-html", action="store_true", help="skip the diff with -o")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="diff_speed_"))
    work.mkdir(parents=True, exist_ok=True)
    size = int(args.size_mb * (1 << 20))
    a, b = work / "a.jsonl", work / "b.jsonl"
    copies = replicate(base_log(work, "base_a"), a, size)
    replicate(base_log(work, "base_b", DIFF_ACT="relu"), b, size)
    print(f"A {a.stat().st_size / 1e6:.1f} MB, B {b.stat().st_size / 1e6:.1f} MB ({copies} compiles each)")
    cli = [sys.executable, "-m", "provenance.report"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    tools = {"report A (-j 1)": lambda out: [*cli, "report", str(a), "-o", str(out), "-j", "1", "--no-browser"],
             "diff A B": lambda out: [*cli, "diff", str(a), str(b)]}
    if not args.no_html:
        tools["diff A B -o"] = lambda out: [*cli, "diff", str(a), str(b), "-o", str(out)]
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in tools}
    for run in range(args.runs):
        for name, command in tools.items():
            out = work / "out"
            shutil.rmtree(out, ignore_errors=True)
            wall, rss, code, err, _cpu = measure(command(out), env)
            assert code == 0, err[-2000:]
            results[name].append((wall, rss))
            print(f"run {run + 1} {name}: {wall:.1f} s, {rss:.0f} MB, load {os.getloadavg()[0]:.1f}", flush=True)
    base_wall = statistics.median(w for w, _ in results["report A (-j 1)"])
    base_rss = statistics.median(r for _, r in results["report A (-j 1)"])
    print(f"\nmedians of {args.runs} runs, alternating:")
    for name, values in results.items():
        wall, rss = statistics.median(w for w, _ in values), statistics.median(r for _, r in values)
        print(f"  {name:18} {wall:7.1f} s ({wall / base_wall:.2f}x)  {rss:7.0f} MB ({rss / base_rss:.2f}x)")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
