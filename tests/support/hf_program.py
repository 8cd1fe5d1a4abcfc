"""Hugging Face models through ThunderFX, for the tests that need real model code nobody here
wrote: tiny configs built in place (no download), forward and backward under
`thunder.dynamo.thunderfx`. Run as `python hf_program.py gpt2|llama` under THUNDER_TRACE; the
Llama run calls again at another sequence length (a Dynamo recompile, graph [0/1])."""

from __future__ import annotations

import sys

import real_models  # beside this file (a script's folder is on sys.path)
import thunder.dynamo
import torch


def model(name: str) -> torch.nn.Module:
    build = real_models.hf_gpt2 if name == "gpt2" else real_models.hf_llama
    return build()[0]


def main(name: str) -> None:
    torch.manual_seed(0)
    fx = thunder.dynamo.thunderfx(model(name))
    lengths = (16, 8) if name == "llama" else (16,)
    for length in lengths:
        ids = torch.randint(0, 256, (2, length))
        fx(input_ids=ids, labels=ids).loss.backward()


if __name__ == "__main__":
    main(sys.argv[1])
