"""Capture cost of the static memory timeline (docs/memory.md) and the log size it adds: nanoGPT, 4 layers."""
import glob
import os
import time

import thunder
import torch
from thunder.tests.nanogpt_model import GPT, GPTConfig

import provenance
from provenance.thunder import memory as m

provenance.enable(os.environ.get("LOGDIR", "/tmp/memory_bench_log"))
model = GPT(GPTConfig(n_layer=4, n_head=4, n_embd=64, block_size=64, vocab_size=256, dropout=0.0))
jm = thunder.jit(model)
idx = torch.randint(0, 256, (2, 64))
jm(idx, idx)[1].backward()
cs = thunder.compile_stats(jm)
entry = cs.interpreter_cache[0]
n = len(thunder.last_traces(jm)[-1].bound_symbols) + len(thunder.last_backward_traces(jm)[-1].bound_symbols)
t = time.perf_counter()
for _ in range(20):
    m.compile_memory(1, "x", entry)
print("timeline ms per compile", (time.perf_counter() - t) / 20 * 1e3, "bsyms", n)
provenance.disable()
[p] = glob.glob(os.path.join(os.environ.get("LOGDIR", "/tmp/memory_bench_log"), "*.jsonl"))
total = os.path.getsize(p)
mem = sum(len(line) for line in open(p, "rb") if line.startswith(b'{"type":"memory"'))
print("log bytes", total, "memory records bytes", mem)
