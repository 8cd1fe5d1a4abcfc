"""ThunderFX: provenance coverage (thunder.jit vs thunderfx) and the compile overhead of capture.

coverage: nanoGPT and llama2 (shipped with Thunder), N layers, forward + backward, compiled by
`thunder.jit` and by `thunder.dynamo.thunderfx`; for the compute ops (not bookkeeping) of the
final forward and backward traces (every Thunder piece's, for thunderfx): the share whose user
frame is in the model's file, that has a module path, and both.

overhead: `thunderfx(model)` plus the first forward and backward of nanoGPT, on a fresh model
each time (Dynamo's caches reset before each sample, outside the clock), capture enabled vs
disabled; in one process, after a warm-up in each mode, pairs with the order alternating; the
ratio is taken within each pair and the median reported (as compile_overhead.py does). After
each switch, `--settle` untimed compiles run first, to keep effects of the switch itself (caches,
the interpreter's specializations of patched classes) out of the pairs; `--processes` compares
in fresh processes instead. torch runs on `--threads` intra-op threads (default 1): capture's
cost is the compiling thread's, and idle OpenMP workers spin and bill CPU time at random on a
shared machine; "cpu" is the compiling thread's CPU time (time.thread_time). Thunder's spin on
a helper thread is replaced by a join in both modes (`join_frame_threads`), and each pair runs
at its own frame-stack offset (`stack_pad`: where CPython's frame chunks end decides how many
page faults Thunder's recursion makes). bench/instructions.py
counts the same samples' instructions instead (deterministic, under valgrind).

    python bench/thunderfx.py [--layers 2] [--pairs 9] [--overhead-layers 4] [--settle 1] [--processes 0]
                              [--threads 1] [--fixed-stack] [--skip-coverage] [--skip-overhead]
                              [--entry thunder.jit] [--model hf-llama]
"""

from __future__ import annotations

import contextlib
import gc
import random
import resource
import statistics
import sys
import time
import warnings
from collections.abc import Callable

import harness

warnings.filterwarnings("ignore")


def _models(layers: int):
    import torch
    from thunder.tests.llama2_model import ModelArgs, Transformer

    def nanogpt():
        return harness.nanogpt(layers), torch.randint(0, 128, (2, 32))

    def llama2():
        args = ModelArgs(dim=64, n_layers=layers, n_heads=4, vocab_size=128, multiple_of=16, max_seq_len=32)
        return Transformer(args), torch.randint(0, 128, (2, 32))

    def hf_llama():  # transformers' model code (--model hf-llama): a forward with a loss
        from transformers import LlamaConfig, LlamaForCausalLM

        cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                          num_attention_heads=4, num_key_value_heads=2)
        return LlamaForCausalLM(cfg), torch.randint(0, 256, (2, 16))

    return {"nanoGPT": nanogpt, "llama2": llama2, "hf-llama": hf_llama}


def _forward_backward(fn, x) -> None:
    if MODEL == "hf-llama":
        fn(input_ids=x, labels=x).loss.backward()
        return
    out = fn(x)
    (out[0] if isinstance(out, tuple) else out).sum().backward()


def _shares(traces, model_file: str) -> tuple[int, float, float, float]:
    import provenance
    from provenance import Kind
    from provenance.core.attribution import charged

    compute = at_file = with_module = both = 0
    for trace in traces:
        for bsym in trace.bound_symbols:
            record = provenance.of(bsym)
            if record is None or record.kind == Kind.BOOKKEEPING:
                continue
            members = charged(record)  # a fusion as its members
            in_file = any(m.user_frame is not None and m.user_frame.file == model_file for m in members)
            module = any(m.module is not None for m in members)
            compute += 1
            at_file += in_file
            with_module += module
            both += in_file and module
    return compute, at_file / compute, with_module / compute, both / compute


