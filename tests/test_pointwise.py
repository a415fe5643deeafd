"""Native kernels against PyTorch on the CPU: semantics (broadcasting, type
promotion, out=, in-place, views) come from PyTorch; compute from the runtime."""
import warnings

import pytest
import torch
import torch.nn.functional as F

from helpers import assert_no_fallbacks, close


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary_broadcast(op, dtype):
    a = torch.randn(4, 1, 5).to(dtype)
    b = torch.randn(3, 1).to(dtype) + 3
    f = getattr(torch, op)
    close(f(a.neuron(), b.neuron()), f(a, b), dtype)
    assert_no_fallbacks()


def test_type_promotion_and_scalars():
    i = torch.arange(6).view(2, 3)
    f = torch.randn(3)
    for expr in (lambda x, y: x + y, lambda x, y: x * 2.5, lambda x, y: x / 2, lambda x, y: x - y * 3,
                 lambda x, y: 2 ** y, lambda x, y: x ** 2, lambda x, y: x // 2, lambda x, y: x % 4,
                 lambda x, y: (x > 2) & (x < 5)):
        ref = expr(i, f)
        got = expr(i.neuron(), f.neuron())
        assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
        close(got, ref)
    assert_no_fallbacks()


def test_alpha_inplace_and_out():
    a, b = torch.randn(5, 5), torch.randn(5)
    da, db = a.neuron(), b.neuron()
    close(torch.add(da, db, alpha=0.5), torch.add(a, b, alpha=0.5))
    da.mul_(db)
    a.mul_(b)
    close(da, a)
    out = torch.empty(5, 5, device="neuron")
    torch.sub(da, db, alpha=2, out=out)
    close(out, torch.sub(a, b, alpha=2))
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.arange(3).neuron().div_(2)
    assert_no_fallbacks()


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "abs",
                                  "neg", "erf", "floor", "ceil", "round", "reciprocal", "log1p", "expm1"])
def test_unary_math(name):
    x = torch.randn(257) * 2
    if name in ("log", "sqrt", "rsqrt", "log1p"):
        x = x.abs() + 0.1
    f = getattr(torch, name)
    close(f(x.neuron()), f(x))
    assert_no_fallbacks()


@pytest.mark.parametrize("fn", [F.gelu, lambda x: F.gelu(x, approximate="tanh"), F.silu, F.mish, F.softplus,
                                F.elu, F.leaky_relu, F.hardswish, F.hardsigmoid, F.hardtanh, torch.tanh,
                                torch.sigmoid, F.relu])
def test_activation_forward_backward(fn):
    x = torch.randn(64, 17, requires_grad=True)
    xd = x.detach().neuron().requires_grad_()
    y, yd = fn(x), fn(xd)
    g = torch.randn_like(y)
    y.backward(g)
    yd.backward(g.neuron())
    close(yd, y)
    close(xd.grad, x.grad)
    assert_no_fallbacks()


def test_where_clamp_lerp_addcmul():
    a, b, c = torch.randn(3, 4), torch.randn(3, 4), torch.rand(3, 4)
    da, db, dc = a.neuron(), b.neuron(), c.neuron()
    close(torch.where(da > 0, da, db), torch.where(a > 0, a, b))
    close(torch.clamp(da, -0.5, 0.5), torch.clamp(a, -0.5, 0.5))
    close(torch.clamp(da, min=0.1), torch.clamp(a, min=0.1))
    close(torch.lerp(da, db, 0.3), torch.lerp(a, b, 0.3))
    close(torch.lerp(da, db, dc), torch.lerp(a, b, c))
    close(torch.addcmul(da, db, dc, value=2), torch.addcmul(a, b, c, value=2))
    close(torch.addcdiv(da, db, dc + 1, value=-1), torch.addcdiv(a, b, c + 1, value=-1))
    assert_no_fallbacks()


def test_comparisons_and_logical():
    a, b = torch.randn(10), torch.randn(10)
    for op in (torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge, torch.maximum, torch.minimum):
        got = op(a.neuron(), b.neuron())
        assert torch.equal(got.cpu(), op(a, b))
    assert torch.equal((a.neuron() > 0.5).cpu(), a > 0.5)
    assert torch.equal(torch.logical_and(a.neuron() > 0, b.neuron() > 0).cpu(), (a > 0) & (b > 0))
    assert torch.equal(torch.isnan(torch.tensor([1.0, float("nan")]).neuron()).cpu(), torch.tensor([False, True]))
    assert_no_fallbacks()


