"""Report generation throughput: `thunder-trace report` vs tlparse, on logs of similar size.

- Thunder: a real THUNDER_TRACE log of nanoGPT forward+backward (examples/train_nanogpt.py) is
  replicated into one large log, as one long process that recompiled many times would write it:
  each copy of the compile records gets a new compile id, the next recompile index and later
  times; the provenance records are written once (ids are per process) and the calls summary at
  the end lists every compile.
- TORCH_TRACE: a real log of torch.compile (inductor, CPU) of small models with many distinct
  graphs and recompiles, forward+backward, replicated with renumbered frame ids (each copy's
  compiles are new frames to tlparse; payloads untouched, so their md5s still match).

Each tool runs as a fresh subprocess, the tools alternating; wall time and peak RSS (summed over
the process tree, so thunder-trace's worker processes count) per run; the medians of --runs runs
are reported, with the output size. thunder-trace runs twice: by default (one worker process
per idle CPU for a log this large, see provenance/report/jobs.py auto_jobs; each run's count
and the load average when it started are printed) and all in one process (-j 1).

    python bench/report_throughput.py [--size-mb 100] [--runs 3] [--work DIR] [--keep]
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
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

TORCH_PROGRAM = r'''
import torch, torch.nn as nn
torch._dynamo.config.recompile_limit = 64
class M(nn.Module):
    def __init__(s, d, n):
        super().__init__(); s.ls = nn.ModuleList(nn.Linear(d, d) for _ in range(n)); s.ln = nn.LayerNorm(d)
    def forward(s, x):
        for i, l in enumerate(s.ls):
            x = torch.relu(l(x)) if i % 2 else torch.tanh(l(x)) * 2
            x = s.ln(x) + x
        return x.sum()
for n in range(2, 8):
    m = torch.compile(M(16, n), dynamic=False)
    for b in (2, 3, 5):
        x = torch.randn(b, 16, requires_grad=True)
        m(x).backward()
'''


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


def replicate_thunder(base: Path, target: Path, size: int) -> int:
    records = [orjson.loads(line) for line in base.read_bytes().splitlines() if line.strip()]
    header = next(r for r in records if r["type"] == "header")
    once = [r for r in records if r["type"] in ("prov", "span", "span_end")]
    compile_records = [r for r in records if r["type"] in ("compile_start", "trace", "compile_end", "compile_error")]
    calls = [r for r in records if r["type"] == "calls"]
    ids = sorted({r["compile"] for r in compile_records})
    starts = [r["time_ns"] for r in compile_records if "time_ns" in r]
    span_ns = max(starts) - min(starts) + 1_000_000
    written, copy = 0, 0
    all_ids: list[int] = []
    with open(target, "wb") as f:
        def put(record: dict) -> None:
            nonlocal written
            line = orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
            f.write(line)
            written += len(line)
        put(header)
        first = True
        while written < size:
            for record in compile_records:
                if first and record["type"] == "compile_start":  # provenance records precede their use
                    for r in once:
                        put(r)
                    first = False
                r = dict(record)
                r["compile"] = record["compile"] + copy * len(ids)
                if "time_ns" in r:
                    r["time_ns"] += copy * span_ns
                if r["type"] == "compile_start":
                    r["index"] = copy
                    all_ids.append(r["compile"])
                put(r)
            copy += 1
        for c in calls:
            put({**c, "compiles": all_ids, "calls": c["calls"] + copy, "cache_misses": copy})
    return copy


def torch_base(work: Path) -> Path:
    logs = work / "torch_base"
    shutil.rmtree(logs, ignore_errors=True)
    subprocess.run([sys.executable, "-c", TORCH_PROGRAM], env=_env(TORCH_TRACE=str(logs)), check=True,
                   capture_output=True)
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


def _tree_rss(root: int) -> int:
    """Resident memory (kB) of a process and all its descendants, from /proc."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/status") as f:
                rss[int(entry)] = next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
        except (OSError, ValueError, IndexError):
            continue
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo.extend(child for child, parent in parents.items() if parent == pid and child not in tree)
    return sum(rss.get(pid, 0) for pid in tree)


