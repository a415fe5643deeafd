"""``torch.neuron``: the device module of the neuron backend.

Mirrors ``torch.cuda`` where PyTorch users expect it: devices, streams,
events, memory statistics, RNG. Devices are logical NeuronCores served by
the TorchNeuron C runtime on the host CPU.
"""
from __future__ import annotations

import collections
import contextlib
import os
import time
from typing import Any, Iterator, Optional, Union

import torch

from . import _C
from . import memory  # noqa: F401  (torch.neuron.memory, as torch.cuda.memory)

_DeviceLike = Union[torch.device, str, int, None]

_initialized = False


# ---- device management ---------------------------------------------------
def _lazy_init() -> None:
    global _initialized
    if not _initialized:
        _C._init()
        _initialized = True


def init() -> None:
    """Initialises the runtime (otherwise done on first use)."""
    _lazy_init()


def is_initialized() -> bool:
    return _initialized


def _is_in_bad_fork() -> bool:
    # The runtime resets its threads and queues in a forked child, so a
    # DataLoader worker may use the device; no fork is "bad".
    return False


def is_available() -> bool:
    return _C._device_count() > 0


def device_count() -> int:
    return _C._device_count()


def _index(device: _DeviceLike, optional: bool = True) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"expected a neuron device, got {device}")
        return current_device() if device.index is None else device.index
    raise TypeError(f"invalid device {device!r}")


def current_device() -> int:
    return _C._get_device()


def set_device(device: _DeviceLike) -> None:
    idx = _index(device)
    if idx >= 0:
        _C._set_device(idx)


class device:
    """Context manager that changes the current neuron device."""

    def __init__(self, device: _DeviceLike):
        self.idx = -1 if device is None else _index(device)
        self.prev_idx = -1

    def __enter__(self) -> None:
        self.prev_idx = _C._exchange_device(self.idx)

    def __exit__(self, *exc: Any) -> bool:
        _C._exchange_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the tensor's device current."""

    def __init__(self, obj: torch.Tensor):
        super().__init__(obj.get_device() if obj.device.type == "neuron" else None)


def synchronize(device: _DeviceLike = None) -> None:
    """Waits for all work on the device; raises the first asynchronous error."""
    _C._synchronize(_index(device))


class _DeviceProperties:
    def __init__(self, d: dict):
        self.name: str = d["name"]
        self.index: int = d["index"]
        self.physical_core: int = d["physical_core"]
        self.core_count: int = d["core_count"]
        self.total_memory: int = d["total_memory"]
        self.worker_threads: int = d["worker_threads"]

    def __repr__(self) -> str:
        return (f"_NeuronDeviceProperties(name='{self.name}', index={self.index}, "
                f"physical_core={self.physical_core}, core_count={self.core_count}, "
                f"total_memory={self.total_memory // (1 << 20)}MB)")


def get_device_properties(device: _DeviceLike = None) -> _DeviceProperties:
    return _DeviceProperties(_C._device_properties(_index(device)))


def get_device_name(device: _DeviceLike = None) -> str:
    return get_device_properties(device).name


def get_device_capability(device: _DeviceLike = None) -> tuple[int, int]:
    return (3, 0)  # NeuronCore-v3 (Trainium2)


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def get_arch_list() -> list[str]:
    """Architectures this build runs on (``torch.cuda.get_arch_list``'s
    counterpart): the software NeuronCore-v3 (Trainium2's core)."""
    return ["neuroncore-v3"]


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]


# ---- streams and events ----------------------------------------------------
class _NeuronTypeMeta(type):
    """isinstance(x, torch.neuron.Stream) holds for any neuron torch.Stream.

    torch.neuron.Stream()/Event() return plain torch.Stream/torch.Event
    objects: PyTorch's C methods (elapsed_time, wait_event, ...) accept only
    those exact types, so a Python subclass would not interoperate."""

    _base: type

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls._base) and obj.device.type == "neuron"


class _NeuronStream(torch.Stream):
    """A ``torch.Stream`` on a neuron device, with ``torch.cuda.Stream``'s
    ``priority``. The runtime schedules every stream alike, so there is one
    priority level: every stream reports 0, as CUDA clamps a requested
    priority into its device's range."""

    @property
    def priority(self) -> int:
        return 0


def _wrap(s: torch.Stream) -> torch.Stream:
    return _NeuronStream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


class Stream(metaclass=_NeuronTypeMeta):
    """An in-order queue of work on a neuron device (a ``torch.Stream``)."""

    _base = torch.Stream

    def __new__(cls, device: _DeviceLike = None, priority: int = 0) -> torch.Stream:  # type: ignore[misc]
        return _wrap(torch.Stream(device=torch.device("neuron", _index(device)), priority=priority))

    @staticmethod
    def priority_range() -> tuple[int, int]:
        """(lowest, highest) stream priority: the runtime has one level."""
        return (0, 0)