@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), ((0, 2), False), (-1, True)])
def test_reductions(dim, keepdim):
    x = torch.randn(6, 7, 8)
    d = x.neuron()
    kw = {} if dim is None else dict(dim=dim, keepdim=keepdim)
    close(d.sum(**kw), x.sum(**kw), atol=1e-4)
    close(d.mean(**kw), x.mean(**kw))
    close(d.var(**kw), x.var(**kw), atol=1e-4)
    close(d.std(**kw, correction=0), x.std(**kw, correction=0), atol=1e-4)
    close(d.amax(**({} if dim is None else kw)), x.amax(**({} if dim is None else kw)))
    close(torch.linalg.vector_norm(d, **kw), torch.linalg.vector_norm(x, **kw), atol=1e-4)
    assert_no_fallbacks()


def test_reductions_indices_and_bool():
    x = torch.randn(5, 9)
    d = x.neuron()
    v, i = d.max(dim=1)
    rv, ri = x.max(dim=1)
    close(v, rv)
    assert torch.equal(i.cpu(), ri)
    assert torch.equal(d.argmin(dim=0).cpu(), x.argmin(dim=0))
    assert d.argmax().item() == x.argmax().item()
    assert torch.equal((d > 0).all(dim=1).cpu(), (x > 0).all(dim=1))
    assert (d > -100).all().item() is True
    assert torch.equal(torch.arange(10).neuron().sum().cpu(), torch.tensor(45))
    assert torch.arange(10).neuron().sum().dtype == torch.int64
    close(x.neuron().cumsum(1), x.cumsum(1), atol=1e-5)
    assert torch.equal(torch.zeros(3, 0).neuron().sum(1).cpu(), torch.zeros(3))
    assert_no_fallbacks()


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_family(dim):
    x = torch.randn(7, 11, 5, requires_grad=True)
    xd = x.detach().neuron().requires_grad_()
    for f in (F.softmax, F.log_softmax):
        y, yd = f(x, dim=dim), f(xd, dim=dim)
        g = torch.randn_like(y)
        (gx,) = torch.autograd.grad(y, x, g)
        (gxd,) = torch.autograd.grad(yd, xd, g.neuron())
        close(yd, y)
        close(gxd, gx)
    assert_no_fallbacks()


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (17, 33, 65), (128, 64, 256)])
def test_matmul_family(m, k, n):
    a, b, bias = torch.randn(m, k), torch.randn(k, n), torch.randn(n)
    da, db, dbias = a.neuron(), b.neuron(), bias.neuron()
    close(da @ db, a @ b, atol=1e-4, rtol=1e-4)
    close(torch.addmm(dbias, da, db, beta=0.5, alpha=2), torch.addmm(bias, a, b, beta=0.5, alpha=2), atol=1e-4,
          rtol=1e-4)
    close(db.t() @ da.t(), b.t() @ a.t(), atol=1e-4, rtol=1e-4)
    ba, bb = torch.randn(3, m, k), torch.randn(3, k, n)
    close(torch.bmm(ba.neuron(), bb.neuron()), torch.bmm(ba, bb), atol=1e-4, rtol=1e-4)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        da @ torch.randn(k + 1, 2).neuron()
    assert_no_fallbacks()


def test_mlp_forward_native():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    x = torch.randn(16, 32)
    ref = model(x)
    model.neuron()
    import torch_neuronx
    torch_neuronx.clear_op_tracking()
    out = model(x.neuron())
    close(out, ref, atol=1e-5)
    assert_no_fallbacks()
    ops = torch_neuronx.get_executed_ops()
    assert ops.get("aten::addmm", 0) == 2
    assert ops.get("aten::relu", 0) == 1


def test_mlp_training_step_native():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    dev = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    dev.load_state_dict(model.state_dict())
    dev.neuron()
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    for m, xx, yy in ((model, x, y), (dev, x.neuron(), y.neuron())):
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        for _ in range(3):
            loss = F.mse_loss(m(xx), yy)
            opt.zero_grad()
            loss.backward()
            opt.step()
    for p, q in zip(model.parameters(), dev.parameters()):
        close(q, p.detach(), atol=1e-5)


def test_mixing_devices_is_an_error():
    a = torch.randn(3).neuron()
    with pytest.raises(RuntimeError, match="same device"):
        a + torch.randn(3)
    with pytest.raises(RuntimeError, match="same device"):
        a @ torch.randn(3, 3)  # noqa: B018
    # A CPU scalar (0-dim) is allowed, as with CUDA.
    close(a + torch.tensor(2.0), a.cpu() + 2)


def test_float64_warns_once_and_keeps_dtype():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = x.neuron() * 3
    assert y.dtype == torch.float64
    assert torch.equal(y.cpu(), x * 3)


