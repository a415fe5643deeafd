"""``fuzz.py --explain CASE_ID``: runs one case in this process and prints
what differs: the exceptions, or for each mismatching result its dtype and
shape on both sides and the first differing elements (CPU, neuron, float64)."""
from __future__ import annotations

import torch

from fuzz_case import DEVICE, build_bases, call_src, run_side
from fuzz_compare import TOL, compare_dicts


def explain(case: dict, limit: int = 6) -> str:
    """A short text: the call, then per side and per mismatching result what differs."""
    bases = build_bases(case)
    cpu, dev = run_side(case, bases, "cpu"), run_side(case, bases, DEVICE)
    ref = run_side(case, bases, "cpu", f64=True)
    lines = [f"{case['id']} {case['op']}: {call_src(case)}"]
    for i, (d, (b, how)) in enumerate(zip(case["tensors"], bases)):
        shape = [case["sizes"].get(s, s) if isinstance(s, str) else s for s in d["shape"]]
        lines.append(f"  t{i}: {d['dtype']}{shape} {d['layout']} fill={d['fill']} role={d['role']}"
                     f"{' cpu' if d.get('cpu') else ''}  values[:8]={b.flatten()[:8].tolist()}")
    for name, side in (("cpu", cpu), ("neuron", dev)):
        if side.exc or side.bexc:
            lines.append(f"  {name} raises: {side.exc or ''} {side.bexc or ''}")
    for what, dv, cv, rv in (("forward", dev.values, cpu.values, ref.values), ("grads", dev.grads, cpu.grads,
                                                                                 ref.grads)):
        for k, kind in compare_dicts(dv, cv, case, grads=what == "grads").items():
            d, c, r = dv.get(k), cv.get(k), rv.get(k)
            lines.append(f"  {k}: {kind}")
            if not (isinstance(d, torch.Tensor) and isinstance(c, torch.Tensor)):
                lines.append(f"    neuron {d!r:.100}  cpu {c!r:.100}")
                continue
            lines.append(f"    neuron {d.dtype}{list(d.shape)}  cpu {c.dtype}{list(c.shape)}")
            if d.shape != c.shape or d.dtype != c.dtype:
                continue
            df, cf = d.flatten(), c.flatten()
            rf = r.flatten() if isinstance(r, torch.Tensor) and r.shape == c.shape else None
            diff = ~((df == cf) | (df != df) & (cf != cf))
            if d.is_floating_point():
                rtol, atol = TOL.get(c.dtype, (1e-4, 1e-5))
                dd, cc = df.double(), cf.double()
                diff &= ~((dd - cc).abs() <= atol + rtol * cc.abs())
            idx = diff.nonzero().flatten()[:limit].tolist()
            for j in idx:
                lines.append(f"    [{j}] cpu {cf[j].item()!r}  neuron {df[j].item()!r}"
                             + (f"  float64 {rf[j].item()!r}" if rf is not None else ""))
    return "\n".join(lines)
