"""The main job (`make run`): train one model on the neuron device and on the
CPU from the same seed, then report how the two runs compare.

The model is a small MLP classifier on a synthetic, fixed data set
(interleaved spirals, generated from a seed: nothing is downloaded). Both
runs start from identical weights and see identical batches, so the loss
curves should agree to float32 rounding.
"""
from __future__ import annotations

import argparse
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_neuronx


def make_data(n: int, classes: int, dim: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    per = n // classes
    xs, ys = [], []
    for c in range(classes):
        r = torch.linspace(0.1, 1.0, per)
        t = torch.linspace(c * 4.0, (c + 1) * 4.0, per) + torch.randn(per, generator=g) * 0.25
        pts = torch.stack([r * torch.sin(t), r * torch.cos(t)], dim=1)
        # Lift to `dim` features with a fixed random projection + nonlinearity.
        xs.append(pts)
        ys.append(torch.full((per,), c, dtype=torch.long))
    x2 = torch.cat(xs)
    proj = torch.randn(2, dim, generator=g)
    x = torch.tanh(x2 @ proj) + 0.05 * torch.randn(x2.shape[0], dim, generator=g)
    return x, torch.cat(ys)


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int, classes: int):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(dim, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def train(device: str, args: argparse.Namespace, x: torch.Tensor, y: torch.Tensor,
          init_state: dict) -> tuple[list[float], float]:
    model = MLP(args.dim, args.hidden, args.classes)
    model.load_state_dict(init_state)
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    xd, yd = x.to(device), y.to(device)
    order = torch.Generator().manual_seed(args.seed + 1)
    losses: list[float] = []
    loss_dev: list[torch.Tensor] = []
    n = x.shape[0]
    # One warm-up step is excluded from the timing (first-use costs).
    t0 = None
    for step in range(args.steps + 1):
        if step == 1:
            if device.startswith("neuron"):
                torch.neuron.synchronize()
            t0 = time.perf_counter()
        idx = torch.randint(0, n, (args.batch,), generator=order)
        xb, yb = xd[idx.to(device)], yd[idx.to(device)]
        logits = model(xb)
        loss = F.cross_entropy(logits, yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss_dev.append(loss.detach())
        if step % args.log_every == 0 or step == args.steps:
            # Reading the loss synchronises; done only on log steps so the
            # device runs ahead of Python the rest of the time.
            print(f"  [{device:>6}] step {step:4d}/{args.steps}  loss {loss.item():.5f}", flush=True)
    if device.startswith("neuron"):
        torch.neuron.synchronize()
    elapsed = time.perf_counter() - t0
    losses = [float(v) for v in torch.stack([l.cpu() for l in loss_dev])]
    return losses, elapsed / args.steps


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=50)
    args = p.parse_args()

    print(f"TorchNeuron main job: {torch.neuron.device_count()} neuron device(s), "
          f"{torch.neuron.get_device_name(0)}; torch {torch.__version__}")
    x, y = make_data(8192, args.classes, args.dim, args.seed)
    torch.manual_seed(args.seed)
    init_state = {k: v.clone() for k, v in MLP(args.dim, args.hidden, args.classes).state_dict().items()}
    print(f"model: MLP {args.dim}->{args.hidden}x3->{args.classes}, "
          f"{sum(v.numel() for v in init_state.values()):,} parameters; AdamW lr {args.lr}; "
          f"{args.steps} steps of batch {args.batch}")

    print("training on cpu ...")
    cpu_losses, cpu_step = train("cpu", args, x, y, init_state)
    print("training on neuron ...")
    torch.neuron.reset_peak_memory_stats()
    torch_neuronx.clear_op_tracking()
    dev_losses, dev_step = train("neuron", args, x, y, init_state)
    executed = torch_neuronx.get_executed_ops()
    fallbacks = torch_neuronx.get_fallback_counts()
    peak = torch.neuron.max_memory_allocated()

    diffs = [abs(a - b) for a, b in zip(cpu_losses, dev_losses)]
    worst = max(range(len(diffs)), key=diffs.__getitem__)
    print()
    print("=" * 72)
    print("REPORT")
    print("=" * 72)
    print("loss curves (same seed, same batches):")
    print(f"  {'step':>6} {'cpu':>12} {'neuron':>12} {'|diff|':>12}")
    marks = sorted(set(list(range(0, args.steps + 1, args.log_every)) + [args.steps]))
    for s in marks:
        print(f"  {s:>6} {cpu_losses[s]:>12.6f} {dev_losses[s]:>12.6f} {diffs[s]:>12.2e}")
    print(f"  final loss: cpu {cpu_losses[-1]:.6f}, neuron {dev_losses[-1]:.6f}")
    print(f"  largest deviation: {diffs[worst]:.3e} at step {worst} "
          f"(relative {diffs[worst] / max(abs(cpu_losses[worst]), 1e-12):.2e})")
    print("time per training step (mean over the timed steps, warm-up step excluded):")
    print(f"  cpu    {cpu_step * 1e3:8.2f} ms")
    print(f"  neuron {dev_step * 1e3:8.2f} ms   ({cpu_step / dev_step:.2f}x the cpu speed)")
    print(f"peak neuron memory allocated: {peak / 2**20:.2f} MiB "
          f"(reserved peak {torch.neuron.max_memory_reserved() / 2**20:.2f} MiB)")
    native = {k: v for k, v in executed.items() if k not in fallbacks}
    print(f"ops executed natively on neuron: {len(native)} ops, {sum(native.values())} calls")
    for name, count in sorted(native.items(), key=lambda kv: -kv[1]):
        print(f"  {count:8d}  {name}")
    if fallbacks:
        print(f"ops that fell back to the CPU: {len(fallbacks)} ops, {sum(fallbacks.values())} calls")
        for name, count in sorted(fallbacks.items(), key=lambda kv: -kv[1]):
            print(f"  {count:8d}  {name}")
    else:
        print("ops that fell back to the CPU: none")
    ok = math.isfinite(dev_losses[-1]) and diffs[worst] < 1e-2 * max(1.0, abs(cpu_losses[worst]))
    print("result:", "neuron matches cpu" if ok else "MISMATCH between neuron and cpu")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