def test_cat_flip_roll_stack():
    x = torch.randn(3, 4, 5)
    d = x.neuron()
    assert torch.equal(torch.flip(d, [0, 2]).cpu(), torch.flip(x, [0, 2]))
    assert torch.equal(torch.flip(d.transpose(0, 2), [1]).cpu(), torch.flip(x.transpose(0, 2), [1]))
    assert torch.equal(torch.roll(d, 2, 1).cpu(), torch.roll(x, 2, 1))
    assert torch.equal(torch.roll(d, (-1, 7), (0, 2)).cpu(), torch.roll(x, (-1, 7), (0, 2)))
    assert torch.equal(torch.roll(d, 3).cpu(), torch.roll(x, 3))
    assert torch.equal(torch.cat([d, d[:, :2]], 1).cpu(), torch.cat([x, x[:, :2]], 1))
    assert torch.equal(torch.stack([d, d], dim=2).cpu(), torch.stack([x, x], dim=2))
    mixed = torch.cat([torch.ones(2, dtype=torch.int32).neuron(), torch.ones(2).neuron(), torch.empty(0).neuron()])
    assert mixed.dtype == torch.float32 and mixed.tolist() == [1.0] * 4
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        torch.cat([d, torch.randn(2, 3, 5).neuron()], 1)
    assert_no_fallbacks()


def test_composite_natives():
    x, y = torch.randn(5), torch.randn(5)
    M = torch.randn(3, 5)
    d = lambda t: t.neuron()  # noqa: E731
    assert torch.equal(torch.sgn(d(x)).cpu(), torch.sgn(x))
    close(torch.dot(d(x), d(y)), torch.dot(x, y), atol=1e-5)
    close(torch.addmv(d(torch.randn(3)), d(M), d(x), beta=0), M @ x, atol=1e-5)
    s, idx, src = torch.zeros(4, 3), torch.tensor([0, 2, 0]), torch.ones(3, 3)
    assert torch.equal(torch.index_add(d(s), 0, d(idx), d(src), alpha=2).cpu(), torch.index_add(s, 0, idx, src, alpha=2))
    assert torch.equal(d(s).index_fill_(1, d(torch.tensor([1])), 5).cpu(),
                       s.clone().index_fill_(1, torch.tensor([1]), 5))
    v, m = torch.var_mean(d(M), 1)
    close(v, torch.var(M, 1), atol=1e-5)
    close(m, M.mean(1), atol=1e-6)
    inf = torch.tensor([float("inf"), -float("inf"), 1.0])
    close(torch.logaddexp(d(inf), d(inf)), torch.logaddexp(inf, inf))
    close(torch.logaddexp(d(x), d(y)), torch.logaddexp(x, y))
    assert torch.equal(d(x), d(x)) and not torch.equal(d(x), d(y))
    assert torch.nansum(d(torch.tensor([1.0, float("nan"), 2.0]))).item() == 3.0
    close(torch.norm(d(M), dim=1), torch.norm(M, dim=1))
    close(torch.rsub(d(x), d(y), alpha=2), torch.rsub(x, y, alpha=2))
    close(torch.clamp(d(M), min=d(torch.zeros(5))), torch.clamp(M, min=torch.zeros(5)))
    assert_no_fallbacks()


@pytest.mark.parametrize("opt_name,kw", [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
                                         ("Adam", dict(lr=1e-2, weight_decay=0.01)),
                                         ("AdamW", dict(lr=1e-2, weight_decay=0.1, amsgrad=True))])
@pytest.mark.parametrize("impl", ["foreach", "fused"])
def test_optimizers_native(opt_name, kw, impl):
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    dev = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    dev.load_state_dict(ref.state_dict())
    dev.neuron()
    x, y = torch.randn(16, 6), torch.randn(16, 2)
    for m, xx, yy in ((ref, x, y), (dev, x.neuron(), y.neuron())):
        opt = getattr(torch.optim, opt_name)(m.parameters(), **kw, **{impl: True})
        for _ in range(4):
            loss = F.mse_loss(m(xx), yy)
            opt.zero_grad()
            loss.backward()
            opt.step()
    for p, q in zip(ref.parameters(), dev.parameters()):
        close(q, p.detach(), atol=1e-5, rtol=1e-4)
    assert_no_fallbacks()
    # clip_grad_norm_ runs natively too
    torch.nn.utils.clip_grad_norm_(dev.parameters(), 0.5)
    assert_no_fallbacks()


