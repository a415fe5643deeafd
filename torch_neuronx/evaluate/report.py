"""The evaluation report: the verdict checklist, the text summary, JSON
(every number) and the HTML page (html.py)."""
from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List, Optional

PASS, FAIL, WARN, SKIP = "PASS", "FAIL", "WARN", "SKIP"


def _gib(n: float) -> str:
    if n >= (1 << 28):
        return f"{n / (1 << 30):.2f} GiB"
    return f"{n / (1 << 20):.1f} MiB" if n >= (1 << 20) else f"{n / 1024:.1f} KiB"


def _sci(x: Optional[float]) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return f"{x:.1e}"


def _ms(s: Optional[float]) -> str:
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "-"
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def _first_line(msg: str) -> str:
    """The informative line of an error message: Dynamo's wrapper
    ("backend='neuron' raised:") is followed by the backend's own message."""
    lines = [x.strip() for x in msg.splitlines() if x.strip()]
    if not lines:
        return msg[:300]
    if lines[0].endswith(":") and len(lines) > 1:
        return f"{lines[0]} {lines[1]}"[:400]
    return lines[0][:400]


class EvaluationReport:
    """What ``torch_neuronx.evaluate`` found. ``summary()`` is the text
    printed by the command, ``to_json()`` every number, ``to_html(path)``
    one self-contained page with the plots; ``verdict`` the checklist as
    dicts (check, status PASS/FAIL/WARN/SKIP, detail, next)."""

    def __init__(self, data: Dict[str, Any]) -> None:
        self.data = data
        self.data["verdict"] = self._verdict()

    # -- access ----------------------------------------------------------------------------
    @property
    def verdict(self) -> List[dict]:
        return self.data["verdict"]

    @property
    def passed(self) -> bool:
        """True when no verdict line failed."""
        return all(v["status"] != FAIL for v in self.verdict)

    def phase(self, name: str, dtype: Optional[str] = None) -> Optional[dict]:
        for p in self.data["phases"]:
            if p["name"] == name and (dtype is None or p["dtype"] == dtype):
                return p
        return None

    def fallback_ops(self) -> List[str]:
        """Every op that ran through the CPU fallback, in any dtype."""
        return sorted({n for o in self.data["ops"].values() for n in o.get("fallback_ops", [])})

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __repr__(self) -> str:
        return f"<EvaluationReport {self.data['model']['name']}: " + ", ".join(
            f"{v['check']} {v['status']}" for v in self.verdict) + ">"

    # -- verdict ---------------------------------------------------------------------------
    def _phase_error(self, name: str) -> Optional[str]:
        for p in self.data["phases"]:
            if p["name"] == name and p["status"] == "error":
                return f"{p['dtype']}: {p['error']['type']}: {_first_line(p['error']['message'])}"
        return None

    def _verdict(self) -> List[dict]:
        d = self.data
        out: List[dict] = []

        def line(check: str, status: str, detail: str, next_: str = "") -> None:
            out.append({"check": check, "status": status, "detail": detail, "next": next_})

        # 1. runs natively
        err = self._phase_error("neuron eager")
        fb = self.fallback_ops()
        if not d["ops"]:
            line("runs natively", FAIL, f"the neuron eager run failed ({err})" if err else "not measured",
                 "fix the error shown under Phases; it names the op or the line")
        elif fb:
            calls = {}
            for o in d["ops"].values():
                for n, c in o.get("fallback_calls", {}).items():
                    calls[n] = calls.get(n, 0) + c
            line("runs natively", FAIL,
                 f"{len(fb)} op(s) ran on the CPU through the fallback: " +
                 ", ".join(f"{n} ({calls.get(n, 0)} calls)" for n in fb),
                 "each call copies its inputs to the host and back, and torch.compile cannot lower it: replace "
                 "the op in the model or ask for a native kernel; TORCH_NEURONX_DISABLE_FALLBACK=1 makes each "
                 "one raise at its call site")
        else:
            n = max(o["distinct_ops"] for o in d["ops"].values())
            calls = sum(o["calls"] for o in d["ops"].values())
            extra = f"; the eager run failed later ({err})" if err else ""
            line("runs natively", PASS if not err else FAIL,
                 f"{n} distinct ATen ops, {calls} calls, no CPU fallback{extra}",
                 "fix the error shown under Phases" if err else "")

        # 2. numerics
        problems, notes = [], []
        measured = False
        for dt, r in d["numerics"].items():
            if r.get("status") != "measured":
                problems.append(f"{dt}: {r.get('status', 'not measured')}")
                continue
            measured = True
            ctol = r["curve_tolerance"]
            fe = r.get("first_exceeding")
            if fe is not None:
                where = "with its inputs within tolerance" if fe["input_max_rel"] <= r["module_tolerance"] \
                    else "its inputs already differed"
                problems.append(f"{dt}: the error first appears in module '{fe['module']}' ({fe['type']}): "
                                f"output differs by {_sci(fe['max_rel'])} (tolerance {r['module_tolerance']:g}), "
                                f"{where}")
            for key, what in (("loss_max_rel", "loss"), ("grad_norm_max_rel", "gradient norm"),
                              ("compiled_loss_max_rel", "compiled loss")):
                v = r.get(key)
                if v is not None and v > ctol:
                    problems.append(f"{dt}: {what} differs from the CPU by {_sci(v)} (tolerance {ctol:g})")
            notes.append(f"{dt} loss {_sci(r['loss_max_rel'])}" +
                         (f", compiled {_sci(r['compiled_loss_max_rel'])}" if "compiled_loss_max_rel" in r else "") +
                         (f", worst module {_sci(r['worst_module']['max_rel'])}" if r.get("worst_module") else ""))
        if problems and not measured:
            line("numerics within tolerance", FAIL, "; ".join(problems), "fix the errors shown under Phases")
        elif problems:
            line("numerics within tolerance", FAIL, "; ".join(problems),
                 "look at the per-module table: run the named module alone on 'cpu' and 'neuron' with the same "
                 "inputs; a custom or fallback op there is the first suspect; try float32 to tell rounding from "
                 "a wrong kernel")
        elif measured:
            line("numerics within tolerance", PASS, "max relative difference from the CPU: " + "; ".join(notes))
        else:
            line("numerics within tolerance", FAIL, "not measured", "fix the errors shown under Phases")

        # 3. compiles
        if not d["config"]["compile"]:
            line("compiles", SKIP, "compile=False")
        else:
            err = self._phase_error("neuron compiled")
            if err:
                unl = sorted({n for o in d["ops"].values() for n in o.get("not_lowerable", [])})
                nxt = ("the compiler cannot lower " + ", ".join(unl) + ": rewrite those calls, or compile with "
                       "options={'fallback_execution': True} to run them eagerly between graphs") if unl else \
                    ("the error names the op and your source line; TORCH_NEURONX_DEBUG_DIR=dir dumps the FX graph "
                     "and the compiler's input for it")
                line("compiles", FAIL, err, nxt)
            else:
                parts = []
                for dt, p in d["performance"].items():
                    c = p.get("neuron_compiled")
                    if c and c.get("first_call"):
                        fc = c["first_call"]
                        parts.append(f"{dt}: {fc.get('graphs', 0)} graphs, first step {_ms(fc.get('total_s'))} "
                                     f"(our compiler {_ms(fc.get('our_compile_s'))}, the rest Dynamo/AOTAutograd)")
                        if fc.get("optimizer_error"):
                            parts.append(f"{dt}: the optimizer step did not compile ({fc['optimizer_error']}); "
                                         f"it ran eagerly")
                opt_fail = any("did not compile" in p for p in parts)
                rebuilt = {dt: p["neuron_compiled"] for dt, p in d["performance"].items()
                           if (p.get("neuron_compiled") or {}).get("rebuilt_in_timed_steps")}
                nxt = []
                if opt_fail:
                    nxt.append("the optimizer-step error names the op; the compiled model still ran")
                for dt, c in rebuilt.items():
                    parts.append(f"{dt}: {c['rebuilt_in_timed_steps']} graphs were rebuilt during the "
                                 f"{c['timed_steps']} timed steps at unchanged shapes ("
                                 + "; ".join(c.get("rebuild_causes", [])[:3]) + ")")
                if rebuilt:
                    nxt.append("a value that changes every step is baked into a program: typically a "
                               "CPU scalar such as the step count of an optimizer built without "
                               "capturable=True (use torch.optim.AdamW(..., capturable=True) on the device)")
                line("compiles", WARN if (opt_fail or rebuilt) else PASS, "; ".join(parts) or "compiled",
                     "; ".join(nxt))

        # 4. speed
        speed, slower = [], False
        for dt, p in d["performance"].items():
            cpu = (p.get("cpu_eager") or {}).get("step_s")
            best_name, best = None, None
            for key, label in (("neuron_compiled", "compiled"), ("neuron_eager", "eager")):
                s = (p.get(key) or {}).get("step_s")
                if s and (best is None or s < best):
                    best_name, best = label, s
            if not cpu or not best:
                continue
            ratio = cpu / best
            slower |= ratio < 1.0
            eager_s = (p.get("neuron_eager") or {}).get("step_s")
            comp_s = (p.get("neuron_compiled") or {}).get("step_s")
            vs = f"; compiled {eager_s / comp_s:.2f}x eager" if eager_s and comp_s else ""
            speed.append(f"{dt}: neuron {best_name} {_ms(best)}/step vs CPU eager {_ms(cpu)}/step "
                         f"({ratio:.2f}x {'faster' if ratio >= 1 else 'slower'}{vs})")
        if not speed:
            line("faster than the CPU", FAIL, "not measured", "fix the errors shown under Phases")
        else:
            line("faster than the CPU", FAIL if slower else PASS, "; ".join(speed),
                 "the top-kernels table shows where device time goes; compile the step (compiled runs fuse "
                 "pointwise chains and run as one task); a small model is dominated by per-op overhead"
                 if slower else "")

        # 5. memory
        mem = d.get("memory")
        if mem:
            t = mem["trn2"]
            fig = (f"Trainium2: {_gib(t['chip_hbm_bytes'])} HBM per chip, {t['physical_cores']} physical "
                   f"NeuronCores, logical core size {t['logical_core_size']} -> {t['logical_cores']} logical cores "
                   f"of {_gib(t['core_hbm_bytes'])}")
            detail = (f"parameters + gradients + optimizer state = {_gib(mem['training_state'])}; peak allocated "
                      f"{_gib(mem['peak_allocated'])} ({fig})")
            if mem["fits_core"] and mem["peak_fits_core"]:
                line("fits one Trainium2 core", PASS, detail)
            elif mem["fits_chip"]:
                line("fits one Trainium2 core", FAIL, detail,
                     f"shard the training state over the chip's {t['logical_cores']} logical cores "
                     f"(FSDP2 fully_shard with torch.distributed backend 'neuron'); it needs at least "
                     f"{mem['cores_needed_for_state']} cores for the state alone")
            else:
                line("fits one Trainium2 core", FAIL, detail + "; it does not fit one chip either",
                     "shard over several chips (FSDP2 x tensor parallelism), or train in bfloat16 with a smaller "
                     "optimizer state")
        else:
            line("fits one Trainium2 core", SKIP, "not measured (the neuron eager run failed)")

        # 6. shapes
        sh = d.get("shapes")
        failed = [r for r in (sh or {}).get("rows", []) if r.get("default_error")]
        if failed:
            r = failed[0]
            line("static shapes", FAIL,
                 f"with Dynamo's default settings the new shape {tuple(r['shape']) if isinstance(r['shape'], list) else r['shape']} "
                 f"failed to compile ({r['default_error']}); with torch._dynamo.config.automatic_dynamic_shapes=False "
                 f"it compiled: {sh.get('recompiles', 0)} recompiles over {len(sh['rows'])} shapes",
                 "set torch._dynamo.config.automatic_dynamic_shapes = False (the neuron backend compiles every "
                 "shape statically anyway); " + (sh.get("recommendation") or ""))
        elif sh and sh.get("rows"):
            if sh.get("recommendation"):
                line("static shapes", WARN,
                     f"{sh['recompiles']} recompile(s) over {len(sh['rows'])} shapes "
                     f"({sh['distinct_shapes']} distinct including the example)", sh["recommendation"])
            else:
                line("static shapes", PASS, f"{len(sh['rows'])} shapes, {sh['recompiles']} recompiles")
        elif d["config"]["shapes"]:
            err = self._phase_error("shapes")
            line("static shapes", FAIL if err else SKIP, err or "not run (the compiled run failed or compile=False)")

        # 7. float64
        f64_ops = sorted({n for o in d["ops"].values() for n in o.get("float64_ops", {})})
        f64_t = d["model"].get("float64_tensors", [])
        if f64_ops or f64_t:
            line("no float64", WARN,
                 "float64 computes at float32 precision on NeuronCores: " +
                 (f"{len(f64_t)} float64 parameters/buffers ({', '.join(f64_t[:3])}); " if f64_t else "") +
                 (f"{len(f64_ops)} ops saw float64 inputs ({', '.join(f64_ops[:5])})" if f64_ops else ""),
                 "cast to float32 (model.float(), float32 inputs) if float32 precision is acceptable; otherwise "
                 "keep that part on the CPU")
        return out

    # -- text ------------------------------------------------------------------------------
    def summary(self, ops_limit: int = 12) -> str:
        """The text report: verdict first, then ops, numerics, performance,
        shapes, kernels, memory and phases."""
        d = self.data
        m = d["model"]
        env = d["environment"]
        L: List[str] = []
        L.append(f"TorchNeuron evaluation: {m['name']} ({m['parameters'] / 1e6:.2f}M parameters)")
        L.append(f"  inputs: {'; '.join(m['inputs'])}" + (f"; targets: {'; '.join(m['targets'])}" if m['targets']
                                                          else ""))
        L.append(f"  loss: {m['loss']}; optimizer: {m['optimizer']}; {d['config']['steps']} timed steps after the "
                 f"first; dtypes: {', '.join(_dtype_label(x) for x in d['config']['dtypes'])}")
        dev = env.get("device", {})
        L.append(f"  device: {dev.get('count', '?')} x {dev.get('name', '?')}; host: {env['host_cpus']} CPUs; "
                 f"torch {env['torch']}")
        L.append("")
        L.append("Verdict")
        for v in d["verdict"]:
            L.append(f"  [{v['status']}] {v['check']}: {v['detail']}")
            if v["next"] and v["status"] in (FAIL, WARN):
                L.append(f"         next: {v['next']}")
        L.append("")
        for dt, o in d["ops"].items():
            bp = o["ops_by_phase"]
            L.append(f"Ops ({_dtype_label(dt)}): {o['distinct_ops']} ATen ops, {o['calls']} calls (forward "
                     f"{bp['forward']}, backward {bp['backward']}, optimizer {bp['optimizer']} distinct); "
                     f"{o['signatures']} distinct (op, shapes, dtypes) signatures")
            L.append(f"  CPU fallback: {', '.join(o['fallback_ops']) or 'none'}; compiler cannot lower: "
                     f"{', '.join(o['not_lowerable']) or 'none'}" +
                     (f"; graph breaks (host reads): {', '.join(o['graph_breaks'])}" if o["graph_breaks"] else ""))
            L.append(f"  {'op':<52} {'fwd':>6} {'bwd':>6} {'opt':>6}  execution     compiler")
            for r in o["ops"][:ops_limit]:
                L.append(f"  {r['name'][:52]:<52} {r['forward']:>6} {r['backward']:>6} {r['optimizer']:>6}  "
                         f"{r['execution']:<13} {r['compiler']}")
            if len(o["ops"]) > ops_limit:
                L.append(f"  ... {len(o['ops']) - ops_limit} more in the JSON/HTML report")
        if d["ops"]:
            L.append("")
        for dt, r in d["numerics"].items():
            if r.get("status") != "measured":
                L.append(f"Numerics ({_dtype_label(dt)}): {r.get('status')}")
                continue
            c = r["curves"]
            L.append(f"Numerics ({_dtype_label(dt)}) vs CPU: loss max rel diff {_sci(r['loss_max_rel'])}, grad norm "
                     f"{_sci(r['grad_norm_max_rel'])}" +
                     (f", compiled loss {_sci(r['compiled_loss_max_rel'])}" if "compiled_loss_max_rel" in r else "") +
                     f" (tolerance {r['curve_tolerance']:g}); first-step module outputs: tolerance "
                     f"{r['module_tolerance']:g}")
            L.append(f"  loss   cpu {c['loss_cpu'][0]:.5f} -> {c['loss_cpu'][-1]:.5f}   neuron "
                     f"{c['loss_neuron'][0]:.5f} -> {c['loss_neuron'][-1]:.5f}" +
                     (f"   compiled {c['loss_compiled'][0]:.5f} -> {c['loss_compiled'][-1]:.5f}"
                      if c.get("loss_compiled") else ""))
            fe, w = r.get("first_exceeding"), r.get("worst_module")
            if fe:
                L.append(f"  error first appears in: {fe['module']} ({fe['type']}) max abs {_sci(fe['max_abs'])}, rel "
                         f"{_sci(fe['max_rel'])}, inputs rel {_sci(fe['input_max_rel'])}")
            elif w:
                L.append(f"  all {len(r['modules'])} module outputs within tolerance; worst: {w['module']} "
                         f"({w['type']}) rel {_sci(w['max_rel'])}")
            if r.get("gradients"):
                g = r["gradients"][0]
                note = " (a gradient that is ~0 on both sides, against the model's largest)" if g.get("near_zero") else ""
                L.append(f"  first-step gradients: worst {g['parameter']} rel {_sci(g['max_rel'])}{note}")
        L.append("")
        L.append("Performance (mean time per training step after the first; the first step is reported apart)")
        dts = list(d["performance"])
        L.append(f"  {'':<22}" + "".join(f"{_dtype_label(x):>22}" for x in dts))
        for key, label in (("cpu_eager", "cpu eager"), ("neuron_eager", "neuron eager"),
                           ("neuron_compiled", "neuron compiled")):
            L.append(f"  {label:<22}" + "".join(f"{_ms((d['performance'][x].get(key) or {}).get('step_s')):>22}"
                                                 for x in dts))
        row = []
        for x in dts:
            fc = (d["performance"][x].get("neuron_compiled") or {}).get("first_call") or {}
            row.append(_ms(fc.get("total_s")) if fc.get("total_s") else "-")
        L.append(f"  {'first compiled step':<22}" + "".join(f"{v:>22}" for v in row))
        sh = d.get("shapes")
        if sh and sh.get("rows"):
            L.append(f"Shapes ({_dtype_label(sh['dtype'])} compiled, example {tuple(sh.get('base', []))}): "
                     f"{sh.get('recompiles', 0)} recompiles")
            for r in sh["rows"]:
                shp = tuple(r["shape"]) if isinstance(r["shape"], list) else r["shape"]
                L.append(f"  {str(shp):<20} {_ms(r['seconds']):>10}  " +
                         (f"compiled {r['new_graphs']} graphs" if r["recompiled"] else "reused") +
                         ("  (failed with automatic dynamic shapes first)" if r.get("default_error") else ""))
            if sh.get("recommendation"):
                L.append(f"  advice: {sh['recommendation']}")
        for dt, k in d["kernels"].items():
            if not k.get("available"):
                L.append(f"Top kernels ({_dtype_label(dt)}): {k.get('reason')}")
                continue
            for e in k.get("errors", []):
                L.append(f"Top kernels ({_dtype_label(dt)}): the profiler failed ({e})")
            for label in ("eager", "compiled"):
                rows = (k.get(label) or {}).get("kernels")
                if not rows:
                    continue
                L.append(f"Top kernels ({_dtype_label(dt)} {label}, {k[label]['steps']} steps, device "
                         f"{_ms(k[label]['device_s'])} of wall {_ms(k[label]['wall_s'])})")
                for r in rows[:8]:
                    L.append(f"  {str(r.get('name'))[:44]:<44} {int(r.get('calls', 0)):>6} calls "
                             f"{float(r.get('total_us', 0)) / 1e3:>9.2f} ms {100 * float(r.get('share', 0)):>5.1f}%"
                             + (f" {float(r['gflops']):>7.1f} GFLOP/s" if r.get("gflops") else "")
                             + (f" {float(r['gbps']):>6.1f} GB/s" if r.get("gbps") else ""))
        mem = d.get("memory")
        if mem:
            L.append(f"Memory: parameters {_gib(mem['parameters'])}, gradients {_gib(mem['gradients'])}, optimizer "
                     f"state {_gib(mem['optimizer_state'])}; peak allocated on core {mem['device_index']} "
                     f"{_gib(mem['peak_allocated'])} of {_gib(mem['device_capacity'])}")
        L.append("Phases: " + ", ".join(
            f"{p['name']} {_dtype_label(p['dtype']) if p['dtype'] else ''} {p['status']} {p['seconds']:.1f} s".replace(
                "  ", " ") for p in d["phases"]))
        for p in d["phases"]:
            if p["status"] == "error":
                L.append(f"  error in {p['name']} ({p['dtype']}): {p['error']['type']}: "
                         f"{_first_line(p['error']['message'])}")
        L.append(f"Total: {d.get('total_seconds', 0):.1f} s")
        return "\n".join(L)

    def __str__(self) -> str:
        return self.summary()

    # -- files -----------------------------------------------------------------------------
    def to_json(self, path: Optional[str] = None, indent: int = 1) -> str:
        """The whole report as JSON (infinities as the strings "inf"); also
        written to ``path`` when given."""
        text = json.dumps(_jsonable(self.data), indent=indent)
        if path:
            _write(path, text)
        return text

    def to_html(self, path: str) -> str:
        """Writes one self-contained HTML page (plots embedded as PNG) and
        returns its path."""
        from .html import render

        _write(path, render(self))
        return path


def _dtype_label(d: Optional[str]) -> str:
    return {"bfloat16": "bfloat16 autocast", "float16": "float16 autocast"}.get(d or "", d or "")


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    if isinstance(x, (int, str, bool)) or x is None:
        return x
    return str(x)
