"""Optimizers on the device: SGD (Nesterov), Adam and AdamW (amsgrad) in their
foreach and fused forms, and clip_grad_norm_, against the same steps on the
CPU with zero CPU fallbacks."""
import pytest
import torch
import torch.nn as nn

from helpers import assert_no_fallbacks, close, cpu_and_neuron, mse_steps

DEV = "neuron"


@pytest.mark.parametrize("opt_name,kw", [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
                                         ("Adam", dict(lr=1e-2, weight_decay=0.01)),
                                         ("AdamW", dict(lr=1e-2, weight_decay=0.1, amsgrad=True)),
                                         ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.01))])
@pytest.mark.parametrize("impl", ["foreach", "fused"])
def test_optimizers_native(opt_name, kw, impl):
    torch.manual_seed(0)
    ref, dev = cpu_and_neuron(lambda: nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2)))
    x, y = torch.randn(16, 6), torch.randn(16, 2)
    for m, xx, yy in ((ref, x, y), (dev, x.neuron(), y.neuron())):
        mse_steps(m, xx, yy, getattr(torch.optim, opt_name)(m.parameters(), **kw, **{impl: True}), steps=4)
    for p, q in zip(ref.parameters(), dev.parameters()):
        close(q, p.detach(), atol=1e-5, rtol=1e-4)
    assert_no_fallbacks()
    # clip_grad_norm_ runs natively too
    torch.nn.utils.clip_grad_norm_(dev.parameters(), 0.5)
    assert_no_fallbacks()


# ---- fused steps: one FOREACH_ADAM / FOREACH_SGD launch -----------------------------------------

SIZES = [(3, 5), (0,), (1,), (257,), (40000,), (33, 65)]  # 40000 crosses the engine's work items
ADAM_KW = [dict(), dict(weight_decay=0.1), dict(amsgrad=True), dict(maximize=True, weight_decay=0.05),
           dict(betas=(0.3, 0.5), amsgrad=True, weight_decay=0.1)]  # beta1 0.3: ATen's other lerp form
SGD_KW = [dict(), dict(momentum=0.9), dict(momentum=0.9, dampening=0.25, weight_decay=0.01),
          dict(momentum=0.9, nesterov=True, maximize=True), dict(weight_decay=0.1, maximize=True)]
CASES = ([("Adam", kw) for kw in ADAM_KW] + [("AdamW", kw) for kw in ADAM_KW] + [("SGD", kw) for kw in SGD_KW])
IDS = [f"{o}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'plain'}" for o, kw in CASES]
# bfloat16 and float16 round each stored state once, so two float32
# computations of it (ATen's vector loop fuses the lerp into an FMA) may
# differ by an ulp, which the next steps carry on: rtol per element, atol a
# few ulps of the tensor's largest value (ATOL_OF_MAX).
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.bfloat16: dict(rtol=8e-3, atol=1e-5),
       torch.float16: dict(rtol=1e-3, atol=1e-6)}
ATOL_OF_MAX = {torch.bfloat16: 4 * 2.0 ** -8, torch.float16: 4 * 2.0 ** -11}


def close_states(got, want, dtype, tol):
    tol = dict(tol)
    if dtype in ATOL_OF_MAX and want.numel():
        tol["atol"] = max(tol["atol"], ATOL_OF_MAX[dtype] * want.abs().max().item())
    torch.testing.assert_close(got.to(want.dtype), want, **tol)


def start(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g).to(dtype) for s in SIZES]


