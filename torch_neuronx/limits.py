"""The machine's limits, the yardstick for achieved rates: memory bandwidth
(STREAM triad on every core, ``build/triad``) and peak FP32 / BF16
arithmetic (register-only multiply-add loops, ``build/peak``), both small C
programs in benchmarks/ built by the Makefile.

``machine_limits()`` measures once per machine and caches the figures in
build/machine-limits.json (keyed by CPU model and core count), so the
profiler's tables cost nothing after the first call. ``make bench``
measures again in its own run, at full length.
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, "build", "machine-limits.json")


def _cpuinfo(field: str) -> str:
    """The first CPU's /proc/cpuinfo value of `field`, or ''."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == field:
                    return value.strip()
    except OSError:
        pass
    return ""


def cpu_model() -> str:
    return _cpuinfo("model name") or "unknown"


@functools.lru_cache(maxsize=None)
def host_blas_kind() -> str:
    """'amd', 'intel-avx512' or 'other': which of MKL's kernel sets the CPU's
    PyTorch takes, the same rule as the runtime's nrt_kernels_host_blas()
    (docs/architecture.md): MKL's summation orders differ between them."""
    vendor = _cpuinfo("vendor_id")
    if vendor == "AuthenticAMD":
        return "amd"
    if vendor == "GenuineIntel" and "avx512f" in _cpuinfo("flags").split():
        return "intel-avx512"
    return "other"


def host_bf16_dot() -> bool:
    """Whether the host is an Intel CPU with AVX512-BF16, the runtime's
    nrt_kernels_host_bf16_dot(): where the bfloat16 flash kernel's oneDNN
    arrangements, followed by sdpa, were probed."""
    return _cpuinfo("vendor_id") == "GenuineIntel" and "avx512_bf16" in _cpuinfo("flags").split()


def run_tool(name: str, args: list[str], timeout: float = 600) -> dict | None:
    """Runs build/<name> (making it first if needed) and parses its JSON;
    None if it cannot be built or run (a checkout without a compiler)."""
    exe = os.path.join(ROOT, "build", name)
    try:
        subprocess.run(["make", "-s", f"build/{name}"], cwd=ROOT, check=True, capture_output=True)
        return json.loads(subprocess.check_output([exe, *args], text=True, timeout=timeout))
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError):
        return None


def measure(peak_ms: int = 50, triad_n: int = 1 << 23, triad_sweep: bool = False) -> dict:
    """Measures now: {"triad_gbs", "peak_fp32_gflops", "peak_bf16_gflops"}
    (None where unavailable) and the tools' raw output under "triad" and
    "peak"."""
    triad = run_tool("triad", (["--sweep"] if triad_sweep else []) + ["--n", str(triad_n)])
    peak = run_tool("peak", ["--ms", str(peak_ms)])
    bf16 = (peak or {}).get("bf16")
    return {
        "triad_gbs": triad["gbs"] if triad else None,
        "peak_fp32_gflops": peak["fp32"]["gflops"] if peak else None,
        "peak_bf16_gflops": bf16["gflops"] if isinstance(bf16, dict) else None,
        "triad": triad,
        "peak": peak,
    }


def _cpu_seconds() -> tuple[float, float, float]:
    """(wall, busy CPU seconds of the whole machine, CPU seconds of this
    process's finished children): the tools run as children."""
    busy = 0.0
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        busy = (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        pass
    t = os.times()
    return time.monotonic(), busy, t.children_user + t.children_system


def _others_share(before: tuple, after: tuple) -> float:
    """The share of the machine's CPU time that other processes used
    between two _cpu_seconds() readings."""
    wall = (after[0] - before[0]) * (os.cpu_count() or 1)
    others = (after[1] - before[1]) - (after[2] - before[2])
    return max(others, 0.0) / wall if wall > 0 else 0.0


_cached: dict | None = None


def machine_limits() -> dict:
    """The cached limits of this machine, measured on first use."""
    global _cached
    if _cached is not None:
        return _cached
    key = f"{cpu_model()} / {os.cpu_count()} cpus"
    try:
        with open(CACHE) as f:
            saved = json.load(f)
        if saved.get("machine") == key:
            _cached = saved
            return saved
    except (OSError, ValueError):
        pass
    # A limit measured while other work holds the cores is too low, and a
    # cached one would stay wrong: such a measurement serves this process
    # only, and the next one measures again.
    before = _cpu_seconds()
    limits = measure()
    limits["machine"] = key
    busy = _others_share(before, _cpu_seconds()) > 0.1
    limits["measured_under_load"] = busy
    if limits["triad_gbs"] is not None and not busy:
        try:
            os.makedirs(os.path.dirname(CACHE), exist_ok=True)
            with open(CACHE, "w") as f:
                json.dump(limits, f, indent=1)
        except OSError:
            pass
    _cached = limits
    return limits
