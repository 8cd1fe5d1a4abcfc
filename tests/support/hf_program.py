"""Hugging Face models through ThunderFX, for the tests that need real model code nobody here
wrote: tiny configs built in place (no download), forward and backward under
`thunder.dynamo.thunderfx`. Run as `python hf_program.py gpt2|llama` under THUNDER_TRACE; the
Llama run calls again at another sequence length (a Dynamo recompile, graph [0/1])."""

from __future__ import annotations

import sys

import thunder.dynamo
import torch


def model(name: str) -> torch.nn.Module:
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        return GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=4))
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2))


def main(name: str) -> None:
    torch.manual_seed(0)
    fx = thunder.dynamo.thunderfx(model(name))
    lengths = (16, 8) if name == "llama" else (16,)
    for length in lengths:
        ids = torch.randint(0, 256, (2, length))
        fx(input_ids=ids, labels=ids).loss.backward()


if __name__ == "__main__":
    main(sys.argv[1])
