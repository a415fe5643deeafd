"""Comparison of the CPU's and the device's results, and the classification
of a case. The classes (what the summary counts):

  ok                           same values (within tolerance), or both raise the same exception class
  value-mismatch               a value differs beyond tolerance, and the device is farther from a
                               float64 CPU run than the CPU is
  dtype-mismatch               a result's dtype differs
  shape-mismatch               a result's shape (or the structure of the results) differs
  device-rejects-cpu-accepts   neuron raises, the CPU does not
  cpu-rejects-device-accepts   the CPU raises, neuron does not
  both-raise-different-class   both raise, with different exception classes
  crash                        the worker died (signal, abort) in the case   (set by the pool)
  hang                         the case exceeded its timeout                 (set by the pool)

Tolerances (rtol, atol) by the result's dtype, as torch.testing.assert_close
uses them, NaN equal to NaN, infinities exact:

  float32, complex64  1e-4, 1e-5   summation order differs (blocked, multithreaded kernels)
  float64             1e-4, 1e-5   the device computes float64 at float32 precision (documented)
  bfloat16            2e-2, 2e-2   8 mantissa bits: about 2.5 epsilons
  float16             2.5e-3, 2.5e-3  the same 2.5 epsilons
  integers, bool      exact

A floating result computed from bfloat16 (or float16) inputs, or with a
bfloat16/float16 dtype= argument, gets that dtype's tolerance when it is
larger (mixed-precision ops round there).

For ops that accumulate many terms (reductions, matmuls, convolutions, norms,
attention, losses) atol is raised to rtol (1e-4 for float32, as the OpInfo
sweep's and tests/helpers.py's TOL_ACCUMULATED) and multiplied by
max(1, max|finite reference|).
A value mismatch is re-checked against the same case run on the CPU with
floating inputs in float64: if the device's error is no larger than the
CPU's, or the device is within tolerance of the float64 result, it is ok.
A float64 result that still differs is compared with the case computed in
float32 on the CPU (the device's documented float64 semantics): within
float32 tolerance of that, or no farther from the CPU's float64 result than
that float32 computation is, it is ok.
For sort-like ops (max/argmax/sort/topk/max pooling...), index results and gradients
are not compared when the input holds equal values or NaN (either index is
right).
"""
from __future__ import annotations

from typing import Any

import torch

from fuzz_case import Side

TOL: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-4, 1e-5), torch.complex64: (1e-4, 1e-5), torch.float64: (1e-4, 1e-5),
    torch.complex128: (1e-4, 1e-5), torch.bfloat16: (2e-2, 2e-2), torch.float16: (2.5e-3, 2.5e-3),
}

MISMATCH_ORDER = ["shape-mismatch", "dtype-mismatch", "value-mismatch"]


def _as_f(x: torch.Tensor) -> torch.Tensor:
    x = x.resolve_conj().resolve_neg() if x.is_complex() else x
    return x.to(torch.complex128) if x.is_complex() else x.to(torch.float64)


def max_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    """Largest |x - ref| elementwise; NaN against NaN and equal infinities count 0,
    a NaN or infinity on one side only counts inf."""
    if x.numel() == 0:
        return 0.0
    a, b = _as_f(x), _as_f(ref)
    if a.is_complex() or b.is_complex():
        a, b = torch.view_as_real(a.to(torch.complex128)), torch.view_as_real(b.to(torch.complex128))
    both_nan = a.isnan() & b.isnan()
    same = (a == b) | both_nan
    d = (a - b).abs()
    d = torch.where(same, torch.zeros_like(d), d)
    d = torch.where(d.isnan(), torch.full_like(d, float("inf")), d)
    return float(d.max())


LOOSEST = [torch.bfloat16, torch.float16]


