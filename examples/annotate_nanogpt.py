"""Compile nanoGPT (shipped with Thunder) forward + backward and print the final forward and
backward execution traces annotated with where every line came from.

    python examples/annotate_nanogpt.py [--layers N] [--depth D]
"""

from __future__ import annotations

import argparse

import thunder
import torch
from thunder.tests.nanogpt_model import GPT, GPTConfig

import provenance


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=1, help="transformer blocks (default 1)")
    parser.add_argument("--depth", type=int, default=1,
                        help="subsymbol levels to print (-1: all; default 1, the executed code only)")
    args = parser.parse_args()

    torch.manual_seed(0)
    config = GPTConfig(n_layer=args.layers, n_head=2, n_embd=32, block_size=16, vocab_size=64, dropout=0.0)
    model = GPT(config)
    tokens = torch.randint(0, config.vocab_size, (2, config.block_size))

    with provenance.tracing():
        jmodel = thunder.jit(model)
        logits, _ = jmodel(tokens)
        logits.sum().backward()

    for title, trace in (("forward", thunder.last_traces(jmodel)[-1]),
                         ("backward", thunder.last_backward_traces(jmodel)[-1])):
        print(f"#### final {title} execution trace: {provenance.coverage(trace)}")
        print(provenance.annotate(trace, print_depth=args.depth))
        print()


if __name__ == "__main__":
    main()
