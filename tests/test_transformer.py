"""The transformer inference fast paths (csrc/aten/transformer.cpp):
nn.TransformerEncoder / TransformerEncoderLayer in eval + no_grad
(_transformer_encoder_layer_fwd, with a key-padding mask through nested
tensors) and nn.MultiheadAttention's _native_multi_head_attention, against
the CPU's own fast path. Tolerances: TOL_ACCUMULATED (several GEMMs and
layer norms per result)."""
import pytest
import torch

from helpers import TOL_ACCUMULATED, assert_no_fallbacks, tol_kw

TOL = tol_kw(TOL_ACCUMULATED, torch.float32)


def _encoder(norm_first, activation, layers=2, final_norm=False):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, activation=activation, batch_first=True,
                                             norm_first=norm_first)
    norm = torch.nn.LayerNorm(16) if final_norm else None
    return torch.nn.TransformerEncoder(layer, layers, norm=norm, enable_nested_tensor=not norm_first).eval()


def _both(model, *args):
    with torch.no_grad():
        want = model(*args)
        model.to("neuron")
        got = model(*[a.to("neuron") if isinstance(a, torch.Tensor) else a for a in args])
    return got, want


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_fast_path_without_mask(norm_first, activation):
    x = torch.randn(3, 7, 16)
    got, want = _both(_encoder(norm_first, activation, final_norm=True), x)
    assert_no_fallbacks()
    torch.testing.assert_close(got.cpu(), want, **TOL)


@pytest.mark.parametrize("lengths", [[7, 4, 1], [7, 7, 7], [5, 0, 2]])
def test_encoder_fast_path_with_padding_mask_goes_through_nested_tensors(lengths):
    x = torch.randn(3, 7, 16)
    pad = torch.arange(7)[None, :] >= torch.tensor(lengths)[:, None]
    got, want = _both(_encoder(False, "relu"), x, None, pad)
    assert_no_fallbacks()
    assert got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, **TOL)  # padded positions are zeros on both


def test_encoder_layer_with_src_mask_and_padding_mask():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(5)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    for kwargs in ({"src_mask": causal}, {"src_key_padding_mask": pad}):
        layer.cpu()
        got, want = _both(layer, x, *kwargs.values()) if "src_mask" in kwargs else _both(layer, x, None, None, pad)
        torch.testing.assert_close(got.cpu(), want, **TOL)
    assert_no_fallbacks()


@pytest.mark.parametrize("need_weights", [False, True])
def test_multihead_attention_fast_path(need_weights):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    x = torch.randn(2, 6, 16)
    pad = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    with torch.no_grad():
        want = mha(x, x, x, key_padding_mask=pad, need_weights=need_weights)
        mha.to("neuron")
        xn = x.to("neuron")
        got = mha(xn, xn, xn, key_padding_mask=pad.to("neuron"), need_weights=need_weights)
    assert_no_fallbacks()
    torch.testing.assert_close(got[0].cpu(), want[0], **TOL)
    if need_weights:
        torch.testing.assert_close(got[1].cpu(), want[1], **TOL)


def test_other_nested_ops_raise_a_clear_error():
    nt = torch.nested.nested_tensor([torch.randn(2, 4), torch.randn(3, 4)])
    with pytest.raises(NotImplementedError, match="nested tensors"):
        nt.to("neuron").sin()