def grads_for(steps, dtype, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [[(torch.randn(s, generator=g) * 0.3).to(dtype) for s in SIZES] for _ in range(steps)]


def run_steps(opt_name, kw, init, grads, device, impl, lr=None, rounded_to=None):
    """The parameters and the optimizer's states after len(grads) steps.
    rounded_to: compute in float32 and round every parameter and state to
    this dtype after each step (ATen's fused arithmetic for 16-bit tensors
    where the CPU's own kernel cannot serve as the reference)."""
    ps = [p.clone().to(device).requires_grad_() for p in init]
    default_lr = 0.1 if opt_name == "SGD" else 1e-2
    how = dict(foreach=False) if impl == "single" else {impl: True}
    opt = getattr(torch.optim, opt_name)(ps, lr=default_lr if lr is None else lr, **kw, **how)
    for gs in grads:
        for p, g in zip(ps, gs):
            p.grad = g.to(device)
        opt.step()
        if rounded_to is not None:
            with torch.no_grad():
                for p in ps:
                    p.copy_(p.to(rounded_to))
                    for v in opt.state[p].values():
                        if v.is_floating_point() and v.dim() > 0:
                            v.copy_(v.to(rounded_to))
    states = [{k: v.detach().cpu() for k, v in opt.state[p].items()} for p in ps]
    return [p.detach().cpu() for p in ps], states


def assert_steps_close(got, want, dtype, tol=None):
    tol = tol or TOL[dtype]
    for (gp, gs), (wp, ws) in zip(zip(*got), zip(*want)):
        close_states(gp, wp, dtype, tol)
        for k in ws:
            if ws[k].dim() > 0:
                close_states(gs[k], ws[k], dtype, tol)
            else:  # the step count
                assert gs[k].item() == ws[k].item(), k


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("opt_name,kw", CASES, ids=IDS)
def test_fused_step_matches_the_cpu_fused_step(opt_name, kw, dtype):
    init, grads = start(dtype), grads_for(4, dtype)
    got = run_steps(opt_name, kw, init, grads, DEV, "fused")
    if opt_name == "SGD" and dtype != torch.float32:
        # PyTorch 2.13's CPU kernel leaves the vectorised part of 16-bit
        # parameters unchanged (pytorch/pytorch#191763): compare with its
        # float32 kernel rounded after each step instead
        init32, grads32 = [p.float() for p in init], [[g.float() for g in gs] for gs in grads]
        want = run_steps(opt_name, kw, init32, grads32, "cpu", "fused", rounded_to=dtype)
    else:
        want = run_steps(opt_name, kw, init, grads, "cpu", "fused")
    assert_steps_close(got, want, dtype)
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("opt_name,kw", CASES, ids=IDS)
def test_fused_step_matches_the_foreach_step(opt_name, kw, dtype):
    init, grads = start(dtype, seed=2), grads_for(3, dtype, seed=3)
    got = run_steps(opt_name, kw, init, grads, DEV, "fused")
    want = run_steps(opt_name, kw, init, grads, DEV, "foreach")
    # foreach rounds its intermediates (exp_avg, the denominator) to the
    # parameters' dtype between its launches; fused keeps them in float32
    tol = None if dtype == torch.float32 else dict(rtol=3e-2, atol=1e-3)
    assert_steps_close(got, [[t for t in want[0]], want[1]], dtype, tol)


def test_float16_params_and_the_per_tensor_chain():
    init, grads = start(torch.float16, seed=4), grads_for(3, torch.float16, seed=5)
    kw = dict(weight_decay=0.1, amsgrad=True)
    got = run_steps("AdamW", kw, init, grads, DEV, "fused")
    assert_steps_close(got, run_steps("AdamW", kw, init, grads, "cpu", "fused"), torch.float16)
    # a transposed parameter with contiguous gradients is laid out unlike
    # them: that index takes the chain of per-tensor ops, the rest one launch
    # (the CPU's fused kernel pairs such tensors' elements in memory order,
    # so its single-tensor step is the reference)
    init = [torch.randn(6, 4).t(), torch.randn(50), torch.randn(3, 3)]
    grads = [[torch.randn(p.shape) * 0.3 for p in init] for _ in range(3)]
    for opt_name, kw in (("Adam", dict(weight_decay=0.1)), ("SGD", dict(momentum=0.9, weight_decay=0.1))):
        got = run_steps(opt_name, kw, init, grads, DEV, "fused")
        assert_steps_close(got, run_steps(opt_name, kw, init, grads, "cpu", "single"), torch.float32,
                           dict(rtol=1e-4, atol=1e-5))
    assert_no_fallbacks()


@pytest.mark.parametrize("where", ["cpu", "neuron"])
def test_fused_step_with_a_tensor_lr(where):
    init, grads = start(torch.float32, seed=6), grads_for(3, torch.float32, seed=7)
    for opt_name, kw in (("AdamW", dict(weight_decay=0.1)), ("SGD", dict(momentum=0.9))):
        lr = torch.tensor(3e-2)
        got = run_steps(opt_name, kw, init, grads, DEV, "fused", lr=lr.to(where))
        want = run_steps(opt_name, kw, init, grads, "cpu", "fused", lr=lr)
        assert_steps_close(got, want, torch.float32)
    assert_no_fallbacks()


def fused_call(name, lists, amsgrad, lr, grad_scale, found_inf):
    p, g, m, v, vmax, steps = lists
    if name == "sgd":
        torch._fused_sgd_(p, g, m, weight_decay=0.01, momentum=0.9, lr=lr, dampening=0.1, nesterov=False,
                          maximize=False, is_first_step=False, grad_scale=grad_scale, found_inf=found_inf)
    else:
        fn = torch._fused_adamw_ if name == "adamw" else torch._fused_adam_
        fn(p, g, m, v, vmax if amsgrad else [], steps, lr=lr, beta1=0.9, beta2=0.99, weight_decay=0.1, eps=1e-8,
           amsgrad=amsgrad, maximize=False, grad_scale=grad_scale, found_inf=found_inf)


@pytest.mark.parametrize("name", ["adam", "adamw", "sgd"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_fused_ops_grad_scale_found_inf_and_lr(name, dtype):
    """The ops themselves: grad_scale divides the gradients and the quotients
    are stored back; found_inf = 1 leaves every tensor as it was; lr as a
    float, a CPU tensor or a device tensor."""
    g = torch.Generator().manual_seed(8)
    base = [[torch.randn(s, generator=g).to(dtype) for s in SIZES] for _ in range(5)]
    base[3] = [t.abs() for t in base[3]]  # exp_avg_sq
    base[4] = [t.abs() for t in base[4]]
    base.append([torch.tensor(3.0) for _ in SIZES])  # steps (float32, as torch.optim makes them)
    for lr in (2e-2, torch.tensor(2e-2), torch.tensor(2e-2, device=DEV)):
        for inf in (0.0, 1.0):
            cpu = [[t.clone() for t in ts] for ts in base]
            dev = [[t.to(DEV) for t in ts] for ts in base]
            scale, found = torch.tensor(64.0), torch.tensor(inf)
            fused_call(name, dev, True, lr, scale.to(DEV), found.to(DEV))
            if name == "sgd" and dtype != torch.float32:  # pytorch/pytorch#191763 again
                cpu = [[t.float() for t in ts] for ts in cpu]
            fused_call(name, cpu, True, lr.cpu() if isinstance(lr, torch.Tensor) else lr, scale, found)
            for k in range(len(base)):
                for j, (a, b) in enumerate(zip(dev[k], cpu[k])):
                    if inf == 1.0:  # skipped: nothing changed, the gradients neither
                        assert torch.equal(a.cpu(), base[k][j]), (k, j)
                    else:
                        close_states(a.cpu().float(), b.to(a.dtype).float(), a.dtype, TOL[a.dtype])
            if inf == 0.0:  # the unscaled gradients were stored back
                assert not torch.equal(dev[1][0].cpu(), base[1][0])
    assert_no_fallbacks()


@pytest.mark.parametrize("opt_name", ["Adam", "AdamW", "SGD"])
def test_grad_scaler_with_fused_steps(opt_name):
    """GradScaler passes grad_scale and found_inf to the fused step; an
    overflowing step (an inf gradient) is skipped on the device, its step
    count undone, and the scale backs off, all as on the CPU."""
    kw = dict(lr=0.05, momentum=0.9) if opt_name == "SGD" else dict(lr=1e-2, weight_decay=0.05)
    ref, x, y = model_and_batch_optim()
    dev = model_and_batch_optim()[0].to(DEV)
    runs = []
    for m, device in ((ref, "cpu"), (dev, DEV)):
        opt = getattr(torch.optim, opt_name)(m.parameters(), fused=True, **kw)
        scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 12, growth_interval=2)
        scales = []
        for step in range(5):
            opt.zero_grad()
            loss = nn.functional.mse_loss(m(x.to(device)), y.to(device))
            scaler.scale(loss).backward()
            if step == 2:
                with torch.no_grad():
                    next(m.parameters()).grad.view(-1)[0] = float("inf")
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
        runs.append((m, opt, scales))
    (m_ref, o_ref, s_ref), (m_dev, o_dev, s_dev) = runs
    assert s_dev == s_ref and s_ref[2] < s_ref[1]
    for p, q in zip(m_ref.parameters(), m_dev.parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-5, atol=1e-6)
        for k, v in o_ref.state[p].items():
            torch.testing.assert_close(o_dev.state[q][k].cpu(), v, rtol=1e-5, atol=1e-6)
        if opt_name != "SGD":
            assert o_dev.state[q]["step"].item() == 4  # the overflowing step did not count
    assert_no_fallbacks()


def model_and_batch_optim(seed=0):
    torch.manual_seed(seed)
    m = nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.Linear(32, 3))
    return m, torch.randn(20, 12), torch.randn(20, 3)


def kernel_counts(fn):
    import collections
    import torch_neuronx

    fn()  # warm-up
    with torch_neuronx.profiler.profile(print_table=False, limits=False) as prof:
        fn()
    return collections.Counter(a.name for a in prof.activities() if a.kind == "kernel")


def test_one_launch_per_fused_step():
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        ps = [nn.Parameter(torch.randn(100 + 7 * i, dtype=dtype).to(DEV)) for i in range(30)]
        for p in ps:
            p.grad = torch.randn_like(p)
        adam = torch.optim.AdamW(ps, lr=1e-3, amsgrad=True, fused=True)
        # the step counts += 1 (torch.optim's _foreach_add_), then the whole update
        assert kernel_counts(adam.step) == {"FOREACH_ADD": 1, "FOREACH_ADAM": 1}
        sgd = torch.optim.SGD(ps, lr=1e-3, momentum=0.9, fused=True)
        assert kernel_counts(sgd.step) == {"FOREACH_SGD": 1}
    assert_no_fallbacks()


def test_default_implementation_matches_cuda():
    """As for CUDA in this PyTorch: foreach unless fused=True is asked for,
    and neuron is among the devices of both."""
    from torch.optim.optimizer import _default_to_fused_or_foreach
    from torch.utils._foreach_utils import (_get_foreach_kernels_supported_devices,
                                            _get_fused_kernels_supported_devices)

    assert DEV in _get_fused_kernels_supported_devices() and DEV in _get_foreach_kernels_supported_devices()
    ps = [nn.Parameter(torch.randn(5, device=DEV)) for _ in range(3)]
    assert _default_to_fused_or_foreach(ps, differentiable=False, use_fused=False) == (False, True)
    assert _default_to_fused_or_foreach(ps, differentiable=False, use_fused=True) == (True, False)
    for p in ps:
        p.grad = torch.ones_like(p)
    k = kernel_counts(torch.optim.Adam(ps, lr=1e-3).step)
    assert "FOREACH_ADAM" not in k and all(n.startswith("FOREACH_") for n in k), k
