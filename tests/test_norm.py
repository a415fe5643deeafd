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
from helpers import TOL_ACCUMULATED, assert_no_fallbacks, close_scaled, raises_like_cpu, run_both, tol_kw


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


# ---- non-finite values and rows wider than float32 --------------------------------------

INF = float("inf")


def _same_nonfinite(dev, ref, dtype=torch.float32):
    dev, ref = dev.cpu(), ref.to(dev.dtype)
    assert torch.equal(dev.isnan(), ref.isnan()), (dev, ref)
    inf = ref.isinf()
    assert torch.equal(dev[inf], ref[inf]), (dev, ref)
    fin = ref.isfinite()
    close_scaled(dev[fin], ref[fin], dtype)


def test_norms_of_a_group_with_inf_are_nan():
    """layer_norm / group_norm / batch_norm of [1, inf, 2, 3]: the variance is
    NaN, so the whole row (group, channel) is NaN on the CPU; a finite row
    beside it is unaffected."""
    x = torch.tensor([[1.0, INF, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0]])
    cases = [
        lambda x: F.layer_norm(x, [4]),
        lambda x: F.group_norm(x.view(2, 1, 4), 1),
        lambda x: F.group_norm(x.reshape(1, 2, 4), 2),
        lambda x: F.batch_norm(x.t().contiguous(), None, None, training=True),
        lambda x: F.instance_norm(x.view(1, 2, 4)),
    ]
    for f in cases:
        want = f(x)
        assert want.isnan().any() and want.isfinite().any()
        _same_nonfinite(f(x.neuron()), want)
    assert_no_fallbacks()


def test_batch_norm_infinite_or_huge_weight():
    """A strided weight sends the CPU to its strided kernel, ((x - mean) *
    invstd) * w + b: w = -inf gives -inf * sign(x - mean), w = 2e38 stays
    finite where |xhat| < 1.7, as in float64. A contiguous one to its
    folded fma(x, a, b - mean * a): NaN for w = -inf. Neuron follows each."""
    x = torch.arange(1.0, 9.0).view(4, 2) / 10 + torch.tensor([0.0, 1.0])
    w4 = torch.tensor([-INF, 1.0, 2e38, 1.0])
    b = torch.tensor([0.5, -1.0])
    for training in (True, False):
        rm, rv = torch.tensor([0.45, 1.45]), torch.tensor([1.0, 0.25])
        want64 = F.batch_norm(x.double(), rm.double(), rv.double(), w4[::2].double(), b.double(), training)
        for w, wd in ((w4[::2], w4.neuron()[::2]), (w4[::2].contiguous(), w4[::2].contiguous().neuron())):
            want = F.batch_norm(x, rm.clone(), rv.clone(), w, b, training)
            assert want.isnan().any() == w.is_contiguous()
            got = F.batch_norm(x.neuron(), rm.neuron(), rv.neuron(), wd, b.neuron(), training)
            _same_nonfinite(got, want)
            if not w.is_contiguous():
                close_scaled(got[:, 1].cpu(), want64[:, 1].float())
    assert_no_fallbacks()


def test_layer_norm_backward_with_inf_is_nan_like_the_cpu():
    """An inf weight or output gradient in a row: ATen's backward formula gives
    NaN for that row's input gradient (the centred form would give +-inf)."""
    x = torch.randn(3, 5)
    w = torch.randn(5)
    w[1] = INF
    gy = torch.randn(3, 5)
    for ww, g in ((w, gy), (w.nan_to_num(posinf=2.0), gy.index_put((torch.tensor(1), torch.tensor(2)),
                                                                   torch.tensor(INF)))):
        got = []
        for dev in ("cpu", "neuron"):
            xx = x.to(dev).detach().requires_grad_()
            F.layer_norm(xx, [5], ww.to(dev)).backward(g.to(dev))
            got.append(xx.grad.cpu())
        assert got[0].isnan().any()
        _same_nonfinite(got[1], got[0])
    assert_no_fallbacks()


def test_layer_norm_row_wider_than_float32_is_nan_like_the_cpu():
    """[3e38, 3e38, -3e38, 0]: the CPU's float32 Welford variance overflows and the
    row is NaN; so is a row of 1e20s (its lane means square past FLT_MAX in the
    merge: inf * 0). The device follows the CPU's RowwiseMoments."""
    x = torch.tensor([[3e38, 3e38, -3e38, 0.0], [1.0, 2.0, 3.0, 4.0]])
    want = F.layer_norm(x, [4])
    got = F.layer_norm(x.neuron(), [4]).cpu()
    assert torch.equal(got.isnan(), want.isnan()) and want[0].isnan().all()
    assert torch.equal(got[1], want[1])
    x = torch.full((2, 8), 1e20)
    want = torch.native_layer_norm(x, [8], None, None, 1e-5)
    got = torch.native_layer_norm(x.neuron(), [8], None, None, 1e-5)
    assert want[2].isnan().all()
    for a, b in zip(got, want):
        assert torch.equal(a.cpu().isnan(), b.isnan())
    assert_no_fallbacks()


