"""docs/performance.md and docs/perf/*.png from the results of benchmarks/run.py:
the machine, one table per case family, the targets of issue 12 section 3
(met or missed, computed from the same results) and four plots."""
from __future__ import annotations

import os

import cases as case_table

LIMIT_NAMES = {"bw": "triad", "fp32": "fp32 peak", "bf16": "bf16 peak"}
PLOTS = [
    ("gemm.png", "GEMM GFLOP/s against size (square, neuron and CPU, with the measured peaks)"),
    ("bandwidth.png", "Bandwidth against working-set size (triad, and add on neuron and CPU)"),
    ("batch.png", "Training-step time against batch size (small GPT: 4 layers, 256 wide, 128 tokens)"),
    ("threads.png", "Thread scaling: speedup from 1 to 2 threads (kernel threads and torch threads)"),
]


def ceiling(limit: str | None, limits: dict | None) -> float | None:
    """The machine limit a case's rate is divided by (GB/s or GFLOP/s)."""
    if not limits or not limit:
        return None
    return {"bw": limits.get("triad_gbs"), "fp32": limits.get("peak_fp32_gflops"),
            "bf16": limits.get("peak_bf16_gflops")}.get(limit)


def ok(row: dict) -> bool:
    return bool(row.get("ratio")) and not row.get("error")


# ---- targets (issue 12, section 3) ---------------------------------------------

def _target(text: str, checked: list[tuple[str, bool, str]]) -> dict:
    """One target from (case, met, value) triples; no triples: n/a."""
    missed = [(name, value) for name, met, value in checked if not met]
    status = "n/a" if not checked else ("met" if not missed else "missed")
    return dict(target=text, status=status, checked=len(checked), missed=[f"{n} ({v})" for n, v in missed])


def targets(rows: list[dict]) -> list[dict]:
    timed = [r for r in rows if ok(r)]
    by_name = {r["name"]: r for r in timed}
    out = []

    checked = [(r["name"], r["ratio"] <= 1.0, f"{r['ratio']:.2f}") for r in timed]
    checked += [(r["name"], False, "error") for r in rows if r.get("error")]
    out.append(_target("Every case at least as fast as PyTorch CPU eager (ratio <= 1.0)", checked))

    models = [r for r in timed if r["family"] == case_table.MODELS]
    out.append(_target("Model steps >= 1.15x faster than PyTorch CPU eager (ratio <= 0.87), float32 and bfloat16",
                       [(r["name"], r["ratio"] <= 0.87, f"{r['ratio']:.2f}") for r in models]))

    def fraction(r):
        return r.get("neuron_fraction") or 0.0

    square = [r for r in timed if r["family"] == case_table.GEMM_SQUARE and r["limit"] == "fp32" and r["x"] >= 1024]
    out.append(_target("GEMM float32 >= 85% of the measured peak on square sizes >= 1024",
                       [(r["name"], fraction(r) >= 0.85, f"{100 * fraction(r):.0f}%") for r in square]))
    gpt2 = [r for r in timed if r["family"] == case_table.GEMM_GPT2 and r["limit"] == "fp32"]
    out.append(_target("GEMM float32 >= 75% of the measured peak on every transformer shape",
                       [(r["name"], fraction(r) >= 0.75, f"{100 * fraction(r):.0f}%") for r in gpt2]))

    pairs = []
    for r in timed:
        if r["family"] in (case_table.GEMM_SQUARE, case_table.GEMM_GPT2, case_table.BMM) and r["limit"] == "bf16":
            f32 = by_name.get(r["name"].replace("bf16", "f32"))
            if f32 and f32.get("neuron_rate") and r.get("neuron_rate"):
                speedup = r["neuron_rate"] / f32["neuron_rate"]
                pairs.append((r["name"], speedup >= 1.7, f"{speedup:.2f}x"))
    out.append(_target("GEMM bfloat16 >= 1.7x our float32 rate", pairs))

    bw = [r for r in timed if r["family"] in (case_table.ELEMENTWISE, case_table.REDUCTIONS) and r["limit"] == "bw"]
    out.append(_target("Elementwise and reductions >= 90% of the triad bandwidth at 16M elements",
                       [(r["name"], fraction(r) >= 0.9, f"{100 * fraction(r):.0f}%") for r in bw]))

    add = [r for r in timed if r["name"] == "add, 1 element"]
    out.append(_target("Dispatch: a 1-element add no slower than PyTorch CPU eager's",
                       [(r["name"], r["ratio"] <= 1.0, f"{r['ratio']:.2f}") for r in add]))
    return out


# ---- plots ------------------------------------------------------------------------

