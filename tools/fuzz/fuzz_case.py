"""Runs one case on the CPU and on neuron from identical inputs (torch side).

`build_bases(case)` draws every tensor's values once on the CPU;
`run_side(case, bases, device)` rebuilds the same layout on a device (copy of
the base, then the same view: transpose, step slice, expand, storage offset
or channels_last), calls the op, synchronises (so asynchronous device errors
surface inside the case), runs the backward of sum(out * fixed weights) when
the case asks for it, and returns everything as CPU values.
"""
from __future__ import annotations

import base64
import math
import operator
import random
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F

DEVICE = "neuron"

# ---- values ----------------------------------------------------------------------------------


def dtype_of(name: str) -> torch.dtype:
    return getattr(torch, name)


def resolve_size(case: dict, s: Any) -> int:
    return case["sizes"][s] if isinstance(s, str) else int(s)


def shape_of(case: dict, desc: dict) -> list[int]:
    return [resolve_size(case, s) for s in desc["shape"]]


def edge_values(dt: torch.dtype) -> list:
    """Edge values seeded into "edge" fills: NaN, infinities, -0.0, a denormal,
    the dtype's limits. float64 (and complex) get values that stay finite in
    float32 products (1e18, 1e-30): the device computes float64 at float32
    precision (documented), and float64 limits would only show that."""
    if dt == torch.bool:
        return [True, False]
    if dt in (torch.float64, torch.complex64, torch.complex128):
        eps = torch.finfo(torch.float32).eps
        return [math.nan, math.inf, -math.inf, -0.0, 0.0, 1e-30, -1e-30, 1e18, -1e18, eps, 1.0, -1.0]
    if dt.is_floating_point:
        fi = torch.finfo(dt)
        return [math.nan, math.inf, -math.inf, -0.0, 0.0, fi.tiny / 4, -fi.tiny, fi.max, fi.min, fi.eps, 1.0, -1.0]
    ii = torch.iinfo(dt)
    return [ii.min, ii.max, 0, 1, -1 if ii.min < 0 else 2, ii.min + 1, ii.max - 1]


def gen_values(case: dict, desc: dict, shape: list[int]) -> torch.Tensor:
    """The values of one tensor (in its base shape), drawn from its own seed."""
    dt = dtype_of(desc["dtype"])
    g = torch.Generator().manual_seed(desc["seed"])
    fill, fa = desc["fill"], desc.get("fill_args", {})
    n = math.prod(shape)
    is_float = dt.is_floating_point or dt.is_complex

    def ints(lo: int, hi: int) -> torch.Tensor:
        if dt == torch.uint8:
            lo = max(lo, 0)
        return torch.randint(lo, hi, shape, generator=g)

    if fill == "index":
        hi = resolve_size(case, fa.get("hi", 1))
        lo = -hi if fa.get("neg") else 0
        x = torch.randint(lo, max(hi, lo + 1), shape, generator=g)
        if fa.get("ignore") and n:
            x = torch.where(torch.rand(shape, generator=g) < 0.2, torch.full_like(x, -100), x)
        return x.to(dt)
    if fill == "mask":
        return (torch.rand(shape, generator=g) < 0.5).to(dt)
    if fill == "distinct":
        perm = torch.randperm(n, generator=g).reshape(shape).to(torch.float64) - n // 2
        x = perm * (0.5 if is_float else 1.0)
        if is_float and n > 2 and torch.rand(1, generator=g).item() < 0.3:
            flat = x.view(-1)
            flat[torch.randint(0, n, (1,), generator=g)] = math.nan
        return x.to(dt)
    if fill == "sorted":
        return torch.randn(shape, generator=g).sort().values.to(dt) if is_float else ints(-5, 6).sort().values.to(dt)
    if fill == "positive":
        return (torch.rand(shape, generator=g) * 2 + 0.1).to(dt) if is_float else ints(1, 5).to(dt)
    if fill == "unit":
        return torch.rand(shape, generator=g).to(dt) if is_float else ints(0, 2).to(dt)
    if fill == "maskrows":
        x = torch.where(torch.rand(shape, generator=g) < 0.2, -math.inf, 0.0)
        if len(shape) >= 1 and n:
            rows = torch.rand(shape[:-1] + [1], generator=g) < 0.3
            x = torch.where(rows, -math.inf, x)
        return x.to(dt)
    if fill == "ints":
        return ints(-3, 4).to(dt) if dt != torch.bool else ints(0, 2).bool()
    # normal / edge
    if dt == torch.bool:
        x = ints(0, 2).bool()
    elif dt.is_complex:
        x = torch.complex(torch.randn(shape, generator=g), torch.randn(shape, generator=g)).to(dt)
    elif is_float:
        x = torch.randn(shape, generator=g).to(dt)
    else:
        x = ints(-5, 6).to(dt)
    if fill == "edge" and n:
        vals = edge_values(dt)
        pick = torch.randint(0, len(vals), shape, generator=g)
        where = torch.rand(shape, generator=g) < 0.3
        table = torch.tensor(vals, dtype=torch.float64 if is_float else torch.int64)
        e = table[pick].to(dt)
        if dt.is_complex:
            e = torch.complex(table[pick].float(), table[torch.randint(0, len(vals), shape, generator=g)].float())
        x = torch.where(where, e.to(dt), x)
    return x