def test_layer_norm_bfloat16_weight_grad_rounds_once():
    """d(weight) of a bfloat16 layer_norm sums grad * xhat in float32 and rounds
    once, as the CPU; with an expanded weight the 120 terms of one element
    stay within bfloat16 rounding of float64 (three roundings per term did not)."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(6, 1, 20, generator=g).to(torch.bfloat16)
    w0 = torch.tensor([[3.0]], dtype=torch.bfloat16)
    gy = (torch.randint(-2, 3, (6, 1, 20), generator=g) * 0.5).to(torch.bfloat16)
    grads = {}
    for dev in ("cpu", "neuron"):
        w = w0.detach().to(dev).clone().requires_grad_()
        F.layer_norm(x.to(dev), [1, 20], w.expand(1, 20)).backward(gy.to(dev))
        grads[dev] = w.grad.cpu().float()
    w = w0.detach().double().requires_grad_()
    F.layer_norm(x.double(), [1, 20], w.expand(1, 20)).backward(gy.double())
    exact = w.grad.float()
    tol = 2e-2 * max(1.0, exact.abs().max().item())
    assert (grads["neuron"] - exact).abs().max() <= tol
    torch.testing.assert_close(grads["neuron"], grads["cpu"], rtol=2e-2, atol=tol)


def _bn(x_dt, w_dt, r_dt):
    def call(dev):
        x = torch.randn(4, 3, 5, dtype=x_dt).to(dev)
        w = torch.ones(3, dtype=w_dt, device=dev) if w_dt else None
        rm = torch.zeros(3, dtype=r_dt, device=dev) if r_dt else None
        rv = torch.ones(3, dtype=r_dt, device=dev) if r_dt else None
        return F.batch_norm(x, rm, rv, w, w, training=True)
    return call


def _ln(x_dt, w_dt, b_dt):
    def call(dev):
        x = torch.randn(2, 3, dtype=x_dt).to(dev) if x_dt.is_floating_point else torch.ones(2, 3, dtype=x_dt, device=dev)
        w = torch.ones(3, dtype=w_dt, device=dev) if w_dt else None
        b = torch.ones(3, dtype=b_dt, device=dev) if b_dt else None
        return F.layer_norm(x, [3], w, b)
    return call


# The CPU's parameter dtype rule (its mixed-type check): parameters share the
# input's dtype, or are all float32 for a float16/bfloat16 input (fuzz seed
# 731947: ~1,100 cases the device computed).
@pytest.mark.parametrize("case", [
    ("bn float input, half weight", _bn(torch.float32, torch.float16, None)),
    ("bn half input, half weight, float stats", _bn(torch.float16, torch.float16, torch.float32)),
    ("bn bfloat16 input, float weight, bfloat16 stats", _bn(torch.bfloat16, torch.float32, torch.bfloat16)),
    ("bn double input, float stats", _bn(torch.float64, None, torch.float32)),
    ("bn int input", _bn(torch.int32, None, None)),
    ("ln float input, double weight", _ln(torch.float32, torch.float64, None)),
    ("ln half input, half weight, float bias", _ln(torch.float16, torch.float16, torch.float32)),
    ("ln double input, float weight", _ln(torch.float64, torch.float32, torch.float32)),
    ("ln int input", _ln(torch.int64, None, None)),
], ids=lambda c: c[0])
def test_norm_parameter_and_input_dtypes_the_cpu_rejects(case):
    raises_like_cpu(case[1])


@pytest.mark.parametrize("x_dt", [torch.float16, torch.bfloat16])
def test_norm_mixed_float32_parameters_of_a_16bit_input_still_compute(x_dt):
    for call in (_bn(x_dt, torch.float32, torch.float32), _ln(x_dt, torch.float32, torch.float32)):
        want, got = call("cpu"), call("neuron")
        assert got.dtype == want.dtype == x_dt


# batch_norm dispatches on the input's dtype before its mixed-type checks of
# the parameters: an integer input with float statistics is
# NotImplementedError on the CPU.
@pytest.mark.parametrize("training", [False, True])
def test_batch_norm_of_an_integer_input_raises_like_the_cpu(training):
    x = torch.ones(2, 3, 4, dtype=torch.int32)
    rm, rv, w = torch.zeros(3), torch.ones(3), torch.ones(3)
    raises_like_cpu(lambda d: F.batch_norm(x.to(d), rm.to(d), rv.to(d), w.to(d), training=training),
                    NotImplementedError)
    assert_no_fallbacks()


# In training, with no mixed-type parameters, the CPU takes the mean of a
# non-contiguous input with at::mean before its kernel dispatches on the
# dtype: an integer or bool input is then refused by mean() (RuntimeError);
# a contiguous one, or one with float parameters first, by the dispatch
# (NotImplementedError). Then a 1-d input is an IndexError and unpaired
# running stats a ValueError, before the dispatch.
def _bn_int(x_dt, layout, w_dt, rs_dt, training=True):
    def call(d):
        x = torch.ones(2, 4, 3, dtype=x_dt, device=d)
        x = {"contiguous": x.transpose(1, 2).contiguous(), "transposed": x.transpose(1, 2),
             "strided": torch.ones(2, 3, 8, dtype=x_dt, device=d)[..., ::2]}[layout]
        w = None if w_dt is None else torch.ones(3, dtype=w_dt, device=d)
        rm = None if rs_dt is None else torch.zeros(3, dtype=rs_dt, device=d)
        rv = None if rs_dt is None else torch.ones(3, dtype=rs_dt, device=d)
        return F.batch_norm(x, rm, rv, w, training=training)
    return call


@pytest.mark.parametrize("x_dt", [torch.int32, torch.uint8, torch.bool])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
@pytest.mark.parametrize("w_dt,rs_dt", [(None, None), (torch.float32, None), ("x", None), (None, torch.float32),
                                        (None, "x"), ("x", torch.float32), (torch.float32, "x")])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_of_an_integer_input_raises_in_the_cpu_order(x_dt, layout, w_dt, rs_dt, training):
    w_dt = x_dt if w_dt == "x" else w_dt
    rs_dt = x_dt if rs_dt == "x" else rs_dt
    cpu, dev = raises_like_cpu(_bn_int(x_dt, layout, w_dt, rs_dt, training))
    assert str(dev).split(" (in the neuron")[0] == str(cpu)
    assert_no_fallbacks()


def test_batch_norm_1d_input_and_unpaired_running_stats_raise_like_the_cpu():
    for x_dt in (torch.float32, torch.int32):
        raises_like_cpu(lambda d: F.batch_norm(torch.ones(3, dtype=x_dt, device=d), None, None, training=True),
                        IndexError)
        for rm, rv in ((torch.zeros(3), None), (None, torch.ones(3))):
            raises_like_cpu(lambda d: F.batch_norm(torch.ones(2, 3, 4, dtype=x_dt, device=d),
                                                   None if rm is None else rm.to(d),
                                                   None if rv is None else rv.to(d), training=True), ValueError)


# Saved statistics follow the op's meta function (as on CUDA), which a
# compiled graph is planned from: float32 for a 16-bit input, and in eval
# mode batch norm's [C] running mean and 1/sqrt(running_var + eps) where the
# CPU returns empty tensors. The normalised output is the CPU's either way.
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16, torch.float32])
def test_saved_norm_statistics_follow_the_meta_function(dt):
    from torch._subclasses.fake_tensor import FakeTensorMode

    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, 5, generator=g).to(dt)
    w, b = torch.randn(5, generator=g).to(dt), torch.randn(5, generator=g).to(dt)
    rm, rv = torch.randn(3, generator=g), torch.rand(3, generator=g) + 0.5
    calls = {
        "layer_norm": lambda d: torch.native_layer_norm(x.to(d), [5], w.to(d), b.to(d), 1e-5),
        "bn_train": lambda d: torch.native_batch_norm(x.to(d), None, None, rm.to(d), rv.to(d), True, 0.1, 1e-5),
        "bn_eval": lambda d: torch.native_batch_norm(x.to(d), None, None, rm.to(d), rv.to(d), False, 0.1, 1e-5),
    }
    for name, call in calls.items():
        got, want = call("neuron"), call("cpu")
        with FakeTensorMode(allow_non_fake_inputs=True):
            meta = call("neuron")
        for t, m in zip(got, meta):
            assert (t.dtype, t.shape) == (m.dtype, m.shape), name
        torch.testing.assert_close(got[0].cpu(), want[0], **tol_kw(TOL_ACCUMULATED, dt))
        if name == "bn_eval":
            torch.testing.assert_close(got[1].cpu(), rm)
            torch.testing.assert_close(got[2].cpu(), (rv + 1e-5).rsqrt())
        else:
            # the CPU's statistics are the float32 ones rounded to the input's dtype
            torch.testing.assert_close(got[1].cpu().to(want[1].dtype), want[1], **tol_kw(TOL_ACCUMULATED, dt))
            torch.testing.assert_close(got[2].cpu().to(want[2].dtype), want[2], **tol_kw(TOL_ACCUMULATED, dt))
    assert_no_fallbacks()


# ---- batch norm at the float limits: ATen's CPU kernels' arithmetic -----------------------

_EDGE = torch.tensor([3.4028235e38, -3.4028235e38, 3e38, -2e38, 1.0, -1.0, 0.0, 1e-38, 1.5, INF, -INF])


def _edge_tensor(shape, g, p=0.3):
    x = torch.randn(shape, generator=g)
    pick = torch.rand(shape, generator=g) < p
    return torch.where(pick, _EDGE[torch.randint(len(_EDGE), shape, generator=g)], x)


def _bitwise(dev, ref):
    dev = dev.cpu()
    return bool(((dev == ref) | (dev.isnan() & ref.isnan())).all())


@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "2d", "strided_weight"])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_at_the_float_limits_matches_the_cpu_bitwise(layout, training):
    """Inputs, weights and biases near +-3.4e38 and inf: y and the running
    stats equal the CPU's bit for bit (NaN where it has NaN). The CPU's
    contiguous kernel sums a channel in double in (n, s) order (a mean of
    [3.4e38, 1.5, -3.4e38, ...] keeps what that order keeps), its
    channels-last kernel in float per thread chunk (3e38 + 3e38 overflows),
    and it folds y = fma(x, a, b - mean * a) (w = inf gives NaN); a strided
    weight gives ((x - mean) * invstd) * w + b."""
    g = torch.Generator().manual_seed(8675309)
    mismatches = []
    for trial in range(60):
        n, c = int(torch.randint(2, 5, (1,), generator=g)), int(torch.randint(1, 5, (1,), generator=g))
        shape = (n, c) if layout == "2d" else (n, c, int(torch.randint(1, 4, (1,), generator=g)), 3)
        x = _edge_tensor(shape, g, 0.3 if trial % 2 else 0.0)
        w, b = _edge_tensor((c,), g), _edge_tensor((c,), g)
        if layout == "channels_last":
            x = x.contiguous(memory_format=torch.channels_last)
        rm, rv = torch.randn(c, generator=g), torch.rand(c, generator=g) + 0.5
        outs = []
        for dev in ("cpu", "neuron"):
            wd, bd = w.to(dev), b.to(dev)
            if layout == "strided_weight":
                wd = torch.stack([wd, wd], 1).view(-1)[::2]
            rmd, rvd = rm.clone().to(dev), rv.clone().to(dev)
            xd = x.to(dev) if dev == "cpu" else x.neuron()
            y = F.batch_norm(xd, rmd, rvd, wd, bd, training, momentum=0.3)
            outs.append((y, rmd, rvd))
        if layout == "strided_weight" and not training:
            # the strided eval invstd is the CPU's tensor 1 / sqrt(rv + eps), whose
            # vectorised sqrt is 1 ulp off the correctly rounded one for ~18% of floats
            _same_nonfinite(outs[1][0], outs[0][0])
        elif not all(_bitwise(d, r) for d, r in zip(outs[1], outs[0])):
            mismatches.append((trial, shape))
    assert not mismatches, mismatches
    assert_no_fallbacks()


@pytest.mark.parametrize("layout", ["channels_last", "contiguous"])
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
def test_batch_norm_training_rows_and_16bit_planes_match_the_cpu_bitwise(dt, layout):
    """Training with more rows (n, s) than the channels-last kernel's chunks:
    the statistics read float32 rows in place (16-bit ones through a
    conversion) and y is folded row by row. bfloat16 statistics: contiguous
    planes sum in the CPU's 8 float lanes (its AVX2 kernel: batch norm has
    no AVX-512 one) plus a scalar tail per image,
    channels-last rows subtract the bfloat16-rounded mean, and the running
    stats update in BFloat16 arithmetic. y and the running stats equal the
    CPU's bit for bit, huge and infinite inputs included (before: 5-32 of
    24-70 bfloat16 running means differed by an ulp, and 5% of +-3e38
    inputs gave other infinities and NaNs in y)."""
    g = torch.Generator().manual_seed(5607)
    for trial in range(6):
        c = (3, 24, 70)[trial % 3]
        x = (_edge_tensor((5, c, 6, 7), g, 0.05 if trial < 3 else 0.0) * 3 + 1).to(dt)
        if layout == "channels_last":
            x = x.contiguous(memory_format=torch.channels_last)
        w, b = torch.randn(c, generator=g).to(dt), torch.randn(c, generator=g).to(dt)
        rm, rv = torch.randn(c, generator=g).to(dt), (torch.rand(c, generator=g) + 0.5).to(dt)
        outs = []
        for dev in ("cpu", "neuron"):
            rmd, rvd = rm.clone().to(dev), rv.clone().to(dev)
            y = F.batch_norm(x.to(dev), rmd, rvd, w.to(dev), b.to(dev), True, momentum=0.3)
            outs.append((y, rmd, rvd))
        fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
        assert outs[1][0].is_contiguous(memory_format=fmt)
        assert all(_bitwise(d, r) for d, r in zip(outs[1], outs[0])), (dt, layout, trial, c)
    assert_no_fallbacks()


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_backward_huge_weight_stays_finite_like_the_cpu(layout, training):
    """The input gradient is (t * invstd) * w in the CPU's order: with w =
    3.4e38 and invstd > 1, invstd * w alone is inf (neuron gave +-inf where
    the CPU has +-1.6e38; fuzz case 4242-1046)."""
    g = torch.Generator().manual_seed(4242)
    x = torch.randn(2, 70, 4, 4, generator=g)
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    w = torch.randn(70, generator=g)
    w[1::3] = 3.4028234663852886e38
    b, dy = torch.randn(70, generator=g), torch.randn(x.shape, generator=g)
    rm, rv = torch.randn(70, generator=g), torch.rand(70, generator=g) * 0.5 + 0.1
    grads = []
    for dev in ("cpu", "neuron"):
        xd = x.detach().to(dev).requires_grad_()
        y = F.batch_norm(xd, rm.clone().to(dev), rv.clone().to(dev), w.to(dev), b.to(dev), training)
        y.backward(dy.to(dev))
        grads.append(xd.grad.cpu())
    want, got = grads
    assert (want.isfinite() & (want.abs() > 1e37)).any()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=0, equal_nan=True)
    assert_no_fallbacks()


def test_instance_norm_at_the_float_limits_matches_the_cpu_bitwise():
    """instance_norm is batch_norm over [1, N*C, ...] (contiguous): a weight of
    -3.4e38 gives the CPU's NaN where its folded fma overflows, and the
    16-bit statistics round to the input dtype before the fold."""
    g = torch.Generator().manual_seed(600293)
    for dt in (torch.float32, torch.float16):
        for trial in range(40):
            shape = (int(torch.randint(1, 4, (1,), generator=g)), int(torch.randint(1, 5, (1,), generator=g)), 3)
            x = torch.randn(shape, generator=g).to(dt)
            w, b = _edge_tensor(shape[1:2], g).to(dt), _edge_tensor(shape[1:2], g).to(dt)
            want = F.instance_norm(x, weight=w, bias=b)
            got = F.instance_norm(x.neuron(), weight=w.neuron(), bias=b.neuron())
            assert _bitwise(got, want), (dt, trial, got, want)
    assert_no_fallbacks()


def test_batch_norm_folded_normalisation_is_an_fma_like_the_cpu():
    """Eval, contiguous: the CPU computes x * a + beta as one fused multiply-add
    (2e38 * 2 - 3e38 = 1e38, not inf) and beta = b - mean * a as another."""
    x = torch.tensor([[2e38], [1.0]])
    for rm, b in ((0.0, -3e38), (2e38, 3e38)):
        args = (torch.tensor([rm]), torch.tensor([1.0]), torch.tensor([2.0]), torch.tensor([b]))
        want = F.batch_norm(x, *args, training=False, eps=0.0)
        got = F.batch_norm(x.neuron(), *[t.neuron() for t in args], training=False, eps=0.0)
        assert want.isfinite().all() and torch.equal(got.cpu(), want)


@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("param_dt", ["same", "float32"])
def test_batch_norm_16bit_rounds_statistics_where_the_cpu_does(dt, training, param_dt):
    """16-bit batch norm equals the CPU's bit for bit: with 16-bit parameters
    the CPU keeps the batch statistics in the 16-bit dtype before folding
    them (training), but folds the running stats' float invstd (eval); with
    float32 parameters nothing is rounded."""
    g = torch.Generator().manual_seed(16)
    x = (torch.randn(4, 3, 5, generator=g) * 3 + 1).to(dt)
    pdt = dt if param_dt == "same" else torch.float32
    w, b = torch.randn(3, generator=g).to(pdt), torch.randn(3, generator=g).to(pdt)
    rm, rv = torch.randn(3, generator=g).to(pdt), (torch.rand(3, generator=g) + 0.5).to(pdt)
    want = F.batch_norm(x, rm.clone(), rv.clone(), w, b, training)
    got = F.batch_norm(x.neuron(), rm.neuron(), rv.neuron(), w.neuron(), b.neuron(), training)
    assert torch.equal(got.cpu(), want)
    assert_no_fallbacks()


# ---- layer norm in the CPU's order ------------------------------------------------

def _same_bits(a, b):
    a, b = a.cpu(), b.cpu()
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))


def _ln_rows(n, seed):
    """Three rows of n: centred, offset by up to 1e4 (Welford's rounding shows), and
    with a value near the float limit."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, n, generator=g) * 10.0 ** torch.randint(-3, 3, (3, 1), generator=g)
    x[1] += 10.0 ** torch.randint(1, 5, (1,), generator=g).item()
    x[2, torch.randint(0, n, (1,), generator=g).item()] = [3e38, 1e19, 65504.0][seed % 3]
    return x


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [1, 2, 5, 8, 13, 64, 129, 300, 768, 2049])
def test_layer_norm_float32_matches_the_cpu_bitwise(n, threads):
    """Mean, rstd, y and the input gradient bit for bit: ATen's RowwiseMoments
    (Welford in 8 float lanes over chunks of 16 vectors, a cascade, a scalar tail)
    and its backward ds/db form, with the fused steps the CPU build has."""
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for seed in range(3):
            x = _ln_rows(n, 100 * n + seed)
            g = torch.Generator().manual_seed(7 + seed)
            w, b = torch.randn(n, generator=g), torch.randn(n, generator=g)
            gy = torch.randn(3, n, generator=g)
            for wb in [(w, b), (w, None), (None, b), (None, None)]:
                want = torch.native_layer_norm(x, [n], *wb, 1e-5)
                got = torch.native_layer_norm(x.neuron(), [n], *[t.neuron() if t is not None else None for t in wb],
                                              1e-5)
                for a, c in zip(got, want):
                    assert _same_bits(a, c), (n, seed, wb[0] is None, wb[1] is None)
                # the backward from the CPU's statistics, so that it is tested alone
                wd = wb[0].neuron() if wb[0] is not None else None
                dx_want = torch.ops.aten.native_layer_norm_backward(gy, x, [n], want[1], want[2], wb[0], None,
                                                                    [True, False, False])[0]
                dx_got = torch.ops.aten.native_layer_norm_backward(gy.neuron(), x.neuron(), [n], want[1].neuron(),
                                                                   want[2].neuron(), wd, None,
                                                                   [True, False, False])[0]
                assert _same_bits(dx_got, dx_want), (n, seed, wb[0] is None)
    finally:
        torch.set_num_threads(old)
    assert_no_fallbacks()


