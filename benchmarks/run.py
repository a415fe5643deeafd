"""`make bench`: every case of benchmarks/cases.py on neuron and on PyTorch's
CPU eager backend, in one process, interleaved (cpu, neuron, cpu, neuron,
...), after a warm-up; medians and spread per device; ratio = neuron time /
CPU time (below 1.0: neuron is faster). The machine's limits (triad
bandwidth, peak FP32/BF16) are measured in the same run and each case is
also reported as a fraction of its limit. A few cases run again in
subprocesses on 1 and 2 threads (thread scaling).

    .venv/bin/python benchmarks/run.py [--quick | --smoke] [--out DIR] [--only SUBSTRING ...]

Writes benchmarks/results.json, docs/performance.md and docs/perf/*.png
(with --out DIR: DIR/results.json, DIR/performance.md, DIR/perf/). A case
that raises is an error row, never the end of the suite. Timing never
decides pass/fail: this is a report.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

import torch_neuronx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases as case_table  # noqa: E402
import machine  # noqa: E402
import report  # noqa: E402

BENCH = os.path.dirname(os.path.abspath(__file__))
DEVICES = ("cpu", "neuron")

# repeats: interleaved samples per device; sample_s: how long one sample
# lasts at least (short calls are repeated inside it); warmup: calls first;
# budget_s: after this long on one case, stop at the end of a round (QUICK's
# bound on the slow cases when the host is busy; None: always all repeats).
SETTINGS = {
    "full": dict(repeats=9, sample_s=0.05, warmup=2, budget_s=None),
    "quick": dict(repeats=3, sample_s=0.01, warmup=1, budget_s=4.0),
    "smoke": dict(repeats=1, sample_s=0.0, warmup=1, budget_s=None),
}
# Idle time before every sample. PyTorch's OpenMP threads (libgomp) keep
# spinning for about 10 ms after each parallel region (measured here from
# the threads' CPU time after a matmul); without a pause they hold the
# cores during the neuron sample that follows a CPU one (16M-element add
# 8.3 ms against 5.8 with OMP_WAIT_POLICY=passive, 1-2 calls a sample). A
# program using one device never sees that, so neither should its
# comparison. The runtime's own threads spin for at most 50 us.
SETTLE_S = 0.025


def describe(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


def measure(calls: dict, repeats: int, sample_s: float, warmup: int,
            budget_s: float | None = None) -> tuple[dict, dict]:
    """Times each device's call: `warmup` calls, then the number of calls per
    sample that makes a sample last `sample_s`, then `repeats` samples per
    device, the devices taking turns (fewer once `budget_s` is spent, but at
    least one). Every sample ends with the device's synchronize. Returns
    ({device: statistics}, {device: error message}); a device whose call
    raises is dropped from the rest of the measurement."""
    started = time.perf_counter()
    calls, errors, inner, samples = dict(calls), {}, {}, {dev: [] for dev in calls}

    def timed(dev: str, n: int) -> float | None:
        time.sleep(SETTLE_S)
        try:
            t0 = time.perf_counter()
            for _ in range(n):
                calls[dev]()
            case_table.sync(dev)
            return time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001 - any failure is a row in the report
            errors[dev] = describe(e)
            del calls[dev]
            return None

    for dev in list(calls):
        t = None
        for _ in range(max(1, warmup)):
            t = timed(dev, 1)
            if t is None:
                break
        n = 1
        # Grow the calls per sample until a sample lasts sample_s; at most 16x
        # a step, since one cold call says little about the next thousand.
        while t is not None and t < sample_s and n < 1 << 20:
            n = min(16 * n, max(2 * n, math.ceil(n * sample_s / max(t, 1e-9))))
            t = timed(dev, n)
        inner[dev] = n
    for round_ in range(repeats):
        if round_ and budget_s is not None and time.perf_counter() - started > budget_s:
            break
        for dev in list(calls):
            t = timed(dev, inner[dev])
            if t is not None:
                samples[dev].append(t / inner[dev])
    stats = {}
    for dev, ts in samples.items():
        if ts and dev not in errors:
            q = statistics.quantiles(ts, n=4, method="inclusive") if len(ts) > 1 else [ts[0]] * 3
            stats[dev] = dict(median_s=statistics.median(ts), q1_s=q[0], q3_s=q[2], min_s=min(ts), max_s=max(ts),
                              samples=len(ts), calls_per_sample=inner[dev])
    return stats, errors


def rate(work: float, seconds: float | None, limit: str | None) -> float | None:
    """GB/s for bandwidth cases, GFLOP/s for FLOP cases."""
    if not work or not limit or not seconds:
        return None
    return work / seconds / 1e9


def run_case(case: case_table.Case, settings: dict, limits: dict | None = None) -> dict:
    started = time.perf_counter()
    row = dict(name=case.name, family=case.family, shape=case.shape, limit=case.limit, work=case.work,
               series=case.series, x=case.x, error={}, fallbacks={})
    torch_neuronx.clear_op_tracking()
    calls = {}
    for dev in DEVICES:
        try:
            calls[dev] = case.make(dev)
        except Exception as e:  # noqa: BLE001
            row["error"][dev] = describe(e)
    stats, errors = measure(calls, **settings)
    row["error"].update(errors)
    row["fallbacks"] = torch_neuronx.get_fallback_counts()
    for dev in DEVICES:
        row[dev] = stats.get(dev)
        seconds = stats[dev]["median_s"] if dev in stats else None
        row[f"{dev}_rate"] = rate(case.work, seconds, case.limit)
    set_fractions(row, limits)
    both = all(row[dev] for dev in DEVICES)
    row["ratio"] = row["neuron"]["median_s"] / row["cpu"]["median_s"] if both else None
    del calls
    try:  # an asynchronous failure may still be pending on the stream
        torch.neuron.synchronize()
    except Exception as e:  # noqa: BLE001
        row["error"].setdefault("neuron", describe(e))
    torch.neuron.empty_cache()
    row["wall_s"] = time.perf_counter() - started
    return row


def set_fractions(row: dict, limits: dict | None) -> None:
    """Each device's rate as a fraction of the case's limit (None without one)."""
    ceiling = report.ceiling(row["limit"], limits)
    for dev in DEVICES:
        rate_ = row[f"{dev}_rate"]
        row[f"{dev}_fraction"] = rate_ / ceiling if rate_ and ceiling else None


def print_row(row: dict) -> None:
    def ms(dev):
        return f"{row[dev]['median_s'] * 1e3:10.4g}" if row[dev] else f"{'-':>10}"
    ratio = f"{row['ratio']:6.2f}" if row["ratio"] else "     -"
    frac = f"  {100 * row['neuron_fraction']:4.0f}% of {row['limit']}" if row["neuron_fraction"] else ""
    err = f"  ERROR {row['error']}" if row["error"] else ""
    fb = f"  fallbacks {sorted(row['fallbacks'])}" if row["fallbacks"] else ""
    print(f"  {row['name'][:46]:<46} {ms('neuron')} {ms('cpu')} ms {ratio}{frac}{err}{fb}  [{row['wall_s']:.1f} s]",
          flush=True)


def selected(cases: list, only: list[str] | None, exact: bool) -> list:
    """The cases named by --only (substrings of names, or whole names with --exact)."""
    if not only:
        return cases
    return [c for c in cases if any(w == c.name if exact else w in c.name for w in only)]


def run_cases(cases: list, settings: dict, limits: dict | None, verbose: bool = True) -> list[dict]:
    rows, family = [], None
    for case in cases:
        if case.family != family:
            case_table.clear_inputs()
            gc.collect()  # models and autograd graphs may hold cycles; once per family is enough
            family = case.family
            if verbose:
                print(f"{family}  (neuron ms, CPU ms, ratio)", flush=True)
        rows.append(run_case(case, settings, limits))
        if verbose:
            print_row(rows[-1])
    case_table.clear_inputs()
    return rows


def thread_scaling(mode: str, threads: list[int]) -> dict:
    """The THREAD_SCALING cases, each thread count in a fresh process (the
    kernel pool's size is read once at start-up): {threads: {case: row}}."""
    names = [c.name for c in case_table.all_cases(case_table.Scale(mode)) if c.name in case_table.THREAD_SCALING]
    out = {}
    for n in threads:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "rows.json")
            env = dict(os.environ, TORCH_NEURONX_KERNEL_THREADS=str(n))
            cmd = [sys.executable, os.path.abspath(__file__), f"--{mode}", "--threads", str(n), "--rows-out", path,
                   "--exact", *[arg for name in names for arg in ("--only", name)]]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
            if proc.returncode != 0 or not os.path.exists(path):
                print(f"  thread scaling on {n} threads failed: {proc.stderr.strip()[-500:]}")
                out[str(n)] = {}
                continue
            with open(path) as f:
                out[str(n)] = {row["name"]: row for row in json.load(f)}
        for name, row in out[str(n)].items():
            neuron = row["neuron"]["median_s"] * 1e3 if row["neuron"] else float("nan")
            cpu = row["cpu"]["median_s"] * 1e3 if row["cpu"] else float("nan")
            print(f"  {n} thread(s): {name:<30} neuron {neuron:9.4g} ms  CPU {cpu:9.4g} ms", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_const", dest="mode", const="full", help="the issue's sizes (default)")
    size.add_argument("--quick", action="store_const", dest="mode", const="quick",
                      help="fewer repeats and sizes, under 3 minutes")
    size.add_argument("--smoke", action="store_const", dest="mode", const="smoke",
                      help="every case family once at tiny sizes (the test)")
    ap.add_argument("--out", help="directory for results.json, performance.md and perf/ (default: the repo's)")
    ap.add_argument("--only", action="append", help="run the cases whose names contain this (repeatable)")
    ap.add_argument("--exact", action="store_true", help="--only gives whole case names")
    ap.add_argument("--threads", type=int, help=argparse.SUPPRESS)   # thread-scaling subprocess
    ap.add_argument("--rows-out", help=argparse.SUPPRESS)            # ... writes its rows here
    args = ap.parse_args(argv)
    mode = args.mode or "full"
    settings = SETTINGS[mode]
    torch.set_num_threads(args.threads or os.cpu_count() or 1)

    cases = selected(case_table.all_cases(case_table.Scale(mode)), args.only, args.exact)

    if args.rows_out:  # a thread-scaling subprocess: rows only, no limits, no report
        rows = run_cases(cases, settings, None, verbose=False)
        with open(args.rows_out, "w") as f:
            json.dump(rows, f)
        return 0

    started = time.perf_counter()
    info = machine.machine_info()
    print(f"{info['cpu']['model']}, {info['cpu']['cores']} CPUs, torch {info['torch']}, "
          f"{info['torch_threads']} threads; mode {mode}", flush=True)
    def show(limits):
        print(f"triad {limits['triad_gbs']} GB/s, peak fp32 {limits['peak_fp32_gflops']} GFLOP/s, "
              f"bf16 {limits['peak_bf16_gflops'] or 'n/a'} GFLOP/s", flush=True)

    first = machine.limits(mode)
    show(first)
    rows = run_cases(cases, settings, first)
    threads = sorted({1, min(2, os.cpu_count() or 1)})
    print("thread scaling", flush=True)
    scaling = thread_scaling(mode, threads) if not args.only else {}
    # The limits again: on a shared host either measurement may have been
    # squeezed, and a limit is what the machine can do, so each is the better one.
    limits = machine.best_limits(first, machine.limits(mode))
    show(limits)
    for row in rows:
        set_fractions(row, limits)

    out_dir = args.out
    results = dict(mode=mode, command=" ".join(["benchmarks/run.py", *(argv if argv is not None else sys.argv[1:])]),
                   settings=settings, machine=info, limits=limits, results=rows, thread_scaling=scaling,
                   wall_s=time.perf_counter() - started, load_average_end=[round(x, 2) for x in os.getloadavg()])
    json_path = os.path.join(out_dir, "results.json") if out_dir else os.path.join(BENCH, "results.json")
    doc_path = os.path.join(out_dir, "performance.md") if out_dir else os.path.join(machine.ROOT, "docs",
                                                                                     "performance.md")
    os.makedirs(os.path.dirname(json_path), exist_ok=True)
    report.write(results, doc_path, os.path.join(os.path.dirname(doc_path), "perf"))
    results["wall_s"] = time.perf_counter() - started
    with open(json_path, "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {json_path}, {doc_path}; {results['wall_s']:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
