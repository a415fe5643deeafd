"""``--hf MODEL_TYPE``: a Hugging Face transformers model built from its
config with random weights (nothing is downloaded), in its full published
size or a small one of the same architecture, with inputs and labels so
that the model computes its own loss."""
from __future__ import annotations

import os
from typing import Any, Dict, Optional

import torch

# The small size: same architecture, a few layers of a narrow width. Each
# name is set only where the model's config has it (attribute_map resolves
# the generic names, e.g. GPT-2's n_embd).
SMALL = {
    "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
    "intermediate_size": 512, "d_ff": 512, "d_kv": 32, "num_decoder_layers": 2, "encoder_layers": 2,
    "decoder_layers": 2, "encoder_attention_heads": 4, "decoder_attention_heads": 4, "encoder_ffn_dim": 512,
    "decoder_ffn_dim": 512, "image_size": 64, "patch_size": 16,
}

class HFError(ValueError):
    """A model type this builder cannot make."""


# Tried in order; a type without the head raises and the next is tried. Encoders
# (BERT) take their masked-LM head before a causal one.
_TASKS = ("AutoModelForSeq2SeqLM", "AutoModelForMaskedLM", "AutoModelForCausalLM", "AutoModelForImageClassification")


def _config(model_type: str, size: str, seq_len: int) -> Any:
    import transformers

    try:
        base = transformers.AutoConfig.for_model(model_type)
    except ValueError:
        raise HFError(f"--hf {model_type!r} is not a transformers model type (e.g. gpt2, llama, bert, t5, vit; "
                      f"transformers.CONFIG_MAPPING lists them all)") from None
    kwargs: Dict[str, Any] = {}
    if size == "small":
        for k, v in SMALL.items():
            if hasattr(base, k):
                kwargs[k] = v
    # Deterministic comparisons: no dropout (the CPU and the device draw
    # different random numbers) and no KV cache in training.
    for k in list(base.to_dict()):
        if ("dropout" in k or "pdrop" in k) and isinstance(getattr(base, k, None), float):
            kwargs[k] = 0.0
    if hasattr(base, "use_cache"):
        kwargs["use_cache"] = False
    if getattr(base, "is_encoder_decoder", False) and getattr(base, "decoder_start_token_id", None) is None:
        kwargs["decoder_start_token_id"] = getattr(base, "pad_token_id", None) or 0  # labels are shifted from it
    for k in ("n_positions", "max_position_embeddings"):
        if hasattr(base, k) and getattr(base, k) < seq_len:
            kwargs[k] = seq_len
    return transformers.AutoConfig.for_model(model_type, **kwargs)


def build(model_type: str, size: str = "small", batch_size: int = 2, seq_len: int = 64,
          seed: int = 0) -> Dict[str, Any]:
    """A target dict (model, example_inputs) for a transformers model type."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers

    cfg = _config(model_type, size, seq_len)
    torch.manual_seed(seed)
    model: Optional[torch.nn.Module] = None
    task = None
    errors = []
    for task in _TASKS:
        auto = getattr(transformers, task, None)
        if auto is None or (task == "AutoModelForSeq2SeqLM" and not getattr(cfg, "is_encoder_decoder", False)):
            continue
        try:
            model = auto.from_config(cfg)
            break
        except ValueError as e:
            errors.append(f"{task}: {str(e).splitlines()[0]}")
    if model is None:
        raise HFError(f"--hf {model_type!r}: no causal-LM, seq2seq, masked-LM or image-classification "
                         f"head for this model type ({'; '.join(errors)})")
    g = torch.Generator().manual_seed(seed)
    if task == "AutoModelForImageClassification":
        size_px = getattr(cfg, "image_size", 224)
        channels = getattr(cfg, "num_channels", 3)
        inputs = {"pixel_values": torch.randn(batch_size, channels, size_px, size_px, generator=g),
                  "labels": torch.randint(0, cfg.num_labels, (batch_size,), generator=g)}
    else:
        ids = torch.randint(0, cfg.vocab_size, (batch_size, seq_len), generator=g)
        inputs = {"input_ids": ids, "labels": ids.clone()}
    kind = "full size" if size == "full" else "small config"
    return {"model": model, "example_inputs": inputs,
            "name": f"{type(model).__name__} ({model_type}, {kind}, random weights)"}
