"""DISTRIBUTIONS family: the samplers behind torch.distributions
(_standard_gamma, _sample_dirichlet, poisson, binomial) on the device's
Philox generator, and the reparameterised gradients (_standard_gamma_grad,
_dirichlet_grad) that rsample().backward() uses.

Samples cannot match the CPU's (another random stream), so they are checked
statistically: sample means and variances within 6 standard errors of the
distribution's (fixed seeds, so the outcome is deterministic, not flaky).
Edge values, errors and gradients are deterministic and compared with the
CPU exactly or with assert_close (float32's default tolerance; float64 data
is computed at float32 precision on the device, so it gets float32's too).

`python tests/test_distributions.py` prints the sampling speed against the
CPU (not a test).
"""
import math
import time

import pytest
import torch
import torch.distributions as D

from helpers import assert_no_fallbacks

DEV = "neuron"
N = 200_000


def check_moments(samples, mean, var):
    """samples: (N, ...) on any device; mean/var broadcastable to one sample.
    Each column's mean and variance within 6 standard errors (the
    variance's from the empirical fourth moment)."""
    x = samples.detach().cpu().double()
    n = x.shape[0]
    mean = torch.as_tensor(mean, dtype=torch.float64).cpu().expand(x.shape[1:])
    var = torch.as_tensor(var, dtype=torch.float64).cpu().expand(x.shape[1:])
    m = x.mean(0)
    d = x - m
    v = (d * d).sum(0) / (n - 1)
    m4 = (d ** 4).mean(0)
    se_mean = (var / n).sqrt()
    se_var = ((m4 - v * v).clamp_min(0) / n).sqrt()
    assert ((m - mean).abs() <= 6 * se_mean + 1e-12).all(), (m, mean, se_mean)
    assert ((v - var).abs() <= 6 * se_var + 1e-12).all(), (v, var, se_var)


# ---- the ATen samplers ----------------------------------------------------------------


def test_standard_gamma_moments():
    torch.manual_seed(0)
    alpha = torch.tensor([0.05, 0.3, 1.0, 4.0, 50.0], device=DEV)
    s = torch._standard_gamma(alpha.expand(N, 5).contiguous())
    assert s.device.type == DEV and s.dtype == torch.float32 and s.shape == (N, 5)
    assert (s > 0).all()
    check_moments(s, alpha.cpu(), alpha.cpu())
    assert_no_fallbacks()


def test_poisson_moments():
    torch.manual_seed(1)
    rate = torch.tensor([0.0, 0.5, 5.0, 9.99, 10.0, 30.0, 500.0], device=DEV)
    s = torch.poisson(rate.expand(N, 7))
    assert (s == s.round()).all() and (s[:, 0] == 0).all()
    check_moments(s, rate.cpu(), rate.cpu())
    assert_no_fallbacks()


def test_binomial_moments_and_broadcasting():
    torch.manual_seed(2)
    count = torch.tensor([0.0, 5.0, 20.0, 100.0, 100.0, 60.0, 2000.0, 10.0], device=DEV)
    prob = torch.tensor([0.5, 0.3, 0.45, 0.3, 0.8, 0.95, 0.5, 1.0], device=DEV)
    s = torch.binomial(count.expand(N, 8), prob.expand(N, 8))
    assert ((s >= 0) & (s <= count) & (s == s.round())).all()
    c, p = count.cpu().double(), prob.cpu().double()
    check_moments(s, c * p, c * p * (1 - p))
    # Broadcast parameters, as the CPU's TensorIterator allows.
    b = torch.binomial(torch.tensor([[10.0], [20.0]], device=DEV), torch.tensor([0.5, 0.2], device=DEV))
    assert b.shape == (2, 2)
    assert_no_fallbacks()


