"""Training-utilities conformance table: the utilities a training loop uses
besides operators (AMP's GradScaler and autocast, weight/spectral norm and
parametrizations, gradient clipping, every torch.optim optimizer with
foreach and fused, LR schedulers, checkpointing, gradient accumulation,
DataLoader with pinned memory, torch.distributions sampling, EMA/SWA), each
run as the same small program on the CPU (the reference) and on ``neuron``
from identical initial state, and what the program produces compared.

Each case is classified:

  native-pass    the results match and no ATen op fell back to the CPU
  fallback-pass  the results match, but some ATen op ran through the CPU fallback (listed)
  mismatch       a result differs beyond the case's tolerance (the largest difference is given)
  error          neuron raised where the CPU did not
  crash          the worker process died or timed out (cases run in worker processes)
  skipped        not applicable (the reason is given), or the CPU itself cannot run it

Tolerances: float32 programs use the OpInfo sweep's float32 entry (rtol =
atol = 1e-4; a few steps of an optimizer keep the parameters' differences at
the level of one float32 GEMM's). Programs in a 16-bit dtype use that dtype's
entry of the same table (float16 2.5e-3, bfloat16 2e-2) for what they compute
in it. Random programs (distribution samplers, dropout under checkpointing)
cannot match the CPU's numbers (the device's Philox stream differs from the
CPU's, as documented): their rows compare what is defined: the sample mean
and variance against the distribution's (within 6 standard errors for the
mean, 8% for the variance, 50,000 samples, on both devices), log_prob at
fixed points, reproducibility under torch.manual_seed, and for checkpointing
that recomputation reproduces the same dropout masks (the gradients of the
checkpointed and the plain run are equal on each device).

Usage (from the repository root):

  python tests/conformance/utilities_sweep.py --full         # all cases; `make conformance`
  python tests/conformance/utilities_sweep.py --cases optim.Adam,clip_grad_norm_ -v
  python tests/conformance/utilities_sweep.py --list

Results: build/conformance/utilities/full.jsonl; --full then regenerates
docs/op-support.md and docs/op-support.json (key "utilities") through
tools/gen_op_support.py.
"""
from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from opinfo_sweep import TOLERANCES, _build_id, _first_line, run_parent  # noqa: E402

TASK_TIMEOUT_S = 120.0
DEFAULT_WORKERS = 2
N_SAMPLES = 50_000


@dataclass
class Case:
    name: str
    variant: str
    dtype: str
    fn: Callable[[str], dict]          # fn(device) -> {result name: tensor / number / bool}
    tol: tuple[float, float] | None = None   # default: TOLERANCES[dtype]
    skip: str | None = None
    note: str = ""
    exact: tuple[str, ...] = field(default_factory=tuple)  # results compared exactly

    @property
    def key(self) -> str:
        return f"{self.name}.{self.variant}" if self.variant else self.name


# ---- building blocks --------------------------------------------------------

def _torch():
    import torch

    return torch


def _mlp(dev: str, seed: int = 0, n_in: int = 16, hidden: int = 32, n_out: int = 8, bn: bool = False):
    """A small MLP built on the CPU from `seed`, then moved to `dev`."""
    torch = _torch()
    nn = torch.nn
    torch.manual_seed(seed)
    layers = [nn.Linear(n_in, hidden)] + ([nn.BatchNorm1d(hidden)] if bn else []) + [nn.Tanh(), nn.Linear(hidden, n_out)]
    return nn.Sequential(*layers).to(dev)


def _data(dev: str, n: int = 24, n_in: int = 16, n_out: int = 8, seed: int = 1):
    torch = _torch()
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, n_in, generator=g).to(dev), torch.randn(n, n_out, generator=g).to(dev)


def _params(model) -> dict:
    return {f"param.{k}": v.detach() for k, v in model.named_parameters()}


def _grads(model) -> dict:
    return {f"grad.{k}": v.grad.detach() for k, v in model.named_parameters() if v.grad is not None}


def _dev_type(dev: str) -> str:
    return dev.split(":")[0]


# ---- AMP --------------------------------------------------------------------

