"""Convolution, pooling, batch norm and group norm on the neuron device:
forward and backward against PyTorch on the CPU, with zero CPU fallbacks.

Tolerances (helpers.close_scaled, helpers.TOL_ACCUMULATED):
  float32   rtol 1e-4, atol 1e-4 x max|reference| (convolutions sum up to a
            few thousand products; both sides accumulate in float32, in a
            different order)
  bfloat16  rtol 2e-2, atol 2e-2 x max|reference|: both sides accumulate in
            float32 and round the result to bfloat16 (ulp 2^-8 relative), and
            a backward pass chains several rounded results.
"""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_neuronx
from helpers import assert_no_fallbacks, close_scaled, run_both


def conv_weight(cout, cin_g, *k):
    fan_in = cin_g
    for v in k:
        fan_in *= v
    return torch.randn(cout, cin_g, *k) / fan_in ** 0.5


# ---- convolution ------------------------------------------------------------------

CONV2D = [
    # N, Cin, Cout, H, W, k, stride, padding, dilation, groups, bias
    (2, 8, 16, 9, 11, 3, 1, 1, 1, 1, True),
    (1, 5, 33, 13, 10, 3, 2, 1, 1, 1, False),
    (3, 4, 17, 12, 12, 3, 1, 2, 2, 1, True),
    (2, 6, 16, 8, 8, 3, 1, 0, 1, 2, True),
    (2, 8, 12, 7, 9, (3, 1), (1, 2), (1, 0), 1, 4, False),
    (1, 3, 64, 23, 23, 7, 2, 3, 1, 1, False),
    (4, 40, 20, 7, 7, 1, 1, 0, 1, 1, True),
    (2, 3, 24, 32, 32, 16, 16, 0, 1, 1, True),  # ViT patch embedding
    (2, 6, 6, 10, 12, 3, 1, 1, 1, 6, True),  # depthwise
    (1, 4, 8, 9, 9, 5, 2, 2, 1, 4, False),  # depthwise, multiplier 2
    (2, 64, 40, 6, 5, 3, 1, 1, 1, 1, True),
]


@pytest.mark.parametrize("case", CONV2D)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_conv2d_forward_backward(case, dtype):
    n, cin, cout, h, w, k, s, p, d, g, bias = case
    kk = k if isinstance(k, tuple) else (k, k)
    x = torch.randn(n, cin, h, w)
    wt = conv_weight(cout, cin // g, *kk)
    b = torch.randn(cout) if bias else None
    args = (x, wt) + ((b,) if bias else ())
    run_both(lambda x, w, *b: F.conv2d(x, w, b[0] if b else None, s, p, d, g), *args, dtype=dtype)
    assert_no_fallbacks()
    assert torch_neuronx.get_executed_ops().get("aten::convolution_overrideable", 0) >= 1
    assert torch_neuronx.get_executed_ops().get("aten::convolution_backward_overrideable", 0) >= 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_conv1d_whisper_frontend(dtype):
    """Whisper's encoder stem: conv1d(k3, p1) + GELU, conv1d(k3, s2, p1) + GELU."""
    x = torch.randn(2, 20, 30)
    w1, b1 = conv_weight(32, 20, 3), torch.randn(32)
    w2, b2 = conv_weight(32, 32, 3), torch.randn(32)

    def f(x, w1, b1, w2, b2):
        y = F.gelu(F.conv1d(x, w1, b1, padding=1))
        return F.gelu(F.conv1d(y, w2, b2, stride=2, padding=1))

    run_both(f, x, w1, b1, w2, b2, dtype=dtype)
    assert_no_fallbacks()


def test_conv3d():
    x = torch.randn(2, 4, 5, 6, 7)
    w = conv_weight(6, 2, 3, 2, 3)
    b = torch.randn(6)
    run_both(lambda x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=(1, 0, 1), dilation=(1, 1, 2), groups=2),
             x, w, b)
    assert_no_fallbacks()


