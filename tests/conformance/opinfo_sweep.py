"""OpInfo conformance sweep: every OpInfo of PyTorch's ``op_db`` × dtype, run
on the CPU (the reference) and on ``neuron``, outputs and gradients compared.

Each (OpInfo, dtype) is classified:

  native-pass    every sample matches and nothing fell back to the CPU
  fallback-pass  every sample matches, but some ATen op ran through the CPU fallback
  mismatch       a value, shape or dtype differs from the CPU (and the value is not within
                 tolerance of a float64 CPU run either: when it is, the CPU is the inaccurate side),
                 or an output's sizes, strides, dtype or aliasing differ from the op's meta
                 function (each sample is run again under torch_neuronx.meta_check)
  error          neuron raised where the CPU did not
  crash          the worker process died (signal, abort) or exceeded the per-task timeout
  skipped-cpu    the CPU reference raised for every sample (nothing to compare with)

Usage (from the repository root):

  python tests/conformance/opinfo_sweep.py --full      # all of op_db; `make conformance`
  python tests/conformance/opinfo_sweep.py --subset    # ~40 common ops, float32; part of `make test`
  python tests/conformance/opinfo_sweep.py --ops add,nn.functional.gelu --dtypes float32,bfloat16 -v
  python tests/conformance/opinfo_sweep.py --ops ldexp --dtypes bfloat16 --bisect 6
      # triage: which ATen op of sample 6 gives a different result on neuron

Ops run in worker subprocesses (``--worker``; 2 by default, this machine has 2
cores) that receive one task at a time, so a segfault, abort or hang costs only
the task it happened in: that task is recorded as ``crash`` and a fresh worker
takes the rest. Every finished task is appended as a JSON line to
``build/conformance/<mode>.jsonl`` (``--resume`` skips tasks already there).
``--full`` then regenerates docs/op-support.md and docs/op-support.json through
tools/gen_op_support.py, which also reads the known-gaps list
(tests/conformance/known_gaps.py).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import selectors
import signal
import subprocess
import sys
import time
from collections import deque
from itertools import islice
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# ---- what is swept ----------------------------------------------------------

DTYPE_NAMES = ["float32", "bfloat16", "float16", "int64", "bool"]
MAX_SAMPLES = 32         # first N samples of each OpInfo × dtype
TASK_TIMEOUT_S = 120.0   # per OpInfo × dtype, enforced by the parent (grid_sampler_3d float16 needs ~45 s on the CPU alone)
DEFAULT_WORKERS = 2

# Tolerances by dtype (torch.testing.assert_close rtol/atol). float32: the
# device sums in a different order (blocked, multithreaded reductions and
# GEMM), so it gets more room than assert_close's default 1.3e-6/1e-5.
# bfloat16: 8 mantissa bits, and intermediate roundings differ between the
# CPU's and the device's kernels; 2e-2 is about 2.5 machine epsilons.
# float16 gets the same 2.5 epsilons (2.5e-3): it computes through float32
# on both sides, but composite ops (most gradients) round after every step.
# float64 runs at float32 precision on the device (documented), so it gets the
# float32 tolerance. Integer and bool results must be exact.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-4),
    "bfloat16": (2e-2, 2e-2),
    "float16": (2.5e-3, 2.5e-3),
    "float64": (1e-4, 1e-4),
    "complex64": (1e-4, 1e-4),
    "complex128": (1e-4, 1e-4),
}

# Ops whose values are random (or uninitialised): only shape and dtype are
# compared, for outputs and gradients.
NONDETERMINISTIC = {
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal",
    "uniform", "rand", "randn", "rand_like", "randn_like", "randint", "randint_like",
    "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout", "nn.functional.rrelu",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
    "svd_lowrank", "pca_lowrank",  # random projections inside
}

# Sort-like ops: equal keys may come out in either order, so indices are
# checked by the values they select and gradients are compared only when the
# input has no ties. Value: (position of `dim` in the sample's args or None,
# the default dim).
TIES: dict[str, tuple[int | None, int | None]] = {
    "sort": (0, -1), "argsort": (0, -1), "msort": (None, 0), "topk": (1, -1), "kthvalue": (1, -1),
    "median": (0, None), "nanmedian": (0, None), "mode": (0, -1),
}

# The `--subset` selection (`make test`): common ops a model uses, float32
# only. Entries are OpInfo names (all variants) or "name.variant".
# tests/conformance/test_conformance_subset.py fails on a mismatch or crash of
# any of them, and on an error of one that has a native kernel.
SUBSET: tuple[str, ...] = (
    # pointwise
    "add", "sub", "mul", "div.no_rounding_mode", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "tanh",
    "sigmoid", "pow", "clamp", "where", "maximum", "eq", "lt", "lerp", "addcmul",
    # activations
    "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu",
    # reductions, row ops
    "sum", "mean", "amax", "argmax", "var", "cumsum", "softmax", "log_softmax",
    # linear algebra
    "mm", "bmm", "addmm", "matmul", "nn.functional.linear",
    # shapes, indexing, normalisation, losses, dropout
    "cat", "transpose", "reshape", "index_select", "masked_fill", "nn.functional.embedding",
    "nn.functional.layer_norm", "nn.functional.cross_entropy", "nn.functional.dropout",
)


# Samples generated before choosing: a few OpInfos yield hundreds.
SAMPLE_POOL = 256


def pick_samples(gen, max_samples: int) -> list:
    """Up to max_samples of an OpInfo's samples, spread evenly over (the
    first SAMPLE_POOL of) its sequence rather than the first ones: some
    OpInfos list their degenerate cases first (svd's first 32 samples are
    all empty matrices). Deterministic, so the meta-device pass that finds
    pinned leaves and --bisect see the same samples."""
    pool = list(islice(iter(gen), SAMPLE_POOL))
    if len(pool) <= max_samples:
        return pool
    step = (len(pool) - 1) / (max_samples - 1) if max_samples > 1 else 0
    return [pool[round(i * step)] for i in range(max_samples)]


def has_native_kernel(op_name: str, native_ops: list[str]) -> bool:
    """Whether an OpInfo's own ATen op has a native kernel ("index_select" ->
    aten::index_select, "nn.functional.gelu" -> aten::gelu, "softmax" ->
    aten::_softmax, "nn.functional.layer_norm" -> aten::native_layer_norm,
    "linalg.vector_norm" -> aten::linalg_vector_norm; in-place and out=
    overloads count)."""
    def base(n: str) -> str:
        n = n.replace("aten::", "").split(".")[0].strip("_")
        return n[len("native_"):] if n.startswith("native_") else n

    name = op_name.split(".", 2)[-1] if op_name.startswith("nn.functional.") else op_name.replace(".", "_")
    return base(name) in {base(n) for n in native_ops}


# ---- the worker: runs one OpInfo × dtype ------------------------------------


def _op_key(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def _first_line(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0] if msg else ''}"[:300]


class _Worker:
    """A worker process's state: op_db indexed by key, torch imported once."""

    def __init__(self) -> None:
        import warnings

        warnings.simplefilter("ignore")
        import torch
        import torch_neuronx
        from torch.testing._internal.common_methods_invocations import op_db

        torch.set_num_threads(int(os.environ.get("CONFORMANCE_TORCH_THREADS", "1")))
        self.torch = torch
        self.tnx = torch_neuronx
        self.ops = {_op_key(op): op for op in op_db}

    # -- moving samples ------------------------------------------------------

    def _leaves(self, tree) -> list:
        from torch.utils._pytree import tree_flatten

        return tree_flatten(tree)[0]

    def _pinned(self, op, dtype, want_grad: bool, max_samples: int, seed: int) -> list:
        """For each sample, which leaves the OpInfo itself keeps on the CPU
        whatever the device (tensor_split's index tensor, say). Found by
        generating the samples on the meta device: a leaf that is still a CPU
        tensor (or the string/device "cpu") there is pinned. [] per sample
        when meta generation fails; then every tensor moves."""
        torch = self.torch
        try:
            torch.manual_seed(seed)
            metas = pick_samples(op.sample_inputs("meta", dtype, requires_grad=want_grad), max_samples)
        except Exception:  # noqa: BLE001
            return []
        out = []
        for s in metas:
            pins = []
            for x in self._leaves((s.input, s.args, s.kwargs)):
                if isinstance(x, torch.Tensor):
                    pins.append(x.device.type == "cpu")
                elif isinstance(x, torch.device):
                    pins.append(x.type == "cpu")
                else:
                    pins.append(x == "cpu" if isinstance(x, str) else False)
            out.append(pins)
        return out

    def _to(self, tree, device: str, pins: list | None = None, cast=None):
        """Copies every tensor of `tree` to `device` (leaves keep
        requires_grad; `cast` converts floating tensors) and rewrites device
        arguments that say "cpu". Leaves marked in `pins` stay on the CPU."""
        torch = self.torch
        from torch.utils._pytree import tree_flatten, tree_unflatten

        leaves, spec = tree_flatten(tree)
        if pins is not None and len(pins) != len(leaves):
            pins = None
        out = []
        for k, x in enumerate(leaves):
            dev = "cpu" if (pins and pins[k]) else device
            if isinstance(x, torch.Tensor):
                y = x.detach().clone() if dev == "cpu" else x.detach().to(dev)
                if cast is not None and y.is_floating_point():
                    y = y.to(cast)
                if y.is_floating_point() or y.is_complex():
                    y.requires_grad_(x.requires_grad)
                out.append(y)
            elif isinstance(x, torch.device) and x.type == "cpu":
                out.append(torch.device(dev))
            elif isinstance(x, str) and x == "cpu":
                out.append(dev)
            elif cast is not None and isinstance(x, torch.dtype) and x.is_floating_point:
                out.append(cast)
            else:
                out.append(x)
        return tree_unflatten(out, spec)

    # -- running ---------------------------------------------------------------

    def _diff_outputs(self, out) -> list:
        torch = self.torch
        return [t for t in self._leaves(out)
                if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]

    def _grads(self, sample, tree, out, weights) -> list:
        """Gradients of sum(output * weight) w.r.t. the tensor inputs that require grad."""
        torch = self.torch
        outs = self._diff_outputs(sample.output_process_fn_grad(out))
        leaves = [t for t in self._leaves(tree) if isinstance(t, torch.Tensor) and t.requires_grad]
        if len(outs) != len(weights):
            raise RuntimeError(f"{len(outs)} differentiable outputs, expected {len(weights)}")
        w = [x.to(o.device, o.dtype) for o, x in zip(outs, weights)]
        loss = sum((o * x).sum() for o, x in zip(outs, w))
        return list(torch.autograd.grad(loss, leaves, allow_unused=True))

    def _meta_check(self, op, sample, pins, weights) -> dict | None:
        """The sample again, on fresh device copies, under the FakeTensor
        cross-reference (torch_neuronx.meta_check): every native kernel's
        output sizes, strides, dtype and aliasing against its meta function.
        A mismatch is a problem of the task; an error the cross-reference
        itself hits (an op FakeTensor cannot run) is not."""
        torch = self.torch
        from torch_neuronx.meta_check import MetadataMismatchError, meta_crossref

        def mismatch(device: str) -> str | None:
            args = self._to((sample.input, sample.args, sample.kwargs), device, pins)
            try:
                with meta_crossref():
                    out = op(args[0], *args[1], **args[2])
                    if weights is not None:
                        self._grads(sample, args, out, weights)
                torch.neuron.synchronize()
            except (MetadataMismatchError, AssertionError) as e:
                if isinstance(e, MetadataMismatchError) or str(e).startswith("When comparing"):
                    return _first_line(e)
                self._recover()
            except Exception:  # noqa: BLE001
                self._recover()
            return None

        found = mismatch("neuron")
        # The same mismatch on the CPU's own kernels is PyTorch's (a
        # FakeTensor rule its CPU does not meet either, e.g. the aliasing of
        # a view of an empty _trilinear result), not the device's.
        if found is None or mismatch("cpu") == found:
            return None
        return {"where": "meta", "what": "output differs from its meta function: " + found}

    # -- comparison ----------------------------------------------------------

    def _tol(self, task_dtype: str, t) -> tuple[float, float]:
        """Exact for integer/bool results; otherwise the looser of the task
        dtype's and the result dtype's tolerance."""
        if not (t.is_floating_point() or t.is_complex()):
            return 0.0, 0.0
        cands = [TOLERANCES.get(str(t.dtype).replace("torch.", ""), TOLERANCES["float32"])]
        if task_dtype in TOLERANCES:
            cands.append(TOLERANCES[task_dtype])
        return max(c[0] for c in cands), max(c[1] for c in cands)

    def _meta_outputs(self, op, sample, pins) -> tuple[list, list] | None:
        """(dtype, shape) of each output leaf of the op's meta function, for
        the CPU's inputs and for neuron's: where PyTorch defines an output
        differently per device (native_layer_norm's float32 statistics of a
        16-bit input off the CPU, native_batch_norm's [C] saved statistics in
        eval mode off the CPU), the two differ. None when FakeTensor cannot
        run the op."""
        torch = self.torch
        from torch._subclasses.fake_tensor import FakeTensorMode

        metas = []
        for device in ("cpu", "neuron"):
            args = self._to((sample.input, sample.args, sample.kwargs), device, pins)
            try:
                with FakeTensorMode(allow_non_fake_inputs=True) as mode:
                    fake = torch.utils._pytree.tree_map_only(torch.Tensor, mode.from_tensor, args)
                    out = op(fake[0], *fake[1], **fake[2])
            except Exception:  # noqa: BLE001
                self._recover()
                return None
            metas.append([(t.dtype, tuple(t.shape)) if isinstance(t, torch.Tensor) else None
                          for t in self._leaves(sample.output_process_fn_grad(out))])
        return metas[0], metas[1]

    def _compare(self, ref, got, task_dtype: str, values: bool, where: str, arbiter=None,
                 convention=None) -> dict | None:
        """None if `got` (a neuron result) matches `ref` (the CPU's); else a
        dict describing the first difference. `arbiter(where, k, got_on_cpu,
        rtol, atol)` may accept a tensor that differs from the CPU's when it is
        within tolerance of a float64 run (the CPU is then the inaccurate side).
        `convention(k)` gives output k's (CPU meta, device meta) metadata: a
        dtype or shape that differs from the CPU's is accepted when each side
        has what its own meta function gives it (a per-device convention of
        PyTorch, the device following CUDA's); the values are then compared in
        the CPU's dtype, or not at all where the CPU's output is empty."""
        torch = self.torch
        rl, gl = self._leaves(ref), self._leaves(got)
        if len(rl) != len(gl):
            return {"where": where, "what": f"{len(gl)} results, expected {len(rl)}"}
        for k, (r, g) in enumerate(zip(rl, gl)):
            w = f"{where}[{k}]" if len(rl) > 1 else where
            if isinstance(r, torch.Tensor) or isinstance(g, torch.Tensor):
                if not (isinstance(r, torch.Tensor) and isinstance(g, torch.Tensor)):
                    return {"where": w, "what": f"type {type(g).__name__}, expected {type(r).__name__}"}
                if g.device.type != "neuron" and r.device.type == "cpu" and g.device.type != r.device.type:
                    return {"where": w, "what": f"result on device {g.device}, expected neuron"}
                if (g.dtype != r.dtype or g.shape != r.shape) and convention is not None:
                    metas = convention(k)
                    if metas is not None and metas[0] == (r.dtype, tuple(r.shape)) \
                            and metas[1] == (g.dtype, tuple(g.shape)):
                        if r.numel() == 0 and g.shape != r.shape:
                            continue
                        g = g.to(r.dtype)
                if g.dtype != r.dtype:
                    return {"where": w, "what": f"dtype {g.dtype}, expected {r.dtype}"}
                if g.shape != r.shape:
                    return {"where": w, "what": f"shape {tuple(g.shape)}, expected {tuple(r.shape)}"}
                if not values or r.is_quantized or r.layout != torch.strided:
                    continue
                try:
                    g = g.detach().cpu()
                except Exception as e:  # noqa: BLE001
                    return {"where": w, "kind": "error", "what": "copying the result to the CPU: " + _first_line(e)}
                r = r.detach()
                rtol, atol = self._tol(task_dtype, r)
                try:
                    torch.testing.assert_close(g, r, rtol=rtol, atol=atol, equal_nan=True,
                                               check_device=False, check_stride=False)
                except AssertionError:
                    if arbiter is not None and arbiter(where, k, g, r, rtol, atol):
                        continue
                    return {"where": w, "what": "values", "k": k, **self._diff_stats(g, r, rtol, atol)}
            elif r is None or g is None:
                if (r is None) != (g is None):
                    return {"where": w, "what": f"{g!r}, expected {r!r}"}
            elif isinstance(r, float) and isinstance(g, float):
                if values and not (math.isclose(r, g, rel_tol=1e-4, abs_tol=1e-4)
                                   or (math.isnan(r) and math.isnan(g))):
                    return {"where": w, "what": "values", "max_abs_diff": abs(r - g), "got": g, "expected": r}
            elif values and r != g:
                return {"where": w, "what": f"{g!r}, expected {r!r}"[:200]}
        return None

    def _as_f64(self, t):
        torch = self.torch
        return t.to(torch.complex128) if t.is_complex() else t.to(torch.float64)

    def _diff_stats(self, g, r, rtol: float, atol: float) -> dict:
        """The largest difference and the element that breaks the tolerance most."""
        torch = self.torch
        gf, rf = self._as_f64(g), self._as_f64(r)
        d = (gf - rf).abs()
        d = torch.where(gf.isnan() & rf.isnan(), torch.zeros_like(d), d)
        d = torch.where(d.isnan(), torch.full_like(d, math.inf), d)  # nan against a number
        excess = d - (atol + rtol * rf.abs().nan_to_num(0.0, posinf=math.inf))
        excess = excess.nan_to_num(0.0, posinf=math.inf, neginf=-math.inf)
        flat = int(excess.argmax()) if d.numel() else 0
        at = [int(i) for i in torch.unravel_index(torch.tensor(flat), d.shape)] if d.dim() else []
        val = lambda x: float(x.reshape(-1)[flat].abs() if x.is_complex() else x.reshape(-1)[flat])  # noqa: E731
        return {
            "_shape": tuple(d.shape),
            "max_abs_diff": float(d.max()) if d.numel() else 0.0,
            "at": at,
            "got": val(gf) if d.numel() else None,
            "expected": val(rf) if d.numel() else None,
            "n_diff": int((excess > 0).sum()),
            "numel": d.numel(),
        }

    def _f64_run(self, op, sample, pins, weights) -> dict | None:
        """The sample run on the CPU in float64 (floating inputs, weights and
        dtype arguments cast): {"output": leaves, "grad": leaves or None}, or
        None when the op cannot run in float64."""
        torch = self.torch
        try:
            tree = self._to((sample.input, sample.args, sample.kwargs), "cpu", pins, cast=torch.float64)
            out = op(tree[0], *tree[1], **tree[2])
            grads = None
            if weights is not None:
                try:
                    grads = self._grads(sample, tree, out, [w.double() for w in weights])
                except Exception:  # noqa: BLE001
                    grads = None
            out = sample.output_process_fn_grad(out)
            return {"output": self._leaves(out), "grad": self._leaves(grads) if grads is not None else None}
        except Exception:  # noqa: BLE001
            return None

    def _f64_leaf(self, f64: dict | None, where: str, k: int, like):
        torch = self.torch
        if f64 is None or f64.get(where) is None or k >= len(f64[where]):
            return None
        t = f64[where][k]
        if not isinstance(t, torch.Tensor) or t.shape != like.shape:
            return None
        return t.detach()

    def _f64_point(self, f64: dict | None, diff: dict) -> dict:
        """For a value mismatch: the float64 value of the worst element, so the
        table can show whether the CPU or the device is the closer one."""
        where = "grad" if diff["where"].startswith("grad") else "output"
        ref = self._f64_leaf(f64, where, diff.get("k", 0), self.torch.empty(diff.get("_shape", ())))
        if ref is None or not diff.get("at") and ref.dim():
            return {}
        x = ref[tuple(diff["at"])]
        exact = float(x.abs() if x.is_complex() else x)
        return {"f64": exact, "neuron_err": abs(diff["got"] - exact), "cpu_err": abs(diff["expected"] - exact)}

    def _resolve_ties(self, op, cpu_tree, ref, got):
        """For sort-like ops (TIES): returns (ref, got, input_has_ties) where an
        index output of `got` that differs from the CPU's but selects the same
        input values is replaced by the CPU's."""
        torch = self.torch
        inp, args, kwargs = cpu_tree
        if not isinstance(inp, torch.Tensor):
            return ref, got, True
        pos, default = TIES[op.name]
        positional = args[pos] if pos is not None and len(args) > pos and isinstance(args[pos], int) else None
        dim = kwargs.get("dim", positional if positional is not None else default)
        x = inp.detach()
        if dim is None or x.dim() == 0:
            return ref, got, bool(x.numel() > 1 and x.reshape(-1).unique().numel() < x.numel())
        srt = x.sort(dim=dim).values
        ties = bool((srt.narrow(dim, 1, srt.shape[dim] - 1) == srt.narrow(dim, 0, srt.shape[dim] - 1)).any()) \
            if srt.shape[dim] > 1 else False
        if kwargs.get("stable"):  # a stable sort has exactly one right answer
            return ref, got, False
        if not ties or not isinstance(ref, (tuple, list)) and not (isinstance(ref, torch.Tensor)
                                                                   and ref.dtype == torch.int64):
            return ref, got, ties
        rl, gl = self._leaves(ref), self._leaves(got)
        fixed = list(gl)
        for k, (r, g) in enumerate(zip(rl, gl)):
            if not (isinstance(r, torch.Tensor) and isinstance(g, torch.Tensor) and r.dtype == torch.int64
                    and g.dtype == torch.int64 and r.shape == g.shape and g.device.type == "neuron"):
                continue
            gc = g.detach().cpu()
            if torch.equal(gc, r):
                continue
            ri, gi = (r, gc) if r.dim() == x.dim() else (r.unsqueeze(dim), gc.unsqueeze(dim))
            try:
                same = (ri.dim() == x.dim() and gi.min() >= 0 and gi.max() < x.shape[dim]
                        and torch.equal(x.gather(dim, ri), x.gather(dim, gi)))
            except Exception:  # noqa: BLE001
                same = False
            if same:
                fixed[k] = r
        if isinstance(got, torch.Tensor):
            return ref, fixed[0], ties
        return ref, type(got)(fixed) if not hasattr(got, "_fields") else type(got)(*fixed), ties

    def _describe(self, sample) -> str:
        """Shapes and non-tensor arguments of a sample, short."""
        torch = self.torch

        def d(x):
            if isinstance(x, torch.Tensor):
                nc = x.layout == torch.strided and not x.is_contiguous()
                return "T" + str(list(x.shape)) + ("nc" if nc else "")
            if isinstance(x, (list, tuple)):
                inner = ", ".join(d(y) for y in x[:6]) + (", ..." if len(x) > 6 else "")
                return ("[" + inner + "]") if isinstance(x, list) else ("(" + inner + ")")
            return repr(x)[:40]

        parts = [d(sample.input)] + [d(a) for a in sample.args] + [f"{k}={d(v)}" for k, v in sample.kwargs.items()]
        return ", ".join(parts)[:240]

    # -- one task --------------------------------------------------------------

    def _random_sample(self, op, sample) -> bool:
        if op.name in NONDETERMINISTIC:
            return True
        kw = sample.kwargs
        if float(kw.get("dropout_p", 0) or 0) > 0:
            return True
        if op.name == "nn.functional.multi_head_attention_forward" and kw.get("training"):
            return True
        return False

    def run_task(self, key: str, dtype_name: str, max_samples: int) -> dict:
        torch = self.torch
        tnx = self.tnx
        op = self.ops[key]
        dtype = getattr(torch, dtype_name)
        t0 = time.perf_counter()
        rec: dict[str, Any] = {"op": op.name, "variant": op.variant_test_name, "dtype": dtype_name}
        grad_dtypes = op.supported_backward_dtypes("cpu") if op.supports_autograd else set()
        want_grad = bool(op.supports_autograd and dtype in grad_dtypes
                         and (dtype.is_floating_point or dtype.is_complex))
        seed = 0
        try:
            torch.manual_seed(seed)
            samples = pick_samples(op.sample_inputs("cpu", dtype, requires_grad=want_grad), max_samples)
        except Exception as e:  # noqa: BLE001
            rec.update(status="skipped-cpu", reason="sample_inputs raised: " + _first_line(e))
            return rec
        all_pins = self._pinned(op, dtype, want_grad, max_samples, seed)
        fallback: set[str] = set()
        problems: list[dict] = []
        arbitrated: list[dict] = []
        ran = skipped = 0
        cpu_err = None
        for i, sample in enumerate(samples):
            desc = self._describe(sample)
            values = not self._random_sample(op, sample)
            pins = all_pins[i] if i < len(all_pins) else None
            # Device copies first: an in-place op on the CPU must not change them.
            try:
                dev = self._to((sample.input, sample.args, sample.kwargs), "neuron", pins)
                torch.neuron.synchronize()
            except Exception as e:  # noqa: BLE001
                problems.append({"sample": i, "kind": "error", "shape": desc,
                                 "what": "moving the inputs to neuron: " + _first_line(e)})
                ran += 1
                self._recover()
                continue
            cpu = self._to((sample.input, sample.args, sample.kwargs), "cpu", pins)
            # The CPU reference. A CPU failure skips the sample (forward) or its gradient check.
            try:
                ref_out = op(cpu[0], *cpu[1], **cpu[2])
            except Exception as e:  # noqa: BLE001
                skipped += 1
                cpu_err = cpu_err or _first_line(e)
                continue
            weights = ref_grads = None
            if want_grad:
                outs = self._diff_outputs(sample.output_process_fn_grad(ref_out))
                if outs and any(isinstance(t, torch.Tensor) and t.requires_grad for t in self._leaves(cpu)):
                    g = torch.Generator().manual_seed(1234 + i)
                    weights = [torch.randn(o.shape, generator=g, dtype=torch.float32).to(o.dtype) for o in outs]
                    try:
                        ref_grads = self._grads(sample, cpu, ref_out, weights)
                    except Exception:  # noqa: BLE001  (no CPU backward: compare the forward only)
                        weights = None
            ran += 1
            # The device run; asynchronous errors surface at the synchronize.
            tnx.clear_op_tracking()
            stage = "forward"
            try:
                out = op(dev[0], *dev[1], **dev[2])
                torch.neuron.synchronize()
                grads = None
                if weights is not None:
                    stage = "backward"
                    grads = self._grads(sample, dev, out, weights)
                    torch.neuron.synchronize()
            except Exception as e:  # noqa: BLE001
                fallback.update(tnx.get_fallback_ops())
                problems.append({"sample": i, "kind": "error", "shape": desc,
                                 "what": ("" if stage == "forward" else "backward: ") + _first_line(e)})
                self._recover()
                continue
            fallback.update(tnx.get_fallback_ops())
            grad_values = values
            if op.name in TIES:
                # Equal keys may be ordered either way: compare the values,
                # check that the indices select them, and compare gradients
                # (routed through the indices) only when there are no ties.
                ref_out, out, ties = self._resolve_ties(op, cpu, ref_out, out)
                grad_values = values and not ties
            f64_cache: list = []

            def f64() -> dict | None:
                if not f64_cache:
                    f64_cache.append(self._f64_run(op, sample, pins, weights))
                return f64_cache[0]

            def arbiter(where, k, g, r, rtol, atol) -> bool:
                # The CPU is the side that is off, so this is counted, not a
                # mismatch, when the device result is within tolerance of the
                # float64 run, or no further from it than the CPU's result
                # (both measured against the float64 value rounded to the
                # result dtype, so a correctly rounded overflow to inf counts
                # as exact and a NaN where the value is finite as infinitely
                # far).
                ref = self._f64_leaf(f64(), where, k, g)
                if ref is None or not (g.is_floating_point() or g.is_complex()):
                    return False
                try:
                    torch.testing.assert_close(self._as_f64(g), ref, rtol=rtol, atol=atol, equal_nan=True,
                                               check_dtype=False)
                    arbitrated.append({"sample": i, "where": where, "shape": desc, "how": "within float64 tolerance"})
                    return True
                except AssertionError:
                    pass
                if g.is_complex():
                    return False
                exact = self._as_f64(ref.to(g.dtype))

                def err(t) -> float:
                    t = self._as_f64(t)
                    d = (t - exact).abs()
                    d = torch.where((t == exact) | (t.isnan() & exact.isnan()), torch.zeros_like(d), d)
                    return float(d.nan_to_num(nan=math.inf).max()) if d.numel() else 0.0

                e_dev, e_cpu = err(g), err(r)
                if not (math.isfinite(e_dev) and e_dev <= e_cpu):
                    return False
                arbitrated.append({"sample": i, "where": where, "shape": desc,
                                   "how": f"device error {e_dev:.3g} <= CPU error {e_cpu:.3g} (vs float64)"})
                return True

            conv_cache: list = []

            def convention(k):
                # (CPU meta, device meta) of forward output k, from the op's
                # meta function on fake copies of each side's inputs
                if not conv_cache:
                    conv_cache.append(self._meta_outputs(op, sample, pins))
                metas = conv_cache[0]
                return None if metas is None or k >= len(metas[0]) else (metas[0][k], metas[1][k])

            # As PyTorch's own test_compare_cpu: outputs defined only up to a
            # gauge (eigenvector and singular vector signs) are compared
            # through the OpInfo's output_process_fn_grad (e.g. abs of the
            # vectors), which is the identity for most ops.
            ref_out = sample.output_process_fn_grad(ref_out)
            out = sample.output_process_fn_grad(out)
            diff = self._compare(ref_out, out, dtype_name, values, "output", arbiter, convention)
            if diff is None and grads is not None:
                diff = self._compare(ref_grads, grads, dtype_name, grad_values, "grad", arbiter)
            if diff is None:
                diff = self._meta_check(op, sample, pins, weights)
            if diff is not None:
                if diff["what"] == "values" and "at" in diff:
                    diff.update(self._f64_point(f64(), diff))
                diff.pop("k", None)
                diff.pop("_shape", None)
                problems.append({"sample": i, "kind": diff.pop("kind", "mismatch"), "shape": desc, **diff})
                self._recover()
        rec["samples"] = ran
        rec["samples_cpu_failed"] = skipped
        rec["fallback_ops"] = sorted(fallback)
        rec["backward"] = want_grad
        rec["time_s"] = round(time.perf_counter() - t0, 3)
        if ran == 0:
            rec.update(status="skipped-cpu", reason=("CPU reference raised: " + cpu_err) if cpu_err else "no samples")
            return rec
        mism = [p for p in problems if p["kind"] == "mismatch"]
        errs = [p for p in problems if p["kind"] == "error"]
        if mism:
            p = max(mism, key=lambda q: q.get("max_abs_diff", 0.0)) if all("max_abs_diff" in q for q in mism) else mism[0]
            rec["status"] = "mismatch"
            if "max_abs_diff" in p:
                rec["max_abs_diff"] = p["max_abs_diff"]
                what = f"max abs diff {p['max_abs_diff']:.3g}"
                if p.get("got") is not None:
                    what += f" (got {p['got']:.6g}, expected {p['expected']:.6g}"
                    if "f64" in p:
                        what += f", float64 {p['f64']:.6g}"
                    what += ")"
            else:
                what = p["what"]
            rec["reason"] = f"{p['where']}: {what}; sample {p['sample']}: {p['shape']}"
        elif errs:
            p = errs[0]
            rec["status"] = "error"
            rec["reason"] = f"{p['what']}; sample {p['sample']}: {p['shape']}"
        elif fallback:
            rec["status"] = "fallback-pass"
            rec["reason"] = "falls back: " + ", ".join(sorted(fallback))
        else:
            rec["status"] = "native-pass"
            rec["reason"] = ""
        rec["failed_samples"] = f"{len(mism) + len(errs)}/{ran}" if problems else ""
        if arbitrated:
            rec["cpu_less_accurate"] = arbitrated[:4]
        rec["problems"] = problems[:4]
        return rec

    def _recover(self) -> None:
        """After a device error: take the sticky stream error so that the next sample starts clean."""
        try:
            self.torch.neuron.synchronize()
        except Exception:  # noqa: BLE001
            pass


