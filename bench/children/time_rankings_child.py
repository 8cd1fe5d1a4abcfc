"""time_rankings.py's profiled program: a model's calls profiled (THUNDER_TRACE_PROFILE from the
environment), then the top of provenance.cost()'s ranking by median and the ranking by sum.

    python bench/children/time_rankings_child.py nanogpt|litgpt|hf-llama|hf-gpt2 CALLS SEQ TOP
"""

import json
import sys
import warnings
from pathlib import Path

import thunder
import thunder.dynamo
import torch

import provenance
from provenance.timing.rollup import summary

warnings.filterwarnings("ignore")
torch.set_num_threads(1)
here = Path(__file__).resolve()
# the tests' support folder first: bench/real_models.py, a benchmark, would shadow its real_models
sys.path[:0] = [str(here.parents[2] / "tests" / "support"), str(here.parents[1])]
import harness  # noqa: E402  (bench/ and the tests' support folder on the path first)
import real_models  # noqa: E402

name, calls, seq, top = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.manual_seed(0)
if name == "nanogpt":
    compiled = thunder.jit(harness.nanogpt(2, n_embd=128, block_size=64, vocab_size=256))
    ids = torch.randint(0, 256, (4, 64))

    def step():
        compiled(ids, ids)[1].backward()
else:
    model, run, _ = {"litgpt": real_models.litgpt_llama, "hf-llama": real_models.hf_llama,
                     "hf-gpt2": real_models.hf_gpt2}[name]()
    compiled = thunder.dynamo.thunderfx(model)
    ids = real_models.ids(seq)

    def step():
        run(compiled, ids).backward()
for _ in range(3 * calls + 1):  # the window takes calls until CALLS are clean, 3 x CALLS at most
    step()
rows = [r for r in provenance.cost() if r.kind in ("key", "fusion")]
# the ranking before distributions: sums over every profiled call, one-offs included
by_sum = sorted((r for r in provenance.cost(keep_all=True) if r.kind in ("key", "fusion")), key=lambda r: -r.sum_ns)
totals = summary(provenance.profiles())
print(json.dumps({
    "median": [[r.label, r.median_ns / 1e6, r.time.low_ns / 1e6, r.time.high_ns / 1e6] for r in rows[:top]],
    "sum": [[r.label, r.sum_ns / 1e6] for r in by_sum[:top]],
    "excluded": [e.describe() for _, _, e in totals["excluded"]],
    "calls": totals["calls"], "profiled": totals["profiled"],
}))
