"""`thunder-trace report` on hostile logs (issue 10): time and peak RSS, before and after a change.

Shapes at the sizes the issues name, each next to a valid log of the same size (or the same
shape made valid), built by tests/support/hostile_logs.py. Issue 10's:

- 1 M bad lines (a header, then lines that are not JSON);
- a 1 MB single trace line (an unterminated string of escaped quotes: the worst case of a
  backtracking string regex);
- a 16 000-op desync (two ranks' final traces of 16 000 random ops each, of 10 symbols);
- 8 000 compiles sharing one compile id.

Issue 22's (analyses that were not linear in the log):

- a profiled module path of 16 000 parts (the roll-up built every ancestor path), next to a flat
  name of the same length;
- 16 000 ops each from a file of its own (the source view's file ordering), next to 16 000 lines
  of one file;
- 1024 ranks, each compiling a function of its own (distributed.html: rows x ranks cells), next to
  1024 ranks compiling the same one;
- 409 600 phases (100 compiles of 4096; the Perfetto trace held and sorted every event);
- a recompile whose 8 000-line prologues differ in order (difflib on the whole), next to one
  whose prologue differs in one check;
- a ThunderFX graph with 5 000 fallback lines and 1 000 split reasons (every reason on every line).

Issue 27's (OTLP/JSON exports): 200 000 lines that look like export requests and are not, next to
a valid export of the same size; 5 000 processes in one export (spans of the first 4096 read, the
rest counted), next to the same spans in one process.

Besides time and peak RSS, the size of what the report wrote (OUT): pages proportional to their data.

Each report runs as a fresh subprocess (`-j 1`), with each code tree given as `--code
LABEL=DIR` on its PYTHONPATH (the package's directory: a checkout or an unpacked `git archive`),
the trees alternating; wall time and peak RSS (bench/report_throughput.py's `measure`). A run
past `--timeout` is killed and reported as such.

    python bench/hostile_inputs.py --code before=/tmp/before --code after=. [--runs 3] [--timeout 300]
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import harness
from report_throughput import measure

ROOT = harness.ROOT
sys.path.insert(0, str(harness.SUPPORT))
import hostile_logs  # noqa: E402  (tests/: the shapes the tests bound)

CASES = {  # label: (hostile log, the valid log to compare it with)
    "1 M bad lines": (lambda: hostile_logs.bad_lines(1_000_000), None),
    "1 MB single trace line": (lambda: hostile_logs.long_line(1_000_000),
                               lambda: hostile_logs.big_trace(hostile_logs.size(hostile_logs.long_line(1_000_000)))),
    "16 000-op desync": (lambda: hostile_logs.desync(16_000, start=0),
                         lambda: hostile_logs.desync(16_000, differ=False)),
    "8 000 repeated compile ids": (lambda: hostile_logs.repeated_ids(8_000),
                                   lambda: hostile_logs.repeated_ids(8_000, same=False)),
    "16 000-part module path": (lambda: hostile_logs.deep_module(16_000),
                                lambda: hostile_logs.deep_module(16_000, deep=False)),
    "16 000 ops, distinct files": (lambda: hostile_logs.distinct_files(16_000),
                                   lambda: hostile_logs.distinct_files(16_000, distinct=False)),
    "1024 ranks, a function each": (lambda: hostile_logs.rank_functions(1024),
                                    lambda: hostile_logs.rank_functions(1024, distinct=False)),
    "409 600 phases": (lambda: hostile_logs.many_phases(409_600), None),
    "8 000-line prologues reordered": (lambda: hostile_logs.prologue_order(8_000),
                                       lambda: hostile_logs.prologue_order(8_000, shuffled=False)),
    "5 000 fallback lines x 1 000 reasons": (lambda: hostile_logs.fx_split(5_000, 1_000), None),
    # OTLP/JSON exports (issue 27), next to a valid export of the same size or the same spans in one process
    "200 000 bad OTLP/JSON lines": (lambda: hostile_logs.otlp_bad_lines(200_000),
                                    lambda: hostile_logs.otlp_export(hostile_logs.size(
                                        hostile_logs.otlp_bad_lines(200_000)))),
    "5 000 processes in one export": (lambda: hostile_logs.otlp_processes(5_000),
                                      lambda: hostile_logs.otlp_processes(5_000, distinct=False)),
}


def run(code: Path, log: Path, out: Path, timeout: float) -> tuple[float | None, float, int, float]:
    """(wall seconds or None if killed at the timeout, peak RSS MB, exit status, MB written in OUT)."""
    shutil.rmtree(out, ignore_errors=True)
    command = ["env", "-u", "THUNDER_TRACE", "-u", "THUNDER_TRACE_PROFILE", f"PYTHONPATH={code}",
               # -P: the working directory is not put on sys.path, PYTHONPATH alone picks the code
               "timeout", "-s", "KILL", str(timeout), sys.executable, "-P", "-m", "provenance.report", "report",
               str(log), "-o", str(out), "-j", "1", "--no-browser"]
    wall, rss, status, _err, _cpu = measure(command)
    written = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 1e6 if out.is_dir() else 0.0
    shutil.rmtree(out, ignore_errors=True)
    return (None if status in (124, 137, -9) else wall), rss, status, written


def _write_case(case: str, work: Path) -> tuple[dict[str, Path], dict[str, float]]:
    """The case's hostile and valid logs, written under `work`: their paths and sizes (MB)."""
    hostile, valid = CASES[case]
    logs = {"hostile": hostile(), "valid": None}
    logs["valid"] = valid() if valid else hostile_logs.valid(hostile_logs.size(logs["hostile"]))
    paths = {kind: hostile_logs.write(work / case.replace(" ", "_") / kind, log) for kind, log in logs.items()}
    return paths, {kind: hostile_logs.size(log) / 1e6 for kind, log in logs.items()}


