"""Selection ops on the neuron device (family SELECT): cummax/cummin,
logcumsumexp, kthvalue/median/nanmedian/mode, unique and its variants,
searchsorted/bucketize, histc/histogram/histogramdd, repeat_interleave,
nonzero_static, aminmax and count_nonzero, against PyTorch on the CPU with
zero CPU fallbacks.

Values of order statistics must match exactly; their indices may differ
from the CPU's among equal values (the CPU's choice there is unspecified),
so indices are checked by the values they select. Float results of
logcumsumexp get float32 tolerance (1e-5 relative: both sides accumulate
in different precisions); histogram counts are exact.
"""
import pytest
import torch

import torch_neuronx  # noqa: F401
from helpers import DEV, assert_no_fallbacks, raises_like_cpu, same


def nz(t: torch.Tensor) -> torch.Tensor:
    return t.to(DEV)


def data(shape, dtype, nan=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-4, 5, shape, generator=g).to(dtype)
    if dtype.is_floating_point:
        x = x / 2
        if nan:
            x.view(-1)[:: max(1, x.numel() // 3)] = float("nan")
    return x


DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64]


# ---- cummax / cummin / logcumsumexp -----------------------------------------

@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
@pytest.mark.parametrize("op", [torch.cummax, torch.cummin])
def test_cummax_cummin(op, dtype):
    x = data((5, 7), dtype, nan=True) if dtype != torch.bool else data((5, 7), torch.int64) > 0
    for dim in (0, 1, -1):
        vc, ic = op(x, dim)
        vd, id_ = op(nz(x), dim)
        same(vd, vc)
        same(id_, ic)  # deterministic rule: ties take the last index, NaN sticks
    # non-contiguous input and out= tensors
    vo, io = torch.empty(7, 5, dtype=dtype, device=DEV).t(), torch.empty(7, 5, dtype=torch.long, device=DEV).t()
    op(nz(x.t().contiguous()).t(), 1, out=(vo, io))
    vc, ic = op(x, 1)
    same(vo, vc)
    same(io, ic)
    assert_no_fallbacks()


def test_cummax_backward_and_scalar():
    x = torch.randn(4, 6)
    xd = nz(x).requires_grad_()
    xc = x.clone().requires_grad_()
    g = torch.randn(4, 6)
    torch.cummax(xc, 1)[0].backward(g)
    torch.cummax(xd, 1)[0].backward(nz(g))
    same(xd.grad, xc.grad)
    s = torch.tensor(3.0)
    same(torch.cummin(nz(s), 0)[0], torch.cummin(s, 0)[0])
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_logcumsumexp(dtype):
    x = (torch.randn(6, 9) * 5).to(dtype)
    x[1, 3] = float("-inf")
    x[2, :] = float("-inf")
    x[3, 4] = float("inf")
    x[4, 2] = float("nan")
    tol = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}[dtype]
    for dim in (0, 1):
        same(torch.logcumsumexp(nz(x), dim), torch.logcumsumexp(x, dim), rtol=tol, atol=tol)
    xc = torch.randn(5, 4, requires_grad=True)
    xd = nz(xc.detach()).requires_grad_()
    torch.logcumsumexp(xc, 1).sum().backward()
    torch.logcumsumexp(xd, 1).sum().backward()
    same(xd.grad, xc.grad, rtol=1e-4, atol=1e-5)
    assert_no_fallbacks()


# ---- order statistics ----------------------------------------------------------

