"""torch.compile(backend="neuron") against eager and PyTorch CPU (issue 9, section 5).

  .venv/bin/python benchmarks/bench_compile.py [--quick | --smoke] [--out DIR] [--only NAME]

Part of `make bench` (after benchmarks/run.py). Cases, at the issue's sizes:

- GPT-2-small config training step (12 layers, 768 wide, GPT-2's vocabulary, batch 8 x seq 128,
  AdamW), float32 and under bfloat16 autocast;
- a ResNet-18 training step (torchvision's layout, 224 x 224 images, batch 16; 8 in --quick;
  SGD with momentum);
- BERT-base inference (batch 8 x seq 128, torch.no_grad()).

Each case runs four ways in one process: PyTorch CPU eager, PyTorch CPU with Inductor
(torch.compile's default backend), neuron eager and neuron compiled (backend="neuron"). Only the
model is compiled; the optimizer step is the same eager call everywhere. After a warm-up the four
take turns sample by sample (cpu eager, cpu inductor, neuron eager, neuron compiled, ...), each
sample ending with its device's synchronize; medians are reported, with ratios:
compiled / neuron eager, / CPU eager, / Inductor (above 1.0: compiled neuron is faster).

Then compile times of the GPT-2-small float32 step, in fresh processes: our part cold (capture +
graph compiler + cache, without Dynamo/AOTAutograd tracing, read from get_dynamo_metrics), our
part on a cache hit in a new process, and the whole first step of both; Inductor's first step
cold (its own caches in an empty directory) beside them.

Writes DIR/compile_results.json and DIR/compile-performance.md (default: benchmarks/ and docs/).
Timing never decides pass/fail: this is a report.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
# Inductor compiles cold in this process: its caches live in a fresh directory.
_INDUCTOR_DIR = tempfile.mkdtemp(prefix="bench-inductor-")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", _INDUCTOR_DIR)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torch_neuronx  # noqa: E402,F401

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

MODES = {
    # repeats: interleaved samples per variant; budget_s: stop sampling a case after this long
    "full": dict(repeats=7, warmup=2, budget_s=240.0),
    "quick": dict(repeats=3, warmup=1, budget_s=60.0),
    "smoke": dict(repeats=1, warmup=1, budget_s=10.0),
}
VARIANTS = ("cpu eager", "cpu inductor", "neuron eager", "neuron compiled")
TARGETS = {"vs neuron eager": 1.3, "vs cpu eager": 1.2, "vs cpu inductor": 1.0}


# ---- models ----------------------------------------------------------------------------------

def gpt2_config(mode: str):
    import transformers

    if mode == "smoke":
        return transformers.GPT2Config(n_embd=64, n_layer=2, n_head=2, vocab_size=512, n_positions=64)
    return transformers.GPT2Config()  # GPT-2 small: 12 layers, 768 wide, 50,257 tokens


def gpt2_batch(mode: str):
    b, s = (2, 32) if mode == "smoke" else (8, 128)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, gpt2_config(mode).vocab_size, (b, s), generator=g)
    return ids


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    """torchvision's ResNet-18 layout (torchvision is not a dependency)."""

    def __init__(self, classes: int = 1000, width: int = 64):
        super().__init__()
        w = width
        self.stem = nn.Sequential(nn.Conv2d(3, w, 7, 2, 3, bias=False), nn.BatchNorm2d(w), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        layers, cin = [], w
        for i, cout in enumerate((w, 2 * w, 4 * w, 8 * w)):
            stride = 1 if i == 0 else 2
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


RESNET_BATCH = {"full": 16, "quick": 8, "smoke": 2}


# ---- cases: build(mode) -> (host model, batch, kind, optimizer factory, autocast dtype) ---------

def case_gpt2(mode: str, amp=None):
    import transformers

    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(gpt2_config(mode))
    ids = gpt2_batch(mode)
    return dict(model=model, inputs=(ids,), kind="lm-train", amp=amp,
                opt=lambda params: torch.optim.AdamW(params, lr=1e-4),
                shape=f"batch {ids.shape[0]} x seq {ids.shape[1]}")


def case_resnet(mode: str):
    torch.manual_seed(0)
    width = 8 if mode == "smoke" else 64
    size = 32 if mode == "smoke" else 224
    b = RESNET_BATCH[mode]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(b, 3, size, size, generator=g)
    y = torch.randint(0, 1000, (b,), generator=g)
    return dict(model=ResNet18(width=width), inputs=(x, y), kind="cls-train", amp=None,
                opt=lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9),
                shape=f"batch {b} x 3 x {size} x {size}")


