"""The HTML report: one self-contained file, plots drawn with matplotlib and
embedded as base64 PNG, every table from the report's data."""
from __future__ import annotations

import base64
import html
import io
import math
from typing import Any, Dict, List, Optional

from .report import FAIL, PASS, SKIP, WARN, _dtype_label, _gib, _ms, _sci

_COLORS = {"cpu": "#555555", "neuron": "#d9480f", "compiled": "#1c7ed6"}
_STATUS = {PASS: "#2b8a3e", FAIL: "#c92a2a", WARN: "#e67700", SKIP: "#868e96"}

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1100px;
color:#212529;padding:0 1em}
h1{font-size:1.5em;margin-bottom:.2em} h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #dee2e6}
.sub{color:#495057;margin:.1em 0} table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
td,th{border:1px solid #dee2e6;padding:.25em .55em;text-align:left;vertical-align:top}
th{background:#f1f3f5} td.n{text-align:right;font-variant-numeric:tabular-nums}
.status{font-weight:700;color:#fff;padding:.1em .5em;border-radius:3px}
.next{color:#495057;font-size:.9em} img{max-width:100%} pre{background:#f8f9fa;padding:.6em;overflow:auto;
font-size:.8em} .bad{background:#fff5f5} .grid{display:flex;flex-wrap:wrap;gap:1em}
details{margin:.4em 0} td.check{white-space:nowrap}
"""


def _e(x: Any) -> str:
    return html.escape(str(x))


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return '<img alt="plot" src="data:image/png;base64,' + base64.b64encode(buf.getvalue()).decode() + '">'


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _finite(v: Any) -> Optional[float]:
    return v if isinstance(v, (int, float)) and math.isfinite(v) else None


def _loss_plot(data: dict) -> Optional[str]:
    plt = _plt()
    items = [(d, r["curves"]) for d, r in data["numerics"].items() if r.get("curves")]
    if not items:
        return None
    fig, axes = plt.subplots(1, len(items), figsize=(5.2 * len(items), 3.4), squeeze=False)
    for ax, (d, c) in zip(axes[0], items):
        for key, label, color, style in (("loss_cpu", "cpu eager", _COLORS["cpu"], "-"),
                                         ("loss_neuron", "neuron eager", _COLORS["neuron"], "--"),
                                         ("loss_compiled", "neuron compiled", _COLORS["compiled"], ":")):
            ys = c.get(key)
            if ys:
                ax.plot(range(len(ys)), [_finite(y) for y in ys], style, color=color, label=label, marker=".")
        ax.set_title(f"loss, {_dtype_label(d)}")
        ax.set_xlabel("step")
        ax.grid(alpha=.3)
        ax.legend(fontsize=8)
    return _png(fig)


def _module_plot(data: dict) -> Optional[str]:
    plt = _plt()
    items = [(d, r) for d, r in data["numerics"].items() if r.get("modules")]
    if not items:
        return None
    fig, axes = plt.subplots(len(items), 1, figsize=(10, 2.8 * len(items)), squeeze=False)
    for ax, (d, r) in zip(axes[:, 0], items):
        rows = r["modules"]
        ys = [max(_finite(x["max_rel"]) or 1e3, 1e-12) if x["max_rel"] > 0 else 1e-12 for x in rows]
        tol = r["module_tolerance"]
        colors = [_COLORS["neuron"] if y > tol else "#74c0fc" for y in ys]
        ax.bar(range(len(ys)), ys, color=colors, width=1.0)
        ax.axhline(tol, color="#c92a2a", lw=1, ls="--", label=f"tolerance {tol:g}")
        ax.set_yscale("log")
        ax.set_ylim(1e-12, max(max(ys) * 3, tol * 10))
        fe = r.get("first_exceeding")
        if fe:
            i = next(i for i, x in enumerate(rows) if x["module"] == fe["module"] and x["call"] == fe["call"])
            ax.annotate(f"first: {fe['module']}", (i, ys[i]), xytext=(5, 10), textcoords="offset points",
                        fontsize=8, color="#c92a2a")
        ax.set_title(f"per-module output error vs CPU (first step, execution order), {_dtype_label(d)}")
        ax.set_ylabel("max |diff| / max |cpu|")
        ax.set_xlabel("module call")
        ax.legend(fontsize=8, loc="upper left")
        ax.grid(alpha=.3, axis="y")
    fig.tight_layout()
    return _png(fig)


def _phase_plot(data: dict) -> Optional[str]:
    plt = _plt()
    ph = data["phases"]
    if not ph:
        return None
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(ph) + 0.8))
    labels = [f"{p['name']} {_dtype_label(p['dtype']) if p['dtype'] else ''}".strip() for p in ph]
    colors = [{"ok": "#4dabf7", "error": "#fa5252", "skipped": "#ced4da"}[p["status"]] for p in ph]
    ax.barh(range(len(ph)), [p["seconds"] for p in ph], color=colors)
    ax.set_yticks(range(len(ph)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds (wall)")
    ax.set_title("time per phase (red: failed)")
    ax.grid(alpha=.3, axis="x")
    return _png(fig)


def _step_plot(data: dict) -> Optional[str]:
    plt = _plt()
    perf = data["performance"]
    keys = (("cpu_eager", "cpu eager", _COLORS["cpu"]), ("neuron_eager", "neuron eager", _COLORS["neuron"]),
            ("neuron_compiled", "neuron compiled", _COLORS["compiled"]))
    dts = list(perf)
    if not dts:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.2))
    w = 0.8 / len(keys)
    for j, (k, label, color) in enumerate(keys):
        vals = [((perf[d].get(k) or {}).get("step_s") or 0) * 1e3 for d in dts]
        ax.bar([i + j * w for i in range(len(dts))], vals, w, label=label, color=color)
    ax.set_xticks([i + w for i in range(len(dts))], [_dtype_label(d) for d in dts])
    ax.set_ylabel("ms per training step")
    ax.set_title("step time (after the first step)")
    ax.legend(fontsize=8)
    ax.grid(alpha=.3, axis="y")
    return _png(fig)


def _kernel_plot(data: dict) -> Optional[str]:
    plt = _plt()
    series = []
    for d, k in data["kernels"].items():
        for label in ("eager", "compiled"):
            rows = (k.get(label) or {}).get("kernels") if k.get("available") else None
            if rows:
                series.append((f"{_dtype_label(d)} {label}", rows[:10]))
    if not series:
        return None
    cols = min(2, len(series))
    rows_n = (len(series) + cols - 1) // cols
    fig, axes = plt.subplots(rows_n, cols, figsize=(5.5 * cols, 3.4 * rows_n), squeeze=False)
    for ax in axes.flat[len(series):]:
        ax.set_visible(False)
    for ax, (title, rows) in zip(axes.flat, series):
        ax.barh(range(len(rows)), [float(r.get("total_us", 0)) / 1e3 for r in rows], color=_COLORS["neuron"])
        ax.set_yticks(range(len(rows)), [str(r.get("name"))[:32] for r in rows], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("device ms")
        ax.set_title(f"top kernels, {title}", fontsize=9)
    fig.tight_layout()
    return _png(fig)


def _rate(v: Any) -> str:
    return f"{float(v):.1f}" if v else "-"


def _table(header: List[str], rows: List[List[Any]], numeric: Optional[set] = None,
           bad: Optional[List[bool]] = None) -> str:
    numeric = numeric or set()
    out = ["<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr>"]
    for i, r in enumerate(rows):
        cls = ' class="bad"' if bad and bad[i] else ""
        out.append(f"<tr{cls}>" + "".join(
            f'<td class="n">{_e(c)}</td>' if j in numeric else f"<td>{_e(c)}</td>" for j, c in enumerate(r))
            + "</tr>")
    return "".join(out) + "</table>"


def render(report: Any) -> str:
    """The page for one EvaluationReport."""
    d: Dict[str, Any] = report.data
    m = d["model"]
    P: List[str] = []
    P.append(f"<!doctype html><html><head><meta charset='utf-8'><title>TorchNeuron evaluation: {_e(m['name'])}"
             f"</title><style>{_CSS}</style></head><body>")
    P.append(f"<h1>TorchNeuron evaluation: {_e(m['name'])}</h1>")
    P.append(f"<p class='sub'>{m['parameters'] / 1e6:.2f}M parameters; inputs {_e('; '.join(m['inputs']))}; "
             f"loss: {_e(m['loss'])}; optimizer: {_e(m['optimizer'])}; {d['config']['steps']} timed steps; "
             f"dtypes: {_e(', '.join(_dtype_label(x) for x in d['config']['dtypes']))}</p>")
    env = d["environment"]
    dev = env.get("device", {})
    P.append(f"<p class='sub'>device: {_e(dev.get('count'))} x {_e(dev.get('name'))}; host {env['host_cpus']} "
             f"CPUs; torch {_e(env['torch'])}; total {d.get('total_seconds', 0):.1f} s</p>")

    P.append("<h2>Verdict</h2><table>")
    for v in d["verdict"]:
        color = _STATUS[v["status"]]
        nxt = f"<div class='next'>next: {_e(v['next'])}</div>" if v["next"] and v["status"] in (FAIL, WARN) else ""
        P.append(f"<tr><td><span class='status' style='background:{color}'>{v['status']}</span></td>"
                 f"<td class='check'><b>{_e(v['check'])}</b></td><td>{_e(v['detail'])}{nxt}</td></tr>")
    P.append("</table>")

    errs = [p for p in d["phases"] if p["status"] == "error"]
    if errs:
        P.append("<h2>Errors</h2>")
        for i, p in enumerate(errs):
            P.append(f"<details{' open' if i == 0 else ''}><summary><b>{_e(p['name'])} ({_e(p['dtype'])})</b>: {_e(p['error']['type'])}: "
                     f"{_e(p['error']['message'].splitlines()[0] if p['error']['message'] else '')}</summary>"
                     f"<pre>{_e(p['error']['message'])}\n\n{_e(p['error']['traceback'])}</pre></details>")

    P.append("<h2>Numerics against the CPU</h2>")
    for img in (_loss_plot(d), _module_plot(d)):
        if img:
            P.append(img)
    for dt, r in d["numerics"].items():
        if r.get("status") != "measured":
            P.append(f"<p>{_e(_dtype_label(dt))}: {_e(r.get('status'))}</p>")
            continue
        P.append(f"<h3>{_e(_dtype_label(dt))}</h3><p>loss max relative difference {_sci(r['loss_max_rel'])}, "
                 f"gradient norm {_sci(r['grad_norm_max_rel'])}"
                 + (f", compiled loss {_sci(r['compiled_loss_max_rel'])}" if "compiled_loss_max_rel" in r else "")
                 + f" (tolerance {r['curve_tolerance']:g}); module tolerance {r['module_tolerance']:g}.</p>")
        c = r["curves"]
        n = len(c["loss_cpu"])
        rows = []
        for i in range(n):
            def g(key: str) -> str:
                v = c.get(key) or []
                return f"{v[i]:.6f}" if i < len(v) and isinstance(v[i], float) else "-"
            rows.append([i, g("loss_cpu"), g("loss_neuron"), g("loss_compiled"), g("grad_norm_cpu"),
                         g("grad_norm_neuron"), g("grad_norm_compiled")])
        P.append("<details><summary>loss and gradient norm per step</summary>" + _table(
            ["step", "loss cpu", "loss neuron", "loss compiled", "grad norm cpu", "grad norm neuron",
             "grad norm compiled"], rows, numeric=set(range(7))) + "</details>")
        mods = r.get("modules", [])
        tol = r["module_tolerance"]
        fe = r.get("first_exceeding")
        if fe:
            P.append(f"<p><b>The error first appears in module <code>{_e(fe['module'])}</code> ({_e(fe['type'])})"
                     f"</b>: output max rel {_sci(fe['max_rel'])}, its inputs {_sci(fe['input_max_rel'])}.</p>")
        worst = sorted(mods, key=lambda x: -x["max_rel"])[:25]
        P.append("<details><summary>per-module output error, worst 25 (all in the JSON)</summary>" + _table(
            ["module", "call", "type", "output", "max abs", "max rel", "inputs max rel"],
            [[x["module"], x["call"], x["type"], f"{x['output_dtype']} {tuple(x['output_shape'])}",
              _sci(x["max_abs"]), _sci(x["max_rel"]), _sci(x["input_max_rel"])] for x in worst],
            numeric={1, 4, 5, 6}, bad=[x["max_rel"] > tol for x in worst]) + "</details>")
        if r.get("gradients"):
            P.append("<details><summary>first-step gradient error, worst 15 parameters</summary>" + _table(
                ["parameter", "shape", "max abs", "max rel"],
                [[x["parameter"], tuple(x["shape"]), _sci(x["max_abs"]), _sci(x["max_rel"])]
                 for x in r["gradients"][:15]], numeric={2, 3}) + "</details>")

    P.append("<h2>Performance</h2><div class='grid'>")
    for img in (_step_plot(d), _phase_plot(d)):
        if img:
            P.append(f"<div>{img}</div>")
    P.append("</div>")
    rows = []
    for dt, p in d["performance"].items():
        fc = (p.get("neuron_compiled") or {}).get("first_call") or {}
        rows.append([_dtype_label(dt), _ms((p.get("cpu_eager") or {}).get("step_s")),
                     _ms((p.get("neuron_eager") or {}).get("step_s")),
                     _ms((p.get("neuron_compiled") or {}).get("step_s")),
                     _ms(fc.get("total_s")) if fc else "-",
                     " / ".join(_ms(fc.get(k)) for k in ("forward_s", "backward_s", "optimizer_s")) if fc else "-",
                     _ms(fc.get("our_compile_s")) if fc else "-"])
    P.append(_table(["dtype", "cpu eager", "neuron eager", "neuron compiled", "first compiled step",
                     "of which forward / backward / optimizer", "our compiler's share"], rows,
                    numeric={1, 2, 3, 4, 6}))
    for dt, p in d["performance"].items():
        gs = (p.get("neuron_compiled") or {}).get("graphs")
        if gs:
            P.append(f"<details><summary>compiled graphs, {_e(_dtype_label(dt))}</summary>" + _table(
                ["graph", "kind", "nodes", "program steps", "arena", "capture + compile"],
                [[g["name"], g["kind"], g["nodes"], g["steps"], _gib(g["arena_bytes"]), _ms(g["compile_time_s"])]
                 for g in gs], numeric={2, 3, 4, 5}) + "</details>")
    sh = d.get("shapes")
    if sh and sh.get("rows"):
        P.append(f"<h3>Shapes ({_e(_dtype_label(sh['dtype']))}, compiled; example {_e(tuple(sh.get('base', [])))})"
                 f"</h3>")
        P.append(_table(["shape", "first step at this shape", "new graphs", "recompiled"],
                        [[tuple(r["shape"]) if isinstance(r["shape"], list) else r["shape"], _ms(r["seconds"]),
                          r["new_graphs"], "yes" if r["recompiled"] else "no"] for r in sh["rows"]],
                        numeric={1, 2}))
        if sh.get("recommendation"):
            P.append(f"<p>{_e(sh['recommendation'])}</p>")

    P.append("<h2>Top kernels</h2>")
    img = _kernel_plot(d)
    if img:
        P.append(img)
    for dt, k in d["kernels"].items():
        if not k.get("available"):
            P.append(f"<p>{_e(_dtype_label(dt))}: {_e(k.get('reason'))}</p>")
            continue
        for err in k.get("errors", []):
            P.append(f"<p>{_e(_dtype_label(dt))}: the profiler failed ({_e(err)})</p>")
        for label in ("eager", "compiled"):
            kk = k.get(label)
            if not kk:
                continue
            P.append(f"<h3>{_e(_dtype_label(dt))} {label}: {kk['steps']} steps, device {_ms(kk['device_s'])}, "
                     f"wall {_ms(kk['wall_s'])}</h3>")
            P.append(_table(["kernel", "calls", "total", "mean", "share", "GB/s", "GFLOP/s"],
                            [[r.get("name"), r.get("calls"), _ms(float(r.get("total_us", 0)) * 1e-6),
                              f"{float(r.get('mean_us', 0)):.1f} us", f"{100 * float(r.get('share', 0)):.1f}%",
                              _rate(r.get("gbps")), _rate(r.get("gflops"))]
                             for r in kk["kernels"]], numeric={1, 2, 3, 4, 5, 6}))

    mem = d.get("memory")
    if mem:
        t = mem["trn2"]
        P.append("<h2>Memory</h2>")
        P.append(_table(["what", "bytes"], [
            ["parameters", _gib(mem["parameters"])], ["gradients", _gib(mem["gradients"])],
            ["optimizer state", _gib(mem["optimizer_state"])], ["training state (sum)", _gib(mem["training_state"])],
            [f"peak allocated on core {mem['device_index']} (eager run)", _gib(mem["peak_allocated"])],
            ["this device's capacity per core", _gib(mem["device_capacity"])],
            ["Trainium2 logical core", _gib(t["core_hbm_bytes"])], ["Trainium2 chip", _gib(t["chip_hbm_bytes"])],
        ], numeric={1}))
        P.append(f"<p>Figures: a Trainium2 chip has {_gib(t['chip_hbm_bytes'])} of HBM and {t['physical_cores']} "
                 f"physical NeuronCores; at logical core size {t['logical_core_size']} it shows "
                 f"{t['logical_cores']} logical cores of {_gib(t['core_hbm_bytes'])}. Fits one core: "
                 f"{'yes' if mem['fits_core'] else 'no'}; one chip: {'yes' if mem['fits_chip'] else 'no'}.</p>")

    P.append("<h2>Ops</h2>")
    for dt, o in d["ops"].items():
        bp = o["ops_by_phase"]
        P.append(f"<h3>{_e(_dtype_label(dt))}: {o['distinct_ops']} ATen ops, {o['calls']} calls, "
                 f"{o['signatures']} distinct (op, shapes, dtypes) signatures</h3>")
        P.append(f"<p>distinct ops per phase: forward {bp['forward']}, backward {bp['backward']}, optimizer "
                 f"{bp['optimizer']}; CPU fallback: {_e(', '.join(o['fallback_ops']) or 'none')}; compiler cannot "
                 f"lower: {_e(', '.join(o['not_lowerable']) or 'none')}</p>")
        P.append(_table(["op", "forward", "backward", "optimizer", "execution", "compiler", "note"],
                        [[r["name"], r["forward"], r["backward"], r["optimizer"], r["execution"], r["compiler"],
                          r["compiler_note"]] for r in o["ops"]], numeric={1, 2, 3},
                        bad=[r["execution"] != "native" or r["compiler"] == "no" for r in o["ops"]]))

    P.append("<h2>Phases</h2>")
    P.append(_table(["phase", "dtype", "status", "seconds"],
                    [[p["name"], p["dtype"] or "", p["status"] + (f" ({p['reason']})" if p.get("reason") else ""),
                      f"{p['seconds']:.2f}"] for p in d["phases"]], numeric={3},
                    bad=[p["status"] == "error" for p in d["phases"]]))
    P.append("<p class='sub'>Every number is in the JSON report beside this file.</p></body></html>")
    return "\n".join(P)
