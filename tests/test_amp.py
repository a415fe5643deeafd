"""Autocast on the neuron device: which ops run in lower precision, float32 or
promote (bfloat16 and float16), and a bfloat16 training step."""
import pytest
import torch
import torch.nn.functional as F


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