def check_selected(x, dim, keepdim, vd, id_, vc):
    """Values equal; each index selects its value."""
    same(vd, vc)
    idx = id_.cpu() if keepdim else id_.cpu().unsqueeze(dim)
    picked = torch.gather(x, dim, idx)
    torch.testing.assert_close(picked if keepdim else picked.squeeze(dim), vc, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_kthvalue_median_mode(dtype):
    x = data((6, 11), dtype, nan=True)
    for dim in (0, 1):
        for keepdim in (False, True):
            vc, _ = torch.kthvalue(x, 3, dim, keepdim)
            vd, id_ = torch.kthvalue(nz(x), 3, dim, keepdim)
            check_selected(x, dim, keepdim, vd, id_, vc)
            for fn in (torch.median, torch.nanmedian):
                vc, _ = fn(x, dim, keepdim)
                vd, id_ = fn(nz(x), dim, keepdim)
                check_selected(x, dim, keepdim, vd, id_, vc)
            # mode without NaN: the CPU's result for rows with NaN depends on
            # how std::sort happens to place unordered values.
            y = data((6, 11), dtype, seed=5)
            vc, _ = torch.mode(y, dim, keepdim)
            vd, id_ = torch.mode(nz(y), dim, keepdim)
            check_selected(y, dim, keepdim, vd, id_, vc)
    same(torch.median(nz(x)), torch.median(x))
    same(torch.nanmedian(nz(x)), torch.nanmedian(x))
    assert_no_fallbacks()


def test_order_stat_edges():
    all_nan = torch.full((2, 3), float("nan"))
    same(torch.nanmedian(nz(all_nan), 1)[0], torch.nanmedian(all_nan, 1)[0])
    same(torch.median(nz(torch.tensor([]))), torch.median(torch.tensor([])))
    s = torch.tensor(2.5)
    same(torch.kthvalue(nz(s), 1)[0], torch.kthvalue(s, 1)[0])
    with pytest.raises(RuntimeError, match="out of range"):
        torch.kthvalue(nz(torch.randn(3)), 4)
    with pytest.raises(IndexError, match="non-zero size"):
        torch.median(nz(torch.randn(0, 3)), 0)
    # out= with non-contiguous value / index tensors
    x = torch.randn(4, 5)
    v, i = torch.empty(2, 4, device=DEV)[0], torch.empty(2, 4, dtype=torch.long, device=DEV)[1]
    torch.median(nz(x), 1, out=(v, i))
    same(v, torch.median(x, 1)[0])
    assert_no_fallbacks()


def test_order_stat_backward():
    x = torch.randn(5, 6)
    for fn in (lambda t: torch.median(t, 1)[0], lambda t: torch.kthvalue(t, 2, 0)[0], lambda t: torch.median(t)):
        xc = x.clone().requires_grad_()
        xd = nz(x).requires_grad_()
        fn(xc).sum().backward()
        fn(xd).sum().backward()
        same(xd.grad, xc.grad)
    assert_no_fallbacks()


# ---- unique family ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
def test_unique(dtype):
    x = data((4, 6), dtype, nan=True) if dtype != torch.bool else data((4, 6), torch.int64) > 0
    for sorted_ in (True, False):
        rc = torch.unique(x, sorted=sorted_, return_inverse=True, return_counts=True)
        rd = torch.unique(nz(x), sorted=sorted_, return_inverse=True, return_counts=True)
        same(rd[0], rc[0])
        same(rd[2], rc[2])
        # Every NaN is its own unique value; which NaN gets which slot depends
        # on the CPU's unstable sort, so the inverse is checked by the values
        # it maps back to.
        same(rd[0][rd[1]], x)
        clean = data((4, 6), dtype, seed=7) if dtype != torch.bool else x
        rc = torch.unique(clean, sorted=sorted_, return_inverse=True, return_counts=True)
        rd = torch.unique(nz(clean), sorted=sorted_, return_inverse=True, return_counts=True)
        for a, b in zip(rd, rc):
            same(a, b)
    # unique(dim=) without NaN: the CPU orders slices holding NaN by
    # std::sort's handling of unordered values.
    clean = data((5, 3), dtype, seed=8) if dtype != torch.bool else x
    clean = torch.cat([clean, clean[:2]])
    for dim in (0, 1):
        rc = torch.unique(clean, dim=dim, return_inverse=True, return_counts=True)
        rd = torch.unique(nz(clean), dim=dim, return_inverse=True, return_counts=True)
        for a, b in zip(rd, rc):
            same(a, b)
    y = x.repeat_interleave(2, 0) if dtype != torch.bool else x
    rc = torch.unique_consecutive(y, return_inverse=True, return_counts=True)
    rd = torch.unique_consecutive(nz(y), return_inverse=True, return_counts=True)
    for a, b in zip(rd, rc):
        same(a, b)
    rc = torch.unique_consecutive(y, return_inverse=True, return_counts=True, dim=0)
    rd = torch.unique_consecutive(nz(y), return_inverse=True, return_counts=True, dim=0)
    for a, b in zip(rd, rc):
        same(a, b)
    assert_no_fallbacks()


def test_unique_edges():
    e = torch.empty(0, 3)
    for a, b in zip(torch.unique(nz(e), return_inverse=True, return_counts=True),
                    torch.unique(e, return_inverse=True, return_counts=True)):
        same(a, b)
    same(torch.unique(nz(torch.tensor(5.0))), torch.unique(torch.tensor(5.0)))
    rc = torch.unique(e, dim=0, return_inverse=True, return_counts=True)
    rd = torch.unique(nz(e), dim=0, return_inverse=True, return_counts=True)
    for a, b in zip(rd, rc):
        same(a, b)
    with pytest.raises(RuntimeError, match="aren't selected"):
        torch.unique(nz(e), dim=1)
    x = torch.randn(4, 5)
    i = torch.tensor([1, 3, 1])
    same(x.clone().index_fill_(0, i, -1.0), x.clone().index_fill_(0, i, -1.0))
    same(nz(x).index_fill(0, nz(i), 2.0), x.index_fill(0, i, 2.0))
    assert_no_fallbacks()


# ---- searchsorted / bucketize ---------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_searchsorted(dtype):
    b = torch.sort(data((3, 8), dtype, seed=1), dim=1)[0]
    v = data((3, 5), dtype, nan=True, seed=2)
    for right in (False, True):
        for out_int32 in (False, True):
            same(torch.searchsorted(nz(b), nz(v), right=right, out_int32=out_int32),
                 torch.searchsorted(b, v, right=right, out_int32=out_int32))
            same(torch.searchsorted(nz(b[0]), nz(v), side="right" if right else "left"),
                 torch.searchsorted(b[0], v, side="right" if right else "left"))
            same(torch.bucketize(nz(v), nz(b[0]), right=right, out_int32=out_int32),
                 torch.bucketize(v, b[0], right=right, out_int32=out_int32))
    # sorter: unsorted boundaries and the permutation that sorts them
    ub = data((3, 8), dtype, seed=3)
    sorter = torch.argsort(ub, dim=1, stable=True)
    same(torch.searchsorted(nz(ub), nz(v), sorter=nz(sorter)), torch.searchsorted(ub, v, sorter=sorter))
    # scalar value, 0-d input, mixed dtypes (promoted), non-contiguous input
    same(torch.searchsorted(nz(b[0]), 1), torch.searchsorted(b[0], 1))
    same(torch.bucketize(nz(v).t(), nz(b[0])), torch.bucketize(v.t(), b[0]))
    assert_no_fallbacks()


def test_searchsorted_errors_and_promotion():
    b = torch.tensor([1.0, 2.0, 3.0])
    same(torch.searchsorted(nz(b), nz(torch.tensor([2, 5]))), torch.searchsorted(b, torch.tensor([2, 5])))
    with pytest.raises(RuntimeError, match="side can only be"):
        torch.searchsorted(nz(b), nz(b), side="middle")
    with pytest.raises(RuntimeError, match="boundaries tensor should be 1 dimension"):
        torch.searchsorted(nz(torch.ones(2, 3)), nz(torch.ones(3, 3)))
    with pytest.raises(RuntimeError, match="boundaries tensor must be 1 dimension"):
        torch.bucketize(nz(b), nz(torch.ones(2, 3)))
    assert_no_fallbacks()


# ---- histograms ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_histc(dtype):
    x = (torch.randn(200) * 3).to(dtype)
    x[5] = float("nan")
    for bins, lo, hi in ((10, 0, 0), (7, -2, 2), (1, -1, 1)):
        same(torch.histc(nz(x[x == x]), bins, lo, hi), torch.histc(x[x == x], bins, lo, hi))
        same(torch.histc(nz(x), bins, -2, 2), torch.histc(x, bins, -2, 2))
    c = torch.full((4,), 2.0, dtype=dtype)
    same(torch.histc(nz(c), 4), torch.histc(c, 4))
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(nz(x), 5, 3, 1)
    assert_no_fallbacks()


def test_histogram():
    x = torch.randn(300) * 2
    w = torch.rand(300)
    for density in (False, True):
        for weight in (None, w):
            hc, ec = torch.histogram(x, 9, weight=weight, density=density)
            hd, ed = torch.histogram(nz(x), 9, weight=None if weight is None else nz(weight), density=density)
            same(ed, ec)
            same(hd, hc, rtol=1e-5, atol=1e-6)
            hc, ec = torch.histogram(x, 6, range=(-1.0, 2.0), weight=weight, density=density)
            hd, ed = torch.histogram(nz(x), 6, range=(-1.0, 2.0), weight=None if weight is None else nz(weight),
                                     density=density)
            same(ed, ec)
            same(hd, hc, rtol=1e-5, atol=1e-6)
            edges = torch.tensor([-3.0, -1.0, 0.0, 0.5, 4.0])
            hc, _ = torch.histogram(x, edges, weight=weight, density=density)
            hd, _ = torch.histogram(nz(x), nz(edges), weight=None if weight is None else nz(weight), density=density)
            same(hd, hc, rtol=1e-5, atol=1e-6)
    assert_no_fallbacks()


def test_histogramdd():
    x = torch.randn(100, 3)
    w = torch.rand(100)
    hc, ec = torch.histogramdd(x, [3, 4, 2], weight=w, density=True)
    hd, ed = torch.histogramdd(nz(x), [3, 4, 2], weight=nz(w), density=True)
    same(hd, hc, rtol=1e-5, atol=1e-6)
    for a, b in zip(ed, ec):
        same(a, b)
    bins = [torch.tensor([-2.0, 0.0, 2.0]), torch.tensor([-1.0, 1.0]), torch.tensor([-3.0, -1.0, 0.0, 3.0])]
    hc, _ = torch.histogramdd(x, bins)
    hd, _ = torch.histogramdd(nz(x), [nz(b) for b in bins])
    same(hd, hc)
    hc, _ = torch.histogramdd(x, [2, 2, 2], range=[-1.0, 1.0, 0.0, 2.0, -2.0, 0.0])
    hd, _ = torch.histogramdd(nz(x), [2, 2, 2], range=[-1.0, 1.0, 0.0, 2.0, -2.0, 0.0])
    same(hd, hc)
    assert_no_fallbacks()


# ---- repeat_interleave / nonzero_static / aminmax / count_nonzero --------------------------------

@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_repeat_interleave(dtype):
    r = torch.tensor([2, 0, 3, 1], dtype=dtype)
    same(torch.repeat_interleave(nz(r)), torch.repeat_interleave(r))
    same(torch.repeat_interleave(nz(r), output_size=6), torch.repeat_interleave(r, output_size=6))
    x = torch.randn(4, 3)
    same(torch.repeat_interleave(nz(x), nz(r), dim=0), torch.repeat_interleave(x, r, dim=0))
    same(torch.repeat_interleave(nz(torch.tensor([], dtype=dtype))), torch.repeat_interleave(torch.tensor([], dtype=dtype)))
    with pytest.raises(RuntimeError, match="repeats can not be negative"):
        torch.repeat_interleave(nz(torch.tensor([1, -1], dtype=dtype)))
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
def test_nonzero_static(dtype):
    x = data((3, 4), dtype)
    if dtype == torch.bool:
        x = data((3, 4), torch.int64) > 0
    for size in (0, 2, 20):
        same(torch.nonzero_static(nz(x), size=size, fill_value=-7), torch.nonzero_static(x, size=size, fill_value=-7))
    same(torch.nonzero_static(nz(x).t(), size=5), torch.nonzero_static(x.t(), size=5))
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
def test_aminmax_count_nonzero(dtype):
    x = data((4, 5), dtype) if dtype != torch.bool else data((4, 5), torch.int64) > 0
    for kw in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}):
        for a, b in zip(torch.aminmax(nz(x), **kw), torch.aminmax(x, **kw)):
            same(a, b)
    for dims in (None, 0, (0, 1)):
        same(torch.count_nonzero(nz(x), dims), torch.count_nonzero(x, dims))
    assert_no_fallbacks()