def measure(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int, str, float]:
    """Wall seconds, peak RSS in MB (of the whole process tree: workers included, sampled every
    20 ms; never below the process's own ru_maxrss from wait4), exit status, stderr, CPU seconds
    (user + system, of the process and the children it waited for: our workers, tlparse's
    threads), which other work on a shared machine disturbs less than the wall time."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    peak = 0
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, _tree_rss(child.pid))
        time.sleep(0.02)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    err = child.stderr.read().decode(errors="replace") if child.stderr else ""
    if child.returncode != 0:
        print(err[-2000:], file=sys.stderr)
    return wall, max(peak, usage.ru_maxrss) / 1024, child.returncode, err, usage.ru_utime + usage.ru_stime


def workers_used(stderr: str) -> int:
    """The worker processes a `thunder-trace report` run started (its last line says, if any)."""
    found = re.search(r"\((\d+) worker process", stderr)
    return int(found.group(1)) if found else 1


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--layers", type=int, default=2, help="nanoGPT layers of the base Thunder log")
    parser.add_argument("--work", type=Path, help="work directory (default: a temporary one, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--baseline", type=Path, metavar="SRC",
                        help="also run `-j 1` and the default with the provenance package of this source tree "
                             "(another version, e.g. `git archive` of an older commit), in the same rounds")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="report_bench."))
    work.mkdir(parents=True, exist_ok=True)
    size = int(args.size_mb * 1e6)
    try:
        print(f"work directory: {work}", file=sys.stderr)
        thunder_dir, torch_dir = work / "thunder_big", work / "torch_big"
        thunder_dir.mkdir(exist_ok=True)
        torch_dir.mkdir(exist_ok=True)
        thunder_log = thunder_dir / "thunder_trace.bench.pid1.norank.jsonl"
        torch_log = torch_dir / "dedicated_log_torch_trace_bench.log"
        if not thunder_log.exists():
            copies = replicate_thunder(thunder_base(work, args.layers), thunder_log, size)
            print(f"thunder log: {copies} copies of the base compile", file=sys.stderr)
        if not torch_log.exists():
            copies = replicate_torch(torch_base(work), torch_log, size)
            print(f"torch log: {copies} copies of the base run", file=sys.stderr)
        ours = [str(BIN / "thunder-trace"), "report", str(thunder_log), "--overwrite", "--no-browser", "-o"]
        tools = {  # the default worker count depends on the load when each run starts: recorded per run
            "thunder-trace report (default)": (thunder_log, lambda out: [*ours, str(out)]),
            "thunder-trace report -j 1": (thunder_log, lambda out: [*ours, str(out), "-j", "1"]),
            "tlparse 0.4.3": (torch_log, lambda out: [str(BIN / "tlparse"), str(torch_log), "-o", str(out),
                                                      "--overwrite", "--no-browser"]),
        }
        envs = {name: None for name in tools}
        if args.baseline:
            old = _env(PYTHONPATH=str(args.baseline.resolve()))
            for name in ("thunder-trace report (default)", "thunder-trace report -j 1"):
                tools[f"baseline: {name}"] = tools[name]
                envs[f"baseline: {name}"] = old
        # As a wheel install leaves it (pip byte-compiles), whatever PYTHONDONTWRITEBYTECODE says:
        # else every run of ours would compile the package's modules first (~0.1 s).
        for tree in (ROOT, *([args.baseline] if args.baseline else [])):
            compileall.compile_dir(str(tree / "provenance"), quiet=1)
        results = {}
        for run in range(args.runs):
            for name, (log, command) in tools.items():  # alternate the tools: they share the noise
                out = work / f"out_{name.split()[0]}"  # the same directory for our modes: replaced
                load = os.getloadavg()[0]
                wall, rss, status, err, cpu = measure(command(out), envs[name])
                r = results.setdefault(name, {"log_mb": log.stat().st_size / 1e6, "wall": [], "rss": [], "status": [],
                                              "workers": [], "load": [], "cpu": []})
                r["wall"].append(wall)
                r["cpu"].append(cpu)
                r["rss"].append(rss)
                r["status"].append(status)
                r["load"].append(load)
                r["workers"].append(workers_used(err) if name.startswith("thunder") else None)
                r["out_mb"] = du(out) / 1e6
                print(f"run {run + 1}: {name}: {wall:.2f} s ({cpu:.2f} s CPU), {rss:.0f} MB peak RSS, exit {status}, "
                      f"load {load:.1f}"
                      + (f", {r['workers'][-1]} worker(s)" if r["workers"][-1] else ""), file=sys.stderr)
        print("| tool | input | median time | throughput | vs tlparse | median CPU time | MB per CPU s | vs tlparse "
              "| peak RSS | output |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        theirs = results["tlparse 0.4.3"]
        for r in results.values():
            wall = statistics.median(r["wall"])
            r["median_wall"], r["median_rss"], r["mb_per_s"] = wall, statistics.median(r["rss"]), r["log_mb"] / wall
            # per run: MB/s over tlparse's MB/s in the same round (the tools alternate: they share the noise)
            r["ratios"] = [(r["log_mb"] / w) / (theirs["log_mb"] / t) for w, t in zip(r["wall"], theirs["wall"])]
            r["median_cpu"] = statistics.median(r["cpu"])
            r["mb_per_cpu_s"] = r["log_mb"] / r["median_cpu"]
        for name, r in results.items():
            print(f"| {name} | {r['log_mb']:.0f} MB | {r['median_wall']:.2f} s | {r['mb_per_s']:.1f} MB/s | "
                  f"{r['mb_per_s'] / theirs['mb_per_s']:.2f}x (per round: "
                  f"{', '.join(f'{x:.2f}' for x in r['ratios'])}) | {r['median_cpu']:.2f} s | "
                  f"{r['mb_per_cpu_s']:.1f} | {r['mb_per_cpu_s'] / theirs['mb_per_cpu_s']:.2f}x | "
                  f"{r['median_rss']:.0f} MB | {r['out_mb']:.0f} MB |")
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
