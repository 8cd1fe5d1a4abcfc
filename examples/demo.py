"""The `./dev demo` program: what thunder-provenance shows on a small training run, in about three
minutes on a 2-core CPU. It runs, each logged with THUNDER_TRACE and profiled with
THUNDER_TRACE_PROFILE=3 (no provenance code in the programs traced):

1. nanoGPT (Thunder's own copy, 1 layer, n_embd 32) under `thunder.jit` with Thunder's torch.compile
   executor in front of the default ones (inductor fuses the model on the CPU): a few training
   steps; an evaluation on another batch shape under `torch.no_grad()`, which Thunder compiles
   again; a sequence longer than the model's block size, whose compile fails; then, in a process
   of its own, a small transformer with a graph break under ThunderFX (`thunder.dynamo.thunderfx`);
2. the tensor-parallel example on 2 ranks (`torchrun`, gloo);

then builds the report (`thunder-trace report`) and prints a short summary: the compiles, their
status and recompile reasons, the lines that took the most time, where the report is.

    python examples/demo.py [--traces] [--out DIR] [--layers N] [--threads N] [--no-tp]

`--traces` first prints nanoGPT's annotated forward and backward traces (examples/annotate_nanogpt.py).
Every line it prints starts with `demo:`; what the programs it runs print goes to
DIR/thunder_trace_demo.log (shown if one of them fails). A program that fails is run again untraced:
where Thunder itself fails it that way too (ThunderFX on torch 2.12), the demo says so, with Thunder's
error, and goes on with the rest (exit 0); any other failure ends it (exit 1).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PROFILE = 3  # calls timed per compile, after its first


def say(text: str = "") -> None:
    print(f"demo: {text}".rstrip(), flush=True)


# -- the traced program (`demo.py workload`): plain Thunder, nothing of thunder-provenance --------------

def workload(part: str, layers: int, steps: int, threads: int) -> None:
    import warnings

    warnings.filterwarnings("ignore", message="transformer_engine module not found")
    import torch

    if threads:  # on a small CPU shared with other work, torch's thread pool makes op times swing 10-100x
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    if part == "nanogpt":
        run_nanogpt(layers, steps, eval_calls=PROFILE + 1)
    else:
        run_thunderfx(fx_steps=PROFILE + 1)


def run_nanogpt(layers: int, steps: int, eval_calls: int) -> None:
    import thunder
    import torch
    from thunder.executors.torch_compile import torch_compile_ex
    from thunder.tests.nanogpt_model import GPT, GPTConfig

    config = GPTConfig(n_layer=layers, n_head=2, n_embd=32, block_size=16, vocab_size=64, dropout=0.0)
    model = GPT(config)
    jmodel = thunder.jit(model, executors=[torch_compile_ex, *thunder.get_default_executors()])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    began = time.perf_counter()
    losses = []
    for _ in range(steps):
        tokens = torch.randint(0, config.vocab_size, (2, config.block_size))
        _, loss = jmodel(tokens, torch.randint(0, config.vocab_size, (2, config.block_size)))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    say(f"  train: {steps} steps of batch 2 x {config.block_size}, loss {losses[0]:.3f} -> {losses[-1]:.3f} "
        f"({time.perf_counter() - began:.1f} s: Thunder's compile, inductor's build of its fusions at the first step)")

    began = time.perf_counter()
    model.eval()
    with torch.no_grad():
        for _ in range(eval_calls):
            logits, _ = jmodel(torch.randint(0, config.vocab_size, (4, config.block_size // 2)))
    say(f"  evaluate: {eval_calls} calls of batch 4 x {config.block_size // 2} under torch.no_grad(): "
        f"a recompile ({time.perf_counter() - began:.1f} s)")

    too_long = config.block_size * 2
    try:
        jmodel(torch.randint(0, config.vocab_size, (1, too_long)))
    except AssertionError as e:
        say(f"  a sequence of {too_long} tokens (block size {config.block_size}): the compile fails, "
            f"{type(e).__name__}: {e}")
    else:
        raise SystemExit("demo: expected the over-long sequence to fail")


def run_thunderfx(fx_steps: int) -> None:
    import thunder.dynamo
    import torch

    sys.path.insert(0, str(HERE))
    from thunderfx import TinyTransformer  # examples/thunderfx.py's model: one graph break

    began = time.perf_counter()
    small = TinyTransformer()
    compiled = thunder.dynamo.thunderfx(small)
    for _ in range(fx_steps):
        compiled(torch.randint(0, 64, (2, 16))).sum().backward()
    say(f"  ThunderFX: {fx_steps} steps of a small transformer with a graph break "
        f"({time.perf_counter() - began:.1f} s)")


# -- the demo: run the programs, build the report, summarize it -------------------------------------------

class Step:
    """Runs the demo's programs with their output (stdout and stderr) appended to one log file;
    the lines a program prints that start with `demo:` are passed on."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.could_not_run: list[str] = []  # steps Thunder itself fails on this stack
        log.write_text("")

    def run(self, command: list[str], env: dict[str, str] | None = None, passthrough: bool = True,
            what: str | None = None) -> bool:
        """Run `command`; False if it failed where Thunder itself fails it untraced too (said, with
        Thunder's error, for the step `what`); any other failure ends the demo."""
        code = self._run(command, env, passthrough)
        if code == 0:
            return True
        error = _last_line(self.log)
        if what is not None and "Error" in error:  # Thunder's failure, or ours? the same program untraced decides
            untraced = {k: v for k, v in (env or os.environ).items() if not k.startswith("THUNDER_TRACE")}
            if self._run(command, untraced, passthrough=False) != 0 and _last_line(self.log) == error:
                say(f"  {what} could not run: Thunder itself fails it on this stack, untraced too: {error}")
                self.could_not_run.append(what)
                return False
        tail = self.log.read_text().splitlines()[-40:]
        for line in tail:
            say(f"  | {line}")
        raise SystemExit(f"demo: `{' '.join(command)}` failed (exit {code}); its output: {self.log}")

    def _run(self, command: list[str], env: dict[str, str] | None, passthrough: bool) -> int:
        with open(self.log, "a") as out:
            out.write(f"$ {' '.join(command)}\n")
            out.flush()
            child = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=out, text=True,
                                     bufsize=1)
            assert child.stdout is not None
            for line in child.stdout:
                out.write(line)
                if passthrough and line.startswith("demo:"):
                    print(line, end="", flush=True)
            return child.wait()


