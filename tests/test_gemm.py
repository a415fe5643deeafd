"""GEMM family: mm, addmm, bmm and matmul (transposed operands, shape errors)
against PyTorch on the CPU with zero CPU fallbacks. Complex matrix multiplies
are in test_complex.py, addr in test_nn.py."""
import pytest
import torch
import torch.nn.functional as F

from helpers import assert_no_fallbacks, close, raises_like_cpu


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


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n", [2, 40])
def test_alpha_zero_ignores_the_product_where_the_cpu_does(dtype, n):
    """alpha = 0: BLAS does not read A and B, so a NaN there stays out (the
    CPU's float32/float64 addmm, addmv, addbmm, and baddbmm from 400
    multiply-adds per batch in bfloat16 too); its own loops (16-bit addmm,
    small or float16 baddbmm) multiply NaN by 0."""
    nan = float("nan")
    g = torch.Generator().manual_seed(n)
    a, b, c = (torch.randn(n, n, generator=g).to(dtype) for _ in range(3))
    a[0, 0] = nan
    v, y = torch.randn(n, generator=g).to(dtype), torch.randn(n, generator=g).to(dtype)
    v[0] = nan
    ba, bb, bc = (t.expand(3, n, n).clone() for t in (a, b, c))
    cases = [
        lambda d: torch.addmm(c.to(d), a.to(d), b.to(d), beta=2, alpha=0),
        lambda d: torch.addmm(c.to(d), a.to(d), b.to(d), beta=0, alpha=0),
        lambda d: torch.addmv(y.to(d), a.to(d), v.to(d), beta=2, alpha=0),
        lambda d: torch.baddbmm(bc.to(d), ba.to(d), bb.to(d), beta=2, alpha=0),
        lambda d: torch.addbmm(c.to(d), ba.to(d), bb.to(d), beta=0.5, alpha=0),
    ]
    for k, f in enumerate(cases):
        want, got = f("cpu"), f("neuron").cpu()
        assert torch.equal(got.isnan(), want.isnan()), k
        fin = want.isfinite()
        # the CPU's bfloat16 oneDNN baddbmm is off by a few units there; beta * C is the exact answer
        ref = 2 * bc if (dtype == torch.bfloat16 and k == 3 and n == 40) else want
        torch.testing.assert_close(got[fin].float(), ref[fin].float(), rtol=1e-2, atol=1e-2, msg=str(k))
    assert_no_fallbacks()


# bmm's meta checks shapes only and gives the result batch2's dtype; the
# CPU's kernel compares the operands' dtypes only when it has products to
# compute, so empty results and K = 0 take mixed dtypes (also through einsum
# and matmul). baddbmm's meta first expands self, then wants self's dtype
# to be batch1's.
@pytest.mark.parametrize("case", [
    ("bmm empty M", lambda d: torch.bmm(torch.ones(2, 0, 3, dtype=torch.double, device=d), torch.ones(2, 3, 4, device=d))),
    ("bmm K=0", lambda d: torch.bmm(torch.ones(2, 3, 0, dtype=torch.uint8, device=d), torch.ones(2, 0, 4, device=d))),
    ("bmm empty batch", lambda d: torch.bmm(torch.ones(0, 3, 2, dtype=torch.half, device=d),
                                            torch.ones(0, 2, 4, device=d))),
    ("baddbmm K=0", lambda d: torch.baddbmm(torch.ones(2, 3, 4, device=d), torch.ones(2, 3, 0, device=d),
                                            torch.ones(2, 0, 4, dtype=torch.double, device=d), beta=0.5)),
    ("einsum K=0", lambda d: torch.einsum("ij,jk->ik", torch.ones(2, 0, dtype=torch.double, device=d),
                                          torch.ones(0, 8, device=d))),
    ("addmm K=0 scales self in place", lambda d: torch.addmm(
        torch.tensor([[3]], device=d), torch.empty(3, 0, dtype=torch.long, device=d),
        torch.empty(0, 3, dtype=torch.long, device=d), beta=2)),
    ("baddbmm_ K=0", lambda d: torch.ones(2, 3, 3, dtype=torch.bfloat16, device=d).baddbmm_(
        torch.empty(2, 3, 0, dtype=torch.bfloat16, device=d), torch.empty(2, 0, 3, dtype=torch.bfloat16, device=d),
        beta=0.3)),
    ("bool empty", lambda d: torch.bmm(torch.ones(1, 0, 3, dtype=torch.bool, device=d),
                                       torch.ones(1, 3, 4, dtype=torch.bool, device=d))),
    ("addbmm no batch", lambda d: torch.addbmm(torch.ones(2, 4, device=d), torch.ones(0, 2, 3, dtype=torch.uint8,
                                                                                     device=d),
                                               torch.ones(0, 3, 4, device=d), beta=0.5)),
], ids=lambda c: c[0])
def test_bmm_of_mixed_dtypes_without_products_is_computed_like_the_cpu(case):
    got, want = case[1]("neuron"), case[1]("cpu")
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want)
    assert_no_fallbacks()


@pytest.mark.parametrize("case", [
    ("bmm mixed", lambda d: torch.bmm(torch.ones(2, 3, 2, dtype=torch.uint8, device=d), torch.ones(2, 2, 4, device=d)),
     RuntimeError),
    ("baddbmm self dtype", lambda d: torch.baddbmm(torch.ones(2, 0, 4, device=d),
                                                   torch.ones(2, 0, 2, dtype=torch.double, device=d),
                                                   torch.ones(2, 2, 4, device=d)), RuntimeError),
    ("baddbmm 1-d batch1", lambda d: torch.baddbmm(torch.ones(2, 0, 4, device=d), torch.ones(2, device=d),
                                                   torch.ones(2, 2, 4, device=d)), IndexError),
    ("baddbmm self shape", lambda d: torch.baddbmm(torch.ones(3, 3, 4, device=d), torch.ones(2, 3, 2, device=d),
                                                   torch.ones(2, 2, 4, device=d)), RuntimeError),
    ("bmm bool", lambda d: torch.bmm(torch.ones(1, 2, 3, dtype=torch.bool, device=d),
                                     torch.ones(1, 3, 4, dtype=torch.int8, device=d)), NotImplementedError),
    ("mm bool", lambda d: torch.mm(torch.ones(2, 3, dtype=torch.bool, device=d),
                                   torch.ones(3, 4, dtype=torch.bool, device=d)), NotImplementedError),
    ("addmm bool", lambda d: torch.addmm(torch.ones(2, 4, dtype=torch.bool, device=d),
                                         torch.ones(2, 3, dtype=torch.bool, device=d),
                                         torch.ones(3, 4, dtype=torch.bool, device=d)), NotImplementedError),
    ("bmm out dtype", lambda d: torch.bmm(torch.ones(1, 0, 3, device=d), torch.ones(1, 3, 4, device=d),
                                          out=torch.ones(1, 0, 4, dtype=torch.double, device=d)), RuntimeError),
    ("baddbmm_ self dtype", lambda d: torch.ones(0, 1, 1, dtype=torch.bfloat16, device=d).baddbmm_(
        torch.ones(0, 1, 1, dtype=torch.bfloat16, device=d), torch.ones(0, 1, 1, device=d)), RuntimeError),
    ("addbmm no batch, int self, fractional beta", lambda d: torch.addbmm(
        torch.ones(2, 4, dtype=torch.long, device=d), torch.ones(0, 2, 3, dtype=torch.long, device=d),
        torch.ones(0, 3, 4, dtype=torch.long, device=d), beta=0.5), RuntimeError),
    ("addmm K=0 int, fractional beta", lambda d: torch.addmm(
        torch.tensor([[3]], device=d), torch.empty(3, 0, dtype=torch.long, device=d),
        torch.empty(0, 3, dtype=torch.long, device=d), beta=0.5), RuntimeError),
    ("linear bool K=0 with bias", lambda d: torch.nn.functional.linear(
        torch.empty(2, 0, dtype=torch.bool, device=d), torch.empty(6, 0, dtype=torch.bool, device=d),
        torch.ones(6, dtype=torch.bool, device=d)), RuntimeError),
    ("addmm_ into an expanded self", lambda d: torch.ones(1, 2, device=d).expand(2, 2).addmm_(
        torch.ones(2, 3, device=d), torch.ones(3, 2, device=d)), RuntimeError),
], ids=lambda c: c[0] if isinstance(c, tuple) else "")
def test_bmm_checks_in_the_cpus_order(case):
    raises_like_cpu(case[1], case[2])


# addmv of an empty matrix takes the CPU's shortcut: zeros for beta = 0,
# else self times beta as a scalar tensor of self's dtype (an integer self
# takes beta=2.0 as 2), into vec's dtype.
@pytest.mark.parametrize("beta", [2.0, 0.5, 0, 3])
def test_addmv_of_an_empty_matrix_like_the_cpu(beta):
    def call(d):
        return torch.addmv(torch.tensor([-1], device=d), torch.empty(1, 0, dtype=torch.long, device=d),
                           torch.empty(0, dtype=torch.long, device=d), beta=beta)
    got, want = call("neuron"), call("cpu")
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want)
    nan_self = torch.tensor([-1.5, float("nan")])
    got = torch.addmv(nan_self.to("neuron"), torch.empty(2, 0, device="neuron"), torch.empty(0, device="neuron"), beta=0)
    torch.testing.assert_close(got.cpu(), torch.addmv(nan_self, torch.empty(2, 0), torch.empty(0), beta=0))
    assert_no_fallbacks()


