"""``python -m torch_neuronx.evaluate``: evaluate a model for the neuron
device from the command line and write the report.

A TARGET is ``path/to/file.py:function`` or ``package.module:function``.
The function returns either a dict::

    {"model": nn.Module, "example_inputs": tensor | tuple | dict,
     # optional:
     "loss_fn": callable, "targets": tensor | tuple, "optimizer": optimizer | callable | False,
     "shapes": [shape, ...], "name": str}

or a tuple ``(model, example_inputs[, loss_fn[, optimizer]])``. If the
function has parameters named ``batch_size`` / ``seq_len``, ``--batch`` /
``--seq`` are passed to it. ``--hf MODEL_TYPE`` builds a Hugging Face
transformers model from its config instead (random weights, no download).

Exit status: 0 when the report was written (whatever the verdict; with
``--strict``, 1 if a verdict line failed), 2 for a bad target or argument.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

TARGET_KEYS = {"model", "example_inputs", "inputs", "loss_fn", "targets", "optimizer", "shapes", "name"}
CONTRACT = ("a dict {'model': nn.Module, 'example_inputs': ...} (optional keys: loss_fn, targets, optimizer, "
            "shapes, name) or a tuple (model, example_inputs[, loss_fn[, optimizer]])")


class TargetError(Exception):
    """A target that cannot be loaded or does not keep the contract."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m torch_neuronx.evaluate",
        description="Evaluate a model for the neuron device against PyTorch on the CPU: ops (native, CPU "
                    "fallback, compilable), numerics, step time eager and compiled, recompiles, memory. "
                    "Writes report.html, report.json and summary.txt to --out.",
        epilog="TARGET is path/to/file.py:function or package.module:function; the function returns "
               + CONTRACT + ". Example: python -m torch_neuronx.evaluate examples/evaluate_gpt2.py:small_gpt2 "
               "--dtype float32,bfloat16 --shapes 4x32,4x128")
    p.add_argument("target", nargs="?", help="path/to/file.py:function or package.module:function")
    p.add_argument("--hf", metavar="MODEL_TYPE", help="a transformers model type built from its config "
                   "(gpt2, llama, bert, t5, vit, ...), random weights, nothing downloaded")
    p.add_argument("--size", choices=("small", "full"), default="small",
                   help="--hf: the published size, or a 2-layer, 128-wide one (default small)")
    p.add_argument("--dtype", default="float32",
                   help="comma-separated: float32, bfloat16 (autocast), float16 (autocast); default float32")
    p.add_argument("--steps", type=int, default=10, help="timed training steps after the first (default 10)")
    p.add_argument("--batch", type=int, help="batch size (--hf default 2; passed to a target's batch_size)")
    p.add_argument("--seq", type=int, help="sequence length (--hf default 64; passed to a target's seq_len)")
    p.add_argument("--shapes", help="comma-separated input shapes to count recompiles over, e.g. 2x32,2x64,2x128 "
                   "(the shape of the first input; with --hf batch x sequence)")
    p.add_argument("--out", default=os.path.join("build", "evaluate"), help="output directory (default build/evaluate)")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile(backend='neuron')")
    p.add_argument("--no-profile", action="store_true", help="skip the device profiler")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--strict", action="store_true", help="exit 1 when a verdict line failed")
    return p


def parse_shapes(text: Optional[str]) -> Optional[List[tuple]]:
    """'2x32,2x64' -> [(2, 32), (2, 64)]."""
    if not text:
        return None
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        try:
            dims = tuple(int(x) for x in part.split("x"))
        except ValueError:
            raise TargetError(f"--shapes: {part!r} is not a shape like 2x64") from None
        if not dims or any(d <= 0 for d in dims):
            raise TargetError(f"--shapes: {part!r} is not a shape like 2x64")
        out.append(dims)
    return out