@pytest.mark.parametrize("dims,stride,padding,out_pad,dilation,groups", [
    (1, 2, 1, 1, 1, 1),
    (2, 2, 1, 1, 1, 1),
    (2, (2, 3), (0, 1), (1, 2), 1, 2),
    (2, 1, 0, 0, 2, 1),
    (3, 2, 1, 0, 1, 1),
])
def test_conv_transpose(dims, stride, padding, out_pad, dilation, groups):
    cin, cout = 4, 6
    spatial = (7, 6, 5)[:dims]
    x = torch.randn(2, cin, *spatial)
    w = torch.randn(cin, cout // groups, *((3,) * dims)) / 6
    b = torch.randn(cout)
    fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[dims]
    run_both(lambda x, w, b: fn(x, w, b, stride, padding, out_pad, groups, dilation), x, w, b)
    assert_no_fallbacks()


def test_conv_channels_last():
    x = torch.randn(2, 8, 10, 9).to(memory_format=torch.channels_last)
    w = conv_weight(12, 8, 3, 3)
    b = torch.randn(12)
    out_d, out_c = run_both(lambda x, w, b: F.conv2d(x, w, b, padding=1), x, w, b)
    assert out_d[0].is_contiguous(memory_format=torch.channels_last)
    # a channels-last weight makes the output channels-last too, as on the CPU
    w_cl = w.contiguous(memory_format=torch.channels_last)
    y = F.conv2d(x.contiguous().neuron(), w_cl.neuron())
    assert y.is_contiguous(memory_format=torch.channels_last)
    close_scaled(y, F.conv2d(x.contiguous(), w_cl))
    assert_no_fallbacks()


def test_conv_float64_integers_and_errors():
    x = torch.randn(1, 2, 5, 5, dtype=torch.float64)
    w = torch.randn(3, 2, 3, 3, dtype=torch.float64)
    y = F.conv2d(x.neuron(), w.neuron())
    assert y.dtype == torch.float64
    torch.testing.assert_close(y.cpu(), F.conv2d(x, w), rtol=1e-5, atol=1e-5)
    # integers convolve exactly (wrapping like the CPU), transposed too
    for dt in (torch.int64, torch.int32, torch.int8):
        xi = torch.randint(-50, 50, (2, 4, 6, 5)).to(dt)
        wi = torch.randint(-5, 5, (6, 2, 3, 3)).to(dt)
        bi = torch.randint(-5, 5, (6,)).to(dt)
        assert torch.equal(F.conv2d(xi.neuron(), wi.neuron(), bi.neuron(), 2, 1, 1, 2).cpu(),
                           F.conv2d(xi, wi, bi, 2, 1, 1, 2))
        if dt == torch.int64:  # the CPU's transposed convolution takes int64 only
            wt = torch.randint(-5, 5, (4, 3, 2, 2)).to(dt)
            assert torch.equal(F.conv_transpose2d(xi.neuron(), wt.neuron(), stride=2).cpu(),
                               F.conv_transpose2d(xi, wt, stride=2))
    assert_no_fallbacks()
    with pytest.raises(RuntimeError, match="not implemented for 'Bool'"):
        F.conv2d(torch.ones(1, 1, 3, 3, dtype=torch.bool).neuron(), torch.ones(1, 1, 1, 1, dtype=torch.bool).neuron())
    with pytest.raises(RuntimeError):
        F.conv2d(x.float().neuron(), w.neuron())  # dtype mismatch


def test_conv_transpose_output_padding_beyond_stride():
    """output_padding may reach the dilation - 1: the output is longer than
    the convolution it transposes needs."""
    x = torch.randn(1, 2, 4, 4)
    w = torch.randn(2, 3, 5, 5) / 10
    run_both(lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=2, output_padding=3, dilation=4), x, w)
    assert_no_fallbacks()


def test_conv_unbatched_and_empty_batch():
    x = torch.randn(3, 8, 8)
    w = conv_weight(4, 3, 3, 3)
    close_scaled(F.conv2d(x.neuron(), w.neuron(), padding=1), F.conv2d(x, w, padding=1))
    e = torch.randn(0, 3, 8, 8)
    assert F.conv2d(e.neuron(), w.neuron()).shape == F.conv2d(e, w).shape


def test_conv_padding_same():
    x = torch.randn(2, 4, 9, 8)
    w = conv_weight(5, 4, 4, 3)
    run_both(lambda x, w: F.conv2d(x, w, padding="same", dilation=(1, 2)), x, w)
    assert_no_fallbacks()