def _nonfinite_complex(shape, seed, transposed=False):
    """Small integers with about a quarter of the parts inf, -inf or NaN."""
    g = torch.Generator().manual_seed(seed)
    if transposed:
        return _nonfinite_complex(shape[::-1], seed).t()
    parts = torch.randint(-3, 4, (*shape, 2), generator=g).float()
    special = torch.tensor([float("inf"), float("-inf"), float("nan")])
    pick = torch.rand(parts.shape, generator=g) < 0.25
    parts[pick] = special[torch.randint(0, 3, (int(pick.sum()),), generator=g)]
    return torch.view_as_complex(parts.contiguous())


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (1, 3, 1), (3, 5, 1), (1, 1, 5), (3, 1, 4), (2, 3, 4), (5, 2, 3),
                                   (4, 4, 4), (8, 8, 8), (2, 6, 9)])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_complex_gemm_inf_nan_like_the_cpu(m, k, n, ta, tb):
    """Complex products with inf/NaN parts: where infinities cancel into NaN
    depends on the CPU's path (MKL's reference loops below m 4, n 2, k 4 in
    BLAS terms scale one operand's element or the sum by alpha, even alpha
    == 1; its blocked kernel keeps the plain sum; ATen's own small-batch
    loop), which neuron follows element for element. Those are MKL's Zen
    kernels; its AVX-512 ones split by other sizes (cpu_complex_mm_path)."""
    failures = []
    for seed in range(6):
        a = _nonfinite_complex((m, k), 100 * seed + 1, ta)
        b = _nonfinite_complex((k, n), 100 * seed + 2, tb)
        bias = _nonfinite_complex((m, n), 100 * seed + 3)
        cases = {
            "mm": lambda d: torch.mm(a.to(d), b.to(d)),
            "addmm": lambda d: torch.addmm(bias.to(d), a.to(d), b.to(d), beta=0.5, alpha=2),
            "addmm_beta0": lambda d: torch.addmm(bias.to(d), a.to(d), b.to(d), beta=0, alpha=1j),
            "addmm_alpha_minus1": lambda d: torch.addmm(bias.to(d), a.to(d), b.to(d), beta=2, alpha=-1),
            # alpha == 0: BLAS reads neither A nor B
            "addmm_alpha0": lambda d: torch.addmm(bias.to(d), a.to(d), b.to(d), beta=0.5, alpha=0),
            "bmm": lambda d: torch.bmm(a.expand(2, m, k).to(d), b.expand(2, k, n).to(d)),
            "baddbmm": lambda d: torch.baddbmm(bias.expand(2, m, n).to(d), a.expand(2, m, k).to(d),
                                               b.expand(2, k, n).to(d), beta=0.5, alpha=1),
        }
        cases["addmm_beta1"] = lambda d: torch.addmm(bias.to(d), a.to(d), b.to(d), beta=1, alpha=1j)
        for name, fn in cases.items():
            try:
                torch.testing.assert_close(fn("neuron").cpu(), fn("cpu"), equal_nan=True, rtol=1e-5, atol=1e-5)
            except AssertionError as e:
                failures.append(f"{name} seed {seed}: {str(e).splitlines()[-1]}")
    assert not failures, failures
    assert_no_fallbacks()


@pytest.mark.parametrize("seed", range(6))
def test_complex64_addmm_takes_mkls_avx512_paths(seed):
    """MKL's AVX-512 cgemm (Intel hosts) splits small products among its
    loops, its blocked kernel and, for a bias added as is (beta == 1), a small
    kernel of its own for m, n in 3..10 and k in 2..10 that scales the sum by
    alpha; each places alpha and the bias where inf parts meet differently.
    Random shapes, layouts (vectors with every stride ATen tells apart) and
    alpha/beta pairs, bit for bit against the CPU."""
    g = torch.Generator().manual_seed(1000 + seed)
    failures = []
    for trial in range(40):
        m, k, n = (int(v) for v in torch.randint(1, 13, (3,), generator=g))
        la, lb, lc = (("row", "col", "strided")[int(v)] for v in torch.randint(0, 3, (3,), generator=g))
        alpha, beta = [(1, 1), (2, 1), (-1, 1), (1j, 1), (1, 2), (1j, 0.5), (0.5 + 1j, 0), (-1, 2)][trial % 8]
        a = _nonfinite_complex((m, k), 10 * trial + seed, la == "col")
        b = _nonfinite_complex((k, n), 10 * trial + seed + 5000, lb == "col")
        c = _nonfinite_complex((m, n), 10 * trial + seed + 9000)
        if la == "strided":
            a = _strided(a)
        if lb == "strided":
            b = _strided(b)

        def run(d):
            out = torch.addmm(c.to(d), a.to(d), b.to(d), beta=beta, alpha=alpha)
            self_ = _layout(c.clone().to(d), "col") if lc == "col" else c.clone().to(d)
            self_.addmm_(a.to(d), b.to(d), beta=beta, alpha=alpha)
            return torch.view_as_real(torch.stack([out, self_]).cpu())

        want, got = run("cpu"), run("neuron")
        if not torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3)):
            failures.append((m, k, n, la, lb, lc, alpha, beta))
    assert not failures
    assert_no_fallbacks()


@pytest.mark.parametrize("m,n", [(2, 3), (3, 7), (9, 2), (40, 33)])
def test_complex_mv_inf_nan_like_the_cpu(m, n):
    """mv/addmv take BLAS's gemv 'T' loop on a row-major matrix: the sum,
    then times alpha (inf + inf i becomes NaN + NaN i even for alpha 1)."""
    for seed in range(6):
        a, v = _nonfinite_complex((m, n), seed), _nonfinite_complex((n,), seed + 50)
        torch.testing.assert_close(torch.mv(a.neuron(), v.neuron()).cpu(), torch.mv(a, v), equal_nan=True)
    assert_no_fallbacks()


@pytest.mark.parametrize("beta", [0, 1, 2.0])
def test_complex_baddbmm_inplace_on_an_expanded_self_like_the_cpu(beta):
    """Tensor.baddbmm_ on an expanded self: below 400 multiply-adds per batch
    entry the CPU's loop reads and writes the shared element in (batch, row,
    column) order, each step seeing the last; from 400 it goes through
    addmm_ per entry, which refuses the overlapping self."""
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(2, 3, 5, generator=g, dtype=torch.complex64), torch.randn(2, 5, 4, generator=g,
                                                                                dtype=torch.complex64)
    s = torch.randn(1, 1, 1, generator=g, dtype=torch.complex64)
    ref = s.clone().expand(2, 3, 4).baddbmm_(a, b, beta=beta, alpha=0.5)
    dev = s.neuron().expand(2, 3, 4).baddbmm_(a.neuron(), b.neuron(), beta=beta, alpha=0.5)
    torch.testing.assert_close(dev.cpu(), ref)
    big_a, big_b = torch.randn(2, 15, 2), torch.randn(2, 2, 14)
    raises_like_cpu(lambda d: torch.zeros(1, 1, 1).to(d).expand(2, 15, 14).baddbmm_(big_a.to(d), big_b.to(d)),
                    RuntimeError)
    assert_no_fallbacks()


@pytest.mark.parametrize("m,k,n", [(5, 14, 6), (2, 3, 4)])
def test_bmm_of_bool_beside_another_dtype_raises_what_the_cpu_raises(m, k, n):
    """From 400 multiply-adds per batch entry the CPU's bmm compares the
    dtypes first (RuntimeError); below, its kernel refuses bool first
    (NotImplementedError)."""
    a, b = torch.ones(2, m, k, dtype=torch.bool), torch.ones(2, k, n, dtype=torch.int16)
    with pytest.raises(Exception) as cpu:
        torch.bmm(a, b)
    with pytest.raises(Exception) as dev:
        torch.bmm(a.to("neuron"), b.to("neuron"))
    assert type(dev.value) is type(cpu.value)
    assert str(cpu.value).split(" (in the")[0] in str(dev.value)


@pytest.mark.parametrize("m,n", [(1, 1), (3, 4), (7, 2)])
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0, 1), (0.5, 2), (2, -1j)])
def test_complex_addr_inf_nan_like_the_cpu(m, n, beta, alpha):
    """The CPU's addr kernel forms beta * self + (alpha * vec1) * vec2 per
    element, every product a full complex one (alpha 1 + 0i included), and
    adds the two terms plainly: where inf parts turn into NaN follows that."""
    for seed in range(6):
        s = _nonfinite_complex((m, n), seed)
        v1, v2 = _nonfinite_complex((m,), seed + 50), _nonfinite_complex((n,), seed + 90)
        want = torch.addr(s, v1, v2, beta=beta, alpha=alpha)
        got = torch.addr(s.neuron(), v1.neuron(), v2.neuron(), beta=beta, alpha=alpha).cpu()
        torch.testing.assert_close(torch.view_as_real(got), torch.view_as_real(want), equal_nan=True)
    assert_no_fallbacks()


