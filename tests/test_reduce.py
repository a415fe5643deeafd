"""REDUCE family: reductions (sum/mean/var/std/amax/norm, with indices, bool
and integer), cumsum, softmax and log_softmax forward and backward, against
PyTorch on the CPU with zero CPU fallbacks. Tolerances: helpers.close
(TOL_POINTWISE), wider atol where a sum grows."""
import warnings
import zlib

import pytest
import torch
import torch.nn.functional as F

import torch_neuronx

from helpers import DEV, assert_no_fallbacks, close, raises_like_cpu


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


@pytest.mark.parametrize("case", [
    ("sum float->int64", lambda x: x.sum(dtype=torch.int64), torch.tensor([0.6, 0.6, 0.6])),
    ("sum dim float->int32", lambda x: x.sum(0, dtype=torch.int32), torch.tensor([[0.6, 1.7], [0.6, -0.5]])),
    ("mean int64->float32", lambda x: x.mean(0, dtype=torch.float32), torch.tensor([[1, 2], [4, 7]])),
    ("mean int->float64", lambda x: x.mean(dtype=torch.float64), torch.tensor([1, 2, 4])),
    ("prod float->int64", lambda x: x.prod(dtype=torch.int64), torch.tensor([1.5, 2.5, 3.9])),
    ("nansum float->int64", lambda x: x.nansum(dtype=torch.int64), torch.tensor([0.7, float("nan"), 1.9])),
    ("cumsum float->int64", lambda x: x.cumsum(0, dtype=torch.int64), torch.tensor([0.7, 0.7, 0.7, 1.5])),
    ("cumprod float->int64", lambda x: x.cumprod(0, dtype=torch.int64), torch.tensor([1.5, 2.5, 3.5])),
    ("cumsum int->float", lambda x: x.cumsum(0, dtype=torch.float32), torch.tensor([1, 2, 3])),
    ("sum bf16->float", lambda x: x.sum(dtype=torch.float32), torch.tensor([1.0, 2.0, 3.0]).bfloat16()),
    ("norm float->float64", lambda x: torch.linalg.vector_norm(x, dtype=torch.float64), torch.tensor([3.0, 4.0])),
], ids=lambda c: c[0])
def test_reduction_dtype_converts_the_input_first(case):
    # ATen converts the input to dtype= before reducing: an integer dtype
    # truncates every element, not the total.
    _, fn, x = case
    want = fn(x)
    got = fn(x.to("neuron"))
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize("case", [
    ("softmax int last dim", lambda d: torch.softmax(torch.ones(2, 3, dtype=torch.int32, device=d), 1)),
    ("softmax bool dim 0", lambda d: torch.softmax(torch.ones(2, 3, dtype=torch.bool, device=d), 0)),
    ("log_softmax complex", lambda d: torch.log_softmax(torch.ones(2, 3, dtype=torch.complex64, device=d), -1)),
], ids=lambda c: c[0])
def test_softmax_of_a_non_float_input_raises_not_implemented_like_the_cpu(case):
    raises_like_cpu(case[1], NotImplementedError)


def test_softmax_of_an_empty_integer_input_returns_it_like_the_cpu():
    x = torch.ones(0, 3, dtype=torch.int64)
    want, got = torch.softmax(x, 1), torch.softmax(x.to("neuron"), 1)
    assert got.dtype == want.dtype and got.shape == want.shape


@pytest.mark.parametrize("case", [
    ("amax over an empty dim", lambda d: torch.amax(torch.ones(0, 3, device=d), 0), IndexError),
    ("amin over an empty dim, keepdim", lambda d: torch.amin(torch.ones(2, 0, device=d), -1, True), IndexError),
    ("amax of an empty tensor, no dim", lambda d: torch.amax(torch.ones(0, 3, device=d)), RuntimeError),
    ("max.dim over an empty dim", lambda d: torch.max(torch.ones(0, 3, device=d), 0), IndexError),
    ("min.dim over an empty dim", lambda d: torch.ones(3, 0, device=d).min(1), IndexError),
    ("argmin of an empty tensor", lambda d: torch.argmin(torch.ones(0, 3, device=d)), IndexError),
    ("argmax over an empty dim", lambda d: torch.argmax(torch.ones(0, 3, device=d), 0), IndexError),
], ids=lambda c: c[0])
def test_reductions_without_identity_over_nothing_raise_the_cpu_class(case):
    raises_like_cpu(case[1], case[2])


def test_vector_norm_without_identity_over_an_empty_dim_raises_its_runtime_error():
    raises_like_cpu(lambda d: torch.linalg.vector_norm(torch.ones(6, 0, 4, device=d), ord=-float("inf"), dim=-2),
                    RuntimeError)


def test_max_dim_of_an_empty_complex_input_raises_like_the_cpu():
    raises_like_cpu(lambda d: torch.max(torch.empty(1, 0, 1, dtype=torch.complex64, device=d), dim=2), RuntimeError)


# argmax/argmin refuse bool and complex inputs first (RuntimeError), also
# when the reduced dim is empty (the IndexError would come later).
@pytest.mark.parametrize("fn", [torch.argmax, torch.argmin])
@pytest.mark.parametrize("x", [torch.zeros(0, dtype=torch.bool), torch.zeros(3, dtype=torch.bool),
                               torch.zeros(0, 2, dtype=torch.complex64)], ids=["empty bool", "bool", "empty complex"])
