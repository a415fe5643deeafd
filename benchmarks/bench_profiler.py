"""The device profiler's overhead: the same training step with the profiler
off and on (torch_neuronx.profiler, and torch.profiler with the PrivateUse1
activity), interleaved, medians over repeats.

    .venv/bin/python benchmarks/bench_profiler.py [--repeats N]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.profiler import ProfilerActivity

import torch_neuronx  # noqa: F401
from torch_neuronx import profiler as nprof


def make_step(width: int = 256, layers: int = 4, batch: int = 8, seq: int = 64):
    layer = torch.nn.TransformerEncoderLayer(width, 4, 4 * width, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch, seq, width, device="neuron")

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
        torch.neuron.synchronize()
    return step


def timed(step, ctx) -> float:
    t0 = time.perf_counter()
    with ctx():
        for _ in range(3):
            step()
    return (time.perf_counter() - t0) / 3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    step = make_step()
    for _ in range(3):
        step()
    import contextlib

    modes = {
        "off": contextlib.nullcontext,
        "torch_neuronx.profiler": lambda: nprof.profile(print_table=False, limits=False),
        "torch.profiler CPU+PrivateUse1": lambda: torch.profiler.profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]),
        "torch.profiler CPU only": lambda: torch.profiler.profile(activities=[ProfilerActivity.CPU]),
    }
    times: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(args.repeats):
        for m, ctx in modes.items():
            times[m].append(timed(step, ctx))
    base = statistics.median(times["off"])
    print(f"{'mode':<32} {'step ms':>9} {'overhead':>9}")
    for m, ts in times.items():
        med = statistics.median(ts)
        print(f"{m:<32} {med * 1e3:>9.2f} {med / base - 1:>+9.1%}")


if __name__ == "__main__":
    main()
