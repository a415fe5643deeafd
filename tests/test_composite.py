"""Composite ops with native implementations built from other native ops
(sgn, dot, addmv, index_add, index_fill, var_mean, logaddexp, nansum, norm,
rsub, clamp with tensor bounds) against PyTorch on the CPU, with zero CPU
fallbacks."""
import pytest
import torch

from helpers import assert_no_fallbacks, close, raises_like_cpu


def test_composite_natives():
    x, y = torch.randn(5), torch.randn(5)
    M = torch.randn(3, 5)
    d = lambda t: t.neuron()  # noqa: E731
    assert torch.equal(torch.sgn(d(x)).cpu(), torch.sgn(x))
    close(torch.dot(d(x), d(y)), torch.dot(x, y), atol=1e-5)
    close(torch.addmv(d(torch.randn(3)), d(M), d(x), beta=0), M @ x, atol=1e-5)
    s, idx, src = torch.zeros(4, 3), torch.tensor([0, 2, 0]), torch.ones(3, 3)
    assert torch.equal(torch.index_add(d(s), 0, d(idx), d(src), alpha=2).cpu(), torch.index_add(s, 0, idx, src, alpha=2))
    assert torch.equal(d(s).index_fill_(1, d(torch.tensor([1])), 5).cpu(),
                       s.clone().index_fill_(1, torch.tensor([1]), 5))
    v, m = torch.var_mean(d(M), 1)
    close(v, torch.var(M, 1), atol=1e-5)
    close(m, M.mean(1), atol=1e-6)
    inf = torch.tensor([float("inf"), -float("inf"), 1.0])
    close(torch.logaddexp(d(inf), d(inf)), torch.logaddexp(inf, inf))
    close(torch.logaddexp(d(x), d(y)), torch.logaddexp(x, y))
    assert torch.equal(d(x), d(x)) and not torch.equal(d(x), d(y))
    assert torch.nansum(d(torch.tensor([1.0, float("nan"), 2.0]))).item() == 3.0
    close(torch.norm(d(M), dim=1), torch.norm(M, dim=1))
    close(torch.rsub(d(x), d(y), alpha=2), torch.rsub(x, y, alpha=2))
    close(torch.clamp(d(M), min=d(torch.zeros(5))), torch.clamp(M, min=torch.zeros(5)))
    assert_no_fallbacks()


def test_index_add_with_a_fractional_alpha_on_an_integer_tensor_computes():
    # alpha * source is float; index_put_ requires self's dtype, so the product is cast first
    s, idx, src = torch.zeros(2, 3, dtype=torch.uint8), torch.tensor([0, 2]), torch.full((2, 2), 4, dtype=torch.uint8)
    got = torch.index_add(s.to("neuron"), 1, idx.to("neuron"), src.to("neuron"), alpha=0.5)
    assert got.dtype == torch.uint8 and got.shape == s.shape
    empty = torch.empty(0, 1, dtype=torch.uint8)
    want = torch.index_add(empty, 1, torch.tensor([0]), empty, alpha=0.5)
    got = torch.index_add(empty.to("neuron"), 1, torch.tensor([0], device="neuron"), empty.to("neuron"), alpha=0.5)
    assert got.dtype == want.dtype and got.shape == want.shape


def test_index_add_into_an_empty_self_is_a_no_op_like_the_cpu():
    s, idx, src = torch.empty(0, 1, 1), torch.tensor([0]), torch.tensor([[[-3.0]]])
    want = torch.index_add(s, 0, idx, src)
    got = torch.index_add(s.to("neuron"), 0, idx.to("neuron"), src.to("neuron"))
    assert got.shape == want.shape


