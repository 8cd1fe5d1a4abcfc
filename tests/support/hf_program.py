"""Hugging Face models through ThunderFX, for the tests that need real model code nobody here
wrote: tiny configs built in place (no download), forward and backward under
`thunder.dynamo.thunderfx`. Run as `python hf_program.py gpt2|llama [GUARDS.json]` under THUNDER_TRACE;
the Llama run calls again at another sequence length (a Dynamo recompile, graph [0/1], its length
dynamic) and at a third (Dynamo's [0/1] again; its Thunder pieces, compiled for the second length,
recompile). GUARDS.json: torch's own count of each cache entry's guard checks, by compile id."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import real_models  # beside this file (a script's folder is on sys.path)
import thunder.dynamo
import torch
import torch_guards


def model(name: str) -> torch.nn.Module:
    build = real_models.hf_gpt2 if name == "gpt2" else real_models.hf_llama
    return build()[0]


def main(name: str, guards: str | None = None) -> None:
    torch.manual_seed(0)
    fx = thunder.dynamo.thunderfx(model(name))
    lengths = (16, 8, 12) if name == "llama" else (16,)
    for length in lengths:
        ids = torch.randint(0, 256, (2, length))
        fx(input_ids=ids, labels=ids).loss.backward()  # <-- hf call
    if guards is not None:
        Path(guards).write_bytes(orjson.dumps(torch_guards.by_compile_id()))


if __name__ == "__main__":
    main(*sys.argv[1:3])
