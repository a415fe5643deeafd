"""Plain ``torch.compile(model)`` (Inductor) on neuron tensors: Inductor has
no code generator for this device, so fail before it starts, with a message
that names the neuron backend."""
from __future__ import annotations

import functools
import sys
from typing import Any

import torch

MESSAGE = (
    "torch.compile: Inductor (the default backend) has no code generator for the 'neuron' device, and this "
    "graph has neuron tensors ({what}). Use torch.compile(model, backend=\"neuron\"), or call "
    "torch.compiler.set_default_backend(\"neuron\") once so that torch.compile(model) uses it.")


def _neuron_input(gm: Any, example_inputs: Any) -> str:
    for i, x in enumerate(example_inputs or ()):
        if isinstance(x, torch.Tensor) and x.device.type == "neuron":
            return f"input {i}: {tuple(x.shape)} {x.dtype} on {x.device}"
    for node in getattr(getattr(gm, "graph", None), "nodes", ()):
        v = node.meta.get("example_value", node.meta.get("val"))
        if isinstance(v, torch.Tensor) and v.device.type == "neuron":
            return f"{node.name}: {tuple(v.shape)} {v.dtype} on {v.device}"
    return ""


def _wrap(module: Any) -> None:
    fn = getattr(module, "compile_fx", None)
    if fn is None or getattr(fn, "_neuron_checked", False):
        return

    @functools.wraps(fn)
    def compile_fx(model_: Any, example_inputs_: Any, *args: Any, **kwargs: Any):
        what = _neuron_input(model_, example_inputs_)
        if what:
            raise RuntimeError(MESSAGE.format(what=what))
        return fn(model_, example_inputs_, *args, **kwargs)

    compile_fx._neuron_checked = True  # type: ignore[attr-defined]
    module.compile_fx = compile_fx


class _AfterImport:
    def find_spec(self, name, path=None, target=None):
        if name != "torch._inductor.compile_fx":
            return None
        import importlib.machinery

        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_wrap(module):
            exec_module(module)
            _wrap(module)

        spec.loader.exec_module = exec_and_wrap
        return spec


def install() -> None:
    mod = sys.modules.get("torch._inductor.compile_fx")
    if mod is not None:
        _wrap(mod)
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())