@pytest.mark.parametrize("n", [1, 2, 3, 8, 9, 33])
@pytest.mark.parametrize("step", [1, 2])
@pytest.mark.parametrize("fn", [torch.dot, torch.vdot, torch.inner])
def test_complex_dot_inf_nan_like_the_cpu(n, step, fn):
    """MKL's Zen cdotu/cdotc add 0 times the real part of x (cdotu) or y
    (cdotc) to the imaginary part for the elements outside their paired
    loop (an odd count's last one on unit strides, all on others), so an
    inf real part there makes it NaN; its AVX-512 ones (Intel hosts) keep
    the plain sum; neuron places the NaNs as the host's do."""
    for seed in range(8):
        g = torch.Generator().manual_seed(seed)
        x = torch.view_as_complex(torch.randint(-3, 4, (n * step, 2), generator=g).float())
        y = torch.view_as_complex(torch.randint(-3, 4, (n * step, 2), generator=g).float())
        special = [float("inf"), float("-inf"), float("nan")]
        for t in (x, y):
            for i in torch.randint(0, n * step, (2,), generator=g).tolist():
                part = torch.view_as_real(t)[i]
                part[seed % 2] = special[i % 3]
        want = fn(x[::step], y[::step])
        got = fn(x.neuron()[::step], y.neuron()[::step]).cpu()
        torch.testing.assert_close(torch.view_as_real(got), torch.view_as_real(want), equal_nan=True)
    assert_no_fallbacks()


@pytest.mark.parametrize("m,n", [(1, 1), (1, 2), (1, 5), (2, 1), (5, 1), (3, 4), (4, 3)])
@pytest.mark.parametrize("column_major", [False, True])
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0, 1), (0.5, 2), (1, 1j)])
def test_complex_addmv_inf_nan_like_the_cpu(m, n, column_major, beta, alpha):
    """ATen's addmv picks gemv's 'n' loop for a column-major matrix (one
    column always counts as one), adding (alpha * vec_j) * mat_ij to beta *
    self, and otherwise 't', alpha times each row's sum plus beta * self
    (beta == 1 multiplies too); addmm's layout test and bias differ."""
    for seed in range(12):
        a = _nonfinite_complex((m, n), seed, column_major)
        v, s = _nonfinite_complex((n,), seed + 50), _nonfinite_complex((m,), seed + 90)
        dev_a = a.t().contiguous().neuron().t() if column_major else a.neuron()
        want = torch.addmv(s, a, v, beta=beta, alpha=alpha)
        got = torch.addmv(s.neuron(), dev_a, v.neuron(), beta=beta, alpha=alpha).cpu()
        torch.testing.assert_close(torch.view_as_real(got), torch.view_as_real(want), equal_nan=True)
    assert_no_fallbacks()


def _same(d, c):
    """inf and NaN in the same places (complex: per part), finite values
    close (the last bits of a finite sum follow each kernel's own order)."""
    d = d.cpu()
    if c.is_complex():
        d, c = torch.view_as_real(d), torch.view_as_real(c)
    assert d.dtype == c.dtype and d.shape == c.shape
    assert torch.equal(d.isnan(), c.isnan()), (d, c)
    assert torch.equal(d.isinf() * d.sign(), c.isinf() * c.sign()), (d, c)
    fin = c.isfinite()
    torch.testing.assert_close(d[fin].float(), c[fin].float(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0, 0.5), (0.5, 0.5), (2.0, 1)])
def test_addbmm_adds_one_batch_entry_at_a_time_like_the_cpu(dtype, beta, alpha):
    """The CPU's addbmm is one addmm_ per batch entry (beta = 1 after the
    first): each entry's sum is rounded into the result before the next, so
    +3e38 in one entry and -3e38 in the next overflow or cancel as there,
    and an infinite self meets each entry's sum in turn."""
    g = torch.Generator().manual_seed(13)
    # shapes whose addmm_ neuron computes in MKL's order: complex off the
    # blocked kernel (beta == 1 there differs), float32 where MKL adds C
    # after the entry's sum (its reference loops and some blocked shapes
    # accumulate into C from the first product; not followed yet)
    shapes = [(2, 3, 2, 4), (3, 4, 5, 2)] if dtype.is_complex else [(2, 6, 4, 17), (3, 8, 4, 20)]
    for bs, n, k, p in shapes:
        b1 = torch.randn(bs, n, k, generator=g).to(dtype)
        b2 = torch.randn(bs, k, p, generator=g).to(dtype)
        b1[0, 0, 0], b2[0, 0, :] = 3e38, 1.5
        b1[1, 0, 0], b2[1, 0, :] = -3e38, 1.5
        self = torch.randn(n, p, generator=g).to(dtype)
        if dtype.is_complex:
            self[0, 1] = complex(float("inf"), float("inf"))
            self[1, 0] = complex(float("nan"), 1.0)
        want = torch.addbmm(self, b1, b2, beta=beta, alpha=alpha)
        _same(torch.addbmm(self.neuron(), b1.neuron(), b2.neuron(), beta=beta, alpha=alpha), want)
        dself = self.neuron()
        dself.addbmm_(b1.neuron(), b2.neuron(), beta=beta, alpha=alpha)
        _same(dself, want)
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.complex64])
@pytest.mark.parametrize("bs,n,k,p,beta", [(0, 2, 3, 3, 0), (0, 2, 3, 3, 0.5), (2, 2, 0, 3, 1), (2, 2, 0, 3, 0),
                                           (2, 0, 3, 3, 0.5), (2, 2, 3, 3, 0)])
def test_addbmm_inplace_on_an_expanded_self_like_the_cpu(dtype, bs, n, k, p, beta):
    """addbmm_ on an expanded self: the CPU's per-entry addmm_ refuses it
    (a bool one with products: its dispatch first) except where nothing is
    written through the aliases (no batch and beta == 0 is zero_())."""
    def run(dev):
        s = torch.ones(1, p, dtype=dtype).to(dev).expand(n, p)
        s.addbmm_(torch.ones(bs, n, k, dtype=dtype).to(dev), torch.ones(bs, k, p, dtype=dtype).to(dev), beta=beta)
        return s
    try:
        want = run("cpu")
    except Exception as e:  # noqa: BLE001
        cpu, dev = raises_like_cpu(run, type(e))
        assert str(dev).startswith(str(cpu)[:60])
    else:
        _same(run("neuron").contiguous(), want.contiguous())


@pytest.mark.parametrize("k", [0, 3])
@pytest.mark.parametrize("dtype", [torch.bool, torch.float32])
def test_addmm_inplace_on_an_expanded_self_raises_what_the_cpu_raises(k, dtype):
    def run(dev):
        s = torch.ones(1, 4, dtype=dtype).to(dev).expand(2, 4)
        return s.addmm_(torch.ones(2, k, dtype=dtype).to(dev), torch.ones(k, 4, dtype=dtype).to(dev))
    try:
        run("cpu")
    except Exception as e:  # noqa: BLE001
        cpu, dev = raises_like_cpu(run, type(e))
        assert str(dev).startswith(str(cpu)[:60])
    else:
        raise AssertionError("the CPU computed it")


def _layout(t, how):
    if how == "col":
        return t.t().contiguous().t()
    if how == "strided":
        return torch.cat([t, t], 1)[:, ::2]
    return t


@pytest.mark.parametrize("m,k,n", [(1, 1, 5), (1, 3, 1), (2, 3, 4), (3, 5, 2), (4, 2, 16), (5, 4, 6),
                                   (4, 3, 12), (13, 7, 11), (64, 33, 40)])
@pytest.mark.parametrize("la", ["row", "col", "strided"])
@pytest.mark.parametrize("lb", ["row", "col", "strided"])
def test_sgemm_scales_an_operand_by_alpha_where_mkl_does(m, k, n, la, lb):
    """MKL's sgemm multiplies one operand by alpha before the products on
    most of its paths and the sum on the others: 3e38 * 2 with alpha 0.5 is
    3e38 on the first, inf on the second."""
    a, b = torch.zeros(m, k), torch.zeros(k, n)
    a[:, 0], b[0, :] = 3e38, 2.0
    a[:, -1] -= 1.0
    b[-1, :] += 0.25
    want = torch.addmm(torch.ones(m, n), _layout(a, la), _layout(b, lb), alpha=0.5)
    got = torch.addmm(torch.ones(m, n).neuron(), _layout(a.neuron(), la), _layout(b.neuron(), lb), alpha=0.5)
    _same(got, want)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (1, 64, 64), (16, 16, 16), (17, 17, 17), (1, 128, 128), (4, 6, 7),
                                   (8, 8, 8), (12, 12, 12), (4, 10, 10)])
@pytest.mark.parametrize("batched", [False, True])
def test_bfloat16_subnormals_count_where_the_cpu_counts_them(m, k, n, batched):
    """The CPU computes bfloat16 products of up to 16 x 16 x 16
    multiply-adds in all (bmm: or below 400 per entry) in float (a subnormal 2.9e-39 times 3.4e38 is 0.996) and
    larger ones in oneDNN, whose vdpbf16ps reads subnormals as zero."""
    a, b = torch.zeros(m, k, dtype=torch.bfloat16), torch.zeros(k, n, dtype=torch.bfloat16)
    a[:, 0], b[0, :] = 2.938735877055719e-39, 3.3895e38
    b[-1, :] += 0.5
    if batched:
        a, b = a.expand(3, m, k).clone(), b.expand(3, k, n).clone()
        want, got = torch.bmm(a, b), torch.bmm(a.neuron(), b.neuron())
    else:
        want, got = a @ b, a.neuron() @ b.neuron()
    assert torch.equal(got.cpu(), want)


def _strided(t):
    """t's values in a view whose rows and columns both skip an element."""
    z = torch.zeros(t.shape[0], 2 * t.shape[1], dtype=t.dtype, device=t.device)
    z[:, ::2] = t
    return z[:, ::2]


