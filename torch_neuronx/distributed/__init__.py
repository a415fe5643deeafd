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

Across machines (``torchrun --nnodes=N``) it is hierarchical: the ranks of a
machine share memory, and one rank per machine, its leader (the lowest rank),
exchanges with the other machines' leaders through Gloo (c10d's
``ProcessGroupGloo``, over TCP, created here from the group's store).
all_reduce, reduce, broadcast, all_gather, reduce_scatter and barrier reduce
or move within each machine first and cross between machines once;
all_to_all, gather, scatter and send/recv to another machine go through a
Gloo group of all the ranks. Which ranks share a machine: the host names the
ranks exchange through the store when a group is created, unless
``TORCH_NEURONX_NODE_ID`` says otherwise.

Environment variables read here (not in the runtime's table: they matter
only when a process group is created):

``TORCH_NEURONX_NODE_ID``
    The machine this process counts as on, instead of its host name: ranks
    with the same value share memory, ranks with different values talk
    through Gloo. For running several "machines" on one host (tests:
    ``torchrun --nnodes=2 --node-rank=K`` with ``TORCH_NEURONX_NODE_ID=K``).
``TORCH_NEURONX_DIST_TRANSPORT``
    ``hierarchical`` (default): shared memory within a machine, Gloo between
    machines. ``shm``: every rank on one shared-memory communicator, as if on
    one machine (all ranks must be on one host). ``gloo``: every rank counts
    as its own machine, so everything goes through Gloo (between ranks the
    runtime's folds still do what they do: AVG, PREMUL_SUM, bool, int16 and
    complex reductions). Every rank of a group must ask for the same.

Importing this module also gives each process its share of the machine's
cores: under a launcher that sets ``LOCAL_WORLD_SIZE`` (torchrun does), and
unless ``TORCH_NEURONX_KERNEL_THREADS`` is set, the runtime's kernel threads
are set to ``cores // LOCAL_WORLD_SIZE`` (at least 1), so N ranks do not
oversubscribe the machine. This happens at import, before the runtime reads
its configuration at the first device use.
"""
from __future__ import annotations

import json
import os
import socket
from datetime import timedelta

import torch

__all__ = ["BACKEND", "TRANSPORTS", "is_available", "kernel_threads_for", "machines_of_ranks"]

#: The name to pass to ``torch.distributed.init_process_group``.
BACKEND = "neuron"

#: The values of ``TORCH_NEURONX_DIST_TRANSPORT``; the first is the default.
TRANSPORTS = ("hierarchical", "shm", "gloo")


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


def _transport() -> str:
    transport = os.environ.get("TORCH_NEURONX_DIST_TRANSPORT", "").strip().lower() or TRANSPORTS[0]
    if transport not in TRANSPORTS:
        raise ValueError(f"TORCH_NEURONX_DIST_TRANSPORT={transport!r}: expected one of {', '.join(TRANSPORTS)}")
    return transport


def machines_of_ranks(ranks: list, transport: str) -> list[int]:
    """Each rank's machine, numbered 0, 1, ... in the order of their lowest
    rank, from every rank's ``{"transport", "node", "host"}`` record (what
    ``_create_backend`` exchanges). Raises if the ranks disagree on the
    transport or ask for shared memory across hosts."""
    asked = sorted({r["transport"] for r in ranks})
    if len(asked) > 1:
        by = {t: [p for p, r in enumerate(ranks) if r["transport"] == t] for t in asked}
        raise RuntimeError("neuron backend: the ranks ask for different TORCH_NEURONX_DIST_TRANSPORT: " +
                           "; ".join(f"{t} on ranks {by[t]}" for t in asked))
    if transport == "gloo":
        return list(range(len(ranks)))
    if transport == "shm":
        hosts = sorted({r["host"] for r in ranks})
        if len(hosts) > 1:
            raise RuntimeError(f"neuron backend: TORCH_NEURONX_DIST_TRANSPORT=shm needs every rank on one host, "
                               f"the group runs on {', '.join(hosts)}")
        return [0] * len(ranks)
    numbers: dict = {}
    return [numbers.setdefault(r["node"], len(numbers)) for r in ranks]


# Backends created per group name in this process: a group re-created under
# the same name (after destroy_process_group) gets fresh keys in the store.
_generations: dict = {}


def _create_backend(dist_options, backend_options=None):
    """c10d's creator (``extended_api=True``): a ``_DistributedBackendOptions``
    with the group's prefixed store, rank, size, timeout and name. Finds out
    which ranks share a machine (every rank publishes its node through the
    store) and, when the group spans machines, creates its Gloo groups: one
    over all its ranks and, on each machine's leader, one among the leaders."""
    from .. import _C

    import torch.distributed as dist

    store, rank, size = dist_options.store, dist_options.group_rank, dist_options.group_size
    group = str(dist_options.group_id)
    timeout = dist_options.timeout if dist_options.timeout else timedelta(minutes=30)
    generation = _generations.get(group, 0)
    _generations[group] = generation + 1
    space = f"neuron-{generation}"

    transport = _transport()
    machines = [0] * size
    world_gloo = leaders_gloo = None
    if size > 1:
        host = socket.gethostname()
        mine = {"transport": transport, "node": os.environ.get("TORCH_NEURONX_NODE_ID", "").strip() or host,
                "host": host}
        store.set(f"{space}/machine/{rank}", json.dumps(mine))
        machines = machines_of_ranks([json.loads(store.get(f"{space}/machine/{p}")) for p in range(size)],
                                     transport)
    count = max(machines) + 1
    if count > 1:
        world_gloo = dist.ProcessGroupGloo(dist.PrefixStore(f"{space}/gloo", store), rank, size, timeout)
        leaders = [machines.index(m) for m in range(count)]
        if count == size:
            leaders_gloo = world_gloo
        elif rank in leaders:
            leaders_gloo = dist.ProcessGroupGloo(dist.PrefixStore(f"{space}/gloo-leaders", store),
                                                 machines[rank], count, timeout)
    timeout_ms = int(timeout.total_seconds() * 1000)
    return _C._dist_create_backend(store, rank, size, max(1, timeout_ms), group, machines,
                                   world_gloo, leaders_gloo, transport)


def backend_info(group=None) -> dict:
    """The neuron backend of ``group`` (default: the world): its communicator's
    name, the device and stream index of its communication stream (-1 before
    its first operation), how many operations it ran, the transport asked
    for, how many machines the group spans and how many of its ranks share
    this rank's machine. For tests."""
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
