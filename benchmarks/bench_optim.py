"""AdamW (or Adam, SGD) steps over many parameters: per-tensor, foreach and
fused, on neuron and on PyTorch's CPU, timed in turns in one process so a
loaded host slows every variant alike. Prints per-variant medians of one
optimizer step and the fraction of a STREAM triad (build/triad, one run per
round of the variants, median) the step reaches, counting each tensor read
and written once (AdamW: param, grad, exp_avg, exp_avg_sq, 5 with amsgrad;
SGD: param and momentum buffer read and written, grad read).

  .venv/bin/python benchmarks/bench_optim.py                     10x1M and 100x1M, f32 and bf16
  .venv/bin/python benchmarks/bench_optim.py --config 10x1M:f32 --steps 9
  .venv/bin/python benchmarks/bench_optim.py --opt SGD --json out.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time

import torch
import torch_neuronx  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPLS = {"per-tensor": dict(foreach=False, fused=False), "foreach": dict(foreach=True), "fused": dict(fused=True)}


def triad_gbs(n: int = 1 << 24) -> float:
    exe = os.path.join(ROOT, "build", "triad")
    if not os.path.exists(exe):
        subprocess.run(["make", "build/triad"], cwd=ROOT, check=True, capture_output=True)
    out = subprocess.run([exe, "--n", str(n)], capture_output=True, text=True, check=True).stdout
    return float(json.loads(out)["gbs"])


def make_params(count: int, numel: int, dtype: torch.dtype, device: str) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    params = []
    for _ in range(count):
        p = torch.randn(numel, generator=g, dtype=dtype).to(device).requires_grad_()
        p.grad = torch.randn(numel, generator=g, dtype=dtype).to(device) * 1e-2
        params.append(p)
    return params


def sync(device: str) -> None:
    if device == "neuron":
        torch.neuron.synchronize()


def step_bytes(opt: str, kw: dict, numel_total: int, dtype: torch.dtype) -> int:
    es = torch.empty((), dtype=dtype).element_size()
    if opt == "SGD":
        return numel_total * es * (3 + (2 if kw.get("momentum", 0) else 0))  # param rw, grad r, buf rw
    tensors = 4 + (1 if kw.get("amsgrad") else 0)
    return numel_total * es * 2 * tensors


def run_config(opt: str, kw: dict, count: int, numel: int, dtype: torch.dtype, steps: int, devices: list[str],
               impls: list[str], triads: list[float]) -> list[dict]:
    variants = []
    for device in devices:
        params = make_params(count, numel, dtype, device)
        for impl in impls:
            o = getattr(torch.optim, opt)(params, **kw, **IMPLS[impl])
            for _ in range(2):  # creates the state, warms the allocator
                o.step()
            sync(device)
            variants.append(dict(device=device, impl=impl, opt=o, times=[]))
    for _ in range(steps):
        triads.append(triad_gbs())
        for v in variants:
            sync(v["device"])
            t0 = time.perf_counter()
            v["opt"].step()
            sync(v["device"])
            v["times"].append(time.perf_counter() - t0)
    out = []
    for v in variants:
        out.append(dict(device=v["device"], impl=v["impl"], median_ms=1e3 * statistics.median(v["times"]),
                        min_ms=1e3 * min(v["times"])))
        v["opt"] = None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--opt", default="AdamW", choices=["Adam", "AdamW", "SGD"])
    ap.add_argument("--config", action="append", help="COUNTxNUMEL:dtype, e.g. 10x1M:f32 (repeatable)")
    ap.add_argument("--steps", type=int, default=7, help="timed steps per variant (median reported)")
    ap.add_argument("--devices", default="neuron,cpu")
    ap.add_argument("--impls", default="per-tensor,foreach,fused")
    ap.add_argument("--amsgrad", action="store_true")
    ap.add_argument("--json", help="write the results here too")
    a = ap.parse_args()
    configs = a.config or ["10x1M:f32", "10x1M:bf16", "100x1M:f32", "100x1M:bf16"]
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
    if a.opt == "SGD":
        kw = dict(lr=1e-3, momentum=0.9, weight_decay=1e-2)
    else:
        kw = dict(lr=1e-3, weight_decay=1e-2, amsgrad=a.amsgrad)
    results, triads = [], []
    for c in configs:
        shape, dt = c.split(":")
        count, numel = shape.lower().split("x")
        numel = int(float(numel.rstrip("mk")) * (1 << 20 if numel.endswith("m") else 1 << 10 if numel.endswith("k") else 1))
        rows = run_config(a.opt, kw, int(count), numel, dtypes[dt], a.steps, a.devices.split(","),
                          a.impls.split(","), triads)
        results.append(dict(config=c, bytes=step_bytes(a.opt, kw, int(count) * numel, dtypes[dt]), rows=rows))
    triad = statistics.median(triads)
    print(f"{a.opt} {kw}; triad median {triad:.1f} GB/s (min {min(triads):.1f}, max {max(triads):.1f}, "
          f"{len(triads)} runs between rounds), {torch.get_num_threads()} threads")
    print(f"{'config':<14}{'device':<8}{'impl':<12}{'median ms':>10}{'min ms':>9}{'GB/s':>8}{'% triad':>9}{'vs cpu fused':>14}")
    for r in results:
        cpu_fused = next((x["median_ms"] for x in r["rows"] if x["device"] == "cpu" and x["impl"] == "fused"), None)
        for x in r["rows"]:
            gbs = r["bytes"] / (x["median_ms"] * 1e-3) / 1e9
            x["gbs"], x["triad_fraction"] = gbs, gbs / triad
            ratio = f"{cpu_fused / x['median_ms']:.2f}x" if cpu_fused else "-"
            print(f"{r['config']:<14}{x['device']:<8}{x['impl']:<12}{x['median_ms']:>10.1f}{x['min_ms']:>9.1f}"
                  f"{gbs:>8.1f}{100 * gbs / triad:>8.0f}%{ratio:>14}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(opt=a.opt, kw=kw, triad_gbs=triads, results=results), f, indent=1)


if __name__ == "__main__":
    main()