# ---- layouts -------------------------------------------------------------------------------


def base_shape(desc: dict, shape: list[int]) -> tuple[list[int], Any]:
    """(shape of the base tensor, how to view it as `shape`) for a layout."""
    lay = desc["layout"]
    nd = len(shape)
    if lay == "transposed" and nd >= 2:
        return shape[:-2] + [shape[-1], shape[-2]], ("transpose",)
    if lay == "strided" and nd >= 1:
        return shape[:-1] + [shape[-1] * 2], ("step",)
    if lay == "expanded" and nd >= 1:
        r = random.Random(desc["seed"])
        cand = [i for i, s in enumerate(shape) if s != 1]
        if cand:
            dims = [i for i in cand if r.random() < 0.5] or [r.choice(cand)]
            return [1 if i in dims else s for i, s in enumerate(shape)], ("expand", shape)
    if lay == "offset":
        k = 1 + desc["seed"] % 3
        return [math.prod(shape) + k], ("offset", k, shape)
    if lay == "channels_last" and nd == 4:
        return shape, ("channels_last",)
    return shape, ("none",)


def apply_view(b: torch.Tensor, how: tuple) -> torch.Tensor:
    kind = how[0]
    if kind == "transpose":
        return b.transpose(-1, -2)
    if kind == "step":
        return b[..., ::2]
    if kind == "expand":
        return b.expand(how[1])
    if kind == "offset":
        return b[how[1]:].view(how[2])
    if kind == "channels_last":
        return b.contiguous(memory_format=torch.channels_last)
    return b


def view_src(name: str, how: tuple) -> str:
    """Python source of apply_view, for reproducers."""
    kind = how[0]
    if kind == "transpose":
        return f"{name}.transpose(-1, -2)"
    if kind == "step":
        return f"{name}[..., ::2]"
    if kind == "expand":
        return f"{name}.expand({list(how[1])})"
    if kind == "offset":
        return f"{name}[{how[1]}:].view({list(how[2])})"
    if kind == "channels_last":
        return f"{name}.contiguous(memory_format=torch.channels_last)"
    return name


def build_bases(case: dict) -> list[tuple[torch.Tensor, tuple]]:
    """Every tensor's CPU base values and view recipe (drawn once per case)."""
    out = []
    for desc in case["tensors"]:
        bshape, how = base_shape(desc, shape_of(case, desc))
        out.append((gen_values(case, desc, bshape), how))
    return out


def wants_grad(case: dict, desc: dict) -> bool:
    return (case.get("backward", False) and desc["role"] == "in" and not desc.get("cpu")
            and dtype_of(desc["dtype"]).is_floating_point)


