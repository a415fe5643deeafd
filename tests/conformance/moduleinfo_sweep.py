"""ModuleInfo conformance sweep: every ModuleInfo of PyTorch's ``module_db`` ×
(float32, bfloat16) × (training, eval), run on the CPU (the reference) and on
``neuron``: forward outputs, gradients of the inputs and of the parameters,
and the buffers after the forward (running statistics) are compared.

For each sample of the ModuleInfo's ``module_inputs_func`` (generated on the
CPU), the module is constructed on the CPU, cast to the dtype and put in the
mode; a second instance gets its state (``load_state_dict``) and is moved with
``.to("neuron")`` (a lazy module is moved first and initialised by a no-grad
forward on the device, then gets the state). The forward inputs are copied to
the device. Gradients are those of ``sum(output * fixed random weights)``. In
eval mode a no-grad forward with inputs that do not require grad is also
compared (that is where fast paths such as the transformer encoder's run).

Each (ModuleInfo, dtype, mode) is classified as in the OpInfo sweep:
native-pass, fallback-pass (the ATen ops that fell back are listed), mismatch
(the largest difference), error (the exception), crash (the worker died or
timed out: the task runs in a worker process, so a crash costs that task
only), skipped-cpu (the CPU reference raised for every sample).

Tolerances are the OpInfo sweep's ``TOLERANCES`` (float32 1e-4, bfloat16
2e-2, rtol and atol), with its float64 arbiter: a result that differs from
the CPU's but is within tolerance of a float64 CPU run of the same module (or
no further from it than the CPU's result) passes, and is recorded.
Modules whose results are random (dropout with p > 0, RReLU in training,
fractional max pooling without fixed samples) are compared by shape, dtype
and finiteness only; module_db sets dropout=0 for the transformer modules.

Usage (from the repository root):

  python tests/conformance/moduleinfo_sweep.py --full     # all of module_db; `make conformance`
  python tests/conformance/moduleinfo_sweep.py --modules nn.Linear,nn.LSTM --dtypes float32 -v

Results: build/conformance/modules/full.jsonl (one JSON line per task); --full
then regenerates docs/op-support.md and docs/op-support.json (key "modules")
through tools/gen_op_support.py.
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import os
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from opinfo_sweep import TOLERANCES, _build_id, _first_line, _Worker, pick_samples, run_parent  # noqa: E402

DTYPE_NAMES = ["float32", "bfloat16"]
MODES = ["train", "eval"]
MAX_SAMPLES = 16
TASK_TIMEOUT_S = 180.0
DEFAULT_WORKERS = 2


def task_key(name: str, mode: str) -> str:
    return f"{name}.{mode}"


class ModuleWorker(_Worker):
    """A worker process's state: module_db indexed by name, torch imported
    once. The comparison methods are the OpInfo worker's."""

    def __init__(self) -> None:
        import warnings

        warnings.simplefilter("ignore")
        import torch
        import torch_neuronx
        from torch.testing._internal.common_modules import module_db

        torch.set_num_threads(int(os.environ.get("CONFORMANCE_TORCH_THREADS", "1")))
        self.torch = torch
        self.tnx = torch_neuronx
        self.modules = {m.name: m for m in module_db}

    # -- what is random ------------------------------------------------------

    def _random_parts(self, mod, training: bool) -> list[str]:
        """Submodules whose forward draws random numbers in this mode."""
        nn = self.torch.nn
        out = []
        for name, m in mod.named_modules():
            label = f"{type(m).__name__}" + (f" ({name})" if name else "")
            if isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 and training:
                out.append(label)
            elif isinstance(m, nn.RReLU) and training:
                out.append(label)
            elif isinstance(m, (nn.FractionalMaxPool2d, nn.FractionalMaxPool3d)) and m._random_samples is None:
                out.append(label)
            elif isinstance(m, nn.MultiheadAttention) and m.dropout > 0 and training:
                out.append(label)
            elif isinstance(m, nn.RNNBase) and m.dropout > 0 and training and m.num_layers > 1:
                out.append(label)
        return out

    # -- one sample ------------------------------------------------------------

    def _build(self, mi, ci, dtype, training: bool, device: str, state=None, init_inputs=None):
        """The module of constructor input `ci`, in dtype and mode, on `device`
        with `state` (a CPU state dict) loaded. A lazy module on the device is
        initialised by a no-grad forward on `init_inputs` after the move."""
        torch = self.torch
        mod = mi.module_cls(*copy.deepcopy(ci.args), **copy.deepcopy(ci.kwargs)).to(dtype)
        mod.train(training)
        lazy = mi.is_lazy
        if device != "cpu":
            if lazy:
                mod.to(device)
                with torch.no_grad():
                    mod(*init_inputs[0], **init_inputs[1])
                if state is not None:
                    mod.load_state_dict(state)
            else:
                if state is not None:
                    mod.load_state_dict(state)
                mod.to(device)
        else:
            if lazy:
                with torch.no_grad():
                    mod(*init_inputs[0], **init_inputs[1])
            if state is not None:
                mod.load_state_dict(state)
        return mod

    def _inputs(self, fi, device: str, cast=None):
        tree = self._to((tuple(fi.args), dict(fi.kwargs)), device, None, cast)
        return tree[0], tree[1]

    def _detached(self, tree):
        torch = self.torch
        from torch.utils._pytree import tree_map

        return tree_map(lambda x: x.detach() if isinstance(x, torch.Tensor) else x, tree)

    def _run(self, mod, args, kwargs, weights, want_grad: bool):
        """Forward, then (with weights) gradients w.r.t. the inputs and
        parameters that require grad. Returns (outputs, grads or None,
        buffers after the forward, weights used)."""
        torch = self.torch
        out = mod(*args, **kwargs)
        grads = None
        if want_grad:
            outs = self._diff_outputs(out)
            leaves = [t for t in self._leaves((args, kwargs)) if isinstance(t, torch.Tensor) and t.requires_grad]
            leaves += [p for p in mod.parameters() if p.requires_grad]
            if outs and leaves:
                if weights is None:
                    g = torch.Generator().manual_seed(4321)
                    weights = [torch.randn(o.shape, generator=g, dtype=torch.float32) for o in outs]
                if len(weights) != len(outs):
                    raise RuntimeError(f"{len(outs)} differentiable outputs, expected {len(weights)}")
                loss = sum((o * w.to(o.device, o.dtype)).sum() for o, w in zip(outs, weights))
                grads = list(torch.autograd.grad(loss, leaves, allow_unused=True))
        bufs = [b.detach() for _, b in sorted(mod.named_buffers())]
        return out, grads, bufs, weights

    def run_sample(self, mi, i, sample, dtype, dtype_name: str, training: bool, rec_notes: dict) -> dict | None:
        """One ModuleInput: None when it matches, else a problem dict. Raises
        _CpuFailed when the CPU reference itself fails."""
        torch = self.torch
        tnx = self.tnx
        ci, fi = sample.constructor_input, sample.forward_input
        desc = self._describe_fi(fi, sample.desc)
        cpu_in = self._inputs(fi, "cpu")
        try:
            torch.manual_seed(1000 + i)
            cpu_mod = self._build(mi, ci, dtype, training, "cpu", init_inputs=self._detached(cpu_in))
            state = {k: v.detach().clone() for k, v in cpu_mod.state_dict().items()}
            random = self._random_parts(cpu_mod, training)
            ref_out, ref_grads, ref_bufs, weights = self._run(cpu_mod, *cpu_in, None, True)
            ref_ng = None
            if not training:
                with torch.no_grad():
                    ref_ng = cpu_mod(*self._detached(cpu_in)[0], **self._detached(cpu_in)[1])
        except Exception as e:  # noqa: BLE001
            raise _CpuFailed(_first_line(e)) from e
        if random:
            rec_notes["random"] = sorted(set(rec_notes.get("random", [])) | set(random))
        values = not random
        # The device run; asynchronous errors surface at the synchronize.
        tnx.clear_op_tracking()
        stage = "moving the module and inputs to neuron"
        try:
            dev_in = self._inputs(fi, "neuron")
            dev_mod = self._build(mi, ci, dtype, training, "neuron", state=state, init_inputs=self._detached(dev_in))
            torch.neuron.synchronize()
            stage = "forward/backward"
            out, grads, bufs, _ = self._run(dev_mod, *dev_in, weights, ref_grads is not None)
            torch.neuron.synchronize()
            ng = None
            if ref_ng is not None:
                stage = "no-grad forward"
                with torch.no_grad():
                    ng = dev_mod(*self._detached(dev_in)[0], **self._detached(dev_in)[1])
                torch.neuron.synchronize()
        except Exception as e:  # noqa: BLE001
            self._fallback.update(tnx.get_fallback_ops())
            self._recover()
            return {"sample": i, "kind": "error", "shape": desc, "what": f"{stage}: {_first_line(e)}"}
        self._fallback.update(tnx.get_fallback_ops())

        f64_cache: list = []

        def f64() -> dict | None:
            if not f64_cache:
                f64_cache.append(self._f64_module_run(mi, ci, training, state, fi, weights))
            return f64_cache[0]

        def arbiter(where, k, g, r, rtol, atol) -> bool:
            ref = self._f64_leaf(f64(), where, k, g)
            if ref is None or not g.is_floating_point():
                return False
            try:
                torch.testing.assert_close(g.double(), ref, rtol=rtol, atol=atol, equal_nan=True, check_dtype=False)
                self._arbitrated.append({"sample": i, "where": where, "shape": desc, "how": "within float64 tolerance"})
                return True
            except AssertionError:
                pass
            exact = ref.to(g.dtype).double()

            def err(t) -> float:
                d = (t.double() - exact).abs()
                d = torch.where((t.double() == exact) | (t.isnan() & exact.isnan()), torch.zeros_like(d), d)
                return float(d.nan_to_num(nan=math.inf).max()) if d.numel() else 0.0

            e_dev, e_cpu = err(g), err(r)
            if not (math.isfinite(e_dev) and e_dev <= e_cpu):
                return False
            self._arbitrated.append({"sample": i, "where": where, "shape": desc,
                                     "how": f"device error {e_dev:.3g} <= CPU error {e_cpu:.3g} (vs float64)"})
            return True

        diff = self._compare(ref_out, out, dtype_name, values, "output", arbiter)
        if diff is None and not values:
            diff = self._finite_pattern(ref_out, out, "output")
        if diff is None and ref_grads is not None:
            diff = self._compare(ref_grads, grads, dtype_name, values, "grad", arbiter)
        if diff is None:
            diff = self._compare(ref_bufs, bufs, dtype_name, values, "buffers", arbiter)
        if diff is None and ref_ng is not None:
            diff = self._compare(ref_ng, ng, dtype_name, values, "no_grad_output", arbiter)
        if diff is None:
            return None
        if diff["what"] == "values" and "at" in diff:
            diff.update(self._f64_point(f64(), diff))
            sides = {"output": (ref_out, out), "grad": (ref_grads, grads), "buffers": (ref_bufs, bufs),
                     "no_grad_output": (ref_ng, ng)}
            diff.update(self._normwise(f64(), diff, sides))
        diff.pop("k", None)
        diff.pop("_shape", None)
        self._recover()
        return {"sample": i, "kind": diff.pop("kind", "mismatch"), "shape": desc, **diff}

    def _finite_pattern(self, ref, got, where: str) -> dict | None:
        """For random results: NaN/inf where the CPU has none is a mismatch."""
        torch = self.torch
        for k, (r, g) in enumerate(zip(self._leaves(ref), self._leaves(got))):
            if isinstance(r, torch.Tensor) and r.is_floating_point() and r.numel():
                if bool(r.detach().isfinite().all()) and not bool(g.detach().cpu().isfinite().all()):
                    return {"where": f"{where}[{k}]", "what": "non-finite values where the CPU has none"}
        return None

    def _f64_module_run(self, mi, ci, training: bool, state, fi, weights) -> dict | None:
        """The same module, state and inputs on the CPU in float64:
        {"output", "grad", "buffers", "no_grad_output": leaves}, or None."""
        torch = self.torch
        try:
            args, kwargs = self._inputs(fi, "cpu", cast=torch.float64)
            mod = self._build(mi, ci, torch.float64, training, "cpu", init_inputs=self._detached((args, kwargs)))
            mod.load_state_dict(state)
            out, grads, bufs, _ = self._run(mod, args, kwargs, [w.double() for w in weights] if weights else None,
                                            weights is not None)
            res = {"output": self._leaves(out), "grad": self._leaves(grads) if grads is not None else None,
                   "buffers": bufs}
            if not training:
                with torch.no_grad():
                    res["no_grad_output"] = self._leaves(mod(*self._detached(args), **self._detached(kwargs)))
            return res
        except Exception:  # noqa: BLE001
            return None

    def _f64_point(self, f64: dict | None, diff: dict) -> dict:
        """The float64 value of the worst element of a value mismatch."""
        if f64 is None:
            return {}
        where = diff["where"].split("[")[0]
        ref = self._f64_leaf(f64, where, diff.get("k", 0), self.torch.empty(diff.get("_shape", ())))
        if ref is None or not diff.get("at") and ref.dim():
            return {}
        exact = float(ref[tuple(diff["at"])])
        return {"f64": exact, "neuron_err": abs(diff["got"] - exact), "cpu_err": abs(diff["expected"] - exact)}

    def _normwise(self, f64: dict | None, diff: dict, sides: dict) -> dict:
        """For a value mismatch: ||x - x64|| / ||x64|| of the whole mismatching
        result, for the device and for the CPU (is the device's error of the
        CPU's order, i.e. rounding, or larger?)."""
        torch = self.torch
        where = diff["where"].split("[")[0]
        k = diff.get("k", 0)
        ref, got = sides.get(where, (None, None))
        if f64 is None or ref is None:
            return {}
        rl, gl = self._leaves(ref), self._leaves(got)
        e = self._f64_leaf(f64, where, k, rl[k]) if k < len(rl) and isinstance(rl[k], torch.Tensor) else None
        if e is None:
            return {}
        e = e.double()
        fin = e.isfinite()
        n = float(e[fin].norm()) or 1.0

        def rel(t) -> float:
            return float((t.detach().cpu().double() - e)[fin].norm()) / n

        return {"neuron_normwise": rel(gl[k]), "cpu_normwise": rel(rl[k])}

    def _describe_fi(self, fi, desc: str) -> str:
        class _S:
            input = fi.args[0] if fi.args else None
            args = tuple(fi.args[1:])
            kwargs = dict(fi.kwargs)
        return ((desc + ": ") if desc else "") + self._describe(_S)

    # -- one task --------------------------------------------------------------

    def run_task(self, name: str, dtype_name: str, mode: str, max_samples: int) -> dict:
        torch = self.torch
        mi = self.modules[name]
        dtype = getattr(torch, dtype_name)
        training = mode == "train"
        t0 = time.perf_counter()
        rec: dict[str, Any] = {"op": name, "variant": mode, "dtype": dtype_name,
                               "in_moduleinfo_dtypes": dtype in mi.dtypes}
        try:
            torch.manual_seed(0)
            samples = pick_samples(mi.module_inputs_func(mi, device="cpu", dtype=dtype, requires_grad=True,
                                                         training=training), max_samples)
        except Exception as e:  # noqa: BLE001
            rec.update(status="skipped-cpu", reason="module_inputs_func raised: " + _first_line(e))
            return rec
        self._fallback: set[str] = set()
        self._arbitrated: list[dict] = []
        notes: dict = {}
        problems: list[dict] = []
        ran = skipped = 0
        cpu_err = None
        for i, sample in enumerate(samples):
            try:
                p = self.run_sample(mi, i, sample, dtype, dtype_name, training, notes)
            except _CpuFailed as e:
                skipped += 1
                cpu_err = cpu_err or str(e)
                continue
            ran += 1
            if p is not None:
                problems.append(p)
        rec["samples"] = ran
        rec["samples_cpu_failed"] = skipped
        rec["fallback_ops"] = sorted(self._fallback)
        rec["time_s"] = round(time.perf_counter() - t0, 3)
        if notes.get("random"):
            rec["random"] = notes["random"]
        if ran == 0:
            rec.update(status="skipped-cpu", reason=("CPU reference raised: " + cpu_err) if cpu_err else "no samples")
            return rec
        mism = [p for p in problems if p["kind"] == "mismatch"]
        errs = [p for p in problems if p["kind"] == "error"]
        if mism:
            p = max(mism, key=lambda q: q.get("max_abs_diff", 0.0))
            rec["status"] = "mismatch"
            if "max_abs_diff" in p:
                rec["max_abs_diff"] = p["max_abs_diff"]
                what = f"max abs diff {p['max_abs_diff']:.3g}"
                if p.get("got") is not None:
                    what += f" (got {p['got']:.6g}, expected {p['expected']:.6g}"
                    if "f64" in p:
                        what += f", float64 {p['f64']:.6g}"
                    what += ")"
                if "neuron_normwise" in p:
                    what += (f"; normwise error vs float64: neuron {100 * p['neuron_normwise']:.2g}%, "
                             f"CPU {100 * p['cpu_normwise']:.2g}%")
            else:
                what = p["what"]
            rec["reason"] = f"{p['where']}: {what}; sample {p['sample']}: {p['shape']}"
        elif errs:
            p = errs[0]
            rec["status"] = "error"
            rec["reason"] = f"{p['what']}; sample {p['sample']}: {p['shape']}"
        elif self._fallback:
            rec["status"] = "fallback-pass"
            rec["reason"] = "falls back: " + ", ".join(sorted(self._fallback))
        else:
            rec["status"] = "native-pass"
            rec["reason"] = ""
        if rec.get("random") and rec["status"] in ("native-pass", "fallback-pass"):
            rec["reason"] = (rec["reason"] + "; " if rec["reason"] else "") + \
                "values not compared (random: " + ", ".join(rec["random"]) + ")"
        rec["failed_samples"] = f"{len(mism) + len(errs)}/{ran}" if problems else ""
        if self._arbitrated:
            rec["cpu_less_accurate"] = self._arbitrated[:4]
        rec["problems"] = problems[:4]
        return rec


