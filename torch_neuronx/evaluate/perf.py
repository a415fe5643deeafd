"""Performance pieces of an evaluation: timing a run's steps, the per-shape
recompiles and what to do about them, the memory a training copy needs
against a Trainium2 core and chip, and the device profiler's top kernels.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

GiB = 1 << 30

# Trainium2, the hardware this device stands in for: one chip has 96 GiB of
# HBM and 8 physical NeuronCores; at the default logical core size of 2 the
# chip shows 4 logical cores of 24 GiB each.
TRN2 = {"chip_hbm_bytes": 96 * GiB, "physical_cores": 8, "logical_core_size": 2, "logical_cores": 4,
        "core_hbm_bytes": 24 * GiB}


def timed_steps(run: Any, n: int, on_step: Optional[Callable[[], None]] = None) -> Dict[str, Any]:
    """Runs n training steps without reading results in between (the device
    runs behind the host, as in a real loop), then synchronises. Returns
    the mean step time and every step's loss and gradient norm."""
    losses: List[torch.Tensor] = []
    norms: List[torch.Tensor] = []
    run.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        loss, g = run.step()
        losses.append(loss)
        norms.append(g)
        if on_step is not None:
            on_step()
    run.synchronize()
    elapsed = time.perf_counter() - t0
    return {
        "step_s": elapsed / n if n else float("nan"),
        "timed_steps": n,
        "losses": [float(x) for x in torch.stack(losses).float().cpu()] if losses else [],
        "grad_norms": [float(x) for x in torch.stack(norms).float().cpu()] if norms else [],
    }


def memory_fit(state: Dict[str, int], peak_allocated: int, capacity: int) -> Dict[str, Any]:
    """Whether one training copy (parameters, gradients, optimizer state)
    fits a Trainium2 logical core and chip, with the figures used."""
    total = state["parameters"] + state["gradients"] + state["optimizer_state"]
    return {
        **state,
        "training_state": total,
        "peak_allocated": peak_allocated,
        "device_capacity": capacity,
        "trn2": dict(TRN2),
        "fits_core": total <= TRN2["core_hbm_bytes"],
        "fits_chip": total <= TRN2["chip_hbm_bytes"],
        "peak_fits_core": peak_allocated <= TRN2["core_hbm_bytes"],
        "cores_needed_for_state": max(1, math.ceil(total / TRN2["core_hbm_bytes"])),
    }


def _bucket(n: int) -> int:
    """The next power of two up to 128, then the next multiple of 128."""
    if n <= 128:
        return 1 << max(0, (n - 1).bit_length())
    return ((n + 127) // 128) * 128


def shape_advice(shapes: Sequence[tuple], compile_seconds: Sequence[float]) -> Optional[str]:
    """A padding / bucketing recommendation when the input shapes vary."""
    distinct = sorted(set(tuple(s) for s in shapes))
    if len(distinct) <= 1:
        return None
    dims = len(distinct[0])
    if any(len(s) != dims for s in distinct):
        return (f"{len(distinct)} input signatures each compile their own graphs: make the inputs "
                f"one fixed structure and pad them to one size")
    varying = [d for d in range(dims) if len({s[d] for s in distinct}) > 1]
    largest = tuple(max(s[d] for s in distinct) for d in range(dims))
    buckets = sorted({tuple(_bucket(s[d]) if d in varying else s[d] for d in range(dims)) for s in distinct})
    mean = sum(compile_seconds) / len(compile_seconds) if compile_seconds else 0.0
    names = ", ".join(f"dim {d}" for d in varying)
    msg = (f"{len(distinct)} distinct input shapes (varying {names}) compile {len(distinct)} sets of graphs"
           + (f", about {mean:.1f} s each" if mean else "")
           + f". Pad every batch to {largest} for one compile")
    if len(buckets) < len(distinct):
        msg += f", or bucket {names} up to {', '.join(str(b) for b in buckets)} ({len(buckets)} compiles)"
    else:
        msg += (f", or bucket the varying dims (powers of two up to 128, then multiples of 128) so that "
                f"a few sizes cover every batch")
    return msg + "; static shapes are how NeuronCore programs are built (torch.compile(backend='neuron') " \
                 "never compiles a dynamic shape)."


def profiler_module() -> Any:
    """torch_neuronx.profiler when this build has it, else None."""
    try:
        from torch_neuronx import profiler  # noqa: F401
    except Exception:
        return None
    return profiler if hasattr(profiler, "profile") else None


def profile_steps(run: Any, n: int, limit: int = 15, trace_path: Optional[str] = None) -> Dict[str, Any]:
    """Top kernels of n steps of a run under torch_neuronx.profiler."""
    prof_mod = profiler_module()
    if prof_mod is None:
        return {"available": False, "reason": "profiler not available (torch_neuronx.profiler is not in this build)"}
    run.synchronize()
    t0 = time.perf_counter()
    with prof_mod.profile(trace_path=trace_path, print_table=False) as prof:
        for _ in range(n):
            run.step()
        run.synchronize()
    wall = time.perf_counter() - t0
    kernels = list(prof.kernels())
    device_us = sum(float(k.get("total_us", 0.0)) for k in kernels)
    return {"available": True, "steps": n, "wall_s": wall, "device_s": device_us * 1e-6,
            "kernels": [dict(k) for k in kernels[:limit]], "kernel_count": len(kernels),
            "trace_path": trace_path}
