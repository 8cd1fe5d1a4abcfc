"""Report generation throughput: `thunder-trace report` vs tlparse, at several sizes, quiet and
under load, against the parse-only ceiling; a log of many distinct compiles; many rank files.

- Thunder: a real THUNDER_TRACE log of nanoGPT forward+backward (examples/train_nanogpt.py) is
  replicated into one large log, as one long process that recompiled many times would write it:
  each copy of the compile's records (traces, memory, phases) gets a new compile id, the next
  recompile index and later times; the provenance records are written once (ids are per process)
  and the calls summary at the end lists every compile.
- TORCH_TRACE: a real log of torch.compile (inductor, CPU) of small models with many distinct
  graphs and recompiles, forward+backward, replicated with renumbered frame ids (each copy's
  compiles are new frames to tlparse; payloads untouched, so their md5s still match).
- The parse-only ceiling: the same log read line by line and each line `orjson.loads`-ed (the
  TORCH_TRACE log: each glog line's JSON metadata), nothing written: how fast reading alone goes.
- Loaded: one CPU-burning process per CPU this process may use runs for the condition's rounds.
- Many compiles (`--many-base LOG`): a log of many distinct small compiles (a slice of Thunder's
  own test suite run with THUNDER_TRACE, see bench/README.md) replicated with renumbered compile
  ids to `--many-mb`: time, peak RSS and output size over input, next to the nanoGPT log's MB/s.
- Ranks (`--ranks 64,256,1024`): the base log written once per rank (header rank/world size),
  one directory each: time against the total size, peak RSS against a 1-rank report.

Each tool runs as a fresh subprocess, the tools alternating; wall time and peak RSS (summed over
the process tree, so thunder-trace's worker processes count) per run; medians of --runs runs.
thunder-trace runs twice: by default (see provenance/report/jobs.py auto_jobs; each run's worker
count and the load average when it started are printed) and all in one process (-j 1).

    python bench/report_throughput.py [--sizes 3,30,300] [--runs 5] [--conditions quiet,loaded]
        [--many-base LOG --many-mb 30] [--ranks 64,256,1024] [--work DIR] [--keep] [--out DIR] [--json FILE]
        [--before CHECKOUT]  (an earlier commit's report in the same rounds: `git worktree add DIR REV`)
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import harness
import orjson

ROOT = harness.ROOT
BIN = Path(sys.executable).parent

def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("THUNDER_TRACE", "TORCH_TRACE")}
    env.update(extra)
    return env


def thunder_base(work: Path, layers: int) -> Path:
    logs = work / "thunder_base"
    shutil.rmtree(logs, ignore_errors=True)
    subprocess.run([sys.executable, str(ROOT / "examples" / "train_nanogpt.py"), "--layers", str(layers),
                    "--steps", "2"], env=_env(THUNDER_TRACE=str(logs)), check=True, capture_output=True)
    return next(logs.glob("*.jsonl"))


class LogWriter:
    """JSON lines written to a log file, counting the bytes (the replicated logs' writer)."""

    def __init__(self, file) -> None:
        self.file, self.written = file, 0

    def put(self, record: dict) -> None:
        line = orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
        self.file.write(line)
        self.written += len(line)


def replicate_thunder(base: Path, target: Path, size: int) -> int:
    records = [orjson.loads(line) for line in base.read_bytes().splitlines() if line.strip()]
    header = next(r for r in records if r["type"] == "header")
    once = [r for r in records if r["type"] in ("prov", "span", "span_end")]
    # every record of a compile (its traces, memory, phases, ...), as the real log has them
    compile_records = [r for r in records if type(r.get("compile")) is int and r["type"] not in ("prov", "calls")]
    calls = [r for r in records if r["type"] == "calls"]
    ids = sorted({r["compile"] for r in compile_records})
    starts = [r["time_ns"] for r in compile_records if type(r.get("time_ns")) is int]
    span_ns = max(starts) - min(starts) + 1_000_000
    copy = 0
    all_ids: list[int] = []
    with open(target, "wb") as f:
        log = LogWriter(f)
        put = log.put
        put(header)
        first = True
        while log.written < size:
            for record in compile_records:
                if first and record["type"] == "compile_start":  # provenance records precede their use
                    for r in once:
                        put(r)
                    first = False
                r = dict(record)
                r["compile"] = record["compile"] + copy * len(ids)
                shift = copy * span_ns
                for key in ("time_ns", "start_ns", "end_ns"):
                    if type(r.get(key)) is int:
                        r[key] += shift
                if r["type"] == "phases":  # [name, start ns, end ns, depth, detail]
                    r["phases"] = [[p[0], p[1] + shift, p[2] + shift, *p[3:]] for p in r["phases"]]
                if r["type"] == "compile_start":
                    r["index"] = copy
                    all_ids.append(r["compile"])
                put(r)
            copy += 1
        for c in calls:
            put({**c, "compiles": all_ids, "calls": c["calls"] + copy, "cache_misses": copy})
    return copy


def torch_base(work: Path, models: int = 6) -> Path:
    logs = work / f"torch_base_{models}"
    shutil.rmtree(logs, ignore_errors=True)
    harness.run_child("torch_compile_models.py", models, env=_env(TORCH_TRACE=str(logs)), check=True)
    return max(logs.glob("*.log"), key=lambda p: p.stat().st_size)


_FRAME = re.compile(rb'"frame_id": (\d+)')


def replicate_torch(base: Path, target: Path, size: int) -> int:
    lines = base.read_bytes().splitlines(keepends=True)
    frames = max(int(m.group(1)) for line in lines for m in _FRAME.finditer(line)) + 1
    written, copy = 0, 0
    with open(target, "wb") as f:
        while written < size:
            for line in lines:
                if copy and not line.startswith(b"\t"):  # the glog line's metadata, not the payload
                    shift = copy * frames
                    line = _FRAME.sub(lambda m, shift=shift: b'"frame_id": %d' % (int(m.group(1)) + shift), line)
                f.write(line)
                written += len(line)
            copy += 1
    return copy


def _tree_peaks(root: int, peaks: dict[int, int]) -> None:
    """Update `peaks` (pid -> kB) with the peak resident memory (VmHWM) of a process and all its
    descendants, from /proc. VmHWM starts afresh at exec; a child's ru_maxrss does not (Linux keeps
    the forking parent's across execve), so it would floor every figure at this process's RSS."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo.extend(child for child, parent in parents.items() if parent == pid and child not in tree)
    for pid in tree:
        try:
            with open(f"/proc/{pid}/status") as f:
                hwm = next((int(line.split()[1]) for line in f if line.startswith("VmHWM:")), 0)
        except (OSError, ValueError):
            continue
        peaks[pid] = max(peaks.get(pid, 0), hwm)


def measure(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int, str, float, float]:
    """Wall seconds, peak RSS in MB (the peaks of the whole process tree, workers included,
    summed: sampled every 20 ms from /proc), exit status, stderr, CPU seconds (user + system, of
    the process and the children it waited for: our workers, tlparse's threads), which other work
    on a shared machine disturbs less than the wall time, and the system part of them alone (on
    this VM's disk, creating a file costs 0.03 to 0.6 ms of system time by the moment and the
    directory: `--out` on a tmpfs takes that out of both tools' figures)."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    peaks: dict[int, int] = {}
    while True:
        _tree_peaks(child.pid, peaks)
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.02)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    err = child.stderr.read().decode(errors="replace") if child.stderr else ""
    if child.returncode != 0:
        print(err[-2000:], file=sys.stderr)
    return wall, sum(peaks.values()) / 1024, child.returncode, err, usage.ru_utime + usage.ru_stime, usage.ru_stime


def workers_used(stderr: str) -> int:
    """The processes a `thunder-trace report` run used (its last line says, if more than one)."""
    found = re.search(r"\((\d+) processes\)", stderr)
    return int(found.group(1)) if found else 1


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


BURNER = "while True: pass"


def burners(count: int) -> list[subprocess.Popen]:
    """`count` CPU-bound processes (the loaded condition), stopped by `stop`."""
    return [subprocess.Popen([sys.executable, "-c", BURNER]) for _ in range(count)]


def stop(processes: list[subprocess.Popen]) -> None:
    for p in processes:
        p.kill()
    for p in processes:
        p.wait()


def thunder_base_log(work: Path, layers: int) -> Path:
    cached = work / "thunder_base.jsonl"
    if not cached.exists():
        shutil.copy(thunder_base(work, layers), cached)
    return cached


def torch_base_log(work: Path, models: int) -> Path:
    """The TORCH_TRACE base log: of 6 models (~16 MB), or of 1 (~2.7 MB) for small sizes."""
    cached = work / f"torch_base_{models}.log"
    if not cached.exists():
        shutil.copy(torch_base(work, models), cached)
    return cached


def replicate_compiles(base: Path, target: Path, size: int) -> int:
    """A log of many distinct compiles (`base`) replicated to `size` bytes: every record naming a
    compile gets the copy's compile ids (`calls` lists them); the records defining ids (prov,
    span, library) are written once."""
    records = [orjson.loads(line) for line in base.read_bytes().splitlines() if line.strip()]
    header, rest = records[0], records[1:]
    width = max((r["compile"] for r in rest if type(r.get("compile")) is int), default=0) + 1
    copy = 0
    with open(target, "wb") as f:
        log = LogWriter(f)
        put = log.put
        put(header)
        while log.written < size:
            for record in rest:
                if record["type"] in ("prov", "span", "span_end", "library"):
                    if not copy:
                        put(record)
                    continue
                r = dict(record)
                if type(r.get("compile")) is int:
                    r["compile"] += copy * width
                if r["type"] == "calls":
                    r["compiles"] = [c + copy * width for c in r["compiles"] if type(c) is int]
                put(r)
            copy += 1
    return copy


def write_ranks(base: Path, directory: Path, ranks: int) -> int:
    """`ranks` copies of `base`, one file per rank, as a job of that many ranks writes them."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = base.read_bytes().splitlines(keepends=True)
    header = orjson.loads(lines[0])
    total = 0
    for rank in range(ranks):
        head = orjson.dumps({**header, "rank": rank, "world_size": ranks, "pid": 10_000 + rank},
                            option=orjson.OPT_APPEND_NEWLINE)
        path = directory / f"thunder_trace.bench.pid{10_000 + rank}.rank{rank}.jsonl"
        path.write_bytes(head + b"".join(lines[1:]))
        total += path.stat().st_size
    return total


def ours(log: Path, out: Path, jobs: int | None) -> list[str]:
    command = [str(BIN / "thunder-trace"), "report", str(log), "--overwrite", "--no-browser", "-o", str(out)]
    return command + (["-j", str(jobs)] if jobs is not None else [])


def rounds(tools: dict[str, tuple[Path, Callable[[Path], list[str]]]], runs: int, outs: Path,
           condition: str, envs: dict[str, dict[str, str] | None] | None = None) -> dict[str, dict]:
    """`runs` rounds, the tools alternating (each round's order rotated): per tool its runs'
    wall and CPU seconds, peak RSS, exit status, worker count, load; the output's size. Each tool
    writes its report under `outs`, to the same directory every round."""
    results: dict[str, dict] = {}
    names = list(tools)
    for run in range(runs):
        for name in names[run % len(names):] + names[:run % len(names)]:
            log, command = tools[name]
            out = outs / f"out_{abs(hash(name)) % 10**6}"
            load = os.getloadavg()[0]
            env = (envs or {}).get(name) or _env(PYTHONPATH=str(ROOT))  # this checkout's package
            wall, rss, status, err, cpu, sys_cpu = measure(command(out), env)
            r = results.setdefault(name, {"log_mb": du(log) / 1e6 if log.is_dir() else log.stat().st_size / 1e6,
                                          "wall": [], "rss": [], "status": [], "workers": [], "load": [], "cpu": [],
                                          "sys": []})
            for key, value in (("wall", wall), ("cpu", cpu), ("sys", sys_cpu), ("rss", rss), ("status", status),
                               ("load", load)):
                r[key].append(value)
            r["workers"].append(workers_used(err) if name.startswith("ours") else None)
            r["out_mb"] = du(out) / 1e6 if out.exists() else 0.0
            print(f"{condition} run {run + 1}: {name}: {wall:.2f} s ({cpu:.2f} s CPU), {rss:.0f} MB, exit {status}, "
                  f"load {load:.1f}" + (f", {r['workers'][-1]} worker(s)" if r["workers"][-1] else ""),
                  file=sys.stderr)
    for r in results.values():
        r["median_wall"] = statistics.median(r["wall"])
        r["median_cpu"] = statistics.median(r["cpu"])
        r["median_sys"] = statistics.median(r["sys"])
        r["median_rss"] = statistics.median(r["rss"])
        r["mb_per_s"] = r["log_mb"] / r["median_wall"]
    return results


class BeforeTool:
    """`ours -j 1 (before)`: the report of an earlier checkout (its package first on PYTHONPATH),
    measured in the same rounds as this one's; nothing without --before."""

    NAME = "ours -j 1 (before)"

    def __init__(self, checkout: Path | None) -> None:
        self.checkout = checkout
        self.envs = {self.NAME: _env(PYTHONPATH=str(checkout))} if checkout else {}

    def __call__(self, log: Path) -> dict[str, tuple[Path, Callable[[Path], list[str]]]]:
        return {self.NAME: (log, lambda out: ours(log, out, 1))} if self.checkout else {}


def _tools(thunder_log: Path, torch_log: Path, tlparse: str) -> dict[str, tuple[Path, Callable[[Path], list[str]]]]:
    return {
        "parse-only (Thunder log)": (thunder_log, lambda out: harness.child_command("parse_only.py", thunder_log,
                                                                                   "jsonl")),
        "parse-only (TORCH_TRACE log)": (torch_log, lambda out: harness.child_command("parse_only.py", torch_log,
                                                                                      "glog")),
        "ours -j 1": (thunder_log, lambda out: ours(thunder_log, out, 1)),
        "ours (default)": (thunder_log, lambda out: ours(thunder_log, out, None)),
        "tlparse 0.4.3": (torch_log, lambda out: [tlparse, str(torch_log), "--overwrite", "--no-browser", "-o",
                                                  str(out)]),
    }


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--sizes", default="3,30", help="log sizes in MB, comma-separated (e.g. 3,30,300)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--conditions", default="quiet,loaded")
    parser.add_argument("--layers", type=int, default=2, help="nanoGPT layers of the base Thunder log")
    parser.add_argument("--many-base", type=Path, help="a log of many distinct compiles (see bench/README.md)")
    parser.add_argument("--many-mb", type=float, default=30)
    parser.add_argument("--ranks", default="", help="rank counts for the many-ranks figures, e.g. 64,256,1024")
    parser.add_argument("--rank-base", type=Path, help="the log each rank file copies (default: the nanoGPT log)")
    parser.add_argument("--tlparse", default=shutil.which("tlparse") or str(BIN / "tlparse"))
    parser.add_argument("--work", type=Path, help="work directory (default: a temporary one, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--out", type=Path, help="where the tools write their reports (default: the work "
                        "directory; a tmpfs such as /dev/shm keeps the disk's file-creation cost out)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--before", type=Path, help="a checkout of an earlier commit (git worktree): its report "
                        "runs too, as `ours -j 1 (before)`, in the same rounds")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="report_bench."))
    work.mkdir(parents=True, exist_ok=True)
    outs = args.out = args.out or work  # _many and _ranks write there too
    outs.mkdir(parents=True, exist_ok=True)
    # As a wheel install leaves it (pip byte-compiles), whatever PYTHONDONTWRITEBYTECODE says:
    # else every run of ours would compile the package's modules first (~0.1 s).
    compileall.compile_dir(str(ROOT / "provenance"), quiet=1)
    compileall.compile_dir(str(ROOT / "exporters"), quiet=1)
    if args.before:
        compileall.compile_dir(str(args.before / "provenance"), quiet=1)
    before = BeforeTool(args.before.resolve() if args.before else None)
    cpus = len(os.sched_getaffinity(0))
    results: dict[str, dict] = {"machine": {"cpus": cpus, "load_at_start": os.getloadavg()}}
    table: list[str] = []
    try:
        print(f"work directory: {work}", file=sys.stderr)
        thunder_base_path = thunder_base_log(work, args.layers)
        for size_mb in [float(x) for x in args.sizes.split(",") if x]:
            size = int(size_mb * 1e6)
            thunder_log = work / f"thunder_{size_mb:g}" / "thunder_trace.bench.pid1.norank.jsonl"
            torch_log = work / f"torch_{size_mb:g}" / "dedicated_log_torch_trace_bench.log"
            if not thunder_log.exists():
                thunder_log.parent.mkdir(parents=True, exist_ok=True)
                replicate_thunder(thunder_base_path, thunder_log, size)
            if not torch_log.exists():
                torch_log.parent.mkdir(parents=True, exist_ok=True)
                replicate_torch(torch_base_log(work, 6 if size_mb >= 20 else 1), torch_log, size)
            tools = _tools(thunder_log, torch_log, args.tlparse) | before(thunder_log)
            for condition in [c for c in args.conditions.split(",") if c]:
                load = burners(cpus) if condition == "loaded" else []
                try:
                    got = rounds(tools, args.runs, outs, f"{size_mb:g} MB {condition}", before.envs)
                finally:
                    stop(load)
                results[f"{size_mb:g} MB {condition}"] = got
                table.extend(_rows(size_mb, condition, got))
        if args.many_base:
            table.extend(_many(args, work, results, before))
        if args.ranks:
            table.extend(_ranks(args, work, results, thunder_base_path))
        print("| log | condition | tool | input | median time | MB/s | of the ceiling | vs tlparse (per round) "
              "| median CPU (of it system) | peak RSS | output (× input) |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
        print("\n".join(table))
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)


def _row(log: str, condition: str, name: str, r: dict, ceiling: dict | None, theirs: dict | None) -> str:
    of_ceiling = f"{r['mb_per_s'] / ceiling['mb_per_s']:.0%}" if ceiling and not name.startswith("parse") else ""
    versus = ""
    if theirs and name.startswith("ours"):
        per = [(r["log_mb"] / w) / (theirs["log_mb"] / t) for w, t in zip(r["wall"], theirs["wall"])]
        versus = f"**{statistics.median(per):.2f}×** ({', '.join(f'{x:.2f}' for x in per)})"
    output = f"{r['out_mb']:.0f} MB ({r['out_mb'] / r['log_mb']:.1f}×)" if r["out_mb"] else ""
    workers = sorted({w for w in r["workers"] if w})
    shown = name + (f" [{'/'.join(map(str, workers))} proc]" if name == "ours (default)" and workers else "")
    return (f"| {log} | {condition} | {shown} | {r['log_mb']:.1f} MB | {r['median_wall']:.2f} s | "
            f"{r['mb_per_s']:.1f} | {of_ceiling} | {versus} | {_cpu(r)} | {r['median_rss']:.0f} MB | "
            f"{output} |")


def _cpu(r: dict) -> str:
    return f"{r['median_cpu']:.2f} s ({r['median_sys']:.2f} sys)"


def _rows(size_mb: float, condition: str, got: dict) -> list[str]:
    theirs = got.get("tlparse 0.4.3")
    rows = []
    for name, r in got.items():
        ceiling = got["parse-only (TORCH_TRACE log)"] if name.startswith("tlparse") else got["parse-only (Thunder log)"]
        load = statistics.median(r["load"])
        rows.append(_row(f"{size_mb:g} MB", f"{condition} (load {load:.1f})", name, r, ceiling, theirs))
    return rows


def _many(args: argparse.Namespace, work: Path, results: dict, before: BeforeTool) -> list[str]:
    log = work / "many" / "thunder_trace.many.pid1.norank.jsonl"
    if not log.exists():
        log.parent.mkdir(parents=True, exist_ok=True)
        copies = replicate_compiles(args.many_base, log, int(args.many_mb * 1e6))
        print(f"many-compiles log: {copies} copies of {args.many_base}", file=sys.stderr)
    compiles = sum(1 for line in log.open("rb") if b'"type":"compile_start"' in line)
    tools = {"parse-only (Thunder log)": (log, lambda out: harness.child_command("parse_only.py", log, "jsonl")),
             "ours -j 1": (log, lambda out: ours(log, out, 1)),
             "ours (default)": (log, lambda out: ours(log, out, None))} | before(log)
    got = rounds(tools, max(3, args.runs // 2 + 1), args.out, "many compiles", before.envs)
    results["many compiles"] = {"compiles": compiles, **got}
    name = f"many compiles ({compiles} compiles)"
    return [_row(name, f"quiet (load {statistics.median(r['load']):.1f})", tool, r,
                 got["parse-only (Thunder log)"], None) for tool, r in got.items()]


def _ranks(args: argparse.Namespace, work: Path, results: dict, base: Path) -> list[str]:
    base = args.rank_base or base
    rows = []
    one = work / "ranks_1"
    write_ranks(base, one, 1)
    counts = [int(x) for x in args.ranks.split(",") if x]
    tools = {"1 rank": (one, lambda out: ours(one, out, 1))}
    for n in counts:
        directory = work / f"ranks_{n}"
        if not directory.exists():
            write_ranks(base, directory, n)
        tools[f"{n} ranks"] = (directory, lambda out, d=directory: ours(d, out, 1))
    got = rounds(tools, 3, args.out, "ranks")
    results["ranks"] = got
    first = got["1 rank"]
    for name, r in got.items():
        per_mb = r["median_wall"] / r["log_mb"]
        rows.append(f"| {name} (-j 1) | quiet (load {statistics.median(r['load']):.1f}) | ours -j 1 | "
                    f"{r['log_mb']:.1f} MB | {r['median_wall']:.2f} s | {r['mb_per_s']:.1f} | "
                    f"{per_mb * 1e3:.0f} ms/MB | | {_cpu(r)} | {r['median_rss']:.0f} MB "
                    f"({r['median_rss'] / first['median_rss']:.2f}× 1 rank) | {r['out_mb']:.0f} MB |")
    return rows


if __name__ == "__main__":
    main()
