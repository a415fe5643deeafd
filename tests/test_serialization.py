"""torch.save / torch.load of neuron tensors and state dicts (map_location to
the CPU and to another neuron device)."""
import io

import torch


def test_save_and_load(tmp_path):
    t = torch.randn(4, 5).neuron()
    state = {"w": t, "b": torch.arange(3).neuron()}
    path = tmp_path / "ckpt.pt"
    torch.save(state, path)
    loaded = torch.load(path)
    assert loaded["w"].device.type == "neuron"
    assert torch.equal(loaded["w"].cpu(), t.cpu())
    cpu = torch.load(path, map_location="cpu")
    assert cpu["w"].device.type == "cpu" and torch.equal(cpu["b"], torch.arange(3))
    buf = io.BytesIO()
    torch.save(torch.ones(3), buf)
    buf.seek(0)
    moved = torch.load(buf, map_location="neuron:1")
    assert moved.device == torch.device("neuron", 1)
    # A module's state dict round trip.
    m = torch.nn.Linear(3, 2).neuron()
    torch.save(m.state_dict(), path)
    m2 = torch.nn.Linear(3, 2).neuron()
    m2.load_state_dict(torch.load(path))
    assert torch.equal(m2.weight.cpu(), m.weight.cpu())
