"""The machine `make bench` ran on and its limits, measured in the same run:
memory bandwidth (build/triad, STREAM triad on every core) and peak FP32 and
BF16 arithmetic (build/peak, register-only multiply-add loops)."""
from __future__ import annotations

import datetime
import os
import platform
import subprocess

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The flags that decide which kernels can run; the full list goes to results.json too.
INTERESTING_FLAGS = ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                     "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile"]


def cpu_info() -> dict:
    model, flags = platform.processor() or "unknown", []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = value.split()
    except OSError:
        pass
    return {"model": model, "cores": os.cpu_count(), "flags": [f for f in INTERESTING_FLAGS if f in flags],
            "all_flags": flags}


def git_commit() -> str | None:
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                                       stderr=subprocess.DEVNULL).strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def machine_info() -> dict:
    import torch_neuronx  # noqa: F401
    return {
        "cpu": cpu_info(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "neuron_device": torch.neuron.get_device_name(),
        "kernel_threads_env": os.environ.get("TORCH_NEURONX_KERNEL_THREADS"),
        "commit": git_commit(),
        "python": platform.python_version(),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        # Other work on the host (1, 5 and 15 minute averages of runnable
        # threads): PyTorch's CPU backend, whose OpenMP regions wait for every
        # thread, slows sharply when other processes hold the cores.
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def limits(mode: str) -> dict:
    """Triad bandwidth (GB/s, plus a sweep over working-set sizes) and peak
    GFLOP/s (fp32 and, where the CPU has AVX512_BF16, bf16; None otherwise):
    torch_neuronx.limits.measure, the same tools the profiler's table uses,
    run at this mode's length."""
    from torch_neuronx.limits import measure

    small = mode == "smoke"
    return measure(peak_ms=10 if small else 50 if mode == "quick" else 200,
                   triad_n=1 << 18 if small else 1 << 25, triad_sweep=True)


def best_limits(a: dict, b: dict) -> dict:
    """The higher of two measurements of the limits (start and end of a run),
    keeping both for the record."""
    def higher(key):
        return (a if (a.get(key) or 0) >= (b.get(key) or 0) else b)
    best = {key: higher(key)[key] for key in ("triad_gbs", "peak_fp32_gflops", "peak_bf16_gflops")}
    best["triad"] = higher("triad_gbs")["triad"]
    fp32_peak, bf16_peak = higher("peak_fp32_gflops")["peak"], higher("peak_bf16_gflops")["peak"]
    best["peak"] = dict(fp32_peak, bf16=(bf16_peak or {}).get("bf16", "n/a")) if fp32_peak else None
    best["measurements"] = [a, b]
    return best
