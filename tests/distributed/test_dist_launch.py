"""examples/train_ddp.py under torchrun on the 4 logical cores: it trains
(the loss falls) and the ranks end with equal parameters."""
import os
import re
import subprocess
import sys

import dist_launch


def test_train_ddp_example_under_torchrun():
    env = dict(os.environ)
    env.pop("TORCH_NEURONX_KERNEL_THREADS", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4",
           os.path.join(dist_launch.ROOT, "examples", "train_ddp.py"), "--epochs", "2"]
    p = subprocess.run(cmd, env=env, cwd=dist_launch.ROOT, capture_output=True, text=True, timeout=150)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    losses = [float(x) for x in re.findall(r"loss ([0-9.]+)", p.stdout)]
    assert len(losses) >= 2 and losses[-1] < losses[0], out
    assert "parameters equal on all 4 ranks: True" in p.stdout, out
