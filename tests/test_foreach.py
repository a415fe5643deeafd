"""FOREACH family: torch._foreach_* on neuron in one launch per list.

Every op and overload (Scalar, List with alpha, ScalarList, Tensor, in-place
and functional) on lists of mixed sizes (empty and one-element tensors
included), in float32, bfloat16 and float16, against

  - the CPU's torch._foreach_* (TOL_POINTWISE for the dtype), and
  - the single-tensor ops on the device, one per tensor (what ATen's slow
    path runs): bit for bit, since the kernels compute the same expressions;

then the fallback for lists the one-launch path cannot take (non-contiguous
tensors, mixed dtypes, integer lists, CPU 0-dim operands), the launch count
(one device task per call on a uniform list), norms, errors, torch.compile,
and AdamW / SGD(momentum) / clip_grad_norm_ with foreach=True against the
CPU over 3 steps.
"""
import collections
import math

import pytest
import torch
import torch.nn as nn

import torch_neuronx
from helpers import TOL_POINTWISE, assert_no_fallbacks, tol_kw

DEV = "neuron"
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
SIZES = [(3, 5), (0,), (1,), (257,), (20000,), (2, 0, 3), (33, 65)]


def make_list(dtype, lo=-3.0, hi=3.0, seed=0, sizes=SIZES):
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(s, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype) for s in sizes]


def to_dev(ts):
    return [t.to(DEV) for t in ts]


def bitwise(dev, ref):
    """Device results equal (NaN equal to NaN, dtypes and shapes too)."""
    assert len(dev) == len(ref)
    for a, b in zip(dev, ref):
        assert a.device.type == DEV and b.device.type == DEV
        torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0, equal_nan=True)


def close_to_cpu(dev, ref, dtype):
    assert len(dev) == len(ref)
    for a, b in zip(dev, ref):
        assert a.device.type == DEV
        torch.testing.assert_close(a.cpu(), b, equal_nan=True, **tol_kw(TOL_POINTWISE, dtype))


def kernels(prof):
    return collections.Counter(a.name for a in prof.activities() if a.kind == "kernel")


# ---- the op table ------------------------------------------------------------------------
# A case: its foreach op, the value ranges of its input lists, the extra
# arguments (a function of the list length n and the device the Tensor
# overloads put their 0-dim tensor on), and the single-tensor op the slow
# path runs for element i.

SCALAR = 0.3  # not a bfloat16/float16 value: the kernels must not round it to the list's dtype
ALPHA = 0.7


def scalars(n):
    return [0.1 * (i + 1) - 0.35 for i in range(n)]