def test_layer_norm_backward_of_two_nearly_equal_elements_is_zero_like_the_cpu():
    """Fuzz case 16180339-890047: rows of 2 nearly equal values with equal output
    gradients. The exact input gradient is 0, and ATen's (db mean - ds) rstd^3 / n
    form cancels to 0 exactly; the centred form gave +-2.2e-4."""
    x = torch.tensor([[[1.2202036380767822, 1.1885360479354858]], [[0.21430201828479767, 0.05570603534579277]]])
    gy = torch.tensor([[[0.5, 0.5]], [[-1.0, -1.0]]])
    want, got = [], []
    for dev, out in (("cpu", want), ("neuron", got)):
        xd = x.detach().to(dev, copy=True).requires_grad_()
        F.layer_norm(xd, [1, 2]).backward(gy.to(dev))
        out.append(xd.grad.cpu())
    assert (want[0] == 0).all()
    assert _same_bits(got[0], want[0])
    assert_no_fallbacks()


# ---- group norm in the CPU's order (contiguous inputs) ------------------------------

@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape,groups", [((2, 4), 2), ((3, 6, 5), 3), ((2, 8, 7, 9), 4), ((1, 32, 16, 16), 8)])
def test_group_norm_forward_matches_the_cpu_bitwise(dt, shape, groups):
    """Contiguous group norm: RowwiseMoments over each group (the layer norm
    order), rstd in double, y = fma(rstd w, x, fma(-rstd w, mean, b)); offsets and
    a 3e38 element included (the CPU's NaN/inf come out the same)."""
    g = torch.Generator().manual_seed(len(shape) * 100 + groups)
    c = shape[1]
    for trial in range(4):
        x = torch.randn(*shape, generator=g) * 3 + 100.0 * (trial % 2)
        if trial == 3:
            x.view(-1)[0] = 3e38
        x = x.to(dt)
        w = torch.randn(c, generator=g).to(dt) if trial != 0 else None
        b = torch.randn(c, generator=g).to(dt) if trial != 1 else None
        hw = x[0, 0].numel()
        want = torch.native_group_norm(x, w, b, shape[0], c, hw, groups, 1e-5)
        got = torch.native_group_norm(x.neuron(), w.neuron() if w is not None else None,
                                      b.neuron() if b is not None else None, shape[0], c, hw, groups, 1e-5)
        for a, e in zip(got, want):
            if dt == torch.float16:
                # float16 y can still differ in the last bit ([3, 6, 5], offset 100,
                # no bias: 1 element in 90); the statistics agree
                torch.testing.assert_close(a.cpu().float(), e.float(), rtol=1e-3, atol=1e-3, equal_nan=True)
            else:
                assert _same_bits(a.float(), e.float()), (trial,)
    assert_no_fallbacks()


