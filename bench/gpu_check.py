"""The GPU checks, in one prepared run (issue 26): on the device machine, or a CPU dry run here.

    python bench/gpu_check.py --fetch-wheels            # here: the wheels the device machine lacks, into .whl/
    python3 bench/gpu_check.py --out "$OUT"             # there (device tool: carry [".whl"]), ~3 minutes
    python bench/gpu_check.py --dry-run --out /tmp/gc   # here, on CPU: every step that can run without a GPU

The device machine (docs: /work/.library/device) has no network and its own torch (2.11.0+cu130,
Python 3.12); what this project needs beside it travels in `.whl/` (under 64 MiB), installed into
/tmp/site. nvFuser's wheels are built per torch minor and none is published for torch 2.11: the
newest, `nvfuser-cu130-torch210`, travels as its files without the NVRTC it bundles (the device
has one; the wheel is 80 MB), into /tmp/site_nvf. Against torch 2.11 it misses one symbol, an old
constructor of c10::MessageLogger: bench/gpu/c10_logger_shim.cpp defines it (its comment says
why that is safe), loaded ahead of nvFuser by /tmp/site_nvf's sitecustomize.py; and Thunder 0.2.6
takes one function from the old `nvfuser` module 0.2.36 no longer ships (an alias). The `environment`
step then runs a fusion and compares it with eager: only if that passes do the later steps run
with nvFuser (Thunder's default executor on CUDA); else they run without it and say why.

Steps, each in a fresh process with its own time limit, each PASS, FAIL or SKIP (with why), all
inside --budget seconds (the results are written after every step: a run cut short keeps them):
1. `environment`: GPU, torch, CUDA, Thunder, nvFuser (and one fusion checked against eager), this package.
2. `gpu_tests`: the suite's GPU tests (nvFuser fusion members at their lines: tests/thunder/test_fusion.py).
3. `cuda_profile`: bench/cuda_profile_check.py (CUDA events pair up, kernel vs launch time, coverage).
4. `memory`: nanoGPT profiled on the device; the allocator's readings against the static timeline
   (provenance.memory_checks): ops agreeing, peaks measured and static.
5. `traced_models`: with THUNDER_TRACE set, nanoGPT under thunder.jit; under thunderfx a graph break
   and a recompile, then HF Llama (where that fails, the same programs again without tracing: SKIP
   if they fail too, as not ours). The .pth file an install puts in site-packages is written there.
6. `report`: thunder-trace report of those logs (--strict).
Results: OUT/gpu_check.json and OUT/gpu_check.md (the table for bench/README.md), step logs in OUT/logs.
Exit status: 0 when no step failed.
"""

from __future__ import annotations

import io
import json
import os
import site
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

import harness

ROOT = harness.ROOT
WHEELS = ROOT / ".whl"
SITE = Path("/tmp/site")
# What the device image lacks (KINDS.md lists what it has): this project's own needs, pinned as here.
# (Thunder's optree and dill are not in the image; versions as constraints.txt pins them.)
CARRIED = ("lightning-thunder==0.2.6", "looseversion==1.3.0", "optree==0.20.0", "dill==0.4.1", "orjson==3.13.0",
           "opentelemetry-api==1.45.2", "opentelemetry-sdk==1.45.2", "opentelemetry-proto==1.45.2",
           "opentelemetry-exporter-otlp-proto-http==1.45.2", "opentelemetry-exporter-otlp-proto-common==1.45.2",
           "opentelemetry-exporter-http-transport==0.66b2", "opentelemetry-exporter-otlp-common==0.66b2",
           "opentelemetry-semantic-conventions==0.66b2", "googleapis-common-protos==1.76.0",
           "importlib-metadata")  # no playwright: no browser step there (52 MB)
NVFUSER = "nvfuser-cu130-torch210"  # the newest build; none is published for the device's torch 2.11
NVFUSER_TREE = WHEELS / "nvfuser-tree.tar.gz"  # its files, less the NVRTC it bundles
SHIM_SOURCE = ROOT / "bench" / "gpu" / "c10_logger_shim.cpp"
SHIM = WHEELS / "libc10_logger_shim.so"
SITE_NVF = Path("/tmp/site_nvf")
LEFT_OUT = "nvfuser-left-out.txt"  # in the tree: the bundled libraries left out (the image's are linked instead)