def amp_grad_scaler(dev: str) -> dict:
    """float16 autocast with torch.amp.GradScaler: 5 steps, the third with an
    inf gradient (the step is skipped and the scale halves), growth_interval=2
    so the scale also grows."""
    torch = _torch()
    F = torch.nn.functional
    model = _mlp(dev)
    x, y = _data(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler(_dev_type(dev), init_scale=2.0 ** 12, growth_interval=2)
    out: dict[str, Any] = {}
    for step in range(5):
        opt.zero_grad()
        with torch.autocast(_dev_type(dev), dtype=torch.float16):
            loss = F.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        if step == 2:
            with torch.no_grad():
                model[0].weight.grad[0, 0] = float("inf")
        scaler.step(opt)
        scaler.update()
        out[f"loss{step}"] = loss.detach().float()
        out[f"scale{step}"] = float(scaler.get_scale())
    out.update(_params(model))
    return out


def amp_autocast_bf16(dev: str) -> dict:
    """One bfloat16 autocast training step (float32 parameters and gradients)
    of a model with batch norm, SGD with momentum."""
    torch = _torch()
    F = torch.nn.functional
    model = _mlp(dev, bn=True)
    x, y = _data(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    with torch.autocast(_dev_type(dev), dtype=torch.bfloat16):
        pred = model(x)
        loss = F.mse_loss(pred.float(), y)
    loss.backward()
    res = {"pred_dtype": str(pred.dtype), "loss": loss.detach(), **_grads(model)}
    opt.step()
    res.update(_params(model))
    return res


# ---- weight norm, spectral norm, parametrizations -------------------------------

def _train_steps(model, dev: str, x, y, steps: int = 3, lr: float = 0.05) -> dict:
    torch = _torch()
    F = torch.nn.functional
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    res: dict[str, Any] = {}
    for s in range(steps):
        opt.zero_grad()
        out = model(x)
        loss = F.mse_loss(out, y)
        loss.backward()
        if s == 0:
            res["out0"] = out.detach()
            res.update(_grads(model))
        opt.step()
        res[f"loss{s}"] = loss.detach()
    res.update(_params(model))
    return res


def weight_norm_legacy(dev: str) -> dict:
    torch = _torch()
    torch.manual_seed(0)
    m = torch.nn.utils.weight_norm(torch.nn.Linear(16, 8), dim=0).to(dev)
    x, y = _data(dev)
    res = _train_steps(m, dev, x, y)
    res["weight"] = m.weight.detach()
    return res


def weight_norm_parametrization(dev: str) -> dict:
    torch = _torch()
    torch.manual_seed(0)
    m = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(4, 6, 3)).to(dev)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(2, 4, 10, generator=g).to(dev), torch.randn(2, 6, 8, generator=g).to(dev)
    res = _train_steps(m, dev, x, y)
    res["weight"] = m.weight.detach()
    return res


def spectral_norm_legacy(dev: str) -> dict:
    """nn.utils.spectral_norm: the power iteration's u/v buffers start from
    the CPU module's random vectors and are updated by every training forward."""
    torch = _torch()
    torch.manual_seed(0)
    m = torch.nn.utils.spectral_norm(torch.nn.Linear(16, 8), n_power_iterations=2).to(dev)
    x, y = _data(dev)
    res = _train_steps(m, dev, x, y)
    res["weight_u"] = m.weight_u.detach()
    res["weight_v"] = m.weight_v.detach()
    m.eval()
    res["eval_out"] = m(x).detach()
    return res


def spectral_norm_parametrization(dev: str) -> dict:
    torch = _torch()
    torch.manual_seed(0)
    m = torch.nn.utils.parametrizations.spectral_norm(torch.nn.Linear(16, 8)).to(dev)
    x, y = _data(dev)
    res = _train_steps(m, dev, x, y)
    res["u"] = m.parametrizations.weight[0]._u.detach()
    res["weight"] = m.weight.detach()
    return res


def _orthogonal(dev: str, n_out: int, orthogonal_map: str | None) -> dict:
    torch = _torch()
    torch.manual_seed(0)
    m = torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(16, n_out), orthogonal_map=orthogonal_map).to(dev)
    x, y = _data(dev, n_out=n_out)
    res = _train_steps(m, dev, x, y)
    w = m.weight.detach()
    res["weight"] = w
    eye = torch.eye(min(w.shape), device=w.device)
    res["orthonormal_error"] = float(((w @ w.T) if w.shape[0] <= w.shape[1] else (w.T @ w)).sub(eye).abs().max())
    return res


