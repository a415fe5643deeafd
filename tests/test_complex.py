"""Complex tensors and FFTs on the neuron device (family COMPLEX), against
PyTorch on the CPU with zero CPU fallbacks: copies between host and device
and between dtypes (complex <-> real), conjugate and negative views,
view_as_real / view_as_complex, elementwise arithmetic and sums on complex
tensors, complex / polar / sgn, and every torch.fft transform (forward and
backward) for lengths that are powers of two, smooth, and prime.

Values compute in double inside the kernels; float32 results get float32
tolerances (helpers.TOL_ACCUMULATED, 1e-4: the CPU's FFT rounds in float32 at
every butterfly).
"""
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch_neuronx  # noqa: F401
import helpers
from helpers import DEV, TOL_ACCUMULATED, assert_no_fallbacks, raises_like_cpu, tol_kw
from helpers import seeded_randn as rrandn

TOL = tol_kw(TOL_ACCUMULATED, torch.float32)


def same(dev, ref, **kw):
    helpers.same(dev, ref, **(kw or TOL))


def crandn(*shape, dtype=torch.complex64, seed=0):
    return rrandn(*shape, seed=seed, dtype=dtype)


# ---- storage, copies, views ------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128, torch.complex32])
def test_roundtrip_and_item(dtype):
    x = crandn(4, 5, dtype=torch.complex64).to(dtype)
    d = x.to(DEV)
    assert d.dtype == dtype
    same(d, x, rtol=0, atol=0)
    same(d.t().contiguous(), x.t().contiguous(), rtol=0, atol=0)  # strided device copy
    assert d[1, 2].item() == x[1, 2].item()
    assert_no_fallbacks()


def test_dtype_conversions():
    x = crandn(3, 7)
    d = x.to(DEV)
    same(d.to(torch.complex128), x.to(torch.complex128))
    same(d.to(torch.complex32), x.to(torch.complex32), rtol=0, atol=0)
    with warnings.catch_warnings():  # PyTorch's one-time "discards the imaginary part"
        warnings.simplefilter("ignore")
        same(d.to(torch.float32), x.real.contiguous())
    same(d.to(torch.bool), x.to(torch.bool))
    r = rrandn(3, 7)
    same(r.to(DEV).to(torch.complex64), r.to(torch.complex64), rtol=0, atol=0)
    i = torch.arange(-5, 5)
    same(i.to(DEV).cfloat(), i.cfloat(), rtol=0, atol=0)
    assert_no_fallbacks()


def test_conj_and_neg_bits():
    x = crandn(4, 6)
    d = x.to(DEV)
    c = d.conj()
    assert c.is_conj()
    same(c, x.conj())                      # device -> host through the conj bit
    same(c.clone(), x.conj())              # materialised on the device
    same(c.resolve_conj(), x.conj())
    same(torch.conj_physical(d), x.conj_physical())
    same(c.imag, x.conj().imag)            # a negative view of a real tensor
    same(c.imag.clone(), x.conj().imag)
    out = torch.empty_like(d)
    out.copy_(c)
    same(out, x.conj())
    c2 = torch.empty_like(d).conj()        # destination with the conj bit
    c2.copy_(d)
    same(c2, x)
    same(c2.resolve_conj(), x)
    h = x.conj().to(DEV)                   # host conj view uploaded
    same(h, x.conj())
    same(c * d, x.conj() * x)              # conj input to a native op
    assert_no_fallbacks()


def test_view_as_real_complex():
    x = crandn(3, 4)
    d = x.to(DEV)
    vr = torch.view_as_real(d)
    assert vr.data_ptr() == d.data_ptr()
    same(vr, torch.view_as_real(x))
    same(d.real, x.real)
    same(d.imag, x.imag)
    r = rrandn(5, 2)
    same(torch.view_as_complex(r.to(DEV)), torch.view_as_complex(r))
    d.imag.zero_()                          # writes through the view
    same(d, torch.complex(x.real, torch.zeros_like(x.real)))
    with pytest.raises(RuntimeError, match="conjugated"):
        torch.view_as_real(d.conj())
    assert_no_fallbacks()


# ---- arithmetic -------------------------------------------------------------

