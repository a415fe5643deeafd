"""Autocast on the neuron device: which ops run in lower precision, float32 or
promote (bfloat16 and float16), and a bfloat16 training step."""
import pytest
import torch
import torch.nn.functional as F

import torch_neuronx
from helpers import assert_no_fallbacks


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_lists(dtype):
    a, b = torch.randn(8, 8, device="neuron"), torch.randn(8, 8, device="neuron")
    lin = torch.nn.Linear(8, 4).neuron()
    with torch.autocast("neuron", dtype=dtype):
        assert (a @ b).dtype == dtype                    # matmul: lower precision
        assert lin(a).dtype == dtype
        assert torch.exp(a).dtype == torch.float32       # fp32 list
        assert F.softmax(a.to(dtype), dim=-1).dtype == torch.float32
        assert (a + b).dtype == torch.float32            # not listed: unchanged
        assert torch.addcmul(a, a.to(dtype), b).dtype == torch.float32  # promote
    ref = (a.cpu().to(dtype) @ b.cpu().to(dtype))
    with torch.autocast("neuron", dtype=dtype):
        got = a @ b
    torch.testing.assert_close(got.cpu(), ref, rtol=2e-2, atol=2e-2)


def test_autocast_training_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).neuron()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(8, 16, device="neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        out = model(x)
        assert out.dtype == torch.bfloat16
        loss = out.float().pow(2).mean()
    loss.backward()
    opt.step()
    assert all(p.grad.dtype == torch.float32 for p in model.parameters())


def _scaler_run(dev, steps, poison_step=None):
    """A float16-autocast training loop with GradScaler; a gradient is set to
    inf on `poison_step`, so that step is skipped and the scale backs off."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(dev)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(dev, init_scale=2.0 ** 10, growth_interval=2)
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(6, 8, generator=g) for _ in range(steps)]
    scales = []
    for i, x in enumerate(xs):
        opt.zero_grad()
        with torch.autocast(dev, dtype=torch.float16):
            loss = m(x.to(dev)).float().pow(2).mean()
        scaler.scale(loss).backward()
        if i == poison_step:
            m[0].weight.grad[0, 0] = float("inf")
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales, [p.detach().cpu() for p in m.parameters()], scaler._growth_tracker.item()


def test_grad_scaler_runs_natively_and_matches_the_cpu():
    want_scales, want_params, want_tracker = _scaler_run("cpu", 6, poison_step=3)
    torch_neuronx.clear_op_tracking()
    scales, params, tracker = _scaler_run("neuron", 6, poison_step=3)
    assert_no_fallbacks()
    assert scales == want_scales  # growth after 2 clean steps, backoff on the inf step
    assert tracker == want_tracker
    for p, w in zip(params, want_params):
        torch.testing.assert_close(p, w, rtol=2e-3, atol=2e-3)  # float16 autocast on both sides


def test_unscale_flags_nan_and_inf_without_reading_back():
    grads = [torch.tensor([1.0, 2.0]), torch.tensor([[float("nan")]]), torch.empty(0), torch.tensor([4.0])]
    for bad in (None, 1):
        gs = [g.clone() for g in grads]
        if bad is None:
            gs[1] = torch.tensor([[3.0]])
        for dev in ("cpu", "neuron"):
            found = torch.zeros(1, device=dev)
            inv = torch.full((1,), 0.5, device=dev)
            d = [g.clone().to(dev) for g in gs]
            torch._amp_foreach_non_finite_check_and_unscale_(d, found, inv)
            if dev == "cpu":
                want_found, want = found, d
            else:
                assert found.item() == want_found.item()
                for a, b in zip(d, want):
                    torch.testing.assert_close(a.cpu(), b, equal_nan=True)
