"""NN family: threshold, shrink, logit, nan_to_num, signbit, angle, PReLU,
RReLU, GLU, the Huber, smooth-L1 and BCE losses, and addr, forward and
backward against PyTorch on the CPU with zero CPU fallbacks.

Tolerances: helpers.TOL_ROUNDED_ONCE (float32 1e-5: one rounding of the same
formula, or a mean in another summation order; bfloat16 2e-2: both sides
compute in float32 and round the result; other dtypes exact).
"""
import warnings

import pytest
import torch
import torch.nn.functional as F

from helpers import TOL_ROUNDED_ONCE, assert_no_fallbacks, raises_like_cpu, tol_kw
from helpers import seeded_randn as rnd


def check(fn, *tensors, dtype=torch.float32, grad=True):
    cpu = [t.detach().clone().to(dtype).requires_grad_(grad and t.is_floating_point()) for t in tensors]
    dev = [t.to(dtype).to("neuron").requires_grad_(grad and t.is_floating_point()) for t in tensors]
    oc, od = fn(*cpu), fn(*dev)
    tol = tol_kw(TOL_ROUNDED_ONCE, dtype, (0, 0))
    torch.testing.assert_close(od.cpu(), oc, **tol, equal_nan=True)
    if grad and oc.requires_grad:
        w = torch.randn(oc.shape, generator=torch.Generator().manual_seed(3)).to(oc.dtype)
        gc = torch.autograd.grad((oc * w).sum(), [t for t in cpu if t.requires_grad])
        gd = torch.autograd.grad((od * w.to("neuron")).sum(), [t for t in dev if t.requires_grad])
        for a, b in zip(gd, gc):
            torch.testing.assert_close(a.cpu(), b, **tol, equal_nan=True)
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_activations(dtype):
    x = rnd(4, 7) * 2
    check(lambda t: F.threshold(t, 0.3, -2.0), x, dtype=dtype)
    check(lambda t: F.hardshrink(t, 0.7), x, dtype=dtype)
    check(lambda t: F.softshrink(t, 0.7), x, dtype=dtype)
    check(lambda t: torch.logit(t.sigmoid()), x, dtype=dtype)
    check(lambda t: torch.logit(t.sigmoid(), eps=0.2), x, dtype=dtype)
    check(lambda t: F.glu(t, dim=0), x, dtype=dtype)
    w = torch.tensor([0.25, -0.5, 1.5])
    check(lambda t, ww: F.prelu(t, ww), rnd(2, 3, 5), w, dtype=dtype)


def test_threshold_integers_and_inplace():
    x = torch.arange(-5, 6)
    check(lambda t: F.threshold(t, 1, 7), x, dtype=torch.int64, grad=False)
    a, b = rnd(10), rnd(10).to("neuron")
    F.threshold_(a, 0.0, 5.0)
    F.threshold_(b, 0.0, 5.0)
    torch.testing.assert_close(b.cpu(), torch.where(rnd(10) > 0, rnd(10), 5.0))
    torch.testing.assert_close(b.cpu(), a)


def test_logit_outside_unit_interval():
    x = torch.tensor([-0.5, 0.0, 0.25, 1.0, 1.5, float("nan")])
    check(torch.logit, x)
    # 64 elements: every one in the CPU's vector body, whose gradient with
    # eps is 0 at a NaN input (its scalar tail's is NaN; neuron's is 0)
    check(lambda t: torch.logit(t, eps=1e-3), x.repeat(11)[:64])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64])
def test_nan_to_num_signbit_angle(dtype):
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, -2.5, 3.0])
    if not dtype.is_floating_point:
        x = torch.tensor([-3, 0, 4])
    grad = dtype.is_floating_point
    check(torch.nan_to_num, x, dtype=dtype, grad=grad)
    check(lambda t: torch.nan_to_num(t, nan=1.0, posinf=2.0, neginf=-2.0), x, dtype=dtype, grad=grad)
    check(torch.signbit, x, dtype=dtype, grad=False)
    check(torch.angle, x, dtype=dtype, grad=grad)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_losses(reduction):
    x, t = rnd(3, 8), rnd(3, 8, seed=1)
    check(lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=0.6), x, t)
    check(lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.6), x, t)
    check(lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.0), x, t)
    p, y = torch.rand(3, 8) * 0.98 + 0.01, torch.rand(3, 8, generator=torch.Generator().manual_seed(2))
    wt = torch.rand(8)
    check(lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction), p, y)
    check(lambda a, b: F.binary_cross_entropy(a, b, weight=wt.to(a.device), reduction=reduction), p, y)


