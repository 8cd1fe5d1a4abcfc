"""gpu_check.py's model step: the parts asked for (nanoGPT under thunder.jit, a graph break under
ThunderFX, a transformers Llama under ThunderFX) on DEVICE, logged by the environment's THUNDER_TRACE.

    python bench/children/gpu_models.py DEVICE nanogpt,breaks,llama
"""

import sys
from pathlib import Path

import thunder
import torch
from thunder.dynamo import thunderfx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import harness

device, parts = sys.argv[1], sys.argv[2].split(",")
if "nanogpt" in parts:
    model = harness.nanogpt(2, block_size=64, vocab_size=256).to(device)
    x = torch.randint(0, 256, (2, 64), device=device)
    jm = thunder.jit(model)
    for _ in range(3):
        jm(x, x)[1].backward()
if "breaks" in parts:

    def breaks(x):
        y = torch.sin(x)
        torch._dynamo.graph_break()
        return torch.cos(y)

    fb = thunderfx(breaks)
    fb(torch.randn(8, device=device))
    fb(torch.randn(8, 3, device=device))  # another rank: Dynamo recompiles, with its reason
if "llama" in parts:
    from transformers import LlamaConfig, LlamaForCausalLM

    llama = LlamaForCausalLM(LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2)).to(device)
    fx = thunderfx(llama)
    ids = torch.randint(0, 256, (2, 32), device=device)
    for _ in range(2):
        fx(input_ids=ids, labels=ids).loss.backward()
print("ran", ",".join(parts), "on", device)