# ---- pooling --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("k,s,p,d,ceil", [(2, 2, 0, 1, False), (3, 2, 1, 1, False), (3, 2, 1, 1, True),
                                          ((3, 2), (1, 2), (1, 1), (2, 3), False), (5, 5, 2, 1, True)])
def test_max_pool2d(dtype, k, s, p, d, ceil):
    x = torch.randn(2, 3, 11, 10)
    out_d, out_c = run_both(lambda x: F.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True), x,
                            dtype=dtype)
    assert torch.equal(out_d[1].cpu(), out_c[1])
    assert_no_fallbacks()


def test_max_pool_ties_nan_and_channels_last():
    x = torch.tensor([[[[1.0, 1.0, 2.0, 2.0], [1.0, float("nan"), 2.0, 2.0], [0.0, 0.0, -1.0, -1.0],
                        [0.0, 0.0, -1.0, -1.0]]]])
    yd, id_ = F.max_pool2d(x.neuron(), 2, return_indices=True)
    yc, ic = F.max_pool2d(x, 2, return_indices=True)
    assert torch.equal(id_.cpu(), ic)
    torch.testing.assert_close(yd.cpu(), yc, equal_nan=True)
    xc = torch.randn(2, 5, 8, 8).to(memory_format=torch.channels_last)
    out_d, out_c = run_both(lambda x: F.max_pool2d(x, 3, 2, 1), xc)
    assert out_d[0].is_contiguous(memory_format=torch.channels_last)
    assert_no_fallbacks()


def test_pool_integers():
    x = torch.randint(-100, 100, (2, 3, 9, 8))
    for dt in (torch.int64, torch.int32, torch.uint8):
        xi = x.to(dt)
        yd, id_ = F.max_pool2d(xi.neuron(), 3, 2, 1, return_indices=True)
        yc, ic = F.max_pool2d(xi, 3, 2, 1, return_indices=True)
        assert torch.equal(yd.cpu(), yc) and torch.equal(id_.cpu(), ic)
    for args in [(3, 1, 1), (2, 2, 0, True, False), (3, 2, 1, False, True, 2)]:
        assert torch.equal(F.avg_pool2d(x.neuron(), *args).cpu(), F.avg_pool2d(x, *args))
    assert torch.equal(F.max_pool3d(x.unsqueeze(0).neuron(), 2).cpu(), F.max_pool3d(x.unsqueeze(0), 2))
    assert_no_fallbacks()
    with pytest.raises(RuntimeError, match="not implemented for 'Int'"):
        F.avg_pool2d(x.int().neuron(), 2)
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        F.adaptive_avg_pool2d(x.neuron(), 3)
    with pytest.raises(RuntimeError, match="not implemented for 'Bool'"):
        F.max_pool2d(x.bool().neuron(), 2)


@pytest.mark.parametrize("dims", [1, 3])
def test_max_pool_1d_3d(dims):
    x = torch.randn(2, 3, *((9, 8, 7)[:dims]))
    fn = {1: F.max_pool1d, 3: F.max_pool3d}[dims]
    out_d, out_c = run_both(lambda x: fn(x, 3, 2, 1, return_indices=True), x)
    assert torch.equal(out_d[1].cpu(), out_c[1])
    run_both(lambda x: fn(x, 2, ceil_mode=True), x)
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("k,s,p,ceil,cip,div", [(2, 2, 0, False, True, None), (3, 2, 1, False, True, None),
                                                (3, 2, 1, True, False, None), (3, 1, 1, False, True, 4),
                                                ((3, 2), (2, 1), (1, 0), True, False, None)])
def test_avg_pool2d(dtype, k, s, p, ceil, cip, div):
    x = torch.randn(2, 3, 10, 9)
    run_both(lambda x: F.avg_pool2d(x, k, s, p, ceil, cip, div), x, dtype=dtype)
    assert_no_fallbacks()


def test_avg_pool_1d_3d():
    run_both(lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), torch.randn(2, 3, 11))
    run_both(lambda x: F.avg_pool3d(x, (2, 3, 3), (1, 2, 2), (1, 1, 0)), torch.randn(2, 3, 5, 7, 6))
    run_both(lambda x: F.avg_pool3d(x, 2, divisor_override=3), torch.randn(1, 2, 4, 4, 4))
    assert_no_fallbacks()