def test_argmax_refuses_bool_and_complex_first(fn, x):
    raises_like_cpu(lambda d: fn(x.to(d)), RuntimeError)
    raises_like_cpu(lambda d: fn(x.to(d), 0), RuntimeError)
    assert_no_fallbacks()


# dtype= on norms and scans, checked and applied as ATen does: vector_norm's
# dtype may only widen and keeps the real/complex kind; a cumulative op's
# kernel has no bool result (after the 0-d copy and the empty fill), and a
# complex input with a real dtype= is cast first; nansum has no complex input
# or complex dtype.
_c = torch.tensor([1 + 2j, 3 - 1j, 0.5 + 0.5j])
_f = torch.tensor([0.6, 0.6, 0.6, 1.5])


@pytest.mark.parametrize("case", [
    ("vector_norm complex input, real dtype", lambda d: torch.linalg.vector_norm(_c.to(d), dtype=torch.float32),
     RuntimeError),
    ("vector_norm narrowing dtype", lambda d: torch.linalg.vector_norm(_f.double().to(d), dtype=torch.float32),
     RuntimeError),
    ("vector_norm complex ord", lambda d: torch.linalg.vector_norm(_f.to(d), ord=1j), RuntimeError),
    ("cumsum dtype=bool", lambda d: torch.cumsum(_f.to(d), 0, dtype=torch.bool), NotImplementedError),
    ("cumprod dtype=bool", lambda d: torch.cumprod(_f.to(d), 0, dtype=torch.bool), NotImplementedError),
    ("nansum complex", lambda d: torch.nansum(_c.to(d)), RuntimeError),
    ("nanmean complex", lambda d: torch.nanmean(_c.to(d)), RuntimeError),
    ("nansum dtype=complex", lambda d: torch.nansum(_f.to(d), dtype=torch.complex64), NotImplementedError),
    ("nansum complex, dim out of range", lambda d: torch.nansum(_c.to(d), dim=2), IndexError),
    ("cumsum_ of bool", lambda d: torch.tensor([True, True], device=d).cumsum_(0), NotImplementedError),
    ("cumsum out= and another dtype=", lambda d: torch.cumsum(_f.to(d), 0, dtype=torch.float64,
                                                           out=torch.empty(4, device=d)), RuntimeError),
], ids=lambda c: c[0])
def test_reduction_dtype_kwarg_checks_like_the_cpu(case):
    raises_like_cpu(case[1], case[2])


@pytest.mark.parametrize("case", [
    ("cumsum complex, dtype=float32", lambda d: torch.cumsum(_c.to(d), 0, dtype=torch.float32)),
    ("cumprod complex, dtype=float32", lambda d: torch.cumprod(_c.to(d), 0, dtype=torch.float32)),
    ("cumsum complex, dtype=int32", lambda d: torch.cumsum(_c.to(d), 0, dtype=torch.int32)),
    ("cumsum 0-d, dtype=bool", lambda d: torch.cumsum(torch.tensor(1.5, device=d), 0, dtype=torch.bool)),
    ("cumsum empty, dtype=bool", lambda d: torch.cumsum(torch.empty(0, device=d), 0, dtype=torch.bool)),
    ("vector_norm widening dtype", lambda d: torch.linalg.vector_norm(_f.to(d), dtype=torch.float64)),
    ("cumsum float, dtype=complex64", lambda d: torch.cumsum(_f.to(d), 0, dtype=torch.complex64)),
    ("cumsum out= int64 casts first", lambda d: torch.cumsum(_f.to(d), 0, out=torch.empty(4, dtype=torch.long,
                                                                                           device=d))),
    ("cumprod_ in place", lambda d: torch.tensor([2, 3, 4], device=d).cumprod_(0)),
    ("nanmean empty, dtype=complex64", lambda d: torch.nanmean(torch.empty(6, 0, 2, dtype=torch.half, device=d),
                                                               dtype=torch.complex64)),
], ids=lambda c: c[0])
def test_reduction_dtype_kwarg_computes_like_the_cpu(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex -> real casts warn on both sides
        got, want = case[1]("neuron"), case[1]("cpu")
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)
    assert_no_fallbacks()


# all/any with out=: a bool or uint8 out keeps its dtype (native, no CPU
# fallback); any other dtype is the CPU's RuntimeError at the op.
@pytest.mark.parametrize("fn", [torch.any, torch.all])
@pytest.mark.parametrize("kw", [{}, dict(dim=1), dict(dim=[0, 1])])
@pytest.mark.parametrize("out_dtype", [torch.bool, torch.uint8, torch.float32, torch.int64])
def test_all_any_out_dtype_like_the_cpu(fn, kw, out_dtype):
    x = torch.tensor([[0.0, 1.0], [0.0, 0.0]])
    if out_dtype in (torch.bool, torch.uint8):
        want = fn(x, **kw, out=torch.empty(0, dtype=out_dtype))
        got = fn(x.neuron(), **kw, out=torch.empty(0, dtype=out_dtype, device=DEV))
        assert got.dtype == want.dtype and torch.equal(got.cpu(), want)
    else:
        raises_like_cpu(lambda d: fn(x.to(d), **kw, out=torch.empty(0, dtype=out_dtype, device=d)), RuntimeError)
    assert_no_fallbacks()


