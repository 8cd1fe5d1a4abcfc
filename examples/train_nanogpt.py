"""A few training steps of nanoGPT under thunder.jit, with no provenance code at all.

    THUNDER_TRACE=thunder_trace python examples/train_nanogpt.py [--layers N] [--steps N]

With THUNDER_TRACE set, thunder-provenance (installed) logs every compile to that directory.
"""

from __future__ import annotations

import argparse

import thunder
import torch
from thunder.tests.nanogpt_model import GPT, GPTConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()

    torch.manual_seed(0)
    config = GPTConfig(n_layer=args.layers, n_head=2, n_embd=32, block_size=16, vocab_size=64, dropout=0.0)
    model = GPT(config)
    jmodel = thunder.jit(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(args.steps):
        tokens = torch.randint(0, config.vocab_size, (2, config.block_size))
        targets = torch.randint(0, config.vocab_size, (2, config.block_size))
        _, loss = jmodel(tokens, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