@pytest.mark.parametrize("out", [1, 3, (4, 5), (7, 6), (2, 9)])
def test_adaptive_pool2d(out):
    x = torch.randn(2, 4, 7, 9)
    run_both(lambda x: F.adaptive_avg_pool2d(x, out), x)
    out_d, out_c = run_both(lambda x: F.adaptive_max_pool2d(x, out, return_indices=True), x)
    assert torch.equal(out_d[1].cpu(), out_c[1])
    assert_no_fallbacks()


def test_adaptive_pool_1d_3d():
    run_both(lambda x: F.adaptive_avg_pool1d(x, 5), torch.randn(2, 3, 13))
    run_both(lambda x: F.adaptive_max_pool1d(x, 4), torch.randn(2, 3, 13))
    run_both(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), torch.randn(2, 3, 5, 7, 4))
    run_both(lambda x: F.adaptive_max_pool3d(x, (2, 3, 2)), torch.randn(2, 3, 5, 7, 4))
    run_both(lambda x: F.adaptive_avg_pool2d(x, (2, 3)), torch.randn(3, 7, 8))  # unbatched
    assert_no_fallbacks()


# ---- batch norm -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(4, 6), (4, 6, 10), (3, 5, 7, 8), (2, 4, 3, 4, 5)])
def test_batch_norm_train_updates_running_stats(dtype, shape):
    c = shape[1]
    x = torch.randn(*shape) * 2 + 0.5
    w, b = torch.rand(c) + 0.5, torch.randn(c)
    rm_c, rv_c = (torch.randn(c) * 0.1).to(dtype), (torch.rand(c) + 0.5).to(dtype)
    rm_d, rv_d = rm_c.neuron(), rv_c.neuron()
    run_both(lambda x, w, b: F.batch_norm(x, rm_c if x.device.type == "cpu" else rm_d,
                                          rv_c if x.device.type == "cpu" else rv_d, w, b, True, 0.1, 1e-5),
             x, w, b, dtype=dtype)
    close_scaled(rm_d, rm_c, dtype)
    close_scaled(rv_d, rv_c, dtype)
    assert_no_fallbacks()
    assert "aten::native_batch_norm_backward" in torch_neuronx.get_executed_ops()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm_eval_and_no_stats(dtype):
    x = torch.randn(3, 5, 6, 7)
    w, b = torch.rand(5) + 0.5, torch.randn(5)
    rm, rv = torch.randn(5) * 0.1, torch.rand(5) + 0.5
    run_both(lambda x, w, b: F.batch_norm(x, rm.to(x), rv.to(x), w, b, False, 0.1, 1e-5), x, w, b,
             dtype=dtype)
    run_both(lambda x: F.batch_norm(x, None, None, None, None, True, 0.1, 1e-5), x, dtype=dtype)
    run_both(lambda x, w: F.batch_norm(x, None, None, w, None, True, 0.1, 1e-3), x, w, dtype=dtype)
    assert_no_fallbacks()


def test_batch_norm_modules_and_channels_last():
    torch.manual_seed(0)
    for mod, shape in [(nn.BatchNorm1d(6), (8, 6, 5)), (nn.BatchNorm2d(6), (4, 6, 5, 5)),
                       (nn.BatchNorm3d(6), (2, 6, 3, 4, 5))]:
        dev = type(mod)(6).neuron()
        dev.load_state_dict(mod.state_dict())
        x = torch.randn(*shape)
        for train in (True, False):
            mod.train(train)
            dev.train(train)
            close_scaled(dev(x.neuron()), mod(x))
        close_scaled(dev.running_mean, mod.running_mean)
        close_scaled(dev.running_var, mod.running_var)
        assert dev.num_batches_tracked.item() == mod.num_batches_tracked.item()
    xc = torch.randn(4, 6, 5, 5).to(memory_format=torch.channels_last)
    out_d, _ = run_both(lambda x: F.batch_norm(x, None, None, training=True), xc)
    assert out_d[0].is_contiguous(memory_format=torch.channels_last)
    assert_no_fallbacks()