# cumsum_/cumprod_ (and out=) wrap the dim first, as the CPU's meta does: a
# bad dim is the IndexError even when dtype= differs from self's dtype.
@pytest.mark.parametrize("op", ["cumsum_", "cumprod_"])
def test_cumulative_inplace_checks_the_dim_before_the_dtype(op):
    x = torch.ones(2, 3)
    raises_like_cpu(lambda d: getattr(x.to(d), op)(2, dtype=torch.int64), IndexError)
    raises_like_cpu(lambda d: getattr(x.to(d), op)(1, dtype=torch.int64), RuntimeError)
    assert_no_fallbacks()


# out= overloads of nansum, prod(dim), linalg.vector_norm and (log_)softmax
# are native (they fell back to the CPU), with the out dtype rules of ATen's
# meta functions: out's dtype unless dtype= names one it must then have.
_x = torch.tensor([[0.7, float("nan"), 1.5], [2.0, 3.0, 0.5]])


@pytest.mark.parametrize("case", [
    ("nansum", lambda d, o: torch.nansum(_x.to(d), 1, out=o), torch.float32),
    ("nansum into float64", lambda d, o: torch.nansum(_x.to(d), 1, out=o), torch.float64),
    ("prod into int64", lambda d, o: torch.prod(_x.nan_to_num().to(d), 1, out=o), torch.int64),
    ("vector_norm", lambda d, o: torch.linalg.vector_norm(_x.to(d), dim=1, out=o), torch.float32),
    ("softmax", lambda d, o: torch._softmax(_x.to(d), 1, False, out=o), torch.float32),
    ("log_softmax", lambda d, o: torch.log_softmax(_x.to(d), 1, out=o), torch.float32),
], ids=lambda c: c[0])
def test_reduction_out_overloads_are_native(case):
    torch_neuronx.clear_op_tracking()
    got = case[1]("neuron", torch.empty(0, dtype=case[2], device="neuron"))
    want = case[1]("cpu", torch.empty(0, dtype=case[2]))
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)
    assert_no_fallbacks()


@pytest.mark.parametrize("case", [
    ("nansum float into int8", lambda d: torch.nansum(_x.to(d), 1, out=torch.empty(0, dtype=torch.int8, device=d)),
     NotImplementedError),
    ("nansum dtype= other than out's", lambda d: torch.nansum(_x.to(d), 1, dtype=torch.float64,
                                                               out=torch.empty(0, device=d)), RuntimeError),
    ("prod dtype= other than out's", lambda d: torch.prod(_x.to(d), 1, dtype=torch.float64,
                                                           out=torch.empty(0, device=d)), RuntimeError),
    ("vector_norm out of another dtype", lambda d: torch.linalg.vector_norm(
        _x.to(d), out=torch.empty(0, dtype=torch.float64, device=d)), RuntimeError),
    ("softmax out of another dtype", lambda d: torch._softmax(_x.to(d), 1, False,
                                                              out=torch.empty(0, dtype=torch.float64, device=d)),
     RuntimeError),
], ids=lambda c: c[0])
def test_reduction_out_dtype_checks_like_the_cpu(case):
    raises_like_cpu(case[1], case[2])


# max/min(dim) of an empty complex tensor: an empty reduced dim is the
# IndexError of ATen's meta, checked before its refusal of complex inputs.
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("shape,dim,exc", [((0, 5), 0, IndexError), ((0, 5), 1, RuntimeError),
                                           ((2, 0), 1, IndexError), ((2, 3), 0, RuntimeError)])
def test_max_min_dim_of_complex_checks_the_empty_dim_first(op, shape, dim, exc):
    x = torch.empty(shape, dtype=torch.complex64)
    raises_like_cpu(lambda d: getattr(x.to(d), op)(dim=dim), exc)


def test_nansum_out_with_an_integer_dtype_computes_like_the_functional_form():
    # dtype= given with out=: NaN -> 0, the input cast to dtype, summed (as
    # the CPU); out= alone with an integer dtype still refuses a float input
    x = torch.tensor([[1.7, float("nan"), -2.6, 300.2], [0.5, 0.5, 0.5, 0.5], [0.6, 0.6, -0.6, 0.0]])
    for src in (x, x.half(), x.bfloat16()):
        for dt in (torch.int32, torch.uint8, torch.int8, torch.int16, torch.bool, torch.float16):
            want = torch.nansum(src, 1, dtype=dt, out=torch.empty(0, dtype=dt))
            got = torch.nansum(src.neuron(), 1, dtype=dt, out=torch.empty(0, dtype=dt, device="neuron"))
            assert got.dtype == want.dtype and torch.equal(got.cpu(), want), (src.dtype, dt)
    raises_like_cpu(lambda d: torch.nansum(x.to(d), 1, out=torch.empty(0, dtype=torch.int32, device=d)),
                    NotImplementedError)
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_mean_into_a_16bit_dtype_is_a_float32_mean_rounded_once(dtype):
    # float32 3.4e38 and -3.4e38 would overflow if cast to the 16-bit dtype
    # first; the CPU averages them in float32 (0) and rounds at the end
    x = torch.tensor([[3.4e38, -3.4e38, 1.0], [1.0, 2.0, 4.5], [float("nan"), 1.0, 2.0]])
    for src in (x, x.double(), torch.tensor([[70000, -70000, 3]], dtype=torch.int32)):
        want = torch.mean(src, 1, dtype=dtype)
        got = torch.mean(src.neuron(), 1, dtype=dtype)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.cpu(), want, equal_nan=True)
        out = torch.empty(0, dtype=dtype, device="neuron")
        torch.mean(src.neuron(), 1, dtype=dtype, out=out)
        torch.testing.assert_close(out.cpu(), want, equal_nan=True)
    torch.testing.assert_close(torch.mean(x[:, :0].neuron(), 1, dtype=dtype).cpu(), torch.mean(x[:, :0], 1, dtype=dtype),
                               equal_nan=True)
    assert_no_fallbacks()


