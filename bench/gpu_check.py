"""The GPU checks, in one prepared run (issue 26): on the device machine, or a CPU dry run here.

    python bench/gpu_check.py --fetch-wheels            # here: the wheels the device machine lacks, into .whl/
    python3 bench/gpu_check.py --out "$OUT"             # there (device tool: carry [".whl"]), <= 8 minutes
    python bench/gpu_check.py --dry-run --out /tmp/gc   # here, on CPU: every step that can run without a GPU

The device machine (docs: /work/.library/device) has no network and its own torch (2.11, CUDA 13,
Python 3.12); what this project needs beside it travels as wheels in `.whl/` (under 64 MiB), installed
into /tmp/site. nvFuser's wheels are built per torch minor (`nvfuser-cu128-torch29` for this project's
torch 2.9): where none matches the device's torch, the nvFuser steps say so and are skipped.

Steps, each in a fresh process with its own time limit, each PASS, FAIL or SKIP (with why):
1. `environment`: GPU, driver, torch, CUDA, Thunder, nvFuser, this package.
2. `gpu_tests`: the suite's GPU tests (nvFuser fusion members at their lines: tests/capture/test_fusion.py).
3. `cuda_profile`: bench/cuda_profile_check.py (CUDA events pair up, kernel vs launch time, coverage).
4. `memory`: nanoGPT profiled on the device; the allocator's readings against the static timeline
   (provenance.memory_checks): ops agreeing, peaks measured and static.
5. `traced_models`: nanoGPT under thunder.jit and HF Llama under thunderfx with THUNDER_TRACE set.
6. `report`: thunder-trace report of those logs (--strict).
Results: OUT/gpu_check.json and OUT/gpu_check.md (the table for bench/README.md), step logs in OUT/logs.
Exit status: 0 when no step failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHEELS = ROOT / ".whl"
SITE = Path("/tmp/site")
# What the device image lacks (KINDS.md lists what it has): this project's own needs, pinned as here.
CARRIED = ("lightning-thunder==0.2.6", "looseversion==1.3.0", "orjson", "opentelemetry-api", "opentelemetry-sdk",
           "opentelemetry-proto", "opentelemetry-exporter-otlp-proto-http", "opentelemetry-exporter-otlp-proto-common",
           "opentelemetry-semantic-conventions", "importlib-metadata", "playwright")
NVFUSER = "nvfuser-cu128-torch29"  # the build for this project's torch; the device's torch may need another

_ENVIRONMENT = r"""
import json, platform, torch
info = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
try:
    import thunder; info["thunder"] = thunder.__version__
except Exception as exc: info["thunder"] = f"does not import: {exc!r}"[:300]
try:
    import nvfuser; info["nvfuser"] = getattr(nvfuser, "version", lambda: "?")()
except Exception as exc: info["nvfuser"] = f"does not import: {type(exc).__name__}"
import provenance; info["thunder_provenance"] = provenance.__version__
print(json.dumps(info))
"""

_MEMORY = r"""
import json, sys, torch, thunder, provenance
from thunder.tests.nanogpt_model import GPT, GPTConfig
device = sys.argv[1]
torch.manual_seed(0)
provenance.enable(profile=2)
model = GPT(GPTConfig(n_layer=2, n_head=4, n_embd=128, block_size=128, vocab_size=512, dropout=0.0)).to(device)
jm = thunder.jit(model)
x = torch.randint(0, 512, (4, 128), device=device)
for _ in range(4):
    jm(x, x)[1].backward()
checks = provenance.memory_checks(jm)
print(json.dumps([{"trace": c.trace, "ops": c.ops, "agree": c.agree, "static_peak": c.static_peak,
                   "measured_peak": c.measured_peak, "allocator_peak": c.allocator_peak,
                   "text": c.describe(), "differ": [[d.name, d.static, d.measured] for d in c.differ[:5]]}
                  for c in checks]))
"""

_MODELS = r"""
import sys, torch, thunder, provenance
from thunder.tests.nanogpt_model import GPT, GPTConfig
device = sys.argv[1]
model = GPT(GPTConfig(n_layer=2, n_head=4, n_embd=64, block_size=64, vocab_size=256, dropout=0.0)).to(device)
x = torch.randint(0, 256, (2, 64), device=device)
jm = thunder.jit(model)
for _ in range(3):
    jm(x, x)[1].backward()
