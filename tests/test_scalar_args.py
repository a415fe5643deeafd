"""Scalar arguments (alpha, beta, clamp bounds, fill values, exponents,
weights, thresholds) against PyTorch on the CPU: the glue converts each one
as the op's CPU kernel converts it (launch/scalar.h: Scalar::to<T> for the
kernel's compute dtype or its float32 math type), so a value the type cannot
hold raises the CPU's "value cannot be converted to type T without
overflow" at the op, and a value that fits is the one the CPU computes with
(a negative bound wraps into uint8, a fractional alpha truncates into an
integer type). Values must match exactly (or within TOL_POINTWISE)."""
import pytest
import torch
import torch.nn.functional as F

from helpers import DEV, close, raises_like_cpu

H = torch.float16
BF = torch.bfloat16


def t(values, dtype, d):
    return torch.tensor(values, dtype=dtype, device=d)


# Each case overflows the type its op's CPU kernel converts the scalar to.
OVERFLOWS = [
    ("add half alpha 1e5", lambda d: torch.add(t([1.0], H, d), t([1.0], H, d), alpha=1e5)),
    ("add_ scalar other, half alpha 1e30", lambda d: t([1.0], H, d).add_(0.75, alpha=1e30)),
    ("add bool+int8 alpha -2**40", lambda d: torch.add(t([True], torch.bool, d), t([1], torch.int8, d),
                                                       alpha=-2**40)),
    ("sub int8 alpha -128 (negated: 128)", lambda d: torch.sub(t([1], torch.int8, d), t([1], torch.int8, d),
                                                              alpha=-128)),
    ("rsub int8 alpha 1000", lambda d: torch.rsub(t([1], torch.int8, d), 3, alpha=1000)),
    ("clamp uint8 min 2**31", lambda d: torch.clamp(t(0, torch.uint8, d), min=2**31, max=7)),
    ("clamp int8 min -129", lambda d: t([1], torch.int8, d).clamp(min=-129)),
    ("clamp float32 min 3.5e38", lambda d: t([0.0], torch.float32, d).clamp(min=3.5e38, max=-1.5)),
    ("clamp_ half max 1e30", lambda d: t([1.0], H, d).clamp_(max=1e30)),
    ("clamp_max int16 100000", lambda d: torch.clamp_max(t([1], torch.int16, d), 100000)),
    ("hardtanh half 1e30", lambda d: F.hardtanh(t([1.0], H, d), -1e30, 1e30)),
    ("hardshrink half 1e30", lambda d: F.hardshrink(t([1.0], H, d), 1e30)),
    ("threshold int8 1000", lambda d: F.threshold(t([1], torch.int8, d), 1000, 0)),
    ("leaky_relu float32 1e39", lambda d: F.leaky_relu(t([1.0], torch.float32, d), 1e39)),
    ("elu float32 1e39", lambda d: F.elu(t([1.0], torch.float32, d), 1e39)),
    ("softplus float32 beta 1e39", lambda d: F.softplus(t([1.0], torch.float32, d), 1e39)),
    ("addcmul float32 3.5e38", lambda d: torch.addcmul(t([1.0], torch.float32, d), t([1.0], torch.float32, d),
                                                       t([1.0], torch.float32, d), value=3.5e38)),
    ("addcmul half 1e39 (float32 math)", lambda d: torch.addcmul(t([1.0], H, d), t([1.0], H, d), t([1.0], H, d),
                                                                 value=1e39)),
    ("addcmul int8 1000", lambda d: torch.addcmul(t([1], torch.int8, d), t([1], torch.int8, d),
                                                  t([1], torch.int8, d), value=1000)),
    ("addcdiv complex64 1e39", lambda d: torch.addcdiv(t([1j], torch.complex64, d), t([1j], torch.complex64, d),
                                                       t([1j], torch.complex64, d), value=1e39)),
    ("lerp float32 3.5e38", lambda d: torch.lerp(t([0.0], torch.float32, d), t([1.0], torch.float32, d), 3.5e38)),
    ("lerp_ bfloat16 1e39", lambda d: t([0.0], BF, d).lerp_(t([1.0], BF, d), 1e39)),
    ("lerp float32 complex weight", lambda d: torch.lerp(t([0.0], torch.float32, d), t([1.0], torch.float32, d),
                                                         1j)),
    ("pow half 70000.", lambda d: t([1.0], H, d).pow(70000.0)),
    ("pow int32 2**31", lambda d: torch.pow(t([2], torch.int32, d), 2**31)),
    ("pow int8 1000 into int64 out", lambda d: torch.pow(t([2], torch.int8, d), 1000,
                                                         out=torch.empty(1, dtype=torch.int64, device=d))),
    ("addmv uint8 alpha -1.0", lambda d: torch.addmv(t([1, 2], torch.uint8, d), t([[1, 2], [3, 4]], torch.uint8, d),
                                                     t([1, 1], torch.uint8, d), alpha=-1.0)),
    ("addmv half beta 1e30", lambda d: torch.addmv(t([1.0], H, d), t([[1.0]], H, d), t([1.0], H, d), beta=1e30)),
    ("addmm float32 alpha 1e39", lambda d: torch.addmm(t([[1.0]], torch.float32, d), t([[1.0]], torch.float32, d),
                                                       t([[1.0]], torch.float32, d), alpha=1e39)),
    ("addmm int8 alpha 1000", lambda d: torch.addmm(t([[1]], torch.int8, d), t([[1]], torch.int8, d),
                                                    t([[1]], torch.int8, d), alpha=1000)),
    ("baddbmm float32 alpha 1e39", lambda d: torch.baddbmm(t([[[1.0]]], torch.float32, d),
                                                           t([[[1.0]]], torch.float32, d),
                                                           t([[[1.0]]], torch.float32, d), alpha=1e39)),
    ("addr half alpha 1e30", lambda d: torch.addr(t([[1.0]], H, d), t([1.0], H, d), t([1.0], H, d), alpha=1e30)),
    ("index_add int8 alpha 1000", lambda d: torch.index_add(t([1, 2], torch.int8, d), 0, t([0], torch.int64, d),
                                                            t([1], torch.int8, d), alpha=1000)),
    ("fill_ empty int8 100000", lambda d: torch.empty(0, 5, dtype=torch.int8, device=d).fill_(100000)),
    ("fill_ empty float32 complex", lambda d: torch.empty(2, 0, dtype=torch.float32, device=d).fill_(-1 + 1j)),
    ("fill_ complex64 1e39", lambda d: torch.zeros(1, dtype=torch.complex64, device=d).fill_(1e39)),
    ("clamp complex min, nan max", lambda d: torch.clamp(t([[-2.0]], torch.float32, d), min=2 + 1j, max=float("nan"))),
    ("fill_ two float16 elements 1e30", lambda d: torch.zeros(2, dtype=H, device=d).fill_(1e30)),
    # ops that fill through a one-element tensor still check as their CPU kernels do
    ("masked_fill_ 0-d float16 1e30", lambda d: torch.zeros((), dtype=H, device=d).masked_fill_(
        t(True, torch.bool, d), 1e30)),
    ("index_fill float16 1e30", lambda d: torch.zeros(3, dtype=H, device=d).index_fill(0, t([1], torch.int64, d),
                                                                                       1e30)),
    ("scatter value float16 1e30", lambda d: torch.zeros(3, dtype=H, device=d).scatter(0, t([1], torch.int64, d),
                                                                                       1e30)),
    # a device-resident value is read (value.item(), as CUDA does) and checked
    ("masked_fill uint8 with a device float16 -inf", lambda d: torch.masked_fill(
        t([1, 3], torch.uint8, d)[1:], t(True, torch.bool, d), t(float("-inf"), H, d))),
    ("index_put_ bool mask, uint8 with a device bfloat16 -3.0", lambda d: t([4, 5, 3], torch.uint8, d).index_put_(
        (t([False, True, True], torch.bool, d),), t([-3.0], BF, d))),
    ("masked_fill_ float32 with a device complex", lambda d: torch.zeros(2, device=d).masked_fill_(
        t([True, False], torch.bool, d), t(1 + 2j, torch.complex64, d))),
    ("masked_fill_ empty float32 with a device complex", lambda d: torch.zeros(1, 0, device=d).masked_fill_(
        t([False], torch.bool, d), t(1 + 2j, torch.complex64, d))),
]