@pytest.mark.parametrize("m,k,n", [(2, 6, 5), (7, 6, 6), (5, 4, 8), (3, 4, 4)])
@pytest.mark.parametrize("beta", [1, 0.5])
def test_complex_blocked_gemm_adds_the_bias_part_by_part_like_the_cpu(m, k, n, beta):
    """On MKL's blocked kernel (m >= 4, n >= 2, k >= 4 in BLAS terms) the
    bias joins the sum part by part: -inf + 0i plus a finite sum is -inf +
    finite i, where a complex add (x + 1 * y) would make the imaginary
    part 0 * inf = NaN (F.linear of a bias with an infinite real part)."""
    g = torch.Generator().manual_seed(29)
    a = torch.randn(m, k, generator=g, dtype=torch.complex64)
    w = torch.randn(n, k, generator=g, dtype=torch.complex64)
    bias = _nonfinite_complex((n,), 31)
    self = _nonfinite_complex((m, n), 37)
    for name, fn in {
        "linear": lambda d: torch.nn.functional.linear(a.to(d), w.to(d), bias.to(d)),
        "addmm": lambda d: torch.addmm(self.to(d), a.to(d), w.t().contiguous().to(d), beta=beta),
        "addmm_t": lambda d: torch.addmm(self.to(d), a.to(d), w.to(d).t(), beta=beta, alpha=2),
    }.items():
        torch.testing.assert_close(torch.view_as_real(fn("neuron").cpu()), torch.view_as_real(fn("cpu")),
                                   equal_nan=True, msg=name)
    assert_no_fallbacks()


@pytest.mark.parametrize("m,k,n", [(1, 5, 2), (1, 2, 4), (1, 1, 3), (3, 1, 2), (4, 1, 5), (2, 2, 3)])
@pytest.mark.parametrize("layout", ["col", "strided"])
def test_complex_addmm_inplace_into_a_column_major_self_like_the_cpu(m, k, n, layout):
    """addmm_ into a column-major (or strided: the CPU computes a
    column-major copy) self keeps BLAS's C = A @ B: with k == 1 MKL scales
    'b' (our B) by alpha, and with a one-row C its gemv loops follow 'b'
    ((alpha * a_l) * b_lj added to C for a transposed 'b', else alpha times
    the sum; beta == 1 adds C as is), so inf parts meet where they meet
    there."""
    failures = []
    for seed in range(8):
        a = _nonfinite_complex((m, k), 10 * seed + 1)
        b = _nonfinite_complex((k, n), 10 * seed + 2, transposed=seed % 2 == 1)
        c = _nonfinite_complex((m, n), 10 * seed + 3)
        for beta, alpha in [(1, 1), (0.5, 2j)]:
            def run(d):
                s = _layout(c.clone().to(d), "col") if layout == "col" else _strided(c.to(d))
                s.addmm_(a.to(d), b.to(d), beta=beta, alpha=alpha)
                return torch.view_as_real(s.cpu())
            want, got = run("cpu"), run("neuron")
            if not torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3)):
                failures.append((seed, beta, alpha))
    assert not failures
    assert_no_fallbacks()


def _edge(shape, dtype, g):
    """Values where the order of a sum decides: +-0.9 and +-0.45 times the
    dtype's largest, small integers and fractions."""
    big = torch.finfo(dtype).max * 0.9
    pool = torch.tensor([big, -big, big / 2, -big / 2, 1.0, -1.0, 0.5, 2.0, 3.0, -2.0, 1e-3, 0.3127, -0.7],
                        dtype=torch.float64)
    return pool[torch.randint(0, len(pool), shape, generator=g)].to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("bs,m,k,n", [(2, 3, 11, 3), (3, 2, 5, 6), (2, 5, 30, 1), (3, 4, 6, 16), (2, 20, 1, 19)])
def test_small_bmm_follows_the_cpus_loop_at_the_float_limits(dtype, bs, m, k, n):
    """Below 400 multiply-adds per batch entry the CPU runs ATen's own loop:
    each product rounded, added in k order, then r * beta + alpha * sum, so
    huge terms overflow or cancel where they do there (0.3 * 3e38 - 0.3 *
    3e38 is 0, not a fused multiply-add's leftover rounding error); an
    expanded in-place self is read and written through its aliases in
    (batch, row, column) order."""
    g = torch.Generator().manual_seed(41)
    failures = []
    for trial in range(4):
        a, b, c = _edge((bs, m, k), dtype, g), _edge((bs, k, n), dtype, g), _edge((bs, m, n), dtype, g)
        one = _edge((1, 1, n), dtype, g)
        cases = {
            "bmm": lambda d: torch.bmm(a.to(d), b.to(d).transpose(1, 2).contiguous().transpose(1, 2)),
            "baddbmm": lambda d: torch.baddbmm(c.to(d), a.to(d), b.to(d), beta=2.0, alpha=0.5),
            "baddbmm_expanded": lambda d: one.clone().to(d).expand(bs, m, n).baddbmm_(a.to(d), b.to(d), alpha=0.5),
            "baddbmm_expanded_beta2": lambda d: one.clone().to(d).expand(bs, m, n).baddbmm_(a.to(d), b.to(d),
                                                                                            beta=2.0),
        }
        for name, fn in cases.items():
            want, got = fn("cpu"), fn("neuron").cpu()
            if not torch.equal(want.double().nan_to_num(1, 2, 3), got.double().nan_to_num(1, 2, 3)):
                failures.append((trial, name))
    assert not failures
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("m,n", [(2, 2), (3, 6), (5, 9), (17, 3)])
@pytest.mark.parametrize("layout", ["row", "col", "strided"])
def test_addmv_of_an_expanded_vector_follows_atens_gemv_loop(dtype, m, n, layout):
    """A zero-stride vector is no BLAS vector (incx == 0), so the CPU's
    addmv runs ATen's gemv loops: alpha == 0 still multiplies (0 * inf is
    NaN, where BLAS would not read the matrix), each product is rounded
    before it is added, and a column-major matrix adds into beta * self
    from the first product."""
    g = torch.Generator().manual_seed(43)
    failures = []
    for trial in range(4):
        mat, s = _edge((m, n), dtype, g), _edge((m,), dtype, g)
        mat[0, trial % n] = float("inf")
        v = _edge((1,), dtype, g)
        for beta, alpha in [(1, 1), (0, 1), (2.0, 0.5), (0.5, 0), (1, 0)]:
            def run(d):
                return torch.addmv(s.to(d), _layout(mat.to(d), layout), v.to(d).expand(n), beta=beta, alpha=alpha)
            want, got = run("cpu"), run("neuron").cpu()
            if not torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3)):
                failures.append((trial, beta, alpha))
    assert not failures
    assert_no_fallbacks()


@pytest.mark.parametrize("m,k,n", [(2, 3, 3), (3, 2, 8), (4, 3, 8), (8, 8, 8), (3, 5, 2), (1, 3, 16), (4, 16, 3)])
@pytest.mark.parametrize("la", ["row", "col"])
@pytest.mark.parametrize("lb", ["row", "col"])
def test_small_sgemm_follows_mkls_loops_at_the_float_limits(m, k, n, la, lb):
    """Below m 12 or n 4 (BLAS terms) MKL's sgemm runs loops without fused
    multiply-adds: with 'a' transposed each output's products are summed
    (8 lanes from k 8 when 'b' runs along k too), otherwise C comes first
    and each product is added to it in k order; 0.3127 * 3e38 - 0.3127 *
    3e38 cancels to 0 there, where a fused multiply-add leaves -3.8e30."""
    g = torch.Generator().manual_seed(47)
    failures = []
    for trial in range(4):
        a, b, c = _edge((m, k), torch.float32, g), _edge((k, n), torch.float32, g), _edge((m, n), torch.float32, g)
        for name, fn in {
            "mm": lambda d: torch.mm(_layout(a.to(d), la), _layout(b.to(d), lb)),
            "addmm": lambda d: torch.addmm(c.to(d), _layout(a.to(d), la), _layout(b.to(d), lb)),
            "addmm_scaled": lambda d: torch.addmm(c.to(d), _layout(a.to(d), la), _layout(b.to(d), lb), beta=0.5,
                                                  alpha=0.5),
        }.items():
            want, got = fn("cpu"), fn("neuron").cpu()
            if not torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3)):
                failures.append((trial, name))
    assert not failures
    assert_no_fallbacks()


def _limits(shape, g, p):
    """float32 normals with a share p of +-3.4e38 and p / 2 of +-inf."""
    t = torch.randn(shape, generator=g)
    u = torch.rand(shape, generator=g)
    big = torch.finfo(torch.float32).max
    for lo, v in ((0, big), (p, -big), (2 * p, float("inf")), (2.5 * p, float("-inf"))):
        t[(u >= lo) & (u < lo + (p if abs(v) == big else p / 2))] = v
    return t


