"""torch.compile(backend="neuron") by hand (not part of make test / make bench):

  .venv/bin/python benchmarks/bench_compile.py [--quick]

Training steps (forward, backward, optimizer step) of an MLP and a small GPT
(transformers' GPT-2, small config, random weights): neuron compiled vs neuron
eager vs PyTorch CPU eager, medians over repeats, as ratios. Then the cold
compile time of our part (capture + graph compiler + cache, excluding Dynamo
and AOTAutograd tracing) and a cache hit in a new process.
Timing never decides pass/fail: this is a report.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_neuronx  # noqa: F401

QUICK = "--quick" in sys.argv
REPEATS = 5 if QUICK else 9


def sync(dev):
    if dev == "neuron":
        torch.neuron.synchronize()


def median_time(fn, dev, warmup=2):
    for _ in range(warmup):
        fn()
    sync(dev)
    ts = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        sync(dev)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def mlp(dev):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 2048), nn.GELU(),
                         nn.Linear(2048, 10)).to(dev), (torch.randn(128, 512), torch.randint(0, 10, (128,)))


def gpt(dev):
    import transformers

    cfg = transformers.GPT2Config(n_embd=256, n_layer=4, n_head=4, vocab_size=1024, n_positions=128,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    ids = torch.randint(0, 1024, (8, 128))
    return transformers.GPT2LMHeadModel(cfg).to(dev), (ids, ids)


def step_fn(model, batch, dev, compiled):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = (t.to(dev) for t in batch)
    is_gpt = x.dtype == torch.long and x.dim() == 2 and y.shape == x.shape
    fwd = torch.compile(model, backend="neuron") if compiled else model

    def loss_of():
        return fwd(x, labels=y).loss if is_gpt else F.cross_entropy(fwd(x), y)

    def step():
        opt.zero_grad(set_to_none=False)
        loss_of().backward()
        opt.step()

    return step


def run_case(name, build):
    res = {}
    for label, dev, compiled in (("cpu eager", "cpu", False), ("neuron eager", "neuron", False),
                                 ("neuron compiled", "neuron", True)):
        model, batch = build(dev)
        step = step_fn(model, batch, dev, compiled)
        t0 = time.perf_counter()
        step()  # compiles on the compiled path
        sync(dev)
        first = time.perf_counter() - t0
        res[label] = (median_time(step, dev), first)
    cpu, eager, comp = res["cpu eager"][0], res["neuron eager"][0], res["neuron compiled"][0]
    print(f"{name:10s} cpu eager {cpu * 1e3:8.2f} ms | neuron eager {eager * 1e3:8.2f} ms | neuron compiled "
          f"{comp * 1e3:8.2f} ms | compiled vs neuron eager {eager / comp:5.2f}x, vs cpu eager {cpu / comp:5.2f}x "
          f"| first compiled call {res['neuron compiled'][1]:.2f} s")


_COLD = """
import os, time, sys
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, {here!r})
import torch, torch_neuronx
import bench_compile as b
model, batch = b.{case}("neuron")
step = b.step_fn(model, batch, "neuron", True)
step(); torch.neuron.synchronize()
m = torch.neuron.get_dynamo_metrics()
ours = sum(g["compile_time_s"] for g in m["graphs"])
comp = sum(g["compiler_time_s"] for g in m["graphs"])
print(f"{{ours:.3f}} {{comp:.3f}} {{m['graphs_compiled']}} {{m['cache']['disk_hits']}}")
"""


def cold_and_cached(case):
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, TORCH_NEURONX_NEFF_CACHE_DIR=d)
        code = _COLD.format(here=os.path.dirname(os.path.abspath(__file__)), case=case)
        rows = []
        for _ in range(2):
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
            if r.returncode != 0:
                print(r.stderr[-2000:])
                return
            rows.append(r.stdout.split())
        (c_ours, c_comp, c_n, _), (h_ours, _, h_n, h_hits) = rows[0], rows[1]
        print(f"{case:10s} cold: our part {float(c_ours):.2f} s (capture + compile of {c_n} graphs; "
              f"graph compiler alone {float(c_comp):.3f} s) | new process, cache hit: our part {float(h_ours):.2f} s "
              f"({h_hits} disk hits, {h_n} compiled)")


def main():
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, medians of {REPEATS}")
    run_case("mlp", mlp)
    try:
        import transformers  # noqa: F401

        run_case("gpt", gpt)
    except ImportError:
        print("gpt: transformers is not installed")
    cold_and_cached("mlp")
    cold_and_cached("gpt")


if __name__ == "__main__":
    main()