# ---- calls -----------------------------------------------------------------------------------


def _setitem(a: torch.Tensor, k: Any, v: Any) -> torch.Tensor:
    a[k] = v
    return a


def resolve_fn(name: str) -> Callable:
    """The callable behind a case's `fn` string."""
    ns, _, attr = name.partition(".")
    if name == "getitem":
        return lambda a, k: a[k]
    if name == "setitem":
        return _setitem
    if name == "getattr":
        return getattr
    if ns == "torch":
        return getattr(torch, attr)
    if ns == "Tensor":
        return lambda self, *a, **k: getattr(self, attr)(*a, **k)
    if ns == "F":
        return getattr(F, attr)
    if ns == "linalg":
        return getattr(torch.linalg, attr)
    if ns == "special":
        return getattr(torch.special, attr)
    if ns == "operator":
        return getattr(operator, attr)
    raise ValueError(f"unknown fn {name}")


def decode(x: Any, tensors: list, case: dict) -> Any:
    """An encoded argument (fuzz_gen.py) as a Python value."""
    if isinstance(x, list):
        return [decode(v, tensors, case) for v in x]
    if not isinstance(x, dict):
        return x
    if "t" in x:
        return tensors[x["t"]]
    if "size" in x:
        return case["sizes"][x["size"]]
    if "f" in x:
        return float(x["f"])
    if "c" in x:
        return complex(decode(x["c"][0], tensors, case), decode(x["c"][1], tensors, case))
    if "dtype" in x:
        return dtype_of(x["dtype"])
    if "tuple" in x:
        return tuple(decode(v, tensors, case) for v in x["tuple"])
    if "slice" in x:
        return slice(*decode(x["slice"], tensors, case))
    if "ellipsis" in x:
        return Ellipsis
    if "mf" in x:
        return getattr(torch, x["mf"])
    raise ValueError(f"cannot decode {x}")


# ---- one side ----------------------------------------------------------------------------------


@dataclass
class Side:
    """What one device produced: forward values or the exception (and at which
    stage: setup / call / sync / copy), then gradients or the backward's exception."""
    exc: tuple[str, str, str] | None = None
    values: dict[str, Any] = field(default_factory=dict)
    bexc: tuple[str, str, str] | None = None
    grads: dict[str, Any] = field(default_factory=dict)
    late: tuple[str, str, str] | None = None


def sync(device: str) -> None:
    if device != "cpu":
        torch.neuron.synchronize()


def flatten(x: Any, name: str, out: dict) -> None:
    if isinstance(x, torch.Tensor):
        out[name] = x
    elif isinstance(x, (tuple, list)) and not isinstance(x, torch.Size):
        if not x:
            out[name] = "empty-sequence"
        for i, v in enumerate(x):
            flatten(v, f"{name}[{i}]", out)
    elif isinstance(x, torch.Size):
        out[name] = list(x)
    elif x is None or isinstance(x, (bool, int, float, complex, str)):
        out[name] = x
    else:
        out[name] = f"<{type(x).__name__}>"


def exc_info(e: BaseException, stage: str) -> tuple[str, str, str]:
    return (type(e).__name__, str(e).split("\n")[0][:300], stage)


