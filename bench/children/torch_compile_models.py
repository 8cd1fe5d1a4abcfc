"""report_throughput.py's TORCH_TRACE workload: N small models under torch.compile, each called on
three batch sizes (recompiles), forward and backward.

    TORCH_TRACE=DIR python bench/children/torch_compile_models.py N
"""

import sys

import torch
import torch.nn as nn

torch._dynamo.config.recompile_limit = 64


class M(nn.Module):
    def __init__(self, d: int, n: int) -> None:
        super().__init__()
        self.ls = nn.ModuleList(nn.Linear(d, d) for _ in range(n))
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        for i, layer in enumerate(self.ls):
            x = torch.relu(layer(x)) if i % 2 else torch.tanh(layer(x)) * 2
            x = self.ln(x) + x
        return x.sum()


for n in range(2, 2 + int(sys.argv[1])):
    m = torch.compile(M(16, n), dynamic=False)
    for b in (2, 3, 5):
        x = torch.randn(b, 16, requires_grad=True)
        m(x).backward()