Case = collections.namedtuple("Case", "id op ranges extra single")
CASES = [
    Case("add.Scalar", "add", [(-3, 3)], lambda n, d: ((SCALAR,), {}), lambda i, x: x.add(SCALAR)),
    Case("add.List", "add", [(-3, 3)] * 2, lambda n, d: ((), dict(alpha=ALPHA)), lambda i, x, y: x.add(y, alpha=ALPHA)),
    Case("add.ScalarList", "add", [(-3, 3)], lambda n, d: ((scalars(n),), {}), lambda i, x: x.add(scalars(99)[i])),
    Case("add.Tensor", "add", [(-3, 3)], lambda n, d: ((torch.tensor(0.37, device=d),), dict(alpha=ALPHA)),
         lambda i, x: x.add(torch.tensor(0.37, device=x.device), alpha=ALPHA)),
    Case("sub.Scalar", "sub", [(-3, 3)], lambda n, d: ((SCALAR,), {}), lambda i, x: x.sub(SCALAR)),
    Case("sub.List", "sub", [(-3, 3)] * 2, lambda n, d: ((), dict(alpha=ALPHA)), lambda i, x, y: x.sub(y, alpha=ALPHA)),
    Case("sub.ScalarList", "sub", [(-3, 3)], lambda n, d: ((scalars(n),), {}), lambda i, x: x.sub(scalars(99)[i])),
    Case("mul.Scalar", "mul", [(-3, 3)], lambda n, d: ((SCALAR,), {}), lambda i, x: x.mul(SCALAR)),
    Case("mul.List", "mul", [(-3, 3)] * 2, lambda n, d: ((), {}), lambda i, x, y: x.mul(y)),
    Case("mul.ScalarList", "mul", [(-3, 3)], lambda n, d: ((scalars(n),), {}), lambda i, x: x.mul(scalars(99)[i])),
    Case("mul.Tensor", "mul", [(-3, 3)], lambda n, d: ((torch.tensor(0.37, device=d),), {}),
         lambda i, x: x.mul(torch.tensor(0.37, device=x.device))),
    Case("div.Scalar", "div", [(-3, 3)], lambda n, d: ((SCALAR,), {}), lambda i, x: x.div(SCALAR)),
    Case("div.List", "div", [(-3, 3), (0.5, 3)], lambda n, d: ((), {}), lambda i, x, y: x.div(y)),
    Case("div.ScalarList", "div", [(-3, 3)], lambda n, d: ((scalars(n),), {}), lambda i, x: x.div(scalars(99)[i])),
    Case("div.Tensor", "div", [(-3, 3)], lambda n, d: ((torch.tensor(0.37, device=d),), {}),
         lambda i, x: x.div(torch.tensor(0.37, device=x.device))),
    Case("maximum.Scalar", "maximum", [(-3, 3)], lambda n, d: ((SCALAR,), {}), lambda i, x: x.clamp_min(SCALAR)),
    Case("maximum.List", "maximum", [(-3, 3)] * 2, lambda n, d: ((), {}), lambda i, x, y: torch.maximum(x, y)),
    Case("maximum.ScalarList", "maximum", [(-3, 3)], lambda n, d: ((scalars(n),), {}),
         lambda i, x: x.clamp_min(scalars(99)[i])),
    Case("minimum.Scalar", "minimum", [(-3, 3)], lambda n, d: ((SCALAR,), {}), lambda i, x: x.clamp_max(SCALAR)),
    Case("minimum.List", "minimum", [(-3, 3)] * 2, lambda n, d: ((), {}), lambda i, x, y: torch.minimum(x, y)),
    Case("clamp_min.Scalar", "clamp_min", [(-3, 3)], lambda n, d: ((SCALAR,), {}), lambda i, x: x.clamp_min(SCALAR)),
    Case("clamp_min.List", "clamp_min", [(-3, 3)] * 2, lambda n, d: ((), {}), lambda i, x, y: torch.maximum(x, y)),
    Case("clamp_max.ScalarList", "clamp_max", [(-3, 3)], lambda n, d: ((scalars(n),), {}),
         lambda i, x: x.clamp_max(scalars(99)[i])),
    Case("clamp_max.List", "clamp_max", [(-3, 3)] * 2, lambda n, d: ((), {}), lambda i, x, y: torch.minimum(x, y)),
    Case("pow.List", "pow", [(0.2, 3), (-2, 2)], lambda n, d: ((), {}), lambda i, x, y: x.pow(y)),
    Case("pow.Scalar", "pow", [(0.2, 3)], lambda n, d: ((2.5,), {}), lambda i, x: x.pow(2.5)),
    Case("pow.Scalar2", "pow", [(-3, 3)], lambda n, d: ((2,), {}), lambda i, x: x.pow(2)),
    Case("pow.Scalar-0.5", "pow", [(0.2, 3)], lambda n, d: ((-0.5,), {}), lambda i, x: x.pow(-0.5)),
    Case("pow.ScalarList", "pow", [(0.2, 3)], lambda n, d: (([1.5, 3.0, 0.5, 2.0, -1.0, -2.0, 0.25][:n],), {}),
         lambda i, x: x.pow([1.5, 3.0, 0.5, 2.0, -1.0, -2.0, 0.25][i])),
    Case("addcmul.Scalar", "addcmul", [(-3, 3)] * 3, lambda n, d: ((), dict(value=SCALAR)),
         lambda i, x, y, z: x.addcmul(y, z, value=SCALAR)),
    Case("addcmul.ScalarList", "addcmul", [(-3, 3)] * 3, lambda n, d: ((scalars(n),), {}),
         lambda i, x, y, z: x.addcmul(y, z, value=scalars(99)[i])),
    Case("addcmul.Tensor", "addcmul", [(-3, 3)] * 3,
         lambda n, d: ((torch.tensor(scalars(n), dtype=torch.float64),), {}),
         lambda i, x, y, z: x.addcmul(y, z, value=scalars(99)[i])),
    Case("addcdiv.Scalar", "addcdiv", [(-3, 3), (-3, 3), (0.5, 3)], lambda n, d: ((), dict(value=SCALAR)),
         lambda i, x, y, z: x.addcdiv(y, z, value=SCALAR)),
    Case("addcdiv.ScalarList", "addcdiv", [(-3, 3), (-3, 3), (0.5, 3)], lambda n, d: ((scalars(n),), {}),
         lambda i, x, y, z: x.addcdiv(y, z, value=scalars(99)[i])),
    Case("addcdiv.Tensor", "addcdiv", [(-3, 3), (-3, 3), (0.5, 3)],
         lambda n, d: ((torch.tensor(scalars(n), dtype=torch.float32),), {}),
         lambda i, x, y, z: x.addcdiv(y, z, value=torch.tensor(scalars(99), dtype=torch.float32)[i].item())),
    Case("lerp.Scalar", "lerp", [(-3, 3)] * 2, lambda n, d: ((SCALAR,), {}), lambda i, x, y: x.lerp(y, SCALAR)),
    Case("lerp.Scalar1", "lerp", [(-3, 3)] * 2, lambda n, d: ((1.0,), {}), lambda i, x, y: x.lerp(y, 1.0)),
    Case("lerp.List", "lerp", [(-3, 3), (-3, 3), (-0.5, 1.5)], lambda n, d: ((), {}), lambda i, x, y, w: x.lerp(y, w)),
    Case("lerp.ScalarList", "lerp", [(-3, 3)] * 2, lambda n, d: ((scalars(n),), {}),
         lambda i, x, y: x.lerp(y, scalars(99)[i])),
    Case("sqrt", "sqrt", [(0, 9)], lambda n, d: ((), {}), lambda i, x: x.sqrt()),
    Case("neg", "neg", [(-3, 3)], lambda n, d: ((), {}), lambda i, x: x.neg()),
    Case("reciprocal", "reciprocal", [(0.3, 3)], lambda n, d: ((), {}), lambda i, x: x.reciprocal()),
    Case("abs", "abs", [(-3, 3)], lambda n, d: ((), {}), lambda i, x: x.abs()),
    Case("sign", "sign", [(-3, 3)], lambda n, d: ((), {}), lambda i, x: x.sign()),
    Case("exp", "exp", [(-10, 10)], lambda n, d: ((), {}), lambda i, x: x.exp()),
]