class Runner:
    """Runs the steps in fresh processes inside one time budget, writing the results after each."""

    def __init__(self, out: Path, budget: float, env: dict[str, str], dry_run: bool) -> None:
        self.out, self.env, self.dry_run = out, env, dry_run
        self.deadline = time.monotonic() + budget
        self.results: list[dict] = []

    def run(self, name: str, cmd: list[str], limit: int, env: dict | None = None,
            reserve: float = 0.0) -> tuple[int, str, float]:
        """`cmd` under `limit` seconds or what the budget leaves (less `reserve`, kept for later steps)."""
        timeout = max(5, int(min(limit, self.deadline - time.monotonic() - reserve)))
        begin = time.perf_counter()
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                                  env={**os.environ, **self.env, **(env or {})})
            rc, text = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            def text_of(b) -> str:
                return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")

            rc, text = 124, f"{text_of(exc.stdout)}{text_of(exc.stderr)}\ntimed out after {timeout} s"
        (self.out / "logs").mkdir(parents=True, exist_ok=True)
        (self.out / "logs" / f"{name}.txt").write_text(text)
        return rc, text, time.perf_counter() - begin

    def step(self, name: str, status: str, seconds: float, detail: str, data=None) -> None:
        self.results.append({"step": name, "status": status, "seconds": round(seconds, 1), "detail": detail[:2000],
                             "data": data})
        print(f"{status:4} {name} ({seconds:.0f} s): {detail[:300]}", flush=True)
        (self.out / "gpu_check.json").write_text(json.dumps(self.results, indent=1))
        (self.out / "gpu_check.md").write_text(markdown(self.results, self.dry_run))


def _last_json(text: str):
    for line in reversed(text.strip().splitlines()):
        if line.startswith(("{", "[")):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def _last_line(text: str) -> str:
    return text.strip().splitlines()[-1] if text.strip() else ""


def _records(logs: Path) -> str:
    """How many records of each type the logs hold (graph_break, dynamo_graph's recompile, ...)."""
    counts: dict[str, int] = {}
    recompiles = 0
    for log in sorted(logs.glob("*.jsonl")) if logs.is_dir() else ():
        for line in log.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            kind = str(record.get("type"))
            counts[kind] = counts.get(kind, 0) + 1
            recompiles += bool(kind == "dynamo_graph" and record.get("recompile"))
    found = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    return f"records: {found or 'none'}; dynamo graphs with recompile reasons: {recompiles}"


STEPS = ("environment", "gpu_tests", "cuda_profile", "memory", "traced_models", "report")


def steps(runner: Runner, only: frozenset[str] = frozenset(STEPS), nvfuser_path: str | None = None) -> list[dict]:
    """The steps; `nvfuser_path`: where the carried nvFuser is (PYTHONPATH), tried in `environment`."""
    dry_run = runner.dry_run
    py, device = sys.executable, "cpu" if dry_run else "cuda"
    step = runner.step
    with_nvfuser = {"PYTHONPATH": os.pathsep.join([nvfuser_path, runner.env["PYTHONPATH"]])} if nvfuser_path else None
    rc, text, s = runner.run("environment", [py, str(harness.child("gpu_environment.py"))], 240, with_nvfuser)
    info = _last_json(text) if rc == 0 else None
    usable = bool(info) and str(info.get("nvfuser_fusion", "")).startswith("ran")
    if with_nvfuser and not usable:  # nvFuser crashed the import or computed wrong: the checks go on without it
        why = (info or {}).get("nvfuser_fusion") or (info or {}).get("nvfuser") or _last_line(text)
        (runner.out / "logs" / "environment_with_nvfuser.txt").write_text(text)
        rc, text, s2 = runner.run("environment", [py, str(harness.child("gpu_environment.py"))], 120)
        info, s = _last_json(text) if rc == 0 else None, s + s2
        if info is not None:
            info["nvfuser"] = f"carried build not usable: {why}"[:400]
    if usable and with_nvfuser:
        runner.env = {**runner.env, **with_nvfuser}
    step("environment", "PASS" if info and (dry_run or info.get("gpu")) else "FAIL", s,
         json.dumps(info) if info else text[-500:], info)

    if "gpu_tests" in only:
        rc, text, s = runner.run("gpu_tests", [py, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                                               "tests/thunder/test_fusion.py", "-rs", "-m", "not slow"],
                                 240, reserve=120)
        summary = _last_line(text)
        skipped = "skipped" in summary and "passed" not in summary
        status = "FAIL" if rc not in (0, 5) else ("SKIP" if skipped or not usable else "PASS")
        step("gpu_tests", status, s, summary + ("" if usable else "; no usable nvFuser here: its test skipped"))
    if "cuda_profile" in only:
        rc, text, s = runner.run("cuda_profile", [py, "bench/cuda_profile_check.py", "--json",
                                                  str(runner.out / "cuda_profile.json")], 150, reserve=100)
        step("cuda_profile", {0: "PASS", 2: "SKIP"}.get(rc, "FAIL"), s, _last_line(text))
    if "memory" in only:
        _memory(runner, py, device)
    logs = runner.out / "traces"
    if "traced_models" in only:
        # a GPU machine's 16 cores take ~1 min; this shared 2-core CPU up to 5 under load (inductor's fallback)
        parts = "nanogpt,breaks,llama"
        models = [py, str(harness.child("gpu_models.py")), device, parts]
        rc, text, s = runner.run("traced_models", models, 900 if dry_run else 240,
                                 {"THUNDER_TRACE": str(logs)}, reserve=60)
        said = next((line for line in text.splitlines() if line.startswith("ran ")), _last_line(text))
        detail, status = f"{said}; {_records(logs)}", "PASS" if rc == 0 else "FAIL"
        if rc != 0:  # ours, or theirs? the same programs without tracing: SKIP where they fail too
            rc2, text2, s2 = runner.run("untraced_models", models, 240, reserve=30)
            detail += (f"; without THUNDER_TRACE: {'the same programs run' if rc2 == 0 else 'they fail too'}"
                       f" ({_last_line(text2)})")
            status, s = "FAIL" if rc2 == 0 else "SKIP", s + s2
        step("traced_models", status, s, detail)
    if "report" in only:
        report = runner.out / "report"
        rc, text, s = runner.run("report", [py, "-m", "provenance.cli", "report", str(logs), "-o", str(report),
                                            "--overwrite", "--no-browser", "--strict"], 120)
        step("report", "PASS" if rc == 0 else "FAIL", s, _last_line(text))
    return runner.results


