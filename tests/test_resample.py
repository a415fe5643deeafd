"""Resampling on the neuron device: interpolation (nearest, nearest-exact,
linear, bilinear, trilinear, bicubic, antialiased), max unpooling,
nn.functional.unfold / fold and Tensor.unfold's backward, forward and
backward against PyTorch on the CPU, with zero CPU fallbacks.

Tolerances: helpers.TOL_INTERPOLATION (float32 1e-5: both sides sum at most
a few dozen float32 products, in different orders; bfloat16 2e-2: both sides
compute in float32 and round once per result, the CPU's separable bicubic
rounds its intermediate pass to bfloat16 as well; gradients 4x the atol).
Nearest modes and unpooling are copies and must match exactly.
"""
import pytest
import torch
import torch.nn.functional as F

import torch_neuronx  # noqa: F401
from helpers import TOL_INTERPOLATION, assert_no_fallbacks, close, raises_like_cpu


def run_both(fn, x, dtype=torch.float32, exact=False):
    """fn on CPU and device; compares outputs and input gradients."""
    xc = x.detach().to(dtype).requires_grad_(True)
    xd = x.detach().to(dtype).neuron().requires_grad_(True)
    yc, yd = fn(xc), fn(xd)
    rtol, atol = (0, 0) if exact else TOL_INTERPOLATION[dtype]
    torch.testing.assert_close(yd.detach().cpu(), yc.detach(), rtol=rtol, atol=atol)
    g = torch.randn_like(yc)
    yc.backward(g)
    yd.backward(g.neuron())
    rtol, atol = TOL_INTERPOLATION[dtype]
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=rtol, atol=atol * 4)


