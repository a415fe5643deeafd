"""The benchmark cases of `make bench` (issue 12, section 1): one table.

A case is a name, a family (its section in the report) and a `make(device)`
that builds the inputs on that device and returns the zero-argument call to
time. Both devices get the same inputs (made once on the host from a fixed
seed, then copied) and the same model weights.

`work` is what one call must move or compute, so the report can state each
case as a fraction of the machine's limit:
- limit "bw": bytes, the minimum a single pass needs (every input read once,
  every output written once);
- limit "fp32" / "bf16": floating-point operations (a multiply-add is 2).

Sizes come from `Scale`: the issue's sizes in full mode, fewer and smaller in
quick mode (`make bench QUICK=1`), tiny ones in smoke mode (the test).
Elementwise ops on 16M elements write into a preallocated `out=` tensor so
both sides time the kernel rather than a fresh 64 MB allocation; everything
else is called the way a user writes it.
"""
from __future__ import annotations

import copy
import functools
import os
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

F32, BF16 = torch.float32, torch.bfloat16
DTYPE_NAME = {F32: "f32", BF16: "bf16", torch.int32: "int32"}
LIMIT = {F32: "fp32", BF16: "bf16"}  # the peak a FLOP-bound case of this dtype counts against

# Family names are the report's sections, in this order.
DISPATCH = "dispatch"
ELEMENTWISE = "elementwise"
SMALL_OPS = "optimizer-style ops on many small tensors"
REDUCTIONS = "reductions and norms"
GEMM_SQUARE = "GEMM, square"
GEMM_GPT2 = "GEMM, GPT-2-small shapes"
BMM = "batched attention matmuls"
CONV = "convolution, ResNet-50 layers"
EMBEDDING = "embedding and cross-entropy"
SDPA = "scaled_dot_product_attention"
OPTIMIZER = "AdamW"
MODELS = "model steps"
SWEEP_BW = "sweep: add against size"
SWEEP_BATCH = "sweep: training step against batch size"


@dataclass(frozen=True)
class Scale:
    """Which sizes to run: "full" (the issue's), "quick" or "smoke" (tiny)."""
    mode: str = "full"

    def pick(self, full, quick=None, smoke=None):
        if self.mode == "smoke" and smoke is not None:
            return smoke
        if self.mode in ("quick", "smoke") and quick is not None:
            return quick
        return full


@dataclass
class Case:
    name: str
    family: str
    make: Callable[[str], Callable[[], object]]
    shape: str = ""
    work: float = 0.0
    limit: str | None = None      # "bw", "fp32", "bf16" or None
    series: str | None = None     # a plot's line this case is a point of ...
    x: float | None = None        # ... at this x


# ---- inputs ----------------------------------------------------------------

