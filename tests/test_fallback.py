"""The boxed CPU fallback: warned once, counted, and strict mode."""
import warnings

import torch

import torch_neuronx
from conftest import run_python

# An op without a native neuron kernel yet (the op-support table lists them).
def _fallback_op(x):
    return torch.histc(x, bins=4, min=0, max=6)


def test_fallback_runs_warns_once_and_is_recorded():
    x = torch.arange(6.0).view(3, 2)
    d = x.neuron()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = _fallback_op(d)
        _fallback_op(d)
    assert out.device.type == "neuron"
    assert torch.equal(out.cpu(), _fallback_op(x))
    assert "aten::histc" in torch_neuronx.get_fallback_ops()
    assert torch_neuronx.get_executed_ops()["aten::histc"] == 2
    assert torch_neuronx.get_fallback_counts()["aten::histc"] == 2
    msgs = [str(m.message) for m in w if "aten::histc" in str(m.message)]
    assert len(msgs) <= 1  # once per process (maybe already warned by an earlier test)
    torch_neuronx.clear_op_tracking()
    assert torch_neuronx.get_fallback_ops() == []


def test_fallback_warning_text():
    r = run_python("""
        import warnings, torch
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            torch.histc(torch.ones(2, device="neuron"), bins=3)
            torch.histc(torch.ones(2, device="neuron"), bins=3)
        msgs = [str(m.message) for m in w if "histc" in str(m.message)]
        print(len(msgs), "runs on the CPU" in msgs[0])
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1 True"


def test_strict_mode_names_the_op():
    r = run_python("""
        import torch
        try:
            torch.histc(torch.ones(2, device="neuron"), bins=3)
            print("no error")
        except NotImplementedError as e:
            print("error", "aten::histc" in str(e))
    """, env={"TORCH_NEURONX_DISABLE_FALLBACK": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "error True"


def test_native_ops_list():
    ops = torch_neuronx.native_ops()
    for name in ("aten::add.Tensor", "aten::addmm", "aten::_copy_from", "aten::empty.memory_format"):
        assert name in ops