@pytest.mark.parametrize("case", OVERFLOWS, ids=lambda c: c[0])
def test_scalar_that_does_not_fit_raises_like_the_cpu(case):
    cpu, dev = raises_like_cpu(case[1], RuntimeError)
    assert "without overflow" in str(cpu)
    assert str(dev) == str(cpu)  # the same type named


# The value the CPU computes with, where converting it changes the result.
VALUES = [
    # a negative bound wraps into uint8: clamp(min=-1) clamps at 255
    ("clamp uint8 min -1", lambda d: t([3, 200], torch.uint8, d).clamp(min=-1)),
    ("clamp uint8 max -1", lambda d: t([3, 200], torch.uint8, d).clamp(max=-1)),
    # fractions truncate into integer types
    ("index_add int32 alpha 0.5", lambda d: torch.index_add(t([1, 2, 3], torch.int32, d), 0, t([2, 0], torch.int64, d),
                                                            t([5, -4], torch.int32, d), alpha=0.5)),
    ("index_add int8 alpha 2.9", lambda d: torch.index_add(t([1, 2], torch.int8, d), 0, t([1], torch.int64, d),
                                                           t([3], torch.int8, d), alpha=2.9)),
    ("addmm int8 alpha 0.5", lambda d: torch.addmm(t([[3]], torch.int8, d), t([[2]], torch.int8, d),
                                                   t([[5]], torch.int8, d), alpha=0.5)),
    # sub is add with -alpha: 128 negates to -128, which int8 holds
    ("sub int8 alpha 128", lambda d: torch.sub(t([3, -100], torch.int8, d), t([1, 1], torch.int8, d), alpha=128)),
    ("sub uint8 alpha 1", lambda d: torch.sub(t([3, 0], torch.uint8, d), t([5, 1], torch.uint8, d))),
    # float16 addcmul/lerp convert to float32 (their math type), add to float16
    ("addcmul half value 1e30", lambda d: torch.addcmul(t([1.0, 0.0], H, d), t([1.0, 0.0], H, d),
                                                        t([1.0, 1.0], H, d), value=1e30)),
    ("lerp half weight 1e30", lambda d: torch.lerp(t([1.0], H, d), t([1.0], H, d), 1e30)),
    ("softplus half beta 1e30", lambda d: F.softplus(t([1.0], H, d), 1e30)),
    ("threshold half 1e30", lambda d: F.threshold(t([1.0], H, d), 1e30, 2.0)),
    # alpha is checked against the compute dtype, not an out= of another
    ("bool add alpha True into int64 out", lambda d: torch.add(t([True, False], torch.bool, d),
                                                               t([True, True], torch.bool, d), alpha=True,
                                                               out=torch.empty(2, dtype=torch.int64, device=d))),
    # complex values reach the COMPLEX family whole
    ("complex add alpha 1j", lambda d: torch.add(t([1 + 1j, 2], torch.complex64, d), t([1, 1j], torch.complex64, d),
                                                 alpha=1j)),
    ("complex sub alpha 2-1j", lambda d: torch.sub(t([1 + 1j], torch.complex64, d), t([1j], torch.complex64, d),
                                                   alpha=2 - 1j)),
    ("complex addcmul value 2-1j", lambda d: torch.addcmul(t([1 + 1j, 2 - 1j], torch.complex64, d),
                                                           t([1 + 1j, 2 - 1j], torch.complex64, d),
                                                           t([1 + 1j, 2 - 1j], torch.complex64, d), value=2 - 1j)),
    ("complex addcdiv value 0.5j", lambda d: torch.addcdiv(t([1 + 1j], torch.complex64, d), t([2 - 1j], torch.complex64, d),
                                                           t([1 + 1j], torch.complex64, d), value=0.5j)),
    ("complex pow exponent 0.5+1j", lambda d: t([1.2 + 1.3j, -0.5 + 0.2j], torch.complex64, d).pow(0.5 + 1j)),
    ("complex pow_ exponent 2+0j", lambda d: t([1.2 + 1.3j], torch.complex64, d).pow_(2 + 0j)),
    # a 0-d CPU tensor value: fill_ is a copy on the CPU, a cast (no range check)
    ("fill_ half with float64 1e30", lambda d: torch.zeros(2, dtype=H, device=d).fill_(
        torch.tensor(1e30, dtype=torch.float64))),
    ("fill_ uint8 with float32 -1.0", lambda d: torch.zeros(2, dtype=torch.uint8, device=d).fill_(torch.tensor(-1.0))),
    ("fill_ int8 with complex", lambda d: torch.zeros(2, dtype=torch.int8, device=d).fill_(torch.tensor(2.7 + 1j))),
    ("fill_ bfloat16 with complex", lambda d: torch.zeros(2, dtype=BF, device=d).fill_(torch.tensor(-1.4 - 0.1j))),
    # the CPU's one-element fill rounds into float16/bfloat16 unchecked (1e30 is inf), and
    # at::scalar_tensor fills one element: where's Scalar operand
    ("fill_ 0-d float16 1e30", lambda d: torch.zeros((), dtype=H, device=d).fill_(1e30)),
    ("fill_ one bfloat16 3.5e38", lambda d: torch.zeros(1, dtype=BF, device=d).fill_(3.5e38)),
    ("where bfloat16 other 3.5e38", lambda d: torch.where(t([False, True], torch.bool, d), t([3.0, -2.0], BF, d),
                                                          3.5e38)),
    ("masked_fill float32 with a device float64", lambda d: torch.zeros(2, device=d).masked_fill(
        t([True, False], torch.bool, d), t(0.3, torch.float64, d))),
    # an integer computation with a Python scalar into a complex out=: computed (and wrapped) in
    # int32, then cast, as the CPU's iterator does
    ("int32 add scalar alpha -1 into complex out", lambda d: torch.add(
        t([0, 5], torch.int32, d), 3, alpha=-1, out=torch.empty(2, dtype=torch.complex64, device=d))),
    ("int32 sub scalar wraps into complex out", lambda d: torch.sub(
        t([-2**31, 7], torch.int32, d), 2, alpha=100000, out=torch.empty(2, dtype=torch.complex64, device=d))),
    # clamp with a NaN bound fills NaN and converts neither bound
    ("clamp min nan max 3.5e38", lambda d: torch.clamp(t([-1.0, 2.0], torch.float32, d), min=float("nan"),
                                                       max=3.5e38)),
    ("clamp half min 3.5e38 max nan", lambda d: torch.clamp(t([-1.0, 2.0], H, d), min=3.5e38, max=float("nan"))),
    # index_fill of an empty tensor converts the value and fills nothing
    ("index_fill empty", lambda d: torch.empty(0, 0, 1, dtype=torch.int32, device=d).index_fill(
        -3, t([0], torch.int64, d), 1)),
    # a pad that only crops fills nothing, so its value is never converted
    ("pad crop only, float16 value 1e30", lambda d: F.pad(t([[1.0, 2.0, 3.0]], H, d), [-1, -1], value=1e30)),
]