def inputs(case, dtype):
    return [make_list(dtype, lo, hi, seed=k) for k, (lo, hi) in enumerate(case.ranges)]


def run_foreach(case, lists, device, inplace):
    extra, kw = case.extra(len(lists[0]), device)
    if inplace:
        getattr(torch, f"_foreach_{case.op}_")(*lists, *extra, **kw)
        return lists[0]
    return getattr(torch, f"_foreach_{case.op}")(*lists, *extra, **kw)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("inplace", [False, True], ids=["functional", "inplace"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_op(case, inplace, dtype):
    cpu = inputs(case, dtype)
    dev = [to_dev(l) for l in cpu]
    single = [case.single(i, *[l[i] for l in dev]) for i in range(len(dev[0]))]
    got = run_foreach(case, dev, DEV, inplace)
    bitwise(got, single)
    want = run_foreach(case, [[t.clone() for t in l] for l in cpu], "cpu", inplace)
    close_to_cpu(got, want, dtype)
    assert all(g.dtype == dtype and g.shape == s for g, s in zip(got, SIZES))
    assert_no_fallbacks()


def test_pow_scalar_and_tensor():
    for dtype in DTYPES:
        cpu = make_list(dtype, -2, 2)
        dev = to_dev(cpu)
        got = torch._foreach_pow(1.7, dev)
        bitwise(got, [torch.pow(1.7, t) for t in dev])
        close_to_cpu(got, torch._foreach_pow(1.7, cpu), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_zero_and_copy(dtype):
    xs = to_dev(make_list(dtype))
    torch._foreach_zero_(xs)
    assert all((x.cpu() == 0).all() for x in xs)
    src = make_list(torch.float32, seed=3)
    dst = to_dev(make_list(dtype))
    torch._foreach_copy_(dst, to_dev(src))  # converts float32 -> dtype, rounding once
    for d, s in zip(dst, src):
        assert torch.equal(d.cpu(), s.to(dtype))
    same_dtype = to_dev(make_list(dtype, seed=4))
    torch._foreach_copy_(dst, same_dtype)
    bitwise(dst, same_dtype)
    ints = to_dev([torch.arange(n, dtype=torch.int64) for n in (0, 5, 300)])  # any real dtype: bits move
    torch._foreach_zero_(ints)
    assert all((t.cpu() == 0).all() for t in ints)
    assert_no_fallbacks()


# ---- norms ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("ord", [2, 1, 0, math.inf, -math.inf, 3, 0.5])
def test_norm(ord, dtype):
    sizes = SIZES if ord >= 0 and not math.isinf(ord) else [s for s in SIZES if math.prod(s) > 0]
    cpu = make_list(dtype, sizes=sizes)
    dev = to_dev(cpu)
    got = torch._foreach_norm(dev, ord)
    want = torch._foreach_norm(cpu, ord)
    single = [torch.linalg.vector_norm(t, ord) for t in dev]
    for g, w, s in zip(got, want, single):
        assert g.dtype == dtype and g.shape == ()
        torch.testing.assert_close(g.cpu(), w, **tol_kw(TOL_POINTWISE, dtype))
        # the CPU's _foreach_norm is a loop of vector_norm: float32 and 16-bit sums in float follow it bit
        # for bit, the fused float64 and 0/inf norms agree up to the last rounding
        exact = dtype != torch.float64 and ord not in (0, math.inf, -math.inf)
        torch.testing.assert_close(g.cpu(), s.cpu(), rtol=2e-7 if dtype == torch.float32 else 0, atol=0)
        if exact:
            torch.testing.assert_close(g.cpu(), w, rtol=0, atol=0)
    assert_no_fallbacks()


def test_norm_dtype_nan_and_empty():
    cpu = make_list(torch.bfloat16)
    dev = to_dev(cpu)
    got = torch._foreach_norm(dev, 2, dtype=torch.float32)
    want = torch._foreach_norm(cpu, 2, dtype=torch.float32)
    for g, w in zip(got, want):
        assert g.dtype == torch.float32
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-6)
    nan = to_dev([torch.tensor([1.0, float("nan"), 2.0]), torch.ones(3)])
    for ord in (2, 1, math.inf, -math.inf):
        n = torch._foreach_norm(nan, ord)
        assert n[0].isnan().item() and not n[1].isnan().item()
    # PyTorch refuses the inf norm of an empty tensor; so does the device (through the single-tensor op)
    with pytest.raises(RuntimeError, match="empty"):
        torch._foreach_norm(to_dev([torch.ones(2), torch.ones(0)]), math.inf)
    with pytest.raises(RuntimeError, match="empty"):
        torch._foreach_norm([torch.ones(2), torch.ones(0)], math.inf)


# ---- the fallback ---------------------------------------------------------------------------------


def test_non_contiguous_and_mixed_lists_fall_back_per_tensor():
    g = torch.Generator().manual_seed(1)
    cpu = [torch.randn(8, 5, generator=g).t(), torch.randn(30, generator=g)[::3], torch.randn(6, generator=g),
           torch.randn(4, generator=g).to(torch.bfloat16), torch.randn(7, generator=g)]
    other = [torch.randn(t.shape, generator=g).to(t.dtype) for t in cpu]
    dev, odev = to_dev(cpu), to_dev(other)
    dev[0] = cpu[0].t().contiguous().to(DEV).t()  # transposed on the device too
    dev[1] = cpu[1].clone().to(DEV)
    dev[1] = torch.randn(30).to(DEV)[::3].copy_(dev[1])  # a strided view
    assert not dev[0].is_contiguous() and not dev[1].is_contiguous()
    with torch_neuronx.profiler.profile(print_table=False, limits=False) as prof:
        torch._foreach_add_(dev, odev, alpha=0.5)
    ref = [c.add(o, alpha=0.5) for c, o in zip(cpu, other)]
    for d, r in zip(dev, ref):
        torch.testing.assert_close(d.cpu(), r, **tol_kw(TOL_POINTWISE, r.dtype))
    k = kernels(prof)
    # the two dense float32 tensors in one launch, the bfloat16 one in another, the two views one ADD each
    assert k["FOREACH_ADD"] == 2 and k["ADD"] == 2, k
    ops = torch_neuronx.get_executed_ops()
    assert "aten::_foreach_add_.List" in ops and "aten::add_.Tensor" in ops
    assert_no_fallbacks()


def test_integer_and_promoting_lists_use_the_single_tensor_ops():
    ints = to_dev([torch.arange(5), torch.arange(3)])
    torch._foreach_add_(ints, 2)
    assert [t.cpu().tolist() for t in ints] == [[2, 3, 4, 5, 6], [2, 3, 4]]
    out = torch._foreach_div(ints, 2)  # integer division promotes to float
    assert out[0].dtype == torch.float32 and out[0].cpu().tolist() == [1.0, 1.5, 2.0, 2.5, 3.0]
    # a complex scalar promotes: the slow path gives complex results
    f = to_dev([torch.ones(2)])
    assert torch._foreach_mul(f, 1j)[0].dtype == torch.complex64
    # a CPU 0-dim tensor operand is read on the host (one launch, no copy)
    xs = to_dev(make_list(torch.float32))
    with torch_neuronx.profiler.profile(print_table=False, limits=False) as prof:
        r = torch._foreach_mul(xs, torch.tensor(0.25))
    assert sum(1 for a in prof.activities()) == 1
    bitwise(r, [x.mul(0.25) for x in xs])
    assert_no_fallbacks()


def test_errors_match_the_cpu():
    for lists in ([[], []], [[torch.ones(2)], [torch.ones(2), torch.ones(2)]]):
        with pytest.raises(RuntimeError) as cpu_err:
            torch._foreach_add(*lists)
        with pytest.raises(RuntimeError) as dev_err:
            torch._foreach_add(*[to_dev(l) for l in lists])
        assert str(dev_err.value) == str(cpu_err.value)
    with pytest.raises(RuntimeError, match="same number of elements as scalar list"):
        torch._foreach_mul(to_dev([torch.ones(2)]), [1.0, 2.0])
    with pytest.raises(RuntimeError, match="scalar tensor expected to be 0 dim"):
        torch._foreach_mul(to_dev([torch.ones(2)]), torch.ones(2, device=DEV))
    with pytest.raises(RuntimeError, match="Expected scalars to be on CPU"):
        x = to_dev([torch.ones(2)])
        torch._foreach_addcmul(x, x, x, torch.ones(1, device=DEV))
    with pytest.raises(RuntimeError, match="alpha must not be a complex"):
        torch._foreach_add(to_dev([torch.ones(2)]), to_dev([torch.ones(2)]), alpha=1j)


# ---- launches ----------------------------------------------------------------------------------------


def test_one_launch_per_call_on_a_uniform_list():
    n = 50
    xs = to_dev([torch.rand(64 + i) + 0.5 for i in range(n)])
    ys = to_dev([torch.rand(64 + i) + 0.5 for i in range(n)])
    zs = to_dev([torch.rand(64 + i) + 0.5 for i in range(n)])
    lr = torch.tensor(0.01, device=DEV)
    calls = [
        lambda: torch._foreach_add_(xs, ys, alpha=0.1),
        lambda: torch._foreach_add_(xs, 1e-3),
        lambda: torch._foreach_mul_(xs, 0.99),
        lambda: torch._foreach_mul_(xs, lr),
        lambda: torch._foreach_div_(xs, [1.0 + i for i in range(n)]),
        lambda: torch._foreach_addcmul_(xs, ys, zs, value=0.1),
        lambda: torch._foreach_addcdiv_(xs, ys, zs, [0.1] * n),
        lambda: torch._foreach_lerp_(xs, ys, 0.1),
        lambda: torch._foreach_lerp_(xs, ys, zs),
        lambda: torch._foreach_sqrt(xs),
        lambda: torch._foreach_maximum_(xs, ys),
        lambda: torch._foreach_clamp_max_(xs, 5.0),
        lambda: torch._foreach_pow(xs, 2.0),
        lambda: torch._foreach_pow(2.0, xs),
        lambda: torch._foreach_norm(xs, math.inf),  # a float32 2-norm is a loop of vector_norm, as on the CPU
        lambda: torch._foreach_neg(xs),
        lambda: torch._foreach_copy_(zs, ys),
        lambda: torch._foreach_zero_(zs),
    ]
    for call in calls:
        call()  # warm-up: allocator caches, lazy initialisation
        with torch_neuronx.profiler.profile(print_table=False, limits=False) as prof:
            call()
        acts = prof.activities()
        assert len(acts) == 1 and acts[0].kind == "kernel" and acts[0].name.startswith("FOREACH_"), acts
        assert acts[0].bytes > 0
    assert_no_fallbacks()


def test_capture_takes_the_single_tensor_ops():
    import torch._dynamo

    torch._dynamo.reset()

    def step(xs, ys):
        torch._foreach_mul_(xs, 0.5)
        return torch._foreach_add(xs, ys, alpha=2.0)

    sizes = [(4, 3), (7,)]
    cpu_x, cpu_y = make_list(torch.float32, sizes=sizes), make_list(torch.float32, seed=2, sizes=sizes)
    xs, ys = to_dev(cpu_x), to_dev(cpu_y)
    got = torch.compile(step, backend="neuron")(xs, ys)
    want = step(cpu_x, cpu_y)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-5)
    for g, w in zip(xs, cpu_x):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-5)
    torch._dynamo.reset()