def _bitwise(got, want):
    """Equal values, NaN where NaN (complex: part by part)."""
    got = got.cpu()
    assert got.dtype == want.dtype
    if want.is_complex():
        got, want = torch.view_as_real(got), torch.view_as_real(want)
    g, w = got.double(), want.double()
    assert bool(((g == w) | (g.isnan() & w.isnan())).all()), (got, want)


def test_prod_rounds_every_step_in_its_dtype_like_the_cpu():
    # float16 32767 * 32767 is inf and inf * 0 NaN on the CPU; a float32
    # product overflows where float32 does
    _bitwise(torch.prod(torch.tensor([32767, 32767, 0], dtype=torch.int16).neuron(), dtype=torch.float16),
             torch.prod(torch.tensor([32767, 32767, 0], dtype=torch.int16), dtype=torch.float16))
    x = torch.tensor([3.4e38, 2, 0.5])
    _bitwise(torch.prod(x.neuron()), torch.prod(x))
    # the CPU's vectorised order: from 32 float32 elements on, lanes 0 and 8
    # are multiplied first (1e30 * 1e-30 before 1e30 * 1e30); shorter or
    # strided rows run in order
    for n in (31, 32, 64, 100):
        v = torch.ones(n)
        v[0] = v[1] = 1e30
        v[8] = v[9] = 1e-30
        _bitwise(torch.prod(v.neuron()), torch.prod(v))
        _bitwise(torch.prod(v.view(1, n).neuron(), 1), torch.prod(v.view(1, n), 1))
    torch.manual_seed(0)
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        for n in (5, 63, 64, 200, 1000):
            y = (torch.rand(3, n, 5) * 0.6 + 0.7).to(dtype)
            for fn in (lambda t: t.prod(), lambda t: t.prod(1), lambda t: t.prod(0), lambda t: t.prod(2),
                       lambda t: t.transpose(0, 1).prod(0), lambda t: t[:, ::2].prod(1),
                       lambda t: t.prod(1, dtype=torch.float16), lambda t: t.prod(dtype=torch.bfloat16),
                       lambda t: t.prod(2, dtype=torch.float32)):
                _bitwise(fn(y.neuron()), fn(y))
    assert_no_fallbacks()


def _complex_parts(shape, dt, g, big):
    """Complex values whose parts are +-big or ordinary, so the order of the
    adds and multiplies decides which overflow, cancel or round."""
    n = 1
    for s in shape:
        n *= s
    parts = []
    for _ in range(2):
        pick = torch.randint(0, 4, (n,), generator=g)
        parts.append(torch.where(pick == 0, big, torch.where(pick == 1, -big, torch.randn(n, generator=g,
                                                                                           dtype=torch.float64))))
    return torch.complex(parts[0], parts[1]).reshape(shape).to(dt)


# A complex product is the CPU's: in complex<float> (complex<double>), in the
# order of its vectorised reduction (blocks of 4 complex64 lanes, fused
# multiply-adds in the scalar steps); 1 * (inf + 0j) is inf + nanj there.
@pytest.mark.parametrize("dt", [torch.complex64, torch.complex128])
def test_complex_prod_follows_the_cpu_order_and_precision(dt):
    g = torch.Generator().manual_seed(5)
    for n in (2, 7, 15, 16, 17, 40, 100):
        for big in (1.0, 1e19 if dt == torch.complex64 else 1e150):
            x = _complex_parts((3, n), dt, g, big) * 0.75
            for fn in (lambda t: t.prod(), lambda t: t.prod(1), lambda t: t.prod(0), lambda t: t.t().prod(0),
                       lambda t: t[:, ::2].prod(1)):
                _bitwise(fn(x.neuron()), fn(x))
    r = torch.tensor([1e30, 1e30, 1e-30, float("inf"), 2.0])
    for idx in ([0, 1, 2], [3, 4], [0, 1, 2, 4]):
        _bitwise(torch.prod(r[idx].neuron(), dtype=torch.complex64), torch.prod(r[idx], dtype=torch.complex64))
    assert_no_fallbacks()