def test_bce_at_the_edges_and_bad_input():
    # Inputs 0 and 1 give finite losses (log clamped at -100) and gradients
    # (denominator clamped at 1e-12), as on the CPU.
    p = torch.tensor([0.0, 1.0, 0.5, 1.0])
    y = torch.tensor([1.0, 0.0, 0.5, 1.0])
    check(lambda a, b: F.binary_cross_entropy(a, b, reduction="sum"), p, y)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(torch.tensor([1.5]).to("neuron"), torch.tensor([1.0]).to("neuron"))


def test_rrelu():
    x = rnd(64, 64)
    check(lambda t: F.rrelu(t, 0.1, 0.3, training=False), x)
    xd = x.to("neuron").requires_grad_(True)
    out = F.rrelu(xd, 0.1, 0.3, training=True)
    (out.sum()).backward()
    out, g = out.detach().cpu(), xd.grad.cpu()
    pos = x > 0
    torch.testing.assert_close(out[pos], x[pos])
    slope = out[~pos] / x[~pos]
    assert slope.min() >= 0.1 - 1e-6 and slope.max() <= 0.3 + 1e-6
    assert slope.std() > 0.03  # really random, not one slope
    torch.testing.assert_close(g[~pos], slope)  # the gradient is the slope drawn
    torch.testing.assert_close(g[pos], torch.ones(int(pos.sum())))
    # The same seed draws the same slopes.
    torch.manual_seed(5)
    a = F.rrelu(x.to("neuron"), training=True).cpu()
    torch.manual_seed(5)
    b = F.rrelu(x.to("neuron"), training=True).cpu()
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert_no_fallbacks()


def test_glu_odd_dimension_raises():
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        F.glu(torch.ones(3, 5).to("neuron"), dim=1)


def test_addr_rounds_once_and_follows_beta_rules():
    # One fused kernel: bfloat16 rounds once, so the result is within half
    # an ulp-ish of the exact value, which the CPU's four roundings are not.
    g = torch.Generator().manual_seed(0)
    s, a, b = (torch.randn(*sh, generator=g) for sh in ((5, 10), (5,), (10,)))
    exact = 0.6 * s.double() + 0.2 * torch.outer(a.double(), b.double())
    for dt, tol in ((torch.float32, 1e-6), (torch.bfloat16, 2 ** -8)):
        got = torch.addr(s.to(dt).neuron(), a.to(dt).neuron(), b.to(dt).neuron(), beta=0.6, alpha=0.2).cpu()
        ref = 0.6 * s.to(dt).double() + 0.2 * torch.outer(a.to(dt).double(), b.to(dt).double())
        torch.testing.assert_close(got.double(), ref, rtol=tol, atol=tol)
    # beta = 0 ignores self, NaN included; broadcasting self; integers; bool.
    nan = torch.full((5, 10), float("nan"))
    torch.testing.assert_close(torch.addr(nan.neuron(), a.neuron(), b.neuron(), beta=0).cpu(), torch.outer(a, b))
    torch.testing.assert_close(torch.addr(s[0].neuron(), a.neuron(), b.neuron()).cpu(), torch.addr(s[0], a, b))
    i1, i2 = torch.arange(4), torch.arange(3)
    assert torch.equal(torch.addr(torch.ones(4, 3, dtype=torch.long).neuron(), i1.neuron(), i2.neuron(), beta=2,
                                  alpha=3).cpu(), torch.addr(torch.ones(4, 3, dtype=torch.long), i1, i2, beta=2, alpha=3))
    bb = torch.tensor([True, False])
    assert torch.equal(torch.addr(torch.zeros(2, 2, dtype=torch.bool).neuron(), bb.neuron(), bb.neuron()).cpu(),
                       torch.addr(torch.zeros(2, 2, dtype=torch.bool), bb, bb))
    with pytest.raises(RuntimeError, match="must not be a floating point"):
        torch.addr(torch.ones(4, 3, dtype=torch.long).neuron(), i1.neuron(), i2.neuron(), beta=0.5)
    with pytest.raises(RuntimeError, match="1-D argument vec1"):
        torch.addr(s.neuron(), s.neuron(), b.neuron())


