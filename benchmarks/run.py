"""`make bench`: neuron against PyTorch CPU on the same host, same run.

Each case reports the median over repeats for both devices and the ratio
(CPU time / neuron time: above 1.0 means neuron is faster), with the
machine's limits (triad bandwidth, measured here) beside the bandwidth- and
FLOP-bound cases. Writes benchmarks/results.json and prints a table.
Timing never decides pass/fail: this is a report.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

import torch_neuronx  # noqa: F401

ROOT = os.path.dirname(os.path.abspath(__file__))
REPEATS = 7


def sync(dev: str) -> None:
    if dev == "neuron":
        torch.neuron.synchronize()


def timeit(fn, dev: str, inner: int) -> float:
    fn()
    sync(dev)
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync(dev)
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times)


def triad_gbs() -> float | None:
    exe = os.path.join(os.path.dirname(ROOT), "build", "triad")
    try:
        return float(subprocess.check_output([exe], text=True).strip())
    except Exception:
        return None


def case_op_overhead(dev):
    a, b = torch.ones(1, device=dev), torch.ones(1, device=dev)
    return timeit(lambda: a + b, dev, 2000), None


def case_add_large(dev):
    n = 1 << 24
    a, b = torch.randn(n, device=dev), torch.randn(n, device=dev)
    out = torch.empty(n, device=dev)
    t = timeit(lambda: torch.add(a, b, out=out), dev, 5)
    return t, 3 * 4 * n / t / 1e9  # GB/s


def case_sum_large(dev):
    n = 1 << 24
    a = torch.randn(n, device=dev)
    t = timeit(lambda: a.sum(), dev, 5)
    return t, 4 * n / t / 1e9


def case_gemm(dev, n=1024):
    a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
    t = timeit(lambda: a @ b, dev, 3)
    return t, 2 * n ** 3 / t / 1e9  # GFLOP/s


def case_gemm_bf16(dev, n=1024):
    a, b = torch.randn(n, n, device=dev, dtype=torch.bfloat16), torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    t = timeit(lambda: a @ b, dev, 3)
    return t, 2 * n ** 3 / t / 1e9


def case_softmax(dev):
    x = torch.randn(4096, 1024, device=dev)
    t = timeit(lambda: F.softmax(x, dim=-1), dev, 5)
    return t, 2 * 4 * x.numel() / t / 1e9


def case_mlp_step(dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(256, 512, device=dev)

    def step():
        loss = model(x).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return timeit(step, dev, 3), None


CASES = [
    ("per-op overhead: add of 1 element", case_op_overhead, "us", None),
    ("add 16M float32 (out=)", case_add_large, "GB/s", "triad"),
    ("sum 16M float32", case_sum_large, "GB/s", "triad"),
    ("matmul 1024^3 float32", case_gemm, "GFLOP/s", None),
    ("matmul 1024^3 bfloat16", case_gemm_bf16, "GFLOP/s", None),
    ("softmax 4096x1024 float32", case_softmax, "GB/s", "triad"),
    ("MLP 512-1024-512 train step, batch 256", case_mlp_step, None, None),
]


def main() -> int:
    torch.set_num_threads(os.cpu_count() or 1)
    triad = triad_gbs()
    print(f"host: {os.cpu_count()} CPUs, torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"triad bandwidth {triad if triad else 'n/a'} GB/s")
    print(f"{'case':<42}{'cpu':>12}{'neuron':>12}{'cpu/neuron':>12}{'neuron rate':>16}")
    results = []
    for name, fn, unit, limit in CASES:
        t_cpu, r_cpu = fn("cpu")
        t_dev, r_dev = fn("neuron")
        ratio = t_cpu / t_dev
        rate = ""
        if r_dev is not None:
            rate = f"{r_dev:.1f} {unit}"
            if limit == "triad" and triad:
                rate += f" ({100 * r_dev / triad:.0f}% triad)"
        print(f"{name:<42}{t_cpu * 1e6:>10.1f}us{t_dev * 1e6:>10.1f}us{ratio:>11.2f}x  {rate}")
        results.append(dict(case=name, cpu_s=t_cpu, neuron_s=t_dev, ratio=ratio, neuron_rate=r_dev, cpu_rate=r_cpu,
                            unit=unit))
    with open(os.path.join(ROOT, "results.json"), "w") as f:
        json.dump(dict(triad_gbs=triad, cpus=os.cpu_count(), torch=torch.__version__, results=results), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
