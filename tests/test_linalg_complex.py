"""LINALG family on complex input (complex64, complex128), and linalg.eig /
eigvals for real and complex input: LU (factor, unpack, solve, inv, det,
slogdet, solve), Cholesky and triangular solves, QR (geqrf,
householder_product, ormqr, linalg.qr), eigh/eigvalsh, svd/svdvals, eig.
Every result is compared with PyTorch's CPU (LAPACK), sizes, dtypes and
strides included, and nothing may fall back.

What is unique is compared directly: LU, pivots, QR with LAPACK's phase
convention, Cholesky factors, eigenvalues, singular values, and linalg.eig's
eigenvectors (the kernel follows LAPACK's geev, so for well-separated
eigenvalues they match the CPU's in order and phase). Eigenvectors of eigh
and singular vectors are unique only up to a phase per column: they are
checked through reconstruction, unitarity and |<v_cpu, v_dev>| = 1.

Tolerances (rtol, atol): complex64 TOL_ACCUMULATED's float32 entry (1e-4),
since the CPU computes in single precision and the device in double;
complex128 1e-9 (both in double; the device's matrix products run at
float32 precision, so anything that goes through one, such as autograd's
formulas and the reconstruction checks, gets 1e-3 for both dtypes, at the
assertion)."""
import pytest
import torch
from torch.testing import assert_close

from helpers import TOL_ACCUMULATED, assert_no_fallbacks, tol_kw

D = "neuron"
CDTYPES = [torch.complex64, torch.complex128]
TOL = {torch.complex64: tol_kw(TOL_ACCUMULATED, torch.float32), torch.complex128: dict(rtol=1e-9, atol=1e-9),
       torch.float32: tol_kw(TOL_ACCUMULATED, torch.float32), torch.float64: dict(rtol=1e-9, atol=1e-9)}
LOOSE = dict(rtol=1e-3, atol=1e-3)  # through the device's float32-precision matrix products


def to(t):
    return t.to(D)


def crandn(*shape, dtype=torch.complex64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=g)


def well_conditioned(*shape, dtype, seed=0):
    a = crandn(*shape, dtype=dtype, seed=seed)
    n = shape[-1]
    return a + n * torch.eye(n, dtype=dtype) if shape[-2] == n else a


def hpd(*shape, dtype, seed=0):
    x = crandn(*shape, dtype=dtype, seed=seed)
    return x @ x.mH + shape[-1] * torch.eye(shape[-1], dtype=dtype)


def same(got, want, **tol):
    """Same shape, dtype, strides and (within tol) values."""
    assert got.device.type == "neuron"
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    assert got.stride() == want.stride(), (got.stride(), want.stride())
    if want.is_floating_point() or want.is_complex():
        assert_close(got.cpu(), want, **(tol or TOL[want.dtype if want.is_complex() or want.is_floating_point()
                                                    else torch.float32]))
    else:
        assert torch.equal(got.cpu(), want)


def same_all(got, want, tol):
    for g, w in zip(got, want):
        same(g, w, **tol)


def phase_equal(v, vc, tol):
    """Columns equal up to a unit factor each: |<vc_j, v_j>| = 1."""
    inner = (vc.conj() * v).sum(-2).abs()
    assert_close(inner, torch.ones_like(inner), **tol)