def test_elementwise_and_scalars():
    a, b = crandn(4, 5, seed=1), crandn(5, seed=2)
    r = rrandn(4, 5, seed=3)
    da, db, dr = a.to(DEV), b.to(DEV), r.to(DEV)
    same(da + db, a + b)
    same(da - db, a - b)
    same(torch.add(da, db, alpha=2), torch.add(a, b, alpha=2))
    same(da * db, a * b)
    same(da / db, a / b)
    same(da * dr, a * r)                   # complex x real promotes
    same(dr / da, r / a)
    same(-da, -a)
    same(da * 2, a * 2)
    same(da * (1 - 2j), a * (1 - 2j))      # a complex Python scalar
    same(da + 0.5, a + 0.5)
    same(da == da.clone(), a == a.clone())
    same(da != db, a != b)
    same(torch.where(dr > 0, da, db), torch.where(r > 0, a, b))
    t = da.clone()
    t.mul_(2).add_(db)
    same(t, a * 2 + b)
    same(torch.full((2, 3), 1 - 2j, device=DEV), torch.full((2, 3), 1 - 2j))
    same(torch.zeros(3, dtype=torch.complex64, device=DEV), torch.zeros(3, dtype=torch.complex64))
    assert_no_fallbacks()


def test_sum_mean():
    x = crandn(4, 5, 6)
    d = x.to(DEV)
    same(d.sum(), x.sum())
    same(d.sum((0, 2)), x.sum((0, 2)))
    same(d.sum(1, keepdim=True), x.sum(1, keepdim=True))
    same(d.mean(), x.mean())
    same(d.mean(-1), x.mean(-1))
    same(d.transpose(0, 2).sum(0), x.transpose(0, 2).sum(0))
    assert_no_fallbacks()


def test_constructors_and_sgn():
    re, im = rrandn(4, 3, seed=4), rrandn(4, 3, seed=5)
    same(torch.complex(re.to(DEV), im.to(DEV)), torch.complex(re, im), rtol=0, atol=0)
    same(torch.polar(re.abs().to(DEV), im.to(DEV)), torch.polar(re.abs(), im))
    x = crandn(5, 4)
    x[0, 0] = 0
    same(torch.sgn(x.to(DEV)), torch.sgn(x))
    y = x.to(DEV)
    y.sgn_()
    same(y, torch.sgn(x))
    with pytest.raises(RuntimeError, match="Expected object of scalar type"):
        torch.complex(re.to(DEV), im.double().to(DEV))
    assert_no_fallbacks()


@pytest.mark.parametrize("fn", ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt",
                                "reciprocal", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos",
                                "atan", "asinh", "acosh", "atanh", "sigmoid", "square"])
def test_unary_math(fn):
    x = crandn(6, 5, seed=11)
    x[0, 0] = 1e-4 - 2e-4j  # small arguments (expm1, log1p)
    f = getattr(torch, fn)
    same(f(x.to(DEV)), f(x))
    assert_no_fallbacks()


def test_pow_logical_ternary_reductions():
    a, b, c = crandn(4, 5, seed=12), crandn(4, 5, seed=13), crandn(4, 5, seed=14)
    a[0, 0] = 0
    da, db, dc = a.to(DEV), b.to(DEV), c.to(DEV)
    same(torch.pow(da, db), torch.pow(a, b))
    for e in (2, 3, 0.5, -1, 1.5):
        same(torch.pow(db, e), torch.pow(b, e))
    same(torch.isnan(da), torch.isnan(a))
    same(torch.logical_not(da), torch.logical_not(a))
    same(torch.logical_and(da, db), torch.logical_and(a, b))
    same(torch.logical_xor(da, db), torch.logical_xor(a, b))
    same(torch.addcmul(da, db, dc, value=0.5), torch.addcmul(a, b, c, value=0.5))
    same(torch.addcdiv(da, db, dc, value=0.5), torch.addcdiv(a, b, c, value=0.5))
    same(torch.lerp(da, db, 0.3), torch.lerp(a, b, 0.3))
    same(torch.lerp(da, db, 0.8), torch.lerp(a, b, 0.8))
    same(db.prod(1), b.prod(1))
    same(da.all(1), a.all(1))
    same(da.any(), a.any())
    same(torch.flip(da, (0, 1)), torch.flip(a, (0, 1)))
    assert_no_fallbacks()


def test_unsupported_complex_op_raises_not_implemented():
    # Never TypeError (Python would turn it into "unsupported operand type(s)").
    d = crandn(3).to(DEV)
    with pytest.raises((NotImplementedError, RuntimeError), match="complex"):  # the CPU: RuntimeError
        torch.sort(d)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("n", [1, 2, 7, 33])
