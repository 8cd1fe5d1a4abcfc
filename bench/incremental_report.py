"""Incremental reports (issue 48): append one compile to a log, report again into the OUT of the report
before it, against a fresh build of the whole log: wall time, CPU, and `diff -r` of the two reports.

For each log: its state before its last compile (the log cut at the start of its last compile no other
compile was open around: provenance/report/incremental.py's `last_start`) is reported once into BASE;
then the rest of the log (the last compile, the exit's summaries) is appended. Each round, alternating:
BASE copied to a fresh OUT (not timed) and reported again (incremental), and a fresh build of the
whole log into an empty OUT (by default: the worker processes a report picks; and -j 1). A fresh
process each, timed as bench/report_throughput.py times them (wall, CPU of the process tree, peak RSS).

    python bench/incremental_report.py --logs A.jsonl,B.jsonl [--runs 5] [--work /dev/shm/inc]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import harness
from report_throughput import measure

sys.path.insert(0, str(harness.ROOT))
from provenance.report.incremental import last_start


def _report(log_dir: Path, out: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "provenance", "report", str(log_dir), "-o", str(out), "--no-browser", *flags]


def bench(log: Path, work: Path, runs: int) -> list[object]:
    logs, base = work / "logs", work / "base"
    shutil.rmtree(work, ignore_errors=True)
    logs.mkdir(parents=True)
    target = logs / log.name
    size = log.stat().st_size
    cut = last_start(log, size)
    with open(log, "rb") as src, open(target, "wb") as dst:
        dst.write(src.read(cut))
        code, err = measure(_report(logs, base))[2:4]
        assert code == 0, err
        dst.write(src.read())  # the last compile and what follows it: appended
    took = {"incremental": [], "full": [], "full -j 1": []}
    peak = {name: [] for name in took}
    for _, order in harness.pairs(runs, "incremental", "full"):
        for name in order + (("full -j 1",) if order[0] == "incremental" else ()):
            out = work / name.replace(" ", "")
            shutil.rmtree(out, ignore_errors=True)
            if name == "incremental":
                shutil.copytree(base, out, symlinks=True)
                command = _report(logs, out)
            else:
                command = _report(logs, out, *(("-j", "1") if "-j" in name else ()))
            wall, rss, code, err, cpu, _ = measure(command)
            assert code == 0, err
            if name == "incremental":
                assert "taken up" in err, err
            took[name].append((wall, cpu))
            peak[name].append(rss)
    diff = subprocess.run(["diff", "-r", "-x", ".thunder-trace-state", str(work / "incremental"), str(work / "full")],
                          capture_output=True, text=True)
    compiles = sum(1 for line in open(log, "rb") if line.startswith(b'{"type":"compile_start"'))
    walls = {name: harness.spread([w for w, _ in v]) for name, v in took.items()}
    cpus = {name: harness.spread([c for _, c in v]) for name, v in took.items()}
    ratio = harness.spread([i[1] / f[1] for i, f in zip(took["incremental"], took["full"])])
    print(f"{log.name}: diff -r: {'empty' if not diff.stdout and diff.returncode == 0 else diff.stdout[:500]}",
          file=sys.stderr)
    return [f"{log.name} ({size / 1e6:.0f} MB, {compiles} compiles)",
            walls["incremental"].text(2, " s"), cpus["incremental"].text(2, " s"),
            walls["full"].text(2, " s"), cpus["full"].text(2, " s"), cpus["full -j 1"].text(2, " s"),
            f"{100 * ratio.median:.1f}% ({100 * ratio.low:.1f}–{100 * ratio.high:.1f})",
            f"{harness.median(peak['incremental']):.0f} MB",
            "empty" if not diff.stdout and diff.returncode == 0 else "DIFFERS"]


def main() -> None:
    parser = harness.parser(__doc__, full=True)
    parser.add_argument("--logs", required=True, help="comma-separated log files")
    parser.add_argument("--runs", type=int, default=5, help="alternating pairs per log")
    parser.add_argument("--work", default="/dev/shm/thunder-trace-incremental", help="logs and reports (a tmpfs)")
    args = parser.parse_args()
    rows = [bench(Path(log), Path(args.work), args.runs) for log in args.logs.split(",")]
    shutil.rmtree(args.work, ignore_errors=True)
    print(harness.markdown(["log", "incremental: wall", "incremental: CPU", "full build: wall", "full build: CPU",
                            "full -j 1: CPU", "incremental CPU / full CPU (per pair)", "incremental peak RSS",
                            "diff -r vs full"], rows))


if __name__ == "__main__":
    main()