class _CpuFailed(Exception):
    pass


def worker_main() -> int:
    """Reads tasks (JSON lines) on stdin, writes one result line per task on
    the protocol fd (the original stdout; anything the modules print goes to stderr)."""
    import faulthandler

    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    faulthandler.enable(file=sys.stderr, all_threads=True)
    w = ModuleWorker()
    proto.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        task = json.loads(line)
        print(f"== {task['key']} {task['dtype']}", file=sys.stderr, flush=True)
        try:
            rec = w.run_task(task["op"], task["dtype"], task["variant"], task.get("max_samples", MAX_SAMPLES))
        except Exception as e:  # noqa: BLE001  (a harness bug must not lose the task)
            import traceback

            traceback.print_exc()
            rec = {"op": task["op"], "variant": task["variant"], "dtype": task["dtype"], "status": "error",
                   "reason": "harness: " + _first_line(e)}
        rec["key"] = task["key"]
        proto.write(json.dumps(rec, default=str) + "\n")
    return 0


def list_tasks(names: list[str] | None, dtypes: list[str], modes: list[str]) -> list[dict]:
    from torch.testing._internal.common_modules import module_db

    tasks = []
    for mi in module_db:
        if names and mi.name not in names:
            continue
        for dn in dtypes:
            for mode in modes:
                tasks.append({"key": task_key(mi.name, mode), "op": mi.name, "variant": mode, "dtype": dn})
    if names:
        known = {mi.name for mi in module_db}
        missing = [n for n in names if n not in known]
        if missing:
            raise SystemExit(f"no such ModuleInfo: {', '.join(missing)}")
    return tasks