def test_index_add_checks_like_its_meta_function():
    """index_add's meta-function checks, made before anything else (an empty
    self too), with the CPU's class and message."""
    i8, i16 = torch.int8, torch.int16
    cases = [
        lambda d: torch.index_add(torch.tensor([3, 0], dtype=i8, device=d), -1, torch.zeros(4, dtype=torch.long,
                                  device=d), torch.tensor([-2, -2], dtype=i8, device=d), alpha=0.5),
        lambda d: torch.index_add(torch.tensor([1, 2], dtype=i16, device=d), 0, torch.tensor([0, 1], device=d),
                                  torch.tensor([1.0, 2.0], device=d)),
        lambda d: torch.index_add(torch.empty(5, 0, 2, dtype=torch.long, device=d), -1,
                                  torch.tensor([1, 1, 0, 0], dtype=torch.int32, device=d),
                                  torch.empty(5, 0, 2, dtype=torch.long, device=d)),
        lambda d: torch.index_add(torch.zeros(2, 3, device=d), 1, torch.tensor([0], device=d),
                                  torch.zeros(3, 1, device=d)),
        lambda d: torch.index_add(torch.zeros(3, device=d), 0, torch.tensor([0.0], device=d),
                                  torch.zeros(1, device=d)),
        lambda d: torch.index_add(torch.zeros(3, device=d), 0, torch.zeros(1, 1, dtype=torch.long, device=d),
                                  torch.zeros(1, device=d)),
    ]
    for k, f in enumerate(cases):
        cpu, dev = raises_like_cpu(f)
        assert str(dev) == str(cpu), k
    with pytest.raises(IndexError):
        cases[-1]("neuron")


def test_logaddexp_out_must_take_the_result_type():
    # the CPU's iterator: a floating result cannot be cast into an integer
    # or bool out= (RuntimeError before computing); a wider out= is fine
    x, y = torch.randn(3), torch.randn(3)
    for dt in (torch.uint8, torch.int8, torch.int64, torch.bool):
        raises_like_cpu(lambda d: torch.logaddexp(x.to(d), y.to(d), out=torch.empty(3, dtype=dt, device=d)),
                        RuntimeError)
    raises_like_cpu(lambda d: torch.logaddexp(x.to(d, torch.bfloat16), y.to(d, torch.int64),
                                              out=torch.empty(3, dtype=torch.uint8, device=d)), RuntimeError)
    for dt in (torch.float64, torch.complex64):
        out = torch.empty(3, dtype=dt, device="neuron")
        torch.logaddexp(x.neuron(), y.neuron(), out=out)
        close(out, torch.logaddexp(x, y).to(dt))
    raises_like_cpu(lambda d: torch.logaddexp(torch.ones(3, dtype=torch.int32, device=d), torch.ones(3, device=d, dtype=torch.int32)),
                    NotImplementedError)
    assert_no_fallbacks()


def test_index_fill_checks_like_the_cpu():
    """index_fill_'s checks in the CPU's order: an int64 index (IndexError,
    even for an empty self or a bad dim), the dim, a vector/scalar index."""
    i32 = torch.tensor([0, 2], dtype=torch.int32)
    cases = [
        (lambda d: torch.zeros(3, 4, device=d).index_fill(1, i32.to(d), 5), IndexError),
        (lambda d: torch.zeros(3, 4, device=d).index_fill_(1, i32.to(d), torch.tensor(2.0)), IndexError),
        (lambda d: torch.zeros(0, 4, device=d).index_fill(1, i32.to(d), 5), IndexError),
        (lambda d: torch.zeros(3, 4, device=d).index_fill(5, i32.to(d), 5), IndexError),
        (lambda d: torch.zeros(3, 4, device=d).index_fill(1, i32.to(d), 1e40), IndexError),
        (lambda d: torch.zeros(3, 4, device=d).index_fill(1, torch.tensor([[0, 2]], device=d), 5), RuntimeError),
        (lambda d: torch.zeros(3, 4, device=d).index_fill(2, torch.tensor([0], device=d), 5), IndexError),
        (lambda d: torch.zeros(3, 4, device=d).index_fill(1, torch.tensor([0], device=d), torch.ones(2)),
         RuntimeError),
        (lambda d: torch.zeros(3, 4, device=d).index_fill(1, torch.tensor([0], device=d), 1 + 2j), RuntimeError),
        (lambda d: torch.zeros(0, 4, device=d).index_fill(1, torch.tensor([0], device=d), 1j), RuntimeError),
        (lambda d: torch.zeros(3, 4, device=d).index_fill(1, i32.to(d), 1j), IndexError),
    ]
    for call, cls in cases:
        raises_like_cpu(call, cls)
    # a complex self takes a complex value
    c = torch.zeros(2, 3, dtype=torch.complex64)
    got = c.neuron().index_fill(1, torch.tensor([2], device="neuron"), 1 + 2j)
    assert torch.equal(got.cpu(), c.index_fill(1, torch.tensor([2]), 1 + 2j))
    # a 0-d self takes dim 0 or -1
    s = torch.tensor(1.0)
    for dim in (0, -1):
        got = s.neuron().index_fill(dim, torch.tensor([0], device="neuron"), 7)
        assert torch.equal(got.cpu(), s.index_fill(dim, torch.tensor([0]), 7))
    assert_no_fallbacks()