@pytest.mark.filterwarnings("ignore:Casting complex values to real")
@pytest.mark.parametrize("case", VALUES, ids=lambda c: c[0])
def test_scalar_converted_as_the_cpu_converts_it(case):
    want, got = case[1]("cpu"), case[1](DEV)
    assert got.dtype == want.dtype
    close(got, want, want.dtype, equal_nan=True)


# A Python number or 0-d CPU tensor beside a float16/bfloat16 tensor: most
# CPU kernels read it in the iterator's common dtype, so it is rounded to
# the 16-bit type first (bf16 + 0.3 adds 0.30078125; bf16 <= 2.1247 compares
# with 2.125; x ** 0.3 raises to 0.30078125); mul, the divisions and lerp's
# weight keep it in float32. Their log-based kernels (xlogy, xlog1py) also
# round log(y) to the 16-bit type, and logaddexp computes in float32 and
# rounds once. Exact equality, over enough elements to see one ulp.
REDUCED_SCALAR_OPS = [
    ("add", lambda x, s: x + s), ("sub", lambda x, s: x - s), ("rsub", lambda x, s: s - x),
    ("mul", lambda x, s: x * s), ("div", lambda x, s: x / s),
    ("div trunc", lambda x, s: torch.div(x, s, rounding_mode="trunc")),
    ("fmod", torch.fmod), ("remainder", torch.remainder), ("pow", torch.pow), ("rpow", lambda x, s: s ** x),
    ("le", torch.le), ("eq", torch.eq), ("gt", torch.gt),
    ("xlogy", torch.xlogy), ("xlog1py", torch.special.xlog1py),
    ("atan2 0-d", lambda x, s: torch.atan2(x, torch.tensor(s))),
    ("hypot 0-d", lambda x, s: torch.hypot(x, torch.tensor(s))),
    ("nextafter 0-d", lambda x, s: torch.nextafter(x, torch.tensor(s))),
    ("logaddexp 0-d", lambda x, s: torch.logaddexp(x, torch.tensor(s))),
    ("logaddexp tensors", lambda x, s: torch.logaddexp(x, x.flip(0) * s)),
    ("lerp weight", lambda x, s: torch.lerp(x, x.flip(0), s)),
    ("foreach add", lambda x, s: torch._foreach_add([x], s)[0]),
    ("foreach pow", lambda x, s: torch._foreach_pow([x], s)[0]),
    ("foreach rpow", lambda x, s: torch._foreach_pow(s, [x])[0]),
    ("foreach mul", lambda x, s: torch._foreach_mul([x], s)[0]),
    ("foreach clamp_min", lambda x, s: torch._foreach_clamp_min([x], s)[0]),
]


@pytest.mark.parametrize("dtype", [BF, H], ids=str)
@pytest.mark.parametrize("name,fn", REDUCED_SCALAR_OPS, ids=[n for n, _ in REDUCED_SCALAR_OPS])
def test_reduced_float_scalar_read_as_the_cpu_reads_it(dtype, name, fn):
    x = (torch.rand(2048, generator=torch.Generator().manual_seed(1)) * 4 + 0.1).to(dtype)
    for s in (0.3, 2.1247, 1.7):
        want = fn(x, s)
        got = fn(x.to(DEV), s).cpu()
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"scalar {s}: {m}")