def test_out_variants_and_dtype_errors():
    x = torch.randn(50)
    h, e = torch.empty(0, device=DEV), torch.empty(0, device=DEV)
    torch.histogram(nz(x), 5, out=(h, e))
    hc, ec = torch.histogram(x, 5)
    same(h, hc)
    same(e, ec)
    edges = torch.tensor([-1.0, 0.0, 2.0])
    torch.histogram(nz(x), nz(edges), out=(h, e))
    same(h, torch.histogram(x, edges)[0])
    o = torch.empty(0, dtype=torch.long, device=DEV)
    torch.nonzero_static(nz(x > 0), size=4, out=o)
    same(o, torch.nonzero_static(x > 0, size=4))
    ints = torch.tensor([1, 2, 3])
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        torch.histc(nz(ints), 3)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        torch.histogram(nz(ints), 3)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        torch.logcumsumexp(nz(ints), 0)
    assert_no_fallbacks()


def test_histc_large_bfloat16_is_accurate():
    # The CPU accumulates bfloat16 counts in bfloat16 (they stall at 256 per
    # thread); the device counts exactly and rounds once.
    x = (torch.randn(4000) * 3).to(torch.bfloat16)
    ref = torch.histc(x.double(), 3, -2, 2).to(torch.bfloat16)
    same(torch.histc(nz(x), 3, -2, 2), ref)
    assert_no_fallbacks()


