"""RNN family on the neuron device against PyTorch's CPU: nn.LSTM, nn.GRU,
nn.LSTMCell and nn.GRUCell, which on neuron run the fused cells
_thnn_fused_lstm_cell / _thnn_fused_gru_cell and their backward ops
(_thnn_fused_lstm_cell_backward_impl, _thnn_fused_gru_cell_backward)
between GEMMs.

Every module test builds one CPU module, copies it (same weights) to
neuron, runs the same inputs through both and compares the outputs, the
final states, and after a backward with the same output gradients the
gradients of the inputs, of the initial states and of every parameter.
Covered: uni- and bidirectional, 1 and 2 layers, LSTM proj_size,
batch_first, given and default initial states, bias=False, packed
sequences of unequal lengths (pack_padded_sequence, enforce_sorted False),
the Cell modules batched and unbatched, a 3-step SGD training loop, the
fused ops called directly (against a float64 formula, and their output
sizes / strides / dtypes against the meta functions under
FakeTensorMode), argument errors, and no CPU fallback (in process and in
a subprocess with TORCH_NEURONX_DISABLE_FALLBACK=1).

Tolerances (rtol = atol, see TOL; an element passes within tol * (1 + |cpu|)):
  float32   1e-5 for outputs and states, 2e-5 for gradients. The kernels
            compute the gates in float32 like the CPU; what differs is the
            order of float32 sums (the bias adds, the GEMMs) and exp/tanh
            within 1-2 ulp, which the gradient sums over time and batch
            accumulate. Measured over 30 module configurations: at most
            1.0e-7 (outputs) and 6.3e-7 (gradients) in these units.
  bfloat16  2e-2 for outputs, 8e-2 for gradients. The CPU rounds every
            intermediate of the unfused cell (each gate sum, activation
            and product) to bfloat16 (8 bits of mantissa, ~4e-3 per
            rounding); the fused cell rounds its outputs once, so the two
            differ by a few bfloat16 roundings per step, and the weight
            gradients sum such differences over time and batch. Measured:
            at most 5.6e-3 (outputs) and 3.3e-2 (gradients).
"""
import copy

import pytest
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import torch_neuronx
from conftest import assert_no_fallbacks, run_python

DEV = "neuron"
TOL = {
    torch.float32: {"out": 1e-5, "grad": 2e-5},
    torch.bfloat16: {"out": 2e-2, "grad": 8e-2},
}
FUSED_OPS = (
    "aten::_thnn_fused_lstm_cell",
    "aten::_thnn_fused_lstm_cell_backward_impl",
    "aten::_thnn_fused_gru_cell",
    "aten::_thnn_fused_gru_cell_backward",
)


def close(got, want, tol, what):
    torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=tol, atol=tol, msg=lambda m: f"{what}: {m}")


def pair(module):
    """The CPU module and a neuron copy with the same parameters."""
    return module, copy.deepcopy(module).to(DEV)


def to_dev(x):
    if isinstance(x, tuple):
        return tuple(to_dev(t) for t in x)
    return x.detach().to(DEV).requires_grad_(x.requires_grad)


def leaf(x):
    return x.detach().clone().requires_grad_(True)


def flat(x):
    """Tensors of an RNN result ((out, h) or (out, (h, c))), in order."""
    if x is None:
        return []
    if isinstance(x, torch.Tensor):
        return [x]
    out = []
    for t in x:
        out += flat(t)
    return out