def _selftest_hook(task: dict) -> None:
    """CONFORMANCE_SELFTEST=crash:<key> or hang:<key> makes the worker die
    or hang on that task (tests of the harness's crash isolation use it)."""
    spec = os.environ.get("CONFORMANCE_SELFTEST", "")
    what, _, key = spec.partition(":")
    if key != task["key"]:
        return
    if what == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif what == "hang":
        time.sleep(3600)


def core_ops_main() -> int:
    """Prints (JSON) every overload of PyTorch's Core ATen opset (tagged
    torch.Tag.core) with how the neuron device runs it: "native" (a neuron
    kernel is registered), "composite" (PyTorch's composite kernel, which
    calls other ops: the sweep records any of those that fall back), or
    "fallback" (no neuron kernel and no composite: the CPU fallback)."""
    import torch
    import torch_neuronx  # noqa: F401

    rows = []
    for name in sorted(dir(torch.ops.aten)):
        try:
            packet = getattr(torch.ops.aten, name)
        except (AttributeError, RuntimeError):
            continue
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            continue
        for ov in packet.overloads():
            op = getattr(packet, ov)
            if torch.Tag.core not in op.tags:
                continue
            full = op.name()
            has = torch._C._dispatch_has_kernel_for_dispatch_key
            if has(full, "PrivateUse1"):
                how = "native"
            elif has(full, "CompositeImplicitAutograd") or has(full, "CompositeExplicitAutograd") or \
                    has(full, "CompositeExplicitAutogradNonFunctional"):
                how = "composite"
            else:
                how = "fallback"
            rows.append({"op": full, "how": how})  # name() includes the overload
    print(json.dumps(rows))
    return 0


