"""Where nanoGPT's training-step memory goes, by source line, and which lines grow with the sequence.

    python examples/memory_nanogpt.py [--layers N] [--embd N] [--seq N] [--seq2 N] [--top N]

With capture on, every compile's final forward and backward traces give their static memory
timeline (docs/memory.md): what each line's activations keep for the backward, and what is live
at each trace's peak. This compiles nanoGPT (thunder.tests.nanogpt_model) at one sequence length,
then at a larger one, and prints the lines whose bytes grew, by how many.
"""

from __future__ import annotations

import argparse
import os

import thunder
import torch
from thunder.tests.nanogpt_model import GPT, GPTConfig

import provenance
from provenance.allocation import static_memory
from provenance.allocation.static_memory import size


def step(model: torch.nn.Module, batch: int, seq: int, vocab: int) -> list[static_memory.MemoryRow]:
    """One training step of a fresh thunder.jit of the model at this sequence length: its rows by line."""
    jmodel = thunder.jit(model)
    tokens = torch.randint(0, vocab, (batch, seq))
    targets = torch.randint(0, vocab, (batch, seq))
    _, loss = jmodel(tokens, targets)
    loss.backward()
    return provenance.memory(jmodel, by="line")


def where(key: str) -> str:
    path, sep, line = key.rpartition(":")
    return f"{os.path.basename(path)}:{line}" if sep and line.isdigit() else key


def show(title: str, rows: list[static_memory.MemoryRow], figure: str, texts: dict[str, str], top: int) -> None:
    print(title)
    ranked = sorted((r for r in rows if getattr(r, figure)), key=lambda r: (-getattr(r, figure), r.key))
    for r in ranked[:top]:
        print(f"  {where(r.key):<24} {size(getattr(r, figure)):>10}  {texts.get(r.key, '')[:70]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--embd", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--seq2", type=int, default=128, help="the second run's sequence length")
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--top", type=int, default=8)
    args = parser.parse_args()

    torch.manual_seed(0)
    provenance.enable()
    config = GPTConfig(n_layer=args.layers, n_head=args.heads, n_embd=args.embd, block_size=max(args.seq, args.seq2),
                       vocab_size=args.vocab, dropout=0.0)
    model = GPT(config)
    first = step(model, args.batch, args.seq, args.vocab)
    texts = static_memory.line_texts(static_memory.compiles())
    show(f"top lines by saved for backward (seq {args.seq}):", first, "saved_bytes", texts, args.top)
    show(f"top lines by live at the peak (seq {args.seq}; the forward's or the backward's, the larger):",
         first, "peak_bytes", texts, args.top)

    second = step(model, args.batch, args.seq2, args.vocab)
    texts = static_memory.line_texts(static_memory.compiles())
    before = {r.key: r for r in first}
    print(f"lines whose saved-for-backward bytes grew, seq {args.seq} -> {args.seq2}:")
    grew = sorted(((r.saved_bytes - (before[r.key].saved_bytes if r.key in before else 0), r) for r in second),
                  key=lambda item: (-item[0], item[1].key))
    for delta, r in [g for g in grew if g[0] > 0][:args.top]:
        was = before[r.key].saved_bytes if r.key in before else 0
        print(f"  {where(r.key):<24} +{delta} bytes ({was} -> {r.saved_bytes})  {texts.get(r.key, '')[:60]}")
    total1, total2 = sum(r.saved_bytes for r in first), sum(r.saved_bytes for r in second)
    print(f"saved for backward in all: {total1} -> {total2} bytes (+{total2 - total1})")


if __name__ == "__main__":
    main()
