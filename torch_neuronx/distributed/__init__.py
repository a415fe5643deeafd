"""torch.distributed backend ``"neuron"``.

Importing torch_neuronx (``import torch`` does it) registers the backend, so
under ``torchrun`` a program only calls::

    torch.distributed.init_process_group("neuron")
    torch.neuron.set_device(int(os.environ["LOCAL_RANK"]))

The backend is a C++ ``c10d::Backend`` (csrc/distributed/) over the runtime's
shared-memory transport (runtime/include/nrt/collectives.h): every process of
a job on one machine maps its peers' segments, and each process group runs its
operations in order on its own communication stream. It serves neuron tensors
asynchronously (``Work.wait()`` orders the current stream after the operation,
as on a GPU) and CPU tensors too (object collectives, DTensor metadata), which
complete before the call returns.

Importing this module also gives each process its share of the machine's
cores: under a launcher that sets ``LOCAL_WORLD_SIZE`` (torchrun does), and
unless ``TORCH_NEURONX_KERNEL_THREADS`` is set, the runtime's kernel threads
are set to ``cores // LOCAL_WORLD_SIZE`` (at least 1), so N ranks do not
oversubscribe the machine. This happens at import, before the runtime reads
its configuration at the first device use.
"""
from __future__ import annotations

import os

import torch

__all__ = ["BACKEND", "is_available", "kernel_threads_for"]

#: The name to pass to ``torch.distributed.init_process_group``.
BACKEND = "neuron"


def kernel_threads_for(local_world_size: int, cores: int | None = None) -> int:
    """Kernel threads each of ``local_world_size`` processes on this machine
    gets: its share of the cores it may run on, at least one."""
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
    return max(1, cores // max(1, local_world_size))


def _share_kernel_threads() -> None:
    if os.environ.get("TORCH_NEURONX_KERNEL_THREADS"):
        return
    try:
        local = int(os.environ.get("LOCAL_WORLD_SIZE", ""))
    except ValueError:
        return
    if local > 1:
        os.environ["TORCH_NEURONX_KERNEL_THREADS"] = str(kernel_threads_for(local))


def is_available() -> bool:
    """True when torch.distributed is built in (the backend then is registered)."""
    return torch.distributed.is_available()


def _create_backend(dist_options, backend_options=None):
    """c10d's creator (``extended_api=True``): a ``_DistributedBackendOptions``
    with the group's prefixed store, rank, size, timeout and name."""
    from .. import _C

    timeout_ms = int(dist_options.timeout.total_seconds() * 1000)
    return _C._dist_create_backend(
        dist_options.store,
        dist_options.group_rank,
        dist_options.group_size,
        max(1, timeout_ms),
        str(dist_options.group_id),
    )


def backend_info(group=None) -> dict:
    """The neuron backend of ``group`` (default: the world): its communicator's
    name, the device and stream index of its communication stream (-1 before
    its first operation) and how many operations it ran. For tests."""
    from .. import _C

    import torch.distributed as dist

    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return dict(_C._dist_backend_info(pg._get_backend(torch.device(BACKEND))))


def _register() -> None:
    if not is_available():
        return
    from torch.distributed import Backend

    if BACKEND.upper() in Backend._plugins:
        return
    Backend.register_backend(BACKEND, _create_backend, extended_api=True, devices=[BACKEND, "cpu"])


_share_kernel_threads()
_register()