def test_complex_cumprod(dtype, n):
    a = (crandn(3, n) * 0.5 + 0.8).to(dtype)
    a[1, n // 2] = 0
    for dim in (0, 1, -1):
        want = a.cumprod(dim)
        got = a.to(DEV).cumprod(dim)
        assert got.dtype == want.dtype and got.stride() == want.stride()
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(a.conj().to(DEV).cumprod(1).cpu(), a.conj().cumprod(1), rtol=1e-5, atol=1e-6)
    assert_no_fallbacks()


# ---- FFTs ---------------------------------------------------------------------

LENGTHS = [1, 2, 8, 12, 17, 64, 97, 100]


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_fft_1d(n, norm):
    x = crandn(3, n, seed=n)
    r = rrandn(3, n, seed=n + 1)
    d, dr = x.to(DEV), r.to(DEV)
    same(torch.fft.fft(d, norm=norm), torch.fft.fft(x, norm=norm))
    same(torch.fft.ifft(d, norm=norm), torch.fft.ifft(x, norm=norm))
    same(torch.fft.fft(dr, norm=norm), torch.fft.fft(r, norm=norm))
    same(torch.fft.rfft(dr, norm=norm), torch.fft.rfft(r, norm=norm))
    same(torch.fft.ihfft(dr, norm=norm), torch.fft.ihfft(r, norm=norm))
    h = torch.fft.rfft(r)
    same(torch.fft.irfft(h.to(DEV), n=n, norm=norm), torch.fft.irfft(h, n=n, norm=norm))
    same(torch.fft.hfft(h.to(DEV), n=n, norm=norm), torch.fft.hfft(h, n=n, norm=norm))
    assert_no_fallbacks()


@pytest.mark.parametrize("fn", ["fft2", "ifft2", "fftn", "ifftn", "rfft2", "rfftn", "ihfft2", "ihfftn"])
def test_fft_nd_real_input(fn):
    r = rrandn(2, 6, 9, 5)
    f = getattr(torch.fft, fn)
    same(f(r.to(DEV)), f(r))
    same(f(r.to(DEV), dim=(0, 2)), f(r, dim=(0, 2)))
    same(f(r.to(DEV), s=(4, 7), dim=(1, 3)), f(r, s=(4, 7), dim=(1, 3)))  # padding and trimming
    assert_no_fallbacks()


@pytest.mark.parametrize("fn", ["fft2", "ifft2", "fftn", "ifftn", "irfft2", "irfftn", "hfft2", "hfftn"])
def test_fft_nd_complex_input(fn):
    x = crandn(3, 8, 7)
    f = getattr(torch.fft, fn)
    same(f(x.to(DEV)), f(x))
    same(f(x.to(DEV).transpose(0, 2)), f(x.transpose(0, 2)))  # non-contiguous input
    assert_no_fallbacks()


def test_fft_out_and_shift():
    x = crandn(4, 10)
    out = torch.empty(0, dtype=torch.complex64, device=DEV)
    torch.fft.fft(x.to(DEV), out=out)
    same(out, torch.fft.fft(x))
    rout = torch.empty(0, device=DEV)
    torch.fft.irfft(x.to(DEV), out=rout)
    same(rout, torch.fft.irfft(x))


@pytest.mark.parametrize("fn,real_in", [("fft", True), ("rfft", True), ("irfft", False), ("hfft", False),
                                        ("ihfft", True), ("fft2", False), ("irfftn", False), ("rfftn", True)])
def test_fft_backward(fn, real_in):
    """Gradients of sum(|f(x)| weights): both real and complex outputs."""
    f = getattr(torch.fft, fn)
    x = rrandn(3, 10, seed=7) if real_in else crandn(3, 10, seed=7)
    grads = []
    for dev in ("cpu", DEV):
        t = x.to(dev).requires_grad_()
        y = f(t)
        w = torch.randn(y.shape, generator=torch.Generator().manual_seed(1), dtype=y.dtype).to(dev)
        loss = (y * w).sum()
        loss = loss.real if loss.is_complex() else loss
        (g,) = torch.autograd.grad(loss, t)
        grads.append(g)
    same(grads[1], grads[0])
    assert_no_fallbacks()


def test_stft_istft_roundtrip_real():
    sig = rrandn(400, seed=9)
    win = torch.hann_window(64)
    spec_c = torch.stft(sig, 64, hop_length=16, window=win, center=False, return_complex=True)
    spec_d = torch.stft(sig.to(DEV), 64, hop_length=16, window=win.to(DEV), center=False, return_complex=True)
    same(spec_d, spec_c)
    assert_no_fallbacks()


def test_fft_errors():
    with pytest.raises(RuntimeError, match="Invalid number of data points"):
        torch.fft.fft(torch.randn(4, device=DEV), n=0)
    with pytest.raises(RuntimeError, match="Unsupported dtype"):
        torch.ops.aten._fft_r2c(torch.randn(4, device=DEV).to(torch.bfloat16), [0], 0, True)


def test_abs_and_angle_of_complex_are_real():
    z = torch.randn(4, 5, dtype=torch.complex64, generator=torch.Generator().manual_seed(3))
    for fn in (torch.abs, torch.angle):
        got = fn(z.to("neuron"))
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.cpu(), fn(z))
    zr = z.to("neuron").requires_grad_(True)
    zr.abs().sum().backward()
    zc = z.clone().requires_grad_(True)
    zc.abs().sum().backward()
    torch.testing.assert_close(zr.grad.cpu(), zc.grad)