def test_kthvalue_over_an_empty_dim_raises_index_error_like_the_cpu():
    raises_like_cpu(lambda d: torch.kthvalue(torch.ones(0, 3, device=d), 1, 0), IndexError)


# logcumsumexp wraps its dim before its kernel checks the dtype: a dim out
# of range is IndexError also for an integer input.
def test_logcumsumexp_checks_the_dim_before_the_dtype():
    x = torch.zeros(3, dtype=torch.int32)
    raises_like_cpu(lambda d: torch.logcumsumexp(x.to(d), 5), IndexError)
    raises_like_cpu(lambda d: torch.logcumsumexp(x.to(d), 0), NotImplementedError)
    assert_no_fallbacks()


# Order statistics refuse the dtypes the CPU's kernels refuse, with its
# classes: median/nanmedian/kthvalue of bool (NotImplementedError; mode and
# sort take bool), topk of bool or complex and sort of complex (RuntimeError).
@pytest.mark.parametrize("case", [
    ("median bool", lambda d: torch.median(torch.tensor([True, False, True], device=d)), NotImplementedError),
    ("median dim bool", lambda d: torch.median(torch.tensor([True, False, True], device=d), 0), NotImplementedError),
    ("nanmedian bool", lambda d: torch.nanmedian(torch.tensor([True, False], device=d)), NotImplementedError),
    ("kthvalue bool", lambda d: torch.kthvalue(torch.tensor([True, False], device=d), 1), NotImplementedError),
    ("topk bool", lambda d: torch.topk(torch.tensor([True, False], device=d), 1), RuntimeError),
    ("topk complex", lambda d: torch.topk(torch.tensor([1 + 1j, 2], device=d), 1), RuntimeError),
    ("sort complex", lambda d: torch.sort(torch.tensor([1 + 1j, 2], device=d)), RuntimeError),
    ("topk k out of range first", lambda d: torch.topk(torch.tensor([True, False], device=d), 3), RuntimeError),
], ids=lambda c: c[0])
def test_order_statistics_refuse_dtypes_like_the_cpu(case):
    raises_like_cpu(case[1], case[2])


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_logcumsumexp_complex(dtype):
    # The CPU's complex scan (its own formula from -inf + 0i) on random rows,
    # a conjugate view, and special values whose results depend on the
    # formula and the scan order.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 8, dtype=dtype, generator=g) * 4
    for dim in (0, 1, -1):
        same(torch.logcumsumexp(nz(x), dim), torch.logcumsumexp(x, dim))
    same(torch.logcumsumexp(nz(x).conj(), 1), torch.logcumsumexp(x.conj(), 1))
    same(torch.logcumsumexp(nz(x[0, 0]), 0), torch.logcumsumexp(x[0, 0], 0))  # 0-d
    inf, nan = float("inf"), float("nan")
    s = torch.tensor([complex(-inf, 3), complex(-inf, 1), complex(2, 0.5), complex(inf, 0.25), complex(1, inf),
                      complex(nan, 0), complex(0, 1)], dtype=dtype)
    for row in (s, s.flip(0), s[[0, 2, 1, 4, 3]]):
        same(torch.logcumsumexp(nz(row), 0), torch.logcumsumexp(row, 0))
    # backward: the CPU's complex formula, composed of native ops
    xc = x.clone().requires_grad_()
    xd = nz(x).requires_grad_()
    w = torch.randn(5, 8, dtype=dtype, generator=g)
    (torch.logcumsumexp(xc, 1) * w).sum().abs().backward()
    (torch.logcumsumexp(xd, 1) * nz(w)).sum().abs().backward()
    same(xd.grad, xc.grad, rtol=1e-4, atol=1e-5)
    raises_like_cpu(lambda d: torch.logcumsumexp(torch.ones(3, dtype=torch.complex32, device=d), 0),
                    NotImplementedError)
    assert_no_fallbacks()


