"""Generates docs/op-support.md and docs/op-support.json from the results of
the OpInfo conformance sweep (build/conformance/full.jsonl, written by
tests/conformance/opinfo_sweep.py --full) and the known-gaps list
(tests/conformance/known_gaps.py).

  python tools/gen_op_support.py [results.jsonl]

Re-running it after editing known_gaps.py refreshes the reasons without
running the sweep again. Without build/conformance/full.jsonl it reuses the
OpInfo records already in docs/op-support.json.

The document also holds the ModuleInfo sweep (tests/conformance/moduleinfo_sweep.py,
results in build/conformance/modules/full.jsonl, JSON key "modules") and the
training-utilities table (tests/conformance/utilities_sweep.py,
build/conformance/utilities/full.jsonl, key "utilities"); each comes from its
last results file, or else from the previous docs/op-support.json.
"""
from __future__ import annotations

import json
import os
import sys
from collections import Counter, defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "conformance"))

import known_gaps  # noqa: E402
from opinfo_sweep import DTYPE_NAMES, NONDETERMINISTIC, TOLERANCES  # noqa: E402

STATUSES = ["native-pass", "fallback-pass", "mismatch", "error", "crash", "skipped-cpu"]
BAD = ("mismatch", "error", "crash")
CELL = {"native-pass": "native", "fallback-pass": "fallback", "mismatch": "**MISMATCH**", "error": "**ERROR**",
        "crash": "**CRASH**", "skipped-cpu": "skip-cpu", "skipped": "skipped"}


def fuzz_allowances() -> list:
    """The fuzzer's allowance groups (tools/fuzz/allowances.py)."""
    sys.path.insert(0, os.path.join(ROOT, "tools", "fuzz"))
    try:
        from allowances import ALLOWANCES
    finally:
        sys.path.pop(0)
    return ALLOWANCES


def _key(r: dict) -> str:
    return r["op"] + ("." + r["variant"] if r["variant"] else "")


def gap_key(r: dict) -> str | None:
    """The known-gaps entry for a record: "name.variant@dtype", "name@dtype",
    "name.variant", "name", most specific first."""
    for k in (f"{_key(r)}@{r['dtype']}", f"{r['op']}@{r['dtype']}", _key(r), r["op"]):
        if k in known_gaps.KNOWN_GAPS:
            return k
    return None