def core_op_table() -> list | None:
    try:
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--core-ops"], capture_output=True,
                           text=True, timeout=300, cwd=ROOT)
        return json.loads(r.stdout) if r.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def worker_main() -> int:
    """Reads tasks (JSON lines) on stdin, writes one result line per task on
    the protocol fd (the original stdout; anything the ops print goes to stderr)."""
    import faulthandler

    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    faulthandler.enable(file=sys.stderr, all_threads=True)
    w = _Worker()
    proto.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        task = json.loads(line)
        print(f"== {task['key']} {task['dtype']}", file=sys.stderr, flush=True)
        _selftest_hook(task)
        try:
            rec = w.run_task(task["key"], task["dtype"], task.get("max_samples", MAX_SAMPLES))
        except Exception as e:  # noqa: BLE001  (a harness bug must not lose the task)
            import traceback

            traceback.print_exc()
            rec = {"op": w.ops[task["key"]].name, "variant": w.ops[task["key"]].variant_test_name,
                   "dtype": task["dtype"], "status": "error", "reason": "harness: " + _first_line(e)}
        rec["key"] = task["key"]
        proto.write(json.dumps(rec, default=str) + "\n")
    return 0


# ---- triage: which ATen op of a mismatching sample differs ------------------


def bisect_main(key: str, dtype_name: str, sample_index: int, max_samples: int, top: int = 15) -> int:
    """Runs one sample on neuron (forward and the weighted backward) under a
    dispatch mode that re-runs every ATen op on the CPU with copies of the
    same inputs, and prints the ops whose neuron results differ most. The
    first op with a large difference is usually the culprit of a mismatch."""
    w = _Worker()
    torch = w.torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_map

    op = w.ops[key]
    dtype = getattr(torch, dtype_name)
    want_grad = bool(op.supports_autograd and dtype in op.supported_backward_dtypes("cpu")
                     and dtype.is_floating_point)
    torch.manual_seed(0)
    samples = pick_samples(op.sample_inputs("cpu", dtype, requires_grad=want_grad), max_samples)
    sample = samples[sample_index]
    pins_all = w._pinned(op, dtype, want_grad, max_samples, 0)
    pins = pins_all[sample_index] if sample_index < len(pins_all) else None
    rows: list[tuple] = []

    def to_cpu(x):
        return x.detach().cpu() if isinstance(x, torch.Tensor) and x.device.type == "neuron" else x

    class Shadow(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            cargs, ckwargs = tree_map(to_cpu, args), tree_map(to_cpu, kwargs)  # before an in-place op runs
            out = func(*args, **kwargs)
            try:
                ref = func(*cargs, **ckwargs)
            except Exception:  # noqa: BLE001
                return out
            for k, (g, r) in enumerate(zip(w._leaves(out), w._leaves(ref))):
                if (isinstance(g, torch.Tensor) and isinstance(r, torch.Tensor) and g.shape == r.shape
                        and g.dtype == r.dtype and g.numel() and not g.is_complex()
                        and g.device.type == "neuron" and r.device.type == "cpu"):
                    gd, rd = g.detach().cpu().double(), r.detach().double()
                    d = (gd - rd).abs().nan_to_num(0.0)
                    rel = float((d / rd.abs().clamp_min(1e-30)).max())
                    rows.append((float(d.max()), rel, str(func), k, tuple(g.shape), str(g.dtype)))
            return out

    dev = w._to((sample.input, sample.args, sample.kwargs), "neuron", pins)
    print(f"{key} {dtype_name} sample {sample_index}: {w._describe(sample)}")
    with Shadow():
        out = op(dev[0], *dev[1], **dev[2])
        if want_grad:
            outs = w._diff_outputs(sample.output_process_fn_grad(out))
            if outs:
                g = torch.Generator().manual_seed(1234 + sample_index)
                weights = [torch.randn(o.shape, generator=g, dtype=torch.float32).to(o.dtype) for o in outs]
                w._grads(sample, dev, out, weights)
    torch.neuron.synchronize()
    print(f"{len(rows)} ATen op results compared with the same op on the CPU; largest differences first:")
    for i, (d, rel, name, k, shape, dt) in enumerate(sorted(rows, key=lambda r: -r[0])[:top]):
        print(f"  {d:10.4g} abs {rel:10.4g} rel  {name}[{k}] {shape} {dt}")
    return 0


# ---- the parent: schedules tasks over worker processes ----------------------


def list_tasks(select: str, ops_filter: list[str] | None, dtypes: list[str]) -> list[dict]:
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    tasks = []
    for op in op_db:
        key = _op_key(op)
        if select == "subset" and op.name not in SUBSET and key not in SUBSET:
            continue
        if ops_filter and not (op.name in ops_filter or key in ops_filter):
            continue
        supported = op.supported_dtypes("cpu")
        for dn in dtypes:
            if getattr(torch, dn) in supported:
                tasks.append({"key": key, "op": op.name, "variant": op.variant_test_name, "dtype": dn})
    return tasks


class _Proc:
    def __init__(self, idx: int, log_dir: str, env: dict, script: str | None = None):
        self.idx = idx
        self.log_path = os.path.join(log_dir, f"worker-{idx}.log")
        self.log = open(self.log_path, "ab")
        self.log_start = self.log.tell()
        self.p = subprocess.Popen([sys.executable, script or os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self.log, env=env, cwd=ROOT)
        self.buf = b""
        self.task: dict | None = None
        self.deadline = time.monotonic() + 300.0  # start-up (imports op_db)
        self.ready = False

    def send(self, task: dict, timeout: float) -> None:
        self.task = task
        self.deadline = time.monotonic() + timeout
        self.p.stdin.write((json.dumps(task) + "\n").encode())
        self.p.stdin.flush()

    def log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_start)
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        lines = [ln for ln in text.splitlines() if ln.strip()]
        for ln in lines:  # the fatal error line says the most
            if "Fatal Python error" in ln or "AddressSanitizer" in ln or "Assertion" in ln or "terminate" in ln:
                return ln.strip()[:200]
        return lines[-1].strip()[:200] if lines else ""

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        self.log.close()


def run_parent(tasks: list[dict], out_path: str, workers: int, timeout: float, max_samples: int,
               verbose: bool, script: str | None = None) -> list[dict]:
    """Runs `tasks` (dicts with key, op, variant, dtype) in `workers` worker
    processes (`script --worker`, this file by default; the ModuleInfo and
    utilities sweeps pass theirs) and returns the result records."""
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    log_dir = os.path.dirname(out_path)
    env = dict(os.environ)
    env.setdefault("PYTHONWARNINGS", "ignore")
    env.setdefault("TORCH_NEURONX_LOG_LEVEL", "ERROR")
    results: list[dict] = []
    pending = deque(tasks)
    total = len(tasks)
    sel = selectors.DefaultSelector()
    procs: dict[int, _Proc] = {}
    next_idx = 0
    t0 = time.monotonic()
    out = open(out_path, "a", buffering=1)

    def finish(rec: dict) -> None:
        results.append(rec)
        out.write(json.dumps(rec, default=str) + "\n")
        if verbose or rec["status"] in ("mismatch", "error", "crash"):
            print(f"[{len(results)}/{total} {time.monotonic() - t0:6.0f}s] {rec['key']:<45} {rec['dtype']:<9} "
                  f"{rec['status']:<13} {rec.get('reason', '')[:140]}", file=sys.stderr, flush=True)
        elif len(results) % 50 == 0:
            print(f"[{len(results)}/{total} {time.monotonic() - t0:6.0f}s]", file=sys.stderr, flush=True)

    def spawn() -> None:
        nonlocal next_idx
        pr = _Proc(next_idx, log_dir, env, script)
        next_idx += 1
        procs[pr.idx] = pr
        sel.register(pr.p.stdout, selectors.EVENT_READ, pr)

    def retire(pr: _Proc, reason: str | None) -> None:
        sel.unregister(pr.p.stdout)
        del procs[pr.idx]
        if pr.task is not None and reason is not None:
            t = pr.task
            finish({"key": t["key"], "op": t["op"], "variant": t["variant"], "dtype": t["dtype"],
                    "status": "crash", "reason": reason, "fallback_ops": [],
                    "log": os.path.relpath(pr.log_path, ROOT)})
        pr.kill()

    def feed(pr: _Proc) -> None:
        if pending:
            pr.send(pending.popleft(), timeout)
        else:
            pr.task = None
            pr.p.stdin.close()

    for _ in range(min(workers, len(pending))):
        spawn()
    crashes_at_start = 0
    while procs:
        now = time.monotonic()
        wait = max(0.05, min(pr.deadline for pr in procs.values()) - now)
        for skey, _ in sel.select(timeout=min(wait, 5.0)):
            pr: _Proc = skey.data
            chunk = os.read(pr.p.stdout.fileno(), 1 << 16)
            if not chunk:  # worker exited
                rc = pr.p.wait()
                if pr.task is None and pr.ready:
                    retire(pr, None)
                    continue
                sig = -rc if rc < 0 else None
                what = (f"worker killed by {signal.Signals(sig).name}" if sig else f"worker exited with status {rc}")
                tail = pr.log_tail()
                if not pr.ready:
                    crashes_at_start += 1
                    if crashes_at_start > 3:
                        raise SystemExit(f"workers die at start-up: {what}; {tail} (see {pr.log_path})")
                retire(pr, f"{what}" + (f": {tail}" if tail else ""))
                if pending:
                    spawn()
                continue
            pr.buf += chunk
            while b"\n" in pr.buf:
                line, pr.buf = pr.buf.split(b"\n", 1)
                msg = json.loads(line)
                if msg.get("ready"):
                    pr.ready = True
                else:
                    finish(msg)
                feed(pr)
        now = time.monotonic()
        for pr in list(procs.values()):
            if (pr.task is not None or not pr.ready) and now > pr.deadline:
                reason = f"timeout: no result after {timeout:.0f} s" if pr.ready else "worker start-up timed out"
                pr.p.send_signal(signal.SIGABRT)  # faulthandler prints where it hung
                time.sleep(0.5)
                retire(pr, reason)
                if pending:
                    spawn()
    out.close()
    return results


def _build_id() -> dict:
    """What was tested: the git commit (and whether the tree had local
    changes) and the extension's modification time."""
    import glob

    out: dict[str, Any] = {}
    try:
        out["git_head"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                         text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "csrc", "runtime",
                                "torch_neuronx"], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout
        out["local_changes"] = bool(dirty.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    so = glob.glob(os.path.join(ROOT, "torch_neuronx", "_C*.so"))
    if so:
        out["extension_mtime"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(os.path.getmtime(so[0])))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--full", action="store_true", help="every OpInfo of op_db (writes docs/op-support.*)")
    mode.add_argument("--subset", action="store_true", help="~40 common ops, float32 only")
    mode.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    mode.add_argument("--core-ops", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ops", help="comma-separated OpInfo names (or name.variant) to run")
    ap.add_argument("--dtypes", help="comma-separated dtypes (default: float32,bfloat16,float16,int64,bool; "
                                     "subset: float32)")
    ap.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    ap.add_argument("--timeout", type=float, default=TASK_TIMEOUT_S, help="seconds per OpInfo × dtype")
    ap.add_argument("--max-samples", type=int, default=MAX_SAMPLES)
    ap.add_argument("--out", help="results file (JSON lines); default build/conformance/<mode>.jsonl")
    ap.add_argument("--resume", action="store_true", help="keep results already in --out, run the rest")
    ap.add_argument("--no-docs", action="store_true", help="with --full: do not regenerate docs/op-support.*")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every result")
    ap.add_argument("--bisect", metavar="SAMPLE", type=int,
                    help="triage: run sample SAMPLE of the one OpInfo in --ops (first dtype of --dtypes) "
                         "and show which ATen ops' neuron results differ from the CPU's")
    a = ap.parse_args(argv)
    if a.worker:
        return worker_main()
    if a.core_ops:
        return core_ops_main()
    if a.bisect is not None:
        if not a.ops or "," in a.ops:
            ap.error("--bisect needs exactly one OpInfo in --ops")
        return bisect_main(a.ops, (a.dtypes or "float32").split(",")[0], a.bisect, a.max_samples)

    select = "subset" if a.subset else "full"
    dtypes = a.dtypes.split(",") if a.dtypes else (["float32"] if a.subset else DTYPE_NAMES)
    ops_filter = a.ops.split(",") if a.ops else None
    name = select if not ops_filter else "adhoc"
    out_path = a.out or os.path.join(ROOT, "build", "conformance", f"{name}.jsonl")
    tasks = list_tasks(select, ops_filter, dtypes)
    for t in tasks:
        t["max_samples"] = a.max_samples
    done: list[dict] = []
    if a.resume and os.path.exists(out_path):
        with open(out_path) as f:
            done = [json.loads(ln) for ln in f if ln.strip()]
        have = {(r["key"], r["dtype"]) for r in done}
        tasks = [t for t in tasks if (t["key"], t["dtype"]) not in have]
    else:
        for stale in [out_path] + [os.path.join(os.path.dirname(out_path), f) for f in
                                   (os.listdir(os.path.dirname(out_path)) if os.path.isdir(os.path.dirname(out_path)) else [])
                                   if f.startswith("worker-") and f.endswith(".log")]:
            if os.path.exists(stale):
                os.remove(stale)
    print(f"conformance: {len(tasks)} OpInfo × dtype tasks, {a.workers} workers, "
          f"results in {os.path.relpath(out_path, ROOT)}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    build_before = _build_id()
    results = done + run_parent(tasks, out_path, a.workers, a.timeout, a.max_samples, a.verbose)
    wall = time.monotonic() - t0
    build = _build_id()
    if build.get("extension_mtime") != build_before.get("extension_mtime"):
        build["rebuilt_during_sweep"] = True
        print("conformance: WARNING: torch_neuronx/_C*.so changed during the sweep; workers started "
              "before and after ran different builds. Run it again.", file=sys.stderr)
    counts: dict[str, int] = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"conformance: {len(results)} results in {wall:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=sys.stderr)
    meta = {"mode": select, "wall_time_s": round(wall, 1), "workers": a.workers, "max_samples": a.max_samples,
            "timeout_s": a.timeout, "dtypes": dtypes, "build": build}
    if select == "full" and not ops_filter:
        meta["core_ops"] = core_op_table()
    with open(out_path[:-len(".jsonl")] + ".meta.json" if out_path.endswith(".jsonl") else out_path + ".meta.json",
              "w") as f:
        json.dump(meta, f, indent=1)
    if a.full and not a.no_docs and not ops_filter:
        sys.path.insert(0, os.path.join(ROOT, "tools"))
        import gen_op_support

        gen_op_support.generate(out_path, meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())