def test_sample_dirichlet_moments():
    torch.manual_seed(3)
    alpha = torch.tensor([0.5, 2.0, 3.0, 0.1], device=DEV)
    s = torch._sample_dirichlet(alpha.expand(N, 4).contiguous())
    assert torch.allclose(s.sum(-1).cpu(), torch.ones(N), atol=1e-5)
    a = alpha.cpu().double()
    a0 = a.sum()
    check_moments(s, a / a0, a * (a0 - a) / (a0 * a0 * (a0 + 1)))
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gamma_and_dirichlet_dtypes(dtype):
    torch.manual_seed(4)
    alpha = torch.tensor([[1.0, 2.0, 3.0]], dtype=dtype, device=DEV).expand(50_000, 3).contiguous()
    g = torch._standard_gamma(alpha)
    d = torch._sample_dirichlet(alpha)
    assert g.dtype == dtype and d.dtype == dtype
    check_moments(g, alpha[0].cpu(), alpha[0].cpu())
    assert (d > 0).all() and (d < 1).all()
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_poisson_dtypes(dtype):
    torch.manual_seed(5)
    s = torch.poisson(torch.full((50_000,), 7.0, dtype=dtype, device=DEV))
    assert s.dtype == dtype
    check_moments(s.float().unsqueeze(1), 7.0, 7.0)
    assert_no_fallbacks()


# ---- torch.distributions ------------------------------------------------------------------


def _params(*values):
    return [torch.tensor(v, device=DEV) for v in values]


DISTRIBUTIONS = {
    "Gamma": lambda: D.Gamma(*_params([0.4, 2.0, 9.0], [1.0, 0.5, 3.0])),
    "Beta": lambda: D.Beta(*_params([0.5, 2.0, 5.0], [1.5, 2.0, 0.7])),
    "Dirichlet": lambda: D.Dirichlet(*_params([[0.5, 1.0, 4.0], [3.0, 3.0, 3.0]])),
    "Chi2": lambda: D.Chi2(*_params([1.0, 3.0, 12.0])),
    "StudentT": lambda: D.StudentT(*_params([9.0, 15.0], [0.0, 1.0], [1.0, 2.0])),
    "Poisson": lambda: D.Poisson(*_params([0.3, 4.0, 80.0])),
    "Binomial": lambda: D.Binomial(*_params([10.0, 50.0, 7.0], [0.2, 0.6, 0.99])),
}


@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
def test_torch_distributions_sample(name):
    torch.manual_seed(6)
    dist = DISTRIBUTIONS[name]()
    s = dist.sample((N,))
    assert s.device.type == DEV
    check_moments(s, dist.mean.cpu(), dist.variance.cpu())
    assert_no_fallbacks()


def test_gamma_rsample_backward_matches_cpu_gradient():
    torch.manual_seed(7)
    conc = torch.tensor([0.3, 1.5, 6.0, 20.0], device=DEV, requires_grad=True)
    rate = torch.tensor([1.0, 2.0, 0.5, 1.0], device=DEV, requires_grad=True)
    x = D.Gamma(conc, rate).rsample((1000,))
    x.sum().backward()
    assert_no_fallbacks()
    # d x / d conc = _standard_gamma_grad(conc, x * rate) / rate, on the CPU.
    c, r, xc = conc.detach().cpu(), rate.detach().cpu(), x.detach().cpu()
    want = (torch._standard_gamma_grad(c.expand_as(xc), xc * r) / r).sum(0)
    torch.testing.assert_close(conc.grad.cpu(), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rate.grad.cpu(), (-xc / r).sum(0), rtol=1e-5, atol=1e-5)


