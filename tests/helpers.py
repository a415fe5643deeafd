"""Helpers shared by the test files: `from helpers import close, assert_no_fallbacks`.

conftest.py holds pytest fixtures only; the functions and tables a test
imports live here (tests/ is on sys.path, as for conftest). A helper used by
one file stays in that file; once a second file needs it, it moves here.

Tolerances. Every per-dtype tolerance table of the suite is below, named for
the kind of computation it fits, as (rtol, atol) for
torch.testing.assert_close. A file picks the table that fits its ops; its
docstring says which. A one-off tolerance for a single assertion stays at
that assertion, with its reason.
"""
import os
import subprocess
import sys
import textwrap

import torch
import torch.nn.functional as F

import torch_neuronx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEV = "neuron"

# ---- tolerances (rtol, atol) by dtype -----------------------------------------

# One rounding of the same formula on both sides (pointwise math, activations,
# small reductions and GEMMs compared elementwise by `close`): float32 gets 10x
# assert_close's default rtol; bfloat16 and float16 a few ulps. Other dtypes
# get TOL_POINTWISE_DEFAULT.
TOL_POINTWISE = {torch.float32: (1.3e-6 * 10, 1e-5), torch.bfloat16: (1.6e-2, 1e-2),
                 torch.float16: (1e-3, 1e-3)}
TOL_POINTWISE_DEFAULT = (1e-5, 1e-5)

# Both sides compute in float32 and round the result once (the NN family's
# activations and elementwise losses, or a mean in another summation order).
# Dtypes not listed (integers, bool, float16) must match exactly.
TOL_ROUNDED_ONCE = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (2e-2, 2e-2)}

# Interpolation (RESAMPLE): at most a few dozen float32 products per result,
# summed in different orders; bfloat16/float16 round once per result (the
# CPU's separable bicubic rounds its intermediate pass as well). Gradients
# get 4x the atol (they sum the contributions of many outputs).
TOL_INTERPOLATION = {**TOL_ROUNDED_ONCE, torch.float16: (2.5e-3, 2.5e-3)}

# Results that accumulate many products or terms in another order than the
# CPU: convolutions, pooling and norms (there with atol scaled by the
# reference's magnitude, see close_scaled), segment reductions and losses,
# matrix decompositions and FFTs. bfloat16 has 8 mantissa bits and a backward
# pass chains several rounded results: 2e-2 is about 2.5 epsilons; float16 the
# same 2.5 epsilons. The OpInfo sweep (conformance/opinfo_sweep.py, TOLERANCES)
# uses the same values.
TOL_ACCUMULATED = {torch.float32: (1e-4, 1e-4), torch.bfloat16: (2e-2, 2e-2), torch.float16: (2.5e-3, 2.5e-3)}

# Fused attention against the CPU math backend: an online softmax over key
# blocks reorders the sums; the 16-bit kernels accumulate in float32 and
# round once.
TOL_ATTENTION = {torch.float32: (2e-4, 2e-5), torch.bfloat16: (2e-2, 2e-2), torch.float16: (2e-3, 2e-3)}


def tol_kw(table, dtype, default=None) -> dict:
    """A table's entry for `dtype` as assert_close keywords (rtol=, atol=)."""
    rtol, atol = table[dtype] if default is None else table.get(dtype, default)
    return dict(rtol=rtol, atol=atol)


# ---- running and checking ---------------------------------------------------------

def run_python(code: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (for environment variables read at
    start-up, fork behaviour, crashes that must not take pytest down)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=ROOT)


def assert_no_fallbacks():
    fb = torch_neuronx.get_fallback_ops()
    assert fb == [], f"ops fell back to the CPU: {fb}"


