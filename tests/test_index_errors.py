"""INDEX family errors against PyTorch on the CPU: the exception class of an
index or target out of range (found by the kernel, so for an index held on
the device it surfaces at the next synchronisation, as on CUDA), the checks
ATen's scatter/index_copy/index_reduce meta functions make, and the edge
cases where the CPU computes (an expanded self for index_put_, an embedding
of width 0). Values are compared exactly: these ops only move elements."""
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch_neuronx  # noqa: F401
from helpers import DEV, assert_no_fallbacks


def raises_like_cpu_by_sync(call):
    """call(dev) raises on the CPU; on neuron it must raise the same class,
    at the call or at the next synchronisation. torch.accelerator.synchronize
    is the synchronisation: it raises what the runtime's status maps to."""
    with pytest.raises(Exception) as cpu:
        call("cpu")
    with pytest.raises(Exception) as dev:
        call(DEV)
        torch.accelerator.synchronize()
    assert type(dev.value) is type(cpu.value), (
        f"neuron raised {type(dev.value).__name__}: {dev.value}; the CPU {type(cpu.value).__name__}: {cpu.value}")
    torch.accelerator.synchronize()  # nothing left behind on the stream
    return cpu.value, dev.value


def same_as_cpu(call):
    """call(dev) computes on both; equal results (NaN equal to NaN)."""
    ref = call("cpu")
    got = call(DEV)
    torch.testing.assert_close(got.cpu(), ref, rtol=0, atol=0, equal_nan=True)


def idx(values, dev):
    return torch.tensor(values, dtype=torch.long, device=dev)


# ---- an index out of range: the CPU's class --------------------------------------

@pytest.mark.parametrize("case, cls", [
    # index_select: IndexError, but RuntimeError along dim 1 of a >1-d self
    # and for any index into an empty self (the CPU's check_indexarray_range)
    ("index_select dim 0", IndexError),
    ("index_select dim 1", RuntimeError),
    ("index_select dim 1 negative", RuntimeError),
    ("index_select dim 2 of 3-d", IndexError),
    ("index_select 1-d negative", IndexError),
    ("index_select empty self", RuntimeError),
    ("getitem", IndexError),
    ("index_put_", IndexError),
    ("index_put_ accumulate", IndexError),
    ("take", IndexError),
    ("put_", IndexError),
    ("embedding", IndexError),
    ("nll_loss", IndexError),
    ("cross_entropy ignored -100 not ignored", IndexError),
    ("nll_loss2d", IndexError),
    # gather/scatter check with a plain TORCH_CHECK on the CPU
    ("gather", RuntimeError),
    ("scatter_add", RuntimeError),
])
def test_device_index_out_of_range_class(case, cls):
    calls = {
        "index_select dim 0": lambda d: torch.zeros(3, 4, device=d).index_select(0, idx([1, 5], d)),
        "index_select dim 1": lambda d: torch.zeros(3, 4, device=d).index_select(1, idx([4], d)),
        "index_select dim 1 negative": lambda d: torch.zeros(3, 4, device=d).index_select(1, idx([-1], d)),
        "index_select dim 2 of 3-d": lambda d: torch.zeros(2, 3, 4, device=d).index_select(2, idx([9], d)),
        "index_select 1-d negative": lambda d: torch.zeros(3, device=d).index_select(0, idx([-1], d)),
        "index_select empty self": lambda d: torch.zeros(2, 2, 0, device=d).index_select(0, idx([-1], d)),
        "getitem": lambda d: torch.zeros(3, 4, device=d)[:, idx([4], d)],
        "index_put_": lambda d: torch.zeros(3, 4, device=d).index_put_((idx([3], d),), torch.tensor(1.0, device=d)),
        "index_put_ accumulate": lambda d: torch.zeros(3, device=d).index_put_(
            (idx([-4], d),), torch.tensor(1.0, device=d), accumulate=True),
        "take": lambda d: torch.zeros(3, 4, device=d).take(idx([12], d)),
        "put_": lambda d: torch.zeros(3, 4, device=d).put_(idx([12], d), torch.ones(1, device=d)),
        "embedding": lambda d: F.embedding(idx([[0, 3]], d), torch.zeros(3, 2, device=d)),
        "nll_loss": lambda d: F.nll_loss(torch.zeros(2, 3, device=d), idx([0, 3], d)),
        "cross_entropy ignored -100 not ignored": lambda d: F.cross_entropy(
            torch.zeros(2, 3, device=d), idx([-100, 1], d), ignore_index=1),
        "nll_loss2d": lambda d: F.nll_loss(torch.zeros(1, 3, 2, 2, device=d), torch.full((1, 2, 2), 3, device=d)),
        "gather": lambda d: torch.zeros(3, 4, device=d).gather(1, idx([[4]], d)),
        "scatter_add": lambda d: torch.zeros(3, 4, device=d).scatter_add(0, idx([[3]], d), torch.ones(1, 1, device=d)),
    }
    cpu, dev = raises_like_cpu_by_sync(calls[case])
    assert type(cpu) is cls
    if cls is IndexError and "index_put" not in case and case not in ("take", "put_"):
        # the kernel's sentence is the CPU's
        assert str(cpu).split(" (")[0] in str(dev) or "Target" in str(cpu)


