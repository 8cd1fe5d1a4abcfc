"""`thunder-trace report` on hostile logs (issue 10): time and peak RSS, before and after a change.

Four shapes at the sizes the issue names, each next to a valid log of the same size (or the same
shape made valid), built by tests/support/hostile_logs.py:

- 1 M bad lines (a header, then lines that are not JSON);
- a 1 MB single trace line (an unterminated string of escaped quotes: the worst case of a
  backtracking string regex);
- a 16 000-op desync (two ranks' final traces of 16 000 random ops each, of 10 symbols);
- 8 000 compiles sharing one compile id.

Each report runs as a fresh subprocess (`-j 1`), with each code tree given as `--code
LABEL=DIR` on its PYTHONPATH (the package's directory: a checkout or an unpacked `git archive`),
the trees alternating; wall time and peak RSS (bench/report_throughput.py's `measure`). A run
past `--timeout` is killed and reported as such.

    python bench/hostile_inputs.py --code before=/tmp/before --code after=. [--runs 3] [--timeout 300]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT / "bench"))

import hostile_logs  # noqa: E402  (tests/: the shapes the tests bound)
from report_throughput import measure  # noqa: E402

CASES = {  # label: (hostile log, the valid log to compare it with)
    "1 M bad lines": (lambda: hostile_logs.bad_lines(1_000_000), None),
    "1 MB single trace line": (lambda: hostile_logs.long_line(1_000_000),
                               lambda: hostile_logs.big_trace(hostile_logs.size(hostile_logs.long_line(1_000_000)))),
    "16 000-op desync": (lambda: hostile_logs.desync(16_000, start=0),
                         lambda: hostile_logs.desync(16_000, differ=False)),
    "8 000 repeated compile ids": (lambda: hostile_logs.repeated_ids(8_000),
                                   lambda: hostile_logs.repeated_ids(8_000, same=False)),
}


def run(code: Path, log: Path, out: Path, timeout: float) -> tuple[float | None, float, int]:
    """(wall seconds or None if killed at the timeout, peak RSS MB, exit status)."""
    shutil.rmtree(out, ignore_errors=True)
    command = ["env", "-u", "THUNDER_TRACE", "-u", "THUNDER_TRACE_PROFILE", f"PYTHONPATH={code}",
               # -P: the working directory is not put on sys.path, PYTHONPATH alone picks the code
               "timeout", "-s", "KILL", str(timeout), sys.executable, "-P", "-m", "provenance.report", "report",
               str(log), "-o", str(out), "-j", "1", "--no-browser"]
    wall, rss, status = measure(command)
    shutil.rmtree(out, ignore_errors=True)
    return (None if status in (124, 137, -9) else wall), rss, status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", action="append", required=True, metavar="LABEL=DIR",
                        help="a code tree to measure (its directory goes on PYTHONPATH); repeat to compare")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300, help="seconds before a run is killed")
    parser.add_argument("--cases", nargs="*", help="labels of the cases to run (default: all)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    codes = {label: Path(path).resolve() for label, path in (c.split("=", 1) for c in args.code)}
    work = Path(tempfile.mkdtemp(prefix="hostile_bench."))
    results = []
    try:
        for case, (hostile, valid) in CASES.items():
            if args.cases and case not in args.cases:
                continue
            logs = {"hostile": hostile(), "valid": None}
            logs["valid"] = valid() if valid else hostile_logs.valid(hostile_logs.size(logs["hostile"]))
            paths = {kind: hostile_logs.write(work / case.replace(" ", "_") / kind, log) for kind, log in logs.items()}
            size = {kind: hostile_logs.size(log) / 1e6 for kind, log in logs.items()}
            samples: dict[tuple[str, str], list] = {}
            for n in range(args.runs):
                order = list(codes.items()) if n % 2 == 0 else list(reversed(codes.items()))
                for label, code in order:
                    for kind, path in paths.items():
                        killed_before = any(w is None for w, _, _ in samples.get((label, kind), []))
                        if killed_before:  # one run past the timeout says it
                            continue
                        samples.setdefault((label, kind), []).append(run(code, path, work / "out", args.timeout))
            for (label, kind), runs in samples.items():
                walls = [w for w, _, _ in runs if w is not None]
                row = {"case": case, "log": kind, "code": label, "mb": round(size[kind], 2), "runs": len(runs),
                       "wall_s": round(statistics.median(walls), 2) if len(walls) == len(runs) else None,
                       "peak_rss_mb": round(statistics.median(r for _, r, _ in runs), 1),
                       "status": sorted({s for _, _, s in runs})}
                results.append(row)
                wall = f"{row['wall_s']:.2f} s" if row["wall_s"] is not None else f"> {args.timeout:.0f} s (killed)"
                print(f"{case:28s} {kind:8s} {label:8s} {row['mb']:7.2f} MB  {wall:>20s}  "
                      f"{row['peak_rss_mb']:7.1f} MB RSS  status {row['status']}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps({"time": time.strftime("%Y-%m-%d %H:%M"), "results": results}, indent=1))


if __name__ == "__main__":
    main()
