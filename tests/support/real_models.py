"""Model code nobody here wrote, built from tiny configs (random weights, no downloads):
transformers' LlamaForCausalLM, GPT2LMHeadModel, T5, ViT, Whisper and Mixtral (4 experts, top-2), litgpt's
GPT. Each builder gives (model, a training step: step(compiled_model, input_ids) -> loss, the file of the
model's classes); a model that takes no tokens makes its inputs from the ids' shape (ViT: a batch of
images per 8 tokens)."""

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


def _file(model: torch.nn.Module) -> str:
    return sys.modules[type(model).__module__].__file__


def hf_t5() -> tuple[torch.nn.Module, Step, str]:
    from transformers import T5Config, T5ForConditionalGeneration

    model = T5ForConditionalGeneration(T5Config(
        vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
        dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0))
    return model, _seq2seq_step, _file(model)


def _seq2seq_step(model: Any, ids: torch.Tensor) -> torch.Tensor:
    # no cache: an encoder-decoder returns its past key values, on which Thunder 0.2.6's autograd connection
    # fails itself (torch_autograd.py:75, untraced too)
    return model(input_ids=ids, labels=ids, use_cache=False).loss


def _vit_step(model: Any, ids: torch.Tensor) -> torch.Tensor:
    batch = max(1, ids.shape[1] // 8)
    pixels = torch.randn(batch, 3, 32, 32, generator=torch.Generator().manual_seed(ids.shape[1]))
    return model(pixel_values=pixels, labels=ids[0, :batch] % 10).loss


def hf_vit() -> tuple[torch.nn.Module, Step, str]:
    from transformers import ViTConfig, ViTForImageClassification

    model = ViTForImageClassification(ViTConfig(
        image_size=32, patch_size=8, num_channels=3, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, num_labels=10, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    return model, _vit_step, _file(model)


def _whisper_step(model: Any, ids: torch.Tensor) -> torch.Tensor:
    features = torch.randn(ids.shape[0], 16, 64, generator=torch.Generator().manual_seed(0))  # 2 x max_source_positions
    return model(input_features=features, labels=ids, use_cache=False).loss  # as _seq2seq_step


def hf_whisper() -> tuple[torch.nn.Module, Step, str]:
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    model = WhisperForConditionalGeneration(WhisperConfig(
        vocab_size=VOCAB, num_mel_bins=16, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_source_positions=32,
        max_target_positions=64, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0))
    return model, _whisper_step, _file(model)


def hf_mixtral() -> tuple[torch.nn.Module, Step, str]:
    from transformers import MixtralConfig, MixtralForCausalLM

    model = MixtralForCausalLM(MixtralConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=128))
    return model, _hf_step, _file(model)


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