def grad_weights(o: torch.Tensor, seed: int) -> torch.Tensor:
    """Fixed output weights for the backward (multiples of 0.5: exact in every float dtype)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(-2, 3, o.shape, generator=g) * 0.5).to(o.dtype)


def to_cpu(v: Any) -> Any:
    return v.detach().to("cpu", copy=True) if isinstance(v, torch.Tensor) else v


TO_F64 = {torch.float16: torch.float64, torch.bfloat16: torch.float64, torch.float32: torch.float64,
          torch.complex64: torch.complex128}
TO_F32 = {torch.float64: torch.float32, torch.complex128: torch.complex64}


def run_side(case: dict, bases: list, device: str, f64: bool = False, f32: bool = False) -> Side:
    """Runs the case on `device`. With `f64`: floating inputs in float64 (the
    accuracy reference); with `f32`: float64 inputs in float32 (the device's
    documented float64 semantics)."""
    cast = TO_F64 if f64 else TO_F32 if f32 else {}
    side = Side()
    try:
        leaves, tensors = [], []
        for desc, (b, how) in zip(case["tensors"], bases):
            t = b.clone()
            if t.dtype in cast:
                t = t.to(cast[t.dtype])
            if device != "cpu" and not desc.get("cpu"):
                t = t.to(device)
            if wants_grad(case, desc):
                t.requires_grad_(True)
                leaves.append(t)
            else:
                leaves.append(None)
            tensors.append(apply_view(t, how))
        sync(device)
    except Exception as e:  # noqa: BLE001
        side.exc = exc_info(e, "setup")
        return side
    fn = resolve_fn(case["fn"])
    stage = "call"
    try:
        kwargs = {k: decode(v, tensors, case) for k, v in case["kwargs"].items()}
        out = fn(*decode(case["args"], tensors, case), **kwargs)
        stage = "sync"
        sync(device)
        stage = "copy"
        vals: dict = {}
        flatten(out, "out", vals)
        for i, t in enumerate(tensors):
            vals[f"in{i}"] = t
        side.values = {k: to_cpu(v) for k, v in vals.items()}
        sync(device)
    except Exception as e:  # noqa: BLE001
        side.exc = exc_info(e, stage)
        side.values = {}
        _drain(device, side)
        return side
    if case.get("backward") and any(lf is not None for lf in leaves):
        stage = "backward"
        try:
            outs: dict = {}
            flatten(out, "out", outs)
            losses = [(o * grad_weights(o, case_seed(case) + k).to(o.device)).sum()
                      for k, o in enumerate(outs.values())
                      if isinstance(o, torch.Tensor) and o.requires_grad and o.is_floating_point()]
            if losses:
                sum(losses).backward()
                stage = "sync"
                sync(device)
                stage = "copy"
                side.grads = {f"grad{i}": to_cpu(lf.grad) for i, lf in enumerate(leaves) if lf is not None}
        except Exception as e:  # noqa: BLE001
            side.bexc = exc_info(e, stage)
            side.grads = {}
            _drain(device, side)
    return side


def _drain(device: str, side: Side) -> None:
    """After an exception: let queued work finish, keeping a late error apart."""
    try:
        sync(device)
    except Exception as e:  # noqa: BLE001
        side.late = exc_info(e, "after-exception")


def case_seed(case: dict) -> int:
    seed, _, idx = case["id"].partition("-")
    try:
        return (int(seed) * 7919 + int(idx.split(".")[0])) % (1 << 31)
    except ValueError:
        return 0


# ---- reproducers ---------------------------------------------------------------------------------


def _lit(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_lit(x) for x in v) + "]"
    if isinstance(v, bool):
        return repr(v)
    if isinstance(v, complex):
        return f"complex({_lit(v.real)}, {_lit(v.imag)})"
    if isinstance(v, float):
        if v != v:
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    return repr(v)


def tensor_src(b: torch.Tensor) -> str:
    """A CPU tensor as self-contained Python source (literal, or base64 bytes when large)."""
    dt = str(b.dtype)
    if b.numel() == 0:
        return f"torch.empty({list(b.shape)}, dtype={dt})"
    if b.numel() <= 64:
        return f"torch.tensor({_lit(b.tolist())}, dtype={dt})"
    raw = base64.b64encode(b.contiguous().view(torch.uint8).numpy().tobytes()).decode()
    return (f"torch.frombuffer(bytearray(base64.b64decode('{raw}')), dtype={dt}).reshape({list(b.shape)})")


def arg_src(x: Any, sizes: dict | None = None) -> str:
    if isinstance(x, list):
        return "[" + ", ".join(arg_src(v, sizes) for v in x) + "]"
    if not isinstance(x, dict):
        return repr(x)
    if "t" in x:
        return f"t{x['t']}"
    if "size" in x:
        return repr((sizes or {}).get(x["size"], x["size"]))
    if "f" in x:
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(x["f"], x["f"])
    if "c" in x:
        return f"complex({arg_src(x['c'][0])}, {arg_src(x['c'][1])})"
    if "dtype" in x:
        return f"torch.{x['dtype']}"
    if "tuple" in x:
        return "(" + "".join(arg_src(v, sizes) + ", " for v in x["tuple"]) + ")"
    if "slice" in x:
        return "slice(" + ", ".join(arg_src(v, sizes) for v in x["slice"]) + ")"
    if "ellipsis" in x:
        return "..."
    if "mf" in x:
        return f"torch.{x['mf']}"
    return repr(x)


def call_src(case: dict) -> str:
    fn = case["fn"]
    args = [arg_src(a, case["sizes"]) for a in case["args"]]
    kw = [f"{k}={arg_src(v, case['sizes'])}" for k, v in case["kwargs"].items()]
    ns, _, attr = fn.partition(".")
    if fn == "getitem":
        return f"{args[0]}[{args[1]}]"
    if fn == "setitem":
        return f"_setitem({args[0]}, {args[1]}, {args[2]})"
    if fn == "getattr":
        return f"{args[0]}.{case['args'][1]}"
    if ns == "Tensor":
        return f"{args[0]}.{attr}({', '.join(args[1:] + kw)})"
    prefix = {"torch": "torch.", "F": "F.", "linalg": "torch.linalg.", "special": "torch.special.",
              "operator": "operator."}[ns]
    return f"{prefix}{attr}({', '.join(args + kw)})"


def repro_src(case: dict, bases: list) -> str:
    """A short self-contained script that runs the case on the CPU and on neuron."""
    lines = [f"# fuzz case {case['id']} ({case['op']})", "import base64, operator, os",
             "os.environ.setdefault('TORCH_NEURONX_KERNEL_THREADS', '1')  # as in the fuzz workers", "import torch",
             "import torch.nn.functional as F", "import torch_neuronx  # noqa: F401",
             "torch.set_num_threads(1)", "nan, inf = float('nan'), float('inf')", ""]
    if case["fn"] == "setitem":
        lines += ["def _setitem(a, k, v):", "    a[k] = v", "    return a", ""]
    for i, (b, _) in enumerate(bases):
        lines.append(f"b{i} = {tensor_src(b)}")
    lines += ["", "def run(dev):"]
    grads = []
    for i, (desc, (_, how)) in enumerate(zip(case["tensors"], bases)):
        src = f"b{i}.clone()" if desc.get("cpu") else f"b{i}.to(dev, copy=True)"
        if wants_grad(case, desc):
            lines.append(f"    l{i} = {src}.requires_grad_()")
            src = f"l{i}"
            grads.append(f"l{i}")
        lines.append(f"    t{i} = {view_src(src, how)}")
    lines.append(f"    out = {call_src(case)}")
    lines.append("    torch.neuron.synchronize()")
    if case.get("backward") and grads:
        lines += ["    outs = out if isinstance(out, (tuple, list)) else (out,)",
                  "    ws = [(torch.randint(-2, 3, o.shape, generator=torch.Generator().manual_seed(%d + k)) * 0.5)"
                  % case_seed(case),
                  "          .to(o.dtype).to(o.device) for k, o in enumerate(outs)]",
                  "    sum((o * w).sum() for o, w in zip(outs, ws) if o.requires_grad and o.is_floating_point())"
                  ".backward()",
                  "    torch.neuron.synchronize()",
                  f"    return out, [{', '.join(g + '.grad' for g in grads)}]"]
    else:
        lines.append("    return out")
    lines += ["", "for dev in ('cpu', 'neuron'):", "    try:", "        print(dev, run(dev))",
              "    except Exception as e:", "        print(dev, 'raises', type(e).__name__, e)"]
    return "\n".join(lines)