def test_dirichlet_and_beta_rsample_backward_match_cpu_gradient():
    torch.manual_seed(8)
    conc = torch.tensor([[0.5, 1.0, 4.0], [3.0, 3.0, 3.0]], device=DEV, requires_grad=True)
    x = D.Dirichlet(conc).rsample((500,))
    w = torch.linspace(-1, 1, 3, device=DEV)
    (x * w).sum().backward()
    assert_no_fallbacks()
    # _Dirichlet's backward on the CPU with the same samples.
    c, xc = conc.detach().cpu().expand(500, 2, 3), x.detach().cpu()
    total = c.sum(-1, True).expand_as(c)
    g = torch._dirichlet_grad(xc, c, total)
    go = w.cpu().expand_as(xc)
    want = (g * (go - (xc * go).sum(-1, True))).sum(0)
    torch.testing.assert_close(conc.grad.cpu(), want, rtol=1e-4, atol=1e-4)

    a = torch.tensor([0.5, 2.0], device=DEV, requires_grad=True)
    b = torch.tensor([1.5, 2.0], device=DEV, requires_grad=True)
    D.Beta(a, b).rsample((100,)).sum().backward()
    assert torch.isfinite(a.grad).all() and torch.isfinite(b.grad).all()
    assert_no_fallbacks()


@pytest.mark.parametrize("name", ["Chi2", "StudentT"])
def test_chi2_studentt_rsample_backward(name):
    torch.manual_seed(9)
    df = torch.tensor([2.0, 7.0], device=DEV, requires_grad=True)
    dist = D.Chi2(df) if name == "Chi2" else D.StudentT(df)
    dist.rsample((1000,)).pow(2).mean().backward()
    assert df.grad.device.type == DEV and torch.isfinite(df.grad).all()
    assert_no_fallbacks()


# ---- generators and reproducibility ---------------------------------------------------------

SAMPLERS = {
    "gamma": lambda g: torch._standard_gamma(torch.full((1000,), 2.0, device=DEV), generator=g),
    "dirichlet": lambda g: torch._sample_dirichlet(torch.full((100, 10), 0.7, device=DEV), generator=g),
    "poisson": lambda g: torch.poisson(torch.full((1000,), 12.0, device=DEV), generator=g),
    "binomial": lambda g: torch.binomial(torch.full((1000,), 40.0, device=DEV),
                                          torch.full((1000,), 0.3, device=DEV), generator=g),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_seeded_reproducible_and_cpu_stream_untouched(name):
    fn = SAMPLERS[name]
    cpu_state = torch.get_rng_state()
    torch.neuron.manual_seed(11)
    a, b = fn(None).cpu(), fn(None).cpu()
    assert not torch.equal(a, b)  # the offset advanced
    torch.neuron.manual_seed(11)
    assert torch.equal(fn(None).cpu(), a)
    assert torch.equal(fn(None).cpu(), b)
    torch.manual_seed(11)  # seeds every device, the CPU included
    assert torch.equal(fn(None).cpu(), a)
    cpu_state = torch.get_rng_state()
    torch.neuron.manual_seed(12)
    fn(None)
    fn(None)
    torch.neuron.synchronize()
    assert torch.equal(torch.get_rng_state(), cpu_state)  # the CPU's stream is untouched
    assert_no_fallbacks()


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_neuron_generator(name):
    fn = SAMPLERS[name]
    torch.neuron.manual_seed(0)
    default_state = torch.neuron.get_rng_state()
    g = torch.Generator(device=DEV).manual_seed(3)
    a = fn(g).cpu()
    assert torch.equal(torch.neuron.get_rng_state(), default_state)  # the default did not move
    g.manual_seed(3)
    assert torch.equal(fn(g).cpu(), a)
    assert not torch.equal(fn(g).cpu(), a)
    assert_no_fallbacks()


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_cpu_generator_rejected(name):
    with pytest.raises(RuntimeError, match="device type for generator but found 'cpu'"):
        SAMPLERS[name](torch.Generator())


# ---- deterministic values against the CPU --------------------------------------------------


def test_edge_values_match_cpu():
    torch.manual_seed(13)
    g = torch.tensor([0.0, float("nan"), -1.0, 1e-30, float("inf")])
    assert torch.equal(torch._standard_gamma(g.to(DEV)).cpu(), torch._standard_gamma(g))
    r = torch.tensor([0.0, 0.0, float("inf")])
    assert torch.equal(torch.poisson(r.to(DEV)).cpu(), torch.poisson(r))
    c = torch.tensor([0.0, 10.0, 10.0, -1.0, 10.0, 10.0, 10.0, 7.5])
    p = torch.tensor([0.5, 0.0, 1.0, 0.5, float("nan"), 1.5, -0.1, 1.0])
    torch.testing.assert_close(torch.binomial(c.to(DEV), p.to(DEV)).cpu(), torch.binomial(c, p), equal_nan=True,
                               rtol=0, atol=0)
    # All-zero rows are uniform; a zero beside positive concentrations gets
    # the smallest normal; NaN and negative entries count as zero samples.
    a = torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 1.0], [float("nan"), 1.0, 2.0], [-1.0, 0.0, 0.0]])
    dev, cpu = torch._sample_dirichlet(a.to(DEV)).cpu(), torch._sample_dirichlet(a)
    torch.testing.assert_close(dev[0], cpu[0])
    torch.testing.assert_close(dev[3], cpu[3])
    assert dev[1, 0] == cpu[1, 0] == torch.finfo(torch.float32).tiny
    assert dev[2, 0] == cpu[2, 0] == torch.finfo(torch.float32).tiny
    assert torch.allclose(dev.sum(-1), torch.ones(4))
    # 0-d and empty inputs.
    assert torch._sample_dirichlet(torch.tensor(2.0, device=DEV)).cpu() == torch._sample_dirichlet(torch.tensor(2.0))
    assert torch._sample_dirichlet(torch.zeros(0, 3, device=DEV)).shape == (0, 3)
    assert torch._standard_gamma(torch.zeros(0, device=DEV)).shape == (0,)
    assert_no_fallbacks()


