"""POINTWISE family against PyTorch on the CPU: binary ops with broadcasting,
type promotion and scalars, alpha/in-place/out=, unary math, the base
activations forward and backward, where/clamp/lerp/addcmul/addcdiv,
comparisons and logical ops, with zero CPU fallbacks. Semantics
(broadcasting, type promotion, out=, in-place, views) come from PyTorch;
compute from the runtime. Tolerances: helpers.close (TOL_POINTWISE)."""
import pytest
import torch
import torch.nn.functional as F

import torch_neuronx

from helpers import DEV, assert_no_fallbacks, close, raises_like_cpu


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


# A 0-d device tensor of a wider dtype of the same category beside a
# dimensioned tensor: the dimensioned tensor's dtype is the common dtype and
# the 0-d value converts into it before the op (TensorIterator casts every
# input): uint8 <= 0-d int32 -4 compares with 252, int8 // 0-d int32
# 1000000007 divides by 7, float16 - 0-d float32 2049 subtracts 2048.
# Multiplication and division by a 0-d float32 tensor in float16/bfloat16
# read it in float32 on the CPU (its *_cpu_reduced_float kernels): kept.
ZERO_DIM_CASES = [
    (torch.tensor([0, 5, 200, 255], dtype=torch.uint8), torch.tensor(-4, dtype=torch.int32)),
    (torch.tensor([-5, 7, 100, -128], dtype=torch.int8), torch.tensor(1000000007, dtype=torch.int32)),
    (torch.tensor([-5, 7, 100, 32767], dtype=torch.int16), torch.tensor(-2 ** 40 - 3, dtype=torch.int64)),
    (torch.tensor([True, False, True, False]), torch.tensor(False)),
    (torch.tensor([3.0, 2048.0, 1.0, 0.0999755859375], dtype=torch.float16), torch.tensor(2049.0)),
    (torch.tensor([3.0, 2048.0, 1.0, 0.1], dtype=torch.float16), torch.tensor(0.1, dtype=torch.float64)),
    (torch.tensor([3.0, 2064.0, 1.0, 0.3], dtype=torch.bfloat16), torch.tensor(2057.0)),
]
ZERO_DIM_OPS = {
    "le": torch.le, "eq": torch.eq, "gt": torch.gt, "add": torch.add, "sub": torch.sub, "mul": torch.mul,
    "minimum": torch.minimum, "maximum": torch.maximum, "floor_divide": torch.floor_divide,
    "remainder": torch.remainder, "bitwise_xor": torch.bitwise_xor, "div": torch.div, "atan2": torch.atan2,
}


@pytest.mark.parametrize("case", range(len(ZERO_DIM_CASES)))
@pytest.mark.parametrize("op", ZERO_DIM_OPS)
def test_zero_dim_tensor_converts_into_the_common_dtype(op, case):
    a, s = ZERO_DIM_CASES[case]
    f = ZERO_DIM_OPS[op]
    for x, y in ((a, s), (s, a)):
        try:
            ref = f(x, y)
        except (RuntimeError, NotImplementedError) as e:  # bool subtraction, ...
            # an integer division by zero in device data is reported at
            # synchronize (as CUDA's device-side errors): not compared here
            if "ZeroDivisionError" not in str(e):
                raises_like_cpu(lambda d: f(x.to(d), y.to(d)))
            continue
        got = f(x.neuron(), y.neuron())
        assert got.dtype == ref.dtype
        torch.testing.assert_close(got.cpu(), ref, rtol=0, atol=0, equal_nan=True)
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


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.int8])
def test_shift_operators_are_native(dtype):
    a = torch.tensor([1, 2, 3, 100], dtype=dtype)
    b = torch.tensor([0, 1, 2, 3], dtype=dtype)
    an, bn = a.to("neuron"), b.to("neuron")
    for got, want in [(an << bn, a << b), (an >> bn, a >> b), (an << 2, a << 2), (an >> 1, a >> 1)]:
        assert got.dtype == want.dtype
        assert got.cpu().tolist() == want.tolist()
    x, y = an.clone(), a.clone()
    x <<= 1
    y <<= 1
    x >>= bn
    y >>= b
    assert x.cpu().tolist() == y.tolist()
    assert_no_fallbacks()