def test_addr_float32_fuses_like_the_cpu_vector_body():
    # The CPU's vectorised addr is contracted to fma(alpha * vec1, vec2,
    # beta * self): bit for bit on rows of 32 (the vector body on AVX2 and
    # AVX-512), and an overflowing product beside an infinite self is inf,
    # not inf - inf = NaN.
    g = torch.Generator().manual_seed(3)
    for _ in range(20):
        s, a, b = torch.randn(5, 32, generator=g), torch.randn(5, generator=g), torch.randn(32, generator=g) * 1e38
        s[torch.rand(5, 32, generator=g) < 0.2] = float("inf")
        for beta, alpha in ((1, 1), (0.5, -2.0)):
            want = torch.addr(s, a, b, beta=beta, alpha=alpha)
            got = torch.addr(s.neuron(), a.neuron(), b.neuron(), beta=beta, alpha=alpha).cpu()
            torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    # alpha multiplies vec1 first, as the CPU: alpha = 0 or 0.25 keeps 3 * -3.4e38 from overflowing,
    # a NaN still propagates
    v1, v2 = torch.tensor([-1.0, 3.0]), torch.tensor([-3.4e38, 1.5, float("nan")])
    for beta, alpha in ((0.5, 0.0), (0.0, 0.0), (0.5, 0.25), (1.0, 1.0)):
        want = torch.addr(torch.full((2, 3), -2.0), v1, v2, beta=beta, alpha=alpha)
        got = torch.addr(torch.full((2, 3), -2.0).neuron(), v1.neuron(), v2.neuron(), beta=beta, alpha=alpha)
        torch.testing.assert_close(got.cpu(), want, equal_nan=True)
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_weight_norm_forward_backward_native(dtype, dim):
    # nn.utils.weight_norm goes through _weight_norm_interface (and its
    # backward) for dim 0 and the last dim; other dims use plain ops.
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(3, 5, 3).to(dtype)
    ref = torch.nn.utils.weight_norm(conv, dim=dim)
    dev = torch.nn.utils.weight_norm(torch.nn.Conv1d(3, 5, 3).to(dtype), dim=dim).to("neuron")
    dev.load_state_dict(ref.state_dict())
    x = rnd(2, 3, 7, seed=1).to(dtype)
    out_ref = ref(x)
    out_ref.float().square().sum().backward()
    out = dev(x.to("neuron"))
    out.float().square().sum().backward()
    assert_no_fallbacks()
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.cpu(), out_ref, **tol)
    for name in ("weight_g", "weight_v"):
        torch.testing.assert_close(getattr(dev, name).grad.cpu(), getattr(ref, name).grad, **tol)
        assert getattr(dev, name).grad.dtype == getattr(ref, name).grad.dtype


def test_weight_norm_interface_outputs_match_the_cpu():
    v, g = rnd(4, 3, 2, seed=2), rnd(4, 1, 1, seed=3)
    for dt in (torch.float32, torch.bfloat16):
        w, n = torch._weight_norm_interface(v.to(dt), g.to(dt), 0)
        wd, nd = torch._weight_norm_interface(v.to(dt).to("neuron"), g.to(dt).to("neuron"), 0)
        assert (wd.dtype, nd.dtype, wd.shape, nd.shape, wd.stride()) == (w.dtype, n.dtype, w.shape, n.shape, w.stride())
        torch.testing.assert_close(nd.cpu(), n, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.5])