def coverage(layers: int) -> None:
    import thunder
    import thunder.dynamo
    import torch

    import provenance

    provenance.enable()
    print(f"| model ({layers} layers) | entry point | trace | compute ops | at model file | with module | both |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for name, build in [(n, b) for n, b in _models(layers).items() if n != "hf-llama"]:
        for entry in ("thunder.jit", "thunderfx"):
            torch.manual_seed(0)
            model, x = build()
            model_file = sys.modules[type(model).__module__].__file__
            if entry == "thunder.jit":
                fn = thunder.jit(model)
                _forward_backward(fn, x)
                fw, bw = thunder.last_traces(fn)[-1:], thunder.last_backward_traces(fn)[-1:]
            else:
                fn = thunder.dynamo.thunderfx(model)
                _forward_backward(fn, x)
                fw, bw = fn.last_traces, fn.last_backward_traces
            for title, traces in (("forward", fw), ("backward", bw)):
                n, at_file, module, both = _shares(traces, model_file)
                print(f"| {name} | {entry} | {title} ({len(traces)} piece{'s' if len(traces) != 1 else ''}) "
                      f"| {n} | {at_file:.1%} | {module:.1%} | {both:.1%} |", flush=True)
    provenance.disable()


class _GcClock:
    """Garbage collections during a sample (gc.callbacks): how many, and the wall time they took."""

    def __init__(self) -> None:
        self.count = self.seconds = self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.count += 1
            self.seconds += time.perf_counter() - self._start


def join_frame_threads() -> None:
    """Make Thunder's wait for a Python frame do the same work without spinning on time.

    When an exception leaves interpreted code, Thunder makes a Python frame in a new thread
    (`InterpreterFrame.get_or_make_python_frame`) and spins, holding the GIL, until that thread
    ran: about one GIL switch interval (5 ms) each, 24 times in a 2-layer thunderfx compile
    (0.13 s, ~2% of it), longer when the machine is loaded (the new thread must be scheduled)
    and ~80% of all instructions under valgrind. Here the thread is joined before the spin
    starts, in both modes: the same work, minus a wait whose length is the scheduler's. (It
    only shrinks the denominator of on/off ratios.)"""
    import _thread
    import threading

    def start_and_join(function, args, kwargs=None):
        thread = threading.Thread(target=function, args=args, kwargs=kwargs or {})
        thread.start()
        thread.join()
        return thread.ident

    _thread.start_new_thread = start_and_join  # threading keeps its own reference: unaffected


_gc_clock: _GcClock | None = None
ENTRY = "thunderfx"  # --entry: the same measurement through thunder.jit, for comparison
MODEL = "nanoGPT"  # --model: of the overhead samples


def _compile_once(layers: int, region=contextlib.nullcontext) -> tuple[float, float, int, float, int]:
    """(wall, CPU of this thread, garbage collections, their seconds, the thread's minor page
    faults) of one compile + fwd/bwd;
    `region()` is entered around just that (bench/instructions.py counts instructions there)."""
    global _gc_clock
    import thunder.dynamo
    import torch

    torch.manual_seed(0)
    model, x = _models(layers)[MODEL]()
    torch._dynamo.reset()  # a fresh model must compile afresh (and not hit the recompile limit)
    gc.collect()
    _gc_clock = _gc_clock or _GcClock()
    _gc_clock.count = _gc_clock.seconds = 0
    with region():
        faults = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        wall, cpu = time.perf_counter(), time.thread_time()
        fn = thunder.dynamo.thunderfx(model) if ENTRY == "thunderfx" else thunder.jit(model)
        _forward_backward(fn, x)
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        faults = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - faults
    return wall, cpu, _gc_clock.count, _gc_clock.seconds, faults


def stack_pad(slots: int) -> Callable:
    """A caller whose frame holds `slots` locals: what it calls runs with CPython's frame stack
    (16 KB chunks, mmapped and freed as the stack crosses their ends) shifted by 8·slots bytes.

    Where Thunder's deep interpreter recursion meets a chunk's end decides how many chunks it
    maps and unmaps: the same compile makes 40 000-240 000 page faults depending on that
    offset alone, and any extra frame (a hook's wrapper) moves it. So each pair runs at its own
    offset (the same for both modes), and the median is over offsets, not one lucky or unlucky
    layout."""
    namespace: dict = {}
    body = "".join(f"    v{i} = None\n" for i in range(slots))
    exec(f"def padded(call):\n{body}    return call()\n", namespace)
    return namespace["padded"]


def overhead(pairs: int, layers: int, settle: int, vary_stack: bool = True) -> None:
    import torch

    import provenance

    join_frame_threads()

    def unpadded(call: Callable) -> tuple:
        return call()

    def run(mode: str, pad: Callable = unpadded) -> tuple:
        if mode == "on":
            provenance.enable()
        else:
            provenance.disable()
        for _ in range(settle):  # untimed: keep the effects of the switch itself out of the pair
            pad(lambda: _compile_once(layers))
        return pad(lambda: _compile_once(layers))

    run("on"), run("off")  # warm-up: imports, Dynamo, caches
    walls, cpus = [], []
    samples: dict[str, list] = {"on": [], "off": []}
    for i in range(pairs):
        order = ("on", "off") if i % 2 == 0 else ("off", "on")
        pad = stack_pad(random.Random(i).randrange(0, 1024, 8)) if vary_stack else unpadded
        got = {mode: run(mode, pad) for mode in order}
        for mode in got:
            samples[mode].append(got[mode])
        walls.append(got["on"][0] / got["off"][0])
        cpus.append(got["on"][1] / got["off"][1])
        print(f"pair {i + 1}: on {got['on'][0]:.2f}s off {got['off'][0]:.2f}s  ratio {walls[-1]:.3f} "
              f"(cpu {cpus[-1]:.3f}; gc on {got['on'][2]} in {got['on'][3]:.2f}s, "
              f"off {got['off'][2]} in {got['off'][3]:.2f}s; page faults on {got['on'][4]} off {got['off'][4]})",
              flush=True)
    gc_on = statistics.median(s[3] for s in samples["on"])
    gc_off = statistics.median(s[3] for s in samples["off"])
    print(f"{ENTRY}({MODEL} {layers} layers) fwd+bwd, {pairs} pairs ({settle} untimed compile(s) after each "
          f"switch), capture only: "
          f"median ratio on/off wall {statistics.median(walls):.3f}, cpu {statistics.median(cpus):.3f}; "
          f"cpu medians on {statistics.median(s[1] for s in samples['on']):.2f}s "
          f"off {statistics.median(s[1] for s in samples['off']):.2f}s; "
          f"garbage collection medians on {gc_on:.2f}s off {gc_off:.2f}s; "
          f"{torch.get_num_threads()} torch thread(s); load average {_load()}")


def _load() -> str:
    import os

    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def fresh_processes(processes: int, layers: int, threads: int) -> None:
    """The same comparison, each sample in a fresh process (warm-up compile, then the timed one)."""
    import json

    walls, cpus = [], []
    for i, order in harness.pairs(processes, "on", "off"):
        got = {}
        for mode in order:
            out = harness.run_child("thunderfx_child.py", mode, layers, threads, check=True)
            got[mode] = json.loads(out.stdout.strip().splitlines()[-1])
        walls.append(got["on"][0] / got["off"][0])
        cpus.append(got["on"][1] / got["off"][1])
        print(f"process pair {i + 1}: on {got['on'][0]:.2f}s off {got['off'][0]:.2f}s  ratio {walls[-1]:.3f} "
              f"(cpu {cpus[-1]:.3f})", flush=True)
    print(f"thunderfx(nanoGPT {layers} layers) fwd+bwd, {processes} fresh-process pairs, capture only: "
          f"median ratio on/off wall {statistics.median(walls):.3f}, cpu {statistics.median(cpus):.3f}")


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--layers", type=int, default=2, help="layers for the coverage table")
    parser.add_argument("--pairs", type=int, default=9)
    parser.add_argument("--overhead-layers", type=int, default=4)
    parser.add_argument("--settle", type=int, default=1, help="untimed compiles after each on/off switch")
    parser.add_argument("--skip-coverage", action="store_true")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--processes", type=int, default=0, help="also compare in fresh processes (pairs)")
    parser.add_argument("--entry", choices=("thunderfx", "thunder.jit"), default="thunderfx",
                        help="entry point of the in-process overhead pairs")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads for the overhead pairs")
    parser.add_argument("--model", choices=("nanoGPT", "hf-llama"), default="nanoGPT",
                        help="the overhead samples' model (hf-llama: transformers' LlamaForCausalLM)")
    parser.add_argument("--fixed-stack", action="store_true",
                        help="run every pair at the same frame-stack offset (see stack_pad)")
    args = parser.parse_args()
    global ENTRY, MODEL
    ENTRY, MODEL = args.entry, args.model
    if not args.skip_coverage:
        coverage(args.layers)
    if not args.skip_overhead or args.processes:
        import torch

        torch.set_num_threads(args.threads)
    if not args.skip_overhead:
        overhead(args.pairs, args.overhead_layers, args.settle, vary_stack=not args.fixed_stack)
    if args.processes:
        fresh_processes(args.processes, args.overhead_layers, args.threads)


if __name__ == "__main__":
    main()