def case_bert(mode: str):
    import transformers

    cfg = transformers.BertConfig() if mode != "smoke" else transformers.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, vocab_size=512)
    torch.manual_seed(0)
    model = transformers.BertModel(cfg).eval()
    b, s = (2, 32) if mode == "smoke" else (8, 128)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (b, s), generator=g)
    return dict(model=model, inputs=(ids,), kind="infer", amp=None, opt=None, shape=f"batch {b} x seq {s}")


CASES = {
    "gpt2-small train f32": lambda mode: case_gpt2(mode),
    "gpt2-small train bf16 autocast": lambda mode: case_gpt2(mode, torch.bfloat16),
    "resnet18 train f32": case_resnet,
    "bert-base inference f32": case_bert,
}


def make_step(case: dict, variant: str):
    """The call to time for one variant: a fresh copy of the host model on its device."""
    dev = "neuron" if variant.startswith("neuron") else "cpu"
    model = copy.deepcopy(case["model"]).to(dev)
    inputs = [t.to(dev) for t in case["inputs"]]
    fwd = model
    if variant == "neuron compiled":
        fwd = torch.compile(model, backend="neuron")
    elif variant == "cpu inductor":
        fwd = torch.compile(model)
    opt = case["opt"](model.parameters()) if case["opt"] else None
    amp = case["amp"]
    kind = case["kind"]

    def forward_loss():
        if kind == "lm-train":
            return fwd(inputs[0], labels=inputs[0]).loss
        return F.cross_entropy(fwd(inputs[0]), inputs[1])

    def step():
        if kind == "infer":
            with torch.no_grad():
                return fwd(inputs[0]).last_hidden_state
        opt.zero_grad(set_to_none=True)
        if amp is not None:
            with torch.autocast(dev, dtype=amp):
                loss = forward_loss()
        else:
            loss = forward_loss()
        loss.backward()
        opt.step()
        return loss

    return step, dev


def sync(dev: str) -> None:
    if dev == "neuron":
        torch.neuron.synchronize()


def timed(step, dev: str) -> float:
    time.sleep(0.025)  # libgomp's threads spin ~10 ms after a CPU parallel region (benchmarks/README.md)
    t0 = time.perf_counter()
    step()
    sync(dev)
    return time.perf_counter() - t0


# Kernels whose cost a graph compiler that reuses the eager kernels cannot remove: the
# FLOP-bound ones. Everything else (pointwise, norms, reductions, copies, the optimizer's
# foreach passes) is what fusion and one-launch programs can save, at best all of it.
COMPUTE_KERNELS = ("GEMM", "CONV", "SDPA", "BMM", "MM")


def compute_bound_share(step) -> dict:
    """One eager step under the device profiler: its device time and the part
    of it in FLOP-bound kernels."""
    import torch_neuronx.profiler as nprof

    with nprof.profile(print_table=False, limits=False) as p:
        step()
    total = p.device_time_ns
    compute = sum(a.end_ns - a.start_ns for a in p.activities()
                  if a.kind == "kernel" and a.name.split("_")[0] in COMPUTE_KERNELS)
    return {"device_s": total / 1e9, "compute_s": compute / 1e9}


