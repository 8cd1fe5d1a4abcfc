"""real_models.py's traced program: a real model (litgpt Llama, transformers Llama, GPT-2, T5, ViT,
Whisper or Mixtral, tiny configs, random weights) under thunder.jit or thunderfx, four steps, logged by the
environment's THUNDER_TRACE; prints its step times and how many compute ops are attributed to the model's file.

    python bench/children/real_models_child.py litgpt|hf-llama|hf-gpt2|hf-t5|hf-vit|hf-whisper|hf-mixtral \
        thunder.jit|thunderfx
"""

import json
import sys
import time
import warnings
from pathlib import Path

import thunder
import thunder.dynamo
import torch

import provenance
from provenance import Kind
from provenance.core.attribution import charged, line_frame, module_line_frame

warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))
import real_models  # noqa: E402  (the tests' support folder on the path first)

builders = {"litgpt": real_models.litgpt_llama, "hf-llama": real_models.hf_llama, "hf-gpt2": real_models.hf_gpt2,
            "hf-t5": real_models.hf_t5, "hf-vit": real_models.hf_vit, "hf-whisper": real_models.hf_whisper,
            "hf-mixtral": real_models.hf_mixtral}
build = builders[sys.argv[1]]
entry = sys.argv[2]
torch.manual_seed(0)
model, step, model_file = build()
steps = []
start = time.perf_counter()
compiled = thunder.dynamo.thunderfx(model) if entry == "thunderfx" else thunder.jit(model)
for seq in (16, 16, 8, 8):  # the last: warm (nothing left to compile)
    t = start if not steps else time.perf_counter()  # the first step includes entry(model)
    step(compiled, real_models.ids(seq)).backward()
    steps.append(time.perf_counter() - t)
fns = ([p.fn for g in provenance.fx_graphs(compiled) for p in g.pieces if p.thunder]
       if entry == "thunderfx" else [compiled])
total = user = module = 0
for fn in fns:
    for traces in (thunder.last_traces(fn), thunder.last_backward_traces(fn)):
        for bsym in traces[-1].bound_symbols if traces else ():
            record = provenance.of(bsym)
            if record is None or record.kind == Kind.BOOKKEEPING:
                continue
            for r in charged(record):  # a fusion as its members
                total += 1
                user += (f := line_frame(r)) is not None and f.file == model_file
                module += (f := module_line_frame(r)) is not None and f.file == model_file
print(json.dumps({"steps": steps, "compute": total, "user": user / max(total, 1), "module_line": module / max(total, 1),
                   "model_file": model_file}))