@pytest.mark.parametrize("scalar", [torch.tensor(1.5), torch.tensor(2), torch.tensor(True)])
def test_where_accepts_cpu_scalar_tensors(scalar):
    cond = torch.tensor([True, False, True])
    x = torch.arange(3.0)
    for args in [(cond, scalar, x), (cond, x, scalar), (cond, scalar, scalar)]:
        want = torch.where(*args)
        dev = [a.to("neuron") if a.dim() > 0 else a for a in args]
        got = torch.where(*dev)
        assert got.dtype == want.dtype and got.device.type == "neuron"
        torch.testing.assert_close(got.cpu(), want)
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_unsigned_dtypes_where_the_cpu_supports_them(dtype):
    # PyTorch's CPU gives uint16/32/64 a limited op set; each of those matches,
    # uint64 values at and above 2^63 included.
    big = {torch.uint16: 65535, torch.uint32: 4294967295, torch.uint64: (1 << 64) - 1}[dtype]
    vals = [0, 1, 7, 300 % (big + 1), big, big - 5]
    if dtype == torch.uint64:
        vals += [1 << 63, (1 << 63) + 12345]
    x = torch.tensor(vals, dtype=dtype)
    y = torch.tensor(list(reversed(vals)), dtype=dtype)
    xn, yn = x.to("neuron"), y.to("neuron")
    cases = [lambda a, b: a * b, lambda a, b: a / 3, lambda a, b: a == b, lambda a, b: a.sum(),
             lambda a, b: a.cumsum(0), lambda a, b: a & b, lambda a, b: a.float(), lambda a, b: a.double(),
             lambda a, b: a.sort().values, lambda a, b: a.sort(descending=True).indices, lambda a, b: torch.cat([a, b]),
             lambda a, b: a[torch.tensor([2, 0]).to(a.device)], lambda a, b: a.clone().fill_(9),
             lambda a, b: a[:3].prod(), lambda a, b: a.to(torch.int64), lambda a, b: b.to(torch.int32)]
    for k, fn in enumerate(cases):
        want, got = fn(x, y), fn(xn, yn)
        assert got.dtype == want.dtype, k
        assert torch.equal(got.cpu(), want), (k, got.cpu(), want)
    f = torch.tensor([0.0, 1.5, 255.9, 3e4], dtype=torch.float32)
    assert torch.equal(f.to("neuron").to(dtype).cpu(), f.to(dtype))
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_unsupported_dtype_raises_not_implemented_naming_it(dtype):
    # Never TypeError: inside `t + 1` Python would turn it into
    # "unsupported operand type(s) for +".
    with pytest.raises(NotImplementedError, match="is not supported on the neuron device"):
        x = torch.zeros(2, device="neuron").to(dtype)
        x + 1


@pytest.mark.parametrize("case", [
    ("int max=float", lambda x: x.clamp(max=0.5), torch.tensor([1, 2, 3], dtype=torch.int32)),
    ("int min=float", lambda x: x.clamp(min=1.5), torch.tensor([1, 2, 3])),
    ("int min int", lambda x: x.clamp(0, 2), torch.tensor([-1, 2, 3], dtype=torch.int16)),
    ("bool", lambda x: x.clamp(0, 1), torch.tensor([True, False])),
    ("uint8 clamp_min float", lambda x: torch.clamp_min(x, 2.5), torch.tensor([1, 5], dtype=torch.uint8)),
    ("float", lambda x: x.clamp(-0.5, 0.5), torch.tensor([-1.0, 0.2, 3.0])),
], ids=lambda c: c[0])
def test_clamp_bounds_take_part_in_type_promotion(case):
    _, fn, x = case
    want, got = fn(x), fn(x.to("neuron"))
    assert got.dtype == want.dtype
    assert torch.equal(got.cpu(), want)


def test_inplace_clamp_that_would_promote_raises_like_the_cpu():
    for dev in ("cpu", "neuron"):
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
            torch.tensor([1, 2], dtype=torch.int16, device=dev).clamp_(-0.5, 0.75)


# clamp with tensor bounds is ATen's clamp.Tensor: one iterator promotes
# self and both bounds together (not maximum then minimum pairwise: int8
# clamped by a 0-d int64 300 and a float 1000.5 clamps at 300.0, not at the
# int8 44 that 300 wraps to), and refuses a result an in-place self or out=
# cannot hold.
I8 = torch.tensor([1, 2, -7, 100], dtype=torch.int8)
CLAMP_TENSOR_VALUES = [
    ("promotes over both bounds", lambda d: torch.clamp(I8.to(d), torch.tensor(300, device=d),
                                                        torch.tensor(1000.5, device=d))),
    ("int8 float bound", lambda d: torch.clamp(I8.to(d), torch.tensor([0.5, 0.5, 0.5, 0.5], device=d))),
    ("clamp_min int8 0-d int64", lambda d: torch.clamp_min(I8.to(d), torch.tensor(-2 ** 40 + 5, device=d))),
    ("clamp_max float16 0-d float32", lambda d: torch.clamp_max(torch.tensor([3.0, 2048.0], dtype=torch.half,
                                                                             device=d), torch.tensor(2049.0, device=d))),
    ("bool one bound", lambda d: torch.clamp(torch.tensor([True, False], device=d), torch.tensor(False, device=d))),
    ("lo above hi", lambda d: torch.clamp(torch.tensor([-1.0, 0.5, 9.0], device=d), torch.tensor(2.0, device=d),
                                          torch.tensor([1.0, 3.0, float("nan")], device=d))),
    ("clamp_min_ in place", lambda d: torch.tensor([1.0, -3.0], device=d).clamp_min_(torch.tensor([0.0, 0.0], device=d))),
    # 0-d CPU bounds are values, two of them too
    ("two 0-d CPU bounds", lambda d: torch.clamp(torch.tensor([1.5, -2.0, 7.0], device=d), torch.tensor(0.0),
                                                 torch.tensor(2.0))),
    ("0-d CPU bound int8", lambda d: torch.clamp(I8.to(d), torch.tensor(0.5))),
]