# ---- optimizers ---------------------------------------------------------------------------------------


def model_and_batch(seed=0):
    torch.manual_seed(seed)
    m = nn.Sequential(nn.Linear(12, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 3))
    x, y = torch.randn(20, 12), torch.randn(20, 3)
    return m, x, y


@pytest.mark.parametrize("make_opt", [
    lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, foreach=True),
    lambda ps: torch.optim.Adam(ps, lr=1e-2, amsgrad=True, foreach=True),
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-3, foreach=True),
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, foreach=True),
], ids=["AdamW", "Adam-amsgrad", "SGD-momentum", "SGD-nesterov"])
def test_optimizer_steps_match_the_cpu(make_opt):
    ref, x, y = model_and_batch()
    dev = model_and_batch()[0].to(DEV)  # the same seed: the same weights
    for p, q in zip(ref.parameters(), dev.parameters()):
        assert torch.equal(p, q.cpu())
    opts = make_opt(ref.parameters()), make_opt(dev.parameters())
    torch_neuronx.clear_op_tracking()
    for _ in range(3):
        for m, opt, xx, yy in ((ref, opts[0], x, y), (dev, opts[1], x.to(DEV), y.to(DEV))):
            opt.zero_grad()
            nn.functional.mse_loss(m(xx), yy).backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0, foreach=True)
            opt.step()
    for p, q in zip(ref.parameters(), dev.parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-4, atol=1e-5)
    ops = torch_neuronx.get_executed_ops()
    assert "aten::_foreach_norm.Scalar" in ops and "aten::_foreach_mul_.Tensor" in ops
    assert any(o.startswith("aten::_foreach_add") for o in ops)
    assert_no_fallbacks()


def test_adamw_step_launches_and_bfloat16_params():
    torch.manual_seed(0)
    shapes = [(64, 32), (32,), (1,), (0,), (16, 16)]
    for dtype in (torch.float32, torch.bfloat16):
        cpu = [nn.Parameter(torch.randn(s).to(dtype)) for s in shapes]
        dev = [nn.Parameter(p.detach().to(DEV)) for p in cpu]
        for p, q in zip(cpu, dev):
            p.grad = torch.randn(p.shape).to(dtype)
            q.grad = p.grad.to(DEV)
        oc, od = torch.optim.AdamW(cpu, lr=1e-2, foreach=True), torch.optim.AdamW(dev, lr=1e-2, foreach=True)
        for _ in range(3):
            oc.step()
            od.step()
        for p, q in zip(cpu, dev):
            torch.testing.assert_close(q.detach().cpu(), p.detach(), **tol_kw(TOL_POINTWISE, dtype))
        with torch_neuronx.profiler.profile(print_table=False, limits=False) as prof:
            od.step()
        k = kernels(prof)
        assert sum(k.values()) == sum(v for n, v in k.items() if n.startswith("FOREACH_")) <= 10, k
    assert_no_fallbacks()