def compare_run(cpu_mod, dev_mod, args_cpu, dtype, unpack=None):
    """Runs both modules, compares the results, backpropagates the same
    random gradients through every result and compares the gradients of
    the leaf inputs and the parameters. `unpack` maps a module result to
    the tensors to compare (packed outputs are unpacked first)."""
    tol = TOL[dtype]
    args_dev = tuple(to_dev(a) if a is not None else None for a in args_cpu)
    res_c = cpu_mod(*args_cpu)
    res_d = dev_mod(*args_dev)
    outs_c = unpack(res_c) if unpack else flat(res_c)
    outs_d = unpack(res_d) if unpack else flat(res_d)
    assert len(outs_c) == len(outs_d)
    for i, (c, d) in enumerate(zip(outs_c, outs_d)):
        assert d.device.type == DEV and d.dtype == c.dtype and d.shape == c.shape
        close(d, c, tol["out"], f"result {i}")
    gen = torch.Generator().manual_seed(1)
    grads = [torch.randn(c.shape, generator=gen).to(dtype) for c in outs_c]
    torch.autograd.backward(outs_c, grads)
    torch.autograd.backward(outs_d, [g.to(DEV) for g in grads])
    for i, (a, b) in enumerate(zip(flat(args_cpu), flat(args_dev))):
        if a is not None and a.requires_grad:
            close(b.grad, a.grad, tol["grad"], f"grad of input {i}")
    for (name, p_c), (_, p_d) in zip(cpu_mod.named_parameters(), dev_mod.named_parameters()):
        assert p_d.grad is not None, name
        close(p_d.grad, p_c.grad, tol["grad"], f"grad of {name}")
    assert_no_fallbacks()
    return outs_c, outs_d


# ---- full modules -----------------------------------------------------------------

LSTM_CONFIGS = [
    dict(num_layers=1, bidirectional=False, proj_size=0, batch_first=False),
    dict(num_layers=2, bidirectional=False, proj_size=0, batch_first=True),
    dict(num_layers=1, bidirectional=True, proj_size=0, batch_first=False),
    dict(num_layers=2, bidirectional=True, proj_size=0, batch_first=True),
    dict(num_layers=1, bidirectional=False, proj_size=3, batch_first=False),
    dict(num_layers=2, bidirectional=True, proj_size=3, batch_first=False),
    dict(num_layers=2, bidirectional=True, proj_size=3, batch_first=True),
]
GRU_CONFIGS = [
    dict(num_layers=1, bidirectional=False, batch_first=False),
    dict(num_layers=2, bidirectional=False, batch_first=True),
    dict(num_layers=1, bidirectional=True, batch_first=True),
    dict(num_layers=2, bidirectional=True, batch_first=False),
]
IN, HID, T, B = 5, 7, 6, 4


