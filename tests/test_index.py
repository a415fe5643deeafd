"""INDEX family: index_put_ accumulation, scatter with a reduction, bincount,
tril/triu_indices, integer linspace/logspace; one test also covers cross,
gcd/lcm and bit shifts. Against PyTorch on the CPU with zero CPU fallbacks."""
import warnings

import pytest
import torch

import torch_neuronx
from helpers import DEV, assert_no_fallbacks, raises_like_cpu


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


@pytest.mark.parametrize("idx", [[5], [-4], [0, 3]])
def test_out_of_range_cpu_index_raises_index_error_at_the_op(idx):
    # Indices on the host are checked before they move, as on the CPU and
    # CUDA; `except IndexError` works.
    x = torch.randn(3, 2)
    i = torch.tensor(idx)
    with pytest.raises(IndexError, match="out of bounds"):
        x[i]
    xn = x.to("neuron")
    with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 3"):
        xn[i]
    with pytest.raises(IndexError, match="out of bounds"):
        xn[i] = 1.0
    with pytest.raises(IndexError, match="out of bounds for dimension 1 with size 2"):
        xn[:, torch.tensor([2])]
    torch.testing.assert_close(xn[torch.tensor([-3, 2])].cpu(), x[torch.tensor([-3, 2])])


def test_output_of_a_failed_kernel_is_poisoned():
    # A device-side index error surfaces at the next synchronisation, naming
    # the kernel (as CUDA's device asserts do) and with the CPU's class,
    # IndexError; afterwards the failed output keeps raising instead of
    # reading back garbage.
    x = torch.randn(3, device="neuron")
    y = x[torch.tensor([5], device="neuron")]
    with pytest.raises(IndexError, match="INDEX_GATHER.*index 5 is out of bounds for dimension 0 with size 3"):
        y.cpu()
    for _ in range(2):
        with pytest.raises(RuntimeError, match="failed earlier"):
            y.cpu()
    with pytest.raises(RuntimeError, match="failed earlier"):
        (y + 1).cpu()  # what is computed from it is poisoned too
    torch.testing.assert_close((x * 2).cpu(), x.cpu() * 2)  # the device stays usable


@pytest.mark.parametrize("case", [
    ("value of another dtype", lambda d: torch.zeros(3, device=d).index_put_(
        (torch.tensor([0, 1], device=d),), torch.tensor([1, 2], device=d)), RuntimeError),
    ("setitem with a value of another dtype", lambda d: torch.zeros(3, device=d).__setitem__(
        torch.tensor([0], device=d), torch.tensor([1], dtype=torch.int32, device=d)), RuntimeError),
    ("an index into an empty dim", lambda d: torch.zeros(0, device=d).index_put_(
        (torch.tensor([0], device=d),), torch.tensor([1.0], device=d)), IndexError),
], ids=lambda c: c[0])
def test_index_put_checks_like_the_cpu(case):
    raises_like_cpu(case[1], case[2])


def test_index_put_mask_with_a_cpu_scalar_value_of_another_dtype_fills_like_the_cpu():
    # ATen's masked_fill_ shortcut takes the value's dtype as it comes.
    x, m = torch.zeros(3), torch.tensor([True, False, True])
    want = x.clone().index_put_((m,), torch.tensor(5, dtype=torch.int64))
    got = x.to("neuron").index_put_((m.to("neuron"),), torch.tensor(5, dtype=torch.int64))
    assert torch.equal(got.cpu(), want)


def test_index_select_from_an_empty_dim_raises_the_cpu_runtime_error():
    raises_like_cpu(lambda d: torch.index_select(torch.empty(0, 1, 2, device=d), 0, torch.tensor([0], device=d)),
                    RuntimeError)


# index_put_ validates its indices (IndexError) before it compares the
# value's dtype with self's (RuntimeError), as ATen's make_info does.
@pytest.mark.parametrize("case", ["float index", "mask shape", "dtype only"])
def test_index_put_checks_indices_before_the_value_dtype(case):
    self_ = torch.zeros(3, 4)
    value = torch.ones(2, dtype=torch.int64)
    idx = {"float index": (torch.tensor([0.0, 1.0]),), "mask shape": (torch.tensor([True, False]),),
           "dtype only": (torch.tensor([0, 1]),)}[case]
    cls = RuntimeError if case == "dtype only" else IndexError
    raises_like_cpu(lambda d: self_.to(d).index_put_(tuple(i.to(d) for i in idx), value.to(d)), cls)
    assert_no_fallbacks()