def test_sync_error_names_the_kernel_and_the_cpu_message():
    torch.zeros(3, device=DEV).index_select(0, idx([5], DEV))
    with pytest.raises(IndexError, match=r"INDEX_GATHER.*index out of range in self \(index 5, size 3\)"):
        torch.accelerator.synchronize()
    F.nll_loss(torch.zeros(2, 3, device=DEV), idx([0, 7], DEV))
    with pytest.raises(IndexError, match=r"NLL_LOSS.*Target 7 is out of bounds\."):
        torch.accelerator.synchronize()


def test_index_select_in_range_unchanged():
    x = torch.arange(24.0).reshape(2, 3, 4)
    for dim in range(3):
        i = torch.tensor([0, x.size(dim) - 1, 0])
        torch.testing.assert_close(x.to(DEV).index_select(dim, i.to(DEV)).cpu(), x.index_select(dim, i))
    e = torch.zeros(2, 2, 0)
    assert e.to(DEV).index_select(0, idx([1, 0], DEV)).shape == e.index_select(0, torch.tensor([1, 0])).shape
    assert_no_fallbacks()


# ---- index_copy / index_reduce: every index read, negative ones rejected ------------

@pytest.mark.parametrize("shape, dim, index", [
    ((3, 4), 0, [5]), ((3, 4), 1, [-1]), ((3,), 0, [3]), ((), 0, [-1]),
    ((0, 4), 0, [0, 0, 0]),  # the CPU's restrided walk does not fit the storage (setStorage)
    ((4, 0), 1, [0]), ((0,), 0, [0]),
])
def test_index_copy_errors_like_cpu(shape, dim, index):
    def call(d, inplace):
        src_shape = list(shape) or [1]
        if shape:
            src_shape[dim] = len(index)
        x = torch.zeros(shape, device=d)
        f = x.index_copy_ if inplace else x.index_copy
        return f(dim, idx(index, d), torch.ones(src_shape, device=d))
    for inplace in (False, True):
        raises_like_cpu_by_sync(lambda d: call(d, inplace))


def test_index_copy_values_and_empty_walks():
    same_as_cpu(lambda d: torch.zeros(3, 4, device=d).index_copy(1, idx([3, 0], d), torch.arange(6.0, device=d).view(3, 2)))
    same_as_cpu(lambda d: torch.tensor(2.0, device=d).index_copy(0, idx([0], d), torch.ones(1, device=d)))
    # no element walked, so no index read (the CPU accepts index 5 here)
    same_as_cpu(lambda d: torch.zeros(4, 0, device=d).index_copy(0, idx([5], d), torch.ones(1, 0, device=d)))
    assert_no_fallbacks()


