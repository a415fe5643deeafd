"""Optimizers on the device: SGD (Nesterov), Adam and AdamW (amsgrad) in their
foreach and fused forms, and clip_grad_norm_, against the same steps on the
CPU with zero CPU fallbacks."""
import pytest
import torch
import torch.nn as nn

from helpers import assert_no_fallbacks, close, cpu_and_neuron, mse_steps


@pytest.mark.parametrize("opt_name,kw", [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
                                         ("Adam", dict(lr=1e-2, weight_decay=0.01)),
                                         ("AdamW", dict(lr=1e-2, weight_decay=0.1, amsgrad=True)),
                                         ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.01))])
@pytest.mark.parametrize("impl", ["foreach", "fused"])
def test_optimizers_native(opt_name, kw, impl):
    torch.manual_seed(0)
    ref, dev = cpu_and_neuron(lambda: nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2)))
    x, y = torch.randn(16, 6), torch.randn(16, 2)
    for m, xx, yy in ((ref, x, y), (dev, x.neuron(), y.neuron())):
        mse_steps(m, xx, yy, getattr(torch.optim, opt_name)(m.parameters(), **kw, **{impl: True}), steps=4)
    for p, q in zip(ref.parameters(), dev.parameters()):
        close(q, p.detach(), atol=1e-5, rtol=1e-4)
    assert_no_fallbacks()
    # clip_grad_norm_ runs natively too
    torch.nn.utils.clip_grad_norm_(dev.parameters(), 0.5)
    assert_no_fallbacks()