def seq_input(batch_first, dtype, batch=B):
    shape = (batch, T, IN) if batch_first else (T, batch, IN)
    return leaf(torch.randn(shape).to(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("cfg", LSTM_CONFIGS, ids=lambda c: "-".join(f"{k}{int(v)}" for k, v in c.items()))
def test_lstm(cfg, with_state, dtype):
    torch.manual_seed(0)
    cpu, dev = pair(nn.LSTM(IN, HID, **cfg).to(dtype))
    x = seq_input(cfg["batch_first"], dtype)
    d = 2 if cfg["bidirectional"] else 1
    state = None
    if with_state:
        hsz = cfg["proj_size"] or HID
        state = (leaf(torch.randn(cfg["num_layers"] * d, B, hsz).to(dtype)),
                 leaf(torch.randn(cfg["num_layers"] * d, B, HID).to(dtype)))
    torch_neuronx.clear_op_tracking()
    compare_run(cpu, dev, (x, state), dtype)
    ex = torch_neuronx.get_executed_ops()
    for op in ("aten::_thnn_fused_lstm_cell", "aten::_thnn_fused_lstm_cell_backward_impl"):
        assert op in ex, (op, ex)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("cfg", GRU_CONFIGS, ids=lambda c: "-".join(f"{k}{int(v)}" for k, v in c.items()))
def test_gru(cfg, with_state, dtype):
    torch.manual_seed(0)
    cpu, dev = pair(nn.GRU(IN, HID, **cfg).to(dtype))
    x = seq_input(cfg["batch_first"], dtype)
    d = 2 if cfg["bidirectional"] else 1
    state = leaf(torch.randn(cfg["num_layers"] * d, B, HID).to(dtype)) if with_state else None
    torch_neuronx.clear_op_tracking()
    compare_run(cpu, dev, (x, state), dtype)
    ex = torch_neuronx.get_executed_ops()
    for op in ("aten::_thnn_fused_gru_cell", "aten::_thnn_fused_gru_cell_backward"):
        assert op in ex, (op, ex)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
def test_no_bias(cls):
    torch.manual_seed(0)
    cpu, dev = pair(cls(IN, HID, num_layers=2, bidirectional=True, bias=False))
    compare_run(cpu, dev, (seq_input(False, torch.float32),), torch.float32)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
def test_unbatched_sequence(cls):
    torch.manual_seed(0)
    cpu, dev = pair(cls(IN, HID, num_layers=2))
    compare_run(cpu, dev, (leaf(torch.randn(T, IN)),), torch.float32)


# ---- packed sequences -------------------------------------------------------------


def packed_unpack(batch_first):
    def unpack(res):
        out, state = res
        padded, lengths = pad_packed_sequence(out, batch_first=batch_first)
        return [padded] + flat(state)
    return unpack


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("kind", ["lstm", "lstm_proj", "gru"])
def test_packed_sequence(kind, batch_first, dtype):
    torch.manual_seed(0)
    if kind == "gru":
        mod = nn.GRU(IN, HID, num_layers=2, bidirectional=True, batch_first=batch_first)
    else:
        mod = nn.LSTM(IN, HID, num_layers=2, bidirectional=True, batch_first=batch_first,
                      proj_size=3 if kind == "lstm_proj" else 0)
    cpu, dev = pair(mod.to(dtype))
    lengths = torch.tensor([4, 6, 2, 5, 1])  # unsorted, unequal
    x = seq_input(batch_first, dtype, batch=len(lengths))

    class Packed(nn.Module):
        def __init__(self, rnn):
            super().__init__()
            self.rnn = rnn

        def forward(self, x):
            return self.rnn(pack_padded_sequence(x, lengths, batch_first=batch_first, enforce_sorted=False))

    outs_c, outs_d = compare_run(Packed(cpu), Packed(dev), (x,), dtype, unpack=packed_unpack(batch_first))
    # padding positions stay zero
    padded = outs_d[0].cpu()
    for b, n in enumerate(lengths.tolist()):
        tail = padded[b, n:] if batch_first else padded[n:, b]
        assert (tail == 0).all()


# ---- cells --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("with_state", [False, True])
def test_lstm_cell(with_state, bias, dtype):
    torch.manual_seed(0)
    cpu, dev = pair(nn.LSTMCell(IN, HID, bias=bias).to(dtype))
    x = leaf(torch.randn(B, IN).to(dtype))
    state = (leaf(torch.randn(B, HID).to(dtype)), leaf(torch.randn(B, HID).to(dtype))) if with_state else None
    torch_neuronx.clear_op_tracking()
    compare_run(cpu, dev, (x, state), dtype)
    assert "aten::_thnn_fused_lstm_cell" in torch_neuronx.get_executed_ops()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("with_state", [False, True])
def test_gru_cell(with_state, bias, dtype):
    torch.manual_seed(0)
    cpu, dev = pair(nn.GRUCell(IN, HID, bias=bias).to(dtype))
    x = leaf(torch.randn(B, IN).to(dtype))
    state = leaf(torch.randn(B, HID).to(dtype)) if with_state else None
    torch_neuronx.clear_op_tracking()
    compare_run(cpu, dev, (x, state), dtype)
    assert "aten::_thnn_fused_gru_cell" in torch_neuronx.get_executed_ops()


@pytest.mark.parametrize("cls", [nn.LSTMCell, nn.GRUCell])
def test_cell_unbatched_and_steps(cls):
    """An unbatched input, then a loop of steps feeding the state back (the
    backward runs through every step's saved workspace)."""
    torch.manual_seed(0)
    cpu, dev = pair(cls(IN, HID))
    compare_run(cpu, dev, (leaf(torch.randn(IN)),), torch.float32)

    class Loop(nn.Module):
        def __init__(self, cell):
            super().__init__()
            self.cell = cell

        def forward(self, xs):
            state, outs = None, []
            for x in xs:
                state = self.cell(x, state)
                outs.append(state[0] if isinstance(state, tuple) else state)
            return torch.stack(outs)

    compare_run(Loop(cpu), Loop(dev), (leaf(torch.randn(T, B, IN)),), torch.float32)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
def test_double_backward(cls):
    """With create_graph=True autograd differentiates the cells through the
    composite _thnn_differentiable_*_backward ops (native pieces, no
    fallback) instead of the fused backward ops."""
    torch.manual_seed(0)
    cpu, dev = pair(cls(IN, HID))
    x = torch.randn(T, B, IN)
    res = []
    for mod, xx in ((cpu, leaf(x)), (dev, to_dev(leaf(x)))):
        g, = torch.autograd.grad(mod(xx)[0].sum(), xx, create_graph=True)
        gg, = torch.autograd.grad(g.pow(2).sum(), xx)
        res.append(gg)
    close(res[1], res[0], 2e-5, "second derivative")
    assert_no_fallbacks()


# ---- training ----------------------------------------------------------------------


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
def test_training_loop(cls):
    """Three SGD steps of a 2-layer bidirectional RNN with a linear head: the
    parameters after each step match the CPU's."""
    torch.manual_seed(0)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            kw = dict(proj_size=4) if cls is nn.LSTM else {}
            self.rnn = cls(IN, HID, num_layers=2, bidirectional=True, batch_first=True, **kw)
            self.head = nn.Linear(2 * (4 if cls is nn.LSTM else HID), 3)

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.head(out[:, -1])

    cpu, dev = pair(Model())
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.1, momentum=0.9)
    opt_d = torch.optim.SGD(dev.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(2)
    for step in range(3):
        x = torch.randn(B, T, IN, generator=gen)
        y = torch.randint(0, 3, (B,), generator=gen)
        for mod, opt, dv in ((cpu, opt_c, "cpu"), (dev, opt_d, DEV)):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(mod(x.to(dv)), y.to(dv))
            loss.backward()
            opt.step()
        for (name, p_c), (_, p_d) in zip(cpu.named_parameters(), dev.named_parameters()):
            close(p_d, p_c, 1e-4, f"step {step}: {name}")
    assert_no_fallbacks()


# ---- the fused ops directly -----------------------------------------------------------


def lstm_ref(ig, hg, cx, bi, bh):
    a = ig.double() + hg.double() + ((bi.double() + bh.double()) if bi is not None else 0)
    i, f, g, o = a.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx.double() + i * g
    return o * cy.tanh(), cy, torch.cat([i, f, g, o], 1)


def gru_ref(ig, hg, hx, bi, bh):
    ai = ig.double() + (bi.double() if bi is not None else 0)
    ah = hg.double() + (bh.double() if bh is not None else 0)
    r = (ai[:, :HID] + ah[:, :HID]).sigmoid()
    z = (ai[:, HID:2 * HID] + ah[:, HID:2 * HID]).sigmoid()
    n = (ai[:, 2 * HID:] + r * ah[:, 2 * HID:]).tanh()
    return n + z * (hx.double() - n), torch.cat([r, z, n, hx.double(), ah[:, 2 * HID:]], 1)


@pytest.mark.parametrize("bias", [True, False])
def test_fused_ops_against_formula(bias):
    """The workspace layouts are CUDA's (what the backward ops read)."""
    torch.manual_seed(0)
    ig, hg, bi, bh = (torch.randn(B, 4 * HID), torch.randn(B, 4 * HID), torch.randn(4 * HID), torch.randn(4 * HID))
    cx = torch.randn(B, HID)
    args = (ig, hg, cx, bi, bh) if bias else (ig, hg, cx)
    hy, cy, ws = torch.ops.aten._thnn_fused_lstm_cell(*[a.to(DEV) for a in args])
    want = lstm_ref(ig, hg, cx, bi if bias else None, bh if bias else None)
    for got, w, what in zip((hy, cy, ws), want, ("hy", "cy", "workspace")):
        close(got, w.float(), 2e-6, what)
    # backward: d(sum(ghy * hy + gcy * cy)) / d(gates) from autograd in float64
    ghy, gcy = torch.randn(B, HID), torch.randn(B, HID)
    a = (ig.double() + hg.double() + ((bi + bh).double() if bias else 0)).requires_grad_()
    cxd = cx.double().requires_grad_()
    i, f, g, o = a.chunk(4, 1)
    cyd = f.sigmoid() * cxd + i.sigmoid() * g.tanh()
    hyd = o.sigmoid() * cyd.tanh()
    torch.autograd.backward([hyd, cyd], [ghy.double(), gcy.double()])
    for gh, gc in ((ghy, gcy), (ghy, None), (None, gcy)):
        gg, gcx, gb = torch.ops.aten._thnn_fused_lstm_cell_backward_impl(
            gh.to(DEV) if gh is not None else None, gc.to(DEV) if gc is not None else None,
            cx.to(DEV), cy, ws, bias)
        if gh is not None and gc is not None:
            close(gg, a.grad.float(), 1e-5, "grad_gates")
            close(gcx, cxd.grad.float(), 1e-5, "grad_cx")
        if bias:
            close(gb, gg.cpu().sum(0), 1e-5, "grad_bias")
        else:
            assert gb is None
    assert torch.ops.aten._thnn_fused_lstm_cell_backward_impl(None, None, cx.to(DEV), cy, ws, bias) == (None,) * 3

    ig3, hg3, bi3, bh3 = ig[:, :3 * HID], hg[:, :3 * HID], bi[:3 * HID], bh[:3 * HID]
    args = (ig3, hg3, cx, bi3, bh3) if bias else (ig3, hg3, cx)
    hy, ws = torch.ops.aten._thnn_fused_gru_cell(*[a.to(DEV) for a in args])
    want_hy, want_ws = gru_ref(ig3, hg3, cx, bi3 if bias else None, bh3 if bias else None)
    close(hy, want_hy.float(), 2e-6, "gru hy")
    close(ws, want_ws.float(), 2e-6, "gru workspace")
    ai = (ig3.double() + (bi3.double() if bias else 0)).requires_grad_()
    ah = (hg3.double() + (bh3.double() if bias else 0)).requires_grad_()
    hxd = cx.double().requires_grad_()
    r = (ai[:, :HID] + ah[:, :HID]).sigmoid()
    z = (ai[:, HID:2 * HID] + ah[:, HID:2 * HID]).sigmoid()
    n = (ai[:, 2 * HID:] + r * ah[:, 2 * HID:]).tanh()
    go = torch.randn(B, HID)
    (n + z * (hxd - n)).backward(go.double())
    gi, gh, ghx, gbi, gbh = torch.ops.aten._thnn_fused_gru_cell_backward(go.to(DEV), ws, bias)
    close(gi, ai.grad.float(), 1e-5, "grad_input_gates")
    close(gh, ah.grad.float(), 1e-5, "grad_hidden_gates")
    close(ghx, hxd.grad.float(), 1e-5, "grad_hx")
    if bias:
        close(gbi, gi.cpu().sum(0), 1e-5, "grad_input_bias")
        close(gbh, gh.cpu().sum(0), 1e-5, "grad_hidden_bias")
    else:
        assert gbi is None and gbh is None
    assert_no_fallbacks()


def test_fused_ops_non_contiguous():
    """Strided gates and states (slices, transposes) read correctly."""
    torch.manual_seed(0)
    ig = torch.randn(4 * HID, B).t()
    hg = torch.randn(B, 8 * HID)[:, ::2]
    cx = torch.randn(HID, B).t()
    bi, bh = torch.randn(8 * HID)[::2], torch.randn(4 * HID)
    hy, cy, ws = torch.ops.aten._thnn_fused_lstm_cell(*[t.to(DEV) for t in (ig, hg, cx, bi, bh)])
    for got, w in zip((hy, cy, ws), lstm_ref(ig, hg, cx, bi, bh)):
        close(got, w.float(), 2e-6, "lstm")
    hy, ws = torch.ops.aten._thnn_fused_gru_cell(*[t.to(DEV) for t in (ig[:, :3 * HID], hg[:, :3 * HID], cx)])
    want_hy, want_ws = gru_ref(ig[:, :3 * HID], hg[:, :3 * HID], cx, None, None)
    close(hy, want_hy.float(), 2e-6, "gru hy")
    close(ws, want_ws.float(), 2e-6, "gru workspace")
    assert_no_fallbacks()


def meta_like(t):
    return (tuple(t.shape), tuple(t.stride()), t.dtype) if t is not None else None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_output_layout_matches_meta(dtype):
    """Sizes, strides and dtypes of every output equal what the ops produce
    on the CPU under FakeTensorMode (the meta functions; for the GRU ops,
    which have none, CUDA's allocation rules written out)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    torch.manual_seed(0)
    ig, hg, cx = torch.randn(B, 4 * HID, dtype=dtype), torch.randn(B, 4 * HID, dtype=dtype), torch.randn(B, HID, dtype=dtype)
    bi, bh = torch.randn(4 * HID, dtype=dtype), torch.randn(4 * HID, dtype=dtype)
    ghy, gcy = torch.randn(B, HID, dtype=dtype), torch.randn(B, HID, dtype=dtype)
    # (op, arguments for the meta function, arguments on neuron): the LSTM
    # meta function fails without biases (it asks None for its device), so
    # the bias-free call is compared with the meta result of the biased one.
    cl = ig.t().contiguous().t()  # column-major: outputs are contiguous anyway
    lstm_args = (ig, hg, cx, bi, bh)
    cases = [
        (torch.ops.aten._thnn_fused_lstm_cell, lstm_args, lstm_args),
        (torch.ops.aten._thnn_fused_lstm_cell, lstm_args, (ig, hg, cx)),
        (torch.ops.aten._thnn_fused_lstm_cell, (cl, hg, cx.t().contiguous().t(), bi, bh),
         (cl, hg, cx.t().contiguous().t(), bi, bh)),
        (torch.ops.aten._thnn_fused_lstm_cell_backward_impl, (ghy, gcy, cx, cx, ig, True), None),
        (torch.ops.aten._thnn_fused_lstm_cell_backward_impl, (None, gcy, cx, cx, ig, False), None),
        (torch.ops.aten._thnn_fused_lstm_cell_backward_impl, (ghy, None, cx, cx, ig, True), None),
    ]
    for op, fake_args, real_args in cases:
        with FakeTensorMode() as mode:
            fake = op(*[mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in fake_args])
        real = op(*[a.to(DEV) if isinstance(a, torch.Tensor) else a for a in (real_args or fake_args)])
        assert [meta_like(t) for t in fake] == [meta_like(t) for t in real], op

    # GRU: no meta function (FakeTensorMode cannot run these ops); CUDA's rules
    ig3, hg3, b3 = ig[:, :3 * HID], hg[:, :3 * HID], bi[:3 * HID]
    hy, ws = torch.ops.aten._thnn_fused_gru_cell(ig3.to(DEV), hg3.to(DEV), cx.t().contiguous().t().to(DEV),
                                                 b3.to(DEV), b3.to(DEV))
    assert meta_like(hy) == ((B, HID), (HID, 1), dtype)
    assert meta_like(ws) == ((B, 5 * HID), (5 * HID, 1), dtype)
    outs = torch.ops.aten._thnn_fused_gru_cell_backward(ghy.to(DEV), ws, True)
    assert [meta_like(t) for t in outs] == [((B, 3 * HID), (3 * HID, 1), dtype)] * 2 + [
        ((B, HID), (HID, 1), dtype)] + [((3 * HID,), (1,), dtype)] * 2
    assert torch.ops.aten._thnn_fused_gru_cell_backward(ghy.to(DEV), ws, False)[3] is None
    assert_no_fallbacks()


def test_empty_batch():
    for cls in (nn.LSTM, nn.GRU):
        rnn = cls(IN, HID).to(DEV)
        out, _ = rnn(torch.randn(T, 0, IN, device=DEV))
        assert out.shape == (T, 0, HID)
    hy, cy, ws = torch.ops.aten._thnn_fused_lstm_cell(*(torch.empty(0, 4 * HID, device=DEV),) * 2,
                                                      torch.empty(0, HID, device=DEV))
    assert hy.shape == (0, HID) and ws.shape == (0, 4 * HID)
    assert_no_fallbacks()


def test_errors():
    lstm = torch.ops.aten._thnn_fused_lstm_cell
    gru = torch.ops.aten._thnn_fused_gru_cell
    g4, c = torch.randn(B, 4 * HID, device=DEV), torch.randn(B, HID, device=DEV)
    with pytest.raises(NotImplementedError, match="support float16, bfloat16, float32 and float64"):
        lstm(g4.int(), g4.int(), c.int())
    with pytest.raises(RuntimeError, match="must have the same shape"):
        lstm(g4, g4[:, :-1], c)
    with pytest.raises(RuntimeError, match="previous state"):
        lstm(g4, g4, c[:, :-1])
    with pytest.raises(RuntimeError, match="given together"):
        lstm(g4, g4, c, torch.randn(4 * HID, device=DEV), None)
    with pytest.raises(RuntimeError, match="input_bias of shape"):
        lstm(g4, g4, c, torch.randn(3, device=DEV), torch.randn(3, device=DEV))
    with pytest.raises(RuntimeError, match="not a multiple of 3"):
        gru(g4[:, :-2], g4[:, :-2], c)
    with pytest.raises(RuntimeError, match="same device"):
        gru(g4[:, :3 * HID], g4[:, :3 * HID].cpu(), c)
    with pytest.raises(RuntimeError, match="workspace of shape"):
        torch.ops.aten._thnn_fused_gru_cell_backward(c, g4, True)
    with pytest.raises(RuntimeError, match="workspace"):
        torch.ops.aten._thnn_fused_lstm_cell_backward_impl(c, c, c, c, g4[:, :-1], True)
    assert_no_fallbacks()


# ---- registration and strict mode -------------------------------------------------------


def test_native_ops_listed():
    ops = torch_neuronx.native_ops()
    for name in FUSED_OPS:
        assert name in ops


def test_no_fallback_in_strict_mode():
    r = run_python("""
import torch, torch.nn as nn, torch_neuronx
from torch.nn.utils.rnn import pack_padded_sequence
torch.manual_seed(0)
for rnn in (nn.LSTM(5, 7, num_layers=2, bidirectional=True, proj_size=3), nn.GRU(5, 7, num_layers=2, bidirectional=True),
            nn.LSTMCell(5, 7), nn.GRUCell(5, 7)):
    rnn = rnn.to("neuron")
    cell = isinstance(rnn, (nn.LSTMCell, nn.GRUCell))
    x = torch.randn(3, 5) if cell else torch.randn(6, 3, 5)
    x = x.to("neuron").requires_grad_()
    out = rnn(x)
    out = out[0] if isinstance(out, tuple) else out
    out.sum().backward()
    if not cell:
        packed = pack_padded_sequence(x, torch.tensor([6, 2, 4]), enforce_sorted=False)
        rnn(packed)[0].data.sum().backward()
torch.neuron.synchronize()
print("fallbacks", torch_neuronx.get_fallback_ops())
""", env={"TORCH_NEURONX_DISABLE_FALLBACK": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "fallbacks []"