def test_index_copy_meta_checks_in_cpu_order():
    # the dtype of the index is checked before the number of indices
    cpu, _ = raises_like_cpu_by_sync(
        lambda d: torch.zeros(2, 3, device=d).index_copy(0, idx([0, 1], d).int(), torch.ones(1, 3, device=d)))
    assert "Expected a long tensor" in str(cpu)
    raises_like_cpu_by_sync(lambda d: torch.zeros(2, 3, device=d).index_copy(0, idx([0], d), torch.ones(3, device=d)))
    cpu, dev = raises_like_cpu_by_sync(
        lambda d: torch.zeros(2, 3, 4, device=d).index_copy(0, idx([0], d), torch.ones(1, 3, 5, device=d)))
    assert str(cpu) in str(dev)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("shape, dim, index", [
    ((3, 4), 0, [5]), ((3, 4), 1, [-1]), ((3,), 0, [3]), ((4, 0), 0, [5]),
    ((0, 4), 0, [0, 0, 0]), ((4, 0), 1, [0]), ((0,), 0, [0]),
])
def test_index_reduce_errors_like_cpu(shape, dim, index, include_self):
    def call(d):
        src_shape = list(shape)
        src_shape[dim] = len(index)
        return torch.zeros(shape, device=d).index_reduce(dim, idx(index, d), torch.ones(src_shape, device=d), "amax",
                                                         include_self=include_self)
    raises_like_cpu_by_sync(call)


@pytest.mark.parametrize("dtype", [torch.bool, torch.complex64])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_refuses_bool_and_complex(dtype, include_self):
    cpu, dev = raises_like_cpu_by_sync(lambda d: torch.zeros(3, dtype=dtype, device=d).index_reduce(
        0, idx([0], d), torch.ones(1, dtype=dtype, device=d), "prod", include_self=include_self))
    assert type(cpu) is NotImplementedError
    assert str(cpu) in str(dev)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("n", [1, 0])
def test_index_reduce_of_bool_and_complex_along_a_matrix(reduce, n):
    # include_self on a >1-d result: the CPU reduces slice by slice with ops
    # that take bool (but its mean's floor division does not) and complex
    # (but maximum/minimum do not); with no index it returns self.
    g = torch.Generator().manual_seed(3)
    for dtype in (torch.bool, torch.complex64):
        base = (torch.rand(2, 3, generator=g) > 0.5).to(dtype)
        src = (torch.rand(n, 3, generator=g) > 0.5).to(dtype)
        call = lambda d: base.to(d).index_reduce(0, idx([1] * n, d), src.to(d), reduce)  # noqa: E731
        try:
            ref = call("cpu")
        except NotImplementedError:
            cpu, dev = raises_like_cpu_by_sync(call)
            assert str(cpu) in str(dev)
        else:
            torch.testing.assert_close(call(DEV).cpu(), ref, rtol=0, atol=0)


@pytest.mark.parametrize("case", ["bool mean", "bool mean, no index", "complex amax", "complex amin"])
def test_scatter_reduce_dtype_refusals_like_cpu(case):
    dtype = torch.bool if case.startswith("bool") else torch.complex64
    reduce = case.split()[1].rstrip(",")
    n = 0 if "no index" in case else 1
    cpu, dev = raises_like_cpu_by_sync(lambda d: torch.zeros(3, dtype=dtype, device=d).scatter_reduce(
        0, idx([0] * n, d), torch.ones(n, dtype=dtype, device=d), reduce))
    assert type(cpu) is NotImplementedError
    assert str(cpu) in str(dev)


def test_scatter_reduce_complex_mean_of_no_index_divides():
    same_as_cpu(lambda d: torch.full((3,), 2 + 4j, device=d).scatter_reduce(
        0, idx([], d), torch.ones(0, dtype=torch.complex64, device=d), "mean"))


def test_index_reduce_values_unchanged():
    for red in ("prod", "mean", "amax", "amin"):
        for inc in (True, False):
            same_as_cpu(lambda d: torch.arange(12.0, device=d).view(3, 4).index_reduce(
                1, idx([3, 0, 3], d), torch.arange(9.0, device=d).view(3, 3), red, include_self=inc))
    assert_no_fallbacks()


# ---- writes into an expanded (internally overlapping) self ---------------------------

def expanded(d, dtype=torch.float32):
    return torch.arange(4, dtype=dtype, device=d).expand(3, 4)


@pytest.mark.parametrize("case", ["scatter_ value", "scatter_ src", "scatter_add_", "scatter_reduce_",
                                  "scatter_ empty index", "scatter out=", "index_copy_", "index_reduce_"])