def test_complex_matmul_family():
    # Four real GEMMs over the (re, im) planes; conjugate views, complex
    # alpha/beta and vdot's conjugation included.
    g = torch.Generator().manual_seed(4)
    A = torch.randn(3, 4, 5, dtype=torch.complex64, generator=g)
    B = torch.randn(3, 5, 2, dtype=torch.complex64, generator=g)
    C = torch.randn(4, 2, dtype=torch.complex64, generator=g)
    d = lambda t: t.to("neuron")  # noqa: E731
    tol = dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close((d(A) @ d(B)).cpu(), A @ B, **tol)
    torch.testing.assert_close(torch.addmm(d(C), d(A[0]), d(B[0]), beta=1 + 2j, alpha=0.5j).cpu(),
                               torch.addmm(C, A[0], B[0], beta=1 + 2j, alpha=0.5j), **tol)
    torch.testing.assert_close((d(A[0]).mH @ d(A[0])).cpu(), A[0].mH @ A[0], **tol)
    v, w = A[0, 0], A[0, 1]
    torch.testing.assert_close(torch.vdot(d(v), d(w)).cpu(), torch.vdot(v, w), **tol)
    torch.testing.assert_close(torch.dot(d(v), d(w)).cpu(), torch.dot(v, w), **tol)
    assert torch_neuronx.get_fallback_ops() == []


# ---- data movement, sums and statistics of complex tensors ------------------------

@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_indexing_gather_scatter_and_masks(dtype):
    a = crandn(5, 4).to(dtype)
    d = a.to(DEV)
    idx = torch.tensor([4, 0, 2, 0])
    gi = torch.tensor([[0, 1, 2, 3], [4, 3, 2, 1]])
    cases = [
        lambda x, i, g: x[i.to(x.device)],
        lambda x, i, g: x[:, i.to(x.device)[1:]],
        lambda x, i, g: x.index_select(0, i.to(x.device)),
        lambda x, i, g: x.masked_select(x.real > 0),
        lambda x, i, g: x.gather(0, g.to(x.device)),
        lambda x, i, g: x.index_put((i.to(x.device)[:2],), x[:2] * 2),
        lambda x, i, g: x.index_put((i.to(x.device),), x[:4], accumulate=True),
        lambda x, i, g: x.scatter(0, g.to(x.device), x[:2]),
        lambda x, i, g: x.scatter_add(0, g.to(x.device), x[:2]),
        lambda x, i, g: x.tril(), lambda x, i, g: x.triu(1),
        lambda x, i, g: x.nonzero(),
        lambda x, i, g: x.conj()[i.to(x.device)],
        lambda x, i, g: x.masked_fill(x.real > 0, 1 + 2j),
    ]
    z = a.clone()
    z[1, 2] = complex(0.0, -0.0)
    z[3, 1] = complex(-0.0, 1.0)
    for k, fn in enumerate(cases):
        for src in ((a, d), (z, z.to(DEV))):
            want = fn(src[0], idx, gi)
            got = fn(src[1], idx, gi)
            assert got.dtype == want.dtype and got.shape == want.shape, k
            torch.testing.assert_close(got.cpu(), want, msg=f"case {k}")
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_cumsum_norms_and_variance(dtype):
    a = crandn(4, 6).to(dtype)
    d = a.to(DEV)
    tol = dict(rtol=1e-5, atol=1e-5)
    for fn in [lambda x: x.cumsum(0), lambda x: x.cumsum(-1), lambda x: x.conj().cumsum(1),
               lambda x: x.norm(), lambda x: torch.linalg.vector_norm(x, 1, dim=1),
               lambda x: torch.linalg.vector_norm(x, float("inf"), dim=0, keepdim=True),
               lambda x: F.normalize(x, dim=1), lambda x: x.var(), lambda x: x.std(0),
               lambda x: x.var(1, correction=0, keepdim=True), lambda x: x[0, 0].var(correction=0),
               lambda x: torch.var_mean(x, 1)[0],
               lambda x: x[1, 2].cumsum(0), lambda x: x[1, 2].conj().cumsum(-1)]:  # 0-d: its own scan
        want, got = fn(a), fn(d)
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got.cpu(), want, **tol)
    assert_no_fallbacks()