def loosest_input(case: dict) -> torch.dtype | None:
    """The lowest-precision floating input dtype (bfloat16, then float16), if any:
    a float32 result computed from bfloat16 inputs gets bfloat16's tolerance. A
    16-bit dtype= argument counts too: the op computes in it, and a float32
    input's gradient passes through it (19501-2242053: log_softmax(dtype=
    torch.bfloat16)'s input gradient, one bfloat16 ulp from the CPU's)."""
    names = {t["dtype"] for t in case["tensors"] if t["role"] in ("in", "w")}
    kw = case.get("kwargs", {}).get("dtype")
    if isinstance(kw, dict) and "dtype" in kw:
        names.add(kw["dtype"])
    for dt in LOOSEST:
        if str(dt).split(".")[1] in names:
            return dt
    return None


def tensors_close(dev: torch.Tensor, ref: torch.Tensor, acc: bool, dtype: torch.dtype | None = None,
                  loose: torch.dtype | None = None) -> bool:
    """dev within the tolerance of `dtype` (default: ref's; `loose`'s when that is
    larger) of ref; exact for integers and bool."""
    dtype = dtype or ref.dtype
    if not (dtype.is_floating_point or dtype.is_complex):
        return torch.equal(dev, ref)
    if dev.numel() == 0:
        return True
    rtol, atol = TOL.get(dtype, (1e-4, 1e-5))
    if loose is not None:
        rtol, atol = max(rtol, TOL[loose][0]), max(atol, TOL[loose][1])
    a, b = _as_f(dev), _as_f(ref)
    if a.is_complex() or b.is_complex():
        a, b = torch.view_as_real(a.to(torch.complex128)), torch.view_as_real(b.to(torch.complex128))
    if acc:
        fin = b[b.isfinite()]
        atol = max(atol, rtol) * max(1.0, float(fin.abs().max()) if fin.numel() else 1.0)
    ok = (a == b) | (a.isnan() & b.isnan()) | ((a - b).abs() <= atol + rtol * b.abs())
    return bool(ok.all())


def nonfinite_only(dev: Any, ref: Any, acc: bool) -> bool:
    """True when every element that differs beyond tolerance is NaN or
    infinite on at least one side (a non-finite propagation difference)."""
    if not (isinstance(dev, torch.Tensor) and isinstance(ref, torch.Tensor)) or dev.shape != ref.shape:
        return False
    if not (ref.dtype.is_floating_point or ref.dtype.is_complex) or dev.dtype != ref.dtype:
        return False
    a, b = _as_f(dev), _as_f(ref)
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    rtol, atol = TOL.get(ref.dtype, (1e-4, 1e-5))
    if acc:
        fin = b[b.isfinite()]
        atol = max(atol, rtol) * max(1.0, float(fin.abs().max()) if fin.numel() else 1.0)
    bad = ~((a == b) | (a.isnan() & b.isnan()) | ((a - b).abs() <= atol + rtol * b.abs()))
    return bool(bad.any()) and bool((~a[bad].isfinite() | ~b[bad].isfinite()).all())


def compare_value(dev: Any, cpu: Any, acc: bool, loose: torch.dtype | None = None) -> str | None:
    """None when equal; else the mismatch class."""
    if isinstance(cpu, torch.Tensor) != isinstance(dev, torch.Tensor):
        return "shape-mismatch"
    if isinstance(cpu, torch.Tensor):
        if tuple(dev.shape) != tuple(cpu.shape):
            return "shape-mismatch"
        if dev.dtype != cpu.dtype:
            return "dtype-mismatch"
        return None if tensors_close(dev, cpu, acc, loose=loose) else "value-mismatch"
    if type(dev) is not type(cpu):
        return "dtype-mismatch"
    if isinstance(cpu, float):
        return None if tensors_close(torch.tensor(dev, dtype=torch.float64), torch.tensor(cpu, dtype=torch.float64),
                                     acc, torch.float32) else "value-mismatch"
    return None if dev == cpu else "value-mismatch"


def has_ties(t: Any) -> bool:
    if not isinstance(t, torch.Tensor) or t.numel() < 2 or t.is_complex():
        return False
    f = t.double() if t.dtype != torch.bool else t.to(torch.int64)
    return bool(f.isnan().any()) or torch.unique(f).numel() < f.numel()


