"""Every native kernel's output against its meta function (FakeTensor cross-reference).

    from torch_neuronx.meta_check import meta_crossref
    with meta_crossref():
        loss = model(x).sum(); loss.backward()

Inside the block every ATen op is also run on FakeTensors (PyTorch's
``CrossRefFakeMode`` with stride checking): the device result's sizes,
strides, storage offset, dtype, device and aliasing must equal what the op's
meta function gives, or ``MetadataMismatchError`` names the op and output.
``torch.compile`` bakes views computed from meta values into its graphs, so a
kernel that returns another layout breaks compiled code; the model tests and
the OpInfo sweep run under this check.

One difference is accepted, as PyTorch accepts it for its flash, efficient
and cuDNN attention: the fused attention op returns its Philox seed and
offset (outputs 6 and 7) as CPU scalars, which its meta function places on
the device. The backward reads them on the host without a device sync.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch._subclasses import fake_utils
from torch._subclasses.fake_utils import CrossRefFakeMode, MetadataMismatchError

__all__ = ["meta_crossref", "MetadataMismatchError"]

_SDPA = torch.ops.aten._scaled_dot_product_fused_attention_overrideable.default


def _accepted(original):
    def is_sdpa_error(func, idx, e) -> bool:
        if func is _SDPA and idx in (6, 7) and "Devices" in repr(e):
            return True
        return original(func, idx, e)

    return is_sdpa_error


@contextlib.contextmanager
def meta_crossref(check_strides: bool = True) -> Iterator[None]:
    """Cross-check every op run inside against its meta function (see the module doc)."""
    original = fake_utils.is_sdpa_error
    fake_utils.is_sdpa_error = _accepted(original)
    try:
        with CrossRefFakeMode(check_strides=check_strides):
            yield
    finally:
        fake_utils.is_sdpa_error = original
