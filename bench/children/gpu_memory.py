"""gpu_check.py's memory step: nanoGPT profiled (THUNDER_TRACE_PROFILE's level 2) on DEVICE, four
steps; provenance.memory_checks, the static peak against the measured one, as JSON.

    python bench/children/gpu_memory.py DEVICE
"""

import json
import sys
from pathlib import Path

import thunder
import torch

import provenance

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import harness

device = sys.argv[1]
torch.manual_seed(0)
provenance.enable(profile=2)
model = harness.nanogpt(2, n_embd=128, block_size=128, vocab_size=512).to(device)
jm = thunder.jit(model)
x = torch.randint(0, 512, (4, 128), device=device)
for _ in range(4):
    jm(x, x)[1].backward()
checks = provenance.memory_checks(jm)
print(json.dumps([{"trace": c.trace, "ops": c.ops, "agree": c.agree, "static_peak": c.static_peak,
                   "measured_peak": c.measured_peak, "allocator_peak": c.allocator_peak,
                   "text": c.describe(), "differ": [[d.name, d.static, d.measured] for d in c.differ[:5]]}
                  for c in checks]))