def _series(rows: list[dict], series: str) -> list[dict]:
    return sorted((r for r in rows if r.get("series") == series and ok(r)), key=lambda r: r["x"])


def plots(results: dict, plot_dir: str) -> list[str]:
    """Writes the PNGs; returns the file names written (none without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    os.makedirs(plot_dir, exist_ok=True)
    rows, limits, written = results["results"], results.get("limits") or {}, []

    def save(fig, ax, name, title, has_data):
        """Writes the figure if its series have points (a run with --only may have none)."""
        if has_data:
            ax.set_title(title, fontsize=10)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
            fig.tight_layout()
            fig.savefig(os.path.join(plot_dir, name), dpi=110)
            written.append(name)
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.2))
    gemm = {dtype: _series(rows, f"mm {dtype}") for dtype in ("f32", "bf16")}
    for (dtype, pts), color in zip(gemm.items(), ("tab:blue", "tab:orange")):
        xs = [r["x"] for r in pts]
        ax.plot(xs, [r["neuron_rate"] for r in pts], "o-", color=color, label=f"neuron {dtype}")
        ax.plot(xs, [r["cpu_rate"] for r in pts], "s--", color=color, alpha=0.6, label=f"CPU {dtype}")
    for key, dtype, color in (("peak_fp32_gflops", "fp32", "tab:blue"), ("peak_bf16_gflops", "bf16", "tab:orange")):
        if limits.get(key):
            ax.axhline(limits[key], color=color, linestyle=":", label=f"measured {dtype} peak")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n (n x n @ n x n)")
    ax.set_ylabel("GFLOP/s")
    save(fig, ax, "gemm.png", "GEMM, square", any(gemm.values()))

    fig, ax = plt.subplots(figsize=(7, 4.2))
    triad = limits.get("triad") or {}
    pts = sorted([(p["bytes"], p["gbs"]) for p in triad.get("sweep", [])] +
                 ([(triad["bytes"], triad["gbs"])] if triad.get("bytes") else []))
    ax.plot([p[0] for p in pts], [p[1] for p in pts], "k^-", label="triad (STREAM, float64)")
    add = _series(rows, "add f32")
    ax.plot([r["x"] for r in add], [r["neuron_rate"] for r in add], "o-", label="add f32, neuron")
    ax.plot([r["x"] for r in add], [r["cpu_rate"] for r in add], "s--", label="add f32, CPU")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes moved per pass (working set)")
    ax.set_ylabel("GB/s")
    save(fig, ax, "bandwidth.png", "Bandwidth against size", bool(pts or add))

    fig, ax = plt.subplots(figsize=(7, 4.2))
    steps = _series(rows, "small GPT step")
    ax.plot([r["x"] for r in steps], [r["neuron"]["median_s"] * 1e3 for r in steps], "o-", label="neuron")
    ax.plot([r["x"] for r in steps], [r["cpu"]["median_s"] * 1e3 for r in steps], "s--", label="CPU")
    ax.set_xlabel("batch (x 128 tokens)")
    ax.set_ylabel("ms per training step")
    save(fig, ax, "batch.png", "Small GPT training step against batch size", bool(steps))

    fig, ax = plt.subplots(figsize=(7, 4.2))
    speedups = thread_speedups(results)
    names = list(speedups)
    width = 0.38
    for i, dev in enumerate(("neuron", "cpu")):
        ax.bar([k + (i - 0.5) * width for k in range(len(names))], [speedups[n][dev] or 0 for n in names], width,
               label="neuron" if dev == "neuron" else "CPU")
    ax.axhline(2.0, color="gray", linestyle=":", label="ideal (2x)")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=15, fontsize=7)
    ax.set_ylabel("time on 1 thread / time on 2 threads")
    save(fig, ax, "threads.png", "Thread scaling, 1 to 2 threads", bool(names))
    return written


def thread_speedups(results: dict) -> dict:
    """{case: {"neuron": t1 / t2, "cpu": t1 / t2}} from the subprocess runs."""
    scaling = results.get("thread_scaling") or {}
    one, two = scaling.get("1") or {}, scaling.get("2") or {}
    out = {}
    for name in one:
        out[name] = {}
        for dev in ("neuron", "cpu"):
            a, b = (one[name].get(dev) or {}), ((two.get(name) or {}).get(dev) or {})
            out[name][dev] = a["median_s"] / b["median_s"] if a.get("median_s") and b.get("median_s") else None
    return out


# ---- markdown ---------------------------------------------------------------------

def _num(ms: float) -> str:
    return f"{ms:.0f}" if ms >= 1000 else f"{ms:.3g}"


def _ms(stats: dict | None) -> str:
    if not stats:
        return "-"
    if stats["samples"] == 1:
        return _num(stats["median_s"] * 1e3)
    return f"{_num(stats['median_s'] * 1e3)} ({_num(stats['min_s'] * 1e3)}-{_num(stats['max_s'] * 1e3)})"


def _rate(row: dict) -> str:
    value = row.get("neuron_rate")
    if value is None:
        return ""
    return f"{value:.1f} {'GB/s' if row['limit'] == 'bw' else 'GFLOP/s'}"


def _fraction(row: dict) -> str:
    n, c = row.get("neuron_fraction"), row.get("cpu_fraction")
    if n is None and c is None:
        return ""
    pct = lambda v: f"{100 * v:.0f}%" if v is not None else "-"  # noqa: E731
    return f"{pct(n)} / {pct(c)} {LIMIT_NAMES[row['limit']]}"


def _notes(row: dict) -> str:
    notes = [f"**error** ({dev}): {msg}".replace("|", "\\|") for dev, msg in (row.get("error") or {}).items()]
    if row.get("fallbacks"):
        notes.append("fallbacks: " + ", ".join(f"{op} x{n}" for op, n in sorted(row["fallbacks"].items())))
    return "; ".join(notes)


# The profiles behind the misses: written by hand from the commands they
# quote (benchmarks/misses.md), kept beside the code so that a rerun of the
# report carries them; each names the run it was checked against.
MISSES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "misses.md")


def misses_section(results: dict) -> list[str]:
    if results["mode"] == "smoke":
        return ["(The profiles behind the misses are in benchmarks/misses.md; a smoke run has no misses to explain.)"]
    try:
        with open(MISSES) as f:
            return f.read().rstrip().splitlines()
    except OSError:
        return ["**No profiles**: benchmarks/misses.md is missing, so the misses above are unexplained."]


def markdown(results: dict, plot_names: list[str]) -> str:
    info, limits, rows = results["machine"], results.get("limits") or {}, results["results"]
    mode = results["mode"]
    command = {"quick": "make bench QUICK=1", "smoke": "benchmarks/run.py --smoke"}.get(mode, "make bench")
    cpu = info["cpu"]
    peak = limits.get("peak") or {}
    fp32 = peak.get("fp32") or {}
    bf16 = peak.get("bf16")
    lines = [
        "# Performance: neuron against PyTorch CPU eager",
        "",
        f"Generated by `{command}` (`{results['command']}`) on {info['date']}, commit {info.get('commit')}; "
        f"the run took {results.get('wall_s', 0):.0f} s. Load average (other work on the host, 1/5/15 min) at "
        f"the start {info.get('load_average')}, at the end {results.get('load_average_end')}. "
        "Do not edit: rerun the command.",
    ]
    load = max((info.get("load_average") or [0])[0], (results.get("load_average_end") or [0])[0])
    if load > 0.5 * (cpu["cores"] or 1):
        lines += ["", f"**The host was busy during this run** (load average up to {load:.1f} on {cpu['cores']} CPUs): "
                      "PyTorch's CPU backend, whose OpenMP regions wait for every thread, loses most when other "
                      "processes hold cores, so CPU times (and ratios below 1.0) are less trustworthy than usual; "
                      "rerun on an idle host before drawing conclusions."]
    if mode == "quick":
        lines += ["", f"**This is a QUICK run**: {results['settings']['repeats']} interleaved samples per device "
                      f"(fewer once a case has run {results['settings']['budget_s']:.0f} s, at least one), "
                      "smaller sizes where the shape column says so (AdamW over 10M parameters, GPT-2 GEMMs at 256 "
                      "tokens, convolutions at batch 4, model steps at smaller batches, no 4096 GEMM). "
                      "`make bench` runs the issue's full sizes."]
    elif mode == "smoke":
        lines += ["", "**This is a SMOKE run** (the test's): tiny sizes and one sample per device, to check that "
                      "every case runs; its numbers mean nothing."]
    lines += [
        "",
        "Every case runs on neuron and on PyTorch's CPU backend in the same process, the two taking turns "
        "(cpu, neuron, cpu, neuron, ...) after a warm-up; each sample ends with `torch.neuron.synchronize()`. "
        "Times are medians in ms, with the range of the samples in parentheses. **ratio = neuron time / CPU "
        "time**: below 1.0, neuron is faster. *of limit* is the achieved rate over the machine's limit measured "
        "in this run (neuron / CPU): bandwidth-bound cases over the triad bandwidth (bytes = each input read "
        "once, each output written once), FLOP-bound ones over the peak of their dtype. The machine is shared, "
        "so single numbers are noisy; look at ratios and trends.",
        "",
        "Compiled code (`torch.compile(backend=\"neuron\")` against eager, CPU eager and Inductor) is measured by "
        "the same `make bench` in [compile-performance.md](compile-performance.md).",
        "",
        "## Machine",
        "",
        f"- CPU: {cpu['model']}, {cpu['cores']} logical CPUs; flags: {', '.join(cpu['flags'])}",
        f"- torch {info['torch']} ({info['torch_threads']} threads), neuron device: {info['neuron_device']}, "
        f"kernel threads: {info.get('kernel_threads_env') or 'default (online CPUs)'}",
        "- limits, measured at the start and at the end of the run (the higher of the two, since a busy host "
        "squeezes either):",
        f"  - triad bandwidth: {limits.get('triad_gbs') or 'n/a'} GB/s (build/triad, every core, "
        f"{(limits.get('triad') or {}).get('bytes', 0) / 2 ** 20:.0f} MiB working set)",
        f"  - peak fp32: {fp32.get('gflops', 'n/a')} GFLOP/s on {peak.get('threads', '?')} threads, "
        f"{fp32.get('gflops_1t', 'n/a')} on 1 ({fp32.get('isa', 'n/a')} FMA, build/peak)",
        "  - peak bf16: " + (f"{bf16['gflops']} GFLOP/s on {peak.get('threads')} threads, {bf16['gflops_1t']} on 1 "
                           f"({bf16['isa']} vdpbf16ps)" if isinstance(bf16, dict) else "n/a (no AVX512_BF16)"),
        "",
        "## Targets (issue 12, section 3)",
        "",
    ]
    for t in targets(rows):
        detail = f"{t['checked']} case(s) checked"
        if t["missed"]:
            shown = t["missed"][:12]
            more = f", and {len(t['missed']) - len(shown)} more" if len(t["missed"]) > len(shown) else ""
            detail += f", {len(t['missed'])} missed: " + "; ".join(shown) + more
        lines.append(f"- **{t['status']}**: {t['target']}. {detail}.")
    lines += ["", *misses_section(results), ""]

    lines += ["## Results", ""]
    family = None
    for row in rows:
        if row["family"] != family:
            family = row["family"]
            lines += ["", f"### {family}", "",
                      "| case | shape | neuron ms | CPU ms | ratio | neuron rate | of limit (neuron / CPU) | notes |",
                      "|---|---|---:|---:|---:|---:|---|---|"]
        ratio = f"{row['ratio']:.2f}" if row.get("ratio") else "-"
        lines.append(f"| {row['name']} | {row['shape']} | {_ms(row.get('neuron'))} | {_ms(row.get('cpu'))} | "
                     f"{ratio} | {_rate(row)} | {_fraction(row)} | {_notes(row)} |")

    speedups = thread_speedups(results)
    if speedups:
        scaling = results["thread_scaling"]
        lines += ["", "### thread scaling (fresh process per thread count: TORCH_NEURONX_KERNEL_THREADS and "
                      "torch.set_num_threads)", "",
                  "| case | neuron 1 thread | neuron 2 threads | neuron speedup | CPU 1 thread | CPU 2 threads | "
                  "CPU speedup |", "|---|---:|---:|---:|---:|---:|---:|"]
        for name, sp in speedups.items():
            cells = []
            for dev in ("neuron", "cpu"):
                cells += [_ms(scaling["1"][name].get(dev)), _ms((scaling.get("2", {}).get(name) or {}).get(dev)),
                          f"{sp[dev]:.2f}x" if sp[dev] else "-"]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")

    errors = [r for r in rows if r.get("error")]
    fallbacks = sorted({op for r in rows for op in (r.get("fallbacks") or {})})
    lines += ["", "## Errors and CPU fallbacks", "",
              f"- cases that raised: {len(errors)}" + ("" if not errors else ": " + "; ".join(
                  f"{r['name']} ({', '.join(r['error'])})" for r in errors)),
              "- ops that ran through the CPU fallback during the neuron runs: " + (", ".join(fallbacks) or "none")]

    if plot_names:
        lines += ["", "## Plots", ""]
        for name, caption in PLOTS:
            if name in plot_names:
                lines += [f"{caption}:", "", f"![{caption}](perf/{name})", ""]
    return "\n".join(lines).rstrip() + "\n"


def write(results: dict, doc_path: str, plot_dir: str) -> None:
    names = plots(results, plot_dir)
    os.makedirs(os.path.dirname(doc_path) or ".", exist_ok=True)
    with open(doc_path, "w") as f:
        f.write(markdown(results, names))