@pytest.mark.parametrize("case", CLAMP_TENSOR_VALUES, ids=lambda c: c[0])
def test_clamp_tensor_bounds_promote_together(case):
    _, fn = case
    want, got = fn("cpu"), fn("neuron")
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0, equal_nan=True)
    assert_no_fallbacks()


C64 = torch.tensor([1 + 1j, 2.0])
CLAMP_TENSOR_ERRORS = [
    # ATen's meta refuses a complex self first; clamp_cpu / maximum_cpu /
    # minimum_cpu then refuse the promoted dtypes they have no kernel for
    ("complex self", NotImplementedError, lambda d: torch.clamp(C64.to(d), torch.tensor(0.0, device=d))),
    ("complex bound", NotImplementedError, lambda d: torch.clamp(torch.ones(2, device=d), torch.tensor(1j, device=d))),
    ("complex bounds", NotImplementedError, lambda d: torch.clamp(torch.ones(2, device=d), torch.tensor(1j, device=d),
                                                                  torch.tensor(2.0, device=d))),
    ("clamp_min complex self", NotImplementedError, lambda d: torch.clamp_min(C64.to(d), torch.tensor(0.0, device=d))),
    ("bool two bounds", NotImplementedError, lambda d: torch.clamp(torch.tensor([True], device=d),
                                                                   torch.tensor(False, device=d),
                                                                   torch.tensor(True, device=d))),
    # the iterator first: shapes, then what an in-place self or out= can hold
    ("shapes before dtypes", RuntimeError, lambda d: torch.tensor([True, False], device=d).clamp_(
        torch.tensor([False] * 3, device=d), torch.tensor(True, device=d))),
    ("in place int8 float bound", RuntimeError, lambda d: I8.to(d).clamp_(torch.tensor([0.5] * 4, device=d))),
    ("in place int8 0-d half", RuntimeError, lambda d: I8.to(d).clamp_(torch.tensor(0.5, dtype=torch.half, device=d))),
    ("in place complex bound", RuntimeError, lambda d: I8.to(d).clamp_(torch.tensor(1j, device=d),
                                                                       torch.tensor(1.0, device=d))),
    ("out= int8 float bound", RuntimeError, lambda d: torch.clamp(I8.to(d), torch.tensor([0.5] * 4, device=d),
                                                                  out=torch.empty(4, dtype=torch.int8, device=d))),
    ("clamp_max_ in place float bound", RuntimeError, lambda d: I8.to(d).clamp_max_(torch.tensor(0.5, device=d))),
    ("in place int8 complex scalar", RuntimeError, lambda d: I8.to(d).clamp_(0.5j, 2)),
    # both bounds are read as doubles, also after a NaN one
    ("NaN and complex bounds", RuntimeError, lambda d: torch.clamp(torch.ones(2, device=d), min=float("nan"),
                                                                   max=2 - 0.5j)),
    # hardtanh (relu6) is a clamp: complex refused before the iterator's checks
    ("relu6 complex expanded in place", NotImplementedError,
     lambda d: F.relu6(C64[:1].to(d).expand(3), inplace=True)),
    ("hardtanh complex", NotImplementedError, lambda d: F.hardtanh(C64.to(d))),
    # clamp_min / clamp_max refuse a complex Scalar bound before converting it
    ("clamp_min_ complex scalar", NotImplementedError, lambda d: torch.ones(2, device=d).clamp_min_(1 + 1j)),
    ("clamp_max complex scalar", NotImplementedError, lambda d: torch.clamp_max(torch.ones(2, device=d), 1j)),
]


@pytest.mark.parametrize("case", CLAMP_TENSOR_ERRORS, ids=lambda c: c[0])
def test_clamp_refuses_what_the_cpu_refuses_with_its_class(case):
    _, cls, fn = case
    raises_like_cpu(fn, cls)
    assert_no_fallbacks()


# Gradients at a NaN input follow ATen's vectorised CPU kernels, the path
# nearly every element takes: 0 for hardtanh/relu6 and hard/soft shrink
# (their masks are false for NaN), NaN for elu/celu/selu and hardswish
# (NaN enters the formula). The NaNs sit inside the CPU's vector body.
NAN_GRAD_OPS = {
    "relu6": F.relu6, "hardtanh": lambda x: F.hardtanh(x, -2.0, 3.0), "hardshrink": F.hardshrink,
    "softshrink": lambda x: F.softshrink(x, 1.0), "elu": F.elu, "celu": F.celu, "selu": F.selu,
    "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid, "relu": F.relu, "leaky_relu": F.leaky_relu,
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("op", NAN_GRAD_OPS)
def test_activation_gradient_at_nan_and_at_the_kinks(op, dtype):
    special = [-6.0, -3.0, -2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, 3.0, 6.0, float("inf"), float("-inf"),
               float("nan"), 0.25]
    x = torch.tensor(special * 4, dtype=dtype)
    grads = []
    for dev in ("cpu", "neuron"):
        t = x.to(dev).clone().requires_grad_()
        NAN_GRAD_OPS[op](t).backward(torch.ones_like(t))
        grads.append(t.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0], equal_nan=True, **({"rtol": 1.6e-2, "atol": 1e-2}
                                                                       if dtype == torch.bfloat16 else {}))
    assert_no_fallbacks()