# A complex sum is the CPU's cascade in complex<float> (complex<double>), the
# complex element being the vector lane, so each part sums in float as the
# CPU's does; a complex mean is that sum, then a complex division by the count.
@pytest.mark.parametrize("dt", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("shape,dim,layout", [
    ((5,), 0, "c"), ((37,), None, "c"), ((6, 40), 0, "c"), ((6, 40), 1, "c"), ((40, 6), 0, "t"),
    ((3, 17, 33), (0, 2), "c"), ((4, 9, 20), 1, "s"), ((2, 65, 3), None, "s"), ((40000,), None, "c")])
@pytest.mark.parametrize("op", ["sum", "mean", "sum_from_real"])
def test_complex_sum_follows_the_cpu_cascade(dt, shape, dim, layout, op):
    old = torch.get_num_threads()
    try:
        for seed, threads in ((0, 1), (1, 2)):
            torch.set_num_threads(threads)
            g = torch.Generator().manual_seed(zlib.crc32(repr((str(dt), shape, layout, op, seed)).encode()))
            big = 3.0e38 if dt == torch.complex64 else 1e300
            base = _complex_parts([2 * s for s in shape] if layout == "s" else list(shape), dt, g, big)
            if op == "sum_from_real":
                base = base.real.to(torch.float32)

            def view(t):
                if layout == "s":
                    return t[tuple(slice(None, None, 2) for _ in shape)]
                return t.t().contiguous().t() if layout == "t" else t
            fn = torch.mean if op == "mean" else torch.sum
            kw = {"dtype": dt} if op == "sum_from_real" else {}
            args = () if dim is None else (dim,)
            want = fn(view(base), *args, **kw)
            got = fn(view(base.neuron()), *args, **kw).cpu()
            assert got.shape == want.shape
            if op == "mean":
                # the division rounds differently (the CPU's vector body
                # divides with a reciprocal estimate): the same non-finite
                # parts, finite ones within a few ulp
                g2, w2 = torch.view_as_real(got), torch.view_as_real(want)
                assert torch.equal(g2.isnan(), w2.isnan()) and torch.equal(g2.isinf(), w2.isinf())
                torch.testing.assert_close(g2.nan_to_num(0.0, 0.0, 0.0), w2.nan_to_num(0.0, 0.0, 0.0),
                                           rtol=4e-7 if dt == torch.complex64 else 1e-15, atol=0)
            else:
                _bitwise(got, want)
    finally:
        torch.set_num_threads(old)
    assert_no_fallbacks()


def test_complex_input_with_a_real_dtype_sums_its_real_parts_in_the_cpu_order():
    # the CPU converts to the real dtype first (the real parts), then sums
    # in its cascade: 1e18 + 1.5 - 1e18 is 0 in float (fuzz 9101-9003)
    g = torch.Generator().manual_seed(3)
    x = _complex_parts((4, 4, 3), torch.complex64, g, 1e18)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dt in (torch.float32, torch.bfloat16, torch.float16):
            for fn in (torch.sum, torch.mean):
                _bitwise(fn(x.neuron(), dim=(1, 0), dtype=dt), fn(x, dim=(1, 0), dtype=dt))
                _bitwise(fn(x.neuron(), dtype=dt), fn(x, dtype=dt))


def test_prod_backward_in_bfloat16_like_the_cpu():
    torch.manual_seed(1)
    x = torch.randn(6, 6).t()
    grads = []
    for dev in ("cpu", "neuron"):
        leaf = x.to(dev).detach().clone().requires_grad_()
        torch.prod(leaf, -1, dtype=torch.bfloat16).float().sum().backward()
        grads.append(leaf.grad.cpu())
    _bitwise(grads[1], grads[0])


def test_complex_cumprod_is_the_cpus_sequential_scan():
    inf = float("inf")
    # (1 + 0i)(inf + 0i) = inf + NaN i, even for one element
    for x in (torch.tensor([complex(inf, 0)]), torch.tensor([[complex(inf, 0), 2 + 1j]]).t()):
        _bitwise(torch.cumprod(x.neuron(), 0), torch.cumprod(x, 0))
    # a complex double running value: 1e30 * 1e30 overflows only the stored prefix
    x = torch.tensor([1e30, 1e30, 1e-30], dtype=torch.complex64)
    _bitwise(torch.cumprod(x.neuron(), 0), torch.cumprod(x, 0))
    torch.manual_seed(0)
    for dtype in (torch.complex64, torch.complex128):
        y = torch.randn(4, 9, 3, dtype=dtype) * 2
        y[1, 2, 0] = complex(inf, 0)
        y[2, 0, 1] = complex(float("nan"), 1)
        for d in range(3):
            _bitwise(torch.cumprod(y.neuron(), d), torch.cumprod(y, d))
            _bitwise(torch.cumprod(y.neuron().conj(), d), torch.cumprod(y.conj(), d))
            _bitwise(torch.cumprod(y.neuron().transpose(0, 2), d), torch.cumprod(y.transpose(0, 2), d))
    # real inputs with a complex dtype=
    for src in (torch.randn(5, 4).half(), torch.randn(5, 4).bfloat16(), torch.randn(5, 4)):
        _bitwise(torch.cumprod(src.neuron(), 0, dtype=torch.complex64), torch.cumprod(src, 0, dtype=torch.complex64))
    # no complex32 kernel on the CPU
    raises_like_cpu(lambda d: torch.cumprod(torch.ones(3, dtype=torch.complex32, device=d), 0), NotImplementedError)
    assert_no_fallbacks()


def test_complex_cumprod_backward_like_the_cpu():
    torch.manual_seed(2)
    x = torch.randn(5, 3, dtype=torch.complex128)
    grads = []
    for dev in ("cpu", "neuron"):
        leaf = x.to(dev).detach().clone().requires_grad_()
        torch.view_as_real(torch.cumprod(leaf, 0)).sum().backward()
        grads.append(leaf.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_softmax_16bit_rounds_intermediates_like_the_cpu(dtype):
    # the CPU keeps log_softmax's row sum and its log in the 16-bit type over
    # the last dim, and softmax's exps over another dim: float16 log_softmax
    # of [2, -3, -2] is -0.02507 there (-0.02475 when only the result rounds)
    x = torch.tensor([2.0, -3.0, -2.0])
    _bitwise(F.log_softmax(x.neuron(), 0, dtype=dtype), F.log_softmax(x, 0, dtype=dtype))
    # Over another dim, which columns round their exps depends on how the
    # CPU's parallel_for splits them over its threads (its vector path
    # rounds once): check 1 thread (the fuzzer's) and 2 (the default here).
    threads = torch.get_num_threads()
    try:
        for nt in (1, 2):
            torch.set_num_threads(nt)
            torch.manual_seed(0)
            for shape, dim in (((50, 37), 1), ((50, 37), 0), ((6, 4, 6, 2), 1), ((4, 33), -1), ((3, 40, 70), 1),
                               ((5, 7, 33), 0), ((3, 200, 40), 1)):
                x = torch.randn(shape) * 3
                for fn in (torch.softmax, torch.log_softmax):
                    want = fn(x.to(dtype), dim)
                    got = fn(x.to(dtype).neuron(), dim).cpu()
                    # the exp of a row may still differ in the last bit of a few elements
                    assert int((got != want).sum()) <= max(1, want.numel() // 500), (nt, shape, dim, fn)
                    torch.testing.assert_close(got, want)
    finally:
        torch.set_num_threads(threads)
    # the backward through dtype= (the fuzz case): grads follow the forward
    x = torch.tensor([2.0, -3.0, -2.0])
    w = torch.tensor([0.0, -1.0, -1.0], dtype=dtype)
    grads = []
    for dev in ("cpu", "neuron"):
        leaf = x.to(dev).detach().clone().requires_grad_()
        (F.log_softmax(leaf, 0, dtype=dtype) * w.to(dev)).sum().backward()
        grads.append(leaf.grad.cpu())
    _bitwise(grads[1], grads[0])
    assert_no_fallbacks()


# Float sums and means follow the CPU's cascade order in its accumulator
# (float for float32 and 16-bit, double for float64), so terms near the float
# limits overflow and cancel where the CPU's do: exact agreement.
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("shape,dim,layout", [
    ((5,), 0, "c"), ((37,), None, "c"), ((6, 40), 0, "c"), ((6, 40), 1, "c"), ((40, 6), 0, "t"),
    ((3, 17, 33), (0, 2), "c"), ((4, 9, 20), 1, "s"), ((2, 65, 3), None, "s"), ((64, 16), 1, "c")])
@pytest.mark.parametrize("op", ["sum", "mean", "sum_f32"])
def test_float_sum_follows_the_cpu_order_at_the_float_limits(dt, shape, dim, layout, op):
    # fixed seeds (not hash(), which Python salts per process): several draws
    # per case, so a lane-order slip shows on every run, not one in a few
    for seed in range(6):
        g = torch.Generator().manual_seed(zlib.crc32(repr((str(dt), shape, layout, op, seed)).encode()))
        big = 6.0e4 if dt == torch.float16 else 3.0e38
        base_shape = [2 * s for s in shape] if layout == "s" else list(shape)
        n = 1
        for s in base_shape:
            n *= s
        pick = torch.randint(0, 4, (n,), generator=g)
        vals = torch.where(pick == 0, big, torch.where(pick == 1, -big, torch.randn(n, generator=g, dtype=torch.float64)))
        base = vals.reshape(base_shape).to(dt)
        def view(t):
            if layout == "s":
                return t[tuple(slice(None, None, 2) for _ in shape)]
            if layout == "t":
                return t.t().contiguous().t()
            return t
        fn = torch.mean if op == "mean" else torch.sum
        kw = {"dtype": torch.float32} if op == "sum_f32" else {}
        args = () if dim is None else (dim,)
        want = fn(view(base), *args, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = fn(view(base.neuron()), *args, **kw).cpu()
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got.isnan(), want.isnan()), seed
        assert torch.equal(got.nan_to_num(0.0, 1.0, -1.0), want.nan_to_num(0.0, 1.0, -1.0)), seed


def test_float_sum_of_int32_rounds_in_float_as_the_cpu():
    # int32 -> float32: 2147483646 is 2^31 there, so -6 is absorbed by the
    # CPU's float sum and the column sums to 0 (a double sum gave -6).
    x = torch.tensor([[-2], [-4], [0], [2147483646], [0], [-2147483648]], dtype=torch.int32)
    assert torch.equal(torch.sum(x.neuron(), 0, dtype=torch.float32).cpu(), torch.sum(x, 0, dtype=torch.float32))


def _edge_values(shape, dt, seed):
    # 1e18 and near-limit terms that cancel, beside ordinary ones: the order
    # of the arithmetic decides what is left
    g = torch.Generator().manual_seed(seed)
    n = 1
    for s in shape:
        n *= s
    big = 6.0e4 if dt == torch.float16 else 3.0e38
    table = torch.tensor([1e18, -1e18, big, -big, 1.0, -0.5, 2.5, 1e-30], dtype=torch.float64)
    vals = table[torch.randint(0, len(table), (n,), generator=g)] * torch.rand(n, generator=g, dtype=torch.float64).add(0.5)
    return vals.reshape(shape).to(dt)


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.nan_to_num(0.0, 1.0, -1.0), want.nan_to_num(0.0, 1.0, -1.0))


# var_mean / std_mean: one Welford pass in the CPU's order, whose mean is not
# mean()'s (1e18 - 1e18 + small terms: the running mean keeps what a float
# sum loses), split across the CPU's threads as it splits one large output.
@pytest.mark.parametrize("dt", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape,dim,layout", [
    ((10,), None, "c"), ((4, 3), None, "s"), ((6, 5, 5), (2, 1), "c"), ((5, 17), 0, "t"), ((3, 3, 2), None, "t"),
    ((40000,), None, "c")])
@pytest.mark.parametrize("threads", [1, 2])
def test_var_mean_follows_the_cpus_welford_order(dt, shape, dim, layout, threads):
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for seed in range(3):
            base = _edge_values([2 * s for s in shape] if layout == "s" else list(shape), dt, 11 * seed + len(shape))
            def view(t):
                if layout == "s":
                    return t[tuple(slice(None, None, 2) for _ in shape)]
                return t.mT.contiguous().mT if layout == "t" else t
            for fn, corr in ((torch.var_mean, 1), (torch.std_mean, 0)):
                want = fn(view(base), dim=dim, correction=corr)
                got = fn(view(base.neuron()), dim=dim, correction=corr)
                _same(got[0].cpu(), want[0])
                _same(got[1].cpu(), want[1])
    finally:
        torch.set_num_threads(old)
    assert_no_fallbacks()


def test_complex_var_mean_is_the_parts_var_means_like_the_cpu():
    x = torch.complex(_edge_values((4, 6), torch.float32, 1), _edge_values((4, 6), torch.float32, 2))
    for fn in (torch.var_mean, torch.std_mean):
        want = fn(x, dim=1)
        got = fn(x.neuron(), dim=1)
        _same(torch.view_as_real(got[1].cpu()), torch.view_as_real(want[1]))
        _same(got[0].cpu(), want[0])


# nansum sums self in its own layout in the CPU's cascade order, NaN read as
# 0 (a where(isnan, 0, x) copy is dense and sums in another order); into an
# integer dtype the CPU sums nan_to_num(self): float16 inf is 65504 there.
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape,dim,layout", [((37,), None, "c"), ((6, 40), 1, "c"), ((40, 6), 0, "t"),
                                              ((4, 9, 20), 1, "s"), ((2, 4, 19), (0, 2), "e")])