def compare_dicts(dev: dict, cpu: dict, case: dict, grads: bool = False, inputs: dict | None = None) -> dict[str, str]:
    """Mismatch class per result name (outputs `out...`, inputs after the call
    `in<i>`, gradients `grad<i>`); `inputs` holds the CPU's `in<i>` values
    when comparing gradients (for the tie check)."""
    acc = case["compare"].get("acc", False)
    src = inputs if inputs is not None else cpu
    tied = case["compare"].get("ties", False) and any(has_ties(src.get(f"in{i}")) for i in range(len(case["tensors"])))
    bad: dict[str, str] = {}
    for k in sorted(set(dev) | set(cpu)):
        if k not in dev or k not in cpu:
            bad[k] = "shape-mismatch"
            continue
        kind = compare_value(dev[k], cpu[k], acc, loosest_input(case))
        if kind == "value-mismatch" and tied and (grads or (isinstance(cpu[k], torch.Tensor)
                                                            and cpu[k].dtype == torch.int64)):
            continue
        if kind:
            bad[k] = kind
    return bad


# How many times the CPU's own error (from the exact, float64 result) the
# device's may be, where the CPU's result is itself beyond tolerance of the
# exact one: such a result is ill-conditioned at the precision computed,
# and arithmetic in another order has an error of the same size, not the
# same error (20101-2886051: an expanded row's summed gradient, six terms of
# 2.3e6 whose float32 ulp is 0.25, cancels to 0.5 on neuron and to 0.25 in
# the CPU's float32 run, 0 in float64; requiring no more than the CPU's
# error would make such a case a coin toss). Where the CPU is within
# tolerance, the device must be too (or no farther than the CPU).
ORDER_SLACK = 4.0


def _no_farther(d: torch.Tensor, c: torch.Tensor, r: torch.Tensor, acc: bool, dtype: torch.dtype,
                finite: bool = False) -> bool:
    """d is no farther from r than c is, or, where c is beyond dtype's tolerance
    of r, within ORDER_SLACK times c's error (a NaN or infinity on one side
    only is never within the slack; with `finite`, not at all)."""
    err, cpu_err = max_err(d, r), max_err(c, r)
    if err <= cpu_err and not (finite and err == float("inf")):
        return True
    rr = r.to(c.dtype) if not c.dtype.is_complex else r
    return err < float("inf") and err <= ORDER_SLACK * cpu_err and not tensors_close(c, rr, acc, dtype)


def rescued_by_f64(dev: dict, cpu: dict, ref: dict, names: list[str], acc: bool) -> bool:
    """True when for every name the device is at least as close to the float64
    run as the CPU (_no_farther, with its slack for ill-conditioned results),
    or within tolerance of it."""
    for k in names:
        d, c, r = dev.get(k), cpu.get(k), ref.get(k)
        if not all(isinstance(v, torch.Tensor) for v in (d, c, r)) or tuple(r.shape) != tuple(d.shape):
            return False
        if not (r.is_floating_point() or r.is_complex()):
            return False
        if tuple(c.shape) == tuple(d.shape) and _no_farther(d, c, r, acc, d.dtype):
            continue
        if tensors_close(d, r.to(d.dtype) if not d.dtype.is_complex else r, acc, d.dtype):
            continue
        return False
    return True


def rescued_by_f32(dev: dict, cpu: dict, ref32: dict, names: list[str], acc: bool) -> bool:
    """True when every float64 result named is within float32 tolerance of
    the same case computed in float32 on the CPU, or no farther from the CPU's
    float64 result than that float32 computation is (the device computes
    float64 at float32 precision, documented; the second rule is
    rescued_by_f64's at that precision, with its slack: 19501-2001390, an
    sdpa query gradient next to keys of 1e18, is 1.8e11 from the CPU's
    float64 9.8 on neuron and on the CPU in float32 alike, in different
    float32 orders)."""
    for k in names:
        d, c, r = dev.get(k), cpu.get(k), ref32.get(k)
        if not all(isinstance(v, torch.Tensor) for v in (d, c, r)) or not d.shape == c.shape == r.shape:
            return False
        if d.dtype not in (torch.float64, torch.complex128):
            return False
        if tensors_close(d, r.to(d.dtype), acc, torch.float32):
            continue
        # the CPU's float64 result is the exact one here, its float32 run the
        # computation at the device's precision
        if _no_farther(d, r.to(d.dtype), c, acc, torch.float32, finite=True):
            continue
        return False
    return True