def test_integer_results_wrap_in_the_compute_dtype_before_an_out_of_another_dtype():
    """out= of another dtype: the CPU computes in the inputs' dtype (int32
    wraps, bool True + True is True) and then casts into out."""
    a = torch.tensor([1, 2, 3], dtype=torch.int32)
    b = torch.tensor([2147483646, 5, -7], dtype=torch.int32)
    c = torch.tensor([3, 2, 1], dtype=torch.int32)
    u = torch.tensor([0, 1, 200], dtype=torch.uint8)
    t = torch.tensor([True, True, False])
    cases = [
        (lambda x, y, z, out: torch.addcmul(x, y, z, value=-1, out=out), (a, b, c), torch.float32),
        (lambda x, y, out: torch.mul(x, y, out=out), (b, c), torch.float64),
        (lambda x, out: torch.sub(x, 1, out=out), (u,), torch.int64),
        (lambda x, out: torch.sub(x, 1, out=out), (u,), torch.float32),
        (lambda x, y, out: torch.add(x, y, out=out), (t, t), torch.float32),
        (lambda x, y, out: torch.mul(x, y, out=out), (u, u), torch.int16),
    ]
    for fn, args, out_dtype in cases:
        want = torch.empty(0, dtype=out_dtype)
        fn(*args, out=want)
        got = torch.empty(0, dtype=out_dtype, device="neuron")
        fn(*(x.neuron() for x in args), out=got)
        assert torch.equal(got.cpu(), want), (got, want)
    assert_no_fallbacks()


# Dtypes the CPU's kernel of an op has no form for: the device raises what the
# CPU raises (NotImplementedError naming the CPU kernel, or its RuntimeError),
# at the call; its own kernels would compute them or fail only at the next
# synchronisation (fuzz seed 731947: ~800 cases).
def _pair(op, dtype, scalar=False):
    def call(dev):
        a = torch.ones(3, dtype=dtype, device=dev)
        return op(a, 2 if scalar else torch.ones(3, dtype=dtype, device=dev))
    return call