class Event(metaclass=_NeuronTypeMeta):
    """A marker in a stream, with optional timing (a ``torch.Event``)."""

    _base = torch.Event

    def __new__(cls, enable_timing: bool = False, blocking: bool = False,  # type: ignore[misc]
                interprocess: bool = False) -> torch.Event:
        return torch.Event(device=torch.device("neuron", current_device()), enable_timing=enable_timing,
                           blocking=blocking, interprocess=interprocess)


class ExternalStream(metaclass=_NeuronTypeMeta):
    """A neuron stream given by its runtime handle (an ``nrt_stream*`` that
    another library obtained from the TorchNeuron runtime, or
    ``torch.neuron.stream_handle(s)``), as ``torch.cuda.ExternalStream``
    wraps a ``cudaStream_t``. A handle that is not one of the runtime's
    streams raises ``ValueError``."""

    _base = torch.Stream

    def __new__(cls, stream_ptr: int, device: _DeviceLike = None) -> torch.Stream:  # type: ignore[misc]
        try:
            dev, idx = _C._stream_lookup(int(stream_ptr))
        except RuntimeError as e:
            raise ValueError(f"ExternalStream: {e}") from None
        if device is not None and _index(device) != dev:
            raise ValueError(f"ExternalStream: the handle is a stream of neuron:{dev}, not of {device}")
        return _NeuronStream(stream_id=idx, device_index=dev,
                             device_type=torch.accelerator.current_stream(dev).device_type)


def stream_handle(stream: torch.Stream) -> int:
    """The runtime handle (``nrt_stream*``) of a neuron stream, for C code
    that enqueues work with the runtime's API; ``ExternalStream`` maps it back."""
    return _C._stream_pointer(stream.device_index, stream.stream_id)


def current_stream(device: _DeviceLike = None) -> torch.Stream:
    return _wrap(torch.accelerator.current_stream(_index(device)))


def default_stream(device: _DeviceLike = None) -> torch.Stream:
    idx = _index(device)
    cur = torch.accelerator.current_stream(idx)
    return _NeuronStream(stream_id=0, device_index=idx, device_type=cur.device_type)


def set_stream(stream: Optional[torch.Stream]) -> None:
    if stream is not None:
        torch.accelerator.set_stream(stream)


@contextlib.contextmanager
def stream(stream: Optional[torch.Stream]) -> Iterator[None]:
    """Makes ``stream`` current on its device for the block."""
    if stream is None:
        yield
        return
    prev = torch.accelerator.current_stream(stream.device_index)
    prev_dev = current_device()
    set_device(stream.device_index)
    torch.accelerator.set_stream(stream)
    try:
        yield
    finally:
        torch.accelerator.set_stream(prev)
        set_device(prev_dev)


class StreamContext:
    def __init__(self, stream: Optional[torch.Stream]):
        self._cm = globals()["stream"](stream)

    def __enter__(self) -> None:
        self._cm.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._cm.__exit__(*exc)


# ---- memory --------------------------------------------------------------------
def memory_stats(device: _DeviceLike = None) -> "collections.OrderedDict[str, Any]":
    """Allocator statistics with the keys of ``torch.cuda.memory_stats``."""
    raw = _C._memory_stats(_index(device))
    return collections.OrderedDict(sorted(raw.items()))


def memory_allocated(device: _DeviceLike = None) -> int:
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device: _DeviceLike = None) -> int:
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device: _DeviceLike = None) -> int:
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device: _DeviceLike = None) -> int:
    return memory_stats(device)["reserved_bytes.all.peak"]


def max_memory_cached(device: _DeviceLike = None) -> int:
    """Deprecated alias of ``max_memory_reserved`` (as in ``torch.cuda``)."""
    return max_memory_reserved(device)


def memory_cached(device: _DeviceLike = None) -> int:
    """Deprecated alias of ``memory_reserved`` (as in ``torch.cuda``)."""
    return memory_reserved(device)


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    _C._reset_peak(_index(device))


def reset_max_memory_allocated(device: _DeviceLike = None) -> None:
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device: _DeviceLike = None) -> None:
    _C._reset_accumulated(_index(device))


def empty_cache() -> None:
    """Returns cached, unused device memory to the host."""
    _C._empty_cache()


def mem_get_info(device: _DeviceLike = None) -> tuple[int, int]:
    """(free, total) bytes of the device's memory capacity."""
    return tuple(_C._mem_get_info(_index(device)))  # type: ignore[return-value]


def set_memory_capacity(nbytes: int, device: _DeviceLike = None) -> None:
    """Sets a device's memory capacity (default 24 GiB, or TORCH_NEURONX_DEVICE_MEMORY)."""
    _C._set_memory_capacity(_index(device), int(nbytes))


def memory_snapshot() -> list[dict[str, Any]]:
    """Every reserved segment of every device with its blocks, in the format
    of ``torch.cuda.memory_snapshot()`` (segments with ``blocks``; block
    states ``active_allocated``, ``active_pending_free``, ``inactive``).
    Stack traces are not recorded (see ``memory._record_memory_history``)."""
    states = {0: "inactive", 1: "active_allocated", 2: "active_pending_free"}
    out = []
    for dev in range(device_count()):
        for seg in _C._memory_snapshot(dev):
            blocks = [dict(address=b[0], size=b[1], requested_size=b[2], state=states[b[3]], frames=[])
                      for b in seg["blocks"]]
            out.append(dict(
                device=dev, address=seg["address"], total_size=seg["size"],
                allocated_size=sum(b["size"] for b in blocks if b["state"] == "active_allocated"),
                active_size=sum(b["size"] for b in blocks if b["state"] != "inactive"),
                requested_size=sum(b["requested_size"] for b in blocks),
                stream=seg["stream"], segment_type="small" if seg["pool"] == 1 else "large",
                segment_pool_id=(0, 0), is_expandable=False, frames=[], blocks=blocks))
    return out