# ---- LU family ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (2, 3, 4), (5, 3), (1, 1), (0, 3, 3), (2, 0, 0)])
def test_lu_factor_unpack(dtype, shape):
    a = crandn(*shape, dtype=dtype, seed=1)
    same_all(torch.linalg.lu_factor_ex(to(a)), torch.linalg.lu_factor_ex(a), TOL[dtype])
    same_all(torch.linalg.lu(to(a)), torch.linalg.lu(a), TOL[dtype])
    LU, piv = torch.linalg.lu_factor(a)
    same_all(torch.lu_unpack(to(LU), to(piv)), torch.lu_unpack(LU, piv), TOL[dtype])
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [True, False])
def test_lu_solve(dtype, left, adjoint):
    a = well_conditioned(2, 1, 4, 4, dtype=dtype, seed=2)
    b = crandn(3, 4, 2, dtype=dtype, seed=3) if left else crandn(3, 2, 4, dtype=dtype, seed=3)
    LU, piv = torch.linalg.lu_factor(a)
    same(torch.linalg.lu_solve(to(LU), to(piv), to(b), left=left, adjoint=adjoint),
         torch.linalg.lu_solve(LU, piv, b, left=left, adjoint=adjoint))
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (2, 3, 3), (2, 2, 5, 5), (0, 3, 3), (2, 0, 0)])
def test_inv_det_slogdet_solve(dtype, shape):
    a = well_conditioned(*shape, dtype=dtype, seed=4)
    ad = to(a)
    same(torch.linalg.inv(ad), torch.linalg.inv(a))
    same_all(torch.linalg.inv_ex(ad), torch.linalg.inv_ex(a), TOL[dtype])
    same(torch.linalg.det(ad), torch.linalg.det(a))
    same_all(torch.linalg.slogdet(ad), torch.linalg.slogdet(a), TOL[dtype])
    n = shape[-1]
    b = crandn(*shape[:-2], n, 3, dtype=dtype, seed=5)
    same(torch.linalg.solve(ad, to(b)), torch.linalg.solve(a, b))
    same(torch.linalg.solve(ad, to(b.mT), left=False), torch.linalg.solve(a, b.mT, left=False))
    v = crandn(n, dtype=dtype, seed=6)
    same(torch.linalg.solve(ad, to(v)), torch.linalg.solve(a, v))
    same_all(torch.linalg.solve_ex(ad, to(b)), torch.linalg.solve_ex(a, b), TOL[dtype])
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", CDTYPES)
def test_singular_and_shape_errors(dtype):
    z = torch.zeros(3, 3, dtype=dtype)
    for f in (torch.linalg.inv, lambda x: torch.linalg.solve(x, torch.ones(3, dtype=dtype, device=x.device))):
        with pytest.raises(torch.linalg.LinAlgError) as cpu:
            f(z)
        with pytest.raises(torch.linalg.LinAlgError) as dev:
            f(to(z))
        assert str(dev.value) == str(cpu.value)
    with pytest.raises(torch.linalg.LinAlgError, match=r"\(Batch element 1\): The diagonal element 1 is zero"):
        torch.linalg.inv(to(torch.stack([torch.eye(3, dtype=dtype), z])))
    with pytest.raises(torch.linalg.LinAlgError) as cpu:
        torch.linalg.cholesky(-torch.eye(3, dtype=dtype))
    with pytest.raises(torch.linalg.LinAlgError) as dev:
        torch.linalg.cholesky(to(-torch.eye(3, dtype=dtype)))
    assert str(dev.value) == str(cpu.value)
    s = torch.tensor([[1 + 1j, 2 - 1j], [2 + 2j, 4 - 2j]], dtype=dtype)  # rank 1
    same(torch.linalg.det(to(s)), torch.linalg.det(s))
    same_all(torch.linalg.slogdet(to(s)), torch.linalg.slogdet(s), TOL[dtype])
    assert torch.linalg.inv_ex(to(s)).info.item() == torch.linalg.inv_ex(s).info.item() == 2
    for f in (torch.linalg.inv, torch.linalg.det, torch.linalg.eigvals, torch.linalg.eig, torch.linalg.cholesky,
              torch.linalg.eigh):
        with pytest.raises(RuntimeError, match="square"):
            f(torch.ones(2, 3, dtype=dtype, device=D))
    with pytest.raises(RuntimeError, match="Low precision"):
        torch.linalg.inv(torch.eye(2, dtype=torch.complex32, device=D))


# ---- Cholesky and triangular solves -------------------------------------------------

