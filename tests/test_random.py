"""RANDOM family: the device's Philox generator (manual_seed, RNG state,
generator objects), the distributions of its samples, dropout and randperm."""
import pytest
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


@pytest.mark.parametrize("case", [
    ("multinomial negative", lambda d: torch.multinomial(torch.tensor([-1.0, 2.0], device=d), 1)),
    ("multinomial all zero", lambda d: torch.multinomial(torch.tensor([[0.0, 0.0], [1.0, 1.0]], device=d), 2, True)),
    ("multinomial nan", lambda d: torch.multinomial(torch.tensor([float("nan"), 1.0], device=d), 1)),
    ("multinomial inf", lambda d: torch.multinomial(torch.tensor([float("inf"), 1.0], device=d), 3, True)),
    ("bernoulli p=1.5", lambda d: torch.bernoulli(torch.ones(3, device=d), p=1.5)),
    ("bernoulli tensor p>1", lambda d: torch.bernoulli(torch.full((3,), 1.5, device=d))),
    ("bernoulli tensor nan", lambda d: torch.bernoulli(torch.full((3,), float("nan"), device=d))),
    ("normal std<0", lambda d: torch.normal(0.0, -1.0, (3,), device=d)),
    ("normal tensor std<0", lambda d: torch.normal(torch.zeros(3, device=d), -torch.ones(3, device=d))),
    ("normal float mean, tensor std<0", lambda d: torch.normal(0.0, -torch.ones(3, device=d))),
], ids=lambda c: c[0])
def test_invalid_random_parameters_raise_at_the_op_like_the_cpu(case):
    _, fn = case
    with pytest.raises(RuntimeError) as cpu:
        fn("cpu")
    with pytest.raises(type(cpu.value)) as dev:
        fn("neuron")  # at the op, not at a later synchronisation
    # The same words as the CPU's message (ours repeats PyTorch's text).
    key = {"multinomial": "probab|sum", "bernoulli": "0, 1|p_in|p to be", "normal": "std"}
    assert any(w in str(dev.value) for w in key[case[0].split()[0]].split("|")), str(dev.value)
    torch.neuron.synchronize()  # nothing left pending


def test_valid_random_parameters_still_sample():
    torch.neuron.manual_seed(0)
    p = torch.tensor([[0.0, 1.0, 3.0], [2.0, 0.0, 0.0]], device="neuron")
    s = torch.multinomial(p, 4, replacement=True).cpu()
    assert (s[0] != 0).all() and (s[1] == 0).all()
    b = torch.bernoulli(torch.tensor([0.0, 1.0, 1.0], device="neuron")).cpu()
    assert b.tolist() == [0.0, 1.0, 1.0]
