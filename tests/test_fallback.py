"""The boxed CPU fallback: warned once, counted, and strict mode."""
import warnings

import pytest
import torch

import torch_neuronx
from helpers import run_python

# An op with a CPU kernel only, defined here so that the test does not depend
# on which ATen ops happen to lack a native kernel: on neuron tensors it can
# only run through the boxed CPU fallback.
DEFINE_CPU_ONLY = """
import torch
_lib = torch.library.Library("neuron_fallback_test", "DEF")
_lib.define("cpu_only(Tensor x) -> Tensor")
_lib.impl("cpu_only", lambda x: x * 2 + 1, "CPU")
"""
exec(DEFINE_CPU_ONLY)
OP = "neuron_fallback_test::cpu_only"


def _fallback_op(x):
    return torch.ops.neuron_fallback_test.cpu_only(x)


def test_fallback_runs_warns_once_and_is_recorded():
    x = torch.arange(6.0).view(3, 2)
    d = x.neuron()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = _fallback_op(d)
        _fallback_op(d)
    assert out.device.type == "neuron"
    assert torch.equal(out.cpu(), _fallback_op(x))
    assert OP in torch_neuronx.get_fallback_ops()
    assert torch_neuronx.get_executed_ops()[OP] == 2
    assert torch_neuronx.get_fallback_counts()[OP] == 2
    msgs = [str(m.message) for m in w if OP in str(m.message)]
    assert len(msgs) <= 1  # once per process (maybe already warned by an earlier test)
    torch_neuronx.clear_op_tracking()
    assert torch_neuronx.get_fallback_ops() == []


def test_fallback_warning_text():
    # Called through torch.ops, the C++ warning is printed on stderr rather
    # than raised as a Python warning; either way it must appear once.
    r = run_python(DEFINE_CPU_ONLY + """
import warnings
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    torch.ops.neuron_fallback_test.cpu_only(torch.ones(2, device="neuron"))
    torch.ops.neuron_fallback_test.cpu_only(torch.ones(2, device="neuron"))
print(sum("cpu_only" in str(m.message) for m in w))
""")
    assert r.returncode == 0, r.stderr
    py = int(r.stdout.strip())
    err = r.stderr.count("neuron_fallback_test::cpu_only has no native neuron kernel and runs on the CPU")
    assert py + err == 1, (py, r.stderr)


def test_strict_mode_names_the_op():
    r = run_python(DEFINE_CPU_ONLY + """
try:
    torch.ops.neuron_fallback_test.cpu_only(torch.ones(2, device="neuron"))
    print("no error")
except NotImplementedError as e:
    print("error", "neuron_fallback_test::cpu_only" in str(e))
""", env={"TORCH_NEURONX_DISABLE_FALLBACK": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "error True"


def test_native_ops_list():
    ops = torch_neuronx.native_ops()
    for name in ("aten::add.Tensor", "aten::addmm", "aten::_copy_from", "aten::empty.memory_format"):
        assert name in ops


def test_op_without_a_cpu_kernel_raises_not_implemented_without_warning():
    # An op with neither a neuron nor a CPU kernel (CUDA-only, say) cannot
    # fall back: a clear NotImplementedError, and no "runs on the CPU" warning.
    lib = torch.library.Library("neuron_fallback_test2", "DEF")
    lib.define("cuda_only(Tensor x) -> Tensor")
    lib.impl("cuda_only", lambda x: x, "CUDA")
    x = torch.ones(2, device="neuron")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(NotImplementedError, match="no CPU kernel"):
            torch.ops.neuron_fallback_test2.cuda_only(x)
    assert not [m for m in w if "CPU" in str(m.message)]
    assert "neuron_fallback_test2::cuda_only" not in torch_neuronx.get_fallback_ops()


_SPARSE_ERROR = r"sparse tensors are not supported on the neuron device .*\.to_dense\(\)"


@pytest.mark.parametrize("layout", ["coo", "csr", "csc", "bsr", "bsc"])
def test_sparse_layouts_raise_a_clear_error_on_the_move(layout):
    # Compressed layouts used to arrive on the device silently and fail at
    # their first use with PyTorch's "unsupported tensor layout: SparseCsr".
    d = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    s = d.to_sparse() if layout == "coo" else getattr(d, f"to_sparse_{layout}")(
        *(((1, 1),) if layout in ("bsr", "bsc") else ()))
    for move in (lambda: s.to("neuron"), lambda: s.to("neuron", torch.float64),
                 lambda: torch.ones(2, 2, device="neuron").copy_(s)):
        with pytest.raises(NotImplementedError, match=_SPARSE_ERROR):
            move()
    dense = s.to_dense().to("neuron")  # what the message says to do
    assert dense.layout == torch.strided and torch.equal(dense.cpu(), d)


@pytest.mark.filterwarnings("ignore:Sparse invariant checks")
def test_sparse_factories_raise_a_clear_error():
    crow, col, values = torch.tensor([0, 1, 2]), torch.tensor([0, 1]), torch.tensor([1.0, 2.0])
    for make in (lambda: torch.sparse_csr_tensor(crow, col, values, device="neuron"),
                 lambda: torch.sparse_csc_tensor(crow, col, values, (2, 2), device="neuron"),
                 lambda: torch.sparse_csr_tensor(crow.to("neuron"), col.to("neuron"), values.to("neuron")),
                 lambda: torch.sparse_coo_tensor(torch.tensor([[0, 1], [0, 1]]), values, device="neuron")):
        with pytest.raises(NotImplementedError, match=_SPARSE_ERROR):
            make()