# masked_fill_ on an expanded (internally overlapping) self: the CPU only
# warns, and an element takes the value when any of its aliases is masked.
@pytest.mark.parametrize("dtype", [torch.float32, torch.int16, torch.bool])
def test_masked_fill_on_an_expanded_self_fills_where_any_alias_is_masked(dtype):
    mask = torch.tensor([[True, False, False, False], [False] * 4, [False, False, True, False]])
    got = {}
    for dev in ("cpu", "neuron"):
        base = torch.zeros(3, 1, dtype=dtype, device=dev)
        with pytest.warns(UserWarning, match="expanded tensors is deprecated"):
            base.expand(3, 4).masked_fill_(mask.to(dev), 1)
        row = torch.zeros(4, dtype=dtype, device=dev)
        row.expand(2, 4).masked_fill_(torch.tensor([True, False, False, True], device=dev), 1)
        got[dev] = (base.cpu(), row.cpu())
    for a, b in zip(got["neuron"], got["cpu"]):
        assert torch.equal(a, b)
    assert_no_fallbacks()


# index_put_ validates its indices as ATen's make_info does (IndexError:
# masks against the indexed shape, index tensors broadcast together, a
# non-empty index into a dim of size 0) before its iterator compares the
# value's dtype; a uint8 mask with a one-element CPU value takes ATen's
# masked_fill_ shortcut, which refuses it (RuntimeError).
@pytest.mark.parametrize("case", [
    ("broadcast", lambda d: torch.zeros(3, 3, device=d).index_put_(
        (torch.tensor([0, 1], device=d), torch.tensor([0, 1, 2], device=d)), torch.tensor(1.0, dtype=torch.float64,
                                                                                          device=d)), IndexError),
    ("broadcast with a mask", lambda d: torch.zeros(2, 3, device=d).index_put_(
        (torch.tensor([True, True], device=d), torch.tensor([0, 1, 2], device=d)), torch.tensor(1, device=d)),
     IndexError),
    ("empty dim", lambda d: torch.zeros(3, 0, device=d).index_put_(
        (torch.tensor([0, 1], device=d), torch.tensor([0, 0], device=d)), torch.tensor(1.0, dtype=torch.float64,
                                                                                       device=d)), IndexError),
    ("empty dim, empty index", lambda d: torch.zeros(0, 3, device=d).index_put_(
        (torch.tensor([], dtype=torch.long, device=d),), torch.tensor(1, dtype=torch.int32, device=d)), RuntimeError),
    ("dtype", lambda d: torch.zeros(2, 3, device=d).index_put_(
        (torch.tensor([True, False], device=d), torch.tensor([0, 1], device=d)), torch.tensor(1, dtype=torch.int32,
                                                                                              device=d)), RuntimeError),
    ("uint8 mask shortcut", lambda d: torch.zeros(3, device=d).index_put_(
        (torch.tensor([1, 0, 1], dtype=torch.uint8, device=d),), torch.tensor(1.0)), RuntimeError),
], ids=lambda c: c[0] if isinstance(c, tuple) else None)
def test_index_put_checks_indices_in_the_cpu_order(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raises_like_cpu(case[1], case[2])
    assert_no_fallbacks()


# scatter_reduce's in-place and out= forms are native (out= fell back to the
# CPU), out= needing self's dtype as on the CPU.
@pytest.mark.parametrize("reduce", ["sum", "amax", "mean"])
def test_scatter_reduce_inplace_and_out_are_native(reduce):
    x, src = torch.tensor([[0.7, -1.0, 1.5], [2.0, 3.0, 0.5]]), torch.ones(2, 3)
    idx = torch.tensor([[0, 1, 0], [1, 0, 1]])
    torch_neuronx.clear_op_tracking()
    got = torch.scatter_reduce(x.to(DEV), 0, idx.to(DEV), src.to(DEV), reduce, out=torch.empty(0, device=DEV))
    torch.testing.assert_close(got.cpu(), torch.scatter_reduce(x, 0, idx, src, reduce))
    got = x.to(DEV).scatter_reduce_(0, idx.to(DEV), src.to(DEV), reduce, include_self=False)
    torch.testing.assert_close(got.cpu(), x.clone().scatter_reduce_(0, idx, src, reduce, include_self=False))
    assert_no_fallbacks()
    raises_like_cpu(lambda d: torch.scatter_reduce(x.to(d), 0, idx.to(d), src.to(d), reduce,
                                                   out=torch.empty(0, dtype=torch.float64, device=d)), RuntimeError)


# Complex scatter "multiply"/"prod" (the textbook complex product, in index
# order, as c10::complex) and "mean" (the parts' sum, divided), for
# scatter_reduce with and without self, scatter(reduce=) and index_reduce.
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
def test_complex_scatter_prod_and_mean_like_the_cpu(dtype):
    g = torch.Generator().manual_seed(0)
    s = torch.randn(3, 4, dtype=dtype, generator=g)
    src = torch.randn(3, 5, dtype=dtype, generator=g)
    idx = torch.randint(0, 4, (3, 5), generator=g)
    d = "neuron"
    for red in ("prod", "mean"):
        for inc in (True, False):
            torch.testing.assert_close(s.to(d).scatter_reduce(1, idx.to(d), src.to(d), red, include_self=inc).cpu(),
                                       s.scatter_reduce(1, idx, src, red, include_self=inc))
        torch.testing.assert_close(s.to(d).index_reduce(0, torch.tensor([0, 2, 0], device=d), s.to(d), red).cpu(),
                                   s.index_reduce(0, torch.tensor([0, 2, 0]), s, red))
    torch.testing.assert_close(s.to(d).scatter(1, idx.to(d), src.to(d), reduce="multiply").cpu(),
                               s.scatter(1, idx, src, reduce="multiply"))
    torch.testing.assert_close(s.to(d).scatter(1, idx.to(d), 2 + 1j, reduce="multiply").cpu(),
                               s.scatter(1, idx, 2 + 1j, reduce="multiply"))
    one, inf = torch.ones(1, dtype=dtype), torch.tensor([complex(float("inf"), 0)], dtype=dtype)
    want = one.scatter_reduce(0, torch.tensor([0]), inf, "prod")  # inf+nan j: 0 * inf
    got = one.to(d).scatter_reduce(0, torch.tensor([0], device=d), inf.to(d), "prod").cpu()
    torch.testing.assert_close(got, want, equal_nan=True)
    assert_no_fallbacks()


# The CPU's scatter kernels reduce float16/bfloat16 in a float32 copy of self
# and round once (sum, prod, mean; the expanded-index fast path too), so a
# running value past the 16-bit range comes back; exact against the CPU.
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("expanded", [False, True], ids=["index", "expanded-index"])
def test_16bit_scatter_reductions_accumulate_in_float32_like_the_cpu(dtype, expanded):
    big = 60000.0 if dtype == torch.float16 else 3e38
    self = torch.tensor([[big, 1.0, 2.0], [3.0, big, -big], [0.5, 0.25, 7.0]], dtype=dtype)
    src = torch.tensor([[big, 2.0, 3.0], [-big, 1e-3, big], [-big, 1e-3, 5.0], [4.0, -big, 0.5]], dtype=dtype)
    idx = (torch.tensor([[0], [0], [2], [0]]).expand(4, 3) if expanded
           else torch.tensor([[0, 1, 1], [0, 1, 1], [2, 0, 1], [0, 1, 2]]))
    d = "neuron"

    def check(f):
        torch.testing.assert_close(f(d).cpu(), f("cpu"), rtol=0, atol=0, equal_nan=True)

    for red in ("sum", "prod", "mean", "amax"):
        for inc in (True, False):
            check(lambda dev: self.to(dev).scatter_reduce(0, idx.to(dev), src.to(dev), red, include_self=inc))
    check(lambda dev: self.to(dev).scatter_add(0, idx.to(dev), src.to(dev)))
    check(lambda dev: self.to(dev).scatter(0, idx.to(dev), src.to(dev), reduce="add"))
    check(lambda dev: self.to(dev).scatter(0, idx.to(dev), src.to(dev), reduce="multiply"))
    check(lambda dev: self.to(dev).scatter(0, idx.to(dev), 1.7, reduce="multiply"))  # the value rounds to 16 bits
    assert_no_fallbacks()


# index_add of a complex source: outside its scatter_add_ path (a >1-d self
# along its first or last dim, int64 index, alpha 1) the CPU adds
# source * alpha even for alpha 1, and (inf + 1i) * (1 + 0i) is inf + nan i.
@pytest.mark.parametrize("case", ["0-d", "1-d", "dim0 int64", "dim0 int32", "middle dim", "alpha 2"])
def test_complex_index_add_multiplies_by_alpha_where_the_cpu_does(case):
    inf = float("inf")
    row = torch.tensor([complex(inf, 1), complex(1, -inf), complex(2, 3)], dtype=torch.complex64)
    self, src, dim, kw = {
        "0-d": (torch.zeros((), dtype=torch.complex64), row[:1].reshape(()), 0, {}),
        "1-d": (torch.ones(3, dtype=torch.complex64), row, 0, {}),
        "dim0 int64": (torch.ones(3, 3, dtype=torch.complex64), row.repeat(3, 1), 0, {}),
        "dim0 int32": (torch.ones(3, 3, dtype=torch.complex64), row.repeat(3, 1), 0, {}),
        "middle dim": (torch.ones(2, 3, 3, dtype=torch.complex64), row.repeat(2, 3, 1).transpose(1, 2), 1, {}),
        "alpha 2": (torch.ones(3, 3, dtype=torch.complex64), row.repeat(3, 1), 0, {"alpha": 2}),
    }[case]
    n = 1 if self.dim() == 0 else 3
    idx = torch.tensor([0, 2, 0][:n], dtype=torch.int32 if case == "dim0 int32" else torch.int64)
    want = self.index_add(dim, idx, src, **kw)
    got = self.neuron().index_add(dim, idx.neuron(), src.neuron(), **kw).cpu()
    torch.testing.assert_close(torch.view_as_real(got), torch.view_as_real(want), rtol=0, atol=0, equal_nan=True)
    assert_no_fallbacks()


# index_reduce 'mean' of a complex source: the CPU adds each source slice
# with add's alpha of 1, so an infinite part turns the other part NaN before
# the division (nan + nan i where scatter_reduce's mean gives -inf + nan i).
def test_complex_index_reduce_mean_multiplies_by_alpha_like_the_cpu():
    inf, nan = float("inf"), float("nan")
    self = torch.tensor([[1 + 2j, 3 - 1j], [3 + 4j, 0.5j]], dtype=torch.complex64)
    src = torch.tensor([[complex(-inf, 1), complex(1, -inf)], [2 + 0j, complex(nan, 1)], [1j, 2 - 2j]],
                       dtype=torch.complex64)
    idx = torch.tensor([0, 0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # index_reduce is in beta
        want = self.index_reduce(0, idx, src, "mean")
    got = self.neuron().index_reduce(0, idx.neuron(), src.neuron(), "mean").cpu()
    torch.testing.assert_close(torch.view_as_real(got), torch.view_as_real(want), rtol=0, atol=0, equal_nan=True)
    assert_no_fallbacks()


# index_add with alpha: the CPU adds each slice of a >1-d self with
# add_(source, alpha), whose kernel fuses self + alpha * source, so 2 *
# -1.3e38 + 3.4e38... stays finite where a product rounded first is -inf
# (fuzz 161803398-107143, 18201-332127: neuron scaled the source before
# index_put_); its loop for a 1-d self rounds the product first.
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("dim", [0, 1])
def test_index_add_alpha_fuses_where_the_cpu_does(dtype, dim):
    g = torch.Generator().manual_seed(dim)
    self = torch.randn(3, 4, generator=g, dtype=dtype)
    self[0, 0] = -3.4028234663852886e38
    src = torch.randn(3, 4, generator=g, dtype=dtype)
    src[0, 0] = -1.7e38
    idx = torch.tensor([0, 2, 0, 1])  # 0 twice: a duplicate adds twice, in order
    # 2-d: fused; 1-d: rounded first (float32 only: a 1-d float64 index_put_
    # accumulates at float32 precision, the device's float64)
    cases = ((self, src, dim), (self[0], src[0], 0)) if dtype == torch.float32 else ((self, src, dim),)
    for s, x, d in cases:
        i = idx[: x.shape[d]] % s.shape[d]
        want = s.index_add(d, i, x, alpha=-2.0)
        got = s.neuron().index_add(d, i.neuron(), x.neuron(), alpha=-2.0).cpu()
        assert torch.equal(got.isinf(), want.isinf()), (got, want)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