def test_group_norm_backward_of_two_nearly_equal_elements_is_zero_like_the_cpu():
    """Fuzz case 16180339-251391: groups of 2 values with equal output gradients,
    whose exact input gradient is 0. The CPU's float ds/db form cancels to 0; the
    device now follows it (before: +-1.6e-4), and the other contiguous float32
    input gradients bit for bit."""
    g = torch.Generator().manual_seed(3)
    for shape, groups in [((2, 2, 2, 1), 2), ((2, 4, 3), 2), ((3, 6, 5), 3), ((2, 18, 9), 2)]:
        x = torch.randn(*shape, generator=g) * 2 + 1
        c, hw = shape[1], shape[2] * (shape[3] if len(shape) > 3 else 1)
        gy = torch.randn(*shape, generator=g)
        gy = gy.flatten(2)[:, :, :1].expand(shape[0], c, hw).reshape(shape).contiguous()
        for w in [None, torch.randn(c, generator=g)]:
            _, m, r = torch.native_group_norm(x, w, None, shape[0], c, hw, groups, 1e-5)
            want = torch.ops.aten.native_group_norm_backward(gy, x, m, r, w, shape[0], c, hw, groups,
                                                             [True, False, False])[0]
            got = torch.ops.aten.native_group_norm_backward(gy.neuron(), x.neuron(), m.neuron(), r.neuron(),
                                                            w.neuron() if w is not None else None, shape[0], c,
                                                            hw, groups, [True, False, False])[0]
            assert _same_bits(got, want), (shape, w is None)
    x = torch.tensor([[[0.5100419521331787], [-0.11694168299436569]], [[-0.8976401686668396], [0.9274880886077881]]])
    want, got = [], []
    for dev, out in (("cpu", want), ("neuron", got)):
        xd = x.detach().to(dev, copy=True).requires_grad_()
        F.group_norm(xd, 2).backward(torch.ones(2, 2, 1, device=dev))
        out.append(xd.grad.cpu())
    assert _same_bits(got[0], want[0])
    assert_no_fallbacks()


