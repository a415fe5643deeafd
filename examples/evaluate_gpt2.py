"""Evaluate a GPT-2 model for the neuron device (what `make run` does).

As a command-line target, a function returns the model and its example
inputs (here the labels are the input ids, so the model computes its own
language-modelling loss):

    python -m torch_neuronx.evaluate examples/evaluate_gpt2.py:small_gpt2 \
        --dtype float32,bfloat16 --steps 8 --shapes 4x32,4x64,4x128 --out build/evaluate

Run as a script it does the same through the Python API:

    python examples/evaluate_gpt2.py
"""
from __future__ import annotations

import os

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download


def small_gpt2(batch_size: int = 4, seq_len: int = 64) -> dict:
    """GPT-2's architecture and vocabulary (50,257 tokens) at 2 layers of
    width 128: 6.9M parameters, most of them the tied embedding / LM head.
    The optimizer is capturable (its step count lives on the device), so
    the compiled optimizer step is one program every step."""
    import transformers

    cfg = transformers.GPT2Config(n_embd=128, n_layer=2, n_head=4, n_positions=256, use_cache=False,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg)
    ids = torch.randint(0, cfg.vocab_size, (batch_size, seq_len), generator=torch.Generator().manual_seed(1))
    return {
        "model": model,
        "example_inputs": {"input_ids": ids, "labels": ids},
        "optimizer": torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01, capturable=True),
        "name": "GPT-2 (2 layers, width 128, GPT-2 vocabulary; random weights)",
    }


def main() -> None:
    from torch_neuronx.evaluate import evaluate

    spec = small_gpt2()
    report = evaluate(spec["model"], spec["example_inputs"], optimizer=spec["optimizer"], steps=8,
                      dtype=["float32", "bfloat16"], shapes=[(4, 32), (4, 64), (4, 128)], name=spec["name"])
    print(report.summary())
    print("HTML report:", report.to_html("build/evaluate/gpt2.html"))
    report.to_json("build/evaluate/gpt2.json")


if __name__ == "__main__":
    main()
