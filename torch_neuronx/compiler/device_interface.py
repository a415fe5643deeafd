"""The Dynamo device interface for ``neuron`` (torch._dynamo.device_interface):
what Dynamo asks of a device when it traces device, stream and event calls."""
from __future__ import annotations

from typing import Any

import torch
from torch._dynamo.device_interface import DeviceInterface, register_interface_for_device

from .. import neuron as _neuron


class NeuronInterface(DeviceInterface):
    device = _neuron.device  # type: ignore[assignment]
    Event = torch.Event  # type: ignore[assignment]
    Stream = torch.Stream  # type: ignore[assignment]

    class Worker:
        @staticmethod
        def set_device(device: int) -> None:
            _neuron.set_device(device)

        @staticmethod
        def current_device() -> int:
            return _neuron.current_device()

        @staticmethod
        def get_device_properties(device: torch.types.Device = None) -> Any:
            return _neuron.get_device_properties(device)

    current_device = staticmethod(_neuron.current_device)
    set_device = staticmethod(_neuron.set_device)
    device_count = staticmethod(_neuron.device_count)
    is_available = staticmethod(_neuron.is_available)
    current_stream = staticmethod(_neuron.current_stream)
    set_stream = staticmethod(_neuron.set_stream)
    stream = staticmethod(_neuron.stream)
    synchronize = staticmethod(_neuron.synchronize)
    get_device_properties = staticmethod(_neuron.get_device_properties)  # type: ignore[assignment]

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        old = _neuron.current_device()
        if device != old:
            _neuron.set_device(device)
        return old

    exchange_device = maybe_exchange_device

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        _neuron.set_stream(torch.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type))

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return _neuron.stream_handle(_neuron.current_stream(device_idx))

    @staticmethod
    def get_compute_capability(device: torch.types.Device = None) -> Any:
        return ""

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True

    @staticmethod
    def is_triton_capable(device: torch.types.Device = None) -> bool:
        return False


def register() -> None:
    register_interface_for_device("neuron", NeuronInterface)
    for i in range(_neuron.device_count()):
        register_interface_for_device(f"neuron:{i}", NeuronInterface)
