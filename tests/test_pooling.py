"""POOLING family: max, average and adaptive pooling (1d-3d, ceil mode,
dilation, indices, ties and NaN, channels-last, integers) forward and
backward against PyTorch on the CPU, with zero CPU fallbacks. Max unpooling
and fractional max pooling are in test_resample.py.

Tolerances (helpers.close_scaled, helpers.TOL_ACCUMULATED): float32 rtol
1e-4, atol 1e-4 x max|reference|; bfloat16 2e-2 and 2e-2 x max|reference|.
"""
import pytest
import torch
import torch.nn.functional as F

from helpers import assert_no_fallbacks, raises_like_cpu, run_both


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


# The CPU's pooling kernels refuse the dtypes they have no kernel for in
# their dispatch (NotImplementedError '"avg_pool2d" not implemented for
# \'Int\''); the device raises the same class at the op.
@pytest.mark.parametrize("call", [
    lambda x: F.avg_pool2d(x, 2), lambda x: F.avg_pool1d(x[0], 2), lambda x: F.adaptive_avg_pool2d(x, 3),
    lambda x: F.adaptive_max_pool2d(x, 3), lambda x: F.max_pool2d(x.bool(), 2),
], ids=["avg2d", "avg1d", "adaptive_avg", "adaptive_max", "max_bool"])
def test_pooling_refuses_dtypes_like_the_cpu_dispatch(call):
    x = torch.ones(1, 2, 4, 4, dtype=torch.int32)
    raises_like_cpu(lambda d: call(x.to(d)), NotImplementedError)
    assert_no_fallbacks()


# Empty inputs to adaptive pooling as ATen's metas take them: the average
# needs non-empty spatial dims only (its backward a grad_output with every
# dim after the first non-empty), the max every dim after the first, so an
# unbatched input may have no channels.
@pytest.mark.parametrize("fn,shape,size", [
    (F.adaptive_max_pool2d, (0, 6, 2), (2, 2)), (F.adaptive_avg_pool2d, (0, 6, 2), (2, 2)),
    (F.adaptive_max_pool1d, (0, 6), 2), (F.adaptive_avg_pool3d, (0, 2, 2, 2), (1, 1, 1)),
    (F.adaptive_max_pool3d, (0, 2, 2, 2), (1, 1, 1)), (F.adaptive_max_pool2d, (0, 3, 6, 2), (2, 2)),
    (F.adaptive_avg_pool3d, (2, 0, 2, 2, 2), (1, 1, 1)),
    (F.adaptive_max_pool2d, (2, 0, 6, 2), (2, 2)), (F.adaptive_avg_pool2d, (2, 3, 0, 2), (2, 2)),
    (F.adaptive_max_pool2d, (0, 0, 2), (2, 2)), (F.adaptive_avg_pool2d, (2, 0, 6, 2), (2, 2)),
])
def test_adaptive_pooling_of_empty_inputs_like_the_cpu(fn, shape, size):
    def call(d):
        x = torch.ones(shape, device=d, requires_grad=True)
        y = fn(x, size)
        y = y[0] if isinstance(y, tuple) else y
        y.sum().backward()
        return y, x.grad
    try:
        want = call("cpu")
    except RuntimeError:
        raises_like_cpu(call, RuntimeError)
    else:
        got = call("neuron")
        for a, b in zip(got, want):
            assert a.shape == b.shape and a.dtype == b.dtype
    assert_no_fallbacks()


# An empty int64 input to adaptive average pooling is the empty result on
# the CPU (its kernel returns before the dtype dispatch); a non-empty one,
# and adaptive max pooling of either, is NotImplementedError.
@pytest.mark.parametrize("shape", [(0, 3, 6), (2, 3, 6)])
@pytest.mark.parametrize("fn", [F.adaptive_avg_pool1d, F.adaptive_max_pool1d])
def test_adaptive_pooling_of_int64_like_the_cpu(shape, fn):
    x = torch.ones(shape, dtype=torch.long)
    try:
        want = fn(x, 2)
    except NotImplementedError:
        raises_like_cpu(lambda d: fn(x.to(d), 2), NotImplementedError)
    else:
        got = fn(x.neuron(), 2)
        assert got.shape == want.shape and got.dtype == want.dtype
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_adaptive_avg_pool3d_in_the_cpus_dtype_arithmetic(dtype):
    """The CPU's adaptive_avg_pool3d (AdaptiveAveragePooling3d.cpp) sums a
    window in the tensor's dtype, each add rounded (two float16 values of
    0.9 * 65504 make inf), and divides by kT, kH and kW one after another;
    its backward adds g / kT / kH / kW into grad_input the same way. Exact,
    forward and backward, with values near the dtype's max."""
    import torch_neuronx  # noqa: F401
    g = torch.Generator().manual_seed(51)
    big = torch.finfo(dtype).max
    for shape, osz in [((2, 3, 5, 4, 6), (2, 3, 4)), ((1, 2, 7, 3, 5), (3, 2, 2)), ((3, 6, 4, 4), (2, 1, 3))]:
        x = torch.randn(shape, generator=g) * torch.exp2(torch.randint(-8, 8, shape, generator=g).float())
        x = torch.where(torch.rand(shape, generator=g) < 0.3, big * 0.9 * torch.randn(shape, generator=g).sign(), x)
        x = x.to(dtype)
        xc = x.clone().requires_grad_()
        xd = x.to("neuron").requires_grad_()
        yc, yd = F.adaptive_avg_pool3d(xc, osz), F.adaptive_avg_pool3d(xd, osz)
        go = (torch.randn(yc.shape, generator=g) * torch.exp2(torch.randint(-8, 14, yc.shape, generator=g).float()))
        go = go.to(dtype)
        yc.backward(go)
        yd.backward(go.to("neuron"))
        for want, got in ((yc.detach(), yd.detach().cpu()), (xc.grad, xd.grad.cpu())):
            torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    assert_no_fallbacks()


@pytest.mark.parametrize("nd", [2, 3])
def test_avg_pool_backward_sums_overlaps_in_output_order(nd):
    """With a stride below the kernel an input element takes shares from
    several outputs; the CPU adds them output by output. Gradients spread
    over 2^-20..2^20 make any other order an ulp off: exact, both layouts."""
    import torch_neuronx  # noqa: F401
    g = torch.Generator().manual_seed(61)
    pool = F.avg_pool2d if nd == 2 else F.avg_pool3d
    shape = (2, 3, 9, 8) if nd == 2 else (1, 2, 5, 6, 7)
    for k, s, p, cip in [(3, 1, 1, True), (3, 2, 1, False), (4, 1, 0, True), (5, 2, 2, False)]:
        for cl in (False, True):
            x = torch.randn(shape, generator=g)
            if cl:
                x = x.contiguous(memory_format=torch.channels_last if nd == 2 else torch.channels_last_3d)
            xc = x.clone().requires_grad_()
            xd = x.to("neuron").requires_grad_()
            yc = pool(xc, k, s, p, count_include_pad=cip)
            go = torch.randn(yc.shape, generator=g) * torch.exp2(torch.randint(-20, 20, yc.shape, generator=g).float())
            yc.backward(go)
            pool(xd, k, s, p, count_include_pad=cip).backward(go.to("neuron"))
            torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=0, atol=0)
    assert_no_fallbacks()