@pytest.mark.parametrize("seed", range(4))
def test_float32_gemm_and_sgemv_n_take_mkls_avx512_orders(seed):
    """MKL's AVX-512 sgemm (Intel hosts) fuses each product into one
    accumulator in k order for C of at least 2 x 2 with 'a' not transposed;
    its sgemv 'n' (one row of C over a row-major B, one column over a
    column-major A, mv of a column-major matrix) fuses them in order below 16
    outputs and takes k in blocks of 8 for the outputs in whole vectors of
    16; k == 1 scales BLAS's 'b' and fuses the product into C for beta == 1.
    Huge and infinite values make the order visible; bit for bit against the
    CPU, alpha and beta included."""
    g = torch.Generator().manual_seed(300 + seed)
    failures = []
    for trial in range(90):
        kind = ("mm", "row", "col", "mv", "k1")[trial % 5]
        m, k = (int(v) for v in torch.randint(2, 41, (2,), generator=g))
        n = int(torch.randint(2, 20, (1,), generator=g))
        alpha, beta = [(1, 0), (1, 1), (0.5, 1), (2, 0.5), (-1.5, 1), (0.3, 0.7)][(trial // 5) % 6]
        if kind == "k1":
            k = 1
        p = min(0.1, 0.5 / k)
        if kind in ("mm", "k1"):
            a, b, c = _limits((n, k), g, p), _limits((k, m), g, 0.02), _limits((n, m), g, 0.05)
        elif kind == "row":
            a, b, c = _limits((1, k), g, p), _limits((k, m), g, 0.02), _limits((1, m), g, 0.05)
        else:
            a, b, c = _limits((m, k), g, 0.02).t().contiguous().t(), _limits((k, 1), g, p), _limits((m, 1), g, 0.05)

        def run(d):
            if kind == "mv":
                return torch.addmv(c.to(d).view(-1), a.to(d), b.to(d).view(-1), alpha=alpha, beta=beta)
            return torch.addmm(c.to(d), a.to(d), b.to(d), alpha=alpha, beta=beta)

        want, got = run("cpu"), run("neuron").cpu()
        if not torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3)):
            failures.append((kind, m, k, n, alpha, beta))
    assert not failures
    assert_no_fallbacks()


@pytest.mark.parametrize("seed", range(3))
def test_float32_sgemv_t_takes_mkls_avx512_lanes(seed):
    """MKL's AVX-512 sgemv 't' (Intel hosts: mv/addmv of a row-major matrix,
    F.linear of a vector, one column of C over a row-major A, a 1 x 1
    result with 'b' not transposed) sums each row's first product apart and
    the others in 16 lanes, fused, halved; rows in blocks of 4 start lane 0
    from the first product and finish a partial block in 8 lanes, the rows
    after the blocks add it last (the 1st and 3rd in two registers per 32
    products); then C = fma(alpha, sum, beta * y). Bit for bit against the
    CPU at the float32 limits."""
    g = torch.Generator().manual_seed(500 + seed)
    failures = []
    for trial in range(60):
        kind = ("mv", "linear", "col", "dot")[trial % 4]
        m, k = int(torch.randint(1, 14, (1,), generator=g)), int(torch.randint(2, 80, (1,), generator=g))
        alpha, beta = [(1, 0), (1, 1), (0.5, 1), (2, 0.7), (-1.5, 1)][(trial // 4) % 5]
        p = min(0.1, 0.5 / k)
        a, x, y = _limits((m, k), g, p), _limits((k,), g, 0.02), _limits((m,), g, 0.05)

        def run(d):
            if kind == "mv":
                return torch.addmv(y.to(d), a.to(d), x.to(d), alpha=alpha, beta=beta)
            if kind == "linear":
                return F.linear(x.to(d), a.to(d), y.to(d))
            if kind == "col":
                return torch.addmm(y.to(d).view(m, 1), a.to(d), x.to(d).view(k, 1).t().contiguous().t(), alpha=alpha,
                                   beta=beta)
            b = torch.empty_strided((k, 1), (1, k), device=d).copy_(x.to(d).view(k, 1))
            return torch.addmm(y[:1].to(d).view(1, 1), a[:1].to(d), b, alpha=alpha, beta=beta)

        want, got = run("cpu"), run("neuron").cpu()
        if not torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3)):
            failures.append((kind, m, k, alpha, beta))
    assert not failures
    assert_no_fallbacks()


def _one_hot_rows(shape, dtype, g):
    """Rows of ones with +L and -L at two random places (L absorbs a 1): the
    sum keeps exactly the ones that met neither before they cancel, so it
    tells the order in which products meet."""
    m, k = shape
    big = 2.0 ** 40 if dtype == torch.bfloat16 else 2048.0
    one = 1.0 if dtype == torch.bfloat16 else 2.0 ** -12
    t = torch.full((m, k), one, dtype=torch.float64)
    for i in range(m):
        p, q = torch.randperm(k, generator=g)[:2].tolist() if k > 1 else (0, 0)
        t[i, p], t[i, q] = big, -big
    return t.to(dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m,k,n", [(1, 19, 4), (4, 3, 5), (3, 20, 2), (5, 37, 1), (2, 70, 3), (1, 140, 2), (7, 9, 6)])
def test_small_16bit_gemm_follows_atens_loops(dtype, m, k, n):
    """bfloat16 products of at most 16^3 multiply-adds (oneDNN above) and
    float16 ones (no oneDNN without AVX512-FP16) run ATen's cpublas loops in
    float on the CPU, picked by BLAS's transposes: 4 partial sums ('N' 'N',
    'T' 'T'), ATen's vectorised dot ('T' 'N'), both finished as fma(beta,
    bias, alpha * sum), or beta * bias first with each product fused in
    ('N' 'T', alpha on BLAS's 'b'). Edge values and one-hot rows place
    inf/finite and which ones survive where those orders do (fuzz
    14142135-471423: F.linear of strided rows, -861864: addmm, both inf
    where neuron's packed kernel was finite)."""
    g = torch.Generator().manual_seed(53)
    failures = []
    for trial in range(3):
        make = _edge if trial < 2 else _one_hot_rows
        a, bt, c = make((m, k), dtype, g), make((n, k), dtype, g), _edge((m, n), dtype, g)
        b = bt.t()
        for la in ("row", "col", "strided"):
            for lb in ("row", "col", "strided"):
                for name, fn in {
                    "mm": lambda d: torch.mm(_layout(a.to(d), la), _layout(b.to(d), lb)),
                    "addmm": lambda d: torch.addmm(c.to(d), _layout(a.to(d), la), _layout(b.to(d), lb), beta=0.3,
                                                   alpha=0.7),
                    "linear": lambda d: F.linear(_layout(a.to(d), la), _layout(bt.to(d), lb), c[0].to(d)),
                }.items():
                    want, got = fn("cpu"), fn("neuron").cpu()
                    if not torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3)):
                        failures.append((trial, la, lb, name))
    assert not failures
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bs,m,k,n", [(2, 8, 8, 8), (3, 5, 20, 4), (1, 10, 40, 1)])
def test_16bit_bmm_entries_follow_atens_loops(dtype, bs, m, k, n):
    """From 400 multiply-adds per entry the CPU's bmm/baddbmm goes one
    entry at a time through mm/addmm_ unless oneDNN takes the whole batch
    (bfloat16 above 16^3 in all): the 16-bit loops again, and alpha == 0
    multiplies the product (0 * inf = NaN), as the loops do."""
    g = torch.Generator().manual_seed(59)
    failures = []
    for trial in range(3):
        make = _edge if trial < 2 else _one_hot_rows
        a = make((bs * m, k), dtype, g).view(bs, m, k)
        b = make((bs * n, k), dtype, g).view(bs, n, k).transpose(1, 2)
        c = _edge((bs, m, n), dtype, g)
        for name, fn in {
            "bmm": lambda d: torch.bmm(a.to(d), b.to(d)),
            "bmm_rows": lambda d: torch.bmm(a.to(d), b.contiguous().to(d)),
            "baddbmm": lambda d: torch.baddbmm(c.to(d), a.to(d), b.to(d), beta=2.0, alpha=0.5),
            "baddbmm_alpha0": lambda d: torch.baddbmm(c.to(d), a.to(d), b.to(d), alpha=0),
        }.items():
            want, got = fn("cpu"), fn("neuron").cpu()
            if not torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3)):
                failures.append((trial, name))
    assert not failures
    assert_no_fallbacks()


@pytest.mark.parametrize("m,k,n", [(20, 20, 20), (9, 64, 33), (40, 17, 30)])
@pytest.mark.parametrize("beta,alpha", [(2.0, 1.0), (1.0, 0.3), (1.7, 0.5), (0.5, -1.0)])
def test_bfloat16_onednn_gemm_adds_the_bias_last(m, k, n, beta, alpha):
    """Above 16^3 multiply-adds the CPU's bfloat16 addmm is oneDNN's matmul
    with a sum post-op: C = fma(beta, bias, alpha * sum), so 2 * 3.4e38 -
    3.4e38 stays finite and beta * bias is never rounded on its own."""
    g = torch.Generator().manual_seed(61)
    big = torch.finfo(torch.bfloat16).max
    a = torch.randint(-3, 4, (m, k), generator=g).to(torch.bfloat16)
    b = torch.randint(-3, 4, (k, n), generator=g).to(torch.bfloat16)
    c = (torch.randn(m, n, generator=g) * 10).to(torch.bfloat16)
    c[0, :] = big
    a[0, :] = 0
    a[0, 0] = -big
    b[0, :] = 1
    want = torch.addmm(c, a, b, beta=beta, alpha=alpha)
    got = torch.addmm(c.neuron(), a.neuron(), b.neuron(), beta=beta, alpha=alpha).cpu()
    assert torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3))
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16bit_bmm_of_an_empty_batch_like_the_cpu(dtype):
    """An empty batch (from 400 multiply-adds per entry, where the 16-bit
    loops pick their order from the first entry) is an empty result, also
    through addbmm's backward (fuzz 7101-41753: IndexError on neuron)."""
    a, b = torch.ones(0, 20, 5, dtype=dtype), torch.ones(0, 5, 21, dtype=dtype)
    assert torch.bmm(a.neuron(), b.neuron()).shape == torch.bmm(a, b).shape
    x = torch.ones(0, 6, 4, dtype=dtype, requires_grad=True)
    y = torch.ones(0, 4, 30, dtype=dtype)
    for d in ("cpu", "neuron"):
        xd = x.detach().to(d).requires_grad_()
        torch.addbmm(torch.ones(6, 30, dtype=dtype, device=d), xd, y.to(d)).sum().backward()
        assert xd.grad.shape == x.shape
    assert_no_fallbacks()


