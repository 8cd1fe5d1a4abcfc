"""Small models whose source lines the tests check exactly. Line numbers are looked up by
marker comments (`# <-- name`), so editing this file does not silently break the tests."""

from __future__ import annotations

import torch
from thunder.tests.llama2_model import ModelArgs, Transformer
from thunder.tests.nanogpt_model import GPT, GPTConfig
from torch import nn


def scaled_gelu(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x) * 0.5  # <-- helper


class Mlp(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(n, 2 * n)
        self.fc2 = nn.Linear(2 * n, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)  # <-- fc1 call
        h = scaled_gelu(h)  # <-- helper call
        return self.fc2(h)  # <-- fc2 call


class Block(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(n)
        self.mlp = Mlp(n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))  # <-- block residual


class Net(nn.Module):
    def __init__(self, n: int = 8, depth: int = 2) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(n) for _ in range(depth))
        self.head = nn.Linear(n, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        y = torch.tanh(x)  # <-- root tanh
        return self.head(y)  # <-- head call


class OneBigLine(nn.Module):
    """One line is a large matmul (and its weight gradient in the backward), the others are tiny."""

    def __init__(self, n: int = 384) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(n, n) / n)
        self.small = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.tanh(self.small(x[:4, :4]))  # <-- tiny
        b = x @ self.w  # <-- big matmul
        return b[:4, :4] * a  # <-- tiny slice


class BreakingBlock(nn.Module):
    """Dynamo breaks its graph inside this block: it compiles the block's forward as a frame of
    its own, with module paths relative to the block."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.mlp = Mlp(n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.mlp(x)  # <-- fx block mlp
        torch._dynamo.graph_break()  # <-- fx block break
        return x + torch.relu(h)  # <-- fx block residual


class Breaky(nn.Module):
    """ThunderFX's cases: a graph break (print), an op Thunder leaves to torch (det: a fallback
    piece), and a graph break inside a submodule. Input: a square (n, n) matrix."""

    def __init__(self, n: int = 8) -> None:
        super().__init__()
        self.up = nn.Linear(n, n)
        self.inner = BreakingBlock(n)
        self.head = nn.Linear(n, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)  # <-- fx up
        h = h * torch.linalg.det(h.detach())  # <-- fx fallback
        print("graph break here")  # <-- fx print
        h = torch.tanh(h)  # <-- fx tanh
        h = self.inner(h)  # <-- fx inner call
        return self.head(h)  # <-- fx head


def line_of(marker: str) -> int:
    """The line number in this file of the line ending with `# <-- marker`."""
    with open(__file__) as f:
        for number, line in enumerate(f, 1):
            if line.rstrip().endswith(f"# <-- {marker}"):
                return number
    raise LookupError(marker)


def nanogpt(n_layer: int = 1) -> tuple[nn.Module, torch.Tensor]:
    cfg = GPTConfig(n_layer=n_layer, n_head=2, n_embd=32, block_size=16, vocab_size=64, dropout=0.0)
    return GPT(cfg), torch.randint(0, 64, (2, 16))


def llama2(n_layers: int = 1) -> tuple[nn.Module, torch.Tensor]:
    args = ModelArgs(dim=32, n_layers=n_layers, n_heads=4, vocab_size=64, multiple_of=16, max_seq_len=16)
    return Transformer(args), torch.randint(0, 64, (2, 16))


def forward_backward(jfn, x: torch.Tensor) -> None:
    out = jfn(x)
    (out[0] if isinstance(out, tuple) else out).sum().backward()