def test_embedding_max_norm_renormalises_rows_natively(norm_type):
    torch.manual_seed(0)
    ref = torch.nn.Embedding(10, 4, max_norm=1.0, norm_type=norm_type)
    ref.weight.data.mul_(3)
    dev = torch.nn.Embedding(10, 4, max_norm=1.0, norm_type=norm_type).to("neuron")
    dev.load_state_dict(ref.state_dict())
    idx = torch.tensor([[1, 2, 1], [7, 2, 0]])
    out_ref = ref(idx)
    out = dev(idx.to("neuron"))
    assert_no_fallbacks()
    torch.testing.assert_close(out.cpu(), out_ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(dev.weight.detach().cpu(), ref.weight.detach(), rtol=1e-5, atol=1e-6)


# Losses of integer or bool inputs: the CPU's loss kernels have no such
# form (NotImplementedError '"mse_cpu" not implemented for \'Int\''); the
# device raises it at the op, not in a later mean.
@pytest.mark.parametrize("loss", [F.mse_loss, F.huber_loss, F.smooth_l1_loss, F.binary_cross_entropy],
                         ids=["mse", "huber", "smooth_l1", "bce"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.bool], ids=str)
def test_losses_of_integer_inputs_raise_like_the_cpu(loss, dtype):
    x = torch.ones(3, 4, dtype=dtype)
    raises_like_cpu(lambda d: loss(x.to(d), x.to(d)), NotImplementedError)
    assert_no_fallbacks()


# signbit's meta refuses complex before anything looks at the output.
@pytest.mark.parametrize("n", [0, 2])
def test_signbit_refuses_complex_like_the_cpu(n):
    x = torch.ones(n, dtype=torch.complex64)
    raises_like_cpu(lambda d: torch.signbit(x.to(d)), NotImplementedError)
    raises_like_cpu(lambda d: torch.signbit(x.to(d), out=torch.empty(n, dtype=torch.complex64, device=d)),
                    NotImplementedError)
    assert_no_fallbacks()



# F.mse_loss/huber_loss/smooth_l1_loss/l1_loss with a 0-d CPU target: F.*
# broadcasts it to the input's shape first (a CPU tensor with zero strides),
# which the CPU computes as a value; neuron reads that one element, forward
# and backward, with the CPU's dtype. (l1_loss is ATen's composite
# (input - target).abs(): the binary ops take such an operand.)
@pytest.mark.parametrize("fn", [F.mse_loss, F.huber_loss, F.smooth_l1_loss, F.l1_loss,
                                lambda a, b, reduction: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.0)],
                         ids=["mse", "huber", "smooth_l1", "l1", "smooth_l1_beta0"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_pointwise_loss_with_a_0d_cpu_target(fn, reduction):
    got = {}
    for dev in ("cpu", "neuron"):
        x = torch.tensor([[0.5, -1.0, 2.0], [3.0, 0.0, -0.5]]).to(dev).requires_grad_()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = fn(x, torch.tensor(0.25), reduction=reduction)
        y.sum().backward()
        got[dev] = (y.detach().cpu(), x.grad.cpu())
    for a, b in zip(got["neuron"], got["cpu"]):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b)
    assert_no_fallbacks()


# mse_loss reads both operands in the promoted dtype, as the CPU's iterator
# does: a bool input beside a float16 target is a number, not a bool to
# subtract; an empty input with a 0-d CPU target is the empty loss.
def test_mse_loss_of_a_bool_input_and_an_empty_input():
    x, t = torch.tensor([True, False, True]), torch.tensor([0.5, 1.0, 2.0], dtype=torch.float16)
    for reduction in ("none", "sum"):
        want = F.mse_loss(x, t, reduction=reduction)
        got = F.mse_loss(x.neuron(), t.neuron(), reduction=reduction)
        assert got.dtype == want.dtype and torch.equal(got.cpu(), want)
    want = F.smooth_l1_loss(torch.ones(0, 1), torch.tensor(0.5), reduction="sum")
    assert torch.equal(F.smooth_l1_loss(torch.ones(0, 1).neuron(), torch.tensor(0.5), reduction="sum").cpu(), want)
    want = F.l1_loss(torch.ones(3, 0), torch.tensor(0.5))  # NaN, the mean of nothing
    got = F.l1_loss(torch.ones(3, 0).neuron(), torch.tensor(0.5)).cpu()
    assert got.isnan() and want.isnan()
    assert_no_fallbacks()


# hardshrink/softshrink/prelu and nll_loss of integer or bool inputs: the
# CPU's kernels dispatch on floating dtypes only, NotImplementedError at the
# op (neuron's kernels would refuse them only at synchronisation).
@pytest.mark.parametrize("dtype", [torch.int16, torch.int64, torch.uint8, torch.bool])
@pytest.mark.parametrize("name,call", [
    ("hardshrink", lambda x, d: F.hardshrink(x)),
    ("softshrink", lambda x, d: F.softshrink(x)),
    ("prelu", lambda x, d: F.prelu(x, torch.ones(1, dtype=x.dtype, device=d))),
    ("nll_loss", lambda x, d: F.nll_loss(x, torch.tensor([0, 1], device=d))),
    ("glu", lambda x, d: F.glu(x, 0)),
])
def test_float_only_kernels_refuse_integers_at_the_op(dtype, name, call):
    x = torch.ones(2, 3, dtype=dtype)
    raises_like_cpu(lambda d: call(x.to(d), d), NotImplementedError)
    assert_no_fallbacks()


# angle with out=: a complex input's angle goes to any real out= it can be
# cast to and to a complex one (as the real part), as ATen's
# unary_op_impl_with_complex_to_float_out; an integer out= is refused.
@pytest.mark.parametrize("x", [torch.tensor([1.0, -2.0]), torch.tensor([1 + 1j, -2 - 0.5j])])
@pytest.mark.parametrize("out_dtype", [torch.complex64, torch.complex128, torch.bfloat16, torch.float64, torch.int32])
def test_angle_out_dtypes_like_the_cpu(x, out_dtype):
    call = lambda d: torch.angle(x.to(d), out=torch.empty(0, dtype=out_dtype, device=d))  # noqa: E731
    if out_dtype == torch.int32:
        raises_like_cpu(call, RuntimeError)
    else:
        want, got = call("cpu"), call("neuron").cpu()
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, atol=1e-2, rtol=1e-2)
    assert_no_fallbacks()