def _memory(runner: Runner, py: str, device: str) -> None:
    if runner.dry_run:  # on the CPU the allocator is the stand-ins' (tests/allocation/test_measured_memory.py)
        rc, text, s = runner.run("memory", [py, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                            "tests/allocation/test_measured_memory.py", "-k", "agree or named"], 240)
        runner.step("memory", "PASS" if rc == 0 else "FAIL", s, "stand-ins (no GPU): " + _last_line(text))
        return
    rc, text, s = runner.run("memory", [py, str(harness.child("gpu_memory.py")), device], 150, reserve=60)
    checks = _last_json(text) if rc == 0 else None
    # agreement: nearly every op's change equal to its static one, and the peaks within 10% (+ 1 MiB)
    good = bool(checks) and all(c["agree"] >= 0.9 * c["ops"] and abs(c["measured_peak"] - c["static_peak"])
                                <= 0.1 * c["static_peak"] + (1 << 20) for c in checks)
    runner.step("memory", "PASS" if good else "FAIL", s,
                "; ".join(c["text"] for c in checks) if checks else text[-500:], checks)


def markdown(results: list[dict], dry_run: bool) -> str:
    env = next((r["data"] for r in results if r["step"] == "environment" and r["data"]), {}) or {}
    head = (f"gpu_check {'dry run (CPU)' if dry_run else 'on the device'}, {time.strftime('%Y-%m-%d')}: "
            f"GPU {env.get('gpu') or 'none'}, torch {env.get('torch')}, CUDA {env.get('cuda')}, "
            f"Thunder {env.get('thunder')}, nvFuser {env.get('nvfuser')}")
    rows = [f"| {r['step']} | {r['status']} | {r['seconds']} s | {r['detail'][:240].replace('|', '/')} |"
            for r in results]
    return "\n".join([head, "", "| step | result | time | detail |", "| --- | --- | ---: | --- |", *rows, ""])


def _pip_download(spec: str, dest: Path) -> bool:
    platforms = [a for p in ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                             "manylinux2014_x86_64") for a in ("--platform", p)]
    return subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                           "--python-version", "3.12", "--implementation", "cp", *platforms, "-d", str(dest), spec],
                          capture_output=True, text=True).returncode == 0


def fetch_wheels() -> int:
    """What the device lacks, for its Python 3.12 (device README: pip download, no deps): the wheels,
    nvFuser's files less its NVRTC, and the logger shim built here (x86-64, only libstdc++ needed)."""
    WHEELS.mkdir(exist_ok=True)
    failed = [spec for spec in CARRIED if not _pip_download(spec, WHEELS)]
    with tempfile.TemporaryDirectory() as tmp:
        if _pip_download(NVFUSER, Path(tmp)):
            (wheel,) = Path(tmp).glob("*.whl")
            with zipfile.ZipFile(wheel) as zf, tarfile.open(NVFUSER_TREE, "w:gz") as tar:
                left_out = []
                for member in zf.infolist():
                    if member.is_dir():
                        continue
                    if "/libnvrtc" in member.filename:
                        left_out.append(member.filename)
                        continue
                    _add(tar, member.filename, zf.read(member), (member.external_attr >> 16) or 0o644)
                _add(tar, LEFT_OUT, "\n".join(left_out).encode(), 0o644)  # linked to the image's on the device
        else:
            failed.append(NVFUSER)
    if subprocess.run(["g++", "-O2", "-fPIC", "-shared", "-Wno-invalid-offsetof", "-o", str(SHIM),
                       str(SHIM_SOURCE)]).returncode:
        failed.append(SHIM.name)
    carried = [p for p in WHEELS.iterdir() if p.is_file()]
    size = sum(p.stat().st_size for p in carried)
    print(f"{len(carried)} files in {WHEELS}, {size / 2**20:.1f} MiB (the device carries 64 MiB)"
          + (f"; not found: {', '.join(failed)}" if failed else ""))
    return 1 if failed or size > 60 * 2**20 else 0


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    entry = tarfile.TarInfo(name)
    entry.size, entry.mode = len(data), mode
    tar.addfile(entry, io.BytesIO(data))


