"""RANDOM family: the device's Philox generator (manual_seed, RNG state,
generator objects), the distributions of its samples, dropout and randperm."""
import torch
import torch.nn.functional as F

from helpers import assert_no_fallbacks


def test_manual_seed_reproducible():
    torch.manual_seed(123)
    a = torch.randn(1000, device="neuron")
    b = torch.rand(10, device="neuron")
    torch.manual_seed(123)
    assert torch.equal(torch.randn(1000, device="neuron").cpu(), a.cpu())
    assert torch.equal(torch.rand(10, device="neuron").cpu(), b.cpu())
    torch.neuron.manual_seed(5)
    c = torch.randn(10, device="neuron")
    assert not torch.equal(c.cpu(), a[:10].cpu())
    assert_no_fallbacks()


def test_distributions_of_samples():
    torch.manual_seed(0)
    x = torch.randn(200_000, device="neuron").cpu()
    assert abs(x.mean().item()) < 0.01 and abs(x.std().item() - 1) < 0.01
    u = torch.empty(200_000, device="neuron").uniform_(2, 4).cpu()
    assert u.min().item() >= 2 and u.max().item() < 4 and abs(u.mean().item() - 3) < 0.01
    bern = torch.empty(100_000, device="neuron").bernoulli_(0.3).cpu()
    assert abs(bern.mean().item() - 0.3) < 0.01
    r = torch.randint(3, 9, (50_000,), device="neuron").cpu()
    assert r.min().item() == 3 and r.max().item() == 8


def test_rng_state_roundtrip():
    torch.neuron.manual_seed(7)
    state = torch.neuron.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    a = torch.randn(64, device="neuron")
    torch.neuron.set_rng_state(state)
    b = torch.randn(64, device="neuron")
    assert torch.equal(a.cpu(), b.cpu())
    assert torch.neuron.initial_seed() == 7


def test_generator_object_and_dropout():
    g = torch.Generator(device="neuron").manual_seed(3)
    a = torch.randn(5, device="neuron", generator=g)
    g.manual_seed(3)
    assert torch.equal(torch.randn(5, device="neuron", generator=g).cpu(), a.cpu())
    x = torch.ones(10_000, device="neuron", requires_grad=True)
    y = F.dropout(x, p=0.25, training=True)
    kept = (y != 0).float().mean().item()
    assert abs(kept - 0.75) < 0.03
    assert torch.allclose(y[y != 0].cpu(), torch.tensor(1 / 0.75))
    y.sum().backward()
    assert torch.equal((x.grad != 0).cpu(), (y != 0).cpu())


def test_randperm_native_and_reproducible():
    torch.manual_seed(0)
    p = torch.randperm(1000, device="neuron")
    assert p.dtype == torch.int64 and sorted(p.cpu().tolist()) == list(range(1000))
    torch.manual_seed(0)
    assert torch.equal(torch.randperm(1000, device="neuron").cpu(), p.cpu())
    assert sorted(torch.randperm(7, device="neuron", dtype=torch.float32).cpu().tolist()) == list(range(7))
    assert_no_fallbacks()
