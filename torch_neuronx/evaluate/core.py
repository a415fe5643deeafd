"""evaluate(): the phases of an evaluation and the report they fill.

Per compute dtype: train on the CPU (the reference), on neuron eagerly
(ops, numerics, step time) and on neuron compiled (compile time, step
time, numerics), then the shape sweep and the profiler. Every phase is
isolated: one that raises is recorded with its error and the others still
run, so a model that fails to compile still gets its ops and numerics.
"""
from __future__ import annotations

import gc
import os
import platform
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import torch

from . import numerics, ops, perf
from .report import EvaluationReport
from .workload import TrainRun, Workload, describe_inputs, dtype_name, to_device

DtypeArg = Union[str, torch.dtype, Sequence[Union[str, torch.dtype]]]


def _bar(desc: str, total: int, enabled: bool):
    if enabled:
        try:
            from tqdm.auto import tqdm

            return tqdm(total=total, desc=f"{desc:<26}", unit="step", leave=True, file=sys.stderr,
                        dynamic_ncols=True)
        except ImportError:
            pass
    return _NoBar()


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str) -> None:
        pass

    def close(self) -> None:
        pass


class _Phase:
    """Times one phase and keeps its error instead of raising it."""

    def __init__(self, ev: "_Evaluation", name: str, dtype: Optional[str]) -> None:
        self.row = {"name": name, "dtype": dtype, "status": "ok", "seconds": 0.0, "error": None}
        ev.data["phases"].append(self.row)

    def __enter__(self) -> dict:
        self.t0 = time.perf_counter()
        return self.row

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.row["seconds"] = time.perf_counter() - self.t0
        if exc is None or not isinstance(exc, Exception):
            return False
        self.row["status"] = "error"
        lines = traceback.format_exception(exc_type, exc, tb)
        self.row["error"] = {"type": exc_type.__name__, "message": str(exc).strip() or exc_type.__name__,
                             "traceback": "".join(lines[-12:])}
        try:
            torch.neuron.synchronize()
        except Exception:
            pass  # a sticky device error was already recorded by the phase that hit it
        return True


def _skip(ev: "_Evaluation", name: str, dtype: Optional[str], why: str) -> None:
    ev.data["phases"].append({"name": name, "dtype": dtype, "status": "skipped", "seconds": 0.0,
                              "error": None, "reason": why})