def test_nansum_follows_the_cpu_order_in_self_layout(dt, shape, dim, layout):
    for seed in range(4):
        base = _edge_values([2 * s for s in shape] if layout == "s" else list(shape), dt, 7 * seed + len(shape))
        base = torch.where(torch.arange(base.numel()).reshape(base.shape) % 5 == 3, float("nan"), base).to(dt)
        def view(t):
            if layout == "s":
                return t[tuple(slice(None, None, 2) for _ in shape)]
            if layout == "e":
                return t[:, :1].expand(shape)
            return t.mT.contiguous().mT if layout == "t" else t
        args = () if dim is None else (dim,)
        _same(torch.nansum(view(base.neuron()), *args).cpu(), torch.nansum(view(base), *args))


@pytest.mark.parametrize("dt", [torch.float16, torch.float32, torch.float64])
@pytest.mark.parametrize("out", [torch.int32, torch.int64, torch.int16, torch.bool])
def test_nansum_into_an_integer_dtype_sums_nan_to_num_like_the_cpu(dt, out):
    x = torch.tensor([1.5, float("inf"), float("nan"), -2.5, float("-inf"), 3.0, 1e18 + 2**7, -3.0], dtype=dt)
    for sl in (slice(0, 2), slice(1, 3), slice(3, 5), slice(6, 8), slice(None)):
        assert torch.equal(torch.nansum(x[sl].neuron(), dtype=out).cpu(), torch.nansum(x[sl], dtype=out))