def test_baddbmm_inplace_dtype_is_checked_before_the_kernels_dtype():
    """A bool self of baddbmm_ with a bfloat16 batch2: the CPU's structured
    wrapper refuses the in-place dtype before its kernel would refuse bool
    (fuzz 7101-61590)."""
    def run(d):
        self = torch.ones(3, 5, 5, dtype=torch.bool, device=d)
        return self.baddbmm_(torch.ones(3, 5, 2, dtype=torch.bool, device=d),
                             torch.ones(3, 2, 5, dtype=torch.bfloat16, device=d))
    cpu, dev = raises_like_cpu(run)
    assert str(dev) == str(cpu)


@pytest.mark.parametrize("m,n", [(3, 6), (5, 19), (2, 37), (7, 70)])
@pytest.mark.parametrize("layout", ["row", "col", "strided"])
def test_bfloat16_mv_follows_atens_gemv(m, n, layout):
    """bfloat16 mv/addmv run ATen's gemv on the CPU: torch.mv of a row-major
    matrix is its fast path (ATen's vectorised dot per row); addmv's other
    calls (beta != 0, alpha != 1, an expanded vector) sum each row's
    products in order and finish as bf16(beta * y) + alpha * sum with alpha
    and beta rounded to bfloat16 (1.7 * y - 1.703125 * 1 is 0 there); a
    column-major matrix adds its float sum, rounded, to bf16(beta * y)."""
    g = torch.Generator().manual_seed(67)
    dt = torch.bfloat16
    failures = []
    for trial in range(3):
        make = _edge if trial < 2 else _one_hot_rows
        mat, vec, y = make((m, n), dt, g), _edge((n,), dt, g), _edge((m,), dt, g)
        cases = {
            "mv": lambda d: torch.mv(_layout(mat.to(d), layout), vec.to(d)),
            "addmv": lambda d: torch.addmv(y.to(d), _layout(mat.to(d), layout), vec.to(d), beta=1.7, alpha=0.3),
            "addmv_expanded": lambda d: torch.addmv(y.to(d), _layout(mat.to(d), layout), vec[:1].to(d).expand(n)),
            "linear_1d": lambda d: F.linear(vec.to(d), _layout(mat.to(d), layout), y.to(d)),
        }
        for name, fn in cases.items():
            want, got = fn("cpu"), fn("neuron").cpu()
            if not torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3)):
                failures.append((trial, name))
    y1, w, v = torch.full((2,), 1.0078125, dtype=dt), torch.tensor([[1.71875, 0], [1.71875, 0]], dtype=dt), \
        torch.tensor([1.0, 0], dtype=dt)
    for mat in (w, w.t().contiguous().t()):
        exact = torch.addmv(y1.neuron(), mat.neuron(), v.neuron(), beta=1.7, alpha=-1).cpu()
        assert torch.equal(exact, torch.addmv(y1, mat, v, beta=1.7, alpha=-1))
    assert not failures
    assert_no_fallbacks()


@pytest.mark.parametrize("m,n", [(4, 1), (7, 5), (19, 8), (60, 33)])
def test_float32_addmv_of_a_column_major_matrix_follows_mkls_sgemv(m, n):
    """MKL's sgemv 'n' (the CPU's addmv of a column-major float32 matrix)
    starts from beta * y and adds (alpha * vec_j) * mat_ij column by column,
    unfused; alpha == 0 reads neither matrix nor vector (fuzz 7103-83813:
    alpha 0.5 on a 4 x 1 matrix, inf where neuron scaled the sum)."""
    g = torch.Generator().manual_seed(71)
    failures = []
    for trial in range(3):
        mat, vec, y = _edge((m, n), torch.float32, g), _edge((n,), torch.float32, g), _edge((m,), torch.float32, g)
        for beta, alpha in [(1, 1), (0, 0.5), (2.0, 0.5), (1.7, 0.3), (1, 0)]:
            def run(d):
                return torch.addmv(y.to(d), _layout(mat.to(d), "col"), vec.to(d), beta=beta, alpha=alpha)
            want, got = run("cpu"), run("neuron").cpu()
            if not torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3)):
                failures.append((trial, beta, alpha))
    assert not failures
    assert_no_fallbacks()


def _at_offset(t, off, extra=0):
    """t (row-major, rows `extra` elements apart beyond its width) placed
    `off` elements into a fresh storage: its rows' addresses modulo 16
    bytes, which MKL's sgemv 't' order follows."""
    if t.dim() == 1:
        st = torch.zeros(off + t.numel(), dtype=t.dtype, device=t.device)
        v = st[off:]
    else:
        m, k = t.shape
        st = torch.zeros(off + m * (k + extra), dtype=t.dtype, device=t.device)
        v = st[off:].as_strided((m, k), (k + extra, 1))
    v.copy_(t)
    return v


@pytest.mark.parametrize("m,k", [(5, 5), (4, 9), (2, 26), (7, 22), (9, 13), (3, 40), (13, 70)])
def test_float32_row_major_mv_follows_mkls_sgemv_t(m, k):
    """MKL's sgemv 't' (the CPU's float32 mv/addmv of a row-major matrix, mm
    with one output column or row, F.linear of a vector): rows in blocks of
    4 sum a head up to the 16-byte boundary of the block's last row, then 4
    lanes; the rows after the blocks take the head from the vector's
    address, 8 lanes (the second of them 4 lanes, 8 products a pass);
    products rounded, alpha * sum + beta * y. Fuzz 57721566-446342 (an
    expanded 5 x 5 @ a strided column: rows 0-3 cancel +-3.4e38 before the
    small terms, 0 where the plain sum gives 0.323) among them."""
    g = torch.Generator().manual_seed(73)
    failures = []
    b0 = torch.tensor([[0.28206393122673035]])
    b1 = torch.tensor([[-0.304391473531723, -0.5288429260253906], [3.4028234663852886e+38] * 2,
                       [-3.4028234663852886e+38, 0.19470590353012085], [-0.03264632076025009, 2.252934455871582],
                       [1.1776316165924072, -1.0]])
    want = torch.mm(b0.expand(5, 5), b1[:, ::2])
    got = torch.mm(b0.neuron().expand(5, 5), b1.neuron()[:, ::2]).cpu()
    if not torch.equal(want, got):
        failures.append("fuzz 57721566-446342")
    for trial in range(3):
        a, x, y = _edge((m, k), torch.float32, g), _edge((k,), torch.float32, g), _edge((m,), torch.float32, g)
        x = torch.where(x.abs() > 10, torch.tensor(1.3), x)
        for off, xoff, extra in [(0, 0, 0), (1, 2, 1), (2, 3, 2), (3, 1, 3)]:
            cases = {
                "mv": lambda d: torch.mv(_at_offset(a.to(d), off, extra), _at_offset(x.to(d), xoff)),
                "addmv": lambda d: torch.addmv(y.to(d), _at_offset(a.to(d), off, extra), _at_offset(x.to(d), xoff),
                                               beta=1.7, alpha=0.3),
                "addmm": lambda d: torch.addmm(y.to(d).view(m, 1), _at_offset(a.to(d), off, extra),
                                               _at_offset(x.to(d), xoff).view(k, 1), beta=2.0, alpha=0.5),
                "linear": lambda d: F.linear(_at_offset(x.to(d), xoff), _at_offset(a.to(d), off, extra), y.to(d)),
            }
            for name, fn in cases.items():
                want, got = fn("cpu"), fn("neuron").cpu()
                if not torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3)):
                    failures.append((trial, off, xoff, extra, name))
    assert not failures
    assert_no_fallbacks()


@pytest.mark.parametrize("m,n", [(5, 3), (2, 2), (1, 4), (13, 6)])
@pytest.mark.parametrize("lc", ["row", "col", "strided"])
def test_float32_k1_addmm_scales_the_operand_mkl_scales(m, n, lc):
    """MKL's sgemm with k == 1 scales BLAS's 'b' by alpha before the product
    for a column-major (or copied) C too, and 'a' for a one-row problem
    there: 0.5 * 3e38 * 1.5 stays finite. Fuzz 9301-10022 (addbmm_ into a
    strided self: its addmm_ steps run on a column-major copy) among them."""
    g = torch.Generator().manual_seed(79)
    failures = []
    for trial in range(3):
        a, b, c = _edge((m, 1), torch.float32, g), _edge((1, n), torch.float32, g), _edge((m, n), torch.float32, g)
        for la in ("row", "col", "strided"):
            for lb in ("row", "col", "strided"):
                for beta, alpha in [(0.5, 0.5), (1.0, 4.0), (0.0, 0.3)]:
                    def run(d):
                        r = _layout(c.to(d).clone(), lc)
                        return r.addmm_(_layout(a.to(d), la), _layout(b.to(d), lb), beta=beta, alpha=alpha).cpu()
                    want, got = run("cpu"), run("neuron")
                    if not torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3)):
                        failures.append((trial, la, lb, beta, alpha))
    s, b1, b2 = _edge((5, 6), torch.float32, g), _edge((3, 5, 1), torch.float32, g), _edge((3, 1, 3), torch.float32, g)
    b1[0, 0, 0] = -3.4028234663852886e+38
    want = s.clone()[:, ::2].addbmm_(b1, b2, beta=0.5, alpha=0.5)
    got = s.neuron()[:, ::2].addbmm_(b1.neuron(), b2.neuron(), beta=0.5, alpha=0.5).cpu()
    if not torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3)):
        failures.append("addbmm_")
    assert not failures
    assert_no_fallbacks()