@pytest.mark.parametrize("pad", [(1, 2), (1, 1, 2, 0), (-1, 2, 0, -2), (0, 0, 0, 0, 1, 1), (2, 2, 2, 2, 2, 2, 1, 1)])
def test_constant_pad(pad):
    x = torch.randn(2, 3, 4, 5, requires_grad=True)
    xd = x.detach().neuron().requires_grad_()
    y, yd = F.pad(x, pad, value=0.5), F.pad(xd, pad, value=0.5)
    assert torch.equal(yd.cpu(), y.detach())
    y.pow(2).sum().backward()
    yd.pow(2).sum().backward()
    close(xd.grad, x.grad)
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
    assert_no_fallbacks()


def test_bf16_index_put_accumulates_in_float32():
    # 200 duplicates of one index: a bfloat16 running sum would stall once
    # the total's ulp exceeds the addends; float32 accumulation does not.
    vals = torch.full((200,), 0.01, dtype=torch.bfloat16)
    idx = torch.zeros(200, dtype=torch.long)
    got = torch.zeros(3, dtype=torch.bfloat16).neuron().index_put_((idx.neuron(),), vals.neuron(), accumulate=True)
    exact = float(vals.double().sum())
    assert abs(float(got.cpu()[0]) - exact) <= exact * 2 ** -8
    assert_no_fallbacks()


def test_cross_gcd_shifts_bincount_tri_indices_scatter_reduce():
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(4, 3, generator=g), torch.randn(1, 3, generator=g)
    torch.testing.assert_close(torch.linalg.cross(a.neuron(), b.neuron()).cpu(), torch.linalg.cross(a, b))
    torch.testing.assert_close(torch.cross(a.t().neuron(), a.t().neuron() * 2, dim=0).cpu(),
                               torch.cross(a.t(), a.t() * 2, dim=0))
    with pytest.raises(RuntimeError, match="must have length 3"):
        torch.linalg.cross(torch.ones(2, 4).neuron(), torch.ones(2, 4).neuron())
    x = torch.tensor([0, -4, 6, -7, 12, 2**62])
    y = torch.tensor([0, 6, -4, 0, 18, 6])
    assert torch.equal(torch.gcd(x.neuron(), y.neuron()).cpu(), torch.gcd(x, y))
    assert torch.equal(torch.lcm(x.neuron(), y.neuron()).cpu(), torch.lcm(x, y))
    s = torch.tensor([0, 1, 5, 63, 64, -1])
    v = torch.tensor([3, -3, 7, 1, 1, 5])
    assert torch.equal(torch.bitwise_left_shift(v.neuron(), s.neuron()).cpu(), torch.bitwise_left_shift(v, s))
    assert torch.equal(torch.bitwise_right_shift(v.neuron(), s.neuron()).cpu(), torch.bitwise_right_shift(v, s))
    i = torch.tensor([0, 1, 1, 3, 7, 3])
    w = torch.rand(6, generator=g)
    assert torch.equal(torch.bincount(i.neuron()).cpu(), torch.bincount(i))
    assert torch.equal(torch.bincount(i.neuron(), minlength=10).cpu(), torch.bincount(i, minlength=10))
    torch.testing.assert_close(torch.bincount(i.neuron(), w.neuron()).cpu(), torch.bincount(i, w))
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.bincount(torch.tensor([1, -1]).neuron())
    for r, c, off in ((4, 3, 0), (3, 5, -1), (3, 5, 2), (0, 3, 0)):
        assert torch.equal(torch.tril_indices(r, c, off, device="neuron").cpu(), torch.tril_indices(r, c, off))
        assert torch.equal(torch.triu_indices(r, c, off, device="neuron").cpu(), torch.triu_indices(r, c, off))
    base = torch.ones(3, 4, dtype=torch.long)
    idx = torch.tensor([[0, 1, 2, 0], [2, 0, 0, 1]])
    src = torch.arange(2, 10).view(2, 4)
    for red in ("add", "multiply"):
        assert torch.equal(base.neuron().scatter(0, idx.neuron(), src.neuron(), reduce=red).cpu(),
                           base.scatter(0, idx, src, reduce=red))
        assert torch.equal(base.neuron().scatter_(0, idx.neuron(), 3, reduce=red).cpu(),
                           base.clone().scatter_(0, idx, 3, reduce=red))
    assert_no_fallbacks()


def test_integer_linspace_logspace_convert_endpoints_first():
    for args in ((4.3, 0, 50), (-2.7, 9.9, 7), (0, 10, 11)):
        assert torch.equal(torch.linspace(*args, dtype=torch.int64, device="neuron").cpu(),
                           torch.linspace(*args, dtype=torch.int64))
    assert torch.equal(torch.logspace(2, 1.2, 4, dtype=torch.int64, device="neuron").cpu(),
                       torch.logspace(2, 1.2, 4, dtype=torch.int64))
    assert_no_fallbacks()