def test_batch_norm_training_strided_input_mean_overflows_like_the_cpu():
    """A non-contiguous float32 input: the CPU takes its batch mean with at::mean, a
    float cascade sum in which 3e38 + 3e38 overflows; the device's mean now comes
    from the same (neuron) at::mean, so the saved and running means agree bit for
    bit (fuzz 16180339-202058 and 7 more: running mean -0.62 where the CPU has
    -0.60)."""
    g = torch.Generator().manual_seed(11)
    base = torch.randn(3, 4, 6, 5, generator=g)
    base[0, 1, 0, 0] = base[1, 1, 2, 0] = 3e38
    base[2, 2, 4, 0] = -3e38
    x = base[:, :, ::2]  # strided: not contiguous in any memory format
    for momentum in (0.1, 1.0):
        rm_c, rv_c = torch.zeros(4), torch.ones(4)
        rm_d, rv_d = rm_c.neuron(), rv_c.neuron()
        want = torch.native_batch_norm(x, None, None, rm_c, rv_c, True, momentum, 1e-5)
        got = torch.native_batch_norm(base.neuron()[:, :, ::2], None, None, rm_d, rv_d, True, momentum, 1e-5)
        assert _same_bits(got[1], want[1])
        assert _same_bits(rm_d, rm_c)
        assert torch.equal(got[0].cpu().isnan(), want[0].isnan())
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(5, 1, 1), (4, 7), (3, 33), (6, 16)])
@pytest.mark.parametrize("const", [False, True])
def test_layer_norm_16bit_input_grad_uses_16bit_statistics(dtype, shape, const):
    """The CPU keeps a 16-bit input's mean/rstd as 16-bit tensors, so its
    backward reads them rounded (fuzz 14142135-13702: an expanded bfloat16
    row, rstd 316 not 316.2, a gradient 410 where neuron gave 412)."""
    g = torch.Generator().manual_seed(1300 + len(shape) * 10 + shape[-1])
    x = torch.randn(shape, generator=g)
    if const:
        x = x[..., :1].expand(shape).contiguous()
    x = x.to(dtype)
    ns = list(shape[1:]) if shape == (5, 1, 1) else [shape[-1]]
    if shape == (5, 1, 1):
        ns = [5, 1, 1]
    gy = (torch.randint(-2, 3, shape, generator=g) * 0.5).to(dtype)
    res = []
    for dev in ("cpu", "neuron"):
        xx = x.to(dev, copy=True).requires_grad_()
        out = F.layer_norm(xx, ns)
        (out * gy.to(dev)).sum().backward()
        res.append((out.cpu(), xx.grad.cpu()))
    assert torch.equal(res[0][0], res[1][0])
    assert torch.equal(res[0][1], res[1][1])