def main() -> None:
    parser = harness.parser(__doc__)
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
        for case in CASES:
            if args.cases and case not in args.cases:
                continue
            # made in a process of their own: a report forked from this one would count this
            # process's memory (the logs, hundreds of MB) in its peak RSS until it execs
            with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as maker:
                paths, size = maker.submit(_write_case, case, work).result()
            samples: dict[tuple[str, str], list] = {}
            for n in range(args.runs):
                order = list(codes.items()) if n % 2 == 0 else list(reversed(codes.items()))
                for label, code in order:
                    for kind, path in paths.items():
                        killed_before = any(w is None for w, *_ in samples.get((label, kind), []))
                        if killed_before:  # one run past the timeout says it
                            continue
                        samples.setdefault((label, kind), []).append(run(code, path, work / "out", args.timeout))
            for (label, kind), runs in samples.items():
                walls = [w for w, *_ in runs if w is not None]
                row = {"case": case, "log": kind, "code": label, "mb": round(size[kind], 2), "runs": len(runs),
                       "wall_s": round(statistics.median(walls), 2) if len(walls) == len(runs) else None,
                       "peak_rss_mb": round(statistics.median(r for _, r, _, _ in runs), 1),
                       "out_mb": round(statistics.median(o for *_, o in runs), 2),
                       "status": sorted({s for _, _, s, _ in runs})}
                results.append(row)
                wall = f"{row['wall_s']:.2f} s" if row["wall_s"] is not None else f"> {args.timeout:.0f} s (killed)"
                print(f"{case:36s} {kind:8s} {label:8s} {row['mb']:7.2f} MB  {wall:>20s}  "
                      f"{row['peak_rss_mb']:7.1f} MB RSS  {row['out_mb']:8.2f} MB out  status {row['status']}",
                      flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps({"time": time.strftime("%Y-%m-%d %H:%M"), "results": results}, indent=1))


if __name__ == "__main__":
    main()