def _raises_like_cpu_at_call_or_sync(call):
    """call(dev) raises on the CPU; neuron raises the same class, at the call
    or (an index only a kernel sees) at the next synchronisation, with the
    CPU's message inside its own. Returns the two exceptions."""
    with pytest.raises(Exception) as cpu:
        call("cpu")
    with pytest.raises(Exception) as dev:
        call("neuron")
        torch.neuron.synchronize()
    torch.neuron.synchronize()  # nothing left behind on the stream
    assert type(dev.value) is type(cpu.value), f"neuron: {dev.value!r}; the CPU: {cpu.value!r}"
    assert str(cpu.value).split("\n")[0] in str(dev.value)
    return cpu.value, dev.value


def _index_add(self_shape, dim, index, source_shape, dtype=torch.float32, index_dtype=torch.long, alpha=1):
    return lambda d: torch.index_add(torch.zeros(self_shape, dtype=dtype, device=d), dim,
                                     torch.tensor(index, dtype=index_dtype, device=d),
                                     torch.ones(source_shape, dtype=dtype, device=d), alpha=alpha)


# The CPU's index_add checks every index (none negative): a 0-d or 1-d self
# against its element count even when empty (IndexError); a >1-d self along
# its first or last dim with an int64 index and alpha 1 through scatter_add_
# (RuntimeError naming the dim), else in its own loop (IndexError).
@pytest.mark.parametrize("case", [
    ("1-d past the end", _index_add((3,), 0, [3], (1,)), IndexError),
    ("1-d negative", _index_add((3,), 0, [1, -1], (2,)), IndexError),
    ("1-d empty self", _index_add((0,), 0, [0], (1,)), IndexError),
    ("0-d self", _index_add((), 0, 1, ()), IndexError),
    ("0-d self negative", _index_add((), 0, [-1], ()), IndexError),
    ("1-d int32 index", _index_add((3,), 0, [5], (1,), torch.int16, torch.int32), IndexError),
    ("2-d first dim", _index_add((3, 2), 0, [3], (1, 2)), RuntimeError),
    ("2-d first dim negative", _index_add((3, 2), 0, [0, -1], (2, 2)), RuntimeError),
    ("2-d last dim negative", _index_add((3, 2), 1, [-3, 0], (3, 2), torch.int64), RuntimeError),
    ("3-d last dim", _index_add((2, 3, 4), 2, [1, 7], (2, 3, 2), torch.bfloat16), RuntimeError),
    ("3-d middle dim", _index_add((2, 3, 4), 1, [1, 7], (2, 2, 4)), IndexError),
    ("3-d middle dim negative", _index_add((2, 3, 4), 1, [-1], (2, 1, 4)), IndexError),
    ("2-d int32 index", _index_add((3, 2), 0, [4], (1, 2), index_dtype=torch.int32), IndexError),
    ("2-d alpha 2", _index_add((3, 2), 0, [1, -1], (2, 2), alpha=2), IndexError),
], ids=lambda c: c[0] if isinstance(c, tuple) else None)
def test_index_add_checks_every_index_like_the_cpu(case):
    _, call, cls = case
    cpu, _ = _raises_like_cpu_at_call_or_sync(call)
    assert type(cpu) is cls


@pytest.mark.parametrize("case", [
    ("empty self, no index", _index_add((0,), 0, [], (0,))),
    ("2-d empty self", _index_add((0, 2), 1, [5], (0, 1))),
    ("2-d empty self along its empty dim", _index_add((3, 0), 0, [5], (1, 0))),
    ("2-d no index", _index_add((3, 2), 0, [], (0, 2))),
    ("0-d self", _index_add((), 0, [0], ())),
    ("first dim, repeated", _index_add((3, 2), 0, [1, 1, 2], (3, 2))),
    ("last dim, alpha 2", _index_add((2, 3), 1, [2, 0], (2, 2), alpha=2)),
    ("middle dim, int32 index", _index_add((2, 3, 2), 1, [2, 2], (2, 2, 2), index_dtype=torch.int32)),
], ids=lambda c: c[0] if isinstance(c, tuple) else None)
def test_index_add_in_range_or_unchecked_like_the_cpu(case):
    _, call = case
    want = call("cpu")
    got = call("neuron")
    assert got.shape == want.shape and torch.equal(got.cpu(), want)
    assert_no_fallbacks()


