"""Printing neuron tensors without touching float64.

PyTorch's tensor printing converts the values to float64 to choose a format
(MPS and XPU without float64 convert to float32 instead). On neuron that would
be float64 computation, which the device runs at float32 precision with a
one-time warning: printing a float32 tensor would spend that warning before
any real float64 work. A float32 copy formats a float32/float16/bfloat16
tensor exactly, so those convert to float32; float64 tensors keep float64.
"""
from __future__ import annotations

import torch
import torch._tensor_str as _tensor_str

_BACKEND = "neuron"
_original_totype = _tensor_str.tensor_totype


def _tensor_totype(t: torch.Tensor) -> torch.Tensor:
    if t.device.type == _BACKEND and t.dtype != torch.float64:
        return t.to(dtype=torch.float)
    return _original_totype(t)


def install() -> None:
    """Routes torch's print formatting of neuron tensors through float32."""
    _tensor_str.tensor_totype = _tensor_totype
