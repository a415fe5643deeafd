"""LINALG family: matrix decompositions (LU, QR, SVD, eigh, LDL), the solves,
inverses and determinants built on them, Cholesky and triangular solves,
lstsq and matrix_exp. Every result is compared with PyTorch's CPU (LAPACK),
and nothing may fall back. Singular/eigen vectors are unique only up to sign, so they are checked
through sign-invariant quantities (reconstruction, |U|, projectors).
Tolerances: helpers.TOL_ACCUMULATED (float32 1e-4); a few solves, inverses
and gradients of them get 1e-3 at the assertion."""
import pytest
import torch
from torch.testing import assert_close

from helpers import TOL_ACCUMULATED, assert_no_fallbacks, tol_kw

D = "neuron"
TOL = tol_kw(TOL_ACCUMULATED, torch.float32)


def well_conditioned(*shape):
    a = torch.randn(*shape)
    n = shape[-1]
    return a + n * torch.eye(n) if shape[-2] == n else a


def to(t):
    return t.to(D)


@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (2, 3, 4), (0, 3, 3), (5, 3)])
def test_lu_factor_unpack(shape):
    torch.manual_seed(0)
    a = torch.randn(*shape)
    for got, want in zip(torch.linalg.lu_factor_ex(to(a)), torch.linalg.lu_factor_ex(a)):
        assert_close(got.cpu(), want, **TOL)
    for got, want in zip(torch.linalg.lu(to(a)), torch.linalg.lu(a)):
        assert_close(got.cpu(), want, **TOL)
    assert_no_fallbacks()


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [True, False])
def test_lu_solve_broadcast(left, adjoint):
    torch.manual_seed(1)
    a = well_conditioned(2, 1, 4, 4)
    b = torch.randn(3, 4, 2) if left else torch.randn(3, 2, 4)
    lu, piv = torch.linalg.lu_factor(a)
    got = torch.linalg.lu_solve(to(lu), to(piv), to(b), left=left, adjoint=adjoint)
    assert_close(got.cpu(), torch.linalg.lu_solve(lu, piv, b, left=left, adjoint=adjoint), **TOL)
    assert_no_fallbacks()


def test_solve_inv_det_with_grad():
    torch.manual_seed(2)
    a = well_conditioned(3, 4, 4).requires_grad_()
    b = torch.randn(3, 4).requires_grad_()
    ad, bd = to(a.detach()).requires_grad_(), to(b.detach()).requires_grad_()
    for f in (lambda x, y: torch.linalg.solve(x, y), lambda x, y: torch.linalg.inv(x) @ y.unsqueeze(-1),
              lambda x, y: torch.linalg.det(x) * y.sum(-1), lambda x, y: torch.linalg.slogdet(x)[1] * y.sum(-1)):
        want = f(a, b)
        got = f(ad, bd)
        assert_close(got.detach().cpu(), want.detach(), **TOL)
        g = torch.randn(want.shape)
        gw = torch.autograd.grad(want, (a, b), g)
        gg = torch.autograd.grad(got, (ad, bd), to(g))
        for x, y in zip(gg, gw):
            assert_close(x.cpu(), y, rtol=1e-3, atol=1e-3)
    assert_no_fallbacks()


def test_singular_errors():
    z = torch.zeros(2, 3, 3, device=D)
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        torch.linalg.inv(z)
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.solve(z, torch.ones(2, 3, device=D))
    info = torch.linalg.inv_ex(z).info
    assert info.cpu().tolist() == [1, 1]
    assert torch.linalg.det(z).cpu().tolist() == [0.0, 0.0]
    with pytest.raises(RuntimeError, match="square"):
        torch.linalg.inv(torch.ones(2, 3, device=D))
    with pytest.raises(RuntimeError):
        torch.linalg.lu_factor(torch.ones(3, 3, device=D, dtype=torch.int64))


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_qr_matches_lapack(mode, shape):
    torch.manual_seed(3)
    a = torch.randn(*shape)
    for got, want in zip(torch.linalg.qr(to(a), mode=mode), torch.linalg.qr(a, mode=mode)):
        assert_close(got.cpu(), want, **TOL)
    qr, tau = torch.geqrf(a)
    for got, want in zip(torch.geqrf(to(a)), (qr, tau)):
        assert_close(got.cpu(), want, **TOL)
    if shape[-2] >= shape[-1]:
        assert_close(torch.linalg.householder_product(to(qr), to(tau)).cpu(),
                     torch.linalg.householder_product(qr, tau), **TOL)
    assert_no_fallbacks()


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
def test_ormqr(left, transpose):
    torch.manual_seed(4)
    qr, tau = torch.geqrf(torch.randn(2, 5, 3))
    c = torch.randn(2, 5, 2) if left else torch.randn(2, 2, 5)
    got = torch.ormqr(to(qr), to(tau), to(c), left, transpose)
    assert_close(got.cpu(), torch.ormqr(qr, tau, c, left, transpose), **TOL)
    assert_no_fallbacks()


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (3, 0), (0, 2, 2)])
def test_svd(full, shape):
    torch.manual_seed(5)
    a = torch.randn(*shape)
    U, S, Vh = torch.linalg.svd(to(a), full_matrices=full)
    Uc, Sc, Vhc = torch.linalg.svd(a, full_matrices=full)
    assert U.shape == Uc.shape and Vh.shape == Vhc.shape
    assert_close(S.cpu(), Sc, **TOL)
    k = S.shape[-1]
    U, Vh = U.cpu(), Vh.cpu()
    assert_close((U[..., :k] * S.cpu().unsqueeze(-2)) @ Vh[..., :k, :], a, **TOL)
    assert_close(U[..., :k].abs(), Uc[..., :k].abs(), **TOL)  # distinct singular values: same up to sign
    assert_close(U.mT @ U, torch.eye(U.shape[-1]).expand(U.mT.shape[:-1] + (U.shape[-1],)), **TOL)
    assert_close(torch.linalg.svdvals(to(a)).cpu(), Sc, **TOL)
    assert_close(torch.linalg.pinv(to(a)).cpu(), torch.linalg.pinv(a), rtol=1e-3, atol=1e-3)
    assert_no_fallbacks()


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(uplo):
    torch.manual_seed(6)
    a = torch.randn(3, 5, 5)
    w, v = torch.linalg.eigh(to(a), UPLO=uplo)
    wc, vc = torch.linalg.eigh(a, UPLO=uplo)
    assert_close(w.cpu(), wc, **TOL)
    sym = a.tril() + a.tril(-1).mT if uplo == "L" else a.triu() + a.triu(1).mT
    assert_close((v.cpu() * w.cpu().unsqueeze(-2)) @ v.cpu().mT, sym, **TOL)
    assert_close(v.cpu().abs(), vc.abs(), **TOL)
    assert_close(torch.linalg.eigvalsh(to(a), UPLO=uplo).cpu(), wc, **TOL)
    assert_no_fallbacks()