def sweep(names: list[str] | None, dtypes: list[str], modes: list[str], out_path: str, workers: int,
          timeout: float, max_samples: int, verbose: bool) -> tuple[list[dict], dict]:
    """Runs the tasks in worker processes; returns (records, meta)."""
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    if os.path.exists(out_path):
        os.remove(out_path)
    tasks = list_tasks(names, dtypes, modes)
    for t in tasks:
        t["max_samples"] = max_samples
    print(f"moduleinfo: {len(tasks)} ModuleInfo × dtype × mode tasks, {workers} workers, "
          f"results in {os.path.relpath(out_path, ROOT)}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    before = _build_id()
    results = run_parent(tasks, out_path, workers, timeout, max_samples, verbose, script=os.path.abspath(__file__))
    wall = time.monotonic() - t0
    build = _build_id()
    if build.get("extension_mtime") != before.get("extension_mtime"):
        build["rebuilt_during_sweep"] = True
    meta = {"wall_time_s": round(wall, 1), "workers": workers, "max_samples": max_samples, "timeout_s": timeout,
            "dtypes": dtypes, "modes": modes, "tolerances": {d: TOLERANCES[d] for d in dtypes}, "build": build}
    with open(out_path[: -len(".jsonl")] + ".meta.json", "w") as f:
        json.dump(meta, f, indent=1)
    counts: dict[str, int] = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"moduleinfo: {len(results)} results in {wall:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=sys.stderr)
    return results, meta


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true", help="every ModuleInfo (writes docs/op-support.*)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--modules", help="comma-separated ModuleInfo names (nn.Linear,...)")
    ap.add_argument("--dtypes", default=",".join(DTYPE_NAMES))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    ap.add_argument("--timeout", type=float, default=TASK_TIMEOUT_S, help="seconds per task")
    ap.add_argument("--max-samples", type=int, default=MAX_SAMPLES)
    ap.add_argument("--out", help="results (JSON lines); default build/conformance/modules/<full|adhoc>.jsonl")
    ap.add_argument("--no-docs", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    if a.worker:
        return worker_main()
    names = a.modules.split(",") if a.modules else None
    out = a.out or os.path.join(ROOT, "build", "conformance", "modules", ("full" if a.full else "adhoc") + ".jsonl")
    sweep(names, a.dtypes.split(","), a.modes.split(","), out, a.workers, a.timeout, a.max_samples, a.verbose)
    if a.full and not names and not a.no_docs:
        sys.path.insert(0, os.path.join(ROOT, "tools"))
        import gen_op_support

        gen_op_support.generate_from_last()
    return 0


if __name__ == "__main__":
    sys.exit(main())