# A float64 result of a row op is computed in double, as the CPU's: a
# cumprod(dtype=float64) of float32 3.4e38 and 1e18 is 3.4e56 there (inf at
# float precision), log_softmax(dtype=float64) of -3.4e38 beside 1 is -3.4e38.
@pytest.mark.parametrize("op", ["cumsum", "cumprod", "log_softmax", "softmax"])
@pytest.mark.parametrize("in_dtype", [torch.float32, torch.int64])
def test_row_ops_into_float64_compute_in_double_like_the_cpu(op, in_dtype):
    x = torch.tensor([[3.4e38, 1e18, -3.4e38, 1.0, 0.5], [1e18, 1e18, 2.0, -3.0, 1e-30]], dtype=torch.float64)
    if in_dtype == torch.int64:
        x = torch.tensor([[9223372036854775807, 9223372036854775807, -3, 4, 2], [1, 2, 3, 4, 5]])
    x = x.to(in_dtype)
    f = getattr(torch, op)
    for dim in (0, 1):
        want = f(x, dim, dtype=torch.float64)
        got = f(x.neuron(), dim, dtype=torch.float64).cpu()
        assert torch.equal(got.isinf(), want.isinf()) and torch.equal(got.isnan(), want.isnan())
        fin = want.isfinite()
        assert torch.allclose(got[fin], want[fin], rtol=1e-12, atol=0), (got, want)
        if op.startswith("cum"):
            _same(got, want)


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_bfloat16_scans_run_a_float_value_like_the_cpu(op):
    # the CPU's 16-bit scans accumulate in float: 3e38 * 10 is inf there and
    # inf * 0 NaN; 3e38 + 3e38 - 3e38 stays inf
    x = torch.tensor([3e38, 10.0, 0.0, 1.0, -3e38, 3e38], dtype=torch.bfloat16)
    want = getattr(torch, op)(x, 0)
    _same(getattr(torch, op)(x.neuron(), 0).cpu(), want)
    g = torch.Generator().manual_seed(3)
    y = (torch.rand(40, 300, generator=g) * 2).to(torch.bfloat16)
    _same(getattr(torch, op)(y.neuron(), 1).cpu(), getattr(torch, op)(y, 1))


