"""Numerics against the CPU: per-module output error on the first step
(forward hooks on both copies of the model), and the step-by-step loss and
gradient-norm curves.

Errors are normalised as ggml's backend tests do: the largest absolute
difference divided by the largest magnitude of the CPU's tensor, so one
threshold per dtype fits tensors of any scale. A module is named as the
origin of an error when its output exceeds the tolerance while its inputs
were still within it.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.utils._pytree as pytree

# Normalised error allowed per compute dtype. float32: ten times the OpInfo
# table's 1e-5 (tests/helpers.py), since a module output sums over many
# GEMM and reduction orders; bfloat16 / float16 autocast: a few units of the
# format's rounding step (2^-8 for bfloat16) at the tensor's largest value,
# which differently ordered bfloat16 roundings through a block reach.
MODULE_TOLERANCE = {"float32": 1e-4, "bfloat16": 3e-2, "float16": 5e-3}
# The loss and the gradient norm after N optimizer steps drift further
# apart than one forward (each step starts from slightly different weights).
CURVE_TOLERANCE = {"float32": 1e-3, "bfloat16": 5e-2, "float16": 1e-2}


def _float_leaves(obj: Any) -> List[torch.Tensor]:
    if hasattr(obj, "to_tuple") and not isinstance(obj, torch.Tensor):
        try:
            obj = obj.to_tuple()
        except Exception:
            pass
    return [x for x in pytree.tree_leaves(obj) if isinstance(x, torch.Tensor) and x.is_floating_point()]


def normalised_error(actual: torch.Tensor, expected: torch.Tensor) -> Tuple[float, float]:
    """(max abs difference, that divided by max |expected|); inf when the
    shapes differ or a NaN/inf appears on one side only."""
    a = actual.detach().to("cpu", torch.float32)
    e = expected.detach().to("cpu", torch.float32)
    if a.shape != e.shape:
        return math.inf, math.inf
    if a.numel() == 0:
        return 0.0, 0.0
    bad = torch.isfinite(a) != torch.isfinite(e)
    if bool(bad.any()):
        return math.inf, math.inf
    finite = torch.isfinite(e)
    diff = torch.where(finite, (a - e).abs(), torch.zeros_like(a))
    max_abs = float(diff.max())
    scale = float(torch.where(finite, e.abs(), torch.zeros_like(e)).max())
    return max_abs, max_abs / max(scale, 1e-30) if max_abs > 0 else 0.0


def _max_error(actual: List[torch.Tensor], expected: List[torch.Tensor]) -> Tuple[float, float]:
    if len(actual) != len(expected):
        return math.inf, math.inf
    worst_abs = worst_rel = 0.0
    for a, e in zip(actual, expected):
        ab, rel = normalised_error(a, e)
        worst_abs, worst_rel = max(worst_abs, ab), max(worst_rel, rel)
    return worst_abs, worst_rel


class ModuleProbe:
    """Forward hooks on every submodule (and the model itself) for one
    forward pass. ``record`` keeps the CPU copy's inputs and outputs;
    ``compare`` measures the device copy's against them as each module
    finishes, in execution order. References beyond ``max_bytes`` are not
    kept (those modules are reported as skipped)."""

    def __init__(self, model: torch.nn.Module, mode: str, reference: Optional["ModuleProbe"] = None,
                 max_bytes: int = 1 << 30) -> None:
        self.mode = mode
        self.reference = reference
        self.max_bytes = max_bytes
        self.bytes = 0
        self.stored: Dict[Tuple[str, int], Tuple[List[torch.Tensor], List[torch.Tensor]]] = {}
        self.order: List[Tuple[str, int, str]] = []
        self.rows: List[dict] = []
        self.skipped = 0
        self._calls: Dict[str, int] = {}
        self._handles = []
        for name, mod in model.named_modules():
            self._handles.append(mod.register_forward_hook(self._hook(name or "(model)"), with_kwargs=True))

    def _hook(self, name: str):
        def hook(module, args, kwargs, output):
            n = self._calls.get(name, 0)
            self._calls[name] = n + 1
            key = (name, n)
            ins, outs = _float_leaves((args, kwargs)), _float_leaves(output)
            if self.mode == "record":
                size = sum(t.numel() * 4 for t in ins + outs)
                if self.bytes + size > self.max_bytes:
                    self.skipped += 1
                    return
                self.bytes += size
                self.stored[key] = ([t.detach().float().clone() for t in ins],
                                    [t.detach().float().clone() for t in outs])
                self.order.append((name, n, type(module).__name__))
            else:
                ref = self.reference.stored.get(key) if self.reference else None
                if ref is None:
                    self.skipped += 1
                    return
                in_abs, in_rel = _max_error(ins, ref[0])
                out_abs, out_rel = _max_error(outs, ref[1])
                shape = list(outs[0].shape) if outs else []
                self.rows.append({
                    "module": name, "call": n, "type": type(module).__name__,
                    "output_shape": shape, "output_dtype": str(outs[0].dtype).replace("torch.", "") if outs else "",
                    "max_abs": out_abs, "max_rel": out_rel, "input_max_rel": in_rel,
                })
        return hook

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []


def first_exceeding(rows: List[dict], tol: float) -> Optional[dict]:
    """The module where the error first appears: the first (in execution
    order) whose output exceeds ``tol`` while its inputs were within it;
    failing that, the first whose output exceeds it."""
    over = [r for r in rows if r["max_rel"] > tol]
    if not over:
        return None
    for r in over:
        if r["input_max_rel"] <= tol:
            return r
    return over[0]


def relative_curve_error(actual: List[float], expected: List[float]) -> float:
    """max over steps of |a - e| / max(|e|, 1e-12); inf when a value is not
    finite on one side only or the lengths differ."""
    if len(actual) != len(expected) or not expected:
        return math.inf
    worst = 0.0
    for a, e in zip(actual, expected):
        if math.isfinite(a) != math.isfinite(e):
            return math.inf
        if not math.isfinite(e):
            continue
        worst = max(worst, abs(a - e) / max(abs(e), 1e-12))
    return worst


# A parameter whose gradient is below this fraction of the model's largest
# gradient is compared at that scale (gradient_errors).
NEAR_ZERO_GRADIENT = 1e-3


def snapshot_grads(model: torch.nn.Module) -> Dict[str, torch.Tensor]:
    """Every parameter's gradient, copied to the CPU (float32)."""
    return {n: p.grad.detach().to("cpu", torch.float32).clone()
            for n, p in model.named_parameters() if p.grad is not None}


def gradient_errors(actual: Dict[str, torch.Tensor], expected: Dict[str, torch.Tensor]) -> List[dict]:
    """Normalised error of each parameter's gradient after the first
    backward, worst first."""
    # A gradient that is zero in exact arithmetic (a conv bias before a
    # BatchNorm, which removes the mean) is rounding noise on both sides, and
    # noise over noise is a relative error near 1. Such a gradient is measured
    # against the largest gradient of the model instead, and flagged.
    scale = max((float(e.abs().max()) for e in expected.values() if e.numel()), default=0.0)
    floor = NEAR_ZERO_GRADIENT * scale
    rows = []
    for name, g in actual.items():
        e = expected.get(name)
        if e is None:
            continue
        ab, rel = normalised_error(g, e)
        own = float(e.abs().max()) if e.numel() else 0.0
        near_zero = 0.0 < own < floor or (own == 0.0 and ab > 0)
        if near_zero and math.isfinite(ab):
            rel = ab / floor if floor > 0 else rel
        rows.append({"parameter": name, "shape": list(g.shape), "max_abs": ab, "max_rel": rel,
                     "near_zero": near_zero})
    rows.sort(key=lambda r: -r["max_rel"])
    return rows
