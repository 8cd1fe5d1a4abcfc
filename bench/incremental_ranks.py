"""Incremental reports of a job of many ranks (issue 57): every rank's log grows by one compile, then the
report is built again into the OUT of the report before it, against a fresh build of the same logs.

One real log is made once (a small MLP through thunder.jit, a compile per input shape, forward and backward;
`--profiled`: THUNDER_TRACE_PROFILE=2 too) and copied as rank r of a job of N ranks (its header's rank and
world size rewritten). Each copy is cut at the start of its last compile (`incremental.last_start`) and
reported into BASE; then the rest of it (that compile, the exit's summaries) is appended to every rank's log.
Each round, alternating: BASE copied to a fresh OUT (not timed) and reported again (incremental), and a fresh
build into an empty OUT. Fresh processes, timed as bench/report_throughput.py times them (wall, CPU of the
process tree, peak RSS); then `diff -r` of the two reports, and the state's size against the logs'.

    python bench/incremental_ranks.py --ranks 2,16,64,256,1024 [--compiles 16] [--runs 3] [--profiled]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import harness
import orjson
from report_throughput import measure

sys.path.insert(0, str(harness.ROOT))
from provenance.report.incremental import STATE_DIR, last_start


def real_log(work: Path, compiles: int, profiled: bool) -> Path:
    logs = work / f"real-{compiles}{'-profiled' if profiled else ''}"
    found = list(logs.glob("*.jsonl"))
    if found:
        return found[0]
    env = {k: v for k, v in os.environ.items() if k not in ("THUNDER_TRACE", "THUNDER_TRACE_PROFILE", "CI")}
    env.update(THUNDER_TRACE=str(logs), THUNDER_TRACE_PROFILE="2" if profiled else "0")
    harness.run_child("incremental_ranks_child.py", compiles, env=env, check=True, timeout=1800)
    return next(logs.glob("*.jsonl"))


def _report(logs: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "provenance", "report", str(logs), "-o", str(out), "--no-browser"]


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def bench(log: Path, ranks: int, work: Path, runs: int) -> list[object]:
    root = work / f"ranks-{ranks}"
    logs, base = root / "logs", root / "base"
    shutil.rmtree(root, ignore_errors=True)
    logs.mkdir(parents=True)
    data = log.read_bytes()
    header, rest = data.split(b"\n", 1)
    cut = last_start(log, len(data)) - len(header) - 1
    tails = {}
    for rank in range(ranks):
        head = orjson.loads(header)
        head.update(rank=rank, world_size=ranks, pid=10_000 + rank)
        target = logs / f"rank{rank:04}.jsonl"
        target.write_bytes(orjson.dumps(head) + b"\n" + rest[:cut])
        tails[target] = rest[cut:]
    code, err = measure(_report(logs, root / "incremental"))[2:4]  # its state is bound to that path
    assert code == 0, err
    shutil.move(root / "incremental", base)
    for target, tail in tails.items():  # one compile appended to every rank's log
        with open(target, "ab") as f:
            f.write(tail)
    took: dict[str, list[tuple[float, float]]] = {"incremental": [], "fresh": []}
    peak: dict[str, list[float]] = {"incremental": [], "fresh": []}
    for _, order in harness.pairs(runs, "incremental", "fresh"):
        for name in order:
            out = root / name
            shutil.rmtree(out, ignore_errors=True)
            if name == "incremental":
                shutil.copytree(base, out, symlinks=True)
            wall, rss, code, err, cpu, _ = measure(_report(logs, out))
            assert code == 0, err
            if name == "incremental":
                assert f"{ranks} of {ranks} logs taken up" in err or ranks == 1, err
            took[name].append((wall, cpu))
            peak[name].append(rss)
    diff = subprocess.run(["diff", "-r", "-x", STATE_DIR, str(root / "incremental"), str(root / "fresh")],
                          capture_output=True, text=True)
    same = not diff.stdout and diff.returncode == 0
    cpu = {name: harness.spread([c for _, c in v]) for name, v in took.items()}
    wall = {name: harness.spread([w for w, _ in v]) for name, v in took.items()}
    ratio = harness.spread([i[1] / f[1] for i, f in zip(took["incremental"], took["fresh"])])
    state, total = _size(root / "incremental" / STATE_DIR), _size(logs)
    result = [f"{ranks}", f"{total / 1e6:.1f} MB", wall["incremental"].text(2, " s"), cpu["incremental"].text(2, " s"),
              wall["fresh"].text(2, " s"), cpu["fresh"].text(2, " s"),
              f"{100 * ratio.median:.1f}% ({100 * ratio.low:.1f}–{100 * ratio.high:.1f})",
              f"{harness.median(peak['incremental']):.0f} / {harness.median(peak['fresh']):.0f} MB",
              f"{state / 1e6:.1f} MB ({state / total:.2f}×)", "empty" if same else "DIFFERS"]
    shutil.rmtree(root, ignore_errors=True)
    return result


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--ranks", default="2,16,64,256", help="comma-separated rank counts")
    parser.add_argument("--compiles", type=int, default=16, help="compiles in each rank's log")
    parser.add_argument("--runs", type=int, default=3, help="alternating pairs per rank count")
    parser.add_argument("--profiled", action="store_true", help="THUNDER_TRACE_PROFILE=2 logs")
    parser.add_argument("--work", default="/dev/shm/thunder-trace-ranks", help="logs and reports (a tmpfs)")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    log = real_log(work, args.compiles, args.profiled)
    rows = [bench(log, int(n), work, args.runs) for n in args.ranks.split(",")]
    print(harness.markdown(["ranks", "logs", "re-report: wall", "re-report: CPU", "fresh: wall", "fresh: CPU",
                            "re-report CPU / fresh CPU (per pair)", "peak RSS re-report / fresh",
                            "state (of the logs)", "diff -r vs fresh"], rows))


if __name__ == "__main__":
    main()