# Huber and binary cross-entropy with input and target of different float
# dtypes: the CPU's huber_loss computes in the promoted dtype into the
# input's, its backward and binary_cross_entropy require one dtype
# (RuntimeError "Found dtype Float but expected Half"), at the op.
@pytest.mark.parametrize("da,db", [(torch.float16, torch.float32), (torch.float32, torch.float64),
                                   (torch.float32, torch.bfloat16)], ids=str)
def test_mixed_dtype_huber_and_bce_like_the_cpu(da, db):
    x, t = rnd(2, 3).to(da), rnd(2, 3, seed=1).to(db)
    for reduction in ("none", "mean"):
        want = F.huber_loss(x, t, reduction=reduction)
        got = F.huber_loss(x.neuron(), t.neuron(), reduction=reduction)
        assert got.dtype == want.dtype == da
        torch.testing.assert_close(got.cpu(), want, **tol_kw(TOL_ROUNDED_ONCE, da, (0, 0)))
    raises_like_cpu(lambda d: F.huber_loss(x.to(d).requires_grad_(), t.to(d)).backward(), RuntimeError)
    p, y = x.sigmoid(), t.sigmoid()
    raises_like_cpu(lambda d: F.binary_cross_entropy(p.to(d), y.to(d)), RuntimeError)
    assert_no_fallbacks()


