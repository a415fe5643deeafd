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


def test_printing_does_not_spend_the_float64_warning():
    # Printing converts values to float64 to pick a format; for float32,
    # float16 and bfloat16 neuron tensors that must not count as float64 work.
    r = run_python("""
        import warnings, torch
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for dt in (torch.float32, torch.float16, torch.bfloat16):
                x = torch.tensor([1.5, -2.25, 1e-3, float("inf")], dtype=dt, device="neuron")
                same = repr(x).replace(", device='neuron:0'", "") == repr(x.cpu())
                print(same, end=" ")
            before = len([m for m in w if "float64" in str(m.message)])
            torch.ones(2, dtype=torch.float64, device="neuron") * 2
            after = len([m for m in w if "float64" in str(m.message)])
        print(before, after)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True", "True", "0", "1"], r.stdout


def test_sending_a_neuron_tensor_to_another_process_fails_at_the_sender():
    # No inter-process sharing for neuron memory yet: a clear error in the
    # sender, never a receiver that blocks forever.
    r = run_python("""
        import torch, torch.multiprocessing as mp
        q = mp.get_context("spawn").Queue()
        for obj in (torch.ones(2, device="neuron"), (3, torch.ones(2, device="neuron")),
                    {"w": torch.nn.Parameter(torch.ones(1, device="neuron"))}):
            try:
                q.put(obj)
                print("accepted")
            except RuntimeError as e:
                print("refused" if "cannot be sent to another process" in str(e) else e)
        a, b = mp.get_context("spawn").Pipe()
        try:
            a.send(torch.ones(2, device="neuron"))
            print("accepted")
        except RuntimeError as e:
            print("refused" if "t.cpu()" in str(e) else e)
        q.put(torch.ones(2)); print(q.get(timeout=30).tolist())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:4] == ["refused"] * 4, r.stdout
    assert "[1.0, 1.0]" in r.stdout