@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (2, 3, 5, 5), (0, 3, 3)])
def test_cholesky(dtype, upper, shape):
    a = hpd(*shape, dtype=dtype, seed=7)
    same(torch.linalg.cholesky(to(a), upper=upper), torch.linalg.cholesky(a, upper=upper))
    same_all(torch.linalg.cholesky_ex(to(a), upper=upper), torch.linalg.cholesky_ex(a, upper=upper), TOL[dtype])
    L = torch.linalg.cholesky(a, upper=upper)
    b = crandn(*shape[:-1], 2, dtype=dtype, seed=8)
    same(torch.cholesky_solve(to(b), to(L), upper=upper), torch.cholesky_solve(b, L, upper=upper))
    same(torch.cholesky_inverse(to(L), upper=upper), torch.cholesky_inverse(L, upper=upper))
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("upper", [True, False])
def test_solve_triangular(dtype, left, upper):
    a = well_conditioned(2, 4, 4, dtype=dtype, seed=9)
    a = a.triu() if upper else a.tril()
    b = crandn(2, 4, 3, dtype=dtype, seed=10) if left else crandn(2, 3, 4, dtype=dtype, seed=10)
    for unit in (False, True):
        same(torch.linalg.solve_triangular(to(a), to(b), upper=upper, left=left, unitriangular=unit),
             torch.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit))
    # Conjugated views (the op is a fallthrough of the Conjugate key).
    same(torch.linalg.solve_triangular(to(a).mH, to(b) if left else to(b), upper=not upper, left=left),
         torch.linalg.solve_triangular(a.mH, b, upper=not upper, left=left))
    same(torch.linalg.solve_triangular(to(a), to(b).conj(), upper=upper, left=left),
         torch.linalg.solve_triangular(a, b.conj(), upper=upper, left=left))
    for transpose in (False, True):
        same_all(torch.triangular_solve(to(b if left else b.mT), to(a), upper=upper, transpose=transpose),
                 torch.triangular_solve(b if left else b.mT, a, upper=upper, transpose=transpose), TOL[dtype])
    assert_no_fallbacks()


# ---- QR ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (1, 1), (0, 3, 3)])
def test_qr(dtype, mode, shape):
    a = crandn(*shape, dtype=dtype, seed=11)
    same_all(torch.linalg.qr(to(a), mode=mode), torch.linalg.qr(a, mode=mode), TOL[dtype])
    qr, tau = torch.geqrf(a)
    same_all(torch.geqrf(to(a)), (qr, tau), TOL[dtype])
    if shape[-2] >= shape[-1]:
        same(torch.linalg.householder_product(to(qr), to(tau)), torch.linalg.householder_product(qr, tau))
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
def test_ormqr(dtype, left, transpose):
    qr, tau = torch.geqrf(crandn(2, 5, 3, dtype=dtype, seed=12))
    c = crandn(2, 5, 2, dtype=dtype, seed=13) if left else crandn(2, 2, 5, dtype=dtype, seed=13)
    same(torch.ormqr(to(qr), to(tau), to(c), left, transpose), torch.ormqr(qr, tau, c, left, transpose))
    assert_no_fallbacks()


# ---- eigh, svd ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (3, 4, 4), (0, 3, 3)])
def test_eigh(dtype, uplo, shape):
    a = crandn(*shape, dtype=dtype, seed=14)
    w, v = torch.linalg.eigh(to(a), UPLO=uplo)
    wc, vc = torch.linalg.eigh(a, UPLO=uplo)
    same(w, wc)
    assert v.shape == vc.shape and v.dtype == vc.dtype and v.stride() == vc.stride()
    herm = a.tril() + a.tril(-1).mH if uplo == "L" else a.triu() + a.triu(1).mH
    herm = herm - 1j * herm.diagonal(0, -2, -1).imag.diag_embed()  # only the diagonal's real part is read
    v = v.cpu()
    assert_close((v * w.cpu().unsqueeze(-2)) @ v.mH, herm, **TOL[dtype])
    phase_equal(v, vc, TOL[dtype])  # distinct eigenvalues: unique up to phase
    same(torch.linalg.eigvalsh(to(a), UPLO=uplo), wc)
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (1, 1), (3, 0), (0, 2, 2)])
def test_svd(dtype, full, shape):
    a = crandn(*shape, dtype=dtype, seed=15)
    U, S, Vh = torch.linalg.svd(to(a), full_matrices=full)
    Uc, Sc, Vhc = torch.linalg.svd(a, full_matrices=full)
    same(S, Sc)
    for x, y in ((U, Uc), (Vh, Vhc)):
        assert x.shape == y.shape and x.dtype == y.dtype and x.stride() == y.stride()
    k = S.shape[-1]
    U, Vh = U.cpu(), Vh.cpu()
    assert_close((U[..., :k] * S.cpu().unsqueeze(-2).to(dtype)) @ Vh[..., :k, :], a, **TOL[dtype])
    eye = torch.eye(U.shape[-1], dtype=dtype).expand(U.shape[:-2] + (U.shape[-1], U.shape[-1]))
    assert_close(U.mH @ U, eye, **TOL[dtype])
    phase_equal(U[..., :k], Uc[..., :k], TOL[dtype])
    same(torch.linalg.svdvals(to(a)), Sc)
    assert_no_fallbacks()