def gap_for(r: dict) -> str | None:
    k = gap_key(r)
    return known_gaps.KNOWN_GAPS[k] if k else None


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def load(results_path: str) -> list[dict]:
    by_task: dict[tuple, dict] = {}
    with open(results_path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                by_task[(_key(r), r["dtype"])] = r  # a rerun of a task replaces it
    return list(by_task.values())


def summarize(records: list[dict]) -> dict:
    by_dtype: dict[str, Counter] = {d: Counter() for d in DTYPE_NAMES}
    total: Counter = Counter()
    for r in records:
        by_dtype.setdefault(r["dtype"], Counter())[r["status"]] += 1
        total[r["status"]] += 1
    out = {"by_status": {s: total.get(s, 0) for s in STATUSES}, "by_dtype": {}}
    for d, c in by_dtype.items():
        tested = sum(c.values()) - c.get("skipped-cpu", 0)
        out["by_dtype"][d] = {s: c.get(s, 0) for s in STATUSES}
        out["by_dtype"][d]["tested"] = tested
        out["by_dtype"][d]["native_pass_rate"] = round(c.get("native-pass", 0) / tested, 4) if tested else None
        out["by_dtype"][d]["pass_rate"] = (round((c.get("native-pass", 0) + c.get("fallback-pass", 0)) / tested, 4)
                                          if tested else None)
    return out


def _native_ops() -> list[str]:
    import torch  # noqa: F401  (autoloads the backend)
    import torch_neuronx

    return torch_neuronx.native_ops()


def _previous_doc(json_path: str) -> dict:
    try:
        with open(json_path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def generate_from_last(md_path: str | None = None, json_path: str | None = None) -> None:
    """Regenerates both documents from the last results of every sweep:
    build/conformance/full.jsonl for OpInfo if present, else the records in
    docs/op-support.json (and likewise for the ModuleInfo and utilities sweeps)."""
    path = os.path.join(ROOT, "build", "conformance", "full.jsonl")
    if os.path.exists(path):
        generate(path, md_path=md_path, json_path=json_path)
        return
    json_path = json_path or os.path.join(ROOT, "docs", "op-support.json")
    prev = _previous_doc(json_path)
    if not prev.get("records"):
        raise SystemExit("no OpInfo results: run `make conformance` (tests/conformance/opinfo_sweep.py --full)")
    # The native-op list stays the one the OpInfo records were measured with.
    generate(None, meta=prev.get("sweep", {}), md_path=md_path, json_path=json_path, records=prev["records"],
             native=prev.get("native_ops"))


def generate(results_path: str | None, meta: dict | None = None, md_path: str | None = None,
             json_path: str | None = None, records: list[dict] | None = None,
             native: list[str] | None = None) -> None:
    md_path = md_path or os.path.join(ROOT, "docs", "op-support.md")
    json_path = json_path or os.path.join(ROOT, "docs", "op-support.json")
    if meta is None:
        mp = results_path[: -len(".jsonl")] + ".meta.json"
        meta = json.load(open(mp)) if os.path.exists(mp) else {}
    if records is None:
        records = load(results_path)
    prev = _previous_doc(json_path)
    extras = {name: extra_section(name, prev) for name in EXTRA_SWEEPS}
    import torch

    torch_version = torch.__version__
    native = native if native is not None else _native_ops()
    summary = summarize(records)

    rows: dict[str, dict[str, dict]] = defaultdict(dict)
    order: list[str] = []
    for r in records:
        k = _key(r)
        if k not in rows:
            order.append(k)
        rows[k][r["dtype"]] = r
    order.sort()

    # ---- JSON ----
    jrecords = []
    for k in order:
        for d in DTYPE_NAMES:
            r = rows[k].get(d)
            if r is None:
                continue
            jr = {"op": r["op"], "variant": r["variant"], "dtype": d, "status": r["status"],
                  "reason": r.get("reason", ""), "fallback_ops": r.get("fallback_ops", [])}
            for extra in ("max_abs_diff", "failed_samples", "problems", "cpu_less_accurate"):
                if r.get(extra) not in (None, "", []):
                    jr[extra] = r[extra][:2] if isinstance(r[extra], list) else r[extra]
            g = gap_key(r)
            if g:
                jr["known_gap"] = g  # key into "known_gaps"
            jrecords.append(jr)
    doc = {
        "generated_by": "tools/gen_op_support.py from tests/conformance/opinfo_sweep.py --full",
        "torch_version": torch_version,
        "sweep": meta,
        "tolerances": {d: {"rtol": t[0], "atol": t[1]} for d, t in TOLERANCES.items()},
        "summary": summary,
        "known_gaps": dict(sorted(known_gaps.KNOWN_GAPS.items())),
        "records": jrecords,
        **{name: ex for name, ex in extras.items() if ex},
        "native_ops": native,
    }
    with open(json_path, "w") as f:
        # One record per line: small diffs between sweeps, greppable.
        head = {k: v for k, v in doc.items() if k not in ("records", "native_ops", *EXTRA_SWEEPS)}
        head["sweep"] = json.loads(json.dumps(head["sweep"], default=str))
        text = json.dumps(head, indent=1, default=str)[:-2]
        f.write(text + ',\n "records": [\n')
        f.write(",\n".join("  " + json.dumps(r, default=str) for r in doc["records"]))
        f.write("\n ]")
        for name in EXTRA_SWEEPS:
            if doc.get(name):
                ex = doc[name]
                sub = json.dumps({k: v for k, v in ex.items() if k != "records"}, indent=1, default=str)[:-2]
                f.write(f',\n "{name}": ' + sub.replace("\n", "\n ") + ',\n  "records": [\n')
                f.write(",\n".join("   " + json.dumps(r, default=str) for r in ex["records"]))
                f.write("\n  ]\n }")
        f.write(',\n "native_ops": ' + json.dumps(doc["native_ops"]) + "\n}\n")

    # ---- Markdown ----
    L: list[str] = []
    w = L.append
    w("# Operator support")
    w("")
    w("<!-- Generated by tools/gen_op_support.py from the OpInfo sweep; do not edit by hand. -->")
    w("")
    w("Every OpInfo in PyTorch's `op_db` (torch " + torch_version + ") is run on the CPU (the reference) "
      "and on `neuron` for each dtype the OpInfo supports on the CPU among "
      + ", ".join(f"`{d}`" for d in DTYPE_NAMES) + f": up to {meta.get('max_samples', 8)} sample inputs (spread evenly over the first 256 the OpInfo generates), "
      "forward, and for differentiable ops in floating dtypes also backward (gradients of "
      "`sum(output * fixed random weights)` with respect to every tensor input). As in PyTorch's own "
      "CPU-comparison test, both results first go through the sample's `output_process_fn_grad`, which "
      "makes outputs that are only defined up to sign (eigenvectors, singular vectors) comparable.")
    w("")
    w("Beyond OpInfo, two more tables: [every ModuleInfo of `module_db`](#modules-moduleinfo) (forward and "
      "backward, training and eval, float32 and bfloat16) and [training utilities](#training-utilities) (AMP, "
      "weight/spectral norm, parametrizations, gradient clipping, every optimizer, LR schedulers, "
      "checkpointing, DataLoader, distributions, EMA/SWA), each run on neuron and on the CPU and compared.")
    w("")
    w("Regenerate with `make conformance` (runs `tests/conformance/opinfo_sweep.py --full`, "
      "`moduleinfo_sweep.py --full` and `utilities_sweep.py --full`, each followed by this generator). "
      "`python tools/gen_op_support.py` alone refreshes the document from the last sweep's results "
      "(build/conformance/full.jsonl), e.g. after editing the known-gaps list "
      "`tests/conformance/known_gaps.py`, the one place where known gaps and their reasons live. "
      "`make test` runs a fast subset (`--subset`: about 40 common ops, float32).")
    w("")
    w("## Statuses")
    w("")
    w("| status | meaning |")
    w("|---|---|")
    w("| native | every sample matches the CPU and no ATen op fell back to the CPU |")
    w("| fallback | every sample matches, but some ATen ops ran through the CPU fallback (listed in the reason) |")
    w("| **MISMATCH** | a value, shape or dtype differs from the CPU beyond the tolerance, and the value is not "
      "within tolerance of a float64 CPU run either (max abs diff, the worst element and its float64 value "
      "are given); or (reason `meta: ...`) every value matches but an op's output sizes, strides, dtype or "
      "aliasing differ from its meta function, which compiled graphs rely on (each sample is run again under "
      "`torch_neuronx.meta_check`) |")
    w("| **ERROR** | neuron raised where the CPU did not |")
    w("| **CRASH** | the worker process died (signal, abort) or gave no result within "
      f"{meta.get('timeout_s', 60):.0f} s |")
    w("| skip-cpu | the CPU reference raised for every sample: nothing to compare with |")
    w("| · | the OpInfo does not support this dtype on the CPU |")
    w("")
    w("Tolerances (`torch.testing.assert_close`, per result dtype; for a result whose dtype differs from the "
      "dtype swept, the looser of the two):")
    w("")
    w("| dtype | rtol | atol | why |")
    w("|---|---|---|---|")
    why = {
        "float32": "the device sums in another order (blocked, multithreaded reductions and GEMM)",
        "bfloat16": "8-bit mantissa; intermediate roundings differ between the CPU's and the device's kernels "
                    "(about 2.5 machine epsilons)",
        "float16": "the same 2.5 machine epsilons as bfloat16; composite ops (most gradients) round after each step",
        "float64": "the device computes float64 at float32 precision (documented)",
    }
    for d in ("float32", "bfloat16", "float16", "float64"):
        t = TOLERANCES[d]
        w(f"| {d} | {t[0]:g} | {t[1]:g} | {why[d]} |")
    w("| int64, bool | 0 | 0 | exact |")
    w("")
    w("When the device and the CPU disagree, the sample is also run on the CPU in float64 (inputs, weights and "
      "dtype arguments cast): a device result within tolerance of the float64 result, or no further from it "
      "than the CPU's result (both measured against the float64 value rounded to the result dtype), passes, since "
      "the CPU is then the less accurate side (listed below under *The CPU is the less accurate side*). Sort-like ops "
      "(sort, argsort, msort, topk, kthvalue, median, nanmedian, mode) may order equal keys either way unless "
      "`stable=True`: their indices are checked by the values they select, and their gradients are compared only "
      "when the input has no ties.")
    w("")
    w("Ops with random or uninitialised results (" + ", ".join(f"`{n}`" for n in sorted(NONDETERMINISTIC))
      + ", and samples with `dropout_p > 0`) are compared by shape and dtype only.")
    w("")
    w("## Summary")
    w("")
    wall = meta.get("wall_time_s")
    if wall is not None:
        b = meta.get("build", {})
        built = ""
        if b.get("git_head"):
            built = f" Tested build: commit {b['git_head']}" + (" with local changes" if b.get("local_changes") else "")
            built += (f", extension built {b['extension_mtime']} UTC." if b.get("extension_mtime") else ".")
            if b.get("rebuilt_during_sweep"):
                built += " **The extension was rebuilt during the sweep: results mix two builds.**"
        w(f"{len(order)} OpInfos, {len(records)} OpInfo × dtype combinations; the sweep took {wall:.0f} s "
          f"of wall time with {meta.get('workers', 2)} worker processes.{built}")
        w("")
    w("| dtype | tested | native | fallback | mismatch | error | crash | skip-cpu | native-pass rate | pass rate |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    for d in DTYPE_NAMES:
        s = summary["by_dtype"].get(d)
        if not s:
            continue
        rate = lambda x: f"{100 * x:.1f}%" if x is not None else "–"  # noqa: E731
        w(f"| {d} | {s['tested']} | {s['native-pass']} | {s['fallback-pass']} | {s['mismatch']} | {s['error']} | "
          f"{s['crash']} | {s['skipped-cpu']} | {rate(s['native_pass_rate'])} | {rate(s['pass_rate'])} |")
    t = summary["by_status"]
    w(f"| all | {sum(t.values()) - t['skipped-cpu']} | {t['native-pass']} | {t['fallback-pass']} | {t['mismatch']} | "
      f"{t['error']} | {t['crash']} | {t['skipped-cpu']} | | |")
    w("")
    w("Rates are over the combinations tested (skip-cpu excluded); pass = native + fallback.")
    w("")

    # Failures not explained by the known-gaps list: what a reviewer should look at first.
    unlisted: dict[tuple, list[dict]] = {}
    for k in order:
        for d in DTYPE_NAMES:
            r = rows[k].get(d)
            if r and r["status"] in BAD and not gap_for(r):
                unlisted.setdefault((k, r["status"]), []).append(r)
    if unlisted:
        w("## Failures not in the known-gaps list")
        w("")
        w("Look at these first: each is a bug or a gap to add to `tests/conformance/known_gaps.py`.")
        w("")
        for (k, st), rs in unlisted.items():
            dts = ", ".join(r["dtype"] for r in rs)
            w(f"- `{k}` ({dts}): {st}: {_md(_short(rs[0].get('reason', ''), 220))}")
        w("")

    arb = [(k, r) for k in order for r in (rows[k].get(d) for d in DTYPE_NAMES) if r and r.get("cpu_less_accurate")]
    if arb:
        w("## The CPU is the less accurate side")
        w("")
        w("These passed although the device differs from the CPU beyond the tolerance: the device is within "
          "tolerance of the float64 result, or no further from it than the CPU is (usually reduced-precision "
          "CPU kernels that round intermediates, an ill-conditioned gradient, or a result that should be "
          "exactly 0).")
        w("")
        for k, r in arb:
            a = r["cpu_less_accurate"][0]
            how = f" ({a['how']})" if a.get("how") else ""
            w(f"- `{k}` {r['dtype']}: {a['where']}, sample {a['sample']}{how}: {_md(_short(a['shape'], 120))}")
        w("")

    w("## Per OpInfo")
    w("")
    w("| OpInfo | variant | " + " | ".join(DTYPE_NAMES) + " | reason |")
    w("|---|---|" + "---|" * len(DTYPE_NAMES) + "---|")
    for k in order:
        rs = rows[k]
        any_r = next(iter(rs.values()))
        cells = [CELL[rs[d]["status"]] if d in rs else "·" for d in DTYPE_NAMES]
        w(f"| `{any_r['op']}` | {any_r['variant']} | " + " | ".join(cells) + f" | {_md(row_reason(rs))} |")
    w("")

    # The fallback backlog: which missing kernels would help the most OpInfos.
    fb: Counter = Counter()
    for k in order:
        ops = set()
        for r in rows[k].values():
            ops.update(r.get("fallback_ops", []))
        fb.update(ops)
    if fb:
        w("## ATen ops that fall back most often")
        w("")
        w("Number of OpInfos (any dtype) whose run used each op through the CPU fallback.")
        w("")
        w("| ATen op | OpInfos |")
        w("|---|---|")
        for op, n in fb.most_common(40):
            w(f"| `{op}` | {n} |")
        w("")

    core = meta.get("core_ops")
    if core:
        fell = defaultdict(set)  # aten op -> OpInfos in which it fell back
        for k in order:
            for r in rows[k].values():
                for o in r.get("fallback_ops", []):
                    fell[o.replace("aten::", "")].add(k)
        counts = Counter(c["how"] for c in core)
        seen_fb = [c for c in core if c["op"] in fell or c["op"].split(".")[0] in fell]
        w(f"## Core ATen opset ({len(core)} overloads)")
        w("")
        w("Every overload tagged `torch.Tag.core`: **native** = a neuron kernel is registered; "
          "**composite** = PyTorch's composite kernel runs, calling other ops (any of those that fall back "
          "appear in the OpInfo table); **fallback** = neither, so it runs through the CPU fallback. "
          f"Counts: {', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}. "
          f"Seen falling back in this sweep: {len(seen_fb)}"
          + (" (" + ", ".join(f"`{c['op']}`" for c in seen_fb) + ")" if seen_fb else "") + ".")
        w("")
        for how in ("fallback", "composite", "native"):
            ops_ = [c["op"] for c in core if c["how"] == how]
            if ops_:
                w(f"- {how} ({len(ops_)}): " + ", ".join(f"`{o}`" for o in ops_))
        w("")

    for name in EXTRA_SWEEPS:
        if extras.get(name):
            L.extend(extra_markdown(name, extras[name]))

    w("## Known gaps")
    w("")
    w("From `tests/conformance/known_gaps.py` (`KNOWN_GAPS`; the module and utility gaps are listed in their "
      "sections above). An entry whose OpInfo now passes natively in every dtype is marked stale.")
    w("")
    names = set(order) | {r["op"] for k in order for r in rows[k].values()}
    for gk, reason in sorted(known_gaps.KNOWN_GAPS.items()):
        base = gk.split("@")[0]
        matched = [r for k in order for r in rows[k].values()
                   if base in (k, r["op"]) and ("@" not in gk or r["dtype"] == gk.split("@")[1])]
        stale = ""
        if base not in names:
            stale = " *(no such OpInfo in this op_db)*"
        elif matched and all(r["status"] in ("native-pass", "skipped-cpu") for r in matched):
            stale = " *(stale: passes now)*"
        w(f"- `{gk}`: {_md(reason)}{stale}")
    w("")
    out_gaps = getattr(known_gaps, "OUT_OVERLOAD_GAPS", {})
    w("### out= overloads on the CPU fallback")
    w("")
    w("Every other out= overload of an op with a native kernel is native too (tests/test_fallback.py checks "
      "it against the dispatcher); these are not (`OUT_OVERLOAD_GAPS`):")
    w("")
    for gk, reason in sorted(out_gaps.items()):
        w(f"- `{gk}`: {_md(reason)}")
    w("")

    w("## Deliberate extensions")
    w("")
    w("Inputs neuron computes where PyTorch's CPU build raises, on purpose (usually as CUDA does). The "
      "differential fuzzer (`make fuzz`) reads the same list, `tools/fuzz/allowances.py`, and counts these "
      "cases as allowed rather than as disagreements.")
    w("")
    for g in fuzz_allowances():
        ops_ = "any op" if "*" in g.ops else ", ".join(f"`{o}`" for o in g.ops)
        w(f"- `{g.id}` ({ops_}): {_md(g.reason)}")
    w("")

    w(f"## Native ATen ops ({len(native)})")
    w("")
    w("Registered neuron kernels (`torch_neuronx.native_ops()`); every other op runs through the CPU fallback.")
    w("")
    w(", ".join(f"`{n.replace('aten::', '')}`" for n in native))
    w("")
    with open(md_path, "w") as f:
        f.write("\n".join(L))
    print(f"wrote {os.path.relpath(md_path, ROOT)} and {os.path.relpath(json_path, ROOT)}", file=sys.stderr)


def row_reason(rs: dict[str, dict]) -> str:
    """The reason column: the known gap if one is listed, else the worst
    problem found, else the ops that fell back."""
    recs = [rs[d] for d in DTYPE_NAMES if d in rs]
    gaps = []
    for r in recs:
        g = gap_for(r)
        if g and g not in gaps:
            gaps.append(g)
    bad = [r for r in recs if r["status"] in BAD]
    parts = []
    if gaps:
        parts.append(" ".join(gaps))
    if bad and not all(gap_for(r) for r in bad):
        r = next(r for r in bad if not gap_for(r))
        parts.append(f"{r['dtype']}: {_short(r.get('reason', ''), 160)}")
    fbs: list[str] = []
    for r in recs:
        for o in r.get("fallback_ops", []):
            if o not in fbs:
                fbs.append(o)
    if fbs and not gaps:
        shown = ", ".join(o.replace("aten::", "") for o in fbs[:4])
        parts.append("falls back: " + shown + (f" (+{len(fbs) - 4})" if len(fbs) > 4 else ""))
    text = " — ".join(parts)
    return text if len(text) <= 200 else _short(text, 170) + " (see Known gaps)"


# ---- the ModuleInfo sweep and the training-utilities table ----------------------

EXTRA_SWEEPS = ("modules", "utilities")
EXTRA_INFO = {
    "modules": {"title": "Modules (ModuleInfo)", "gaps": "MODULE_GAPS", "script": "moduleinfo_sweep.py",
                "columns": ("module", "mode")},
    "utilities": {"title": "Training utilities", "gaps": "UTILITY_GAPS", "script": "utilities_sweep.py",
                  "columns": ("utility", "variant")},
}


def extra_gap_key(name: str, r: dict) -> str | None:
    """The known-gaps entry of a module/utility record, most specific first:
    "name.mode@dtype", "name@dtype", "name.mode", "name"."""
    gaps = getattr(known_gaps, EXTRA_INFO[name]["gaps"], {})
    v = f"{r['op']}.{r['variant']}" if r.get("variant") else r["op"]
    for k in (f"{v}@{r['dtype']}", f"{r['op']}@{r['dtype']}", v, r["op"]):
        if k in gaps:
            return k
    return None


def extra_section(name: str, prev: dict) -> dict | None:
    """The JSON section of one extra sweep: from its last results file, or
    else the previous document's, with the gap reasons refreshed."""
    path = os.path.join(ROOT, "build", "conformance", name, "full.jsonl")
    if os.path.exists(path):
        recs = load(path)
        mp = path[: -len(".jsonl")] + ".meta.json"
        meta = json.load(open(mp)) if os.path.exists(mp) else {}
    elif prev.get(name):
        recs, meta = prev[name]["records"], prev[name].get("sweep", {})
    else:
        return None
    gaps = getattr(known_gaps, EXTRA_INFO[name]["gaps"], {})
    out = []
    for r in sorted(recs, key=lambda r: (r["op"], r.get("variant", ""), r["dtype"])):
        jr = {k: r[k] for k in ("op", "variant", "dtype", "status", "reason", "fallback_ops") if k in r}
        for extra in ("max_abs_diff", "failed_samples", "problems", "cpu_less_accurate", "random", "checks"):
            if r.get(extra) not in (None, "", []):
                jr[extra] = r[extra][:2] if isinstance(r[extra], list) and extra != "checks" else r[extra]
        g = extra_gap_key(name, r)
        if g:
            jr["known_gap"] = g
        out.append(jr)
    counts = Counter(r["status"] for r in out)
    return {"generated_by": f"tests/conformance/{EXTRA_INFO[name]['script']} --full", "sweep": meta,
            "summary": {s: counts.get(s, 0) for s in (*STATUSES, "skipped")}, "known_gaps": dict(sorted(gaps.items())),
            "records": out}


def extra_markdown(name: str, ex: dict) -> list[str]:
    info = EXTRA_INFO[name]
    gaps = getattr(known_gaps, info["gaps"], {})
    recs = ex["records"]
    meta = ex.get("sweep", {})
    L: list[str] = []
    w = L.append
    w(f"## {info['title']}")
    w("")
    if name == "modules":
        w("Every ModuleInfo of PyTorch's `module_db` × float32 and bfloat16 × training and eval mode "
          "(`tests/conformance/moduleinfo_sweep.py`): for each sample of its `module_inputs_func` (up to "
          f"{meta.get('max_samples', 16)}), the module is built on the CPU, a second instance gets its state "
          "(`load_state_dict`) and moves with `.to(\"neuron\")` (a lazy module is moved first and initialised "
          "by a forward on the device), the inputs are copied, and the forward outputs, the gradients of "
          "`sum(output * fixed random weights)` with respect to the inputs and the parameters, and the buffers "
          "after the forward (running statistics) are compared; in eval mode also a no-grad forward (where "
          "fast paths run). Tolerances are the OpInfo table's (float32 1e-4, bfloat16 2e-2), with the same "
          "float64 arbiter (a float64 CPU run of the same module and state). Modules whose forward draws "
          "random numbers are compared by shape, dtype and finiteness (module_db already sets dropout=0 "
          "in the transformer modules). bfloat16 is run for every module, also where the ModuleInfo lists "
          "only float32/float64; skip-cpu means the CPU itself cannot run it.")
    else:
        w("Each utility runs the same program on the CPU and on neuron from identical initial state "
          "(`tests/conformance/utilities_sweep.py`) and compares what the program produces (parameters after "
          "the steps, optimizer state, losses, loss scales, learning rates), with the OpInfo table's tolerance "
          "for the dtype the program computes in (float32 1e-4; the float16 GradScaler row 2.5e-3, the bfloat16 "
          "autocast row 2e-2). Random programs cannot match the CPU's numbers (another Philox stream): the "
          "distribution rows check 50,000 samples' mean (within 6 standard errors) and variance (within 8%) on "
          "both devices, log_prob at fixed points against the CPU, and reproducibility under "
          "`torch.manual_seed`; the checkpoint-with-dropout rows check that the recomputation replays the "
          "dropout mask (checkpointed gradients equal a plain run's on the same device). Statuses: native (matches, nothing fell back), "
          "fallback (matches, the ATen ops that fell back are listed), mismatch, error, crash, skipped "
          "(not applicable, with the reason).")
    w("")
    if meta.get("wall_time_s") is not None:
        b = meta.get("build", {})
        built = f" Tested build: commit {b['git_head']}" + (" with local changes" if b.get("local_changes") else "") \
            + "." if b.get("git_head") else ""
        if b.get("rebuilt_during_sweep"):
            built += " **The extension was rebuilt during the sweep: results mix two builds.**"
        w(f"{len(recs)} cases; the sweep took {meta['wall_time_s']:.0f} s with {meta.get('workers', 2)} worker "
          f"processes.{built}")
        w("")
    dts = sorted({r["dtype"] for r in recs}, key=lambda d: (d != "float32", d))
    w("| dtype | cases | native | fallback | mismatch | error | crash | skipped | native rate |")
    w("|---|---|---|---|---|---|---|---|---|")
    for d in dts + ["all"]:
        c = Counter(r["status"] for r in recs if d == "all" or r["dtype"] == d)
        tested = sum(c.values()) - c["skipped-cpu"] - c["skipped"]
        rate = f"{100 * c['native-pass'] / tested:.1f}%" if tested else "–"
        w(f"| {d or '–'} | {sum(c.values())} | {c['native-pass']} | {c['fallback-pass']} | {c['mismatch']} | "
          f"{c['error']} | {c['crash']} | {c['skipped-cpu'] + c['skipped']} | {rate} |")
    w("")
    unlisted = [r for r in recs if r["status"] not in ("native-pass", "skipped-cpu", "skipped")
                and not r.get("known_gap")]
    if unlisted:
        w(f"Not native and not in `{info['gaps']}` (tests/conformance/known_gaps.py): "
          + ", ".join(f"`{r['op']}.{r['variant']}@{r['dtype']}`" if r.get("variant") else f"`{r['op']}@{r['dtype']}`"
                      for r in unlisted) + ".")
        w("")
    def details(r: dict) -> str:
        gap = gaps.get(r.get("known_gap") or "", "")
        det = r.get("reason", "")
        if gap and r["status"] == "fallback-pass":
            return gap + " (" + ", ".join(o.replace("aten::", "") for o in r.get("fallback_ops", [])) + ")"
        if gap and r["status"] != "native-pass":
            return gap + (" — " + det if det else "")
        return det

    if name == "modules":
        # One row per module and dtype; the status of training and eval mode.
        w("| module | dtype | status (train / eval) | details |")
        w("|---|---|---|---|")
        groups: dict[tuple, dict] = defaultdict(dict)
        for r in recs:
            groups[(r["op"], r["dtype"])][r.get("variant", "")] = r
        for (op, d), by_mode in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] != "float32")):
            cells = [CELL.get(by_mode[m]["status"], by_mode[m]["status"]) if m in by_mode else "·"
                     for m in ("train", "eval")]
            st = cells[0] if cells[0] == cells[1] else f"{cells[0]} / {cells[1]}"
            dets = []
            for m in ("train", "eval"):
                if m in by_mode:
                    t = details(by_mode[m])
                    if t and t not in dets:
                        dets.append(t)
            det = dets[0] if len(dets) == 1 else " ".join(f"{m}: {t}" for m, t in zip(("train", "eval"), dets))
            w(f"| `{op}` | {d} | {st} | {_md(_short(det, 700))} |")
    else:
        w("| utility | variant | dtype | status | details |")
        w("|---|---|---|---|---|")
        for r in recs:
            st = CELL.get(r["status"], r["status"])
            w(f"| `{r['op']}` | {r.get('variant', '')} | {r['dtype'] or '–'} | {st} | {_md(_short(details(r), 700))} |")
    w("")
    if gaps:
        w(f"Known gaps (`{info['gaps']}` in tests/conformance/known_gaps.py); an entry whose cases are all native "
          "now is marked stale:")
        w("")
        for gk, reason in sorted(gaps.items()):
            hit = [r for r in recs if r.get("known_gap") == gk]
            stale = "" if any(r["status"] != "native-pass" for r in hit) else " *(stale: no failing case)*"
            w(f"- `{gk}`: {_md(reason)}{stale}")
        w("")
    return L


if __name__ == "__main__":
    if len(sys.argv) > 1:
        generate(sys.argv[1])
    else:
        generate_from_last()