# ---- layer norm weight / bias gradients in the CPU's order ------------------------------

def _ln_param_grads(dev, x, gy, w, b, ns, threads):
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        xx = x.to(dev, copy=True).requires_grad_()
        ww = w.to(dev, copy=True).requires_grad_() if w is not None else None
        bb = b.to(dev, copy=True).requires_grad_() if b is not None else None
        out = F.layer_norm(xx, ns, ww, bb)
        (out * gy.to(dev)).sum().backward()
        return [t.grad.cpu() for t in (xx, ww, bb) if t is not None]
    finally:
        torch.set_num_threads(old)


@pytest.mark.parametrize("dtype,wdtype", [(torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16),
                                          (torch.bfloat16, torch.float32), (torch.float16, torch.float16),
                                          (torch.float16, torch.float32)])
@pytest.mark.parametrize("threads", [1, 2])
def test_layer_norm_weight_and_bias_grads_match_the_cpu_bitwise(dtype, wdtype, threads):
    """d(weight) and d(bias) as the CPU sums them: per thread a buffer of the
    input's dtype over its chunk of rows (16-bit partial sums rounded after
    every row), dy * (rstd * x - rstd * mean), the buffers then added in
    float; rows of +-3.4e38 overflow where the CPU's do."""
    g = torch.Generator().manual_seed(4100 + threads)
    for rows, n in [(1, 9), (7, 5), (33, 19), (5, 40)]:
        big = torch.finfo(dtype).max
        x = torch.randn(rows, n, generator=g) * torch.exp(torch.randn(rows, n, generator=g) * 2)
        x[torch.rand(rows, n, generator=g) < 0.08] = big
        x = x.to(dtype)
        gy = (torch.randn(rows, n, generator=g) * torch.exp(torch.randn(rows, n, generator=g) * 2)).to(dtype)
        w = torch.randn(n, generator=g).to(wdtype)
        b = torch.randn(n, generator=g).to(wdtype)
        ref = _ln_param_grads("cpu", x, gy, w, b, [n], threads)
        dev = _ln_param_grads("neuron", x, gy, w, b, [n], threads)
        for r, d in zip(ref[1:], dev[1:]):
            assert r.dtype == d.dtype
            assert _same_bits(r, d), (rows, n, r, d)