def run_case(name: str, mode: str, settings: dict) -> dict:
    case = CASES[name](mode)
    row = {"name": name, "shape": case["shape"], "variants": {}}
    steps = {}
    for v in VARIANTS:
        try:
            step, dev = make_step(case, v)
            first = timed(step, dev)  # the compiled variants compile here
            for _ in range(settings["warmup"]):
                timed(step, dev)
            steps[v] = (step, dev)
            row["variants"][v] = {"first_s": first, "samples": []}
        except Exception as e:  # a variant that fails is reported, the others still run
            row["variants"][v] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]}
    started = time.perf_counter()
    for i in range(settings["repeats"]):
        for v, (step, dev) in steps.items():
            row["variants"][v]["samples"].append(timed(step, dev))
        if time.perf_counter() - started > settings["budget_s"]:
            break
    for v in steps:
        s = row["variants"][v]["samples"]
        row["variants"][v]["median_s"] = statistics.median(s)
        row["variants"][v]["min_s"], row["variants"][v]["max_s"] = min(s), max(s)
    if "neuron eager" in steps:
        try:
            a = compute_bound_share(steps["neuron eager"][0])
            eager = statistics.median(row["variants"]["neuron eager"]["samples"])
            # against the eager step's wall time: host dispatch is part of what compiling can save
            a["share"] = a["compute_s"] / eager
            a["ceiling"] = eager / a["compute_s"] if a["compute_s"] else None
            row["amdahl"] = a
        except Exception as e:
            row["amdahl"] = {"error": f"{type(e).__name__}: {e}"[:300]}
    steps.clear()
    torch._dynamo.reset()  # the compiled variants' caches hold their models (GPT-2 small: GBs)
    comp = row["variants"].get("neuron compiled", {}).get("median_s")
    row["ratios"] = {}
    for label, other in (("vs neuron eager", "neuron eager"), ("vs cpu eager", "cpu eager"),
                         ("vs cpu inductor", "cpu inductor")):
        o = row["variants"].get(other, {}).get("median_s")
        row["ratios"][label] = o / comp if comp and o else None
    return row


def print_row(row: dict) -> None:
    cells = []
    for v in VARIANTS:
        r = row["variants"].get(v, {})
        cells.append(f"{v} " + (f"{r['median_s'] * 1e3:8.1f} ms" if "median_s" in r else "ERROR"))
    ratios = ", ".join(f"{k} {v:.2f}x" for k, v in row["ratios"].items() if v)
    a = row.get("amdahl") or {}
    bound = f" | FLOP-bound kernels {a['share']:.0%} of the eager step: compiled <= {a['ceiling']:.2f}x eager" \
        if a.get("ceiling") else ""
    print(f"{row['name']:32s} | " + " | ".join(cells) + f" | compiled {ratios}{bound}", flush=True)
    for v in VARIANTS:
        if "error" in row["variants"].get(v, {}):
            print(f"    {v}: {row['variants'][v]['error']}", flush=True)


# ---- compile times in fresh processes ----------------------------------------------------------

_COMPILE_CHILD = r"""
import json, os, sys, time
sys.path.insert(0, {here!r})
import torch, torch_neuronx
import bench_compile as b
case = b.CASES[{name!r}]({mode!r})
variant = {variant!r}
step, dev = b.make_step(case, variant)
t0 = time.perf_counter(); step(); b.sync(dev); first = time.perf_counter() - t0
t0 = time.perf_counter(); step(); b.sync(dev); steady = time.perf_counter() - t0
out = dict(first_s=first, steady_s=steady)
if dev == "neuron":
    m = torch.neuron.get_dynamo_metrics()
    out.update(ours_s=m["compile_time_s"], compiler_s=sum(g["compiler_time_s"] for g in m["graphs"]),
               graphs=len(m["graphs"]), captured=sum(1 for g in m["graphs"] if g["captured"]),
               compiled=m["graphs_compiled"], plan_hits=m["cache"]["plan_hits"])
print("RESULT " + json.dumps(out))
"""


def _child(name: str, mode: str, variant: str, env: dict) -> dict:
    code = _COMPILE_CHILD.format(here=HERE, name=name, mode=mode, variant=variant)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=1800)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": (r.stderr.strip().splitlines() or ["no output"])[-1][:300]}


def compile_times(mode: str, name: str = "gpt2-small train f32") -> dict:
    with tempfile.TemporaryDirectory() as neff, tempfile.TemporaryDirectory() as ind:
        env = dict(os.environ, TORCH_NEURONX_NEFF_CACHE_DIR=neff, TORCHINDUCTOR_CACHE_DIR=ind)
        env.pop("TORCH_NEURONX_DISABLE_NEFF_CACHE", None)
        cold = _child(name, mode, "neuron compiled", env)
        hit = _child(name, mode, "neuron compiled", env)
        inductor = _child(name, mode, "cpu inductor", env)
    return {"case": name, "neuron_cold": cold, "neuron_cache_hit": hit, "inductor_cold": inductor}