SHAPES = {1: (2, 3, 7), 2: (2, 3, 5, 6), 3: (1, 2, 3, 4, 5)}
MODES = {"nearest": [1, 2, 3], "nearest-exact": [1, 2, 3], "linear": [1], "bilinear": [2], "trilinear": [3],
         "bicubic": [2]}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("how", ["up", "down", "scale", "scale_norecompute"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_interpolate(mode, how, dtype):
    for nsp in MODES[mode]:
        x = torch.randn(SHAPES[nsp])
        kw = {}
        if how == "up":
            kw["size"] = tuple(s * 2 + 1 for s in x.shape[2:])
        elif how == "down":
            kw["size"] = tuple(max(1, s // 2) for s in x.shape[2:])
        else:
            kw["scale_factor"] = 1.7
            kw["recompute_scale_factor"] = how == "scale"
        aligns = [None] if mode.startswith("nearest") else [False, True]
        for align in aligns:
            run_both(lambda t: F.interpolate(t, mode=mode, align_corners=align, **kw), x, dtype,
                     exact=mode.startswith("nearest"))
    assert_no_fallbacks()


@pytest.mark.parametrize("size", [(3, 4), (11, 13), (5, 17)])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_interpolate_antialias(size, mode):
    x = torch.randn(2, 3, 9, 10)
    run_both(lambda t: F.interpolate(t, size=size, mode=mode, antialias=True), x)
    assert_no_fallbacks()


def test_interpolate_channels_last_and_uint8():
    x = torch.randn(2, 4, 6, 5).to(memory_format=torch.channels_last)
    run_both(lambda t: F.interpolate(t, size=(9, 7), mode="bilinear"), x)
    y = F.interpolate(x.neuron(), size=(9, 7), mode="bilinear")
    assert y.is_contiguous(memory_format=torch.channels_last)
    xi = torch.randint(0, 255, (1, 3, 4, 5), dtype=torch.uint8)
    assert torch.equal(F.interpolate(xi.neuron(), size=(7, 3), mode="nearest").cpu(),
                       F.interpolate(xi, size=(7, 3), mode="nearest"))
    assert_no_fallbacks()


def test_interpolate_out_and_errors():
    x = torch.randn(1, 2, 4, 4)
    out = torch.empty(0).neuron()
    torch.ops.aten.upsample_bilinear2d.out(x.neuron(), [6, 6], False, None, None, out=out)
    torch.testing.assert_close(out.cpu(), torch.ops.aten.upsample_bilinear2d(x, [6, 6], False, None, None))
    with pytest.raises(RuntimeError, match="output_size equals to 2"):
        torch.ops.aten.upsample_bilinear2d(x.neuron(), [6], False, None, None)
    with pytest.raises(RuntimeError, match="should be greater than 0"):
        torch.ops.aten.upsample_bilinear2d(x.neuron(), [0, 3], False, None, None)
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        torch.ops.aten.upsample_bilinear2d(x.long().neuron(), [3, 3], False, None, None)
    assert_no_fallbacks()


@pytest.mark.parametrize("nsp", [1, 2, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_max_unpool(nsp, dtype):
    pool = [F.max_pool1d, F.max_pool2d, F.max_pool3d][nsp - 1]
    unpool = [F.max_unpool1d, F.max_unpool2d, F.max_unpool3d][nsp - 1]
    x = torch.randn((2, 3) + (6, 7, 5)[:nsp])
    _, idx = pool(x, 2, stride=2, return_indices=True)
    y = pool(x, 2, stride=2)
    run_both(lambda t: unpool(t, idx.to(t.device), 2, stride=2, output_size=x.shape[2:]), y, dtype,
             exact=True)
    assert_no_fallbacks()


def test_max_unpool_invalid_index():
    x = torch.randn(1, 1, 2, 2).neuron()
    idx = torch.tensor([[[[0, 1], [2, 99]]]]).neuron()
    with pytest.raises(RuntimeError, match="Found an invalid max index: 99"):
        F.max_unpool2d(x, idx, 2, output_size=(4, 4))
        torch.neuron.synchronize()


@pytest.mark.parametrize("args", [dict(kernel_size=2), dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=2),
                                  dict(kernel_size=3, padding=2, stride=(1, 3))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_unfold_fold(args, dtype):
    x = torch.randn(2, 3, 7, 8)
    run_both(lambda t: F.unfold(t, **args), x, dtype, exact=True)
    cols = F.unfold(x, **args)
    run_both(lambda t: F.fold(t, (7, 8), **args), cols, dtype)
    xb = torch.rand(3, 5, 6) > 0.5  # unbatched bool
    assert torch.equal(F.unfold(xb.neuron(), 2).cpu(), F.unfold(xb, 2))
    assert_no_fallbacks()


@pytest.mark.parametrize("shape,dim,size,step", [((7,), 0, 3, 2), ((4, 9), 1, 2, 1), ((5, 6, 3), 0, 2, 3),
                                                  ((4, 6), -2, 4, 1), ((), 0, 1, 1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tensor_unfold_backward(shape, dim, size, step, dtype):
    run_both(lambda t: t.unfold(dim, size, step), torch.randn(shape), dtype, exact=True)
    assert_no_fallbacks()


# (PyTorch has no 3-d bicubic grid sampling.)
@pytest.mark.parametrize("nsp,mode", [(2, "bilinear"), (2, "nearest"), (2, "bicubic"), (3, "bilinear"),
                                      (3, "nearest")])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample(nsp, mode, padding_mode, align):
    x = torch.randn((2, 3, 4, 5, 6)[:nsp + 2])
    grid = torch.rand((2, 3, 4, 5, nsp) if nsp == 3 else (2, 3, 4, 2)) * 2.4 - 1.2
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align)
    xc, gc = x.clone().requires_grad_(), grid.clone().requires_grad_()
    xd, gd = x.neuron().requires_grad_(), grid.neuron().requires_grad_()
    yc, yd = F.grid_sample(xc, gc, **kw), F.grid_sample(xd, gd, **kw)
    torch.testing.assert_close(yd.detach().cpu(), yc.detach(), rtol=1e-5, atol=1e-5)
    g = torch.randn_like(yc)
    yc.backward(g)
    yd.backward(g.neuron())
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(gd.grad.cpu(), gc.grad, rtol=1e-4, atol=1e-4)
    assert_no_fallbacks()


def test_grid_sample_errors():
    x, grid = torch.randn(1, 1, 3, 3).neuron(), torch.zeros(1, 2, 2, 3).neuron()
    with pytest.raises(RuntimeError, match="size 2 in last dimension"):
        F.grid_sample(x, grid, align_corners=False)
    with pytest.raises(RuntimeError, match="bicubic interpolation only supports 4D"):
        F.grid_sample(torch.randn(1, 1, 2, 2, 2).neuron(), torch.zeros(1, 1, 1, 1, 3).neuron(), mode="bicubic",
                      align_corners=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("nsp,shape,k,o", [(2, (2, 3, 9, 11), (2, 3), (5, 6)), (3, (2, 2, 6, 7, 8), (2, 2, 3), (3, 4, 5)),
                                           (2, (3, 8, 8), 2, (4, 3))])
def test_fractional_max_pool(dtype, nsp, shape, k, o):
    x = torch.randn(shape).to(dtype)
    samples = torch.rand(shape[0] if len(shape) == nsp + 2 else 1, shape[-nsp - 1], nsp).to(dtype)
    f = F.fractional_max_pool2d if nsp == 2 else F.fractional_max_pool3d
    xc, xd = x.clone().requires_grad_(), x.neuron().requires_grad_()
    yc, ic = f(xc, k, output_size=o, return_indices=True, _random_samples=samples)
    yd, idd = f(xd, k, output_size=o, return_indices=True, _random_samples=samples.neuron())
    assert torch.equal(yd.detach().cpu(), yc.detach()) and torch.equal(idd.cpu(), ic)
    g = torch.randn_like(yc)
    yc.backward(g)
    yd.backward(g.neuron())
    rtol, atol = TOL_INTERPOLATION[dtype]
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=rtol, atol=atol * 4)
    assert_no_fallbacks()


@pytest.mark.parametrize("kw", [dict(scale_factor=2), dict(size=(11, 4)), dict(scale_factor=1.7)])
def test_upsample_nearest(kw):
    x = torch.randn(2, 3, 5, 7, requires_grad=True)
    xd = x.detach().neuron().requires_grad_()
    y, yd = F.interpolate(x, mode="nearest", **kw), F.interpolate(xd, mode="nearest", **kw)
    assert torch.equal(yd.cpu(), y.detach())
    y.pow(2).sum().backward()
    yd.pow(2).sum().backward()
    close(xd.grad, x.grad)
    assert_no_fallbacks()


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("shape,pad", [((3, 5, 7), (2, 3)), ((2, 3, 5, 7), (1, 2, 3, 1)),
                                       ((1, 2, 3, 5, 7), (1, 1, 2, 0, 1, 1))])
def test_reflection_replication_pad(mode, shape, pad):
    x = torch.randn(*shape, requires_grad=True)
    xd = x.detach().neuron().requires_grad_()
    y, yd = F.pad(x, pad, mode=mode), F.pad(xd, pad, mode=mode)
    assert torch.equal(yd.cpu(), y.detach())
    y.pow(2).sum().backward()
    yd.pow(2).sum().backward()
    close(xd.grad, x.grad)
    assert_no_fallbacks()


# Reflection/replication padding checks its input and output sizes as the
# CPU's meta functions do, in their order and with their class (negative
# padding may crop; a 2-d/3-d output is refused only when every dim is < 1,
# and then a negative dim is the allocation's error), then refuses bool as
# its kernels do (NotImplementedError).
@pytest.mark.parametrize("mode,shape,pad", [
    ("replicate", (1, 2, 1), (-1, 0)),
    ("reflect", (1, 2, 3), (-1, -2)),
    ("reflect", (1, 2, 3), (3, 0)),
    ("reflect", (1, 2, 3, 3), (0, 0, 1, 3)),
    ("reflect", (1, 2, 3, 3), (-3, 0, 1, 1)),
    ("replicate", (1, 2, 3, 3), (-3, -1, 0, 0)),
    ("replicate", (1, 2, 3, 3), (-2, 0, -3, -1)),
    ("replicate", (1, 2, 3, 3, 3), (-2, 0, -3, -1, 0, -3)),
    ("reflect", (1, 2, 3, 3, 3), (-2, -1, -3, -1, 0, -3)),
    ("reflect", (2, 0, 3), (1, 1)),
    ("replicate", (0, 2, 3), (1, 1)),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
def test_reflection_replication_pad_checks_sizes_like_the_cpu(mode, shape, pad, dtype):
    x = torch.randn(*shape).to(dtype)
    try:
        want = F.pad(x, pad, mode=mode)
    except (RuntimeError, NotImplementedError) as e:
        raises_like_cpu(lambda d: F.pad(x.to(d), pad, mode=mode), type(e))
    else:
        got = F.pad(x.neuron(), pad, mode=mode)
        assert got.shape == want.shape and torch.equal(got.cpu(), want)
    assert_no_fallbacks()



def _same_nonfinite(dev, ref):
    dev = dev.cpu()
    assert torch.equal(dev.isnan(), ref.isnan()), (dev, ref)
    assert torch.equal(dev[ref.isinf()], ref[ref.isinf()]), (dev, ref)
    fin = ref.isfinite()
    rtol, atol = TOL_INTERPOLATION[ref.dtype]
    torch.testing.assert_close(dev[fin], ref[fin], rtol=rtol, atol=atol)


@pytest.mark.parametrize("mode,dims", [("linear", 1), ("bilinear", 2), ("bicubic", 2), ("trilinear", 3)])
@pytest.mark.parametrize("align", [True, False])
def test_interpolate_nonfinite_neighbours(mode, dims, align):
    """-inf and NaN neighbours: the CPU multiplies every tap of the op's dims,
    zero weights included (a corner next to -inf is NaN with align_corners),
    and a 1-d or 2-d op has no taps along the dims it lacks (those made every
    -inf NaN here)."""
    x = torch.randn(2, 3, *(5,) * dims)
    x.view(-1)[3] = float("-inf")
    x.view(-1)[17] = float("inf")
    x.view(-1)[28] = float("nan")
    for size in ((9,) * dims, (3,) * dims, (1,) * (dims - 1) + (7,)):
        want = F.interpolate(x, size=size, mode=mode, align_corners=align)
        _same_nonfinite(F.interpolate(x.neuron(), size=size, mode=mode, align_corners=align), want)
    assert_no_fallbacks()


def test_interpolate_issue_example_align_corners():
    x = torch.tensor([[[1.0, float("-inf"), 2.0, 3.0]]])
    want = F.interpolate(x, size=7, mode="linear", align_corners=True)   # [nan, -inf, -inf, -inf, 2, 2.5, 3]
    assert want.isinf().sum() == 3
    _same_nonfinite(F.interpolate(x.neuron(), size=7, mode="linear", align_corners=True), want)
    x2 = torch.tensor([[[[1.0, float("-inf")], [2.0, 3.0]]]])
    want = F.interpolate(x2, size=(3, 3), mode="bilinear", align_corners=True)
    _same_nonfinite(F.interpolate(x2.neuron(), size=(3, 3), mode="bilinear", align_corners=True), want)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_interpolate_antialias_reads_only_its_window(mode):
    x = torch.arange(16.0).view(1, 1, 2, 8)
    x[0, 0, 0, 7] = float("inf")
    x[0, 0, 1, 0] = float("-inf")
    want = F.interpolate(x, size=(2, 3), mode=mode, antialias=True)
    assert want.isfinite().any()
    _same_nonfinite(F.interpolate(x.neuron(), size=(2, 3), mode=mode, antialias=True), want)


@pytest.mark.parametrize("case", [
    ("no window fits (rounds down)", lambda d: F.unfold(torch.ones(2, 1, 1, 5, device=d), kernel_size=2, stride=2),
     RuntimeError),
    ("dilated window past the input", lambda d: F.unfold(torch.ones(1, 2, 4, 5, device=d), kernel_size=3, dilation=2,
                                                         stride=2), RuntimeError),
    ("integer input", lambda d: F.unfold(torch.ones(1, 1, 3, 3, dtype=torch.int16, device=d), kernel_size=2),
     NotImplementedError),
], ids=lambda c: c[0])
def test_unfold_rejects_what_the_cpu_rejects(case):
    raises_like_cpu(case[1], case[2])


# Integer inputs to the interpolation modes the CPU computes in floating
# point only: NotImplementedError from its dispatch, at the op.
@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest-exact"])
def test_interpolate_refuses_integer_dtypes_like_the_cpu(mode):
    x = torch.ones(1, 1, 3, 3, dtype=torch.int32)
    raises_like_cpu(lambda d: F.interpolate(x.to(d), size=(5, 5), mode=mode), NotImplementedError)
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_unfold_fold_complex(dtype):
    # im2col moves complex elements as they are (zero padding 0 + 0i),
    # col2im sums each part; backward of each is the other.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 5, 6, dtype=dtype, generator=g)
    args = dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=2)
    xc, xd = x.clone().requires_grad_(), x.neuron().requires_grad_()
    oc, od = F.unfold(xc, **args), F.unfold(xd, **args)
    assert torch.equal(od.cpu(), oc)
    w = torch.randn(oc.shape, dtype=dtype, generator=g)
    (oc * w).sum().abs().backward()
    (od * w.neuron()).sum().abs().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=1e-5, atol=1e-5)
    cols = torch.randn(1, 12, 4, dtype=dtype, generator=g)
    torch.testing.assert_close(F.fold(cols.neuron(), (3, 3), 2).cpu(), F.fold(cols, (3, 3), 2), rtol=1e-5, atol=1e-5)
    raises_like_cpu(lambda d: F.unfold(torch.ones(1, 1, 3, 3, dtype=torch.complex32, device=d), 2),
                    NotImplementedError)
    raises_like_cpu(lambda d: F.fold(torch.ones(1, 4, 4, dtype=torch.complex32, device=d), (3, 3), 2),
                    NotImplementedError)
    assert_no_fallbacks()


# uint8 bilinear/bicubic (plain and antialiased): the CPU's fixed-point
# separable passes (w then h, each rounded to uint8), reproduced bit for bit.
def _layout(t, how):
    if how == "channels_last":
        return t.contiguous(memory_format=torch.channels_last)
    if how == "transposed":
        return t.transpose(2, 3).contiguous().transpose(2, 3)
    if how == "strided":
        return torch.cat([t, t], 3)[..., ::2]
    return t


U8_RESIZES = [dict(size=(9, 7)), dict(size=(3, 2)), dict(size=(1, 5)), dict(size=(4, 11)), dict(scale_factor=1.5),
              dict(scale_factor=0.5), dict(scale_factor=2.6, recompute_scale_factor=True), dict(size=(6, 1))]


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "transposed", "strided"])
@pytest.mark.parametrize("channels", [1, 3, 4, 6])
def test_interpolate_uint8_matches_cpu_exactly(mode, antialias, layout, channels):
    g = torch.Generator().manual_seed(channels)
    x = torch.randint(0, 256, (2, channels, 6, 5), dtype=torch.uint8, generator=g)
    x[1] = torch.randint(0, 2, x[1].shape, dtype=torch.uint8, generator=g) * 255  # hard edges: cubic overshoot
    for kw in U8_RESIZES:
        if channels > 4 and layout != "channels_last" and kw.get("size", (0, 0))[1] == 1:
            continue  # known CPU bug (tools/fuzz/known.py cpu-bug-antialias-output-width-1)
        for align in (False, True):
            def fn(d):
                return F.interpolate(_layout(x.to(d), layout), mode=mode, antialias=antialias, align_corners=align, **kw)
            want, got = fn("cpu"), fn("neuron")
            assert got.dtype == torch.uint8 and got.shape == want.shape and got.stride() == want.stride(), (kw, align)
            assert torch.equal(got.cpu(), want), (kw, align, (got.cpu().int() - want.int()).abs().max())
    assert_no_fallbacks()


def test_interpolate_uint8_edge_cases_like_the_cpu():
    x = torch.randint(0, 256, (1, 3, 2, 2), dtype=torch.uint8)
    # the CPU's AVX2 kernel fails its internal assert for 3 channels-first
    # channels resized to 1x1 with a new height: RuntimeError on both sides
    raises_like_cpu(lambda d: F.interpolate(x.to(d), scale_factor=0.5, mode="bilinear"), RuntimeError)
    # ... but not channels-last, nor with 4 channels
    for t in (x.contiguous(memory_format=torch.channels_last), torch.cat([x, x[:, :1]], 1)):
        want = F.interpolate(t, size=(1, 1), mode="bicubic", antialias=True)
        assert torch.equal(F.interpolate(t.neuron(), size=(1, 1), mode="bicubic", antialias=True).cpu(), want)
    # an empty batch computes nothing; same-size input is copied
    e = torch.zeros(0, 2, 3, 3, dtype=torch.uint8)
    assert F.interpolate(e.neuron(), size=(5, 4), mode="bilinear").shape == (0, 2, 5, 4)
    assert torch.equal(F.interpolate(x.neuron(), size=(2, 2), mode="bicubic").cpu(), x)
    # uint8 has no linear1d/trilinear kernel on the CPU either
    raises_like_cpu(lambda d: F.interpolate(x[0].to(d), size=5, mode="linear"), NotImplementedError)
    raises_like_cpu(lambda d: F.interpolate(x[None].to(d), size=(2, 3, 3), mode="trilinear"), NotImplementedError)
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int8, torch.bool])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_interpolate_antialias_same_size_copies_any_dtype(dtype, mode):
    # the CPU's antialiased kernels copy an unchanged size before their
    # dtype dispatch; any other size of a non-uint8 integer is refused
    x = torch.randint(0, 2, (2, 3, 4, 5)).to(dtype)
    y = F.interpolate(x.neuron(), size=(4, 5), mode=mode, antialias=True)
    assert y.dtype == dtype and torch.equal(y.cpu(), F.interpolate(x, size=(4, 5), mode=mode, antialias=True))
    raises_like_cpu(lambda d: F.interpolate(x.to(d), size=(4, 6), mode=mode, antialias=True), NotImplementedError)
    raises_like_cpu(lambda d: F.interpolate(x.to(d), size=(4, 5), mode=mode), NotImplementedError)
    assert_no_fallbacks()


def _edge_image(shape, dtype, seed):
    """Values near +-3.4e38 with some infinities: where the order of the
    CPU's multiply-adds decides between a number, inf and NaN."""
    g = torch.Generator().manual_seed(seed)
    e = torch.randn(shape, generator=g, dtype=torch.float64)
    big = torch.finfo(torch.float32).max
    e = torch.where(e.abs() > 1, e.sign() * big * 0.99, e * 1e38).to(dtype)
    e.view(-1)[::17] = float("inf")
    return e


@pytest.mark.parametrize("kw", [dict(size=(4, 3)), dict(scale_factor=1.5), dict(size=(7, 3)),
                                dict(size=(8, 4))])
@pytest.mark.parametrize("edge", [False, True])
def test_interpolate_antialias_bilinear_float32_is_the_cpus_bit_for_bit(kw, edge):
    # width pass into a temporary, then height, each sum fused multiply-adds
    # in tap order (the CPU's kernel): overflow and inf - inf land alike
    shape = (2, 3, 8, 6)
    x = _edge_image(shape, torch.float32, 5) if edge else torch.randn(shape, generator=torch.Generator().manual_seed(5))
    want = F.interpolate(x, mode="bilinear", antialias=True, **kw)
    got = F.interpolate(x.to("neuron"), mode="bilinear", antialias=True, **kw).cpu()
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kw", [dict(scale_factor=2.0), dict(size=(5, 7), align_corners=True)])
def test_interpolate_bicubic_edge_values_like_the_cpu(dtype, kw):
    # inf/NaN where the CPU has them: its width sums per height tap first
    x = _edge_image((2, 3, 8, 6), dtype, 7)
    want = F.interpolate(x, mode="bicubic", **kw)
    got = F.interpolate(x.to("neuron"), mode="bicubic", **kw).cpu()
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.isinf() & (got > 0), want.isinf() & (want > 0))
    assert torch.equal(got.isinf() & (got < 0), want.isinf() & (want < 0))
    fin = want.isfinite()
    torch.testing.assert_close(got[fin], want[fin], rtol=1e-5 if dtype == torch.float32 else 1e-2, atol=0)


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("edge", [False, True])
def test_interpolate_linear_float32_is_the_cpus_bit_for_bit(align, edge):
    """1-d linear in the CPU's order: its tables take scale * (o + 0.5) - 0.5
    as one fused multiply-add (a plain product gave weights an ulp off for
    4 -> 10, 7 -> 6), and each output is fma(x0, w0, x1 * w1). Exact over
    downsampling, upsampling and equal sizes, normal and edge values. The
    weight tables are checked on every size pair up to 12 x 16 with one-hot
    rows."""
    for n_in in range(1, 13):
        e = torch.eye(n_in).reshape(n_in, 1, n_in)
        for n_out in range(1, 17):
            want = F.interpolate(e, size=(n_out,), mode="linear", align_corners=align)
            got = F.interpolate(e.to("neuron"), size=(n_out,), mode="linear", align_corners=align).cpu()
            assert torch.equal(got, want), (n_in, n_out)
    for i, (n_in, n_out) in enumerate([(4, 10), (7, 6), (9, 4), (5, 5), (3, 11)]):
        shape = (2, 3, n_in)
        g = torch.Generator().manual_seed(i)
        x = _edge_image(shape, torch.float32, i) if edge else torch.randn(shape, generator=g)
        want = F.interpolate(x, size=(n_out,), mode="linear", align_corners=align)
        got = F.interpolate(x.to("neuron"), size=(n_out,), mode="linear", align_corners=align).cpu()
        assert torch.equal(got.isnan(), want.isnan())
        assert torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0)), (n_in, n_out)
    assert_no_fallbacks()


def _spread_values(shape, seed):
    """Normal values scaled by 2^-20..2^20, a quarter replaced by +-3.4e38
    and a few by inf: the rounding of every multiply-add shows."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * torch.exp2(torch.randint(-20, 20, shape, generator=g).float())
    pick = torch.rand(shape, generator=g)
    x = torch.where(pick < 0.25, 3.4e38 * torch.randn(shape, generator=g).sign(), x)
    return torch.where(pick > 0.97, torch.tensor(float("inf")), x)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("mode", ["bilinear", "trilinear"])
def test_interpolate_bilinear_trilinear_float32_are_the_cpus_bit_for_bit(threads, mode):
    """The CPU's two float32 kernels, by its own choice: the nested
    Interpolate (fma(t0, w0, t1 * w1) per dim, outermost dim last) for
    channels-first inputs and large bilinear outputs, and the channels-last
    kernel (corner weights multiplied out, the 4 or 8 terms summed in one
    order in its vector lanes and another in its scalar tail) for
    channels-last inputs of more than 3 channels, bilinear outputs with
    OH + OW <= 128, and 3 channels on one thread. Exact over channel counts
    across the vector width (8 floats: the CPU runs this kernel's AVX2
    build on AVX-512 hosts), layouts (contiguous, channels-last, expanded,
    transposed), align_corners, scale factors and edge values. Fuzz case
    14142135-355907 (an expanded trilinear input with 3.4e38) was an ulp
    off."""
    nd = 2 if mode == "bilinear" else 3
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        x = torch.tensor([[[[[1.0518745183944702, 0.04685794934630394, 3.4028234663852886e+38,
                              -0.6093869805335999]]], [[[float("inf"), 1.1580058336257935, -0.022612478584051132,
                                                        0.4222573935985565]]]]]).expand([1, 2, 1, 3, 4])
        if nd == 3:
            want = F.interpolate(x, mode=mode, size=[7, 7, 4])
            got = F.interpolate(x.to("neuron"), mode=mode, size=[7, 7, 4]).cpu()
            assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(0), want.nan_to_num(0))
        cases = [(1, (3, 5), dict(size=(7, 4))), (3, (4, 6), dict(scale_factor=1.5)), (4, (5, 3), dict(size=(2, 9))),
                 (20, (3, 4), dict(size=(6, 5))), (17, (6, 5), dict(size=(70, 71))), (5, (2, 7), dict(size=(80, 3))),
                 (12, (1, 1), dict(size=(4, 3)))]  # 8 lanes + 4 tail channels (fuzz 7841-79129: an ulp off)
        for i, (c, spatial, kw) in enumerate(cases):
            if nd == 3:
                spatial = (2,) + spatial
                kw = {k: (v if isinstance(v, float) else (3,) + v) for k, v in kw.items()}
                if i == 4:
                    kw = dict(size=(3, 9, 8))
            shape = (2, c) + spatial
            for layout in ("contiguous", "channels_last", "expanded", "transposed"):
                x = _spread_values(shape, seed=10 * i + len(layout))
                if layout == "channels_last":
                    x = x.contiguous(memory_format=torch.channels_last if nd == 2 else torch.channels_last_3d)
                elif layout == "expanded":
                    x = x[:, :, :1].expand(shape)
                elif layout == "transposed":
                    x = x.transpose(-1, -2).contiguous().transpose(-1, -2)
                for align in (False, True):
                    want = F.interpolate(x, mode=mode, align_corners=align, **kw)
                    got = F.interpolate(x.to("neuron"), mode=mode, align_corners=align, **kw).cpu()
                    assert torch.equal(got.isnan(), want.isnan()), (c, spatial, kw, layout, align)
                    assert torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0)), (c, spatial, kw, layout, align)
    finally:
        torch.set_num_threads(old)
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_interpolate_bilinear_trilinear_16bit_nested_kernel_is_the_cpus(dtype):
    """The CPU's nested kernel for 16-bit inputs (linear, trilinear,
    bilinear) keeps its lambdas in the
    dtype (lambda1 rounded, lambda0 = 1 - lambda1 rounded) and sums in
    float: exact for channels-first trilinear and large bilinear outputs
    (OH + OW > 128), with values up to the dtype's max; and its
    channels-last kernel (float lambdas; the first fused product of the
    lanes, and of float16's tail, is the other one of the pair)."""
    big = torch.finfo(dtype).max
    g = torch.Generator().manual_seed(3)
    cases = [("trilinear", (2, 3, 3, 4, 2), dict(size=(5, 3, 7))), ("trilinear", (1, 5, 2, 5, 3), dict(scale_factor=1.7)),
             ("bilinear", (2, 2, 5, 4), dict(size=(70, 65))), ("bilinear", (1, 4, 3, 6), dict(size=(66, 90)))]
    # 1-d linear: the nested kernel alone
    cases += [("linear", (2, 3, 7), dict(size=11)), ("linear", (1, 20, 9), dict(scale_factor=0.6))]
    # the channels-last kernel: small bilinear outputs, channels-last 3-d inputs (lanes and tail, a size-1 dim)
    cases += [("bilinear", (2, 20, 4, 3), dict(size=(5, 7))), ("bilinear", (1, 3, 5, 4), dict(size=(7, 6))),
              ("trilinear", (2, 20, 4, 4, 1), dict(size=(6, 7, 7))), ("trilinear", (1, 5, 3, 2, 4), dict(size=(4, 5, 3)))]
    for mode, shape, kw in cases:
        x = torch.randn(shape, generator=g) * torch.exp2(torch.randint(-8, 8, shape, generator=g).float())
        x = torch.where(torch.rand(shape, generator=g) < 0.2, big * torch.randn(shape, generator=g).sign(), x).to(dtype)
        if mode == "trilinear" and shape[1] > 3:
            x = x.contiguous(memory_format=torch.channels_last_3d)
        for align in (False, True):
            want = F.interpolate(x, mode=mode, align_corners=align, **kw)
            got = F.interpolate(x.to("neuron"), mode=mode, align_corners=align, **kw).cpu()
            assert torch.equal(got.isnan(), want.isnan()), (mode, shape, kw, align)
            assert torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0)), (mode, shape, kw, align)
    assert_no_fallbacks()