def _raise_class(cpu_exc: Any, dev_exc: Any) -> str | None:
    if cpu_exc and dev_exc:
        return None if cpu_exc[0] == dev_exc[0] else "both-raise-different-class"
    if cpu_exc:
        return "cpu-rejects-device-accepts"
    if dev_exc:
        return "device-rejects-cpu-accepts"
    return None


def classify(case: dict, cpu: Side, dev: Side, f64_run: Any, f32_run: Any = None) -> tuple[str, dict]:
    """(class, detail) for one case; `f64_run()` returns the float64 CPU Side,
    `f32_run()` the CPU Side with float64 inputs in float32 (each called at
    most once, and only for a value mismatch)."""
    detail: dict[str, Any] = {}
    refs: dict[str, Side] = {}

    def ref(kind: str) -> Side:
        if kind not in refs:
            refs[kind] = f64_run() if kind == "f64" else f32_run()
        return refs[kind]

    # (phase, exceptions, results, result attribute, detail-key suffix)
    phases = [("forward", cpu.exc, dev.exc, "values", "exc", ""),
              ("backward", cpu.bexc, dev.bexc, "grads", "bexc", "_grads")]
    for phase, cpu_exc, dev_exc, attr, exc_attr, suffix in phases:
        if phase == "backward" and not case.get("backward"):
            break
        cls = _raise_class(cpu_exc, dev_exc)
        if cls or cpu_exc:
            detail["phase"] = phase
            return cls or "ok", detail
        dv, cv = getattr(dev, attr), getattr(cpu, attr)
        acc = case["compare"]["acc"]
        if attr == "grads":
            bad = compare_dicts(dv, cv, case, grads=True, inputs=cpu.values)
        else:
            bad = compare_dicts(dv, cv, case)
        if bad and set(bad.values()) == {"value-mismatch"}:
            r = ref("f64")
            if getattr(r, exc_attr) is None and rescued_by_f64(dv, cv, getattr(r, attr), list(bad), acc):
                detail["f64_rescued" + suffix] = sorted(bad)
                bad = {}
        if bad and set(bad.values()) == {"value-mismatch"} and f32_run is not None:
            r = ref("f32")
            if getattr(r, exc_attr) is None and rescued_by_f32(dv, cv, getattr(r, attr), list(bad), acc):
                detail["f32_semantics" + suffix] = sorted(bad)
                bad = {}
        if bad:
            detail["phase"] = phase
            detail["names"] = bad
            detail["maxdiff"] = _diffs(dv, cv, bad)
            detail["nonfinite"] = all(nonfinite_only(dv.get(k), cv.get(k), acc) for k in bad)
            return min(bad.values(), key=MISMATCH_ORDER.index), detail
    return "ok", detail


def _diffs(dev: dict, cpu: dict, bad: dict) -> dict[str, str]:
    out = {}
    for k in bad:
        d, c = dev.get(k), cpu.get(k)
        if isinstance(d, torch.Tensor) and isinstance(c, torch.Tensor):
            if d.shape != c.shape or d.dtype != c.dtype:
                out[k] = f"dev {d.dtype}{list(d.shape)} cpu {c.dtype}{list(c.shape)}"
            else:
                out[k] = f"max|dev-cpu|={max_err(d, c):.3g} dtype={c.dtype}"
        else:
            out[k] = f"dev {str(d)[:60]!s} cpu {str(c)[:60]!s}"
    return out
