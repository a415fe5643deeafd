"""Beyond the hardware beta: torch.func and torch.distributions on the device,
with zero CPU fallbacks, against the CPU."""
import pytest
import torch
from torch.func import functional_call, grad, jacrev, vmap

from helpers import assert_no_fallbacks


def test_func_grad_vmap_jacrev_functional_call():
    x = torch.randn(7)
    f = lambda t: (t.sin() * t).sum()  # noqa: E731
    torch.testing.assert_close(grad(f)(x.neuron()).cpu(), grad(f)(x), rtol=1e-5, atol=1e-5)
    batch = torch.randn(3, 4, 4)
    torch.testing.assert_close(vmap(lambda a: a @ a)(batch.neuron()).cpu(), vmap(lambda a: a @ a)(batch),
                               rtol=1e-5, atol=1e-5)
    g = lambda t: t.exp() * 2 + t.pow(2).sum()  # noqa: E731
    torch.testing.assert_close(jacrev(g)(x.neuron()).cpu(), jacrev(g)(x), rtol=1e-5, atol=1e-5)
    # per-sample gradients: vmap over grad
    w = torch.randn(4)
    xs = torch.randn(5, 4)
    loss = lambda w, x: (w * x).sum().tanh()  # noqa: E731
    ref = vmap(grad(loss), in_dims=(None, 0))(w, xs)
    got = vmap(grad(loss), in_dims=(None, 0))(w.neuron(), xs.neuron())
    torch.testing.assert_close(got.cpu(), ref, rtol=1e-5, atol=1e-5)
    m = torch.nn.Linear(3, 2)
    inp = torch.randn(4, 3)
    params = {k: v.detach() for k, v in m.named_parameters()}
    ref = functional_call(m, params, (inp,))
    m.neuron()
    got = functional_call(m, {k: v.neuron() for k, v in params.items()}, (inp.neuron(),))
    torch.testing.assert_close(got.cpu(), ref, rtol=1e-5, atol=1e-5)
    assert_no_fallbacks()


def _dists(dev):
    D = torch.distributions
    g = torch.Generator().manual_seed(0)
    A = torch.randn(3, 3, generator=g)
    cov = A @ A.T + 3 * torch.eye(3)
    logits = torch.randn(4, 5, generator=g)
    return [
        ("Normal", D.Normal(torch.tensor([0.0, 1.0, -2.0]).to(dev), torch.tensor([1.0, 0.5, 2.0]).to(dev))),
        ("Categorical", D.Categorical(logits=logits.to(dev))),
        ("Bernoulli", D.Bernoulli(probs=torch.tensor([0.2, 0.5, 0.9]).to(dev))),
        ("Uniform", D.Uniform(torch.tensor([0.0, -1.0]).to(dev), torch.tensor([1.0, 3.0]).to(dev))),
        ("MultivariateNormal", D.MultivariateNormal(torch.tensor([1.0, 0.0, -1.0]).to(dev), cov.to(dev))),
    ]


@pytest.mark.parametrize("idx", range(5))
def test_distribution_sample_and_log_prob(idx):
    name, cpu_d = _dists("cpu")[idx]
    _, dev_d = _dists("neuron")[idx]
    torch.manual_seed(0)
    samples = dev_d.sample((20000,))
    assert samples.device.type == "neuron" and samples.shape == cpu_d.sample((20000,)).shape
    # log_prob of the same points agrees with the CPU
    pts = samples[:64].cpu()
    torch.testing.assert_close(dev_d.log_prob(pts.neuron()).cpu(), cpu_d.log_prob(pts), rtol=1e-4, atol=1e-4)
    # the samples follow the distribution: first two moments within sampling error
    s = samples.float().cpu()
    if name == "Categorical":
        freq = torch.nn.functional.one_hot(samples.cpu(), 5).float().mean(0)
        torch.testing.assert_close(freq, cpu_d.probs, rtol=0, atol=0.02)
    else:
        torch.testing.assert_close(s.mean(0), cpu_d.mean.float(), rtol=0, atol=0.05 * (1 + cpu_d.stddev.max().item()))
        torch.testing.assert_close(s.std(0), cpu_d.stddev.float(), rtol=0.05, atol=0.02)
    assert_no_fallbacks()


def test_distribution_rsample_gradients():
    D = torch.distributions
    mu = torch.zeros(3, device="neuron", requires_grad=True)
    sigma = torch.ones(3, device="neuron", requires_grad=True)
    torch.manual_seed(1)
    z = D.Normal(mu, sigma).rsample((1000,))
    (z ** 2).mean().backward()
    # d/dsigma E[(mu + sigma e)^2] = 2 sigma E[e^2] ~ 2
    assert torch.allclose(sigma.grad.cpu(), torch.full((3,), 2.0 / 3), atol=0.15)
    assert_no_fallbacks()