# nan_to_num of complex tensors: the real and imaginary parts are replaced
# independently, with the limits of their own real dtype (functional,
# in-place and out=).
def test_nan_to_num_complex():
    nan, inf = float("nan"), float("inf")
    z = torch.tensor([complex(nan, inf), complex(-inf, 1.0), complex(2.0, -inf), complex(nan, nan)])
    for kw in ({}, {"nan": 1.0, "posinf": 2.0, "neginf": -3.0}):
        want = torch.nan_to_num(z, **kw)
        assert torch.equal(torch.nan_to_num(z.neuron(), **kw).cpu(), want)
        w = z.neuron()
        w.nan_to_num_(**kw)
        assert torch.equal(w.cpu(), want)
        out = torch.empty(4, dtype=torch.complex64, device="neuron")
        torch.nan_to_num(z.neuron(), out=out, **kw)
        assert torch.equal(out.cpu(), want)
    assert_no_fallbacks()


# An integer input beside a float target: huber_loss's iterator writes into
# the input's dtype and refuses the float result first (RuntimeError), empty
# or not.
@pytest.mark.parametrize("n", [0, 3])
def test_huber_integer_input_float_target_like_the_cpu(n):
    raises_like_cpu(lambda d: F.huber_loss(torch.ones(n, dtype=torch.int32, device=d), torch.ones(n, device=d)),
                    RuntimeError)


# threshold dispatches on the result's dtype (no bool, no complex, empty
# or not) and, like the CPU's iterator, does not refuse an in-place call on
# an expanded tensor; nan_to_num of an integer or bool tensor is a copy
# (in place: nothing to do, so an expanded one is fine too), and its out=
# must have the input's dtype; glu has no complex form.
@pytest.mark.parametrize("case", [
    ("threshold bool", lambda d: F.threshold(torch.tensor([True, False], device=d), 0.0, 2.0)),
    ("threshold_ bool empty", lambda d: F.threshold_(torch.empty(0, dtype=torch.bool, device=d), 0, 1)),
    ("threshold complex", lambda d: F.threshold(torch.ones(3, dtype=torch.complex64, device=d), 0.0, 2.0)),
    ("threshold out of another dtype", lambda d: torch.threshold(torch.ones(3, device=d), 0.0, 2.0,
                                                                 out=torch.empty(3, dtype=torch.bool, device=d))),
    ("glu complex", lambda d: F.glu(torch.ones(4, dtype=torch.complex64, device=d), 0)),
    ("glu complex empty", lambda d: F.glu(torch.ones(0, 2, dtype=torch.complex64, device=d), 1)),
    ("glu_backward complex", lambda d: torch.ops.aten.glu_backward(torch.ones(2, dtype=torch.complex64, device=d),
                                                                   torch.ones(4, dtype=torch.complex64, device=d), 0)),
    ("nan_to_num int out float", lambda d: torch.nan_to_num(torch.ones(3, dtype=torch.int64, device=d),
                                                            out=torch.empty(3, device=d))),
    ("nan_to_num complex out float", lambda d: torch.nan_to_num(torch.ones(3, dtype=torch.complex64, device=d),
                                                                out=torch.empty(3, device=d))),
], ids=lambda c: c[0])
def test_threshold_glu_nan_to_num_refuse_like_the_cpu(case):
    cpu, dev = raises_like_cpu(case[1])
    assert str(dev).split(" (in the neuron")[0].split("\n")[0] == str(cpu).split("\n")[0]
    assert_no_fallbacks()


@pytest.mark.parametrize("dt", [torch.int64, torch.uint8, torch.bool, torch.float32])
def test_inplace_threshold_and_integer_nan_to_num_of_an_expanded_tensor(dt):
    base = torch.tensor([[1, 0, 3]]).to(dt)
    if dt.is_floating_point:  # the iterator refuses the overlap there
        raises_like_cpu(lambda d: base.to(d).expand(3, 3).nan_to_num_(), RuntimeError)
    else:
        want = base.clone().expand(3, 3).nan_to_num_()
        got = base.neuron().expand(3, 3).nan_to_num_()
        assert torch.equal(got.cpu(), want)
    if dt in (torch.int64, torch.float32):
        want = F.threshold_(base.clone().expand(3, 3), 0, 7)
        got = F.threshold_(base.neuron().expand(3, 3), 0, 7)
        assert torch.equal(got.cpu(), want)
    assert_no_fallbacks()