def test_bool_searchsorted_and_complex_median_aminmax_raise_like_the_cpu():
    b = torch.tensor([False, True])
    raises_like_cpu(lambda d: torch.searchsorted(b.to(d), b.to(d)), NotImplementedError)
    raises_like_cpu(lambda d: torch.searchsorted(b.to(d), True), NotImplementedError)
    raises_like_cpu(lambda d: torch.bucketize(b.to(d), b.to(d)), NotImplementedError)
    raises_like_cpu(lambda d: torch.searchsorted(torch.tensor([], dtype=torch.bool, device=d), b.to(d)),
                    NotImplementedError)
    # a promoted pair is searched
    same(torch.searchsorted(nz(torch.tensor([0.5, 1.5])), nz(b)), torch.searchsorted(torch.tensor([0.5, 1.5]), b))
    c = torch.ones(3, dtype=torch.complex64)
    for call in (lambda d: torch.median(c.to(d)), lambda d: torch.nanmedian(c.to(d)),
                 lambda d: torch.median(c.to(d), 0), lambda d: torch.median(c[0].to(d), 0),
                 lambda d: torch.median(torch.ones(0, 3, dtype=torch.complex64, device=d), 1),
                 lambda d: torch.nanmedian(torch.ones((), dtype=torch.bool, device=d), 0),
                 lambda d: torch.median(torch.ones(0, 3, dtype=torch.bool, device=d), 1)):
        raises_like_cpu(call, NotImplementedError)
    # aminmax: the dim-wise kernel's own RuntimeError for a 0-d complex input
    raises_like_cpu(lambda d: torch.aminmax(c[0].to(d), dim=0), RuntimeError)
    raises_like_cpu(lambda d: torch.aminmax(c.to(d), dim=0), NotImplementedError)
    raises_like_cpu(lambda d: torch.aminmax(c.to(d)), NotImplementedError)
    raises_like_cpu(lambda d: torch.aminmax(torch.ones(0, 3, dtype=torch.complex64, device=d), dim=1),
                    NotImplementedError)
    raises_like_cpu(lambda d: torch.aminmax(torch.ones(0, dtype=torch.complex64, device=d)), RuntimeError)