from thunder.dynamo import thunderfx
from transformers import LlamaConfig, LlamaForCausalLM
llama = LlamaForCausalLM(LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2)).to(device)
fx = thunderfx(llama)
ids = torch.randint(0, 256, (2, 32), device=device)
for _ in range(2):
    fx(input_ids=ids, labels=ids).loss.backward()
print("models ran on", device)
"""


def _run(name: str, cmd: list[str], out: Path, timeout: int, env: dict | None = None) -> tuple[int, str, float]:
    begin = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                              env={**os.environ, **(env or {})})
        rc, text = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        def text_of(b) -> str:
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")

        rc, text = 124, f"{text_of(exc.stdout)}{text_of(exc.stderr)}\ntimed out after {timeout} s"
    (out / "logs").mkdir(parents=True, exist_ok=True)
    (out / "logs" / f"{name}.txt").write_text(text)
    return rc, text, time.perf_counter() - begin


def _last_json(text: str):
    for line in reversed(text.strip().splitlines()):
        if line.startswith(("{", "[")):
            return json.loads(line)
    return None


STEPS = ("environment", "gpu_tests", "cuda_profile", "memory", "traced_models", "report")


def steps(out: Path, dry_run: bool, only: frozenset[str] = frozenset(STEPS)) -> list[dict]:
    py, device = sys.executable, "cpu" if dry_run else "cuda"
    results: list[dict] = []

    def step(name: str, status: str, seconds: float, detail: str, data=None) -> None:
        results.append({"step": name, "status": status, "seconds": round(seconds, 1), "detail": detail[:2000],
                        "data": data})
        print(f"{status:4} {name} ({seconds:.0f} s): {detail[:300]}", flush=True)

    rc, text, s = _run("environment", [py, "-c", _ENVIRONMENT], out, 120)
    info = _last_json(text) if rc == 0 else None
    step("environment", "PASS" if info and (dry_run or info.get("gpu")) else "FAIL", s,
         json.dumps(info) if info else text[-500:], info)
    nvfuser = bool(info) and not str(info.get("nvfuser", "")).startswith("does not import")

    if "gpu_tests" in only:
        _gpu_tests(out, py, nvfuser, step)
    if "cuda_profile" in only:
        _cuda_profile(out, py, step)
    if "memory" in only:
        _memory(out, py, device, dry_run, step)
    logs = out / "traces"
    if "traced_models" in only:
        # a GPU machine's 16 cores take ~1 min; this shared 2-core CPU up to 5 under load (inductor's fallback)
        rc, text, s = _run("traced_models", [py, "-c", _MODELS, device], out, 900 if dry_run else 300,
                           {"THUNDER_TRACE": str(logs)})
        step("traced_models", "PASS" if rc == 0 else "FAIL", s, text.strip().splitlines()[-1] if text.strip() else "")
    if "report" in only:
        report = out / "report"
        rc, text, s = _run("report", [py, "-m", "provenance.report.cli", "report", str(logs), "-o", str(report),
                                      "--overwrite", "--no-browser", "--strict"], out, 180)
        step("report", "PASS" if rc == 0 else "FAIL", s, text.strip().splitlines()[-1] if text.strip() else "")
    return results


def _gpu_tests(out: Path, py: str, nvfuser: bool, step) -> None:
    rc, text, s = _run("gpu_tests", [py, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                                     "tests/capture/test_fusion.py", "-rs"], out, 240)
    summary = text.strip().splitlines()[-1] if text.strip() else ""
    skipped = "skipped" in summary and "passed" not in summary.replace("skipped", "")
    status = "FAIL" if rc not in (0, 5) else ("SKIP" if skipped or not nvfuser else "PASS")
    step("gpu_tests", status, s, summary + ("" if nvfuser else "; nvFuser does not import here: its test skipped"))


def _cuda_profile(out: Path, py: str, step) -> None:
    rc, text, s = _run("cuda_profile", [py, "bench/cuda_profile_check.py", "--json", str(out / "cuda_profile.json")],
                       out, 180)
    step("cuda_profile", {0: "PASS", 2: "SKIP"}.get(rc, "FAIL"), s, text.strip().splitlines()[-1] if text else "")


def _memory(out: Path, py: str, device: str, dry_run: bool, step) -> None:
    if dry_run:  # on the CPU the allocator is the stand-ins' (tests/memory/test_measured_memory.py)
        rc, text, s = _run("memory", [py, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                      "tests/memory/test_measured_memory.py", "-k", "agree or named"], out, 240)
        step("memory", "PASS" if rc == 0 else "FAIL", s, "stand-ins (no GPU): " + text.strip().splitlines()[-1])
        return
    rc, text, s = _run("memory", [py, "-c", _MEMORY, device], out, 180)
    checks = _last_json(text) if rc == 0 else None
    # agreement: nearly every op's change equal to its static one, and the peaks within 10% (+ 1 MiB)
    good = bool(checks) and all(c["agree"] >= 0.9 * c["ops"] and abs(c["measured_peak"] - c["static_peak"])
                                <= 0.1 * c["static_peak"] + (1 << 20) for c in checks)
    step("memory", "PASS" if good else "FAIL", s,
         "; ".join(c["text"] for c in checks) if checks else text[-500:], checks)


def markdown(results: list[dict], dry_run: bool) -> str:
    env = next((r["data"] for r in results if r["step"] == "environment" and r["data"]), {}) or {}
    head = (f"gpu_check {'dry run (CPU)' if dry_run else 'on the device'}, {time.strftime('%Y-%m-%d')}: "
            f"GPU {env.get('gpu') or 'none'}, torch {env.get('torch')}, CUDA {env.get('cuda')}, "
            f"Thunder {env.get('thunder')}, nvFuser {env.get('nvfuser')}")
    rows = [f"| {r['step']} | {r['status']} | {r['seconds']} s | {r['detail'][:240].replace('|', '/')} |"
            for r in results]
    return "\n".join([head, "", "| step | result | time | detail |", "| --- | --- | ---: | --- |", *rows, ""])


def fetch_wheels() -> int:
    """The wheels the device lacks, for its Python 3.12 (device README: pip download, no deps)."""
    WHEELS.mkdir(exist_ok=True)
    platforms = [a for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
                 for a in ("--platform", p)]
    failed = []
    for spec in (*CARRIED, NVFUSER):
        done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                               "--python-version", "3.12", "--implementation", "cp", *platforms, "-d", str(WHEELS),
                               spec], capture_output=True, text=True)
        if done.returncode:
            failed.append(spec)
    size = sum(p.stat().st_size for p in WHEELS.glob("*.whl"))
    print(f"{len(list(WHEELS.glob('*.whl')))} wheels in {WHEELS}, {size / 2**20:.1f} MiB (the device carries 64 MiB)"
          + (f"; not found: {', '.join(failed)}" if failed else ""))
    return 1 if size > 60 * 2**20 else 0


def _install_carried() -> None:
    """On the device: the carried wheels into /tmp/site, ahead of the image's packages."""
    wheels = sorted(str(p) for p in WHEELS.glob("*.whl"))
    if wheels and not SITE.exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--no-cache-dir", "--target", str(SITE), *wheels], check=True)
    paths = [str(SITE), str(ROOT)] if wheels else [str(ROOT)]
    os.environ["PYTHONPATH"] = os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/gpu_check")))
    parser.add_argument("--dry-run", action="store_true", help="on this CPU machine: the steps a GPU does not need")
    parser.add_argument("--fetch-wheels", action="store_true", help="download the wheels the device lacks into .whl/")
    parser.add_argument("--steps", default=",".join(STEPS),
                        help="the steps to run, comma-separated (default: all; environment always runs)")
    args = parser.parse_args()
    if args.fetch_wheels:
        return fetch_wheels()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.dry_run:
        _install_carried()
    else:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    only = frozenset(args.steps.split(","))
    if not only <= set(STEPS):
        parser.error(f"unknown step(s) {', '.join(sorted(only - set(STEPS)))}; the steps: {', '.join(STEPS)}")
    results = steps(args.out, args.dry_run, only)
    (args.out / "gpu_check.json").write_text(json.dumps(results, indent=1))
    (args.out / "gpu_check.md").write_text(markdown(results, args.dry_run))
    print(markdown(results, args.dry_run))
    return 1 if any(r["status"] == "FAIL" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