def host_memory_stats() -> "collections.OrderedDict[str, Any]":
    """Pinned host memory statistics with ``torch.cuda.host_memory_stats``'s
    allocation keys (``allocations.*``, ``allocated_bytes.*``: current, peak,
    allocated, freed)."""
    return collections.OrderedDict(sorted(_C._host_memory_stats().items()))


_busy_last: dict[int, tuple[int, int]] = {}
_IMPORT_NS = time.monotonic_ns()  # CLOCK_MONOTONIC, the runtime's clock


def utilization(device: _DeviceLike = None) -> int:
    """Percent of time the device ran work since the previous call (the first
    call: since the runtime started), like ``torch.cuda.utilization``'s
    sampled kernel-busy percentage. Overlapping streams count once per
    stream, capped at 100."""
    idx = _index(device)
    busy, now = _C._device_busy_time(idx)
    last_busy, last_now = _busy_last.get(idx, (0, _IMPORT_NS))
    _busy_last[idx] = (busy, now)
    if now <= last_now:
        return 0
    return min(100, round(100 * (busy - last_busy) / (now - last_now)))


_full_capacity: dict[int, int] = {}


def set_per_process_memory_fraction(fraction: float, device: _DeviceLike = None) -> None:
    """Limits this process to ``fraction`` of the device's memory (as in
    ``torch.cuda``): allocations beyond it raise ``torch.OutOfMemoryError``.
    The fraction is of the capacity the device started with."""
    if not isinstance(fraction, (int, float)) or isinstance(fraction, bool):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    idx = _index(device)
    full = _full_capacity.setdefault(idx, get_device_properties(idx).total_memory)
    _C._set_memory_capacity(idx, int(full * fraction))


def get_per_process_memory_fraction(device: _DeviceLike = None) -> float:
    """The fraction set by ``set_per_process_memory_fraction`` (1.0 if none)."""
    idx = _index(device)
    full = _full_capacity.get(idx)
    return 1.0 if full is None else mem_get_info(idx)[1] / full


OutOfMemoryError = torch.OutOfMemoryError


def _fmt(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} GiB"


def memory_summary(device: _DeviceLike = None, abbreviated: bool = False) -> str:
    """A table of the allocator's statistics, like ``torch.cuda.memory_summary``."""
    idx = _index(device)
    s = memory_stats(idx)
    lines = [f"neuron:{idx} memory summary (capacity {_fmt(s['capacity'])})",
             f"{'metric':<24}{'current':>14}{'peak':>14}{'total alloc':>14}{'total freed':>14}"]
    for key, label, fmt in (("allocated_bytes", "Allocated memory", _fmt), ("active_bytes", "Active memory", _fmt),
                            ("requested_bytes", "Requested memory", _fmt),
                            ("reserved_bytes", "Reserved memory", _fmt), ("allocation", "Allocations", str),
                            ("segment", "Segments", str)):
        pools = ("all",) if abbreviated else ("all", "large_pool", "small_pool")
        for p in pools:
            k = f"{key}.{p}"
            name = label if p == "all" else f"  from {p.replace('_pool', '')} pool"
            lines.append(f"{name:<24}{fmt(s[k + '.current']):>14}{fmt(s[k + '.peak']):>14}"
                         f"{fmt(s[k + '.allocated']):>14}{fmt(s[k + '.freed']):>14}")
    lines.append(f"OOMs: {s['num_ooms']}   cache flushes: {s['num_alloc_retries']}")
    return "\n".join(lines)


# ---- RNG --------------------------------------------------------------------------
def _generator(device: _DeviceLike = None) -> torch.Generator:
    return _C._default_generator(_index(device))


def manual_seed(seed: int) -> None:
    """Seeds the current device's generator."""
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        _generator(i).manual_seed(int(seed))


def seed() -> None:
    _generator().seed()


def seed_all() -> None:
    import random as _random
    s = _random.getrandbits(63)
    manual_seed_all(s)


def initial_seed() -> int:
    return _generator().initial_seed()


def get_rng_state(device: _DeviceLike = "neuron") -> torch.Tensor:
    return _generator(device).get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state: torch.Tensor, device: _DeviceLike = "neuron") -> None:
    _generator(device).set_state(new_state.cpu())


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    for i, s in enumerate(new_states):
        set_rng_state(s, i)


__all__ = [n for n in dir() if not n.startswith("_") and n not in ("annotations", "collections", "contextlib",
                                                                   "os", "torch", "Any", "Iterator", "Optional",
                                                                   "Union")]
