"""Small models built from torch.nn layers, CPU against neuron with zero CPU
fallbacks: an MLP forward (which ops it runs) and training step, a tiny
ResNet's training step, a ViT patch embedding with group norm. (The
Hugging Face models are in test_hf_models.py.)"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from helpers import assert_no_fallbacks, close, close_scaled, cpu_and_neuron, mse_steps


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
    model, dev = cpu_and_neuron(lambda: nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)))
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    for m, xx, yy in ((model, x, y), (dev, x.neuron(), y.neuron())):
        mse_steps(m, xx, yy, torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), steps=3)
    for p, q in zip(model.parameters(), dev.parameters()):
        close(q, p.detach(), atol=1e-5)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


def tiny_resnet():
    return nn.Sequential(nn.Conv2d(3, 8, 7, 2, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(3, 2, 1), BasicBlock(8, 8, 1), BasicBlock(8, 16, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


def test_resnet_training_step_native():
    torch.manual_seed(0)
    ref, dev = cpu_and_neuron(tiny_resnet)
    x, target = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
    opt_c = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    opt_d = torch.optim.SGD(dev.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        for model, opt, xx, tt in ((ref, opt_c, x, target), (dev, opt_d, x.neuron(), target.neuron())):
            opt.zero_grad()
            F.cross_entropy(model(xx), tt).backward()
            opt.step()
    for (name, p), q in zip(ref.state_dict().items(), dev.state_dict().values()):
        if p.is_floating_point():
            torch.testing.assert_close(q.cpu(), p, rtol=1e-3, atol=1e-4, msg=name)
    ref.eval()
    dev.eval()
    close_scaled(dev(x.neuron()), ref(x))
    assert_no_fallbacks()


def test_vit_patch_embed_and_group_norm_block():
    torch.manual_seed(0)
    patch = nn.Conv2d(3, 16, 8, 8)
    gn = nn.GroupNorm(4, 16)
    devp, devg = nn.Conv2d(3, 16, 8, 8).neuron(), nn.GroupNorm(4, 16).neuron()
    devp.load_state_dict(patch.state_dict())
    devg.load_state_dict(gn.state_dict())
    x = torch.randn(2, 3, 32, 32)
    yc = gn(patch(x)).flatten(2).transpose(1, 2)
    yd = devg(devp(x.neuron())).flatten(2).transpose(1, 2)
    close_scaled(yd, yc)
    yc.square().mean().backward()
    yd.square().mean().backward()
    close_scaled(devp.weight.grad, patch.weight.grad)
    close_scaled(devg.weight.grad, gn.weight.grad)
    assert_no_fallbacks()