# ---- gradient clipping ------------------------------------------------------------

def _clip(dev: str, how: str, foreach: bool) -> dict:
    torch = _torch()
    F = torch.nn.functional
    model = _mlp(dev)
    x, y = _data(dev)
    (F.mse_loss(model(x), y) * 50).backward()
    res: dict[str, Any] = {}
    if how == "norm2":
        res["total_norm"] = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5, foreach=foreach).detach()
    elif how == "norminf":
        res["total_norm"] = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1, norm_type=float("inf"),
                                                           foreach=foreach).detach()
    else:
        torch.nn.utils.clip_grad_value_(model.parameters(), 0.05, foreach=foreach)
    res.update(_grads(model))
    return res


# ---- optimizers ---------------------------------------------------------------------

OPTIMIZERS: dict[str, dict] = {
    "SGD": {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-3},
    "Adam": {"lr": 1e-2, "weight_decay": 1e-3, "amsgrad": True},
    "AdamW": {"lr": 1e-2, "weight_decay": 1e-2},
    "Adamax": {"lr": 1e-2, "weight_decay": 1e-3},
    "Adagrad": {"lr": 5e-2, "lr_decay": 1e-3, "weight_decay": 1e-3},
    "Adadelta": {"lr": 1.0, "weight_decay": 1e-3},
    "RMSprop": {"lr": 1e-2, "momentum": 0.5, "centered": True, "weight_decay": 1e-3},
    "Rprop": {"lr": 1e-2},
    "NAdam": {"lr": 1e-2, "weight_decay": 1e-3, "decoupled_weight_decay": True},
    "RAdam": {"lr": 1e-2, "weight_decay": 1e-3},
    "ASGD": {"lr": 1e-2, "t0": 1, "weight_decay": 1e-3},
    "LBFGS": {"lr": 0.5, "max_iter": 4, "history_size": 5},
}
OPT_STEPS = 6


def _optim(dev: str, name: str, impl: str) -> dict:
    """OPT_STEPS steps of `name` on the MLP; the parameters and the
    optimizer's state tensors afterwards. impl: foreach / forloop / fused / closure."""
    torch = _torch()
    F = torch.nn.functional
    model = _mlp(dev)
    x, y = _data(dev)
    kw = dict(OPTIMIZERS[name])
    if impl == "foreach":
        kw["foreach"] = True
    elif impl == "forloop":
        kw["foreach"] = False
    elif impl == "fused":
        kw["fused"] = True
    opt = getattr(torch.optim, name)(model.parameters(), **kw)
    res: dict[str, Any] = {}
    for s in range(OPT_STEPS):
        def closure():
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            return loss

        if name == "LBFGS":
            loss = opt.step(closure)
        else:
            loss = closure()
            opt.step()
        res[f"loss{s}"] = loss.detach()
    res.update(_params(model))
    for i, st in enumerate(opt.state_dict()["state"].values()):
        for k, v in st.items():
            if k in ("step", "mu_product") and isinstance(v, torch.Tensor) and v.numel() == 1:
                # PyTorch keeps these scalars on the CPU unless capturable/fused: compare the number.
                res[f"state{i}.{k}"] = float(v)
            elif isinstance(v, torch.Tensor) and v.is_floating_point():
                res[f"state{i}.{k}"] = v.detach()
    return res


def _optim_variants(name: str) -> list[tuple[str, str]]:
    """(variant, skip reason or '') per optimizer: forloop and foreach where
    the optimizer has a foreach argument, fused where it has a fused one."""
    torch = _torch()
    params = inspect.signature(getattr(torch.optim, name).__init__).parameters
    out = []
    if "foreach" in params:
        out += [("foreach=False", ""), ("foreach=True", "")]
    else:
        out += [("closure", "")]
    if "fused" in params:
        out.append(("fused=True", ""))
    return out


# ---- LR schedulers ------------------------------------------------------------------

def _sched(dev: str, which: str) -> dict:
    torch = _torch()
    F = torch.nn.functional
    model = _mlp(dev)
    x, y = _data(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if which == "StepLR":
        sch = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    elif which == "OneCycleLR":
        sch = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.2, total_steps=10)
    elif which == "CosineAnnealingWarmRestarts":
        sch = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=1e-3)
    else:
        sch = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1, threshold=1e9)
    res: dict[str, Any] = {}
    for s in range(10):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        # ReduceLROnPlateau reads the metric: a 0-d device tensor here.
        sch.step(loss.detach()) if which == "ReduceLROnPlateau" else sch.step()
        res[f"lr{s}"] = float(opt.param_groups[0]["lr"])
    res.update(_params(model))
    return res