# A whole-tensor sum of >= 32768 elements is split as the CPU's
# parallel_reduce splits it over its threads (two_pass_reduction: chunks of
# the iterator's linear range, one partial each, then the partials summed),
# so neuron matches the CPU bit for bit at every thread count, where the
# CPU's own results at 1 and 2 threads differ.
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape,layout", [((70001,), "c"), ((300, 300), "t"), ((33, 65, 31), "s")])
def test_whole_sum_splits_like_the_cpus_parallel_reduce(threads, dt, shape, layout):
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(zlib.crc32(repr((shape, str(dt))).encode()))
        base_shape = [2 * s for s in shape] if layout == "s" else list(shape)
        n = 1
        for s in base_shape:
            n *= s
        base = (torch.randn(n, generator=g) * torch.randn(n, generator=g).exp() * 1e3).reshape(base_shape).to(dt)
        def view(t):
            if layout == "s":
                return t[tuple(slice(None, None, 2) for _ in shape)]
            return t.mT.contiguous().mT if layout == "t" else t
        for fn in (torch.sum, torch.mean, torch.nansum):
            _same(fn(view(base.neuron())).cpu(), fn(view(base)))
        _same(torch.sum(view(base.neuron()), dtype=torch.float32).cpu(), torch.sum(view(base), dtype=torch.float32))
    finally:
        torch.set_num_threads(old)


# vector_norm into float32 and the 16-bit dtypes sums its terms in float in
# the CPU's order: a square of 1e20 overflows and of 1e-25 vanishes as there,
# and the gradient masked where the norm is 0 follows; one element is |x|.
def test_vector_norm_of_a_0d_input_with_a_dim_skips_the_one_element_shortcut():
    # linalg_vector_norm returns |x| when every reduced dim has size 1; a 0-d input given a dim has no
    # sizes to test, so the CPU computes the root of the power: ord=3 of 1.2e-38 is 0, of 1e20 inf.
    for v in (-1.1754943508222875e-38, 1e-20, 1e20, -2.0):
        for ord in (2.0, 3.0, 0.5):
            for dim in (-1, None):
                x = torch.tensor(v)
                _same(torch.linalg.vector_norm(x.neuron(), ord, dim=dim).cpu(), torch.linalg.vector_norm(x, ord, dim=dim))


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("ord", [2, 1, 3, 0.5, -1.5])
def test_vector_norm_sums_in_float_like_the_cpu(dt, ord):
    g = torch.Generator().manual_seed(int(ord * 10) + len(str(dt)))
    table = torch.tensor([1e20, -1e-25, 1.2e-38, 1.0, -0.5, 2.5, 0.0], dtype=torch.float64)
    x = (table[torch.randint(0, len(table), (6, 40), generator=g)] * torch.rand(6, 40, generator=g, dtype=torch.float64)
         .add(0.5)).to(dt)
    for args in ((), (1,), (0,)):
        _same(torch.linalg.vector_norm(x.neuron(), ord, *args).cpu(), torch.linalg.vector_norm(x, ord, *args))
        _same(torch.linalg.vector_norm(x.mT.neuron(), ord, *args).cpu(), torch.linalg.vector_norm(x.mT, ord, *args))
    one = torch.tensor([[1e20], [1e-30]], dtype=dt)
    _same(torch.linalg.vector_norm(one.neuron(), ord, 1).cpu(), torch.linalg.vector_norm(one, ord, 1))
    if dt == torch.float32:
        tiny = torch.tensor([[1.2e-38, -1.2e-38], [1.0, 2.0]])
        grads = []
        for dev in ("cpu", "neuron"):
            leaf = tiny.to(dev).detach().clone().requires_grad_()
            torch.linalg.vector_norm(leaf, 2.0, 1).sum().backward()
            grads.append(leaf.grad.cpu())
        _same(grads[1], grads[0])