# ATen's index_fill_ restrides self (dim sized by the index, stride 0) before
# it fills anything: an empty self whose storage cannot hold that view
# raises setStorage's RuntimeError; one that can (a slice of a larger
# tensor) has its indices checked against its size-0 dim.
@pytest.mark.parametrize("case", [
    ("empty 1-d self", lambda d: torch.zeros(0, device=d).index_fill_(0, torch.tensor([0, 1], device=d), 1.0),
     RuntimeError),
    ("empty dim beside the filled one",
     lambda d: torch.zeros(6, 0, dtype=torch.bool, device=d).index_fill_(1, torch.tensor([0], device=d), True),
     RuntimeError),
    ("empty slice of a larger tensor",
     lambda d: torch.zeros(4, device=d)[:0].index_fill_(0, torch.tensor([0, 1], device=d), 1.0), IndexError),
], ids=lambda c: c[0] if isinstance(c, tuple) else None)
def test_index_fill_of_an_empty_self_raises_like_the_cpu(case):
    _, call, cls = case
    cpu, _ = _raises_like_cpu_at_call_or_sync(call)
    assert type(cpu) is cls


def test_index_fill_with_nothing_to_iterate_or_negative_indices_like_the_cpu():
    for call in (lambda d: torch.zeros(0, 3, device=d).index_fill_(1, torch.tensor([0], device=d), 1.0),
                 lambda d: torch.zeros(0, device=d).index_fill_(0, torch.tensor([], dtype=torch.long, device=d), 1.0),
                 lambda d: torch.zeros((), device=d).index_fill_(0, torch.tensor([0, -1], device=d), 2.0),
                 lambda d: torch.zeros(2, 3, device=d).index_fill_(1, torch.tensor([-1, 0], device=d), 2.0)):
        want, got = call("cpu"), call("neuron")
        assert got.shape == want.shape and torch.equal(got.cpu(), want)
    assert_no_fallbacks()


# Tensor.addmv_ on an expanded self (one element seen m times): the CPU's
# gemv loop updates that element row after row (beta * y + alpha * dot for
# a row-major mat; beta^m scaling then every product for a column-major
# one), and the result is what that sequence leaves.
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.complex64])
@pytest.mark.parametrize("layout", ["row-major", "column-major", "strided", "one column"])
@pytest.mark.parametrize("beta,alpha", [(0, 1), (1, 1), (2, 1), (0, 0), (2, 0), (0.5, 3), (-1, 2)])
def test_addmv_into_an_expanded_self_like_the_cpu(dtype, layout, beta, alpha):
    g = torch.Generator().manual_seed(0)
    m, n = 5, (1 if layout == "one column" else 3)
    mat = (torch.randn(m, n, generator=g) * 3).round().to(dtype)
    if layout == "column-major":
        mat = mat.t().contiguous().t()
    elif layout == "strided":
        mat = torch.cat([mat, mat], 1)[:, ::2]
    vec = (torch.randn(mat.shape[1], generator=g) * 2).round().to(dtype)
    y0 = torch.tensor([3.0]).to(dtype)

    def call(d):
        return y0.to(d, copy=True).expand(m).addmv_(mat.to(d), vec.to(d), beta=beta, alpha=alpha)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bfloat16/float16 aside, the CPU's loop is serial anyway
    try:
        want, got = call("cpu"), call("neuron")
    finally:
        torch.set_num_threads(threads)  # later tests keep the default
    assert got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-4)
    assert_no_fallbacks()


def test_addmv_into_an_expanded_self_with_an_empty_matrix_like_the_cpu():
    def call(beta):
        return lambda d: torch.tensor([5.0], device=d).expand(4).addmv_(torch.ones(4, 0, device=d),
                                                                         torch.ones(0, device=d), beta=beta)
    assert torch.equal(call(0)("neuron").cpu(), call(0)("cpu"))
    for beta in (1, 2):  # the CPU scales self into itself: its internal-overlap error
        cpu, dev = raises_like_cpu(call(beta))
        assert str(dev) == str(cpu)
    # an expanded out= (not self) is refused as on the CPU
    cpu, dev = raises_like_cpu(lambda d: torch.addmv(torch.ones(4, device=d), torch.ones(4, 3, device=d),
                                                     torch.ones(3, device=d), out=torch.zeros(1, device=d).expand(4)))
    assert str(dev) == str(cpu)


