"""Small models built from torch.nn layers, CPU against neuron with zero CPU
fallbacks: an MLP forward (which ops it runs) and training step. (The
Hugging Face models are in test_hf_models.py.)"""
import torch
import torch.nn.functional as F

from helpers import assert_no_fallbacks, close


def test_mlp_forward_native():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    x = torch.randn(16, 32)
    ref = model(x)
    model.neuron()
    import torch_neuronx
    torch_neuronx.clear_op_tracking()
    out = model(x.neuron())
    close(out, ref, atol=1e-5)
    assert_no_fallbacks()
    ops = torch_neuronx.get_executed_ops()
    assert ops.get("aten::addmm", 0) == 2
    assert ops.get("aten::relu", 0) == 1


def test_mlp_training_step_native():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    dev = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    dev.load_state_dict(model.state_dict())
    dev.neuron()
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    for m, xx, yy in ((model, x, y), (dev, x.neuron(), y.neuron())):
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        for _ in range(3):
            loss = F.mse_loss(m(xx), yy)
            opt.zero_grad()
            loss.backward()
            opt.step()
    for p, q in zip(model.parameters(), dev.parameters()):
        close(q, p.detach(), atol=1e-5)
