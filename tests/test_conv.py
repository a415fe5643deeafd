"""CONV family: convolutions (1d-3d, transposed, grouped and depthwise,
dilated, padding="same", channels-last, unbatched, integers and float64)
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
import torch.nn.functional as F

import torch_neuronx
from helpers import assert_no_fallbacks, close_scaled, raises_like_cpu, run_both


def conv_weight(cout, cin_g, *k):
    fan_in = cin_g
    for v in k:
        fan_in *= v
    return torch.randn(cout, cin_g, *k) / fan_in ** 0.5


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


# Non-finite values meet the zero padding: PyTorch's CPU convolutions (im2col,
# and every float64 one) multiply each padded tap by the padding's zero, and
# NaN * 0 = inf * 0 = NaN. float64 on the CPU always takes that path; float32
# and bfloat16 may take oneDNN, which skips some padded taps, so the reference
# here is the CPU in float64.
NONFINITE_CONV = [
    # dims, N, Cin, Cout, spatial, k, stride, padding, dilation, groups
    (2, 1, 1, 1, 2, 1, 1, 1, 1, 1),   # the 1x1 with padding 1: every output NaN
    (2, 2, 3, 8, 5, 3, 1, 1, 1, 1),   # GEMM path
    (2, 2, 4, 4, 6, 3, 2, 2, 1, 2),   # direct path (2 outputs per group), stride
    (2, 1, 3, 3, 5, 3, 1, 1, 2, 3),   # depthwise, dilated
    (1, 2, 3, 2, 7, 3, 1, 1, 1, 1),
    (3, 1, 2, 2, 4, 3, 1, 1, 1, 1),
]


def _conv_nd(dims):
    return {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[dims]


def _assert_nonfinite_close(dev, ref):
    dtype = dev.dtype
    dev, ref = dev.cpu().double(), ref.double()
    assert torch.equal(dev.isnan(), ref.isnan()), (dev, ref)
    fin = ref.isfinite()
    assert torch.equal(dev[~fin & ~ref.isnan()], ref[~fin & ~ref.isnan()])
    close_scaled(dev[fin].to(dtype), ref[fin].to(dtype), dtype=dtype)


@pytest.mark.parametrize("case", NONFINITE_CONV)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_conv_nonfinite_weight_reaches_padding(case, dtype):
    dims, n, cin, cout, sp, k, s, p, d, g = case
    conv = _conv_nd(dims)
    x = torch.randn(n, cin, *(sp,) * dims).to(dtype)
    w = conv_weight(cout, cin // g, *(k,) * dims).to(dtype)
    w.view(-1)[-1] = float("inf")
    w.view(-1)[0] = float("nan")
    y = conv(x.neuron(), w.neuron(), None, s, p, d, g)
    _assert_nonfinite_close(y, conv(x.double(), w.double(), None, s, p, d, g))
    assert_no_fallbacks()


def test_conv_nan_weight_issue_example():
    """conv2d(ones(1,1,2,2), weight=[[[[nan]]]], padding=1) is all NaN on the CPU."""
    x, w = torch.ones(1, 1, 2, 2), torch.full((1, 1, 1, 1), float("nan"))
    want = F.conv2d(x, w, padding=1)
    assert want.isnan().all()
    assert F.conv2d(x.neuron(), w.neuron(), padding=1).cpu().isnan().all()


@pytest.mark.parametrize("case", NONFINITE_CONV)
def test_conv_nonfinite_gradients_reach_padding(case):
    """The weight gradient multiplies a non-finite output gradient by the
    padded input's zeros; a transposed convolution's input gradient is the
    forward convolution of the same weights, so a NaN weight reaches its
    padded outputs too."""
    dims, n, cin, cout, sp, k, s, p, d, g = case
    conv = _conv_nd(dims)
    convt = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[dims]
    x = torch.randn(n, cin, *(sp,) * dims)
    w = conv_weight(cout, cin // g, *(k,) * dims)
    y_shape = conv(x, w, None, s, p, d, g).shape
    gy = torch.randn(y_shape)
    gy.view(-1)[0] = float("inf")
    gy.view(-1)[-1] = float("nan")
    results = {}
    for dev in ("cpu", "neuron"):
        dt = torch.float64 if dev == "cpu" else torch.float32
        xx = x.to(dev, dt).requires_grad_()
        ww = w.to(dev, dt).requires_grad_()
        conv(xx, ww, None, s, p, d, g).backward(gy.to(dev, dt))
        # conv_transpose of gy-shaped input with a NaN weight: its input gradient is conv(grad_out, w)
        wn = w.to(dev, dt).clone()
        wn.view(-1)[0] = float("nan")
        xt = torch.randn(y_shape, generator=torch.Generator().manual_seed(3)).to(dev, dt).requires_grad_()
        out = convt(xt, wn, None, s, p, 0, g, d)
        out.backward(torch.ones_like(out))
        results[dev] = (ww.grad, xx.grad, xt.grad)
    for got, want in zip(results["neuron"], results["cpu"]):
        _assert_nonfinite_close(got, want)
    assert results["cpu"][2].isnan().any()
    assert_no_fallbacks()


# The CPU's convolution dispatches on the input's dtype before it compares
# it with the weight's: a bool input beside a float16 weight is
# NotImplementedError, not the RuntimeError of mismatched types.
def test_conv_refuses_a_bool_input_before_comparing_dtypes():
    x, w = torch.ones(1, 1, 5, dtype=torch.bool), torch.ones(1, 1, 2, dtype=torch.half)
    raises_like_cpu(lambda d: F.conv1d(x.to(d), w.to(d)), NotImplementedError)
    raises_like_cpu(lambda d: F.conv1d(x.float().to(d), w.to(d)), RuntimeError)
    assert_no_fallbacks()


# A transposed convolution whose output would have a size below 1 is the
# CPU's RuntimeError from its shape check, made before its kernel refuses
# the dtype (a bool input too); 1-d reports itself as 2-d with height 1.
@pytest.mark.parametrize("fn,xs,ws,kw", [
    (F.conv_transpose1d, (1, 4, 1), (4, 1, 1), dict(padding=2)),
    (F.conv_transpose2d, (1, 1, 2, 2), (1, 1, 1, 1), dict(padding=(2, 1))),
    (F.conv_transpose3d, (1, 1, 2, 2, 2), (1, 1, 1, 1, 1), dict(padding=(0, 2, 0))),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.int32])
def test_conv_transpose_refuses_an_output_below_one_like_the_cpu(fn, xs, ws, kw, dtype):
    x, w = torch.ones(xs, dtype=dtype), torch.ones(ws, dtype=dtype)
    cpu, dev = raises_like_cpu(lambda d: fn(x.to(d), w.to(d), **kw), RuntimeError)
    assert str(dev) == str(cpu)
    assert_no_fallbacks()


# An output size of exactly 0: the CPU's native path refuses it (float16,
# float64, integers), its oneDNN path (bfloat16 always) returns the empty
# result, as neuron does for bfloat16 and float32.
def test_conv_transpose_output_size_zero_follows_the_cpu_path():
    x, w = torch.ones(2, 1, 2), torch.ones(1, 2, 2)
    raises_like_cpu(lambda d: F.conv_transpose1d(x.double().to(d), w.double().to(d), padding=2, dilation=2),
                    RuntimeError)
    want = F.conv_transpose1d(x.bfloat16(), w.bfloat16(), padding=2, dilation=2)
    got = F.conv_transpose1d(x.bfloat16().neuron(), w.bfloat16().neuron(), padding=2, dilation=2)
    assert got.shape == want.shape == (2, 2, 0) and got.dtype == want.dtype
    assert F.conv_transpose1d(x.neuron(), w.neuron(), padding=2, dilation=2).shape == (2, 2, 0)
    assert_no_fallbacks()


# The gradients of an empty transposed output are zeros on the CPU (oneDNN)
# even beside inf and NaN: no tap reads the zero padding of an input that
# is not there (neuron multiplied them by it and gave NaN; fuzz seed
# 31415926, 12 cases). bfloat16 shapes always take oneDNN, float32 ones that
# are batched with groups or strides do.
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("fn,xs,ws,kw", [
    (F.conv_transpose1d, (2, 2, 4), (2, 1, 1), dict(padding=2, groups=2)),
    (F.conv_transpose2d, (2, 2, 3, 7), (2, 1, 2, 2), dict(padding=2, groups=2)),
    (F.conv_transpose3d, (2, 2, 1, 3, 3), (2, 2, 2, 2, 1), dict(padding=1, groups=2)),
])
def test_conv_transpose_empty_output_gradients_are_zero(dtype, fn, xs, ws, kw):
    inf, nan = float("inf"), float("nan")
    x = torch.randn(xs).to(dtype)
    x.view(-1)[::3] = inf
    x.view(-1)[1] = nan
    w = torch.randn(ws).to(dtype)
    w.view(-1)[0] = -inf
    b = torch.randn(ws[1] * kw["groups"]).to(dtype)

    def run(d):
        xl, wl, bl = (t.to(d, copy=True).requires_grad_() for t in (x, w, b))
        y = fn(xl, wl, bl, **kw)
        y.sum().backward()
        return y, xl.grad, wl.grad, bl.grad

    want, got = run("cpu"), run("neuron")
    assert want[0].numel() == 0 and got[0].shape == want[0].shape
    for g, c in zip(got[1:], want[1:]):
        assert (g is None) == (c is None)
        assert g is None or (g.dtype == c.dtype and torch.equal(g.cpu(), c))
    assert_no_fallbacks()


@pytest.mark.parametrize("fn,xs,ws", [(F.conv3d, (1, 1, 2, 2, 2), (1, 1, 1, 1, 1)),
                                      (F.conv_transpose2d, (1, 1, 2, 2), (1, 1, 1, 1)),
                                      (F.conv_transpose3d, (1, 1, 2, 2, 2), (1, 1, 1, 1, 1))])
def test_conv_dtype_refusal_names_the_cpu_kernel(fn, xs, ws):
    x, w = torch.ones(xs, dtype=torch.bool), torch.ones(ws, dtype=torch.bool)
    cpu, dev = raises_like_cpu(lambda d: fn(x.to(d), w.to(d)), NotImplementedError)
    assert str(dev).startswith(str(cpu))


# The CPU's transposed and dilated kernels take int64 as their only integer
# type (NotImplementedError at the op for int32 and the narrower ones); its
# plain kernels convolve every integer type.
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
@pytest.mark.parametrize("fn,xs,ws,kw", [
    (F.conv1d, (1, 1, 6), (1, 1, 2), dict(dilation=2)),
    (F.conv2d, (1, 1, 5, 5), (1, 1, 2, 2), dict(dilation=(1, 2))),
    (F.conv3d, (1, 1, 4, 4, 4), (1, 1, 2, 2, 2), dict(dilation=2)),
    (F.conv_transpose1d, (1, 1, 4), (1, 1, 2), {}),
    (F.conv_transpose2d, (1, 1, 3, 3), (1, 1, 2, 2), dict(stride=2)),
    (F.conv_transpose3d, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), {}),
    (F.conv2d, (1, 2, 5, 5), (2, 1, 2, 2), dict(groups=2, stride=2)),
])
def test_conv_integer_dtypes_as_the_cpu_kernels_take_them(dtype, fn, xs, ws, kw):
    g = torch.Generator().manual_seed(0)
    x, w = torch.randint(0, 4, xs, generator=g).to(dtype), torch.randint(0, 3, ws, generator=g).to(dtype)
    try:
        want = fn(x, w, **kw)
    except NotImplementedError:
        raises_like_cpu(lambda d: fn(x.to(d), w.to(d), **kw), NotImplementedError)
    else:
        got = fn(x.neuron(), w.neuron(), **kw)
        assert got.dtype == want.dtype and torch.equal(got.cpu(), want)
    assert_no_fallbacks()


# Inputs near the float limits: once a partial sum can pass FLT_MAX, the
# result depends on the summation order (an overflowed -4e38 beside an
# input's +inf is NaN in one order, +inf in another), and the CPU's oneDNN
# picks a different order by shape. Neuron then sums in double and rounds
# once, which is what the CPU gives wherever its own order did not overflow:
# compared there (the CPU's float32 result equal to its float64 one rounded),
# forward and both gradients. Before, 1-2% of these elements differed
# (float32: NaN where the CPU has inf; bfloat16 likewise).
def _edge_values(shape, dtype, p, gen):
    t = torch.randn(shape, generator=gen)
    m = torch.rand(shape, generator=gen) < p
    big = torch.tensor([3.0e38, -3.0e38, 2.5e38, -1.7e38, float("inf"), float("-inf")])
    t[m] = big[torch.randint(0, len(big), (int(m.sum()),), generator=gen)]
    return t.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_conv_sums_near_the_float_limits_follow_the_exact_cpu_results(dtype):
    gen = torch.Generator().manual_seed(13)
    shapes = [(F.conv1d, (2, 4, 7), (6, 2, 3)), (F.conv2d, (2, 4, 5, 4), (6, 2, 2, 3)),
              (F.conv2d, (2, 2, 5, 4), (3, 2, 2, 3)), (F.conv3d, (2, 4, 3, 3, 4), (6, 2, 2, 2, 2))]

    def run(fn, x, w, dy, kw, dev, dt):
        xl, wl = x.to(dev, dt, copy=True).requires_grad_(), w.to(dev, dt, copy=True).requires_grad_()
        y = fn(xl, wl, **kw)
        y.backward(dy.to(dev, dt))
        return [t.detach().cpu() for t in (y, xl.grad, wl.grad)]

    compared = 0
    for i in range(48):
        fn, xs, ws = shapes[i % 4]
        kw = dict(stride=1 + i % 2, groups=xs[1] // ws[1], padding=int(i % 3 == 0))
        x, w = _edge_values(xs, dtype, 0.25, gen), _edge_values(ws, dtype, 0.1, gen)
        dy = _edge_values(fn(x, w, **kw).shape, dtype, 0.1, gen)
        want, got = run(fn, x, w, dy, kw, "cpu", dtype), run(fn, x, w, dy, kw, "neuron", dtype)
        exact = [t.to(dtype) for t in run(fn, x, w, dy, kw, "cpu", torch.float64)]
        for c, e, d in zip(want, exact, got):
            cpu_exact = (c.isnan() == e.isnan()) & ((c == e) | c.isnan() | (c.isfinite() & e.isfinite()))
            sel = cpu_exact & (~c.isfinite() | (e.abs() > 1e37))
            ok = (d == c) | (d.isnan() & c.isnan()) | ((d - c).abs() <= 1e-2 * c.abs())
            assert bool(ok[sel].all()), (i, fn.__name__, kw, c[sel & ~ok][:4], d[sel & ~ok][:4])
            compared += int(sel.sum())
    assert compared > 1000
    assert_no_fallbacks()


# The weight gradient near the float limits sums each image, then the
# images, as the CPU's per-image GEMMs accumulate: +3e38 in one image and
# -3e38 in the other absorb their images' small terms and cancel to 0
# (summed straight through, the terms after the cancellation were left: 3).
@pytest.mark.parametrize("fn,unsq", [(F.conv1d, 0), (F.conv2d, 1)])
def test_conv_weight_gradient_of_huge_terms_groups_by_image(fn, unsq):
    x = torch.tensor([[[1., 2., 3e38, 0.5, 0.25]], [[0.75, -3e38, 1., 1., 1.]]])
    w = torch.tensor([[[1.0]], [[2.0]], [[-1.0]]])
    if unsq:
        x, w = x.unsqueeze(2), w.unsqueeze(2)
    grads = []
    for d in ("cpu", "neuron"):
        xl, wl = x.to(d, copy=True).requires_grad_(), w.to(d, copy=True).requires_grad_()
        y = fn(xl, wl)
        y.backward(torch.ones_like(y))
        grads.append(wl.grad.cpu())
    assert torch.equal(grads[1], grads[0])
    assert_no_fallbacks()


# A transposed convolution adds its bias after the sums, as the CPU does
# (oneDNN and the float64 path alike): 1e18 - 1e18 + 0.375 is 0.375, where
# a bias added first is absorbed (0.0). The direct path (one input channel)
# and the im2col GEMM (bfloat16, four channels, stride 2).
@pytest.mark.parametrize("cin,stride,dtype", [(1, 1, torch.float32), (1, 1, torch.bfloat16),
                                              (4, 2, torch.bfloat16)])
def test_conv_transpose_adds_the_bias_after_large_terms_cancel(cin, stride, dtype):
    x = torch.full((2, cin, 3), 1e18)
    w = torch.zeros(cin, 2, 3)
    w[:, :, 0], w[:, :, 2] = 1.0, -1.0
    b = torch.tensor([0.375, -0.5])
    want = F.conv_transpose1d(x.to(dtype), w.to(dtype), b.to(dtype), stride=stride)
    got = F.conv_transpose1d(x.to(dtype).neuron(), w.to(dtype).neuron(), b.to(dtype).neuron(), stride=stride)
    assert got.dtype == want.dtype and torch.equal(got.cpu(), want)
    assert_no_fallbacks()


# Near the float limits a convolution's sums take the loop nest, in the
# order of the CPU's float64 im2col GEMM (the fuzz's reference): the bias
# first for one or two output channels, after the products from three (taps
# [3e38, -3e38, 1], bias 0.375: 1.0 and 1.375; 20101-1041488 lost its bias
# with three channels). The CPU's float64 result is the reference here.
@pytest.mark.parametrize("cout,want_first", [(1, 1.0), (2, 1.0), (3, 1.375), (8, 1.375)])
def test_conv_bias_place_near_the_float_limits_follows_the_cpus_gemm(cout, want_first):
    w = torch.zeros(cout, 1, 3)
    w[:, 0] = torch.tensor([3e38, -3e38, 1.0])
    x, b = torch.ones(1, 1, 6), torch.full((cout,), 0.375)
    want = F.conv1d(x.double(), w.double(), b.double())
    assert want[0, 0, 0].item() == want_first  # the CPU's order, as probed
    got = F.conv1d(x.neuron(), w.neuron(), b.neuron())
    assert torch.equal(got.cpu(), want.float())
    assert_no_fallbacks()