def test_interpolate_float64_antialias_weights_from_double_tables():
    """float64 tables are computed in double, as the CPU's opmath: 5 -> 3
    antialiased bicubic puts output 0's third tap at the filter's edge,
    1e-17 in double and exactly 0 in float32 arithmetic, so an inf there is
    -inf/inf on the CPU (inf * 1e-17) and was NaN (inf * 0) on neuron
    (fuzz case 57721566-691265). The sums stay float32 (the documented
    precision), so finite values are compared to float32's resolution."""
    g = torch.Generator().manual_seed(21)
    x = torch.randn(2, 3, 4, 5, generator=g, dtype=torch.float64)
    x[:, :, :, 2] = float("inf")
    x[1, :, 1, 2] = -float("inf")
    for mode in ("bicubic", "bilinear"):
        for align in (False, True):
            kw = dict(size=(3, 3), mode=mode, antialias=True, align_corners=align)
            want = F.interpolate(x, **kw)
            got = F.interpolate(x.to("neuron"), **kw).cpu()
            assert torch.equal(got.isnan(), want.isnan()), (mode, align)
            assert torch.equal(got.isinf(), want.isinf()) and torch.equal(got.signbit(), want.signbit()), (mode, align)
            fin = want.isfinite()
            torch.testing.assert_close(got[fin], want[fin], rtol=1e-6, atol=1e-6)
    assert_no_fallbacks()