def _grad_grid(dtype):
    alpha = torch.tensor([0.01, 0.3, 1.0, 1.5, 4.0, 7.9, 8.5, 12.0, 50.0, 300.0], dtype=dtype)
    x = torch.tensor([1e-5, 1e-3, 0.1, 0.79, 0.81, 2.0, 5.0, 12.5, 70.0, 290.0], dtype=dtype)
    return alpha.unsqueeze(1).expand(10, 10), x.unsqueeze(0).expand(10, 10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_standard_gamma_grad_matches_cpu(dtype):
    alpha, x = _grad_grid(dtype)
    want = torch._standard_gamma_grad(alpha, x)
    got = torch._standard_gamma_grad(alpha.to(DEV), x.to(DEV))
    assert got.dtype == dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, rtol=1.3e-6, atol=1e-5)
    # Broadcasting as the CPU's TensorIterator.
    b = torch._standard_gamma_grad(torch.tensor([1.0, 2.0], device=DEV), torch.tensor([[1.0], [2.0]], device=DEV))
    torch.testing.assert_close(b.cpu(), torch._standard_gamma_grad(torch.tensor([1.0, 2.0]), torch.tensor([[1.0], [2.0]])))
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dirichlet_grad_matches_cpu(dtype):
    gen = torch.Generator().manual_seed(0)
    # Every branch: x near 0 and 1, alpha and beta both large, the rational fit.
    x = torch.rand(400, generator=gen, dtype=dtype) * 0.998 + 0.001
    alpha = torch.rand(400, generator=gen, dtype=dtype) * 30 + 0.05
    total = alpha + torch.rand(400, generator=gen, dtype=dtype) * 30 + 0.05
    want = torch._dirichlet_grad(x, alpha, total)
    got = torch._dirichlet_grad(x.to(DEV), alpha.to(DEV), total.to(DEV))
    assert got.dtype == dtype
    torch.testing.assert_close(got.cpu(), want, rtol=1.3e-6, atol=1e-5)
    assert_no_fallbacks()


# ---- errors: the CPU's exception types and words ------------------------------------------

