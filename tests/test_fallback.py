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


def _non_native_out_overloads() -> set[str]:
    """out= overloads with no neuron kernel (and no composite one) whose op
    has a functional overload with a neuron kernel: out= would quietly run
    on the CPU fallback."""
    import collections

    def has(name, key="PrivateUse1"):
        try:
            return torch._C._dispatch_has_kernel_for_dispatch_key(name, key)
        except RuntimeError:
            return None

    composite = ("CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")
    schemas = {s.name + ("." + s.overload_name if s.overload_name else ""): s
               for s in torch._C._jit_get_all_schemas() if s.name.startswith("aten::")}
    by_op = collections.defaultdict(list)
    for full in schemas:
        by_op[full.partition(".")[0]].append(full)
    missing = set()
    for full, schema in schemas.items():
        if not any(a.is_out for a in schema.arguments) or has(full) in (None, True):
            continue
        if any(has(full, k) for k in composite):
            continue
        if any(has(f) and not any(a.is_out for a in schemas[f].arguments) for f in by_op[full.partition(".")[0]]):
            missing.add(full)
    return missing


def test_out_overloads_of_native_ops_are_native():
    # Known exceptions are listed, with reasons, in known_gaps.OUT_OVERLOAD_GAPS; a
    # fixed one must leave the list.
    from conformance.known_gaps import OUT_OVERLOAD_GAPS

    missing = _non_native_out_overloads()
    assert missing - set(OUT_OVERLOAD_GAPS) == set(), "out= overloads that fall back to the CPU"
    assert set(OUT_OVERLOAD_GAPS) - missing == set(), "listed in OUT_OVERLOAD_GAPS but native now"


_g = torch.Generator().manual_seed(0)
_x4, _x2 = torch.randn(2, 3, 4, 4, generator=_g), torch.randn(2, 3, generator=_g)
_F = torch.float32


def _e(dtype, dev):
    return torch.empty(0, dtype=dtype, device=dev)


# A sample of the out= overloads made native, one per registration form
# (single result, a pair, three results, a loop over names), against the CPU.
@pytest.mark.parametrize("case", [
    ("max.dim_max", lambda d: torch.max(_x2.to(d), 1, out=(_e(_F, d), _e(torch.long, d)))),
    ("native_batch_norm.out", lambda d: torch.ops.aten.native_batch_norm.out(
        _x4.to(d), torch.ones(3, device=d), torch.zeros(3, device=d), None, None, True, 0.1, 1e-5,
        out=_e(_F, d), save_mean=_e(_F, d), save_invstd=_e(_F, d))),
    ("nll_loss_forward.output", lambda d: torch.ops.aten.nll_loss_forward.output(
        _x2.log_softmax(1).to(d), torch.tensor([0, 2], device=d), None, 1, -100, output=_e(_F, d),
        total_weight=_e(_F, d))),
    ("reflection_pad2d.out", lambda d: torch.ops.aten.reflection_pad2d.out(_x4.to(d), [1, 1, 2, 0], out=_e(_F, d))),
    ("gelu_backward.grad_input", lambda d: torch.ops.aten.gelu_backward.grad_input(
        _x4.to(d), _x4.to(d), approximate="tanh", grad_input=_e(_F, d))),
    ("topk.values", lambda d: torch.topk(_x2.to(d), 2, out=(_e(_F, d), _e(torch.long, d)))),
    ("index_select.out", lambda d: torch.index_select(_x2.to(d), 1, torch.tensor([2, 0], device=d), out=_e(_F, d))),
    ("pow.Scalar_out", lambda d: torch.pow(2, _x2.to(d), out=_e(_F, d))),
], ids=lambda c: c[0])
def test_out_overloads_compute_like_the_cpu(case):
    torch_neuronx.clear_op_tracking()
    got = case[1]("neuron")
    assert torch_neuronx.get_fallback_ops() == []
    want = case[1]("cpu")
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-5)


def test_out_overload_dtype_must_be_the_results():
    for dev in ("cpu", "neuron"):
        with pytest.raises(RuntimeError):
            torch.index_select(_x2.to(dev), 1, torch.tensor([2, 0], device=dev), out=_e(torch.float64, dev))