def test_layer_norm_weight_grad_of_a_row_at_the_float_limit_is_the_cpus():
    """Fuzz 57721566-705600: a [5, 5] row holding +-3.4e38 with a [5, 5]
    weight; the weight gradient is inf on the CPU (rstd * x - rstd * mean),
    was NaN/finite through (x - mean) * rstd."""
    big = 3.4028234663852886e38
    x = torch.tensor([[-0.0605, -0.2751, -0.1381, -1.6137, -0.8070], [-0.0, -0.0, -0.0, 0.3867, -big],
                      [2.9e-39, -0.0, 0.0735, -2.2686, -0.9344], [1.0259, big, 0.7120, -0.8527, -0.6775],
                      [0.8811, -big, 0.4211, 1.0546, 0.9495]]).t()
    w = torch.linspace(-2, 2, 25).view(5, 5)
    gy = (torch.randint(-2, 3, (5, 5), generator=torch.Generator().manual_seed(1831253378)) * 0.5)
    res = []
    for dev in ("cpu", "neuron"):
        xx = x.to(dev, copy=True).requires_grad_()
        ww = w.to(dev, copy=True).requires_grad_()
        (F.layer_norm(xx, [5, 5], weight=ww, eps=0.001) * gy.to(dev)).sum().backward()
        res.append(ww.grad.cpu())
    assert _same_bits(res[0], res[1])


# ---- 16-bit batch norm / instance norm backward in the CPU's order --------------------------

def _bn_bwd(dev, x, gy, w, threads, training=True, rm=None, rv=None, fn="batch_norm"):
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        xx = x.to(dev, copy=True).requires_grad_()
        ww = w.to(dev, copy=True).requires_grad_() if w is not None else None
        if fn == "instance_norm":
            out = F.instance_norm(xx, weight=ww, bias=None)
        else:
            out = F.batch_norm(xx, rm.to(dev) if rm is not None else None, rv.to(dev) if rv is not None else None,
                               ww, None, training=training)
        gyd = gy.to(dev)
        if gy.is_contiguous(memory_format=torch.channels_last) and not gy.is_contiguous():
            gyd = gyd.contiguous(memory_format=torch.channels_last)
        out.backward(gyd)
        return [t.grad.cpu() for t in (xx, ww) if t is not None]
    finally:
        torch.set_num_threads(old)


@pytest.mark.parametrize("dtype,wdtype", [(torch.bfloat16, torch.bfloat16), (torch.float16, torch.float16),
                                          (torch.bfloat16, torch.float32)])
@pytest.mark.parametrize("threads", [1, 2])
def test_batch_norm_16bit_backward_matches_the_cpu_bitwise(dtype, wdtype, threads):
    """A 16-bit batch_norm backward as the CPU's float kernels: contiguous
    planes (8 lanes over 16-value vectors, a scalar tail), channels-last and
    one-value planes (per-thread float buffers), the saved mean / invstd
    16-bit unless a parameter is float32."""
    g = torch.Generator().manual_seed(4200 + threads)
    for shape, cl in [((3, 4, 8), False), ((2, 3, 21), False), ((2, 2, 5, 7), False), ((6, 20), False),
                      ((3, 18, 1), False), ((2, 20, 2, 3), True), ((5, 7, 2, 1), True)]:
        x = (torch.randn(shape, generator=g) * 3 + torch.randn(shape[1], *[1] * (len(shape) - 2), generator=g) * 4)
        gy = torch.randn(shape, generator=g) * 2
        x, gy = x.to(dtype), gy.to(dtype)
        if cl:
            x, gy = (t.contiguous(memory_format=torch.channels_last) for t in (x, gy))
        w = torch.randn(shape[1], generator=g).to(wdtype)
        for training in (True, False):
            rm = torch.randn(shape[1], generator=g).to(wdtype)
            rv = torch.rand(shape[1], generator=g).to(wdtype) + 0.5
            ref = _bn_bwd("cpu", x, gy, w, threads, training, rm, rv)
            dev = _bn_bwd("neuron", x, gy, w, threads, training, rm, rv)
            for r, d in zip(ref, dev):
                assert r.dtype == d.dtype
                assert _same_bits(r, d), (shape, cl, training, (r.float() - d.float()).abs().max())


