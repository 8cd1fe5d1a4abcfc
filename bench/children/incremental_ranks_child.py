"""bench/incremental_ranks.py's program: a small MLP through thunder.jit, one compile per input shape
(forward and backward, each shape called twice), for `argv[1]` shapes; logged with THUNDER_TRACE."""

import sys

import thunder
import torch

net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1))
jm = thunder.jit(net)
for n in range(1, int(sys.argv[1]) + 1):  # a compile per input shape
    jm(torch.randn(n, 8)).sum().backward()
    jm(torch.randn(n, 8)).sum().backward()