# ---- checkpointing, accumulation, data loading ------------------------------------------

def _ckpt_model(dev: str, p_drop: float):
    torch = _torch()
    nn = torch.nn
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Dropout(p_drop), nn.Linear(32, 32), nn.Tanh()).to(dev), \
        nn.Linear(32, 8).to(dev)


def _checkpoint(dev: str, use_reentrant: bool, dropout: bool) -> dict:
    """Without dropout: output and gradients of a checkpointed segment against
    the CPU. With dropout (preserve_rng_state=True): the checkpointed run's
    gradients equal a plain run's from the same seed on the same device (the
    recomputation replays the dropout mask)."""
    torch = _torch()
    from torch.utils.checkpoint import checkpoint

    seg, head = _ckpt_model(dev, 0.3 if dropout else 0.0)
    x, y = _data(dev)
    x.requires_grad_(True)

    def run(ckpt: bool):
        for p in list(seg.parameters()) + list(head.parameters()):
            p.grad = None
        x.grad = None
        torch.manual_seed(123)
        h = checkpoint(seg, x, use_reentrant=use_reentrant, preserve_rng_state=True) if ckpt else seg(x)
        out = head(h)
        torch.nn.functional.mse_loss(out, y).backward()
        return out.detach(), [p.grad.detach().clone() for p in seg.parameters()] + [x.grad.detach().clone()]

    out_c, g_c = run(True)
    if not dropout:
        return {"out": out_c, **{f"grad{i}": g for i, g in enumerate(g_c)}}
    out_p, g_p = run(False)
    same = all(bool(torch.equal(a, b)) for a, b in zip(g_c, g_p)) and bool(torch.equal(out_c, out_p))
    return {"recompute_replays_dropout": same, "out_shape": tuple(out_c.shape),
            "dropped_fraction_ok": abs(float((seg[2](torch.ones(4000, device=x.device)) == 0).float().mean()) - 0.3) < 0.05}