_CPU_DTYPE_CASES = [
    ("bitwise_and float", _pair(torch.bitwise_and, torch.float32)),
    ("bitwise_or half", _pair(torch.bitwise_or, torch.float16)),
    ("bitwise_xor bfloat16", _pair(torch.bitwise_xor, torch.bfloat16)),
    ("lshift float", _pair(torch.bitwise_left_shift, torch.float32)),
    ("rshift bool", _pair(torch.bitwise_right_shift, torch.bool)),
    ("<< scalar double", _pair(lambda a, b: a << b, torch.float64, scalar=True)),
    ("bitwise_not float", _pair(lambda a, b: torch.bitwise_not(a), torch.float32)),
    ("hypot int16", _pair(torch.hypot, torch.int16)),
    ("floor_divide bool", _pair(torch.floor_divide, torch.bool)),
    ("remainder bool", _pair(torch.remainder, torch.bool)),
    ("fmod bool", _pair(torch.fmod, torch.bool)),
    ("pow bool", _pair(torch.pow, torch.bool)),
    ("lerp int64", _pair(lambda a, b: torch.lerp(a, b, a), torch.int64)),
    ("lerp scalar weight int32", _pair(lambda a, b: torch.lerp(a, b, 0.5), torch.int32)),
    ("logaddexp int8", _pair(torch.logaddexp, torch.int8)),
    ("logaddexp bool", _pair(torch.logaddexp, torch.bool)),
    ("addcmul bool", _pair(lambda a, b: torch.addcmul(a, a, b), torch.bool)),
    ("abs bool", _pair(lambda a, b: a.abs(), torch.bool)),
    ("frac int32", _pair(lambda a, b: a.frac(), torch.int32)),
    ("trunc bool", _pair(lambda a, b: a.trunc(), torch.bool)),
    ("gelu int64", _pair(lambda a, b: F.gelu(a), torch.int64)),
    ("silu uint8", _pair(lambda a, b: F.silu(a), torch.uint8)),
    ("hardswish int16", _pair(lambda a, b: F.hardswish(a), torch.int16)),
    ("softplus int32", _pair(lambda a, b: F.softplus(a), torch.int32)),
    ("clamp bool bounds", _pair(lambda a, b: a.clamp(True, False), torch.bool)),
    ("clamp tensor bounds bool", _pair(lambda a, b: a.clamp(b, b), torch.bool)),
    ("clamp complex", _pair(lambda a, b: a.clamp(0, 1), torch.complex64)),
    ("maximum complex", _pair(torch.maximum, torch.complex64)),
    ("fmin complex", _pair(torch.fmin, torch.complex64)),
    ("neg bool", _pair(lambda a, b: -a, torch.bool)),
    ("relu bool", _pair(lambda a, b: torch.relu(a), torch.bool)),
    ("hardtanh bool", _pair(lambda a, b: F.hardtanh(a), torch.bool)),
    ("hardtanh uint8 negative limit", _pair(lambda a, b: F.hardtanh(a), torch.uint8)),
    ("addcdiv int", _pair(lambda a, b: torch.addcdiv(a, a, b), torch.int32)),
    ("lerp end of another dtype", lambda dev: torch.lerp(torch.ones(2, device=dev),
                                                         torch.ones(2, device=dev, dtype=torch.half), 0.5)),
    ("lerp out of another dtype", lambda dev: torch.lerp(torch.ones(2, device=dev), torch.ones(2, device=dev),
                                                         torch.ones(2, device=dev),
                                                         out=torch.empty(2, dtype=torch.double, device=dev))),
    ("floor complex with a float out", lambda dev: torch.floor(torch.ones(1, dtype=torch.complex64, device=dev),
                                                              out=torch.empty(0, device=dev))),
    ("sign of an empty complex", lambda dev: torch.sign(torch.empty(0, 2, dtype=torch.complex64, device=dev))),
    ("lerp_ whose result does not fit self, int", lambda dev: torch.ones(1, 1, dtype=torch.int64, device=dev).lerp_(
        torch.ones(2, 1, dtype=torch.int64, device=dev), -2.0)),
    ("lerp_ int8, scalar weight", lambda dev: torch.ones(2, dtype=torch.int8, device=dev).lerp_(
        torch.ones(2, dtype=torch.int8, device=dev), 0.5)),
    ("logsigmoid bool", lambda dev: F.logsigmoid(torch.ones(1, dtype=torch.bool, device=dev))),
    ("bitwise_and empty float", lambda dev: torch.bitwise_and(torch.ones(0, device=dev), torch.ones(0, device=dev))),
    ("true division into complex32", lambda dev: torch.ones(1, dtype=torch.float16, device=dev) / complex(-1, -0.5)),
    ("pow into complex32", lambda dev: torch.ones(1, dtype=torch.float16, device=dev) ** torch.tensor(1 + 0j)),
    ("addcdiv into complex32", lambda dev: torch.ones(2, dtype=torch.float16, device=dev).addcdiv(
        torch.ones(2, dtype=torch.float16, device=dev), torch.tensor(0.5 + 1j, device=dev))),
    ("lerp complex32, scalar weight", lambda dev: torch.lerp(torch.ones(2, dtype=torch.complex32, device=dev),
                                                             torch.ones(2, dtype=torch.complex32, device=dev), 0.5)),
    ("lerp into complex32, 0-d weight", lambda dev: torch.lerp(torch.ones(2, dtype=torch.float16, device=dev),
                                                               torch.ones(2, dtype=torch.float16, device=dev),
                                                               torch.tensor(0.5 + 1j, device=dev))),
]


@pytest.mark.parametrize("case", _CPU_DTYPE_CASES, ids=lambda c: c[0])
def test_inputs_the_cpu_kernel_lacks_raise_its_exception_at_the_call(case):
    raises_like_cpu(case[1])


def test_dtypes_the_cpu_kernels_cover_still_compute():
    # The gate lets through what the CPU computes: promotion decides the dtype
    # (int tensor with a float tensor gives float hypot; bool clamp with int
    # bounds is int64).
    i, f = torch.tensor([3, 4], dtype=torch.int32), torch.tensor([4.0, 3.0])
    for fn in (lambda a, b: torch.hypot(a, b), lambda a, b: torch.logaddexp(a, b),
               lambda a, b: torch.bitwise_and(a, a), lambda a, b: torch.lerp(b, b, 0.25),
               lambda a, b: torch.tensor([True, False], device=a.device).clamp(0, 1)):
        want, got = fn(i, f), fn(i.to(DEV), f.to(DEV))
        assert got.dtype == want.dtype
        close(got, want)


def test_pow_of_bool_by_zero_or_one_fills_or_copies_like_the_cpu():
    x = torch.tensor([True, False])
    for e in (True, False, 0, 1):
        want, got = torch.pow(x, e), torch.pow(x.to(DEV), e)
        assert got.dtype == want.dtype and torch.equal(got.cpu(), want), e


def test_integer_to_a_negative_integer_power_raises_like_the_cpu():
    # pow.Tensor_Scalar's meta check (NumPy's rule); a float exponent, a bool
    # or float base, and a tensor exponent still compute
    for dt in (torch.int64, torch.int8, torch.uint8, torch.bool):
        raises_like_cpu(lambda dev: torch.tensor([2, 3], device=dev).to(dt) ** -2)
    for base, e in ((torch.tensor([2, 3]), -2.0), (torch.tensor([2.0, 4.0]), -2), (torch.tensor([2, 3]), 2)):
        want, got = base ** e, base.to(DEV) ** e
        assert got.dtype == want.dtype
        close(got, want)


