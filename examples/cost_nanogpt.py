"""Where nanoGPT's training step time goes, by source line, module and kind.

    python examples/cost_nanogpt.py [--layers N] [--steps N] [--profile N]

`provenance.enable(profile=N)` times the N steps after the first op by op (forward and
backward); the steps after those run Thunder's code untouched. With no code change at all,
THUNDER_TRACE_PROFILE=N does the same for any program (see docs/cost.md).
"""

from __future__ import annotations

import argparse

import thunder
import torch
from thunder.tests.nanogpt_model import GPT, GPTConfig

import provenance


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--profile", type=int, default=3, help="steps to time, after the first")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    args = parser.parse_args()

    torch.manual_seed(0)
    if args.threads:
        torch.set_num_threads(args.threads)
    provenance.enable(profile=args.profile)
    config = GPTConfig(n_layer=args.layers, n_head=4, n_embd=128, block_size=64, vocab_size=512, dropout=0.0)
    model = GPT(config)
    jmodel = thunder.jit(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(args.steps):
        tokens = torch.randint(0, config.vocab_size, (8, config.block_size))
        targets = torch.randint(0, config.vocab_size, (8, config.block_size))
        _, loss = jmodel(tokens, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    provenance.print_cost(jmodel, by="line", top=args.top)
    provenance.print_cost(jmodel, by="module", top=args.top)
    provenance.print_cost(jmodel, by="kind")


if __name__ == "__main__":
    main()