def print_compile(c: dict) -> None:
    cold, hit, ind = c["neuron_cold"], c["neuron_cache_hit"], c["inductor_cold"]
    if "error" in cold or "error" in hit:
        print(f"compile times: {cold.get('error') or hit.get('error')}", flush=True)
        return
    print(f"compile, {c['case']}: ours cold {cold['ours_s']:.2f} s (graph compiler {cold['compiler_s']:.3f} s, "
          f"{cold['compiled']} programs), cache hit in a new process {hit['ours_s']:.3f} s "
          f"({hit['plan_hits']} plan hits, {hit['captured']} captured); first step with Dynamo/AOTAutograd "
          f"{cold['first_s']:.1f} s cold, {hit['first_s']:.1f} s hit; Inductor first step "
          + (f"{ind['first_s']:.1f} s (steady {ind['steady_s']:.2f} s)" if "first_s" in ind else ind.get("error", "?")),
          flush=True)


# ---- report ----------------------------------------------------------------------------------

def _ms(r: dict) -> str:
    if "median_s" not in r:
        return "error"
    return f"{r['median_s'] * 1e3:.1f} ({r['min_s'] * 1e3:.0f}-{r['max_s'] * 1e3:.0f})"


def markdown(results: dict) -> str:
    info = results["machine"]
    mode = results["mode"]
    lines = [
        "# Performance: torch.compile(backend=\"neuron\")",
        "",
        f"Generated by `{'make bench' if mode == 'full' else 'benchmarks/bench_compile.py --' + mode}` on "
        f"{info['date']}, commit {info.get('commit')}, {info['cpu']['model']} ({info['cpu']['cores']} CPUs), "
        f"torch {info['torch']}; the run took {results['wall_s']:.0f} s. Load average at the start "
        f"{info.get('load_average')}, at the end {results['load_average_end']}. Do not edit: rerun the command.",
        "",
        "Each case runs four ways in one process, taking turns sample by sample after a warm-up: PyTorch CPU "
        "eager, PyTorch CPU with Inductor (`torch.compile`'s default), neuron eager and neuron compiled "
        "(`backend=\"neuron\"`). Only the model is compiled; the optimizer step is the same eager call in all "
        "four. Times are medians in ms per step (range in parentheses). Ratios are the other time over neuron "
        "compiled's: above 1.0, compiled neuron is faster.",
        "",
    ]
    if mode != "full":
        lines += [f"**This is a {mode.upper()} run** ({results['settings']['repeats']} samples"
                  + (", tiny models: its numbers mean nothing" if mode == "smoke" else ", smaller ResNet batch")
                  + "). `make bench` runs the issue's sizes.", ""]
    lines += ["## Targets (issue 9, section 5)", ""]
    for label, target in TARGETS.items():
        got = [(r["name"], r["ratios"].get(label)) for r in results["cases"]]
        missed = [f"{n} {v:.2f}x" if v else f"{n} (no time)" for n, v in got if not v or v < target]
        status = "MET" if not missed else "MISSED"
        lines.append(f"- **{status}**: compiled neuron >= {target}x {label[3:]}"
                     + (f"; missed: {'; '.join(missed)}" if missed else f" on all {len(got)} cases")
                     + ".")
    c = results.get("compile")
    if c and "ours_s" in c["neuron_cold"] and "ours_s" in c["neuron_cache_hit"]:
        cold, hit = c["neuron_cold"]["ours_s"], c["neuron_cache_hit"]["ours_s"]
        lines.append(f"- **{'MET' if cold <= 10 else 'MISSED'}**: cold compile of the GPT-2-small step, our part, "
                     f"<= 10 s: {cold:.2f} s.")
        lines.append(f"- **{'MET' if hit <= 0.2 else 'MISSED'}**: cache hit in a new process, our part, <= 0.2 s: "
                     f"{hit:.3f} s.")
    lines += ["", "*FLOP-bound share*: the device time of one eager step spent in GEMM, convolution and "
              "attention kernels (the device profiler), over the eager step's median wall time. A compiled program "
              "runs those same kernels, so even if fusion removed every other kernel and all dispatch, a compiled "
              "step could not take less than that: *ceiling* = 1 / share bounds compiled / eager.", "",
              "## Step times", "",
              "| case | shape | CPU eager ms | CPU Inductor ms | neuron eager ms | neuron compiled ms | "
              "vs neuron eager | vs CPU eager | vs Inductor | FLOP-bound share of eager | ceiling vs eager | "
              "first compiled step s | Inductor first step s |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results["cases"]:
        v = r["variants"]
        rat = [f"{r['ratios'][k]:.2f}x" if r["ratios"].get(k) else "-" for k in TARGETS]
        first = [f"{v[k]['first_s']:.1f}" if "first_s" in v.get(k, {}) else "-" for k in
                 ("neuron compiled", "cpu inductor")]
        a = r.get("amdahl") or {}
        bound = [f"{a['share']:.0%}" if a.get("share") else "-", f"{a['ceiling']:.2f}x" if a.get("ceiling") else "-"]
        lines.append(f"| {r['name']} | {r['shape']} | " + " | ".join(_ms(v.get(k, {})) for k in VARIANTS)
                     + " | " + " | ".join(rat + bound + first) + " |")
    errors = [(r["name"], k, x["error"]) for r in results["cases"] for k, x in r["variants"].items() if "error" in x]
    if errors:
        lines += ["", "Errors: " + "; ".join(f"{n} / {k}: {e}" for n, k, e in errors)]
    if c:
        cold, hit, ind = c["neuron_cold"], c["neuron_cache_hit"], c["inductor_cold"]
        lines += ["", f"## Compile time ({c['case']}, fresh processes)", "",
                  "Our part is the capture run, the C graph compiler and the cache (get_dynamo_metrics()'s "
                  "compile_time_s), without Dynamo's and AOTAutograd's tracing, which any backend pays. The first "
                  "step includes everything. Inductor's first step is cold: its caches start empty.", "",
                  "| | our part s | graph compiler s | programs compiled | plan hits | first step s | steady step s |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for label, x in (("neuron, cold", cold), ("neuron, cache hit in a new process", hit)):
            if "error" in x:
                lines.append(f"| {label} | error: {x['error']} | | | | | |")
            else:
                lines.append(f"| {label} | {x['ours_s']:.3f} | {x['compiler_s']:.3f} | {x['compiled']} | "
                             f"{x['plan_hits']} | {x['first_s']:.2f} | {x['steady_s']:.2f} |")
        lines.append(f"| Inductor (CPU), cold | - | - | - | - | {ind.get('first_s', float('nan')):.2f} | "
                     f"{ind.get('steady_s', float('nan')):.2f} |")
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_const", dest="mode", const="quick")
    g.add_argument("--smoke", action="store_const", dest="mode", const="smoke")
    ap.add_argument("--out", help="directory for compile_results.json and compile-performance.md")
    ap.add_argument("--only", action="append", help="cases whose names contain this (repeatable)")
    ap.add_argument("--no-compile-times", action="store_true", help="skip the fresh-process compile timings")
    args = ap.parse_args(argv)
    mode = args.mode or "full"
    settings = MODES[mode]
    import machine

    started = time.perf_counter()
    info = machine.machine_info()
    print(f"{info['cpu']['model']}, {info['cpu']['cores']} CPUs, torch {info['torch']}; mode {mode}", flush=True)
    names = [n for n in CASES if not args.only or any(o in n for o in args.only)]
    rows = []
    for name in names:
        rows.append(run_case(name, mode, settings))
        print_row(rows[-1])
    comp = None
    if not args.no_compile_times:
        comp = compile_times(mode)
        print_compile(comp)
    results = dict(mode=mode, settings=settings, machine=info, cases=rows, compile=comp,
                   wall_s=time.perf_counter() - started, load_average_end=[round(x, 2) for x in os.getloadavg()])
    json_path = os.path.join(args.out or HERE, "compile_results.json")
    doc_path = os.path.join(args.out or os.path.join(ROOT, "docs"), "compile-performance.md")
    os.makedirs(os.path.dirname(json_path), exist_ok=True)
    os.makedirs(os.path.dirname(doc_path), exist_ok=True)
    with open(json_path, "w") as f:
        json.dump(results, f, indent=1)
    with open(doc_path, "w") as f:
        f.write(markdown(results))
    print(f"wrote {json_path}, {doc_path}; {results['wall_s']:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