def test_logaddexp_of_bool_and_float_promotes_like_the_cpu():
    a, b = torch.tensor([True, False, True]), torch.tensor([1.0, -2.0, float("inf")])
    for x, y in ((a, b), (b, a)):
        want, got = torch.logaddexp(x, y), torch.logaddexp(x.to(DEV), y.to(DEV))
        assert got.dtype == want.dtype
        close(got, want)


def test_pow_by_zero_or_one_fills_or_copies_into_any_out_dtype():
    # ATen's pow.Tensor_Scalar fills or copies before a kernel checks the
    # dtype: bool ** True into a float out=, an int tensor ** 1.0 (float)
    b = torch.tensor([True, False])
    for e, out_dt in ((True, torch.float32), (False, torch.int64), (1, torch.float16), (0, torch.float32)):
        want = torch.pow(b, e, out=torch.empty(2, dtype=out_dt))
        got = torch.pow(b.to(DEV), e, out=torch.empty(2, dtype=out_dt, device=DEV))
        assert got.dtype == want.dtype and torch.equal(got.cpu(), want), (e, out_dt)
    x = torch.tensor([2, 3])
    for e in (1.0, 0.0, 1, 0):
        want, got = x ** e, x.to(DEV) ** e
        assert got.dtype == want.dtype and torch.equal(got.cpu(), want), e
    y = torch.tensor([2.0, float("nan")])
    got, want = y.to(DEV).pow_(0), y.clone().pow_(0)
    assert torch.equal(got.cpu(), want)


# atan2 and xlogy have no complex kernel on the CPU: NotImplementedError at
# the op (not an autograd error after a complex result).
@pytest.mark.parametrize("fn", [torch.atan2, torch.xlogy], ids=["atan2", "xlogy"])
def test_atan2_xlogy_refuse_complex_like_the_cpu(fn):
    c, f = torch.ones(2, dtype=torch.complex64), torch.ones(2)
    raises_like_cpu(lambda d: fn(c.to(d), f.to(d)), NotImplementedError)
    raises_like_cpu(lambda d: fn(f.to(d), c.to(d)), NotImplementedError)
    assert_no_fallbacks()



# where with out=: the out must have the promoted dtype exactly (ATen's
# where_self_out), checked before the condition's dtype.
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float64, torch.int16])
@pytest.mark.parametrize("cond_dtype", [torch.bool, torch.float32])
def test_where_out_dtype_like_the_cpu(out_dtype, cond_dtype):
    c, a, b = torch.tensor([True, False]), torch.tensor([1.0, 2.0]), torch.tensor([3, 4], dtype=torch.int16)
    call = lambda d: torch.where(c.to(cond_dtype).to(d), a.to(d), b.to(d),  # noqa: E731
                                 out=torch.empty(0, dtype=out_dtype, device=d))
    if out_dtype == torch.float32 and cond_dtype == torch.bool:
        assert torch.equal(call(DEV).cpu(), call("cpu"))
    else:
        cpu, dev = raises_like_cpu(call, RuntimeError)
        assert str(dev) == str(cpu)
    assert_no_fallbacks()


# out= of clamp_min/clamp_max/lerp and remainder(Scalar, Tensor) are native
# (they fell back to the CPU), with the CPU's out dtype errors.
@pytest.mark.parametrize("case", [
    ("clamp_min", lambda d, o: torch.clamp_min(torch.tensor([0.7, -1.0, 1.5], device=d), 0.5, out=o)),
    ("clamp_max", lambda d, o: torch.clamp_max(torch.tensor([0.7, -1.0, 1.5], device=d), 0.5, out=o)),
    ("lerp scalar", lambda d, o: torch.lerp(torch.tensor([0.7, -1.0], device=d), torch.ones(2, device=d), 0.25,
                                             out=o)),
    ("lerp tensor", lambda d, o: torch.lerp(torch.tensor([0.7, -1.0], device=d), torch.ones(2, device=d),
                                             torch.full((2,), 0.25, device=d), out=o)),
], ids=lambda c: c[0])
def test_out_overloads_of_clamp_bounds_and_lerp_are_native(case):
    torch_neuronx.clear_op_tracking()
    got = case[1](DEV, torch.empty(0, device=DEV))
    torch.testing.assert_close(got.cpu(), case[1]("cpu", torch.empty(0)))
    assert_no_fallbacks()
    raises_like_cpu(lambda d: case[1](d, torch.empty(0, dtype=torch.int64, device=d)), RuntimeError)


def test_remainder_of_a_python_scalar_by_a_tensor_is_native():
    torch_neuronx.clear_op_tracking()
    x = torch.tensor([0.7, -1.0, 1.5, 3.0])
    torch.testing.assert_close(torch.remainder(5, x.to(DEV)).cpu(), torch.remainder(5, x))
    assert_no_fallbacks()