def _install_carried() -> tuple[dict[str, str], str | None]:
    """On the device: the carried wheels into /tmp/site (ahead of the image's packages), nvFuser's files
    into /tmp/site_nvf with the image's NVRTC linked in and the shim loaded first. Returns the steps'
    environment and nvFuser's path (None if it did not travel)."""
    wheels = sorted(str(p) for p in WHEELS.glob("*.whl"))
    if wheels and not SITE.exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--no-cache-dir", "--target", str(SITE), *wheels], check=True)
    nvfuser_path = None
    if NVFUSER_TREE.exists() and SHIM.exists():
        if not SITE_NVF.exists():
            with tarfile.open(NVFUSER_TREE) as tar:
                tar.extractall(SITE_NVF, filter="data")
            found = _image_nvrtc()
            for name in filter(None, (SITE_NVF / LEFT_OUT).read_text().splitlines()):
                if found is not None:
                    (SITE_NVF / name).symlink_to(found)
                    for builtins in found.parent.glob("libnvrtc-builtins*.so*"):  # NVRTC opens them beside itself
                        (SITE_NVF / name).with_name(builtins.name).symlink_to(builtins)
            (SITE_NVF / "sitecustomize.py").write_text(
                "import ctypes, os\n"
                f"ctypes.CDLL({str(SHIM)!r}, mode=os.RTLD_NOW | os.RTLD_GLOBAL)  # bench/gpu/c10_logger_shim.cpp\n")
            # Thunder 0.2.6 runs on nvfuser_direct (>= 0.2.34) but still takes compute_tensor_descriptor
            # from the old `nvfuser` module, which nvFuser 0.2.36 no longer ships: the one name, aliased
            (SITE_NVF / "nvfuser").mkdir()
            (SITE_NVF / "nvfuser" / "__init__.py").write_text("from nvfuser_direct import compute_tensor_descriptor\n")
        nvfuser_path = str(SITE_NVF)
    # THUNDER_TRACE works through the .pth file an install puts in site-packages (pyproject.toml)
    pth = Path(site.getsitepackages()[0]) / "thunder_provenance.pth"
    if not pth.exists():
        pth.write_text((ROOT / "provenance" / "thunder_provenance.pth").read_text())
    paths = [str(SITE), str(ROOT)] if wheels else [str(ROOT)]
    return {"PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}, nvfuser_path


def _image_nvrtc() -> Path | None:
    """The image's NVRTC of CUDA 13 (its nvidia-cuda-nvrtc package, or the toolkit's)."""
    roots = [Path(p) for p in sys.path if p.endswith("site-packages")] + [Path("/usr/local/cuda/lib64")]
    for root in roots:
        for found in sorted(root.glob("**/libnvrtc.so.13*")) if root.exists() else ():
            return found
    return None


def main() -> int:
    parser = harness.parser(__doc__)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/gpu_check")))
    parser.add_argument("--dry-run", action="store_true", help="on this CPU machine: the steps a GPU does not need")
    parser.add_argument("--fetch-wheels", action="store_true", help="download what the device lacks into .whl/")
    parser.add_argument("--budget", type=float, default=480, help="seconds for all the steps (default 480)")
    parser.add_argument("--steps", default=",".join(STEPS),
                        help="the steps to run, comma-separated (default: all; environment always runs)")
    args = parser.parse_args()
    if args.fetch_wheels:
        return fetch_wheels()
    only = frozenset(args.steps.split(","))
    if not only <= set(STEPS):
        parser.error(f"unknown step(s) {', '.join(sorted(only - set(STEPS)))}; the steps: {', '.join(STEPS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    begin = time.monotonic()
    if args.dry_run:
        nvfuser_path = None
        env = {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    else:
        env, nvfuser_path = _install_carried()
    runner = Runner(args.out, args.budget - (time.monotonic() - begin), env, args.dry_run)
    results = steps(runner, only, nvfuser_path)
    print(markdown(results, args.dry_run))
    return 1 if any(r["status"] == "FAIL" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
