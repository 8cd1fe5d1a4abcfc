"""ThunderFX with provenance: a small transformer with one graph break, compiled by
`thunder.dynamo.thunderfx`; prints each Dynamo graph, how Thunder's splitter cut it (and why),
Dynamo's graph breaks, and the final forward and backward traces of every Thunder piece,
annotated with the user's line and module (not FX's generated code).

    python examples/thunderfx.py [--depth D] [--torch-compile]
"""

from __future__ import annotations

import argparse
import os

import thunder
import thunder.dynamo
import torch
from torch import nn

import provenance


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TinyTransformer(nn.Module):
    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 2, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        x = self.blocks[0](x)
        print(f"block 0 done, activations {tuple(x.shape)}")  # Dynamo breaks the graph here
        for block in self.blocks[1:]:
            x = block(x)
        return self.head(x)


def _where(frame: provenance.Frame | None) -> str:
    return f"{os.path.basename(frame.file)}:{frame.line}" if frame is not None else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=1, help="subsymbol levels to print (-1: all; default 1)")
    parser.add_argument("--torch-compile", action="store_true",
                        help="torch.compile(model, backend=ThunderCompiler()) instead of thunderfx(model)")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = TinyTransformer()
    tokens = torch.randint(0, 64, (2, 16))
    with provenance.tracing():
        if args.torch_compile:
            handle = thunder.dynamo.ThunderCompiler()
            compiled = torch.compile(model, backend=handle)
        else:
            compiled = handle = thunder.dynamo.thunderfx(model)
        compiled(tokens).sum().backward()

    for graph_break in provenance.graph_breaks(handle):
        print(f"#### graph break [{graph_break.compile_id}] at {_where(graph_break.user_frame)}: "
              f"{graph_break.summary}")
    for graph in provenance.fx_graphs(handle):
        print(f"#### Dynamo graph {graph.number} [{graph.compile_id}]: "
              f"{', '.join(f'{p.name} ({p.compiler})' for p in graph.pieces)}")
        for piece in graph.pieces:
            for reason in piece.reasons:
                print(f"  {piece.name} falls back to torch: {reason.info} at {_where(reason.user_frame)}")
            if not piece.thunder or piece.fn is None:
                continue
            for title, traces in (("forward", thunder.last_traces(piece.fn)),
                                  ("backward", thunder.last_backward_traces(piece.fn))):
                if traces:
                    trace = traces[-1]
                    print(f"#### [{graph.compile_id}] {piece.name}: final {title} trace: {provenance.coverage(trace)}")
                    print(provenance.annotate(trace, print_depth=args.depth))
                    print()


if __name__ == "__main__":
    main()