# 16-bit trunc/floor division by a broadcast one-element divisor (stride 0,
# a 0-d CPU tensor, a Python scalar, or a one-element tensor) divides in
# float32 and rounds once, as ATen's *_cpu_reduced_float kernels; a full
# divisor rounds each step in the 16-bit type.
@pytest.mark.parametrize("mode", ["trunc", "floor"])
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=str)
def test_16bit_rounding_division_by_a_broadcast_divisor_like_the_cpu(mode, dt):
    a = torch.tensor([1.234375, -115.0, 111.0, -102.5], dtype=dt)
    b = torch.tensor([-0.2470703125, 1.984375, 0.1396484375, 0.0293426513671875], dtype=dt)
    calls = [
        lambda d: torch.div(a.to(d), b[:1].to(d).expand(4), rounding_mode=mode),
        lambda d: torch.div(a.to(d), b[1], rounding_mode=mode),
        lambda d: torch.div(a.to(d), -0.2470703125, rounding_mode=mode),
        lambda d: torch.div(a[:1].to(d), b[:1].to(d), rounding_mode=mode),
        lambda d: torch.div(a.to(d), b.to(d), rounding_mode=mode),
    ]
    for call in calls:
        torch.testing.assert_close(call(DEV).cpu(), call("cpu"), rtol=0, atol=0)
    assert_no_fallbacks()


# lerp with a 0-d weight: ATen's meta lets the weight take part in type
# promotion and casts the result into any out= it safely can (the weight
# of another dtype too); integer inputs reach the kernel's
# NotImplementedError, a float result into an integer out= the cast error.
_LERP_0D_WEIGHT = [
    (torch.float32, (), torch.bfloat16, torch.float32),
    (torch.float32, (5,), torch.float64, torch.float32),
    (torch.bfloat16, (5,), torch.float32, torch.bfloat16),
    (torch.float16, (), torch.bfloat16, torch.float16),
    (torch.float16, (5,), torch.complex64, torch.float16),
    (torch.float32, (5,), torch.complex64, torch.float32),
    (torch.bfloat16, (5,), torch.float32, torch.float32),   # the weight rounds to bfloat16 first
    (torch.float32, (5,), torch.float32, torch.float64),
    (torch.int32, (), torch.float32, torch.int32),
    (torch.int16, (5,), torch.int64, torch.int16),
    (torch.bool, (5,), torch.int16, torch.bool),
    (torch.float32, (5,), torch.int32, torch.float32),
    (torch.float32, (5,), torch.float32, torch.complex64),
]