def grad_accumulation(dev: str) -> dict:
    """4 micro-batches of 6 accumulated (loss / 4) then one Adam step, against
    the CPU; and the accumulated gradient equals one 24-sample batch's."""
    torch = _torch()
    F = torch.nn.functional
    model = _mlp(dev)
    x, y = _data(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for xs, ys in zip(x.chunk(4), y.chunk(4)):
        (F.mse_loss(model(xs), ys) / 4).backward()
    acc = [p.grad.detach().clone() for p in model.parameters()]
    res = _grads(model)
    opt.step()
    res.update(_params(model))
    ref = _mlp(dev)
    F.mse_loss(ref(x), y).backward()
    res["matches_full_batch"] = all(bool(torch.allclose(a, p.grad, rtol=1e-4, atol=1e-5))
                                    for a, p in zip(acc, ref.parameters()))
    return res


def _dataloader(dev: str, workers: int) -> dict:
    """DataLoader(pin_memory=True): batches are pinned (on the accelerator,
    neuron), copied with non_blocking=True, and an epoch of SGD steps matches
    the CPU's."""
    torch = _torch()
    F = torch.nn.functional
    from torch.utils.data import DataLoader, TensorDataset

    g = torch.Generator().manual_seed(5)
    ds = TensorDataset(torch.randn(64, 16, generator=g), torch.randn(64, 8, generator=g))
    dl = DataLoader(ds, batch_size=16, shuffle=True, pin_memory=True, num_workers=workers,
                    generator=torch.Generator().manual_seed(7))
    model = _mlp(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    pinned = []
    for xb, yb in dl:
        pinned.append(bool(xb.is_pinned() and yb.is_pinned()))
        xb, yb = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
        opt.zero_grad()
        F.mse_loss(model(xb), yb).backward()
        opt.step()
    return {"all_batches_pinned": all(pinned), "batches": len(pinned), **_params(model)}


# ---- distributions --------------------------------------------------------------------

def _dist(dev: str, which: str) -> dict:
    """N_SAMPLES samples: mean within 6 standard errors of the distribution's
    mean, variance within 8% of its variance (elementwise over the batch),
    reproducible under torch.manual_seed; log_prob at fixed points against the
    CPU's (deterministic)."""
    torch = _torch()
    D = torch.distributions

    def t(v):
        return torch.tensor(v, dtype=torch.float32, device=dev)

    if which == "Normal":
        d, pts = D.Normal(t([0.0, 1.5]), t([1.0, 2.0])), t([[0.3, -1.0], [2.0, 4.0]])
    elif which == "Categorical":
        d, pts = D.Categorical(probs=t([0.1, 0.2, 0.3, 0.4])), torch.tensor([0, 3, 2], device=dev)
    elif which == "Gamma":
        d, pts = D.Gamma(t([0.5, 2.0, 9.0]), t([1.0, 1.5, 3.0])), t([[0.2, 1.0, 3.0]])
    elif which == "Beta":
        d, pts = D.Beta(t([0.5, 2.0]), t([0.5, 5.0])), t([[0.2, 0.4], [0.9, 0.1]])
    elif which == "Dirichlet":
        d, pts = D.Dirichlet(t([0.5, 1.0, 2.0])), t([[0.2, 0.3, 0.5]])
    elif which == "Poisson":
        d, pts = D.Poisson(t([0.5, 3.5, 40.0])), t([[0.0, 3.0, 38.0]])
    else:
        d, pts = D.Binomial(total_count=t([10.0, 50.0]), probs=t([0.3, 0.9])), t([[3.0, 45.0]])
    torch.manual_seed(42)
    s = d.sample((N_SAMPLES,))
    torch.manual_seed(42)
    s2 = d.sample((N_SAMPLES,))
    sf = s.double()
    mean, var = d.mean.double(), d.variance.double()
    if which == "Categorical":  # the frequency of each category (Categorical's mean/variance are undefined)
        sf = torch.nn.functional.one_hot(s, 4).double()
        mean = d.probs.double()
        var = mean * (1 - mean)
    m_err = ((sf.mean(0) - mean).abs() / (var / N_SAMPLES).sqrt()).max()
    v_err = ((sf.var(0) - var).abs() / var).max()
    res = {"sample_dtype": str(s.dtype), "sample_shape": tuple(s.shape),
           "sample_on_device": s.device.type == _dev_type(dev),
           "reproducible": bool(torch.equal(s, s2)),
           "mean_within_6_se": bool(m_err < 6), "var_within_8pct": bool(v_err < 0.08),
           "log_prob": d.log_prob(pts).detach()}
    if which in ("Dirichlet", "Categorical"):
        res["support_ok"] = bool((s >= 0).all()) and (which == "Categorical" or bool(
            (sf.sum(-1) - 1).abs().max() < 1e-4))
    res["_info"] = f"mean error {float(m_err):.2f} SE, variance error {100 * float(v_err):.2f}%"
    return res


# ---- EMA / SWA ------------------------------------------------------------------------

def ema_averaged_model(dev: str) -> dict:
    """AveragedModel with get_ema_multi_avg_fn(0.9) (use_buffers=True) over 5
    SGD steps of a model with batch norm. (SGD, not Adam: the gradient of a
    bias feeding batch norm is zero up to rounding, and Adam would turn that
    rounding into full-size steps of either sign.)"""
    torch = _torch()
    F = torch.nn.functional
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    model = _mlp(dev, bn=True)
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9), use_buffers=True)
    x, y = _data(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(5):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
        ema.update_parameters(model)
    res = {f"ema.{k}": v.detach() for k, v in ema.module.state_dict().items() if v.is_floating_point()}
    res["n_averaged"] = int(ema.n_averaged)
    ema.eval()
    res["ema_out"] = ema(x).detach()
    return res


def swa_swalr(dev: str) -> dict:
    """SWA: AveragedModel (equal average) and SWALR (cosine annealing to
    swa_lr) from step 3, then update_bn over a loader of device tensors."""
    torch = _torch()
    F = torch.nn.functional
    from torch.optim.swa_utils import SWALR, AveragedModel, update_bn

    model = _mlp(dev, bn=True)
    swa = AveragedModel(model)
    x, y = _data(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = SWALR(opt, swa_lr=0.02, anneal_epochs=3, anneal_strategy="cos")
    res: dict[str, Any] = {}
    for s in range(8):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
        if s >= 3:
            swa.update_parameters(model)
            sched.step()
        res[f"lr{s}"] = float(opt.param_groups[0]["lr"])
    update_bn([(xb,) for xb in x.chunk(3)], swa, device=torch.device(dev))
    res.update({f"swa.{k}": v.detach() for k, v in swa.module.state_dict().items() if v.is_floating_point()})
    return res


# ---- the table ------------------------------------------------------------------------

def build_cases() -> list[Case]:
    from functools import partial as p

    cases = [
        Case("amp.GradScaler", "float16 autocast, 5 steps, 1 overflow", "float16", amp_grad_scaler,
             note="losses and parameters at float16 tolerance; scales exact"),
        Case("amp.autocast", "bfloat16 training step", "bfloat16", amp_autocast_bf16),
        Case("nn.utils.weight_norm", "Linear, 3 SGD steps", "float32", weight_norm_legacy),
        Case("parametrizations.weight_norm", "Conv1d, 3 SGD steps", "float32", weight_norm_parametrization),
        Case("nn.utils.spectral_norm", "Linear, 2 power iterations, 3 SGD steps", "float32", spectral_norm_legacy),
        Case("parametrizations.spectral_norm", "Linear, 3 SGD steps", "float32", spectral_norm_parametrization),
        Case("parametrizations.orthogonal", "square, matrix_exp", "float32", p(_orthogonal, n_out=16,
                                                                              orthogonal_map="matrix_exp")),
        Case("parametrizations.orthogonal", "square, cayley", "float32", p(_orthogonal, n_out=16,
                                                                          orthogonal_map="cayley")),
        Case("parametrizations.orthogonal", "8x16, householder", "float32", p(_orthogonal, n_out=8,
                                                                             orthogonal_map="householder")),
    ]
    for fe in (False, True):
        cases.append(Case("clip_grad_norm_", f"L2, foreach={fe}", "float32", p(_clip, how="norm2", foreach=fe)))
        cases.append(Case("clip_grad_norm_", f"inf, foreach={fe}", "float32", p(_clip, how="norminf", foreach=fe)))
        cases.append(Case("clip_grad_value_", f"foreach={fe}", "float32", p(_clip, how="value", foreach=fe)))
    impl_of = {"foreach=False": "forloop", "foreach=True": "foreach", "fused=True": "fused", "closure": "closure"}
    for name in OPTIMIZERS:
        for variant, _ in _optim_variants(name):
            cases.append(Case(f"optim.{name}", variant, "float32", p(_optim, name=name, impl=impl_of[variant]),
                              note=", ".join(f"{k}={v}" for k, v in OPTIMIZERS[name].items())))
    cases.append(Case("optim.SparseAdam", "", "float32", lambda dev: {},
                      skip="needs sparse gradients (nn.Embedding(sparse=True)); sparse tensors are not supported "
                           "on the device (README, Not done yet)"))
    for s in ("StepLR", "OneCycleLR", "CosineAnnealingWarmRestarts", "ReduceLROnPlateau"):
        cases.append(Case(f"lr_scheduler.{s}", "SGD, 10 steps", "float32", p(_sched, which=s)))
    for ur in (True, False):
        cases.append(Case("utils.checkpoint", f"use_reentrant={ur}", "float32",
                          p(_checkpoint, use_reentrant=ur, dropout=False)))
        cases.append(Case("utils.checkpoint", f"use_reentrant={ur}, dropout, preserve_rng_state", "float32",
                          p(_checkpoint, use_reentrant=ur, dropout=True)))
    cases.append(Case("gradient accumulation", "4 micro-batches, Adam", "float32", grad_accumulation))
    cases.append(Case("DataLoader", "pin_memory=True, num_workers=0", "float32", p(_dataloader, workers=0)))
    cases.append(Case("DataLoader", "pin_memory=True, num_workers=2", "float32", p(_dataloader, workers=2)))
    for dname in ("Normal", "Categorical", "Gamma", "Beta", "Dirichlet", "Poisson", "Binomial"):
        cases.append(Case(f"distributions.{dname}", "sample", "float32", p(_dist, which=dname)))
    cases.append(Case("swa_utils.AveragedModel", "EMA (get_ema_multi_avg_fn), use_buffers", "float32",
                      ema_averaged_model))
    cases.append(Case("swa_utils.SWALR", "AveragedModel + SWALR + update_bn", "float32", swa_swalr))
    return cases


# ---- running and comparing ----------------------------------------------------------

def _compare(torch, ref: dict, got: dict, tol: tuple[float, float]) -> list[dict]:
    """The differences between a CPU result dict and a neuron one (converted)."""
    probs = []
    if set(ref) != set(got):
        return [{"where": "keys", "what": f"results {sorted(set(got) ^ set(ref))} present on one side only"}]
    rtol, atol = tol
    for k, r in ref.items():
        g = got[k]
        if isinstance(r, torch.Tensor):
            if g.dtype != r.dtype or g.shape != r.shape:
                probs.append({"where": k, "what": f"{g.dtype} {tuple(g.shape)}, expected {r.dtype} {tuple(r.shape)}"})
                continue
            if not r.is_floating_point():
                if not torch.equal(g, r):
                    probs.append({"where": k, "what": "values differ (exact comparison)"})
                continue
            try:
                torch.testing.assert_close(g, r, rtol=rtol, atol=atol, equal_nan=True)
            except AssertionError:
                d = (g.double() - r.double()).abs().nan_to_num(math.inf)
                i = int(d.argmax())
                probs.append({"where": k, "what": "values", "max_abs_diff": float(d.max()),
                              "got": float(g.reshape(-1)[i]), "expected": float(r.reshape(-1)[i])})
        elif isinstance(r, float) and not isinstance(r, bool):
            if not (math.isclose(g, r, rel_tol=rtol, abs_tol=atol) or (math.isnan(g) and math.isnan(r))):
                probs.append({"where": k, "what": "values", "max_abs_diff": abs(g - r), "got": g, "expected": r})
        elif g != r:
            probs.append({"where": k, "what": f"{g!r}, expected {r!r}"})
    return probs


def _to_cpu(torch, res: dict, dev: str) -> tuple[dict, list[str]]:
    out, off = {}, []
    for k, v in res.items():
        if isinstance(v, torch.Tensor):
            if v.device.type != _dev_type(dev):
                off.append(k)
            v = v.detach().cpu()
        out[k] = v
    return out, off


def run_case(case: Case) -> dict:
    import torch
    import torch_neuronx

    rec: dict[str, Any] = {"op": case.name, "variant": case.variant, "dtype": case.dtype}
    if case.note:
        rec["note"] = case.note
    if case.skip:
        rec.update(status="skipped", reason=case.skip, fallback_ops=[])
        return rec
    tol = case.tol or TOLERANCES[case.dtype]
    t0 = time.perf_counter()
    try:
        ref = case.fn("cpu")
    except Exception as e:  # noqa: BLE001
        rec.update(status="skipped", reason="the CPU raised: " + _first_line(e), fallback_ops=[])
        return rec
    ref.pop("_info", None)
    ref, _ = _to_cpu(torch, ref, "cpu")
    torch_neuronx.clear_op_tracking()
    try:
        got = case.fn("neuron")
        torch.neuron.synchronize()
    except Exception as e:  # noqa: BLE001
        rec.update(status="error", reason=_first_line(e), fallback_ops=sorted(torch_neuronx.get_fallback_ops()))
        try:
            torch.neuron.synchronize()
        except Exception:  # noqa: BLE001
            pass
        return rec
    fb = sorted(torch_neuronx.get_fallback_ops())
    info = got.pop("_info", "")
    got, off = _to_cpu(torch, got, "neuron")
    probs = _compare(torch, ref, got, tol)
    if off:
        probs.insert(0, {"where": ", ".join(off[:4]), "what": "result is not on the neuron device"})
    rec["fallback_ops"] = fb
    rec["time_s"] = round(time.perf_counter() - t0, 3)
    rec["checks"] = len(ref)
    rec["tolerance"] = list(tol)
    if probs:
        p = max(probs, key=lambda q: q.get("max_abs_diff", math.inf))
        rec["status"] = "mismatch"
        if "max_abs_diff" in p:
            rec["max_abs_diff"] = p["max_abs_diff"]
            rec["reason"] = (f"{p['where']}: max abs diff {p['max_abs_diff']:.3g} (got {p['got']:.6g}, expected "
                             f"{p['expected']:.6g}); {len(probs)} of {len(ref)} results differ")
        else:
            rec["reason"] = f"{p['where']}: {p['what']}" + (f"; {len(probs)} of {len(ref)} results differ"
                                                            if len(probs) > 1 else "")
        rec["problems"] = probs[:4]
    elif fb:
        rec["status"] = "fallback-pass"
        rec["reason"] = "falls back: " + ", ".join(fb)
    else:
        rec["status"] = "native-pass"
        rec["reason"] = ""
    if info:
        rec["reason"] = (rec["reason"] + "; " if rec["reason"] else "") + "neuron: " + info
    return rec


def worker_main() -> int:
    """The worker protocol of opinfo_sweep.run_parent: tasks on stdin, one
    JSON result line per task on the original stdout."""
    import faulthandler
    import warnings

    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    faulthandler.enable(file=sys.stderr, all_threads=True)
    warnings.simplefilter("ignore")
    import torch
    import torch_neuronx  # noqa: F401

    torch.set_num_threads(int(os.environ.get("CONFORMANCE_TORCH_THREADS", "1")))
    cases = {c.key: c for c in build_cases()}
    proto.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        task = json.loads(line)
        print(f"== {task['key']}", file=sys.stderr, flush=True)
        try:
            rec = run_case(cases[task["key"]])
        except Exception as e:  # noqa: BLE001
            import traceback

            traceback.print_exc()
            rec = {"op": task["op"], "variant": task["variant"], "dtype": task["dtype"], "status": "error",
                   "reason": "harness: " + _first_line(e)}
        rec["key"] = task["key"]
        proto.write(json.dumps(rec, default=str) + "\n")
    return 0


def sweep(keys: list[str] | None, out_path: str, workers: int, timeout: float, verbose: bool) -> tuple[list, dict]:
    cases = build_cases()
    if keys:
        sel = [c for c in cases if c.key in keys or c.name in keys]
        missing = [k for k in keys if not any(k in (c.key, c.name) for c in cases)]
        if missing:
            raise SystemExit(f"no such case: {', '.join(missing)} (see --list)")
        cases = sel
    tasks = [{"key": c.key, "op": c.name, "variant": c.variant, "dtype": c.dtype} for c in cases]
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    if os.path.exists(out_path):
        os.remove(out_path)
    print(f"utilities: {len(tasks)} cases, {workers} workers, results in {os.path.relpath(out_path, ROOT)}",
          file=sys.stderr, flush=True)
    t0 = time.monotonic()
    before = _build_id()
    results = run_parent(tasks, out_path, workers, timeout, 0, verbose, script=os.path.abspath(__file__))
    wall = time.monotonic() - t0
    build = _build_id()
    if build.get("extension_mtime") != before.get("extension_mtime"):
        build["rebuilt_during_sweep"] = True
    meta = {"wall_time_s": round(wall, 1), "workers": workers, "timeout_s": timeout, "build": build,
            "n_samples": N_SAMPLES}
    with open(out_path[: -len(".jsonl")] + ".meta.json", "w") as f:
        json.dump(meta, f, indent=1)
    counts: dict[str, int] = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"utilities: {len(results)} results in {wall:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=sys.stderr)
    return results, meta


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true", help="every case (writes docs/op-support.*)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cases", help="semicolon-separated case names or name.variant keys")
    ap.add_argument("--list", action="store_true", help="print the case keys")
    ap.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    ap.add_argument("--timeout", type=float, default=TASK_TIMEOUT_S)
    ap.add_argument("--out", help="results (JSON lines); default build/conformance/utilities/<full|adhoc>.jsonl")
    ap.add_argument("--no-docs", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    if a.worker:
        return worker_main()
    if a.list:
        for c in build_cases():
            print(c.key)
        return 0
    keys = a.cases.split(";") if a.cases else None
    out = a.out or os.path.join(ROOT, "build", "conformance", "utilities", ("full" if a.full else "adhoc") + ".jsonl")
    sweep(keys, out, a.workers, a.timeout, a.verbose)
    if a.full and not keys and not a.no_docs:
        sys.path.insert(0, os.path.join(ROOT, "tools"))
        import gen_op_support

        gen_op_support.generate_from_last()
    return 0


if __name__ == "__main__":
    sys.exit(main())
