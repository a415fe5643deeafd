"""The torch.neuron module surface (AWS TorchNeuron / torch.cuda names) and
the float64 rule."""
import warnings

import torch

import torch_neuronx
from helpers import run_python

NEURON_API = ["is_available", "is_initialized", "init", "device_count", "current_device", "set_device", "device",
              "synchronize", "get_device_name", "get_device_properties", "Stream", "Event", "stream",
              "current_stream", "default_stream", "set_stream", "memory_stats", "memory_allocated",
              "max_memory_allocated", "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats",
              "reset_accumulated_memory_stats", "memory_summary", "empty_cache", "mem_get_info", "manual_seed",
              "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state", "set_rng_state",
              "is_bf16_supported"]


def test_every_documented_function_exists_and_runs():
    missing = [n for n in NEURON_API if not hasattr(torch.neuron, n)]
    assert not missing, missing
    torch.neuron.init()
    assert torch.neuron.is_initialized()
    assert isinstance(torch.neuron.current_stream(), torch.neuron.Stream)
    assert isinstance(torch.neuron.Event(), torch.neuron.Event)
    assert isinstance(torch.neuron.Stream(), torch.Stream)
    s = torch.neuron.Stream()
    torch.neuron.set_stream(s)
    try:
        assert torch.neuron.current_stream() == s
    finally:
        torch.neuron.set_stream(torch.neuron.default_stream())
    assert torch.neuron.current_stream() == torch.neuron.default_stream()
    torch.neuron.seed()
    torch.neuron.seed_all()
    torch.neuron.manual_seed_all(11)
    assert torch.neuron.initial_seed() == 11
    assert torch.neuron.get_rng_state(1).numel() == 16


def test_package_reports():
    torch_neuronx.clear_op_tracking()
    x = torch.ones(3, device="neuron")
    (x * 2).cpu()
    ops = torch_neuronx.get_executed_ops()
    assert ops["aten::mul.Tensor"] == 1
    assert ops["aten::_copy_from"] >= 1
    assert torch_neuronx.get_fallback_ops() == []
    assert torch_neuronx.device_count() == torch.neuron.device_count()


def test_float64_rule():
    # float64 computes at float32 precision (a one-time warning) and keeps its dtype.
    r = run_python("""
        import warnings, torch
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            x = torch.tensor([1.0 + 2**-30, 3.0], dtype=torch.float64, device="neuron")
            y = x * 1.0
            z = x + 0.0
        msgs = [str(m.message) for m in w if "float64" in str(m.message)]
        print(len(msgs), y.dtype, y[0].item() == 1.0, x[0].item() == 1.0 + 2**-30)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "torch.float64", "True", "True"]


def test_float64_warns_once_and_keeps_dtype():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = x.neuron() * 3
    assert y.dtype == torch.float64
    assert torch.equal(y.cpu(), x * 3)