@pytest.mark.parametrize("case", ["14142135-273746", "14142135-817771", "14142135-846423"])
def test_instance_norm_16bit_backward_of_the_fuzz_cases_matches_the_cpu(case):
    """Expanded (constant) 16-bit instance_norm planes: invstd is 316 in
    bfloat16 on the CPU, not 316.2, and the input gradients summed over the
    expansion cancel as the CPU's only in its order."""
    gen = torch.Generator().manual_seed(int(case.split("-")[1]))
    if case == "14142135-273746":
        dt, base, shape = torch.bfloat16, torch.tensor([[[[-0.1826171875]]]]), (3, 4, 4, 2)
        w = torch.tensor([1.3203125, -0.2294921875, -1.2421875, -0.93359375])
    elif case == "14142135-817771":
        dt, shape = torch.float16, (2, 4, 4)
        base = torch.tensor([[[1.7197], [-1.0361], [-0.0219], [0.1379]], [[0.5430], [-0.6997], [-1.3223], [-0.3245]]])
        w = torch.tensor([3.0, 3.0, -2.0, -3.0])
    else:
        dt, base, shape = torch.bfloat16, torch.randn(3, 4, 2, generator=gen), (3, 4, 2)
        w = torch.tensor([-0.306640625, 2.640625, -0.82421875, -1.5078125])
    res = []
    for dev in ("cpu", "neuron"):
        bb = base.to(dt).to(dev).requires_grad_()
        ww = w.to(dt).to(dev).requires_grad_()
        out = F.instance_norm(bb.expand(shape), weight=ww)
        gy = (torch.randint(-2, 3, out.shape, generator=torch.Generator().manual_seed(5)) * 0.5).to(dt)
        (out * gy.to(dev)).sum().backward()
        res.append((bb.grad.cpu(), ww.grad.cpu()))
    for r, d in zip(*res):
        assert _same_bits(r, d), (r, d)


def test_instance_norm_float32_backward_with_a_huge_weight_matches_the_cpu():
    """Fuzz 8311-33050: float32 instance_norm with a 3.4e38 weight. The CPU's
    contiguous backward sums each plane in float lanes, takes k in float and
    contracts dy - grad_mean - (x - mean) * k; a 0.1 weight's gradient
    differed in its last bits, which the later 1e38-scale terms amplified."""
    big = 3.4028234663852886e38
    w = torch.tensor([1.1906182765960693, -0.0, big, 0.1227516457438469])
    b = torch.tensor([-0.8165751695632935, 0.9166620969772339, -0.5702962279319763, -0.16471070051193237])
    x = torch.tensor([[[2.0, -1.0, -2.0, 1.0], [3.0, 1.0, 3.0, -2.0]], [[-2.0, 1.0, 1.0, 2.0], [3.0, 0.0, 3.0, -1.0]]])
    res = []
    for dev in ("cpu", "neuron"):
        xx = x.to(dev, copy=True).requires_grad_()
        ww = w.to(dev, copy=True).requires_grad_()
        out = F.instance_norm(xx.transpose(-1, -2), weight=ww, bias=b.to(dev))
        gy = torch.randint(-2, 3, out.shape, generator=torch.Generator().manual_seed(65847859)) * 0.5
        (out * gy.to(dev)).sum().backward()
        res.append((xx.grad.cpu(), ww.grad.cpu()))
    for r, d in zip(*res):
        assert _same_bits(r, d), (r, d)


@pytest.mark.parametrize("shape,groups", [((2, 4, 3, 5), 2), ((2, 12, 3, 5), 3), ((1, 40, 2, 7), 4), ((2, 24, 3, 3), 1),
                                          ((2, 4, 4, 9), 2)])
def test_group_norm_channels_last_float32_matches_the_cpu_bitwise(shape, groups):
    """A channels-last float32 group_norm with planes under 1024 values: the
    CPU's ColumnwiseMoments (8 lanes by channel, reduced pairwise), var =
    fma(sumsq, s, -mean^2), y = fma(x, scale, fma(-scale, mean, b)); fuzz
    8313-76726 (integer input, weight 3.4e38: inf where neuron differed)."""
    g = torch.Generator().manual_seed(4300 + shape[1])
    x = (torch.randn(shape, generator=g) * 3 + 2).contiguous(memory_format=torch.channels_last)
    w = torch.randn(shape[1], generator=g)
    w[0] = 3.4028234663852886e38
    b = torch.randn(shape[1], generator=g)
    hw = x[0, 0].numel()
    ref = torch.ops.aten.native_group_norm(x, w, b, shape[0], shape[1], hw, groups, 1e-5)
    dev = torch.ops.aten.native_group_norm(x.to("neuron"), w.to("neuron"), b.to("neuron"), shape[0], shape[1], hw,
                                           groups, 1e-5)
    for r, d in zip(ref, dev):
        assert _same_bits(r, d), (r, d.cpu())


def test_batch_norm_bfloat16_strided_input_variance_uses_the_rounded_mean():
    """Fuzz 8314-89297: a strided bfloat16 training input whose channel holds
    two nearly equal values; the CPU's variance subtracts at::mean's
    bfloat16-rounded mean and sums in float (-0.9297 there; the unrounded
    mean gave -1.0547)."""
    x = torch.tensor([[-0.63671875, -1.53125, 1.34375, 0.1455078125],
                      [-0.6328125, 0.2041015625, 0.7265625, -0.9453125]], dtype=torch.bfloat16)
    rm = torch.tensor([-1.4296875, -0.68359375], dtype=torch.bfloat16)
    rv = torch.tensor([1.640625, 1.2109375], dtype=torch.bfloat16)
    ref = F.batch_norm(x[..., ::2], rm.clone(), rv.clone(), training=True)
    dev = F.batch_norm(x.to("neuron")[..., ::2], rm.to("neuron"), rv.to("neuron"), training=True)
    assert _same_bits(ref, dev)