def test_batch_norm_mixed_precision_params():
    """bfloat16 activations with float32 parameters and statistics (AMP-style)."""
    x = torch.randn(4, 3, 5, 5).bfloat16()
    w, b = torch.rand(3) + 0.5, torch.randn(3)
    rm, rv = torch.zeros(3), torch.ones(3)
    yd, md, vd = torch.native_batch_norm(x.neuron(), w.neuron(), b.neuron(), rm.neuron(), rv.neuron(), True, 0.1,
                                         1e-5)
    yc, mc, vc = torch.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
    assert (yd.dtype, md.dtype, vd.dtype) == (yc.dtype, mc.dtype, vc.dtype)
    close_scaled(yd, yc, torch.bfloat16)
    close_scaled(md, mc)
    close_scaled(vd, vc)


def test_batch_norm_errors():
    with pytest.raises(RuntimeError, match="at least one element"):
        torch.native_batch_norm(torch.randn(0, 3, 2).neuron(), None, None, None, None, True, 0.1, 1e-5)
    with pytest.raises(RuntimeError, match="evaluation mode"):
        torch.native_batch_norm(torch.randn(2, 3, 2).neuron(), None, None, None, None, False, 0.1, 1e-5)


# ---- group norm -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape,groups,affine", [((2, 6, 5, 4), 3, True), ((2, 6, 5, 4), 3, False),
                                                 ((3, 8, 7), 8, True), ((2, 4, 3, 3, 3), 1, True),
                                                 ((4, 6), 2, True)])
def test_group_norm(dtype, shape, groups, affine):
    c = shape[1]
    x = torch.randn(*shape) * 3 + 1
    if affine:
        run_both(lambda x, w, b: F.group_norm(x, groups, w, b, 1e-5), x, torch.rand(c) + 0.5, torch.randn(c),
                 dtype=dtype)
    else:
        run_both(lambda x: F.group_norm(x, groups, eps=1e-5), x, dtype=dtype)
    assert_no_fallbacks()
    assert "aten::native_group_norm_backward" in torch_neuronx.get_executed_ops()


def test_group_norm_channels_last():
    xc = torch.randn(2, 8, 5, 6).to(memory_format=torch.channels_last)
    run_both(lambda x, w, b: F.group_norm(x, 4, w, b), xc, torch.rand(8), torch.randn(8))
    assert_no_fallbacks()


# ---- models ---------------------------------------------------------------------------

class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


def tiny_resnet():
    return nn.Sequential(nn.Conv2d(3, 8, 7, 2, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(3, 2, 1), BasicBlock(8, 8, 1), BasicBlock(8, 16, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


def test_resnet_training_step_native():
    torch.manual_seed(0)
    ref = tiny_resnet()
    dev = tiny_resnet().neuron()
    dev.load_state_dict(ref.state_dict())
    x, target = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
    opt_c = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    opt_d = torch.optim.SGD(dev.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        for model, opt, xx, tt in ((ref, opt_c, x, target), (dev, opt_d, x.neuron(), target.neuron())):
            opt.zero_grad()
            F.cross_entropy(model(xx), tt).backward()
            opt.step()
    for (name, p), q in zip(ref.state_dict().items(), dev.state_dict().values()):
        if p.is_floating_point():
            torch.testing.assert_close(q.cpu(), p, rtol=1e-3, atol=1e-4, msg=name)
    ref.eval()
    dev.eval()
    close_scaled(dev(x.neuron()), ref(x))
    assert_no_fallbacks()


def test_vit_patch_embed_and_group_norm_block():
    torch.manual_seed(0)
    patch = nn.Conv2d(3, 16, 8, 8)
    gn = nn.GroupNorm(4, 16)
    devp, devg = nn.Conv2d(3, 16, 8, 8).neuron(), nn.GroupNorm(4, 16).neuron()
    devp.load_state_dict(patch.state_dict())
    devg.load_state_dict(gn.state_dict())
    x = torch.randn(2, 3, 32, 32)
    yc = gn(patch(x)).flatten(2).transpose(1, 2)
    yd = devg(devp(x.neuron())).flatten(2).transpose(1, 2)
    close_scaled(yd, yc)
    yc.square().mean().backward()
    yd.square().mean().backward()
    close_scaled(devp.weight.grad, patch.weight.grad)
    close_scaled(devg.weight.grad, gn.weight.grad)
    assert_no_fallbacks()