def test_complex_random_factories():
    torch.neuron.manual_seed(0)
    n = torch.randn(20000, dtype=torch.cfloat, device=DEV).cpu()
    u = torch.rand(20000, dtype=torch.cdouble, device=DEV).cpu()
    assert n.dtype == torch.cfloat and u.dtype == torch.cdouble
    # Each part of a standard complex normal has variance 1/2.
    assert abs(n.real.var().item() - 0.5) < 0.03 and abs(n.imag.var().item() - 0.5) < 0.03
    assert 0 <= u.real.min() and u.real.max() < 1 and 0 <= u.imag.min() and u.imag.max() < 1
    torch.neuron.manual_seed(0)
    assert torch.equal(torch.randn(20000, dtype=torch.cfloat, device=DEV).cpu(), n)


def test_real_op_into_complex_out_computes_in_the_real_dtype():
    """sqrt(x, out=complex): the CPU computes in the input's real dtype and
    casts (sqrt(-2) is NaN+0j, not 1.41j; a bfloat16 input's result is
    rounded to bfloat16 first); strided outs too."""
    x = torch.tensor([-2.0, 4.0, 0.5, 0.25390625])
    fns = [torch.sqrt, torch.rsqrt, torch.acosh, torch.log, torch.asin, torch.sigmoid, torch.exp]
    for src in (x, x.to(torch.bfloat16), x.double()):
        for fn in fns:
            want = torch.empty(0, dtype=torch.complex64)
            fn(src, out=want)
            got = torch.empty(0, dtype=torch.complex64, device=DEV)
            fn(src.to(DEV), out=got)
            torch.testing.assert_close(got.cpu(), want, equal_nan=True, msg=fn.__name__)
    want = torch.zeros(4, 2, dtype=torch.complex64)
    torch.sqrt(x, out=want[:, 1])
    got = torch.zeros(4, 2, dtype=torch.complex64, device=DEV)
    torch.sqrt(x.to(DEV), out=got[:, 1])
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)
    # binary: real inputs, complex out
    want = torch.empty(0, dtype=torch.complex64)
    torch.atan2(x, x.flip(0), out=want)
    got = torch.empty(0, dtype=torch.complex64, device=DEV)
    torch.atan2(x.to(DEV), x.flip(0).to(DEV), out=got)
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)
    assert_no_fallbacks()


def test_mean_of_nothing_is_nan_in_both_parts():
    x = torch.empty(0, 3, dtype=torch.complex64)
    want = x.mean(0)
    assert want.real.isnan().all() and want.imag.isnan().all()
    torch.testing.assert_close(x.to(DEV).mean(0).cpu(), want, equal_nan=True)
    got = torch.empty(0, dtype=torch.complex64, device=DEV)
    torch.mean(torch.empty(0, 3, dtype=torch.float64, device=DEV), dim=[0], dtype=torch.complex64, out=got)
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)


def test_mean_of_infinite_parts_as_the_cpu():
    """ATen's complex mean multiplies by (1/n, 0): an infinite part makes the
    other part NaN (mean([1+infj, 2]) is nan+infj)."""
    inf = float("inf")
    x = torch.tensor([[complex(1, inf), 2], [complex(-inf, 1), complex(3, 3)], [1 + 2j, 3 - 1j]])
    for fn in (lambda t: t.mean(1), lambda t: t.mean(), lambda t: t.mean(0)):
        torch.testing.assert_close(fn(x.to(DEV)).cpu(), fn(x), equal_nan=True)
    assert_no_fallbacks()


@pytest.mark.parametrize("fn", [torch.complex, torch.polar], ids=["complex", "polar"])
def test_complex_from_parts_takes_a_0d_cpu_tensor_as_a_value(fn):
    # As torch.where: a 0-d CPU tensor beside device tensors is a scalar. (As
    # the first argument it would place the result on the CPU, as on CUDA.)
    a, s = torch.tensor([1.0, 2.0, -3.0]), torch.tensor(0.5)
    want, got = fn(a, s), fn(a.to("neuron"), s)
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), want)


# addr of complex operands (the scaled addcmul kernel is real): composed of
# native complex ops, beta = 0 ignoring self, in place too.
@pytest.mark.parametrize("kw", [{}, {"beta": 0}, {"beta": 2 - 1j, "alpha": 0.5j}], ids=["default", "beta0", "complex"])
def test_addr_of_complex_operands_matches_the_cpu(kw):
    g = torch.Generator().manual_seed(0)
    s, v1, v2 = (torch.randn(*sh, dtype=torch.complex64, generator=g) for sh in ((3, 4), (3,), (4,)))
    if "beta" in kw and kw["beta"] == 0:
        s[0, 0] = complex(float("nan"), 0)
    want = torch.addr(s, v1, v2, **kw)
    got = torch.addr(s.to("neuron"), v1.to("neuron"), v2.to("neuron"), **kw)
    torch.testing.assert_close(got.cpu(), want)
    ref = s.clone().addr_(v1, v2, **kw)
    dev = s.to("neuron").addr_(v1.to("neuron"), v2.to("neuron"), **kw)
    torch.testing.assert_close(dev.cpu(), ref)
    assert_no_fallbacks()