@pytest.mark.parametrize("k", [8, 13, 33, 57])
@pytest.mark.parametrize("la", ["row", "col", "strided"])
@pytest.mark.parametrize("lb", ["row", "col", "strided"])
def test_float32_one_by_one_addmm_follows_mkls_loop(k, la, lb):
    """A 1 x 1 float32 addmm (a dot in MKL's sgemm) starts from beta * y and
    adds (alpha * a_k) * b_k in k order, unfused, for any k (neuron took the
    packed kernel from k 8)."""
    g = torch.Generator().manual_seed(83)
    failures = []
    for trial in range(3):
        a, b, c = _edge((1, k), torch.float32, g), _edge((k, 1), torch.float32, g), _edge((1, 1), torch.float32, g)
        b = torch.where(b.abs() > 10, torch.tensor(1.3), b)
        for beta, alpha in [(0, 1), (1.0, 0.5), (1.7, 0.3), (0.5, 2.0)]:
            def run(d):
                return torch.addmm(c.to(d), _layout(a.to(d), la), _layout(b.to(d), lb), beta=beta, alpha=alpha).cpu()
            want, got = run("cpu"), run("neuron")
            if not torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3)):
                failures.append((trial, beta, alpha))
    assert not failures
    assert_no_fallbacks()


@pytest.mark.parametrize("la", ["row", "col", "strided"])
@pytest.mark.parametrize("lb", ["row", "col"])
def test_float32_bmm_entries_take_mkls_small_sgemm_paths(la, lb):
    """From 400 multiply-adds per entry the CPU's float32 bmm/baddbmm is one
    addmm_ per entry, so MKL's small-sgemm loops (and alpha on an operand)
    apply there as in mm (the packed kernel before: fuzz 9302-16878,
    baddbmm of 3 x 6 x 13 @ 13 x 6 with alpha 0.5, inf where the CPU is
    finite)."""
    g = torch.Generator().manual_seed(89)
    failures = []

    def lay3(t, how):
        if how == "col":
            return t.transpose(1, 2).contiguous().transpose(1, 2)
        if how == "strided":
            return torch.cat([t, t], 2)[:, :, ::2]
        return t

    for bs, m, k, n in [(2, 4, 30, 12), (2, 3, 40, 7)]:
        a, b, c = _edge((bs, m, k), torch.float32, g), _edge((bs, k, n), torch.float32, g), \
            _edge((bs, m, n), torch.float32, g)
        for beta, alpha in [(0, 1), (1.0, 0.5), (1.7, 0.3)]:
            for op in ("bmm", "baddbmm"):
                def run(d):
                    if op == "bmm":
                        return torch.bmm(lay3(a.to(d), la), lay3(b.to(d), lb)).cpu()
                    return torch.baddbmm(c.to(d), lay3(a.to(d), la), lay3(b.to(d), lb), beta=beta, alpha=alpha).cpu()
                want, got = run("cpu"), run("neuron")
                if not torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3)):
                    failures.append((m, k, n, op, beta, alpha))
    assert not failures
    assert_no_fallbacks()


def test_float32_baddbmm_fuzz_9302_16878():
    b0 = torch.tensor([3.0e38, -1.0, 0.3127, 1.0, -3.4028234663852886e+38, 0.5, 2.0] * 36)[:3 * 6 * 13].view(3, 6, 13)
    b1 = torch.tensor([1.5, -0.7, 3.4028234663852886e+38, 1.0, -2.0, 0.25, -3.0e38] * 36)[:3 * 13 * 6 + 1]
    self = torch.tensor(1.25)

    def run(d):
        return torch.baddbmm(self.to(d), b0.to(d), b1.to(d)[1:].view(3, 13, 6), alpha=0.5).cpu()
    want, got = run("cpu"), run("neuron")
    assert torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3))
    assert_no_fallbacks()


@pytest.mark.parametrize("m,k", [(5, 13), (7, 22), (3, 40)])
@pytest.mark.parametrize("inc", [2, 3])
def test_float32_mm_with_a_strided_column_follows_mkls_buffered_sgemv(m, k, inc):
    """mm/addmm with one output column read from a strided vector: MKL's
    sgemm copies the vector into an aligned buffer of its own before its
    sgemv 't', so the rows after the 4-row blocks take an aligned
    vector's head."""
    g = torch.Generator().manual_seed(97)
    failures = []
    for trial in range(3):
        a, x, y = _edge((m, k), torch.float32, g), _edge((k,), torch.float32, g), _edge((m, 1), torch.float32, g)
        x = torch.where(x.abs() > 10, torch.tensor(1.3), x)
        for xoff in range(3):
            def vec(d):
                st = torch.zeros(xoff + k * inc, device=d)
                v = st[xoff:].as_strided((k,), (inc,))
                v.copy_(x.to(d))
                return v
            cases = {
                "mm": lambda d: torch.mm(a.to(d), vec(d).view(k, 1)),
                "addmm": lambda d: torch.addmm(y.to(d), a.to(d), vec(d).view(k, 1), beta=1.7, alpha=0.3),
                "row": lambda d: torch.mm(vec(d).view(1, k), a.to(d).t()),
            }
            for name, fn in cases.items():
                want, got = fn("cpu"), fn("neuron").cpu()
                if not torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3)):
                    failures.append((trial, xoff, name))
    assert not failures
    assert_no_fallbacks()


@pytest.mark.parametrize("m,k", [(2, 20), (7, 25), (3, 13), (6, 34)])
def test_float32_mv_of_a_strided_vector_follows_mkls_gemv(m, k):
    """mv/addmv of a strided vector: MKL's gemv sums the rows after the
    4-row blocks as the first product, then 8 lanes 16 products a pass,
    the lanes added in order (the blocks as with a unit-stride vector)."""
    g = torch.Generator().manual_seed(101)
    failures = []
    for trial in range(3):
        a, x, y = _edge((m, k), torch.float32, g), _edge((k,), torch.float32, g), _edge((m,), torch.float32, g)
        x = torch.where(x.abs() > 10, torch.tensor(1.3), x)
        for inc in (2, 3):
            def vec(d):
                st = torch.zeros(1 + k * inc, device=d)
                v = st[1:].as_strided((k,), (inc,))
                v.copy_(x.to(d))
                return v
            for name, fn in {"mv": lambda d: torch.mv(a.to(d), vec(d)),
                             "addmv": lambda d: torch.addmv(y.to(d), a.to(d), vec(d), beta=0.5, alpha=2.0)}.items():
                want, got = fn("cpu"), fn("neuron").cpu()
                if not torch.equal(want.nan_to_num(1, 2, 3), got.nan_to_num(1, 2, 3)):
                    failures.append((trial, inc, name))
    assert not failures
    assert_no_fallbacks()


@pytest.mark.parametrize("m,n", [(3, 6), (5, 19), (2, 37), (7, 70)])
@pytest.mark.parametrize("layout", ["row", "col"])
def test_float16_mv_follows_atens_gemv(m, n, layout):
    """float16 mv/addmv take ATen's gemv<Half> as bfloat16 does (never BLAS):
    torch.mv of a row-major matrix is its vectorised dot per row, other 't'
    calls sum the rounded products in order and finish in float16 scalars,
    'n' adds (alpha * vec_j) * mat_ij over j in float (neuron took
    addmm's cpublas loops: 60 of 400 crafted cases differed, 3 after)."""
    g = torch.Generator().manual_seed(103)
    failures = []
    for trial in range(3):
        mat, vec, y = _edge((m, n), torch.float16, g), _edge((n,), torch.float16, g), _edge((m,), torch.float16, g)
        for beta, alpha in [(0, 1), (1, 1), (2.0, 0.5), (1.7, 0.3)]:
            def run(d):
                return torch.addmv(y.to(d), _layout(mat.to(d), layout), vec.to(d), beta=beta, alpha=alpha).cpu()
            want, got = run("cpu"), run("neuron")
            if not torch.equal(want.float().nan_to_num(1, 2, 3), got.float().nan_to_num(1, 2, 3)):
                failures.append((trial, beta, alpha))
        want = torch.mv(_layout(mat, layout), vec)
        got = torch.mv(_layout(mat.neuron(), layout), vec.neuron()).cpu()
        if not torch.equal(want.float().nan_to_num(1, 2, 3), got.float().nan_to_num(1, 2, 3)):
            failures.append((trial, "mv"))
    assert not failures
    assert_no_fallbacks()


