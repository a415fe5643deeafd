"""Fork safety: DataLoader worker processes feeding the device."""
import torch
from torch.utils.data import DataLoader, TensorDataset

from helpers import run_python


def test_dataloader_workers_feed_device():
    x = torch.randn(256, 8)
    y = torch.randn(256, 1)
    torch.ones(1, device="neuron").cpu()  # runtime initialised before the fork
    loader = DataLoader(TensorDataset(x, y), batch_size=32, num_workers=2, pin_memory=True,
                        multiprocessing_context="fork")
    total = torch.zeros(1, device="neuron")
    n = 0
    for xb, yb in loader:
        xb, yb = xb.to("neuron", non_blocking=True), yb.to("neuron", non_blocking=True)
        total += (xb.sum() + yb.sum())
        n += xb.shape[0]
    assert n == 256
    torch.testing.assert_close(total.cpu(), (x.sum() + y.sum()).reshape(1), rtol=1e-4, atol=1e-3)


def test_forked_child_can_use_device():
    r = run_python("""
        import os, torch
        a = torch.ones(4, device="neuron") * 2
        a.cpu()
        pid = os.fork()
        if pid == 0:
            try:
                b = torch.ones(4, device="neuron") * 3
                os._exit(0 if b.sum().item() == 12 else 1)
            except BaseException:
                os._exit(2)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status), "parent", (a * 2).sum().item())
    """, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "child 0 parent 16.0"
