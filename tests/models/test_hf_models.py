"""Hugging Face models (GPT-2, Llama, BERT, T5, ViT, ResNet, Whisper's encoder) from small configs with random weights (nothing is
downloaded: HF_HUB_OFFLINE=1), unchanged, on the neuron device.

Each model: three training steps (forward, loss, backward, AdamW) on neuron
match the same steps on the CPU, with zero CPU fallbacks, in float32 and
under torch.autocast("neuron", dtype=torch.bfloat16) (compared with CPU
autocast). Tolerances: float32 losses rtol 1e-4 / parameters atol 2e-4 after
three steps (the device sums in a different order than the CPU; Adam's
normalised updates amplify float32 rounding near zero gradients); bfloat16
autocast losses rtol 3e-2 (bfloat16 has 8 mantissa bits and the device's
bf16 GEMM accumulates in float32 differently from oneDNN's)."""
import contextlib
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

import torch_neuronx

transformers = pytest.importorskip("transformers", reason="transformers is installed by the Makefile (make test)")
T = transformers

VOCAB = 128


def build(name):
    torch.manual_seed(0)
    if name == "gpt2":
        cfg = T.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=VOCAB, n_positions=64, bos_token_id=0,
                           eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        return T.GPT2LMHeadModel(cfg), "lm"
    if name == "llama":
        cfg = T.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=64, bos_token_id=0,
                            eos_token_id=0, pad_token_id=0)
        return T.LlamaForCausalLM(cfg), "lm"
    if name == "bert":
        cfg = T.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                           vocab_size=VOCAB, max_position_embeddings=64, hidden_dropout_prob=0.0,
                           attention_probs_dropout_prob=0.0, pad_token_id=0)
        return T.BertForMaskedLM(cfg), "lm"
    if name == "t5":
        cfg = T.T5Config(d_model=64, d_ff=128, num_layers=2, num_heads=4, vocab_size=VOCAB, d_kv=16,
                         decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, dropout_rate=0.0)
        return T.T5ForConditionalGeneration(cfg), "lm"
    if name == "vit":
        cfg = T.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                          image_size=32, patch_size=8, num_labels=10, hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0)
        return T.ViTForImageClassification(cfg), "img"
    if name == "resnet":
        cfg = T.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], num_labels=10)
        return T.ResNetForImageClassification(cfg), "img"
    if name == "whisper":
        cfg = T.WhisperConfig(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                              decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=16,
                              max_source_positions=32, vocab_size=VOCAB, pad_token_id=0, bos_token_id=1,
                              eos_token_id=2, decoder_start_token_id=1, dropout=0.0)
        return T.WhisperModel(cfg).encoder, "audio"
    raise ValueError(name)


def make_batch(kind, device):
    g = torch.Generator().manual_seed(1)
    if kind == "img":
        return dict(pixel_values=torch.randn(2, 3, 32, 32, generator=g).to(device),
                    labels=torch.tensor([1, 7]).to(device))
    if kind == "audio":
        return dict(input_features=torch.randn(2, 16, 64, generator=g).to(device))
    ids = torch.randint(2, VOCAB, (2, 16), generator=g)
    return dict(input_ids=ids.to(device), labels=ids.to(device))


def train(name, device, autocast_dtype=None, steps=3, check=None):
    model, kind = build(name)
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = make_batch(kind, device)
    losses = []
    for _ in range(steps):
        with check() if check else contextlib.nullcontext():
            with torch.autocast(device_type="neuron" if device == "neuron" else "cpu", dtype=autocast_dtype,
                                enabled=autocast_dtype is not None):
                out = model(**batch)
            # Whisper's encoder has no loss head: a quadratic loss of its output.
            loss = out.loss if getattr(out, "loss", None) is not None else out.last_hidden_state.float().pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().cpu() for k, v in model.state_dict().items()}


MODELS = ["gpt2", "llama", "bert", "t5", "vit", "resnet", "whisper"]


@pytest.mark.parametrize("name", MODELS)
def test_training_steps_match_cpu_float32(name):
    cpu_losses, cpu_state = train(name, "cpu")
    torch_neuronx.clear_op_tracking()
    dev_losses, dev_state = train(name, "neuron")
    assert torch_neuronx.get_fallback_ops() == [], torch_neuronx.get_fallback_counts()
    torch.testing.assert_close(torch.tensor(dev_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-5)
    for k in cpu_state:
        torch.testing.assert_close(dev_state[k], cpu_state[k], rtol=1e-3, atol=2e-4, msg=lambda m: f"{k}: {m}")


@pytest.mark.parametrize("name", MODELS)
def test_training_steps_match_cpu_bf16_autocast(name):
    cpu_losses, _ = train(name, "cpu", torch.bfloat16)
    torch_neuronx.clear_op_tracking()
    dev_losses, _ = train(name, "neuron", torch.bfloat16)
    assert torch_neuronx.get_fallback_ops() == [], torch_neuronx.get_fallback_counts()
    torch.testing.assert_close(torch.tensor(dev_losses), torch.tensor(cpu_losses), rtol=3e-2, atol=3e-2)


@pytest.mark.parametrize("name", MODELS)
def test_every_kernel_output_matches_its_meta_function(name):
    # torch.compile bakes views computed from meta values into its graphs: every op of a
    # training step (forward, backward, AdamW), float32 and bfloat16 autocast, must give
    # the sizes, strides, dtype and aliasing of its meta function (FakeTensor cross-reference)
    from torch_neuronx.meta_check import meta_crossref

    for dtype, rtol in ((None, 1e-4), (torch.bfloat16, 3e-2)):
        cpu_losses, _ = train(name, "cpu", dtype, steps=1)
        dev_losses, _ = train(name, "neuron", dtype, steps=1, check=meta_crossref)
        torch.testing.assert_close(torch.tensor(dev_losses), torch.tensor(cpu_losses), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_greedy_generation_with_kv_cache_matches_cpu(name):
    model, _ = build(name)
    model.eval()
    prompt = torch.tensor([[5, 17, 42, 9]])
    kw = dict(max_new_tokens=12, do_sample=False, use_cache=True, pad_token_id=0)
    with torch.no_grad():
        ref = model.generate(prompt, **kw)
        model.to("neuron")
        torch_neuronx.clear_op_tracking()
        got = model.generate(prompt.to("neuron"), **kw)
    assert torch_neuronx.get_fallback_ops() == [], torch_neuronx.get_fallback_counts()
    assert got.cpu().tolist() == ref.tolist()