def test_writes_into_expanded_self_refused_like_cpu(case):
    calls = {
        "scatter_ value": lambda d: expanded(d).scatter_(0, idx([[0]], d), 1.0),
        "scatter_ src": lambda d: expanded(d).scatter_(0, idx([[0]], d), torch.ones(1, 1, device=d)),
        "scatter_add_": lambda d: expanded(d).scatter_add_(0, idx([[0]], d), torch.ones(1, 1, device=d)),
        "scatter_reduce_": lambda d: expanded(d).scatter_reduce_(0, idx([[0]], d), torch.ones(1, 1, device=d), "sum"),
        "scatter_ empty index": lambda d: expanded(d).scatter_(0, torch.empty(0, dtype=torch.long, device=d), 1.0),
        "scatter out=": lambda d: torch.scatter(torch.zeros(3, 4, device=d), 0, idx([[0]], d), 1.0, reduce="add",
                                                out=expanded(d)),
        "index_copy_": lambda d: expanded(d).index_copy_(0, idx([0], d), torch.ones(1, 4, device=d)),
        "index_reduce_": lambda d: expanded(d).index_reduce_(0, idx([0], d), torch.ones(1, 4, device=d), "prod"),
    }
    cpu, _ = raises_like_cpu_by_sync(calls[case])
    assert "more than one element of the written-to tensor" in str(cpu)