def test_float16_addmv_keeps_beta_times_self_in_float_with_alpha_1_like_the_cpu():
    # ATen's float16 gemv 't' with alpha == 1 adds beta * y in float (2 *
    # -65504 + 65505 is -65504, not -inf; fuzz 60221409-1330142); with
    # another alpha, and in bfloat16, beta * y is rounded first
    g = torch.Generator().manual_seed(0)
    for _ in range(60):
        m, n = int(torch.randint(1, 6, (1,), generator=g)), int(torch.randint(1, 20, (1,), generator=g))
        mat, vec = (torch.randn(m, n, generator=g) * 3).half(), (torch.randn(n, generator=g) * 3).half()
        bias = (torch.randn(m, generator=g) * 30000).half()
        for al, be in ((1.0, -1.5), (1.0, 2.0), (0.3, -1.5), (2.0, 0.5)):
            want = torch.addmv(bias, mat, vec, beta=be, alpha=al)
            got = torch.addmv(bias.neuron(), mat.neuron(), vec.neuron(), beta=be, alpha=al).cpu()
            assert torch.equal(got.nan_to_num(0, 1, -1), want.nan_to_num(0, 1, -1)), (m, n, al, be)
    mat, vec = torch.ones(3, 6, dtype=torch.half), torch.tensor([65504.0, 0, 0, 0, 0, 1], dtype=torch.half)
    bias = torch.full((3,), -65504.0, dtype=torch.half)
    assert torch.equal(torch.addmv(bias.neuron(), mat.neuron(), vec.neuron(), beta=2.0).cpu(),
                       torch.addmv(bias, mat, vec, beta=2.0))


# torch.dot of float32 vectors is MKL's sdot on the CPU, not a 1 x n by
# n x 1 sgemm: on Intel AVX-512 hosts 16-lane accumulators (four from 64
# elements) with fused products for unit strides, 4 lanes and a pairwise
# tail otherwise (kernels/gemm/sdot.c). Exact, also with 3.4e38 entries,
# where the order decides between inf, NaN and a number (fuzz 18201-910074:
# -1 x [-3.4e38, 3.4e38, 0.97, 1.56] is 0 on the CPU, -2.53 in order).
@pytest.mark.parametrize("kind", ["contiguous", "expanded", "strided"])
def test_float32_dot_takes_mkls_sdot_order(kind):
    g = torch.Generator().manual_seed(11)
    for n in list(range(1, 70)) + [127, 128, 129, 300]:
        y = torch.randn(2 * n, generator=g)[::2] if kind == "strided" else torch.randn(n, generator=g)
        if kind == "expanded":
            x = torch.tensor([-1.0]).expand(n)
            y = y.clone()
            y[: min(n, 2)] = torch.tensor([-3.4e38, 3.4e38])[: min(n, 2)]
        else:
            x = torch.randn(n, generator=g)
            x[n // 2] = 3.4e38 if n % 3 == 0 else x[n // 2]
        want = torch.dot(x, y)
        xd = torch.tensor([-1.0]).neuron().expand(n) if kind == "expanded" else x.neuron()
        yd = torch.zeros(2 * n).neuron() if kind == "strided" else y.neuron()
        if kind == "strided":
            yd[::2] = y.neuron()
            yd = yd[::2]
        got = torch.dot(xd, yd).cpu()
        assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num()), (n, got, want)


# From 400 multiply-adds per entry the CPU runs baddbmm_ as one addmm_ per
# batch entry: an in-place self expanded over the batch is taken (each entry
# sees the previous one's writes), one expanded over rows is refused because
# each entry overlaps itself (20101-1952986). A float16/bfloat16 product
# oneDNN takes whole (over 16^3 multiply-adds, on hosts with its support)
# goes entry by entry with one thread and races with more; a self expanded
# over rows there gets a blocking-dependent result (float16) or a SIGFPE
# (bfloat16) on the CPU, so only neuron's refusal is checked for 16 bits.
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(2, 4, 17, 6), (3, 4, 100, 4)])
def test_baddbmm_inplace_self_expanded_over_the_batch(dtype, shape):
    B, M, K, N = shape
    g = torch.Generator().manual_seed(4)
    base = torch.randn(M, N, generator=g).to(dtype)
    a, b = torch.randn(B, M, K, generator=g).to(dtype), torch.randn(B, K, N, generator=g).to(dtype)
    want = base.clone()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        want.expand(B, M, N).baddbmm_(a, b, alpha=0.5, beta=1.5)
    finally:
        torch.set_num_threads(threads)
    got = base.to("neuron")
    got.expand(B, M, N).baddbmm_(a.to("neuron"), b.to("neuron"), alpha=0.5, beta=1.5)
    exact = dtype.itemsize == 2  # the CPU's 16-bit loops, followed in order
    torch.testing.assert_close(got.cpu(), want, rtol=0 if exact else 1e-5, atol=0 if exact else 1e-4)
    rows = torch.zeros(B, 1, N, dtype=dtype)
    if not exact:
        with pytest.raises(RuntimeError, match="single memory location"):
            rows.expand(B, M, N).baddbmm_(a, b)
    with pytest.raises(RuntimeError, match="single memory location"):
        rows.to("neuron").expand(B, M, N).baddbmm_(a.to("neuron"), b.to("neuron"))


# One column of C from a row-major matrix of two or more rows: MKL's AVX-512
# cgemv/zgemv 't' sums each row in one zmm of lanes (8 complex64, 4
# complex128), then in halves. With a +-B pair and a 1 that tells the orders
# apart, every triple of positions agrees with the CPU bit for bit
# (20101-2248090: +-1e18 j products that cancel absorbed the row's small
# terms on the CPU, where neuron's sum in k order kept them).
# The same kernel serves x @ W^T and F.linear of a vector (one row of C, which
# BLAS computes transposed: 21101-26107).
@pytest.mark.parametrize("dtype,big", [(torch.complex64, 1e18), (torch.complex128, 2.0 ** 60)])
@pytest.mark.parametrize("k", [7, 12, 20])
@pytest.mark.parametrize("form", ["mm", "linear"])
def test_complex_mm_one_column_takes_mkls_gemv_lanes(dtype, big, k, form):
    rows = []
    for p in range(k):
        for q in range(p + 1, k):
            for r in range(k):
                if r not in (p, q):
                    row = torch.zeros(k, dtype=dtype)
                    row[p], row[q], row[r] = big, -big, 1.0
                    rows.append(row)
    a = torch.stack(rows)
    x = torch.ones(k, 1, dtype=dtype)

    def run(a, x):
        return torch.mm(a, x) if form == "mm" else F.linear(x.expand(k, 4)[:, 0], a)
    want = run(a, x)
    got = run(a.neuron(), x.neuron()).cpu()
    assert torch.equal(got, want), int((got != want).sum())
    assert_no_fallbacks()


# A 1 x 1 complex product whose 'b' counts as transposed (a strided 1 x 1 view,
# row stride 2) scales 'a' by alpha on Intel AVX-512 hosts for every k, k = 1
# too: (0.56 - 0.38i) (-inf - i) is -inf + inf i there, where alpha times the
# sum makes NaN + NaN i (21101-1726015).
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("row_stride", [1, 2, 3])
def test_complex_1x1_mm_places_alpha_as_mkl_does(k, row_stride):
    a = torch.tensor([[complex(0.5554518, -0.3767319)] * k], dtype=torch.complex64)
    base = torch.zeros(8, dtype=torch.complex64)
    base[0], base[row_stride] = complex(float("-inf"), -1.0), complex(-0.0, float("inf"))
    b = base.as_strided((k, 1), (row_stride, 1))
    want = torch.view_as_real(torch.mm(a, b))
    got = torch.view_as_real(torch.mm(a.neuron(), b.neuron()).cpu())
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num()), (got, want)
    assert_no_fallbacks()


# Complex bmm/baddbmm from 400 multiply-adds per entry with k == 1, each entry
# contiguous or transposed and the result contiguous: ATen hands the batch to
# MKL's batched cgemm, which on Intel AVX-512 hosts puts alpha on batch2 (no
# multiply for 1, a sign flip for -1) and adds the bias as is for beta == 1:
# (-1e18 - inf i) (-3 + 0i) is NaN + inf i there, not NaN + NaN i
# (21101-1807477).
# (400, 1): one output column per entry, which alone would take the gemv
# lanes; the batched path has a single product per entry and takes none.
@pytest.mark.parametrize("alpha,beta", [(1.0, None), (-1.0, None), (2.0, 0.5), (complex(0.5, 1), 1.0)])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("m,n", [(20, 20), (400, 1)])
def test_complex_bmm_k1_takes_mkls_batched_path(alpha, beta, transposed, m, n):
    vals = [complex(float("-inf"), -1), complex(-0.0, float("inf")), complex(-1e18, float("-inf")),
            complex(0.55, -0.37), complex(-3, 0), complex(0, 2)]
    g = torch.Generator().manual_seed(5)

    def pick(*shape):
        idx = torch.randint(len(vals), shape, generator=g)
        return torch.tensor(vals, dtype=torch.complex64)[idx]
    a = pick(3, m, 1)
    b = pick(3, n, 1).transpose(1, 2) if transposed else pick(3, 1, n)
    s = pick(3, m, n)

    def run(a, b, s):
        if beta is None:
            return torch.bmm(a, b) if alpha == 1.0 else torch.baddbmm(s, a, b, beta=0, alpha=alpha)
        return torch.baddbmm(s, a, b, beta=beta, alpha=alpha)
    want = torch.view_as_real(run(a, b, s))
    got = torch.view_as_real(run(a.neuron(), b.neuron(), s.neuron()).cpu())
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num())
    assert_no_fallbacks()