@pytest.mark.parametrize("case", _LERP_0D_WEIGHT, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("weight_on", ["neuron", "cpu"])
def test_lerp_with_a_0d_weight_casts_into_any_out_like_the_cpu(case, weight_on):
    dt, shape, out_dt, w_dt = case
    s = torch.tensor([-1.5, 0.3067, 2.0, -0.0078125, 7.0]).to(dt)[: (shape[0] if shape else 1)].reshape(shape)
    e = torch.tensor([3.3, -1.1, 0.0, 5.25, 1.001]).to(dt)[: (shape[0] if shape else 1)].reshape(shape)
    w = torch.tensor(0.3 if w_dt.is_floating_point or w_dt.is_complex else 1, dtype=w_dt)

    def call(d):
        return torch.lerp(s.to(d), e.to(d), w.to(d if weight_on == "neuron" else "cpu"),
                          out=torch.empty(shape, dtype=out_dt, device=d))

    try:
        ref = call("cpu")
    except Exception:  # noqa: BLE001 - the class is what raises_like_cpu compares
        cpu, dev = raises_like_cpu(call)
        assert str(cpu) in str(dev)
        return
    got = call(DEV)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    if dt == torch.float32 and w_dt == torch.float32:
        torch.testing.assert_close(got.cpu(), ref, rtol=0, atol=0)
    else:  # 16-bit or float64 inputs: float32 compute, rounded as the CPU rounds
        torch.testing.assert_close(got.cpu(), ref)
    assert_no_fallbacks()


# lerp is one fused multiply-add on the CPU (vector body and contracted
# scalar tail): the product is not rounded, so a far end does not overflow.
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("n", [1, 37, 64])
def test_lerp_fuses_its_multiply_add_like_the_cpu(dt, n):
    big = torch.finfo(dt).max
    s = torch.linspace(-3, 3, n).to(dt)
    e = torch.where(torch.arange(n) % 2 == 0, torch.tensor(-big), torch.tensor(big)).to(dt)
    e[::3] = 1.7
    for w in (-0.5, 0.25, 1.5, 0.1234567):
        torch.testing.assert_close(torch.lerp(s.to(DEV), e.to(DEV), w).cpu(), torch.lerp(s, e, w), rtol=0, atol=0)
        wt = torch.full((n,), w).to(dt)
        torch.testing.assert_close(torch.lerp(s.to(DEV), e.to(DEV), wt.to(DEV)).cpu(), torch.lerp(s, e, wt),
                                   rtol=0, atol=0)
    x = torch.tensor(0.3067312240600586)
    assert torch.lerp(x.to(DEV), torch.tensor(-big).to(DEV), -0.5).item() == torch.lerp(x, torch.tensor(-big), -0.5).item()
    assert_no_fallbacks()


# TensorIterator computes in the common dtype and casts that into the out=:
# a bfloat16 sum stored into a float32 out= is a bfloat16 value.
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("out_dt", [torch.float32, torch.float64], ids=str)
def test_16bit_result_rounds_before_an_out_of_another_dtype(dt, out_dt):
    a = torch.tensor([1.0, 3.0, 1000.0, -2.5]).to(dt)
    b = torch.tensor([0.005859375, 0.01171875, 0.3, 1e-3]).to(dt)
    calls = [
        lambda d: torch.add(a.to(d), b.to(d), out=torch.empty(4, dtype=out_dt, device=d)),
        lambda d: torch.addcmul(a.to(d), b.to(d), b.to(d), value=3, out=torch.empty(4, dtype=out_dt, device=d)),
        lambda d: torch.lerp(a.to(d), b.to(d), 0.3, out=torch.empty(4, dtype=out_dt, device=d)),
    ]
    for call in calls:
        torch.testing.assert_close(call(DEV).cpu(), call("cpu"), rtol=0, atol=0)
    assert_no_fallbacks()


# logit's gradient as ATen's vectorised kernel gives it (64 elements: every
# one in its vector body): with eps a NaN input is outside [eps, 1 - eps]
# (0); at x = 0 or 1 it multiplies by inf (x = -0.0 gives +inf).
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("eps", [None, 0.0, 0.1, 1e-6])
def test_logit_gradient_at_nan_and_at_zero_like_the_cpu(dt, eps):
    vals = torch.tensor([float("nan"), -0.0, 0.0, 1.0, 0.05, 0.5, 0.95, float("inf"), -float("inf"), -0.25, 1.5, 0.3,
                         1e-7, 0.9999999, 0.75, 0.2])
    x = vals.repeat(4).to(dt)
    g = torch.tensor([1.0, -1.0, 0.0, 0.5]).repeat_interleave(16).to(dt)
    ref = torch.ops.aten.logit_backward(g, x, eps)
    got = torch.ops.aten.logit_backward(g.to(DEV), x.to(DEV), eps)
    torch.testing.assert_close(got.cpu(), ref, equal_nan=True, **({"rtol": 0, "atol": 0} if dt == torch.float32 else {}))
    assert_no_fallbacks()


# add/sub with alpha and addcmul are one fused multiply-add on the CPU (and
# _foreach_add/_foreach_addcmul run those kernels per tensor): bit for bit
# in float32, and a product past float32's range does not overflow.
def test_alpha_add_sub_and_addcmul_fuse_like_the_cpu():
    g = torch.Generator().manual_seed(5)
    a, b, c = (torch.randn(4109, generator=g) * 3 for _ in range(3))
    calls = [
        lambda d: torch.add(a.to(d), b.to(d), alpha=0.37),
        lambda d: torch.sub(a.to(d), b.to(d), alpha=1.7),
        lambda d: torch.add(a.to(d), 2.5, alpha=0.37),
        lambda d: torch.addcmul(a.to(d), b.to(d), c.to(d), value=0.37),
        lambda d: torch.addcmul(a.to(d), b.to(d), c.to(d)),
        lambda d: torch._foreach_add([a.to(d)], [b.to(d)], alpha=0.37)[0],
        lambda d: torch._foreach_addcmul([a.to(d)], [b.to(d)], [c.to(d)], value=0.37)[0],
        lambda d: torch.add(torch.tensor([-3e38, 3e38], device=d), torch.tensor([3e38, -3e38], device=d), alpha=2),
        lambda d: torch.addcmul(torch.tensor([-3e38], device=d), torch.tensor([3e38], device=d),
                                torch.tensor([2.0], device=d)),
    ]
    for call in calls:
        torch.testing.assert_close(call(DEV).cpu(), call("cpu"), rtol=0, atol=0)
    assert_no_fallbacks()


# The CPU's operation order in hardswish (x * relu6(x + 3) / 6), hardsigmoid's
# gradient (times a float 1/6) and tanh's gradient (1 - y * y fused):
# bit for bit in every float dtype.
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_hard_activations_and_tanh_gradient_in_the_cpus_order(dt):
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(4109, generator=g) * 3).to(dt)
    gr = torch.randn(4109, generator=g).to(dt)
    y = torch.tanh(x)
    calls = [
        lambda d: F.hardswish(x.to(d)),
        lambda d: F.hardsigmoid(x.to(d)),
        lambda d: torch.ops.aten.hardsigmoid_backward(gr.to(d), x.to(d)),
        lambda d: torch.ops.aten.hardswish_backward(gr.to(d), x.to(d)),
        lambda d: torch.ops.aten.tanh_backward(gr.to(d), y.to(d)),
    ]
    for call in calls:
        torch.testing.assert_close(call(DEV).cpu(), call("cpu"), rtol=0, atol=0)
    assert_no_fallbacks()
