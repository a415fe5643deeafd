"""TorchNeuron: the ``neuron`` device for PyTorch.

Importing this package (``import torch`` does it through the
``torch.backends`` entry point unless ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``)
registers PyTorch's PrivateUse1 device under the name ``neuron``, installs
``torch.neuron`` and adds ``Tensor.neuron()`` / ``Tensor.is_neuron``.

Ops run natively in the C runtime when a kernel exists; the others run on
the CPU through a fallback that warns once per op.
``get_fallback_ops()``, ``get_executed_ops()`` and ``clear_op_tracking()``
say which was which.
"""
from __future__ import annotations


def _autoload() -> None:
    """Entry point for ``torch.backends``: importing the package is enough.

    Defined before ``import torch`` so that ``import torch_neuronx`` as the
    first import works: torch's autoload then finds this function on the
    partially initialised module instead of failing on a circular import."""


import torch  # noqa: E402

from . import _C  # noqa: E402 F401 # noqa: F401  (registers kernels, allocator, guard, hooks)

__all__ = [
    "get_fallback_ops",
    "get_executed_ops",
    "clear_op_tracking",
    "native_ops",
    "device_count",
    "env_vars",
]

_BACKEND = "neuron"


def _register() -> None:
    if torch._C._get_privateuse1_backend_name() != _BACKEND:
        torch.utils.rename_privateuse1_backend(_BACKEND)
    from . import neuron as _neuron_mod

    if not hasattr(torch, _BACKEND):
        torch._register_device_module(_BACKEND, _neuron_mod)
    # bfloat16 is this hardware's low-precision type: torch.autocast("neuron")
    # without a dtype uses it (PyTorch's default for a new device is float16).
    torch.set_autocast_dtype(_BACKEND, torch.bfloat16)
    if not hasattr(torch.Tensor, "is_neuron"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )


_register()

from . import multiprocessing as _multiprocessing  # noqa: E402
from . import printing as _printing  # noqa: E402
from . import compiler  # noqa: E402,F401  (torch.compile backend "neuron", registered when Dynamo loads)
from . import profiler  # noqa: E402,F401  (torch_neuronx.profiler: device time per kernel)

_printing.install()
_multiprocessing.install()

from . import distributed  # noqa: E402 F401  (backend "neuron"; each rank's share of the cores)


def _drain_at_exit() -> None:
    # Let queued device work and autograd's device threads finish before the
    # interpreter tears down: without a pause, a process that exits right
    # after backward() can abort in "terminate called without an active
    # exception" (pytorch/pytorch#38228, seen for every non-CPU device).
    import time

    try:
        for i in range(_C._device_count()):
            _C._synchronize(i)
    except Exception:
        pass
    time.sleep(0.01)


import atexit  # noqa: E402

atexit.register(_drain_at_exit)


def get_fallback_ops() -> list[str]:
    """Ops that ran on the CPU through the fallback since the last
    ``clear_op_tracking()``, sorted by name."""
    return sorted(_C._fallback_ops().keys())


def get_fallback_counts() -> dict[str, int]:
    """Like ``get_fallback_ops()`` with the number of calls of each op."""
    return dict(_C._fallback_ops())


def get_executed_ops() -> dict[str, int]:
    """Every op executed on the neuron device (natively or by the CPU
    fallback) since the last ``clear_op_tracking()``, with call counts."""
    return dict(_C._executed_ops())


def clear_op_tracking() -> None:
    """Resets the counters behind ``get_executed_ops()`` and ``get_fallback_ops()``."""
    _C._clear_op_tracking()


def native_ops() -> list[str]:
    """Every ATen op with a native neuron kernel (the registration table)."""
    return sorted(set(_C._native_ops()))


def env_vars() -> list[dict]:
    """Every environment variable the project reads (the runtime's one table):
    name, type, default, which part acts on it, help, and the value read at
    start-up (``None`` when unset). docs/env-vars.md is generated from it."""
    return [dict(row) for row in _C._env_table()]


def device_count() -> int:
    """Number of logical NeuronCores visible to this process."""
    return _C._device_count()
from . import evaluate  # noqa: E402,F401  (torch_neuronx.evaluate(model, ...); python -m torch_neuronx.evaluate)