def seeded_randn(*shape, seed=0, dtype=None):
    """torch.randn from a generator of its own (the global RNG is untouched)."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def close(dev, ref, dtype=torch.float32, **kw):
    """A neuron tensor against the CPU's result, TOL_POINTWISE for `dtype`
    (keywords override rtol/atol)."""
    tol = tol_kw(TOL_POINTWISE, dtype, TOL_POINTWISE_DEFAULT)
    tol.update(kw)
    assert dev.device.type == "neuron"
    torch.testing.assert_close(dev.cpu(), ref, **tol)


def close_scaled(dev, ref, dtype=torch.float32, scale=1.0):
    """Same dtype, and values within TOL_ACCUMULATED with the atol scaled by
    max|ref| (a convolution's or a norm's error grows with its magnitude);
    `scale` widens both."""
    rtol, atol = TOL_ACCUMULATED[dtype]
    ref = ref.detach()
    dev = dev.detach().cpu()
    assert dev.dtype == ref.dtype, (dev.dtype, ref.dtype)
    mag = ref.float().abs().max().item() if ref.numel() else 1.0
    torch.testing.assert_close(dev.float(), ref.float(), rtol=rtol * scale, atol=atol * scale * max(mag, 1e-3))


def same(dev, ref, **kw):
    """assert_close of a device result against the CPU's, NaN equal to NaN
    (keywords: rtol/atol; default assert_close's for the dtype)."""
    torch.testing.assert_close(dev.cpu(), ref, equal_nan=True, **kw)


def run_both(fn, *tensors, dtype=torch.float32, grad=True, grad_scale=1.0):
    """fn(*tensors) on CPU and on the device (leaf copies requiring grad);
    compares the outputs (close_scaled; non-float outputs exactly) and, with
    `grad`, the gradients of every input for a random output gradient."""
    cpu = [t.detach().to(dtype).requires_grad_(grad and t.is_floating_point()) for t in tensors]
    dev = [t.detach().to(dtype).neuron().requires_grad_(grad and t.is_floating_point()) for t in tensors]
    out_c, out_d = fn(*cpu), fn(*dev)
    if isinstance(out_c, torch.Tensor):
        out_c, out_d = (out_c,), (out_d,)
    for a, b in zip(out_d, out_c):
        if b.is_floating_point():
            close_scaled(a, b, dtype)
        else:
            assert torch.equal(a.cpu(), b)
    if grad:
        g = [torch.randn_like(o) for o in out_c if o.is_floating_point() and o.requires_grad]
        outs_c = [o for o in out_c if o.is_floating_point() and o.requires_grad]
        outs_d = [o for o in out_d if o.is_floating_point() and o.requires_grad]
        torch.autograd.backward(outs_c, g)
        torch.autograd.backward(outs_d, [x.neuron() for x in g])
        for a, b in zip(dev, cpu):
            if b.grad is not None:
                close_scaled(a.grad, b.grad, dtype, scale=grad_scale)
    return out_d, out_c


def raises_like_cpu(call, expected=None):
    """Runs `call(dev)` on the CPU and on neuron; both must raise the same
    exception class (`expected`, when given), neuron at the call itself
    rather than at the next synchronisation. Returns the two exceptions."""
    got = {}
    for dev in ("cpu", DEV):
        try:
            call(dev)
        except Exception as e:  # noqa: BLE001 - the class is what is compared
            got[dev] = e
        else:
            got[dev] = None
    late = None
    try:
        torch.neuron.synchronize()
    except Exception as e:  # noqa: BLE001
        late = e
    cpu, dev = got["cpu"], got[DEV]
    assert cpu is not None, "the CPU accepts this input; the test expects it to raise"
    if expected is not None:
        assert type(cpu) is expected, f"CPU raised {type(cpu).__name__}: {cpu}"
    assert late is None, f"neuron raised only at synchronize: {type(late).__name__}: {late}"
    assert dev is not None, f"neuron accepted what the CPU rejects ({type(cpu).__name__}: {cpu})"
    assert type(dev) is type(cpu), f"neuron raised {type(dev).__name__}: {dev}; the CPU {type(cpu).__name__}: {cpu}"
    return cpu, dev


# ---- models ----------------------------------------------------------------------

def cpu_and_neuron(make):
    """Two modules from `make()`: the CPU reference and a neuron copy with its weights."""
    ref, dev = make(), make()
    dev.load_state_dict(ref.state_dict())
    return ref, dev.neuron()


def mse_steps(model, x, y, opt, steps):
    """`steps` optimizer steps on F.mse_loss(model(x), y)."""
    for _ in range(steps):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