# abs of a complex input with out=: a real out= the magnitude casts to takes
# it, a complex one must have the input's dtype (ATen's
# unary_op_impl_with_complex_to_float_out and its same-dtype iterator).
@pytest.mark.parametrize("out_dtype", [torch.complex64, torch.complex128, torch.bfloat16, torch.float64, torch.int32])
def test_complex_abs_out_dtypes_like_the_cpu(out_dtype):
    x = torch.tensor([1 + 1j, -2 - 0.5j])
    call = lambda d: torch.abs(x.to(d), out=torch.empty(0, dtype=out_dtype, device=d))  # noqa: E731
    if out_dtype in (torch.complex128, torch.int32):
        raises_like_cpu(call, RuntimeError)
    else:
        want, got = call("cpu"), call("neuron").cpu()
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, atol=1e-2, rtol=1e-2)
    assert_no_fallbacks()


# ---- logaddexp (CX_LOGADDEXP: the CPU's complex formula) ---------------------

SPECIALS = [complex(float("inf"), 0), complex(float("-inf"), 1), complex(float("nan"), 0), complex(0, float("inf")),
            complex(float("-inf"), float("-inf")), complex(float("inf"), 2), 0j, complex(1, float("-inf")),
            complex(-3, 0.5)]


def complex_and_grads(fn, *inputs):
    """fn on CPU copies and neuron copies of `inputs` requiring grad: the
    results and the gradients of |sum(out * w)| for a fixed complex w."""
    got = []
    for dev in ("cpu", DEV):
        xs = [t.detach().clone().to(dev).requires_grad_() for t in inputs]
        out = fn(*xs)
        w = crandn(*out.shape, dtype=out.dtype, seed=5).to(dev)
        (out * w).sum().abs().backward()
        got.append((out, [x.grad for x in xs]))
    return got


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_logaddexp_complex(dtype):
    a, b = crandn(5, 7, dtype=dtype, seed=1) * 3, crandn(7, dtype=dtype, seed=2) * 3
    (cpu_out, cpu_g), (dev_out, dev_g) = complex_and_grads(torch.logaddexp, a, b)
    same(dev_out, cpu_out)
    for g_dev, g_cpu in zip(dev_g, cpu_g):
        same(g_dev, g_cpu)
    # special values: every pair, in both orders (ties pick the second as min)
    s = torch.tensor(SPECIALS, dtype=dtype)
    x, y = s.repeat(len(SPECIALS)), s.repeat_interleave(len(SPECIALS))
    same(torch.logaddexp(x.to(DEV), y.to(DEV)), torch.logaddexp(x, y))
    # a real operand promotes to complex, as in the CPU's iterator
    r = rrandn(7, seed=3)
    same(torch.logaddexp(a.to(DEV), r.to(DEV)), torch.logaddexp(a, r))
    same(torch.logaddexp(r.to(DEV), a.to(DEV)), torch.logaddexp(r, a))
    assert_no_fallbacks()


def test_logaddexp_complex_out_and_inplace_dtypes():
    a, b = crandn(4), crandn(4, seed=1)
    out = torch.empty(4, dtype=torch.complex128, device=DEV)
    torch.logaddexp(a.to(DEV), b.to(DEV), out=out)
    same(out, torch.logaddexp(a, b).to(torch.complex128))
    # a complex result cannot be cast into a real out=
    raises_like_cpu(lambda d: torch.logaddexp(a.to(d), b.to(d), out=torch.empty(4, device=d)), RuntimeError)
    # complex32 is outside the CPU kernel's types
    raises_like_cpu(lambda d: torch.logaddexp(a.to(d, torch.complex32), b.to(d, torch.complex32)),
                    NotImplementedError)


def test_conj_physical_out_needs_the_input_dtype():
    x = crandn(3)
    raises_like_cpu(lambda d: torch.conj_physical(x.to(d), out=torch.empty(3, device=d)), RuntimeError)
    raises_like_cpu(lambda d: torch.conj_physical(x.real.to(d), out=torch.empty(3, dtype=torch.float64, device=d)),
                    RuntimeError)
    raises_like_cpu(lambda d: torch.conj_physical(x.real.to(d), out=torch.empty(3, dtype=torch.complex64, device=d)),
                    RuntimeError)
    out = torch.empty(0, dtype=torch.complex64, device=DEV)
    same(torch.conj_physical(x.to(DEV), out=out), torch.conj_physical(x))