ERRORS = [
    ("gamma int", lambda d: torch._standard_gamma(torch.tensor([1, 2], device=d))),
    ("gamma bfloat16", lambda d: torch._standard_gamma(torch.ones(2, dtype=torch.bfloat16, device=d))),
    ("dirichlet int", lambda d: torch._sample_dirichlet(torch.tensor([1, 2], device=d))),
    ("dirichlet float16", lambda d: torch._sample_dirichlet(torch.ones(2, dtype=torch.float16, device=d))),
    ("poisson negative", lambda d: torch.poisson(torch.tensor([1.0, -1.0], device=d))),
    ("poisson nan", lambda d: torch.poisson(torch.tensor([float("nan")], device=d))),
    ("poisson int", lambda d: torch.poisson(torch.tensor([1, 2], device=d))),
    ("binomial int count", lambda d: torch.binomial(torch.tensor([10], device=d), torch.tensor([0.5], device=d))),
    ("binomial int prob", lambda d: torch.binomial(torch.tensor([10.0], device=d), torch.tensor([1], device=d))),
    ("binomial dtypes", lambda d: torch.binomial(torch.tensor([10.0], device=d),
                                                 torch.tensor([0.5], dtype=torch.float64, device=d))),
    ("binomial bfloat16", lambda d: torch.binomial(torch.ones(2, dtype=torch.bfloat16, device=d),
                                                   torch.ones(2, dtype=torch.bfloat16, device=d))),
    ("binomial shapes", lambda d: torch.binomial(torch.ones(2, device=d), torch.ones(3, device=d))),
    ("gamma_grad dtypes", lambda d: torch._standard_gamma_grad(torch.ones(2, device=d),
                                                                torch.ones(2, dtype=torch.float64, device=d))),
    ("gamma_grad int", lambda d: torch._standard_gamma_grad(torch.ones(2, dtype=torch.long, device=d),
                                                             torch.ones(2, dtype=torch.long, device=d))),
    ("dirichlet_grad shapes", lambda d: torch._dirichlet_grad(torch.ones(2, device=d), torch.ones(3, device=d),
                                                              torch.ones(3, device=d))),
    ("dirichlet_grad int", lambda d: torch._dirichlet_grad(*[torch.ones(2, dtype=torch.long, device=d)] * 3)),
]


@pytest.mark.parametrize("case", ERRORS, ids=lambda c: c[0])
def test_errors_match_cpu(case):
    _, fn = case
    with pytest.raises(Exception) as cpu:
        fn("cpu")
    with pytest.raises(type(cpu.value)) as dev:
        fn(DEV)  # at the op, not at a later synchronisation
    assert type(dev.value) is type(cpu.value)
    # The CPU's words (its kernel names stay "..._cpu" as on the CPU); the
    # registry may name the op after them.
    assert str(dev.value).startswith(str(cpu.value).split("\n")[0]), (str(dev.value), str(cpu.value))
    torch.neuron.synchronize()


def _bench():
    """1M gamma samples (and Poisson, binomial, Dirichlet) on the device against the CPU."""
    n = 1 << 20
    cases = {
        "gamma(2.5)": lambda d: torch._standard_gamma(torch.full((n,), 2.5, device=d)),
        "gamma(0.5)": lambda d: torch._standard_gamma(torch.full((n,), 0.5, device=d)),
        "poisson(5)": lambda d: torch.poisson(torch.full((n,), 5.0, device=d)),
        "binomial(100, 0.3)": lambda d: torch.binomial(torch.full((n,), 100.0, device=d),
                                                       torch.full((n,), 0.3, device=d)),
        "dirichlet(1, x8)": lambda d: torch._sample_dirichlet(torch.ones(n // 8, 8, device=d)),
    }
    for name, fn in cases.items():
        times = {}
        for d in ("cpu", DEV):
            fn(d)
            torch.neuron.synchronize()
            best = math.inf
            for _ in range(5):
                t = time.perf_counter()
                fn(d)
                torch.neuron.synchronize()
                best = min(best, time.perf_counter() - t)
            times[d] = best
        print(f"{name:20s} cpu {times['cpu'] * 1e3:7.1f} ms  neuron {times[DEV] * 1e3:7.1f} ms  "
              f"speedup {times['cpu'] / times[DEV]:.2f}x")


if __name__ == "__main__":
    import torch_neuronx  # noqa: F401

    _bench()
