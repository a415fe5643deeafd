"""NORM family: batch norm (training with running statistics, evaluation,
modules, channels-last, mixed-precision parameters, errors) and group norm,
forward and backward against PyTorch on the CPU, with zero CPU fallbacks.

Tolerances (helpers.close_scaled, helpers.TOL_ACCUMULATED): float32 rtol
1e-4, atol 1e-4 x max|reference|; bfloat16 2e-2 and 2e-2 x max|reference|.
"""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_neuronx
from helpers import assert_no_fallbacks, close_scaled, run_both


# ---- batch norm -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(4, 6), (4, 6, 10), (3, 5, 7, 8), (2, 4, 3, 4, 5)])
def test_batch_norm_train_updates_running_stats(dtype, shape):
    c = shape[1]
    x = torch.randn(*shape) * 2 + 0.5
    w, b = torch.rand(c) + 0.5, torch.randn(c)
    rm_c, rv_c = (torch.randn(c) * 0.1).to(dtype), (torch.rand(c) + 0.5).to(dtype)
    rm_d, rv_d = rm_c.neuron(), rv_c.neuron()
    run_both(lambda x, w, b: F.batch_norm(x, rm_c if x.device.type == "cpu" else rm_d,
                                          rv_c if x.device.type == "cpu" else rv_d, w, b, True, 0.1, 1e-5),
             x, w, b, dtype=dtype)
    close_scaled(rm_d, rm_c, dtype)
    close_scaled(rv_d, rv_c, dtype)
    assert_no_fallbacks()
    assert "aten::native_batch_norm_backward" in torch_neuronx.get_executed_ops()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm_eval_and_no_stats(dtype):
    x = torch.randn(3, 5, 6, 7)
    w, b = torch.rand(5) + 0.5, torch.randn(5)
    rm, rv = torch.randn(5) * 0.1, torch.rand(5) + 0.5
    run_both(lambda x, w, b: F.batch_norm(x, rm.to(x), rv.to(x), w, b, False, 0.1, 1e-5), x, w, b,
             dtype=dtype)
    run_both(lambda x: F.batch_norm(x, None, None, None, None, True, 0.1, 1e-5), x, dtype=dtype)
    run_both(lambda x, w: F.batch_norm(x, None, None, w, None, True, 0.1, 1e-3), x, w, dtype=dtype)
    assert_no_fallbacks()


def test_batch_norm_modules_and_channels_last():
    torch.manual_seed(0)
    for mod, shape in [(nn.BatchNorm1d(6), (8, 6, 5)), (nn.BatchNorm2d(6), (4, 6, 5, 5)),
                       (nn.BatchNorm3d(6), (2, 6, 3, 4, 5))]:
        dev = type(mod)(6).neuron()
        dev.load_state_dict(mod.state_dict())
        x = torch.randn(*shape)
        for train in (True, False):
            mod.train(train)
            dev.train(train)
            close_scaled(dev(x.neuron()), mod(x))
        close_scaled(dev.running_mean, mod.running_mean)
        close_scaled(dev.running_var, mod.running_var)
        assert dev.num_batches_tracked.item() == mod.num_batches_tracked.item()
    xc = torch.randn(4, 6, 5, 5).to(memory_format=torch.channels_last)
    out_d, _ = run_both(lambda x: F.batch_norm(x, None, None, training=True), xc)
    assert out_d[0].is_contiguous(memory_format=torch.channels_last)
    assert_no_fallbacks()


def test_batch_norm_mixed_precision_params():
    """bfloat16 activations with float32 parameters and statistics (AMP-style)."""
    x = torch.randn(4, 3, 5, 5).bfloat16()
    w, b = torch.rand(3) + 0.5, torch.randn(3)
    rm, rv = torch.zeros(3), torch.ones(3)
    yd, md, vd = torch.native_batch_norm(x.neuron(), w.neuron(), b.neuron(), rm.neuron(), rv.neuron(), True, 0.1,
                                         1e-5)
    yc, mc, vc = torch.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
    assert (yd.dtype, md.dtype, vd.dtype) == (yc.dtype, mc.dtype, vc.dtype)
    close_scaled(yd, yc, torch.bfloat16)
    close_scaled(md, mc)
    close_scaled(vd, vc)


def test_batch_norm_errors():
    with pytest.raises(RuntimeError, match="at least one element"):
        torch.native_batch_norm(torch.randn(0, 3, 2).neuron(), None, None, None, None, True, 0.1, 1e-5)
    with pytest.raises(RuntimeError, match="evaluation mode"):
        torch.native_batch_norm(torch.randn(2, 3, 2).neuron(), None, None, None, None, False, 0.1, 1e-5)


# ---- group norm -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape,groups,affine", [((2, 6, 5, 4), 3, True), ((2, 6, 5, 4), 3, False),
                                                 ((3, 8, 7), 8, True), ((2, 4, 3, 3, 3), 1, True),
                                                 ((4, 6), 2, True)])
def test_group_norm(dtype, shape, groups, affine):
    c = shape[1]
    x = torch.randn(*shape) * 3 + 1
    if affine:
        run_both(lambda x, w, b: F.group_norm(x, groups, w, b, 1e-5), x, torch.rand(c) + 0.5, torch.randn(c),
                 dtype=dtype)
    else:
        run_both(lambda x: F.group_norm(x, groups, eps=1e-5), x, dtype=dtype)
    assert_no_fallbacks()
    assert "aten::native_group_norm_backward" in torch_neuronx.get_executed_ops()


def test_group_norm_channels_last():
    xc = torch.randn(2, 8, 5, 6).to(memory_format=torch.channels_last)
    run_both(lambda x, w, b: F.group_norm(x, 4, w, b), xc, torch.rand(8), torch.randn(8))
    assert_no_fallbacks()
