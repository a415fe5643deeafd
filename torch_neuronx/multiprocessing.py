"""Neuron tensors and torch.multiprocessing.

torch.multiprocessing shares CUDA tensors between processes through CUDA IPC
handles; the neuron device has no such sharing yet. Pickling a neuron tensor
for another process would otherwise fail inside multiprocessing.Queue's feeder
thread, out of the caller's sight, and leave the receiver blocked forever.
Instead, put() on a queue and any pickling for another process raise a clear
error in the caller.
"""
from __future__ import annotations

import multiprocessing.queues
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch

_BACKEND = "neuron"
_MESSAGE = (
    "neuron tensors cannot be sent to another process: the neuron device has no "
    "inter-process memory sharing (CUDA's IPC handles have no neuron equivalent yet). "
    "Send a CPU copy instead (t.cpu()) and move it to the device in the receiver."
)


def _holds_neuron_tensor(obj: Any, depth: int = 0) -> bool:
    """Whether obj is, or directly contains (up to three container levels), a
    neuron tensor: the shapes queues carry in practice (a tensor, a tuple of
    index and tensor, a dict of tensors)."""
    if isinstance(obj, torch.Tensor):
        return obj.device.type == _BACKEND
    if depth >= 3:
        return False
    if isinstance(obj, (list, tuple, set, frozenset)):
        return any(_holds_neuron_tensor(x, depth + 1) for x in obj)
    if isinstance(obj, dict):
        return any(_holds_neuron_tensor(x, depth + 1) for x in obj.values())
    return False


def _check(obj: Any) -> None:
    if _holds_neuron_tensor(obj):
        raise RuntimeError(_MESSAGE)


_original_put = multiprocessing.queues.Queue.put


def _put(self, obj, block=True, timeout=None):  # type: ignore[no-untyped-def]
    _check(obj)
    return _original_put(self, obj, block, timeout)


def install() -> None:
    """Makes sending a neuron tensor to another process fail at the sender."""
    multiprocessing.queues.Queue.put = _put  # type: ignore[method-assign]
    # Paths that pickle in the caller (SimpleQueue, Pipe, Pool arguments) go
    # through the reducers torch.multiprocessing registers on import; ours
    # wrap them and refuse neuron tensors and storages only.
    from torch.multiprocessing import reductions
    from torch.nn.parameter import Parameter

    def reduce_tensor(tensor):  # type: ignore[no-untyped-def]
        if tensor.device.type == _BACKEND:
            raise RuntimeError(_MESSAGE)
        return reductions.reduce_tensor(tensor)

    def reduce_storage(storage):  # type: ignore[no-untyped-def]
        if storage.device.type == _BACKEND:
            raise RuntimeError(_MESSAGE)
        return reductions.reduce_storage(storage)

    for cls in (torch.Tensor, Parameter, *torch._tensor_classes):
        ForkingPickler.register(cls, reduce_tensor)
    ForkingPickler.register(torch.UntypedStorage, reduce_storage)