def load_function(target: str):
    """The function a TARGET names, or TargetError saying why not."""
    where, sep, fn_name = target.rpartition(":")
    if not sep or not where or not fn_name:
        raise TargetError(f"target {target!r} must be path/to/file.py:function or package.module:function")
    is_file = where.endswith(".py") or os.sep in where or "/" in where
    if is_file:
        path = os.path.abspath(where)
        if not os.path.isfile(path):
            raise TargetError(f"target file not found: {where}")
        name = "_evaluate_target_" + os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise TargetError(f"cannot load {where} as a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, os.path.dirname(path))
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            raise TargetError(f"importing {where} failed: {type(e).__name__}: {e}") from e
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as e:
            raise TargetError(f"cannot import module {where!r}: {e}") from e
        except Exception as e:
            raise TargetError(f"importing {where} failed: {type(e).__name__}: {e}") from e
    fn = getattr(module, fn_name, None)
    if fn is None:
        names = sorted(n for n, v in vars(module).items() if inspect.isfunction(v)
                       and getattr(v, "__module__", None) == module.__name__ and not n.startswith("_"))
        raise TargetError(f"{where} has no function {fn_name!r}" +
                          (f" (its functions: {', '.join(names)})" if names else ""))
    if not callable(fn):
        raise TargetError(f"{where}:{fn_name} is a {type(fn).__name__}, not a function")
    return fn


def call_target(fn: Any, target: str, batch: Optional[int], seq: Optional[int]) -> Dict[str, Any]:
    """Calls the target function and checks what it returns."""
    import torch

    kwargs = {}
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    for flag, value, pname in (("--batch", batch, "batch_size"), ("--seq", seq, "seq_len")):
        if value is None:
            continue
        if pname not in params and not any(p.kind == p.VAR_KEYWORD for p in params.values()):
            raise TargetError(f"{target} takes no parameter {pname!r}, so {flag} cannot be applied")
        kwargs[pname] = value
    try:
        result = fn(**kwargs)
    except Exception as e:
        raise TargetError(f"{target} raised {type(e).__name__}: {e}") from e
    if isinstance(result, dict):
        unknown = sorted(set(result) - TARGET_KEYS)
        if unknown:
            raise TargetError(f"{target} returned a dict with unknown key(s) {', '.join(map(repr, unknown))}; "
                              f"expected {CONTRACT}")
        spec = dict(result)
        if "inputs" in spec and "example_inputs" not in spec:
            spec["example_inputs"] = spec.pop("inputs")
        if "model" not in spec or "example_inputs" not in spec:
            raise TargetError(f"{target} returned a dict without 'model' or 'example_inputs'; expected {CONTRACT}")
    elif isinstance(result, (tuple, list)) and 2 <= len(result) <= 4:
        spec = dict(zip(("model", "example_inputs", "loss_fn", "optimizer"), result))
    else:
        raise TargetError(f"{target} returned {type(result).__name__}"
                          + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else "")
                          + f"; expected {CONTRACT}")
    if not isinstance(spec["model"], torch.nn.Module):
        raise TargetError(f"{target} returned a model of type {type(spec['model']).__name__}, not a torch.nn.Module; "
                          f"expected {CONTRACT}")
    leaves = torch.utils._pytree.tree_leaves(spec["example_inputs"])
    if not any(isinstance(x, torch.Tensor) for x in leaves):
        raise TargetError(f"{target} returned example_inputs of type {type(spec['example_inputs']).__name__} "
                          f"with no tensor in it; expected a tensor, a tuple of arguments or a dict of keyword "
                          f"arguments")
    if spec.get("loss_fn") is not None and not callable(spec["loss_fn"]):
        raise TargetError(f"{target} returned a loss_fn that is not callable")
    return spec


def _quiet_compile_noise() -> None:
    """Warnings PyTorch prints while compiling that say nothing about the
    model (the report has what matters); the command's own process only."""
    import logging
    import warnings

    warnings.filterwarnings("ignore", message=".*Converting a tensor with requires_grad=True to a scalar.*")
    for name in ("torch._dynamo.variables.torch", "torch._dynamo.variables.ctx_manager"):
        logging.getLogger(name).setLevel(logging.ERROR)  # "Profiler record function ... will be ignored"


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if bool(args.target) == bool(args.hf):
            raise TargetError("give a TARGET (path/to/file.py:function or package.module:function) or --hf "
                              "MODEL_TYPE, not both or neither")
        if args.steps < 1:
            raise TargetError("--steps must be at least 1")
        shapes = parse_shapes(args.shapes)
        from .workload import dtype_name

        try:
            dtypes = [dtype_name(x) for x in args.dtype.split(",") if x.strip()]
        except ValueError as e:
            raise TargetError(str(e).replace("evaluate: ", "--dtype: ")) from None
        import torch  # noqa: F401  (the neuron backend autoloads)
        import torch_neuronx  # noqa: F401

        if args.hf:
            from . import hf

            try:
                spec = hf.build(args.hf, size=args.size, batch_size=args.batch or 2, seq_len=args.seq or 64)
            except hf.HFError as e:
                raise TargetError(str(e)) from None
            label = f"--hf {args.hf}"
        else:
            fn = load_function(args.target)
            spec = call_target(fn, args.target, args.batch, args.seq)
            label = args.target
    except TargetError as e:
        print(f"evaluate: error: {e}", file=sys.stderr)
        return 2

    from .core import evaluate

    _quiet_compile_noise()
    os.makedirs(args.out, exist_ok=True)
    if shapes is None and spec.get("shapes"):
        shapes = list(spec["shapes"])
    try:
        report = evaluate(spec["model"], spec["example_inputs"], loss_fn=spec.get("loss_fn"),
                          optimizer=spec.get("optimizer"), steps=args.steps, dtype=dtypes,
                          compile=not args.no_compile, shapes=shapes, targets=spec.get("targets"),
                          progress=not args.no_progress, profile=not args.no_profile, out_dir=args.out,
                          name=spec.get("name") or None)
    except (TypeError, ValueError) as e:
        print(f"evaluate: error: {label}: {e}", file=sys.stderr)
        return 2
    html_path = report.to_html(os.path.join(args.out, "report.html"))
    json_path = os.path.join(args.out, "report.json")
    report.to_json(json_path)
    text = report.summary()
    with open(os.path.join(args.out, "summary.txt"), "w") as f:
        f.write(text + "\n")
    print(text)
    print(f"\nHTML report: {html_path}\nJSON report: {json_path}")
    return 1 if args.strict and not report.passed else 0