# An op without a complex kernel refuses an empty complex tensor too, as the
# CPU's dispatch does (nothing would be launched for it); sgn's out= must
# have the input's dtype, also when empty.
@pytest.mark.parametrize("name,call", [
    ("lt", lambda x: torch.lt(x, x)),
    ("digamma", torch.digamma),
    ("erfc", torch.erfc),
    ("copysign", lambda x: torch.copysign(x, x)),
])
def test_empty_complex_refused_like_the_cpu(name, call):
    raises_like_cpu(lambda d: call(torch.ones(0, 3, dtype=torch.complex64, device=d)), NotImplementedError)


@pytest.mark.parametrize("n", [0, 3])
def test_sgn_out_dtype_checked_like_the_cpu(n):
    raises_like_cpu(lambda d: torch.sgn(torch.ones(n, dtype=torch.bfloat16, device=d),
                                        out=torch.empty(n, device=d)), RuntimeError)
    raises_like_cpu(lambda d: torch.sgn(torch.ones(n, dtype=torch.complex64, device=d),
                                        out=torch.empty(n, dtype=torch.complex128, device=d)), RuntimeError)


# A float16 tensor beside a 0-d complex one promotes to complex32, which the
# CPU's logical kernels do not cover: NotImplementedError at the op.
@pytest.mark.parametrize("fn", [torch.logical_and, torch.logical_or, torch.logical_xor])
def test_logical_ops_refuse_complex32_like_the_cpu(fn):
    raises_like_cpu(lambda d: fn(torch.ones(3, dtype=torch.float16, device=d), torch.tensor(1 + 1j, device=d)),
                    NotImplementedError)


# silu of complex: the CPU's x / (1 + exp(-x)), functional, in-place, out=.
def test_silu_complex_like_the_cpu():
    z = torch.randn(6, dtype=torch.complex64, generator=torch.Generator().manual_seed(3))
    want = F.silu(z)
    torch.testing.assert_close(F.silu(z.to(DEV)).cpu(), want)
    w = z.to(DEV)
    F.silu(w, inplace=True)
    torch.testing.assert_close(w.cpu(), want)
    out = torch.empty(6, dtype=torch.complex64, device=DEV)
    torch.ops.aten.silu.out(z.to(DEV), out=out)
    torch.testing.assert_close(out.cpu(), want)
    assert_no_fallbacks()


# pow of complex64 special values as the CPU computes it: C99's cpowf (0 ** w
# is inf + NaN i for Re w < 0, NaN + NaN i for w = 0 or NaN; Annex G's
# infinities), in float (cpowf's rounding, (-3) ** 5 = -243.00003 - 0.00016i),
# pow.Tensor_Scalar's special forms (x*x for 2, sqrt for 0.5, ...) also for a
# real tensor with a complex exponent, and pow.Scalar's fill for a base of 1.
# Bit for bit: both sides call glibc's functions.
_CX_PARTS = [0.0, -0.0, 1e-30, 0.5, 1.0, -1.0, 2.0, -3.0, 1e18, 3.4e38, float("inf"), float("-inf"), float("nan")]
_CX_EXPS = [complex(a, b) for a in (0.0, 0.5, -0.5, -1.0, 2.0, -2.0, 3.0, -1.3, 5.0, float("inf"), float("nan"))
            for b in (0.0, -0.5, float("inf"))]


def _cx_grid(parts):
    return torch.tensor([complex(a, b) for a in parts for b in parts], dtype=torch.complex64)


def _bitwise(dev, ref):
    torch.testing.assert_close(torch.view_as_real(dev.cpu()), torch.view_as_real(ref), rtol=0, atol=0,
                               equal_nan=True)


def test_pow_complex64_special_values_like_the_cpu():
    x = _cx_grid(_CX_PARTS)
    y = torch.tensor(_CX_EXPS, dtype=torch.complex64)[:, None]
    _bitwise(torch.pow(x.to(DEV), y.to(DEV)), torch.pow(x, y))
    for e in _CX_EXPS + [2, 3, -2, 0.5, -0.5, -1, 1.5]:
        _bitwise(torch.pow(x.to(DEV), e), torch.pow(x, e))
    for dt in (torch.float32, torch.uint8, torch.bool):
        r = torch.tensor([0.0, -0.0, 1.0, 3.0, -3.0, 1e-30, float("inf"), float("nan")]).to(dt)
        for e in _CX_EXPS:
            _bitwise(torch.pow(r.to(DEV), e), torch.pow(r, e))
    for b in (0, False, True, 1, 2.0, 0j, 1 + 0j, 1j):
        _bitwise(torch.pow(b, y.flatten().to(DEV)), torch.pow(b, y.flatten()))
    assert_no_fallbacks()