def test_scatter_src_aliasing_self_refused_like_cpu():
    def call(d):
        y = torch.zeros(3, 4, device=d)
        return y[:2].scatter_add_(0, idx([[0]], d), y[1:])
    cpu, _ = raises_like_cpu_by_sync(call)
    assert "some elements of the input tensor and the written-to tensor" in str(cpu)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_into_expanded_self_writes_like_cpu(dtype, accumulate):
    # ATen only warns: every alias of an element takes the (last, or summed) value
    vals = torch.tensor([[1.0, 2, 3, 4]], dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same_as_cpu(lambda d: expanded(d, dtype).index_put_((idx([0, 2, 1], d),), vals.to(d), accumulate=accumulate))
        same_as_cpu(lambda d: expanded(d, dtype).index_put_(
            (torch.tensor([True, False, True], device=d),), vals.to(d), accumulate=accumulate))
    assert_no_fallbacks()


# ---- scatter's meta checks -----------------------------------------------------------

@pytest.mark.parametrize("case", [
    "scatter src dtype", "scatter src dtype, empty index", "scatter_add src dtype", "scatter_reduce src dtype",
    "scatter_ src dtype", "index larger than self", "index larger than self, value", "index larger than src",
])
def test_scatter_meta_checks_like_cpu(case):
    x = lambda d: torch.zeros(3, 4, device=d)  # noqa: E731
    f64 = lambda d, *s: torch.ones(*s, dtype=torch.float64, device=d)  # noqa: E731
    calls = {
        "scatter src dtype": lambda d: torch.scatter(x(d), 0, idx([[0]], d), f64(d, 1, 1)),
        "scatter src dtype, empty index": lambda d: torch.scatter(x(d), 0, idx([], d), f64(d, 1, 1)),
        "scatter_add src dtype": lambda d: torch.scatter_add(x(d), 0, idx([[0]], d), f64(d, 1, 1)),
        "scatter_reduce src dtype": lambda d: torch.scatter_reduce(x(d), 0, idx([[0]], d), f64(d, 1, 1), "sum"),
        "scatter_ src dtype": lambda d: x(d).scatter_(0, idx([[0]], d), f64(d, 1, 1)),
        "index larger than self": lambda d: x(d).scatter(0, torch.zeros(1, 6, dtype=torch.long, device=d),
                                                         torch.ones(3, 6, device=d)),
        "index larger than self, value": lambda d: x(d).scatter(0, torch.zeros(1, 6, dtype=torch.long, device=d), 2.0),
        "index larger than src": lambda d: x(d).scatter(0, torch.zeros(2, 2, dtype=torch.long, device=d),
                                                        torch.ones(1, 2, device=d)),
    }
    cpu, dev = raises_like_cpu_by_sync(calls[case])
    assert str(cpu) in str(dev)


def test_scatter_values_unchanged():
    i = torch.tensor([[2, 0, 1, 2]])
    src = torch.arange(4.0).view(1, 4)
    for red in (None, "add", "multiply"):
        kw = {} if red is None else {"reduce": red}
        same_as_cpu(lambda d: torch.ones(3, 4, device=d).scatter(0, i.to(d), src.to(d), **kw))
    same_as_cpu(lambda d: torch.ones(3, 4, device=d).scatter_add_(0, i.to(d), src.to(d)))
    same_as_cpu(lambda d: torch.ones(3, 4, device=d).scatter_reduce(0, i.to(d), src.to(d), "amax", include_self=False))
    assert_no_fallbacks()


# ---- embedding of width 0; multi_margin_loss targets --------------------------------

@pytest.mark.parametrize("padding_idx, scale", [(None, False), (1, True)])
def test_embedding_backward_of_width_zero(padding_idx, scale):
    def grad(d):
        w = torch.zeros(5, 0, device=d, requires_grad=True)
        F.embedding(idx([[0, 1, 2], [1, 1, 4]], d), w, padding_idx=padding_idx, scale_grad_by_freq=scale).sum().backward()
        return w.grad
    same_as_cpu(grad)


def test_multi_margin_loss_refuses_int32_targets():
    x = lambda d: torch.randn(3, 4, generator=torch.Generator().manual_seed(0)).to(d)  # noqa: E731
    t = lambda d: torch.tensor([0, 3, 1], dtype=torch.int32, device=d)  # noqa: E731
    cpu, dev = raises_like_cpu_by_sync(lambda d: F.multi_margin_loss(x(d), t(d)))
    assert str(cpu) in str(dev)
    raises_like_cpu_by_sync(lambda d: torch.ops.aten.multi_margin_loss_backward(
        torch.ones((), device=d), x(d), t(d), 1, 1.0, None, 1))
    # an empty input returns before the CPU reads the targets (no error on
    # either side); its sum is 0 (the CPU's own sum of an empty batch is
    # uninitialised memory: known.py cpu-bug-multi-margin-empty)
    F.multi_margin_loss(torch.zeros(0, 4), torch.zeros(0, dtype=torch.int32), reduction="sum")
    got = F.multi_margin_loss(torch.zeros(0, 4, device=DEV), torch.zeros(0, dtype=torch.int32, device=DEV),
                              reduction="sum").cpu()
    assert got.item() == 0.0


# The same error read through torch.neuron.synchronize() (the module's own
# translation, not autograd's or a copy's) keeps the class the CPU raises.
def test_out_of_range_index_at_synchronize_is_index_error():
    x, i = torch.randn(3), torch.tensor([5])
    with pytest.raises(IndexError):
        torch.index_select(x, 0, i)
    torch.index_select(x.to("neuron"), 0, i.to("neuron"))
    with pytest.raises(IndexError, match="index out of range in self"):
        torch.neuron.synchronize()
    torch.neuron.synchronize()  # the error is reported once


# scatter_reduce with include_self=False fills the positions it reduces into
# with the reduction's identity first (a scatter_ of a value, which checks
# the indices), then dispatches on the dtype: an index out of range is the
# CPU's RuntimeError before bool 'mean' or complex 'amax'/'amin' are refused
# (NotImplementedError), also on an empty dim; with include_self the dtype
# comes first. neuron reports it at the call, and nothing is left pending.
@pytest.mark.parametrize("dt,reduce", [(torch.bool, "mean"), (torch.complex64, "amax"), (torch.complex64, "amin")])
@pytest.mark.parametrize("rows,fill", [(0, 0), (3, 5), (3, 0)])
@pytest.mark.parametrize("include_self", [False, True])
def test_scatter_reduce_checks_indices_before_the_dtype_like_the_cpu(dt, reduce, rows, fill, include_self):
    from helpers import raises_like_cpu
    self_, src = torch.ones(rows, 2).to(dt), torch.ones(2, 2).to(dt)
    idx = torch.full((1, 2), fill)
    for inplace in (False, True):
        def call(d):
            s = self_.to(d)
            f = s.scatter_reduce_ if inplace else s.scatter_reduce
            return f(0, idx.to(d), src.to(d), reduce, include_self=include_self)
        cpu, dev = raises_like_cpu(call)
        torch.neuron.synchronize()
    x = torch.zeros(3, device=DEV)
    assert x.add(1).cpu().tolist() == [1.0] * 3  # no error left for a later op
    assert_no_fallbacks()