# ---- eig -------------------------------------------------------------------------------

def check_eig(a, tol):
    w, v = torch.linalg.eig(to(a))
    wc, vc = torch.linalg.eig(a)
    same(w, wc, **tol)  # geev's order
    if a.is_complex():
        same(v, vc, **tol)  # and zgeev's normalisation: unit norm, largest entry real and positive
    else:
        # A real input's vectors: unit norm, largest entry real, but its sign
        # (for a complex pair, the sign LAPACK's rotation leaves) comes out of
        # the QR iterations' rounding and differs from the CPU's for about one
        # matrix in eight: compared up to a unit factor.
        assert v.shape == vc.shape and v.dtype == vc.dtype and v.stride() == vc.stride()
        phase_equal(v.cpu(), vc, tol)
    w2 = torch.linalg.eigvals(to(a))
    same(w2, torch.linalg.eigvals(a), **tol)
    v = v.cpu()
    assert_close(a.to(v.dtype) @ v, v * w.cpu().unsqueeze(-2), **tol)


@pytest.mark.parametrize("dtype", [torch.float64] + CDTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (5, 5), (3, 6, 6), (2, 2, 4, 4), (0, 3, 3), (2, 0, 0)])
def test_eig(dtype, shape):
    check_eig(crandn(*shape, dtype=dtype, seed=16), TOL[dtype])
    assert_no_fallbacks()


def test_eig_float32_input():
    # The device computes in double, the CPU's sgeev in single precision:
    # close eigenvalues may converge in another order, so they are matched
    # and the decomposition property is checked instead.
    a = crandn(4, 6, 6, dtype=torch.float32, seed=17)
    w, v = torch.linalg.eig(to(a))
    assert w.dtype == v.dtype == torch.complex64 and v.stride() == torch.linalg.eig(a)[1].stride()
    wc = torch.linalg.eigvals(a.double())
    for b in range(4):
        for x in w[b].cpu():
            assert (wc[b] - x).abs().min() < 1e-5
    v = v.cpu()
    assert_close(a.to(v.dtype) @ v, v * w.cpu().unsqueeze(-2), **TOL[torch.float32])
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_eig_real_conjugate_pairs(dtype):
    # Rotation blocks: eigenvalues r (cos t +- i sin t), the + one first, with
    # conjugate eigenvectors; a real eigenvalue in between.
    t = torch.tensor([0.3, 1.1], dtype=torch.float64)
    blocks = [torch.tensor([[c, -s], [s, c]], dtype=torch.float64) * (k + 1) for k, (c, s) in
              enumerate(zip(t.cos(), t.sin()))]
    a = torch.block_diag(blocks[0], torch.tensor([[-5.0]], dtype=torch.float64), blocks[1])
    q, _ = torch.linalg.qr(crandn(5, 5, dtype=torch.float64, seed=18))
    a = (q @ a @ q.mT).to(dtype)
    w, v = torch.linalg.eig(to(a))
    w, v = w.cpu(), v.cpu()
    want = torch.tensor([torch.polar(torch.tensor(1.0 + k, dtype=torch.float64), x) for k, x in enumerate(t)] + [-5.0 + 0j],
                        dtype=torch.complex128)
    for z in want:
        assert (w.to(torch.complex128) - z).abs().min() < 1e-5
        if z.imag != 0:
            i = (w.to(torch.complex128) - z).abs().argmin()
            assert w[i + 1] == w[i].conj() and torch.equal(v[:, i + 1], v[:, i].conj())
    assert_close(w, torch.linalg.eigvals(a), **TOL[dtype])
    assert_no_fallbacks()


