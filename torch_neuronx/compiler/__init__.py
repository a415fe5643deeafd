"""``torch.compile(model, backend="neuron")``: Dynamo graphs compiled by the
C graph compiler (runtime/src/compiler) into programs that run as one
stream task.

Importing this module is cheap: it registers nothing with Dynamo until
``torch._dynamo`` is imported (``torch.compile`` does that), then installs
the backend, the Dynamo device interface for ``neuron`` and the check that
turns Inductor's failure on neuron tensors into a clear error. The
``torch_dynamo_backends`` entry point finds the backend the same way.
"""
from __future__ import annotations

import sys
import threading
from typing import Any

from .metrics import get_dynamo_metrics, reset_dynamo_metrics

__all__ = ["neuron_backend", "get_dynamo_metrics", "reset_dynamo_metrics", "reset", "install"]

_installed = False
_lock = threading.RLock()


def neuron_backend(gm, example_inputs, **kwargs: Any):
    """The Dynamo backend (``torch.compile(m, backend="neuron")``)."""
    from .backend import neuron_backend as impl

    return impl(gm, example_inputs, **kwargs)


neuron_backend.compiler_name = "neuron"


def install() -> None:
    """Registers the backend "neuron", the Dynamo device interface, graph-safe
    RNG hooks and the Inductor check (idempotent)."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        from torch._dynamo.backends import registry

        if "neuron" not in registry._COMPILER_FNS:
            registry.register_backend(compiler_fn=neuron_backend, name="neuron")
        from . import device_interface, inductor

        device_interface.register()
        inductor.install()


def reset() -> None:
    """Forgets compiled programs held in memory (the disk cache stays) and the statistics."""
    from . import cache

    cache.clear_memory_cache()
    reset_dynamo_metrics()


class _AfterImport:
    """A meta-path hook that runs install() once torch._dynamo has been
    imported, so ``import torch`` does not pay for importing Dynamo."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch._dynamo":
            return None
        import importlib.machinery

        sys.meta_path.remove(self)
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
        finally:
            pass
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_install(module):
            exec_module(module)
            try:
                install()
            except Exception as e:  # never break torch._dynamo's import
                import warnings

                warnings.warn(f"torch_neuronx: could not register the 'neuron' compile backend: {e}")

        loader.exec_module = exec_and_install
        return spec


def _hook() -> None:
    import torch

    if "torch._dynamo" in sys.modules:
        install()
    else:
        sys.meta_path.insert(0, _AfterImport())
    # torch.neuron.get_dynamo_metrics (AWS's name)
    mod = getattr(torch, "neuron", None)
    if mod is not None and not hasattr(mod, "get_dynamo_metrics"):
        mod.get_dynamo_metrics = get_dynamo_metrics
        mod.reset_dynamo_metrics = reset_dynamo_metrics


_hook()
