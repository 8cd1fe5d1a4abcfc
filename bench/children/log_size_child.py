"""log_size.py's traced program: nanoGPT forward + backward, compiled by Thunder or by torch.compile
(the log is the environment's THUNDER_TRACE or TORCH_TRACE).

    python bench/children/log_size_child.py thunder|torch LAYERS
"""

import sys
import warnings
from pathlib import Path

import torch

warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import harness  # noqa: E402  (bench/ on the path first)

compiler, layers = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
model = harness.nanogpt(layers)
x = torch.randint(0, harness.NANOGPT["vocab_size"], (2, harness.NANOGPT["block_size"]))
if compiler == "thunder":
    import thunder

    compiled = thunder.jit(model)
else:
    compiled = torch.compile(model)
logits, _ = compiled(x)
logits.sum().backward()