def test_eig_out_and_errors():
    a = crandn(3, 3, dtype=torch.float32, seed=19)
    w, v = torch.empty(0, dtype=torch.complex64, device=D), torch.empty(0, dtype=torch.complex64, device=D)
    torch.linalg.eig(to(a), out=(w, v))
    wc, vc = torch.linalg.eig(a)
    assert_close(w.cpu(), wc, **TOL[torch.float32])
    phase_equal(v.cpu(), vc, TOL[torch.float32])
    with pytest.raises(RuntimeError, match="safely castable"):
        torch.linalg.eig(to(a), out=(torch.empty(0, device=D), v))
    with pytest.raises(RuntimeError, match="should not contain infs or NaNs"):
        torch.linalg.eig(to(torch.tensor([[1.0, float("nan")], [0.0, 1.0]])))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.linalg.eig(torch.ones(3, device=D))


def test_out_variants_complex():
    a = well_conditioned(3, 3, dtype=torch.complex64, seed=20)
    out = torch.empty(0, dtype=torch.complex64, device=D)
    torch.linalg.inv(to(a), out=out)
    assert_close(out.cpu(), torch.linalg.inv(a), **TOL[torch.complex64])
    U, Vh = (torch.empty(0, dtype=torch.complex64, device=D) for _ in range(2))
    S = torch.empty(0, device=D)
    torch.linalg.svd(to(a), out=(U, S, Vh))
    assert_close(S.cpu(), torch.linalg.svdvals(a), **TOL[torch.complex64])
    w, V = torch.empty(0, device=D), torch.empty(0, dtype=torch.complex64, device=D)
    torch.linalg.eigh(to(a), out=(w, V))
    assert_close(w.cpu(), torch.linalg.eigvalsh(a), **TOL[torch.complex64])
    Q, R = (torch.empty(0, dtype=torch.complex64, device=D) for _ in range(2))
    torch.linalg.qr(to(a), out=(Q, R))
    assert_close(R.cpu(), torch.linalg.qr(a).R, **TOL[torch.complex64])
    assert_no_fallbacks()


# ---- gradients -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", CDTYPES)
def test_gradients(dtype):
    """Backward through PyTorch's formulas on the device against the CPU's
    backward, for real-valued losses of complex results (eigh and svd: of
    phase-invariant quantities, as their formulas require)."""
    a = well_conditioned(2, 4, 4, dtype=dtype, seed=21)
    b = crandn(2, 4, 2, dtype=dtype, seed=22)
    h = hpd(2, 4, 4, dtype=dtype, seed=23)
    cases = [
        ("inv", a, lambda x: torch.linalg.inv(x)),
        ("det", a, lambda x: torch.linalg.det(x)),
        ("slogdet", a, lambda x: torch.linalg.slogdet(x).logabsdet),
        ("solve", a, lambda x: torch.linalg.solve(x, b.to(x.device))),
        ("eigh", h, lambda x: torch.cat([torch.linalg.eigh(x).eigenvalues.to(x.dtype).flatten(),
                                         torch.linalg.eigh(x).eigenvectors.abs().pow(2).to(x.dtype).flatten()])),
        ("svd", a, lambda x: torch.cat([torch.linalg.svd(x).S.to(x.dtype).flatten(),
                                        torch.linalg.svd(x).U.abs().pow(2).to(x.dtype).flatten()])),
        ("eig", a, lambda x: torch.linalg.eigvals(x)),
        ("cholesky", h, lambda x: torch.linalg.cholesky(x)),
        ("qr", a, lambda x: torch.linalg.qr(x).R),
    ]
    for name, x0, f in cases:
        xc = x0.clone().requires_grad_()
        xd = to(x0).requires_grad_()
        yc, yd = f(xc), f(xd)
        assert_close(yd.detach().cpu(), yc.detach(), **LOOSE, msg=name)
        g = crandn(*yc.shape, dtype=yc.dtype, seed=24)
        (gc,) = torch.autograd.grad((yc * g.conj()).real.sum(), xc)
        (gd,) = torch.autograd.grad((yd * to(g).conj()).real.sum(), xd)
        assert_close(gd.cpu(), gc, **LOOSE, msg=name)
    assert_no_fallbacks()