@pytest.mark.parametrize("threads", [1, 2])
def test_interpolate_backward_is_the_cpus_bit_for_bit(threads):
    """Every CPU interpolate backward adds each output point's tap products
    into grad_input in output order (bicubic: width tap outer, (g * wy) *
    wx unfused; the others ((wd * wh) * ww) * g fused), so gradients spread
    over 2^-20..2^20 round, overflow and cancel exactly as there: 9+ planes
    (neuron's 8-plane vector path and its remainder), both layouts, float32
    and the 16-bit dtypes (a float buffer rounded once)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(31)
    cases = [("bilinear", (2, 9, 5, 7), (9, 12), None), ("bilinear", (1, 10, 8, 3), (4, 2), True),
             ("bicubic", (2, 5, 5, 7), (9, 12), False), ("bicubic", (1, 9, 8, 3), (3, 5), True),
             ("trilinear", (1, 9, 3, 4, 2), (4, 7, 3), False), ("nearest", (2, 5, 3, 4), (7, 5), None),
             ("nearest-exact", (1, 9, 2, 3, 4), (3, 5, 7), None), ("linear", (3, 4, 6), (11,), True)]
    cases += [(m, (1, 11, 6, 5), (3, 2), a) for m in ("bilinear", "bicubic") for a in ("aa",)]
    try:
        for mode, shape, size, align in cases:
            for dtype in (torch.float32, torch.bfloat16, torch.float16):
                aa = align == "aa"
                if aa and dtype != torch.float32:
                    continue  # the CPU's antialiased backward is float32/float64 only
                kw = dict(size=size, mode=mode)
                if aa:
                    kw["antialias"] = True
                elif align is not None:
                    kw["align_corners"] = align
                for cl in (False, True):
                    x = torch.randn(shape, generator=g).to(dtype)
                    if cl and len(shape) > 3:
                        x = x.contiguous(memory_format=torch.channels_last if len(shape) == 4 else torch.channels_last_3d)
                    out_shape = shape[:2] + size
                    go = (torch.randn(out_shape, generator=g)
                          * torch.exp2(torch.randint(-20, 20, out_shape, generator=g).float())).to(dtype)
                    if cl and len(shape) > 3:
                        go = go.contiguous(memory_format=torch.channels_last if len(shape) == 4
                                           else torch.channels_last_3d)
                    xc = x.clone().requires_grad_()
                    F.interpolate(xc, **kw).backward(go)
                    xd = x.to("neuron").requires_grad_()
                    F.interpolate(xd, **kw).backward(go.to("neuron"))
                    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=0, atol=0, equal_nan=True,
                                               msg=lambda m: f"{mode} {shape} {size} {align} {dtype} cl={cl}: {m}")
    finally:
        torch.set_num_threads(before)
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_interpolate_nearest_scale_keeping_the_size_like_the_cpu(dtype):
    """scale_factor=1.1 keeps a size of 2 (floor(2.2)); the CPU's generic
    nearest kernel (1-d; 2-d/3-d channels-first with large outputs) then
    reads floor(o / 1.1): element 0 twice, where its channels-last kernel
    (nearest_idx) copies. Both kernels, both dtypes, exact."""
    g = torch.Generator().manual_seed(41)
    cases = [((2, 3, 2), 1.1), ((1, 2, 3), 1.05), ((2, 2, 2, 2), [1.1, 1.1]), ((1, 2, 2, 2), [1.1, 35.0]),
             ((1, 5, 2, 3), [1.1, 1.1]), ((1, 2, 2, 2, 2), 1.1), ((1, 2, 3, 3, 2), [1.1, 2.2, 1.05])]
    for shape, sf in cases:
        x = torch.randn(shape, generator=g, dtype=dtype)
        for cl in (False, True):
            if cl and len(shape) == 3:
                continue
            xx = x.contiguous(memory_format=torch.channels_last if len(shape) == 4 else torch.channels_last_3d) if cl else x
            want = F.interpolate(xx, scale_factor=sf, mode="nearest")
            got = F.interpolate(xx.to("neuron"), scale_factor=sf, mode="nearest").cpu()
            assert torch.equal(got, want), (shape, sf, cl)
    assert_no_fallbacks()
