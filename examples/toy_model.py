"""The ToyModel of Thunder's RFC "Option to make a trace easier to interpret" (the same as
`thunder.tests.distributed.helper.ToyModel`, whose module needs extra test dependencies)."""

from __future__ import annotations

import math

import torch
from torch import nn


def new_gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class ToyModel(nn.Module):
    """Linear(12, 16) -> gelu -> Linear(16, 8)."""

    N_IN = 12
    N_HIDDEN = 16
    N_OUT = 8

    def __init__(self, bias: bool = True) -> None:
        super().__init__()
        self.net1 = nn.Linear(ToyModel.N_IN, ToyModel.N_HIDDEN, bias=bias)
        self.net2 = nn.Linear(ToyModel.N_HIDDEN, ToyModel.N_OUT, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net2(new_gelu(self.net1(x)))