class _Evaluation:
    def __init__(self, w: Workload, steps: int, dtypes: List[str], compile: bool, shapes: Optional[list],
                 progress: bool, profile: bool, compile_options: dict, out_dir: Optional[str],
                 name: Optional[str]) -> None:
        self.w, self.steps, self.dtypes, self.compile = w, steps, dtypes, compile
        self.shapes, self.progress, self.profile = shapes, progress, profile
        self.compile_options, self.out_dir = compile_options, out_dir
        n_params = sum(p.numel() for p in w.pristine.parameters())
        self.data: Dict[str, Any] = {
            "schema": 1,
            "model": {
                "name": name or w.name, "class": w.name, "parameters": n_params,
                "trainable_parameters": sum(p.numel() for p in w.pristine.parameters() if p.requires_grad),
                "inputs": describe_inputs(w.inputs),
                "targets": describe_inputs(w.targets, "target") if w.targets is not None else [],
                "optimizer": w.optimizer_desc, "loss": None,
                "float64_tensors": [n for n, t in list(w.pristine.named_parameters()) +
                                    list(w.pristine.named_buffers()) if t.dtype == torch.float64],
            },
            "config": {
                "steps": steps, "dtypes": dtypes, "compile": compile,
                "shapes": [list(s) if isinstance(s, (tuple, list)) else "custom" for s in shapes or []],
                "compile_options": compile_options,
            },
            "environment": _environment(),
            "phases": [], "ops": {}, "numerics": {}, "performance": {}, "shapes": None, "kernels": {},
            "memory": None,
        }

    # -- phases ----------------------------------------------------------------------------
    def run(self) -> EvaluationReport:
        t0 = time.perf_counter()
        for i, d in enumerate(self.dtypes):
            self.data["performance"][d] = {}
            cpu = self._cpu_phase(d)
            eager = self._eager_phase(d, cpu, measure_memory=(i == 0))
            try:
                self._numerics(d, cpu, eager)
            except Exception as e:  # never lose the other findings to the comparison itself
                self.data["numerics"][d] = {"status": f"not measured: {type(e).__name__}: {e}",
                                            "module_tolerance": numerics.MODULE_TOLERANCE[d],
                                            "curve_tolerance": numerics.CURVE_TOLERANCE[d]}
            compiled = None
            if self.compile:
                compiled = self._compiled_phase(d, cpu)
                if i == 0:
                    self._shapes_phase(d, compiled)
            elif i == 0 and self.shapes:
                _skip(self, "shapes", d, "compile=False: an eager device does not recompile per shape")
            if self.profile:
                self._profile_phase(d, eager, compiled)
            for r in (cpu, eager, compiled):
                if r is not None and r.get("run") is not None:
                    r["run"] = None
            del cpu, eager, compiled
            gc.collect()
            torch.neuron.empty_cache()
        self.data["model"]["loss"] = self.w.loss_desc
        self.data["total_seconds"] = time.perf_counter() - t0
        return EvaluationReport(self.data)

    def _cpu_phase(self, d: str) -> Dict[str, Any]:
        out: Dict[str, Any] = {"run": None}
        bar = _bar(f"cpu eager {d}", self.steps + 1, self.progress)
        with _Phase(self, "cpu eager", d):
            run = TrainRun(self.w, "cpu", d)
            out["run"] = run
            probe = numerics.ModuleProbe(run.model, "record")
            try:
                t = time.perf_counter()
                loss, g = run.step(on_grads=lambda: out.__setitem__("grads", numerics.snapshot_grads(run.model)))
            finally:
                probe.remove()
            out.update(probe=probe, first_loss=float(loss), first_grad_norm=float(g),
                       first_step_s=time.perf_counter() - t)
            bar.update(1)
            res = perf.timed_steps(run, self.steps, on_step=lambda: bar.update(1))
            out.update(res)
            self.data["performance"][d]["cpu_eager"] = _timing(out)
        bar.close()
        return out

    def _eager_phase(self, d: str, cpu: Dict[str, Any], measure_memory: bool) -> Dict[str, Any]:
        out: Dict[str, Any] = {"run": None}
        bar = _bar(f"neuron eager {d}", self.steps + 1, self.progress)
        with _Phase(self, "neuron eager", d):
            torch.neuron.synchronize()
            base_alloc = torch.neuron.memory_allocated()
            torch.neuron.reset_peak_memory_stats()
            run = TrainRun(self.w, "neuron", d)
            out["run"] = run
            recorder = ops.OpRecorder()
            tracker = ops.PhaseTracker(recorder)
            probe = numerics.ModuleProbe(run.model, "compare", reference=cpu.get("probe"))
            try:
                t = time.perf_counter()
                with recorder:
                    loss, g = run.step(phases=tracker, on_grads=lambda: out.__setitem__(
                        "grads", numerics.snapshot_grads(run.model)))
            finally:
                probe.remove()
            out.update(probe=probe, first_loss=float(loss), first_grad_norm=float(g),
                       first_step_s=time.perf_counter() - t)
            self.data["ops"][d] = ops.op_table(tracker)
            bar.update(1)
            res = perf.timed_steps(run, self.steps, on_step=lambda: bar.update(1))
            out.update(res)
            self.data["performance"][d]["neuron_eager"] = _timing(out)
            if measure_memory:
                state = self.w.state_bytes()
                state["optimizer_state"] = run.optimizer_state_bytes()
                props = torch.neuron.get_device_properties(torch.neuron.current_device())
                mem = perf.memory_fit(state, torch.neuron.max_memory_allocated(), int(props.total_memory))
                free, total = torch.neuron.mem_get_info()
                mem.update(baseline_allocated=base_alloc, peak_reserved=torch.neuron.max_memory_reserved(),
                           free=free, total=total, device=props.name, device_index=torch.neuron.current_device(),
                           device_count=torch.neuron.device_count())
                self.data["memory"] = mem
        bar.close()
        return out

    def _compiled_phase(self, d: str, cpu: Dict[str, Any]) -> Dict[str, Any]:
        out: Dict[str, Any] = {"run": None}
        bar = _bar(f"neuron compiled {d}", self.steps + 1, self.progress)
        perf_d = self.data["performance"][d]
        with _Phase(self, "neuron compiled", d):
            import torch._dynamo

            torch._dynamo.reset()
            torch.neuron.reset_dynamo_metrics()
            torch.neuron.reset_peak_memory_stats()
            run = TrainRun(self.w, "neuron", d, compiled=True, compile_options=self.compile_options)
            first: Dict[str, Any] = {}
            perf_d["neuron_compiled"] = {"first_call": first}
            # The first call of each compiled part compiles it; timed apart.
            t = time.perf_counter()
            loss = run.forward_loss(run.inputs, run.targets)
            torch.neuron.synchronize()
            first["forward_s"] = time.perf_counter() - t
            t = time.perf_counter()
            loss.backward()
            torch.neuron.synchronize()
            first["backward_s"] = time.perf_counter() - t
            from .workload import grad_norm

            g = grad_norm(run.model)
            if run.opt is not None:
                t = time.perf_counter()
                try:
                    run.opt_step()
                except Exception as e:  # the step still runs, eagerly, and the report says why
                    first["optimizer_error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0]}"
                    run.opt_step = run.opt.step
                    run.opt_step()
                torch.neuron.synchronize()
                first["optimizer_s"] = time.perf_counter() - t
                run.opt.zero_grad(set_to_none=True)
            first["total_s"] = sum(v for k, v in first.items() if k.endswith("_s"))
            m = torch.neuron.get_dynamo_metrics()
            first["our_compile_s"] = m["compile_time_s"]
            first["graphs"] = len(m["graphs"])
            out.update(first_loss=float(loss.detach()), first_grad_norm=float(g), first_step_s=first["total_s"], run=run)
            bar.update(1)
            n_graphs, n_recompiles = len(m["graphs"]), len(m["recompiles"])
            res = perf.timed_steps(run, self.steps, on_step=lambda: bar.update(1))
            out.update(res)
            m = torch.neuron.get_dynamo_metrics()
            perf_d["neuron_compiled"].update(_timing(out))
            # Graphs built again while the inputs kept their shapes: something
            # that changes every step is baked into a program.
            perf_d["neuron_compiled"]["rebuilt_in_timed_steps"] = len(m["graphs"]) - n_graphs
            perf_d["neuron_compiled"]["rebuild_causes"] = sorted(
                {f"{r.get('graph')}: {r.get('cause')}" for r in m["recompiles"][n_recompiles:]})
            perf_d["neuron_compiled"].update(
                graphs=[{k: g_[k] for k in ("name", "kind", "nodes", "steps", "arena_bytes", "compile_time_s",
                                             "source")} for g_ in m["graphs"]],
                graphs_compiled=m["graphs_compiled"],
                eager_ops=m["eager_ops"], peak_allocated=torch.neuron.max_memory_allocated())
            out["numerics_curve"] = True
        bar.close()
        if out.get("losses") and cpu.get("losses") is not None and \
                self.data["numerics"].get(d, {}).get("status") == "measured":
            self._compiled_numerics(d, cpu, out)
        return out

    def _shapes_phase(self, d: str, compiled: Dict[str, Any]) -> None:
        if not self.shapes:
            return
        run = compiled.get("run")
        if run is None or compiled.get("losses") is None:
            _skip(self, "shapes", d, "the compiled run failed")
            return
        import torch._dynamo.config as dconfig

        bar = _bar("shapes (recompiles)", len(self.shapes), self.progress)
        rows: List[dict] = []
        self.data["shapes"] = {"dtype": d, "rows": rows}
        with _Phase(self, "shapes", d):
            attr = "recompile_limit" if hasattr(dconfig, "recompile_limit") else "cache_size_limit"
            old_limit = getattr(dconfig, attr)
            setattr(dconfig, attr, max(old_limit, len(self.shapes) + 2))
            gen = torch.Generator().manual_seed(0)
            base = [tuple(x.shape) for x in torch.utils._pytree.tree_leaves(self.w.inputs)
                    if isinstance(x, torch.Tensor)][0]
            self.data["shapes"]["base"] = list(base)
            old_auto = dconfig.automatic_dynamic_shapes
            try:
                for shape in self.shapes:
                    inputs, targets = self.w.inputs_for_shape(shape, gen)
                    inputs, targets = to_device(inputs, "neuron"), to_device(targets, "neuron")
                    label = list(shape) if isinstance(shape, (tuple, list)) else "custom"
                    row = {"shape": label}
                    try:
                        row.update(_shape_step(run, inputs, targets))
                    except Exception as e:
                        if not dconfig.automatic_dynamic_shapes:
                            raise
                        # Dynamo's default turns a dimension that changed into a
                        # symbol before the backend specialises it again; where
                        # that fails, say so and measure with static recompiles.
                        row["default_error"] = f"{type(e).__name__}: {_first_error_line(e)}"
                        dconfig.automatic_dynamic_shapes = False
                        self.data["shapes"]["automatic_dynamic_shapes"] = False
                        row.update(_shape_step(run, inputs, targets))
                    rows.append(row)
                    bar.update(1)
            finally:
                setattr(dconfig, attr, old_limit)
                dconfig.automatic_dynamic_shapes = old_auto
            recompiled = [r for r in rows if r["recompiled"]]
            self.data["shapes"]["recompiles"] = len(recompiled)
            shapes_seen = [base] + [tuple(r["shape"]) for r in rows if isinstance(r["shape"], list)]
            first = self.data["performance"][d].get("neuron_compiled", {}).get("first_call", {})
            costs = [r["seconds"] for r in recompiled] or ([first["total_s"]] if first.get("total_s") else [])
            self.data["shapes"]["distinct_shapes"] = len(set(shapes_seen))
            self.data["shapes"]["recommendation"] = perf.shape_advice(shapes_seen, costs)
        bar.close()

    def _profile_phase(self, d: str, eager: Dict[str, Any], compiled: Optional[Dict[str, Any]]) -> None:
        if perf.profiler_module() is None:
            self.data["kernels"][d] = {"available": False,
                                       "reason": "profiler not available (torch_neuronx.profiler is not in this build)"}
            return
        res: Dict[str, Any] = {"available": True}
        self.data["kernels"][d] = res
        for label, r in (("eager", eager), ("compiled", compiled)):
            if r is None or r.get("run") is None or r.get("losses") is None:
                continue
            trace = os.path.join(self.out_dir, f"trace-{d}-{label}.json") if self.out_dir else None
            with _Phase(self, f"profile {label}", d) as row:
                res[label] = perf.profile_steps(r["run"], 2, trace_path=trace)
            if row["status"] == "error":
                res.setdefault("errors", []).append(f"{label}: {row['error']['type']}: "
                                                    f"{_first_error_line(Exception(row['error']['message']))}")

    # -- numerics --------------------------------------------------------------------------
    def _numerics(self, d: str, cpu: Dict[str, Any], eager: Dict[str, Any]) -> None:
        tol = numerics.MODULE_TOLERANCE[d]
        ctol = numerics.CURVE_TOLERANCE[d]
        res: Dict[str, Any] = {"module_tolerance": tol, "curve_tolerance": ctol}
        self.data["numerics"][d] = res
        if "first_loss" not in cpu or "first_loss" not in eager:
            res["status"] = "not measured: the " + ("cpu" if "first_loss" not in cpu else "neuron eager") + \
                            " run failed"
            return
        cl = [cpu["first_loss"]] + cpu.get("losses", [])
        nl = [eager["first_loss"]] + eager.get("losses", [])
        cg = [cpu["first_grad_norm"]] + cpu.get("grad_norms", [])
        ng = [eager["first_grad_norm"]] + eager.get("grad_norms", [])
        n = min(len(cl), len(nl))
        res["curves"] = {"loss_cpu": cl, "loss_neuron": nl, "grad_norm_cpu": cg, "grad_norm_neuron": ng}
        res["loss_max_rel"] = numerics.relative_curve_error(nl[:n], cl[:n])
        res["grad_norm_max_rel"] = numerics.relative_curve_error(ng[:n], cg[:n])
        rows = eager["probe"].rows
        res["modules"] = rows
        res["modules_skipped"] = eager["probe"].skipped + cpu["probe"].skipped
        res["first_exceeding"] = numerics.first_exceeding(rows, tol)
        worst = max(rows, key=lambda r: r["max_rel"]) if rows else None
        res["worst_module"] = worst
        res["gradients"] = numerics.gradient_errors(eager.get("grads", {}), cpu.get("grads", {}))
        res["status"] = "measured"

    def _compiled_numerics(self, d: str, cpu: Dict[str, Any], comp: Dict[str, Any]) -> None:
        res = self.data["numerics"].setdefault(d, {})
        if "first_loss" not in cpu:
            return
        cl = [cpu["first_loss"]] + cpu.get("losses", [])
        kl = [comp["first_loss"]] + comp.get("losses", [])
        cg = [cpu["first_grad_norm"]] + cpu.get("grad_norms", [])
        kg = [comp["first_grad_norm"]] + comp.get("grad_norms", [])
        n = min(len(cl), len(kl))
        res.setdefault("curves", {}).update(loss_compiled=kl, grad_norm_compiled=kg)
        res["compiled_loss_max_rel"] = numerics.relative_curve_error(kl[:n], cl[:n])
        res["compiled_grad_norm_max_rel"] = numerics.relative_curve_error(kg[:n], cg[:n])


def _shape_step(run: TrainRun, inputs: Any, targets: Any) -> Dict[str, Any]:
    """One compiled training step at new input shapes: its time and the
    graphs it built for the forward and backward (the optimizer step does
    not see the input shapes)."""
    g0 = len(torch.neuron.get_dynamo_metrics()["graphs"])
    torch.neuron.synchronize()
    t = time.perf_counter()
    loss = run.forward_loss(inputs, targets)
    loss.backward()
    torch.neuron.synchronize()
    new = len(torch.neuron.get_dynamo_metrics()["graphs"]) - g0
    if run.opt is not None:
        run.opt_step()
        run.opt.zero_grad(set_to_none=True)
    float(loss.detach())
    return {"seconds": time.perf_counter() - t, "new_graphs": new, "recompiled": new > 0}


def _first_error_line(e: BaseException) -> str:
    """One line for an exception; for Dynamo's fake-tensor failures, the op
    and the error it got ("scaled_dot_product_attention: RuntimeError:
    Cannot call numel() ...")."""
    import re

    text = str(e)
    inner = re.search(r"got (\w+)\('(.*?)(?:\\n|'\))", text)
    fn = re.search(r"call_function <?(?:built-in function )?([\w.]+)", text)
    if inner:
        return (f"{fn.group(1)}: " if fn else "") + f"{inner.group(1)}: {inner.group(2)}"[:300]
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    return (" ".join(lines[:2]) if lines else type(e).__name__)[:400]


def _timing(r: Dict[str, Any]) -> Dict[str, Any]:
    return {"step_s": r.get("step_s"), "timed_steps": r.get("timed_steps"), "first_step_s": r.get("first_step_s")}


def _environment() -> Dict[str, Any]:
    try:
        props = torch.neuron.get_device_properties(torch.neuron.current_device())
        dev = {"name": props.name, "count": torch.neuron.device_count(), "memory_per_core": int(props.total_memory)}
    except Exception as e:
        dev = {"error": str(e)}
    return {"torch": torch.__version__, "python": platform.python_version(), "host_cpus": os.cpu_count(),
            "platform": platform.platform(), "device": dev,
            "kernel_threads": os.environ.get("TORCH_NEURONX_KERNEL_THREADS") or str(os.cpu_count())}


def evaluate(model: torch.nn.Module, example_inputs: Any, loss_fn: Optional[Callable] = None,
             optimizer: Any = None, steps: int = 10, dtype: DtypeArg = "float32", compile: bool = True,
             shapes: Optional[Sequence[Any]] = None, *, targets: Any = None, progress: bool = True,
             profile: bool = True, compile_options: Optional[dict] = None, out_dir: Optional[str] = None,
             name: Optional[str] = None) -> EvaluationReport:
    """Evaluates a model for the neuron device against PyTorch on the CPU.

    Trains ``steps`` + 1 steps from the model's current weights on the CPU,
    on neuron eagerly and (``compile=True``) on neuron with the loss and
    the optimizer step compiled by ``torch.compile(backend="neuron")``,
    each on its own deep copy, with the same data, in every ``dtype``
    given ("float32", or "bfloat16" / "float16" autocast; a list runs
    each). The report tells which ops ran natively or fell back to the CPU
    and whether the compiler can lower them, how far the device's numbers
    are from the CPU's (and in which module an error first appears), the
    step times, the compile time and per-shape recompiles, the top kernels
    (when torch_neuronx.profiler exists) and whether the training state fits
    a Trainium2 core; ``report.summary()`` starts with the verdict.

    ``example_inputs``: a tensor, a tuple of positional arguments or a dict
    of keyword arguments for ``model``. The loss is ``loss_fn(output)`` or,
    with ``targets``, ``loss_fn(output, *targets)``; without ``loss_fn`` it
    is ``output.loss`` (Hugging Face models given labels), a scalar output,
    or the mean square of the output. ``optimizer``: None (AdamW, lr 1e-3),
    an optimizer built on ``model.parameters()`` (cloned for every copy),
    a callable ``params -> optimizer``, or False (no optimizer step).
    ``shapes``: other input shapes to run the compiled step with (a tuple
    replaces the shape of every input shaped like the first one), to count
    recompiles. Dropout modules are disabled in every copy (the CPU and the
    device draw different random numbers). The device's op counters
    (``torch_neuronx.get_executed_ops()``) are cleared.
    """
    if steps < 1:
        raise ValueError("evaluate: steps must be at least 1")
    dtypes = [dtype_name(x) for x in (dtype if isinstance(dtype, (list, tuple)) else [dtype])]
    opts = {"cache": False}  # cold compiles: what a first run on the hardware costs
    opts.update(compile_options or {})
    w = Workload(model, example_inputs, loss_fn, optimizer, targets)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    ev = _Evaluation(w, steps, dtypes, compile, list(shapes) if shapes else None, progress, profile, opts, out_dir,
                     name)
    return ev.run()
