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