def test_ldl_factor_solve():
    torch.manual_seed(7)
    a = torch.randn(2, 6, 6)
    a = a + a.mT
    b = torch.randn(2, 6, 3)
    LD, piv, info = torch.linalg.ldl_factor_ex(to(a))
    LDc, pivc, infoc = torch.linalg.ldl_factor_ex(a)
    assert_close(LD.cpu(), LDc, **TOL)
    assert torch.equal(piv.cpu(), pivc) and torch.equal(info.cpu(), infoc)
    assert_close(torch.linalg.ldl_solve(LD, piv, to(b)).cpu(), torch.linalg.ldl_solve(LDc, pivc, b), **TOL)
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matrix_exp(dtype):
    torch.manual_seed(8)
    a = (torch.randn(3, 4, 4) * 2).to(dtype)
    want = torch.linalg.matrix_exp(a.double()).to(dtype)
    tol = tol_kw(TOL_ACCUMULATED, dtype)
    assert_close(torch.linalg.matrix_exp(to(a)).cpu(), want, **tol)
    assert_no_fallbacks()


def test_cholesky_family_and_triangular_solve():
    torch.manual_seed(9)
    x = torch.randn(2, 4, 4)
    spd = x @ x.mT + torch.eye(4)
    b = torch.randn(2, 4, 3)
    for upper in (False, True):
        L = torch.linalg.cholesky(spd, upper=upper)
        assert_close(torch.cholesky(to(spd), upper=upper).cpu(), L, **TOL)
        assert_close(torch.cholesky_inverse(to(L), upper=upper).cpu(), torch.cholesky_inverse(L, upper=upper),
                     rtol=1e-3, atol=1e-3)
        assert_close(torch.cholesky_solve(to(b), to(L), upper=upper).cpu(), torch.cholesky_solve(b, L, upper=upper),
                     rtol=1e-3, atol=1e-3)
        for transpose in (False, True):
            got = torch.triangular_solve(to(b), to(L), upper=upper, transpose=transpose)
            want = torch.triangular_solve(b, L, upper=upper, transpose=transpose)
            for g, w in zip(got, want):
                assert_close(g.cpu(), w, rtol=1e-3, atol=1e-3)
    with pytest.raises(torch.linalg.LinAlgError):
        torch.cholesky(-torch.eye(3, device=D))
    assert_no_fallbacks()


@pytest.mark.parametrize("driver", [None, "gels", "gelsd", "gelss"])
def test_lstsq(driver):
    torch.manual_seed(10)
    a, b = torch.randn(2, 6, 3), torch.randn(2, 6, 2)
    got = torch.linalg.lstsq(to(a), to(b), driver=driver)
    want = torch.linalg.lstsq(a, b, driver=driver)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert_close(g.cpu(), w, rtol=1e-3, atol=1e-3)
    assert_no_fallbacks()


def test_out_variants_resize():
    torch.manual_seed(11)
    a = well_conditioned(3, 3)
    out = torch.empty(0, device=D)
    torch.linalg.inv(to(a), out=out)
    assert_close(out.cpu(), torch.linalg.inv(a), **TOL)
    U, S, Vh = (torch.empty(0, device=D) for _ in range(3))
    torch.linalg.svd(to(a), out=(U, S, Vh))
    assert_close(S.cpu(), torch.linalg.svdvals(a), **TOL)
    assert_no_fallbacks()


def test_householder_product_without_reflectors():
    # k = 0: Q is the first columns of the identity (the empty tau has no data).
    for shape, tshape in (((5, 5), (0,)), ((2, 5, 3), (2, 0))):
        a, tau = torch.randn(*shape), torch.empty(*tshape)
        assert torch.equal(torch.linalg.householder_product(to(a), to(tau)).cpu(),
                           torch.linalg.householder_product(a, tau))
    assert_no_fallbacks()