@functools.lru_cache(maxsize=8)
def _host(shape: tuple, dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(shape, generator=g)
    return t.to(dtype) if dtype.is_floating_point else t.mul(100).to(dtype)


def tensor(dev: str, *shape: int, dtype: torch.dtype = F32, seed: int = 0,
           requires_grad: bool = False) -> torch.Tensor:
    """The same pseudo-random tensor on every device (made once on the host)."""
    return _host(tuple(shape), dtype, seed).to(dev, copy=True).requires_grad_(requires_grad)


def clear_inputs() -> None:
    _host.cache_clear()
    _base_model.cache_clear()


def sync(dev: str) -> None:
    if dev == "neuron":
        torch.neuron.synchronize()


def backward_call(out: torch.Tensor, inputs, seed: int = 9) -> Callable[[], object]:
    """The call that runs only the backward of `out` (graph kept between calls)."""
    grad = tensor(out.device.type, *out.shape, dtype=out.dtype, seed=seed)
    inputs = list(inputs)
    return lambda: torch.autograd.grad(out, inputs, grad, retain_graph=True)


def mb(nbytes: float) -> str:
    return f"{nbytes / 2 ** 20:.0f} MiB"


def elems(n: int) -> str:
    return f"{n >> 20}M" if n >= 1 << 20 and n % (1 << 20) == 0 else (f"{n >> 10}k" if n % 1024 == 0 else str(n))


# ---- dispatch ----------------------------------------------------------------

def dispatch_cases(s: Scale) -> list[Case]:
    def add(dev):
        a, b = tensor(dev, 1), tensor(dev, 1, seed=1)
        return lambda: a + b

    def add_backward(dev):
        a, b = tensor(dev, 1, requires_grad=True), tensor(dev, 1, seed=1)
        return lambda: (a + b).sum().backward()

    def chain(dev):
        x0, y = tensor(dev, 16), tensor(dev, 16, seed=1)

        def run():
            x = x0
            for _ in range(25):  # 4 ops a round: tensor and Python-scalar operands
                x = torch.relu(x.mul(y).add(y, alpha=-1).mul(1.0001))
            return x
        return run

    def item(dev):
        a, b = tensor(dev, 1), tensor(dev, 1, seed=1)
        return lambda: (a + b).item()

    return [
        Case("add, 1 element", DISPATCH, add, "1"),
        Case("add + backward, 1 element (autograd)", DISPATCH, add_backward, "1"),
        Case("chain of 100 small ops", DISPATCH, chain, "16"),
        Case(".item() round trip (add, then read)", DISPATCH, item, "1"),
    ]


# ---- elementwise ---------------------------------------------------------------

def elementwise_cases(s: Scale) -> list[Case]:
    side = s.pick(4096, smoke=64)  # 16M elements as a square, so it can be transposed
    n = side * side
    cases = []

    def binary(op, dt_a, dt_b, transposed=False):
        def make(dev):
            a, b = tensor(dev, side, side, dtype=dt_a), tensor(dev, side, side, dtype=dt_b, seed=1)
            b = b.t() if transposed else b
            out = torch.empty(side, side, device=dev, dtype=torch.promote_types(dt_a, dt_b))
            return lambda: op(a, b, out=out)
        return make

    def gelu(dt, transposed=False):
        def make(dev):
            a = tensor(dev, side, side, dtype=dt)
            a = a.t() if transposed else a
            out = torch.empty(side, side, device=dev, dtype=dt)
            return lambda: torch._C._nn.gelu(a, out=out)
        return make

    for dt in (F32, BF16):
        size, name = dt.itemsize, DTYPE_NAME[dt]
        for transposed in (False, True):
            how = "contiguous" if not transposed else "one operand transposed"
            suffix = "" if not transposed else ", transposed"
            shape = f"{elems(n)} {how}"
            two_in, one_in = 3 * size * n, 2 * size * n  # bytes: inputs and the output
            cases += [
                Case(f"add {name}{suffix}", ELEMENTWISE, binary(torch.add, dt, dt, transposed), shape, two_in, "bw"),
                Case(f"mul {name}{suffix}", ELEMENTWISE, binary(torch.mul, dt, dt, transposed), shape, two_in, "bw"),
                Case(f"gelu {name}{suffix}", ELEMENTWISE, gelu(dt, transposed), shape, one_in, "bw"),
            ]
    cases += [
        Case("add f32 + bf16 -> f32", ELEMENTWISE, binary(torch.add, F32, BF16), f"{elems(n)}", 10 * n, "bw"),
        Case("add int32 + f32 -> f32", ELEMENTWISE, binary(torch.add, torch.int32, F32), f"{elems(n)}", 12 * n, "bw"),
    ]
    return cases


def small_ops_cases(s: Scale) -> list[Case]:
    count, numel = s.pick(200, smoke=4), s.pick(4096, smoke=64)
    # The lists fit in cache and each op is a few microseconds: these are
    # dispatch-bound, so they carry no bandwidth limit.
    shape = f"{count} x {numel}"

    def make_lists(dev):
        return ([tensor(dev, numel, seed=i) for i in range(count)],
                [tensor(dev, numel, seed=count + i) for i in range(count)],
                [tensor(dev, numel, seed=2 * count + i).abs_().add_(1) for i in range(count)])

    def loop(op):
        def make(dev):
            ts, gs, ds = make_lists(dev)

            def run():
                for t, g, d in zip(ts, gs, ds):
                    op(t, g, d)
            return run
        return make

    def foreach(op):
        def make(dev):
            ts, gs, ds = make_lists(dev)
            return lambda: op(ts, gs, ds)
        return make

    # mul by 0.9999 (weight decay) and small increments: values stay normal
    # over any number of timed calls.
    return [
        Case("add_ (a loop of tensors)", SMALL_OPS, loop(lambda t, g, d: t.add_(g, alpha=1e-3)), shape),
        Case("mul_ (a loop of tensors)", SMALL_OPS, loop(lambda t, g, d: t.mul_(0.9999)), shape),
        Case("addcdiv_ (a loop of tensors)", SMALL_OPS, loop(lambda t, g, d: t.addcdiv_(g, d, value=-1e-3)), shape),
        Case("addcmul_ (a loop of tensors)", SMALL_OPS, loop(lambda t, g, d: t.addcmul_(g, d, value=1e-3)), shape),
        Case("_foreach_add_", SMALL_OPS, foreach(lambda t, g, d: torch._foreach_add_(t, g, alpha=1e-3)), shape),
        Case("_foreach_mul_", SMALL_OPS, foreach(lambda t, g, d: torch._foreach_mul_(t, 0.9999)), shape),
        Case("_foreach_addcdiv_", SMALL_OPS, foreach(lambda t, g, d: torch._foreach_addcdiv_(t, g, d, value=-1e-3)),
             shape),
        Case("_foreach_addcmul_", SMALL_OPS, foreach(lambda t, g, d: torch._foreach_addcmul_(t, g, d, value=1e-3)),
             shape),
    ]


# ---- reductions ----------------------------------------------------------------

def reduction_cases(s: Scale) -> list[Case]:
    side = s.pick(4096, smoke=64)
    rows, width = s.pick(8192, smoke=64), s.pick(1024, smoke=32)
    n, m = side * side, rows * width

    def reduce(op):
        def make(dev):
            x = tensor(dev, side, side)
            return lambda: op(x)
        return make

    def row_op(fn, grads, backward=False):
        """`grads`: which of x, w (weight), b (bias) `fn` uses and the backward differentiates."""
        def make(dev):
            x = tensor(dev, rows, width, requires_grad=backward)
            w = tensor(dev, width, seed=2).add_(1).requires_grad_(backward)
            b = tensor(dev, width, seed=3).requires_grad_(backward)
            if not backward:
                return lambda: fn(x, w, b)
            return backward_call(fn(x, w, b), [t for name, t in zip("xwb", (x, w, b)) if name in grads])
        return make

    ops = [
        ("softmax", lambda x, w, b: F.softmax(x, dim=-1), "x"),
        ("log_softmax", lambda x, w, b: F.log_softmax(x, dim=-1), "x"),
        ("layer_norm", lambda x, w, b: F.layer_norm(x, (width,), w, b), "xwb"),
        ("rms_norm", lambda x, w, b: F.rms_norm(x, (width,), w), "xw"),
    ]

    square, wide = f"{side}x{side}", f"{rows}x{width}"
    cases = [
        Case("sum, all elements", REDUCTIONS, reduce(lambda x: x.sum()), square, 4 * n, "bw"),
        Case("sum dim=1 (along rows)", REDUCTIONS, reduce(lambda x: x.sum(dim=1)), square, 4 * n, "bw"),
        Case("sum dim=0 (down columns)", REDUCTIONS, reduce(lambda x: x.sum(dim=0)), square, 4 * n, "bw"),
        Case("amax dim=1 (along rows)", REDUCTIONS, reduce(lambda x: x.amax(dim=1)), square, 4 * n, "bw"),
        Case("amax dim=0 (down columns)", REDUCTIONS, reduce(lambda x: x.amax(dim=0)), square, 4 * n, "bw"),
    ]
    for name, fn, grads in ops:
        # forward: read x, write y; backward: read x (or y) and dy, write dx.
        cases += [
            Case(f"{name} forward", REDUCTIONS, row_op(fn, grads), wide, 2 * 4 * m, "bw"),
            Case(f"{name} backward", REDUCTIONS, row_op(fn, grads, backward=True), wide, 3 * 4 * m, "bw"),
        ]
    return cases


# ---- GEMM ------------------------------------------------------------------------

def gemm_square_cases(s: Scale) -> list[Case]:
    sizes = s.pick([256, 512, 1024, 2048, 4096], quick=[256, 512, 1024, 2048], smoke=[16, 32])
    cases = []

    def mm(n, dt):
        def make(dev):
            a, b = tensor(dev, n, n, dtype=dt), tensor(dev, n, n, dtype=dt, seed=1)
            return lambda: a @ b
        return make

    for dt in (F32, BF16):
        for n in sizes:
            name = DTYPE_NAME[dt]
            cases.append(Case(f"mm {name} {n}", GEMM_SQUARE, mm(n, dt), f"{n}^3", 2.0 * n ** 3, LIMIT[dt],
                              series=f"mm {name}", x=n))
    return cases


def gemm_gpt2_cases(s: Scale) -> list[Case]:
    """nn.Linear's three GEMMs per layer of GPT-2 small at 1024 tokens (batch
    8 x 128): forward x @ W.t(), input gradient dy @ W, weight gradient
    dy.t() @ x; quick mode runs 256 tokens."""
    tokens = s.pick(1024, quick=256, smoke=16)
    vocab = s.pick(50257, smoke=100)
    d = s.pick(768, smoke=32)
    layers = [("qkv", d, 3 * d), ("attention out", d, d), ("MLP up", d, 4 * d), ("MLP down", 4 * d, d),
              ("vocabulary", d, vocab)]
    cases = []

    def gemm(kind, fan_in, fan_out, dt):
        def make(dev):
            x = tensor(dev, tokens, fan_in, dtype=dt)
            w = tensor(dev, fan_out, fan_in, dtype=dt, seed=1)
            dy = tensor(dev, tokens, fan_out, dtype=dt, seed=2)
            return {"forward": lambda: x @ w.t(),
                    "input grad": lambda: dy @ w,
                    "weight grad": lambda: dy.t() @ x}[kind]
        return make

    forms = {"forward": "x @ W.t()", "input grad": "dy @ W", "weight grad": "dy.t() @ x"}
    for dt in (F32, BF16):
        name = DTYPE_NAME[dt]
        for layer, fan_in, fan_out in layers:
            for kind, form in forms.items():
                m, k, n = {"forward": (tokens, fan_in, fan_out), "input grad": (tokens, fan_out, fan_in),
                           "weight grad": (fan_out, tokens, fan_in)}[kind]
                cases.append(Case(f"{layer} {kind} {name}", GEMM_GPT2, gemm(kind, fan_in, fan_out, dt),
                                  f"{form}: {m}x{k} @ {k}x{n}", 2.0 * m * k * n, LIMIT[dt]))
    return cases


def bmm_cases(s: Scale) -> list[Case]:
    bh, seq, hd = s.pick(96, smoke=4), s.pick(128, smoke=16), s.pick(64, smoke=8)
    cases = []

    def make_scores(dt):
        def make(dev):
            q, k = tensor(dev, bh, seq, hd, dtype=dt), tensor(dev, bh, seq, hd, dtype=dt, seed=1)
            return lambda: q @ k.transpose(-2, -1)
        return make

    def make_values(dt):
        def make(dev):
            p, v = tensor(dev, bh, seq, seq, dtype=dt), tensor(dev, bh, seq, hd, dtype=dt, seed=1)
            return lambda: p @ v
        return make

    for dt in (F32, BF16):
        name = DTYPE_NAME[dt]
        cases += [
            Case(f"scores q @ k.T {name}", BMM, make_scores(dt), f"{bh} x {seq}x{hd} @ {hd}x{seq}",
                 2.0 * bh * seq * seq * hd, LIMIT[dt]),
            Case(f"values p @ v {name}", BMM, make_values(dt), f"{bh} x {seq}x{seq} @ {seq}x{hd}",
                 2.0 * bh * seq * seq * hd, LIMIT[dt]),
        ]
    return cases


# ---- convolution -----------------------------------------------------------------

def conv_cases(s: Scale) -> list[Case]:
    batch = s.pick(8, quick=4, smoke=1)
    hw = s.pick(56, smoke=8)
    # (label, c_in, c_out, kernel, stride, groups, channels_last)
    shapes = [
        ("1x1 256->64", 256, 64, 1, 1, 1, False),
        ("3x3 64->64", 64, 64, 3, 1, 1, False),
        ("3x3 stride 2 128->128", 128, 128, 3, 2, 1, False),
        ("3x3 depthwise 256", 256, 256, 3, 1, 256, False),
        ("3x3 64->64 channels_last", 64, 64, 3, 1, 1, True),
    ]
    if s.mode == "smoke":
        shapes = [(lbl, min(ci, 8), min(co, 8), k, st, min(g, 8), cl) for lbl, ci, co, k, st, g, cl in shapes]
    cases = []

    def conv(ci, co, k, stride, groups, channels_last, kind):
        def make(dev):
            fmt = torch.channels_last if channels_last else torch.contiguous_format
            x = tensor(dev, batch, ci, hw, hw).to(memory_format=fmt).requires_grad_(kind == "input grad")
            w = tensor(dev, co, ci // groups, k, k, seed=1).to(memory_format=fmt).requires_grad_(kind == "weight grad")
            call = lambda: F.conv2d(x, w, stride=stride, padding=k // 2, groups=groups)  # noqa: E731
            if kind == "forward":
                return call
            return backward_call(call(), [x if kind == "input grad" else w])
        return make

    for label, ci, co, k, stride, groups, cl in shapes:
        out_hw = (hw + 2 * (k // 2) - k) // stride + 1
        flops = 2.0 * batch * co * out_hw * out_hw * (ci // groups) * k * k
        depthwise = groups > 1
        for kind in ("forward", "input grad", "weight grad"):
            work, limit = flops, "fp32"
            if depthwise:  # a few FLOPs per byte: bandwidth-bound
                work, limit = 4.0 * (batch * ci * hw * hw + batch * co * out_hw * out_hw), "bw"
            cases.append(Case(f"conv {label} {kind}", CONV, conv(ci, co, k, stride, groups, cl, kind),
                              f"{batch}x{ci}x{hw}x{hw}, k{k} s{stride}" + (f" g{groups}" if depthwise else ""),
                              work, limit))
    return cases


# ---- embedding, cross-entropy, attention ---------------------------------------

def embedding_cases(s: Scale) -> list[Case]:
    vocab, d = s.pick(50257, smoke=100), s.pick(768, smoke=16)
    tokens = s.pick(8 * 1024, smoke=64)      # embedding: 8 x 1024 tokens
    rows = s.pick(8 * 128, smoke=16)         # cross-entropy: GPT-2's 8 x 128 batch of logits

    def embedding(backward):
        def make(dev):
            w = tensor(dev, vocab, d, requires_grad=backward)
            idx = torch.randint(0, vocab, (tokens,), generator=torch.Generator().manual_seed(0)).to(dev)
            if not backward:
                return lambda: F.embedding(idx, w)
            return backward_call(F.embedding(idx, w), [w])
        return make

    def cross_entropy(backward):
        def make(dev):
            logits = tensor(dev, rows, vocab, requires_grad=backward)
            target = torch.randint(0, vocab, (rows,), generator=torch.Generator().manual_seed(0)).to(dev)
            if not backward:
                return lambda: F.cross_entropy(logits, target)
            loss = F.cross_entropy(logits, target)
            return lambda: torch.autograd.grad(loss, [logits], retain_graph=True)
        return make

    gathered = 4.0 * tokens * d
    return [
        Case("embedding forward", EMBEDDING, embedding(False), f"{vocab}x{d}, {tokens} tokens", 2 * gathered, "bw"),
        # the dense gradient is written whole, plus the gathered rows read and added
        Case("embedding backward", EMBEDDING, embedding(True), f"{vocab}x{d}, {tokens} tokens",
             4.0 * vocab * d + 2 * gathered, "bw"),
        Case("cross_entropy forward", EMBEDDING, cross_entropy(False), f"{rows}x{vocab}", 4.0 * rows * vocab, "bw"),
        Case("cross_entropy backward", EMBEDDING, cross_entropy(True), f"{rows}x{vocab}", 8.0 * rows * vocab, "bw"),
    ]


def sdpa_cases(s: Scale) -> list[Case]:
    b, h, L, hd = s.pick(4, smoke=1), s.pick(12, smoke=2), s.pick(512, smoke=32), s.pick(64, smoke=8)
    # Causal: half of QK^T and PV; the backward is four such products.
    fwd_flops = 0.5 * 4.0 * b * h * L * L * hd
    cases = []

    def attention(dt, backward):
        def make(dev):
            q, k, v = (tensor(dev, b, h, L, hd, dtype=dt, seed=i, requires_grad=backward) for i in range(3))
            call = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
            return backward_call(call(), [q, k, v]) if backward else call
        return make

    for dt in (F32, BF16):
        name = DTYPE_NAME[dt]
        shape = f"{b}x{h}x{L}x{hd} causal"
        cases += [
            Case(f"sdpa forward {name}", SDPA, attention(dt, False), shape, fwd_flops, LIMIT[dt]),
            Case(f"sdpa backward {name}", SDPA, attention(dt, True), shape, 2 * fwd_flops, LIMIT[dt]),
        ]
    return cases


# ---- optimizer -------------------------------------------------------------------

def adamw_cases(s: Scale) -> list[Case]:
    count, numel = s.pick(100, quick=10, smoke=4), s.pick(1 << 20, smoke=1024)
    params = count * numel

    def adamw(**kind):
        def make(dev):
            ps = [torch.nn.Parameter(torch.randn(numel, device=dev)) for _ in range(count)]
            for p in ps:
                p.grad = torch.randn(numel, device=dev).mul_(1e-3)
            opt = torch.optim.AdamW(ps, lr=1e-4, **kind)
            return opt.step
        return make

    shape = f"{count} x {elems(numel)} = {params / 1e6:.0f}M params" if params >= 1e6 else f"{count} x {numel}"
    # read param, grad, both moments; write param and both moments
    work = 28.0 * params
    return [
        Case("AdamW per-tensor (foreach=False)", OPTIMIZER, adamw(foreach=False), shape, work, "bw"),
        Case("AdamW foreach", OPTIMIZER, adamw(foreach=True), shape, work, "bw"),
        Case("AdamW fused", OPTIMIZER, adamw(fused=True), shape, work, "bw"),
    ]


# ---- models --------------------------------------------------------------------

class BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.down = None
        if stride != 1 or c_in != c_out:
            self.down = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (x if self.down is None else self.down(x)))


def resnet18(num_classes: int = 1000) -> nn.Module:
    """torchvision's ResNet-18 layout (torchvision is not a dependency)."""
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    c_in = 64
    for c_out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [BasicBlock(c_in, c_out, stride), BasicBlock(c_out, c_out, 1)]
        c_in = c_out
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, num_classes)]
    return nn.Sequential(*layers)


def _transformers():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers
    transformers.logging.set_verbosity_error()
    return transformers


@functools.lru_cache(maxsize=2)
def _base_model(kind: str, config: tuple) -> nn.Module:
    """One host model per configuration; each device gets a deep copy, so both
    start from the same weights and the random init runs once."""
    torch.manual_seed(0)
    if kind == "resnet18":
        return resnet18(*config)
    tf = _transformers()
    cfg = dict(config)
    if kind == "gpt2":
        return tf.GPT2LMHeadModel(tf.GPT2Config(**cfg))
    return tf.BertModel(tf.BertConfig(**cfg))


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def gpt2_step(config: tuple, batch: int, seq: int, autocast: bool):
    def make(dev):
        model = copy.deepcopy(_base_model("gpt2", config)).to(dev).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids = torch.randint(0, dict(config)["vocab_size"], (batch, seq), generator=torch.Generator().manual_seed(0))
        ids = ids.to(dev)

        def step():
            with torch.autocast(dev, dtype=BF16, enabled=autocast):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step
    return make


def model_cases(s: Scale) -> list[Case]:
    gpt_batch = s.pick(8, quick=1, smoke=2)
    gpt_seq = s.pick(128, smoke=16)
    gpt = tuple(sorted(dict(n_layer=12, n_embd=768, n_head=12, n_positions=1024, vocab_size=50257).items()))
    if s.mode == "smoke":
        gpt = tuple(sorted(dict(n_layer=1, n_embd=32, n_head=2, n_positions=32, vocab_size=100).items()))
    gpt_params = 124.4e6 if s.mode != "smoke" else 10e3  # GPT-2 small (embeddings tied)
    gpt_flops = 6.0 * gpt_params * gpt_batch * gpt_seq   # forward + backward, about

    res_batch, res_hw = s.pick(16, quick=4, smoke=2), s.pick(224, smoke=32)
    res_flops = 3 * 2 * 1.82e9 * res_batch * (res_hw / 224) ** 2  # 1.82 GMAC per 224^2 image, x3 for training

    def resnet_step(dev):
        model = copy.deepcopy(_base_model("resnet18", (1000,))).to(dev).train()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = tensor(dev, res_batch, 3, res_hw, res_hw)
        y = torch.randint(0, 1000, (res_batch,), generator=torch.Generator().manual_seed(0)).to(dev)

        def step():
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    bert_batch, bert_seq = s.pick(8, quick=2, smoke=2), s.pick(128, smoke=16)
    bert = () if s.mode != "smoke" else tuple(sorted(dict(
        num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64, vocab_size=100).items()))
    bert_flops = 2.0 * (85e6 if s.mode != "smoke" else 25e3) * bert_batch * bert_seq  # encoder weights only

    def bert_inference(dev):
        model = copy.deepcopy(_base_model("bert", bert)).to(dev).eval()
        vocab = model.config.vocab_size
        ids = torch.randint(0, vocab, (bert_batch, bert_seq), generator=torch.Generator().manual_seed(0)).to(dev)

        def forward():
            with torch.no_grad():
                return model(input_ids=ids).last_hidden_state
        return forward

    return [
        Case("GPT-2 small training step f32", MODELS, gpt2_step(gpt, gpt_batch, gpt_seq, False),
             f"batch {gpt_batch}x{gpt_seq}, AdamW", gpt_flops, "fp32"),
        Case("GPT-2 small training step bf16 autocast", MODELS, gpt2_step(gpt, gpt_batch, gpt_seq, True),
             f"batch {gpt_batch}x{gpt_seq}, AdamW", gpt_flops, "bf16"),
        Case("ResNet-18 training step f32", MODELS, resnet_step, f"batch {res_batch}x3x{res_hw}x{res_hw}, SGD",
             res_flops, "fp32"),
        Case("BERT-base inference f32", MODELS, bert_inference, f"batch {bert_batch}x{bert_seq}", bert_flops, "fp32"),
    ]


# ---- sweeps (the plots) ------------------------------------------------------------

def sweep_cases(s: Scale) -> list[Case]:
    sizes = s.pick([1 << k for k in range(14, 25, 2)], quick=[1 << 16, 1 << 20, 1 << 24], smoke=[1 << 10, 1 << 12])

    def add(n):
        def make(dev):
            a, b = tensor(dev, n), tensor(dev, n, seed=1)
            out = torch.empty(n, device=dev)
            return lambda: torch.add(a, b, out=out)
        return make

    cases = [Case(f"add f32 {elems(n)}", SWEEP_BW, add(n), f"{elems(n)} ({mb(12 * n)} moved)", 12.0 * n, "bw",
                  series="add f32", x=12.0 * n) for n in sizes]

    # A small GPT (4 layers, 256 wide) so the sweep stays cheap.
    small = tuple(sorted(dict(n_layer=4, n_embd=256, n_head=4, n_positions=128, vocab_size=8192).items()))
    seq = s.pick(128, smoke=16)
    if s.mode == "smoke":
        small = tuple(sorted(dict(n_layer=1, n_embd=32, n_head=2, n_positions=32, vocab_size=100).items()))
    for batch in s.pick([1, 2, 4, 8], smoke=[1, 2]):
        cases.append(Case(f"small GPT training step, batch {batch}", SWEEP_BATCH, gpt2_step(small, batch, seq, False),
                          f"4 layers, 256 wide, {batch}x{seq} tokens", series="small GPT step", x=batch))
    return cases


def all_cases(s: Scale) -> list[Case]:
    """Every case, in report order."""
    return [c for family in (dispatch_cases, elementwise_cases, small_ops_cases, reduction_cases, gemm_square_cases,
                             gemm_gpt2_cases, bmm_cases, conv_cases, embedding_cases, sdpa_cases, adamw_cases,
                             model_cases, sweep_cases)
            for c in family(s)]


# Run again in subprocesses on 1 and on 2 threads for the thread-scaling plot.
THREAD_SCALING = ["mm f32 1024", "add f32", "softmax forward", "layer_norm backward", "conv 3x3 64->64 forward"]