# sgn of complex64 as the CPU's kernel: its vector body divides each part by
# |z| (0 at 0, so -0 - inf i gives -0 + NaN i, and |3.4e38 + 3.4e38i|
# overflows float to give 0), its scalar function (the rest of a row past
# the last block of 16, and non-contiguous rows) is z / complex(|z|, 0),
# NaN + NaN i for any infinite part. Several lengths put the special values
# in both; log1p is c10's rescaled formula in float (1e-30 + inf i gives
# NaN + NaN i), exp2 scales by ln 2 in float (2 ** 1e18i).
@pytest.mark.parametrize("n", [1, 5, 16, 17, 40])
@pytest.mark.parametrize("fn", ["sgn", "log1p", "exp2"])
def test_complex64_special_values_by_cpu_path(fn, n):
    x = _cx_grid(_CX_PARTS)
    x = torch.cat([x, x.flip(0)])[: (x.numel() * 2 // n) * n].view(-1, n)
    f = getattr(torch, fn)
    for t in (x, x.t()):  # rows of n contiguous elements, then strided ones
        torch.testing.assert_close(torch.view_as_real(f(t.to(DEV)).cpu()), torch.view_as_real(f(t)), equal_nan=True)
    assert_no_fallbacks()


def test_relu_of_complex_refused_as_clamp_before_the_overlap_check():
    """The CPU's relu is clamp_min(0): complex is refused by clamp's meta
    function, before relu_'s iterator would refuse an expanded self."""
    for dev in ("cpu", "neuron"):
        x = torch.ones(1, dtype=torch.complex64, device=dev).expand(3)
        with pytest.raises(NotImplementedError, match="clamp is not supported for complex types"):
            x.relu_()


def test_complex_pow_of_a_real_exponent_beyond_complex64():
    """The CPU converts a real exponent to complex<double>: 3.5e38 is not an
    overflow there (it was 'cannot be converted to c10::complex<float>')."""
    x = torch.tensor([1 + 1j, 0.5, 2j, -1, 0], dtype=torch.complex64)
    for e in (3.5e38, -3.5e38, 2.5):
        got = torch.pow(x.to("neuron"), e).cpu()
        want = torch.pow(x, e)
        assert torch.equal(torch.view_as_real(got).nan_to_num(7.0), torch.view_as_real(want).nan_to_num(7.0)), e


# addcmul / addcdiv of complex operands as ATen's kernel: value * t1 first
# (a real value is a complex with a zero imaginary part, so an infinite t1
# meets 0 * inf: NaN + NaN i where value * (t1 * t2) gave inf), in float for
# complex64; the vector body's products are textbook, the scalar function's
# (past the last block of 16 in a row, strided rows) contracted into fmas
# (-3e38 * 1e30 + inf is inf there). Random mixes of special parts, rows of
# several lengths, contiguous and transposed, bit for bit.
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("n", [5, 16, 21])
@pytest.mark.parametrize("fn", ["addcmul", "addcdiv"])
def test_addcmul_addcdiv_special_values_like_the_cpu(fn, n, dtype):
    parts = torch.tensor([0.0, -0.0, 1.0, -1.0, 2.5, 1e30, -3e38, float("inf"), float("-inf"), float("nan")])
    g = torch.Generator().manual_seed(n)

    def pick():
        i = torch.randint(0, parts.numel(), (2, 40 * n), generator=g)
        return torch.complex(parts[i[0]], parts[i[1]]).to(dtype).view(-1, n)

    s, t1, t2 = pick(), pick(), pick()
    f = getattr(torch, fn)
    layouts = (lambda x: x, lambda x: x.t(), lambda x: x[:, ::2], lambda x: x[::2].t())  # the last two strided
    for value in (1, 0.5, -2, complex(0.5, 2.0)):
        for lay in layouts:
            ref = f(lay(s), lay(t1), lay(t2), value=value)
            dev = f(lay(s.to(DEV)), lay(t1.to(DEV)), lay(t2.to(DEV)), value=value).cpu()
            if fn == "addcdiv":  # the quotient's rounding within an ulp; inf and NaN parts exact
                torch.testing.assert_close(torch.view_as_real(dev), torch.view_as_real(ref), equal_nan=True)
            else:
                _bitwise(dev, ref)
    assert_no_fallbacks()