# kthvalue's CPU kernel dispatches for any input of at least one dim, an
# empty one included (no bool or complex form; a 0-d one is copied); the
# unique kernels dispatch first of all (no complex form, empty or not).
@pytest.mark.parametrize("case", [
    ("kthvalue bool empty", lambda d: torch.kthvalue(torch.empty(6, 4, 0, dtype=torch.bool, device=d), 4, dim=-2)),
    ("kthvalue complex empty", lambda d: torch.kthvalue(torch.empty(6, 4, 0, dtype=torch.complex64, device=d), 4, 1)),
    ("kthvalue complex", lambda d: torch.kthvalue(torch.ones(3, dtype=torch.complex64, device=d), 1)),
    ("unique complex empty", lambda d: torch.unique(torch.empty(0, dtype=torch.complex64, device=d),
                                                    return_inverse=True, return_counts=True)),
    ("unique complex", lambda d: torch.unique(torch.ones(3, dtype=torch.complex64, device=d), sorted=False)),
    ("unique complex dim", lambda d: torch.unique(torch.empty(0, 2, dtype=torch.complex64, device=d), dim=0)),
    ("unique_consecutive complex", lambda d: torch.unique_consecutive(torch.empty(0, dtype=torch.complex64,
                                                                                  device=d))),
    ("unique_consecutive complex dim", lambda d: torch.unique_consecutive(torch.ones(2, 2, dtype=torch.complex64,
                                                                                     device=d), dim=1)),
], ids=lambda c: c[0])
def test_kthvalue_and_unique_refuse_dtypes_like_the_cpu(case):
    cpu, dev = raises_like_cpu(case[1], NotImplementedError)
    assert str(dev).split(" (in the neuron")[0] == str(cpu)
    want = torch.kthvalue(torch.tensor(True), 1)
    got = torch.kthvalue(torch.tensor(True, device=DEV), 1)
    assert got.values.item() == want.values.item() and got.indices.item() == want.indices.item()
    assert_no_fallbacks()


@pytest.mark.parametrize("value", [complex(float("nan"), -0.0), complex(1.5, -0.0), float("nan")])
def test_logcumsumexp_of_a_0d_tensor_is_a_copy_like_the_cpu(value):
    """The CPU's scan kernels copy a 0-d input: complex nan - 0i stays as is
    (one step of log(exp(z)) gives nan + nan i)."""
    x = torch.tensor(value, dtype=torch.complex64 if isinstance(value, complex) else torch.float32)
    got = torch.logcumsumexp(x.to("neuron"), 0).cpu()
    want = torch.logcumsumexp(x, 0)
    view = torch.view_as_real if x.is_complex() else (lambda t: t.reshape(1))
    assert torch.equal(view(got).isnan(), view(want).isnan())
    assert torch.equal(view(got).nan_to_num(7.0), view(want).nan_to_num(7.0))
    assert torch.equal(view(got).signbit(), view(want).signbit())
