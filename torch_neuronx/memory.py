"""``torch.neuron.memory``: the allocator introspection of ``torch.cuda.memory``
that ported code calls."""
from __future__ import annotations

from typing import Any


def _record_memory_history(enabled: Any = "all", *args: Any, **kwargs: Any) -> None:
    """Turning history off (``enabled=None`` or ``False``) is accepted; turning
    it on is not supported: the runtime does not record the Python stack of
    each allocation. ``torch.neuron.memory_snapshot()`` still lists every
    segment and block, without stack frames."""
    if enabled in (None, False):
        return
    raise NotImplementedError(
        "torch.neuron.memory._record_memory_history: the neuron allocator does not record "
        "allocation stack traces; use torch.neuron.memory_snapshot() (segments and blocks, "
        "without frames) or torch.neuron.memory_summary()")


def _snapshot(device: Any = None) -> dict[str, Any]:
    """``torch.cuda.memory._snapshot``'s shape: segments, and no traces."""
    from .neuron import memory_snapshot

    return {"segments": memory_snapshot(), "device_traces": []}