def _last_line(log: Path) -> str:
    """The last line a program wrote to the log: a traceback's exception."""
    lines = [line.strip() for line in log.read_text().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def traced_env(logs: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("THUNDER_TRACE", "THUNDER_TRACE_PROFILE")}
    env.update(THUNDER_TRACE=str(logs), THUNDER_TRACE_PROFILE=str(PROFILE))
    return env


def summary(report: Path, logs: Path, top: int = 5) -> None:
    """The report's compiles (compile_directory.json), by process, and the log's top lines by time."""
    from provenance.report.analyze.cost import load_profiles
    from provenance.timing.rollup import line_texts, rollup, spread_text
    from provenance.timing.rollup import summary as rollup_summary

    directory = json.loads((report / "compile_directory.json").read_text())
    t = directory["totals"]
    say(f"{t['compiles']} compiles: {t['ok']} ok, {t['failed']} failed, {t['recompiles']} recompiles; "
        f"{t['calls']} calls, {t['cache_hits']} cache hits (all compiles)")
    for log in directory["logs"]:
        argv = (log.get("header") or {}).get("argv") or ["?"]
        say(f"  {log['label']}: {' '.join([Path(argv[0]).name, *argv[1:]])}")
        for c in (c for c in directory["compiles"] if c["log"] == log["index"]):
            what = f"{c['status']:<6} {c['seconds'] or 0:5.1f} s"
            if c["status"] == "ok":
                final = c.get("final") or {}
                what += f"  {final.get('ops', 0):3} ops, {final.get('fusions', 0)} fusions"
                hits = c.get("compile_hits")
                if hits is not None:
                    what += f", {hits} cache hits"
            elif c.get("error"):
                what += f"  {c['error'].get('type')}"
            if c.get("recompiled") and c.get("recompile_reason"):
                what += f"  recompiled: {c['recompile_reason']}"
            say(f"    compile {c['compile']:<2} {c['fn'].rsplit('.', 1)[-1]:<16} {what}")
    profiles = load_profiles(logs)
    rows = [r for r in rollup(profiles, by="line") if r.median_ns and r.kind != "in_fusion"]
    if rows:
        texts, totals = line_texts(profiles), rollup_summary(profiles)
        left_out = f", {len(totals['excluded'])} left out" if totals["excluded"] else ""
        say(f"top lines by time ({totals['calls']} measured calls of {totals['compiles']} profiled compiles"
            f"{left_out}; share, median ms per call, range):")
        for row in rows[:top]:
            text = texts.get(row.key, "")
            say(f"  {row.share:6.1%} {row.median_ns / 1e6:8.3f}  {spread_text(row.time) or '-':>13}  {row.label}"
                + (f"  `{text}`" if text else ""))

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", nargs="*", help=argparse.SUPPRESS)  # the traced program: workload nanogpt|thunderfx
    parser.add_argument("--traces", action="store_true", help="print nanoGPT's annotated traces first")
    parser.add_argument("--out", type=Path, default=Path.cwd(),
                        help="where thunder_trace/ (the logs) and thunder_trace_report/ go (default: here)")
    parser.add_argument("--layers", type=int, default=1, help="nanoGPT's transformer blocks (default 1)")
    parser.add_argument("--steps", type=int, default=PROFILE + 2, help="training steps (default %(default)s)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch's intra-op threads in the traced program (0: torch's default; default 1)")
    parser.add_argument("--no-tp", action="store_true", help="skip the tensor-parallel run (torchrun)")
    args = parser.parse_args()
    if args.workload[:1] == ["workload"] and args.workload[1:] in (["nanogpt"], ["thunderfx"]):
        workload(args.workload[1], args.layers, args.steps, threads=args.threads)
        return
    if args.workload:
        parser.error(f"unknown argument {' '.join(args.workload)!r}")

    began = time.perf_counter()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    logs, report = out / "thunder_trace", out / "thunder_trace_report"
    step = Step(out / "thunder_trace_demo.log")
    if args.traces:
        say("nanoGPT's final forward and backward traces, annotated (examples/annotate_nanogpt.py):")
        done = subprocess.run([sys.executable, str(HERE / "annotate_nanogpt.py")], cwd=ROOT, text=True,
                              capture_output=True)
        for line in done.stdout.splitlines():
            print(f"demo: | {line}")
        if done.returncode != 0:
            raise SystemExit(f"demo: annotate_nanogpt.py failed:\n{done.stderr[-3000:]}")
    for old in logs.glob("thunder_trace.*.jsonl") if logs.is_dir() else ():  # the previous demo's logs
        old.unlink()

    say(f"logs: {logs}  (THUNDER_TRACE={logs.name} THUNDER_TRACE_PROFILE={PROFILE}); "
        f"the programs' own output: {step.log.name}")
    layers = f"{args.layers} layer{'s' if args.layers != 1 else ''}"
    say(f"1. nanoGPT ({layers}) under thunder.jit, torch.compile executor first; then ThunderFX")
    for part in ("nanogpt", "thunderfx"):
        step.run([sys.executable, str(Path(__file__).resolve()), "workload", part, "--layers", str(args.layers),
                  "--steps", str(args.steps), "--threads", str(args.threads)], env=traced_env(logs),
                 what="ThunderFX" if part == "thunderfx" else "nanoGPT")
    if not args.no_tp:
        t = time.perf_counter()
        say("2. tensor parallel (examples/tensor_parallel.py) on 2 ranks with torchrun, gloo")
        # torchrun sets OMP_NUM_THREADS=1 for its workers anyway; set, it does not warn about it
        if step.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                     str(HERE / "tensor_parallel.py")], env={"OMP_NUM_THREADS": "1", **traced_env(logs)},
                    what="tensor parallel"):
            say(f"  2 ranks logged ({time.perf_counter() - t:.1f} s)")
    say(f"3. thunder-trace report {logs.name} -o {report.name}")
    step.run([sys.executable, "-m", "provenance.report", "report", str(logs), "-o", str(report), "--overwrite",
              "--no-browser"], env={k: v for k, v in os.environ.items() if k != "THUNDER_TRACE"})
    summary(report, logs)
    say(f"report: {report / 'index.html'}")
    say(f"done in {time.perf_counter() - began:.0f} s"
        + ("" if args.traces else "; nanoGPT's annotated traces: ./dev demo --traces"))
    if step.could_not_run:
        say(f"not run on this stack (Thunder's failure, see above): {', '.join(step.could_not_run)}")


if __name__ == "__main__":
    main()
