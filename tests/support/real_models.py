"""Model code nobody here wrote, built from tiny configs (random weights, no downloads):
transformers' LlamaForCausalLM and GPT2LMHeadModel, litgpt's GPT. Each builder gives
(model, a training step: step(compiled_model, input_ids) -> loss, the file of the model's classes)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch

VOCAB = 256
Step = Callable[[Any, torch.Tensor], torch.Tensor]


def _hf_step(model: Any, ids: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids, labels=ids).loss


def hf_llama() -> tuple[torch.nn.Module, Step, str]:
    from transformers import LlamaConfig, LlamaForCausalLM

    model = LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2))
    return model, _hf_step, sys.modules[type(model).__module__].__file__


def hf_gpt2() -> tuple[torch.nn.Module, Step, str]:
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))  # deterministic
    return model, _hf_step, sys.modules[type(model).__module__].__file__


def _litgpt_step(model: Any, ids: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten())


def litgpt_llama(n_layer: int = 2) -> tuple[torch.nn.Module, Step, str]:
    import litgpt

    config = litgpt.Config.from_name("Llama-3.2-1B", n_layer=n_layer, n_embd=64, n_head=4, n_query_groups=2,
                                     head_size=16, intermediate_size=128, vocab_size=VOCAB, padded_vocab_size=VOCAB)
    model = litgpt.GPT(config)
    return model, _litgpt_step, sys.modules[type(model).__module__].__file__


def ids(seq: int = 16, batch: int = 2) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, seq))