def _addmv(self_shape, mat_shape, vec_shape, dtypes=(torch.float32,) * 3, out=None, **kw):
    def call(d):
        shapes = (self_shape, mat_shape, vec_shape)
        s, m, v = (torch.ones(shape, dtype=dt, device=d) for shape, dt in zip(shapes, dtypes))
        if out is None:
            return torch.addmv(s, m, v, **kw)
        return torch.addmv(s, m, v, out=torch.empty(out[0], dtype=out[1], device=d), **kw)
    return call


F32, F64, I16 = torch.float32, torch.float64, torch.int16


# addmv's meta checks, made for an empty matrix too (whose shortcut skips
# the GEMM's own checks), in ATen's order and with its messages.
@pytest.mark.parametrize("case", [
    ("2-d self, empty matrix", _addmv((1, 4), (4, 0), (0,))),
    ("2-d self", _addmv((1, 4), (4, 2), (2,))),
    ("2-d self before the dtypes", _addmv((1, 4), (4, 2), (2,), (F64, F32, F32))),
    ("self of the wrong size, empty matrix", _addmv((3,), (6, 0), (0,))),
    ("self of the wrong size", _addmv((3,), (6, 2), (2,))),
    ("self of the wrong size, no rows", _addmv((5,), (0, 3), (3,))),
    ("empty self, rows", _addmv((0,), (2, 3), (3,))),
    ("0-d self, vec of the wrong size", _addmv((), (2, 3), (2,))),
    ("mixed dtypes, empty matrix", _addmv((0,), (0, 1), (1,), (F32, F32, I16), beta=0)),
    ("mixed dtypes", _addmv((2,), (2, 1), (1,), (F32, F32, I16))),
    ("self's dtype", _addmv((2,), (2, 0), (0,), (F64, F32, F32))),
    ("out's dtype", _addmv((2,), (2, 3), (3,), out=((2,), torch.int32))),
    ("out's dtype, empty matrix", _addmv((2,), (2, 0), (0,), out=((2,), torch.int32))),
    ("bool", _addmv((2,), (2, 3), (3,), (torch.bool,) * 3)),
], ids=lambda c: c[0] if isinstance(c, tuple) else None)
def test_addmv_checks_like_its_meta_function(case):
    cpu, dev = raises_like_cpu(case[1])
    assert str(cpu).split("\n")[0] in str(dev)


def test_addmv_empty_matrix_shortcut_takes_what_the_cpu_takes():
    for call in (_addmv((1,), (0, 3), (3,)), _addmv((0,), (0, 3), (3,)), _addmv((2,), (2, 0), (0,), beta=2),
                 _addmv((4,), (4, 0), (0,), (torch.bool,) * 3),
                 _addmv((4,), (4, 0), (0,), (torch.float16,) * 3, beta=1e30)):
        want, got = call("cpu"), call("neuron")
        assert got.shape == want.shape and torch.equal(got.cpu(), want)


# dot (and vdot of real tensors, which is dot on the CPU) checks dims, then
# dtypes, then sizes, then dispatches on the dtype, an empty input included:
# no bool form.
@pytest.mark.parametrize("case", [
    ("dot bool", lambda d: torch.dot(torch.ones(2, dtype=torch.bool, device=d), torch.ones(2, dtype=torch.bool, device=d))),
    ("dot bool empty", lambda d: torch.dot(torch.empty(0, dtype=torch.bool, device=d),
                                           torch.empty(0, dtype=torch.bool, device=d))),
    ("vdot bool empty", lambda d: torch.vdot(torch.empty(0, dtype=torch.bool, device=d),
                                             torch.empty(0, dtype=torch.bool, device=d))),
    ("vdot dtypes differ", lambda d: torch.vdot(torch.ones(2, device=d), torch.ones(3, dtype=torch.int32, device=d))),
    ("dot dtypes and sizes differ", lambda d: torch.dot(torch.ones(2, device=d),
                                                        torch.ones(3, dtype=torch.int32, device=d))),
], ids=lambda c: c[0])
def test_dot_and_real_vdot_refuse_like_the_cpu(case):
    cpu, dev = raises_like_cpu(case[1])
    assert str(dev).split(" (in the neuron")[0] == str(cpu)
    assert_no_fallbacks()
