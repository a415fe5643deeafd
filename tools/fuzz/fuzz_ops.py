"""The fuzzer's op table: every entry drives one public torch API (which
dispatches to the neuron overloads listed by ``torch_neuronx.native_ops()``)
with random dtypes, shapes, layouts, scalars and values.

An entry is ``Op(name, family, gen)``; ``gen(g)`` draws the call through the
case builder `g` (fuzz_gen.G) and returns ``(fn, args, kwargs)``. `make_case`
turns one draw into a case dict (format in fuzz_gen.py). No torch import here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from fuzz_gen import ALL, FLOAT, INT, REAL, G, fnum

Call = tuple[str, list, dict]


@dataclass(frozen=True)
class Op:
    name: str
    family: str
    gen: Callable[[G], Call]
    diff: bool = True       # backward compared (floating inputs, functional calls)
    acc: bool = False       # accumulates many terms: atol scales with |ref|
    ties: bool = False      # index outputs compared through the values they select


OPS: list[Op] = []


def op(name: str, family: str, diff: bool = True, acc: bool = False,
       ties: bool = False) -> Callable[[Callable[[G], Call]], Callable[[G], Call]]:
    """Registers a generator in OPS under `name` (decorator)."""
    def deco(gen: Callable[[G], Call]) -> Callable[[G], Call]:
        OPS.append(Op(name, family, gen, diff, acc, ties))
        return gen
    return deco


def bcast(*shapes: list) -> list:
    """Symbolic broadcast of shapes made of size names and ints."""
    nd = max((len(s) for s in shapes), default=0)
    out: list = []
    for i in range(nd):
        cur: Any = 1
        for s in shapes:
            j = len(s) - nd + i
            if j >= 0 and s[j] != 1:
                cur = s[j]
        out.append(cur)
    return out


def shape_of(g: G, x: Any) -> list:
    return g.tensors[x["t"]]["shape"] if isinstance(x, dict) and "t" in x else []


def variant(g: G, inplace: bool = True, out: bool = True, method: bool = True) -> str:
    roll = g.r.random()
    if inplace and roll < 0.2:
        return "inplace"
    if out and roll < 0.38:
        return "out"
    if method and roll < 0.5:
        return "method"
    return "functional"


def finish(g: G, name: str, v: str, args: list, kwargs: dict, out_shape: list, out_dtype: str) -> Call:
    if v == "inplace":
        return f"Tensor.{name}_", args, kwargs
    if v == "out":
        kwargs["out"] = g.out(out_shape, out_dtype if g.p(0.7) else g.dtype(ALL, 0))
        return f"torch.{name}", args, kwargs
    if v == "method":
        return f"Tensor.{name}", args, kwargs
    return f"torch.{name}", args, kwargs


# ---- elementwise: binary ------------------------------------------------------------

BINARY = {
    "add": REAL + ["bool", "complex64"], "sub": REAL + ["complex64"], "mul": ALL, "div": ALL,
    "floor_divide": REAL, "remainder": REAL, "fmod": REAL, "pow": ALL, "atan2": FLOAT,
    "maximum": REAL + ["bool"], "minimum": REAL + ["bool"], "fmax": FLOAT, "fmin": FLOAT,
    "eq": ALL, "ne": ALL, "lt": REAL, "le": REAL, "gt": REAL, "ge": REAL,
    "logical_and": ALL, "logical_or": ALL, "logical_xor": ALL,
    "bitwise_and": INT + ["bool"], "bitwise_or": INT + ["bool"], "bitwise_xor": INT + ["bool"],
    "bitwise_left_shift": INT, "bitwise_right_shift": INT,
    "hypot": FLOAT, "copysign": FLOAT, "logaddexp": FLOAT, "logaddexp2": FLOAT, "xlogy": FLOAT,
    "nextafter": FLOAT, "heaviside": FLOAT,
}


NO_INPLACE_BINARY = {"maximum", "minimum", "fmax", "fmin", "logaddexp", "logaddexp2"}
TENSOR_ONLY = {"maximum", "minimum", "fmax", "fmin", "atan2", "hypot", "logaddexp", "logaddexp2", "nextafter",
               "heaviside", "logical_and", "logical_or", "logical_xor"}


def _binary(name: str, pool: list[str]) -> None:
    def gen(g: G) -> Call:
        v = variant(g, inplace=name not in NO_INPLACE_BINARY)
        dt = g.dtype(pool)
        shape = g.shape()
        a = g.t(shape, dt, inplace=v == "inplace")
        b = g.operand(shape, dt, py=name not in TENSOR_ONLY)
        kwargs: dict = {}
        if name in ("add", "sub") and g.p(0.3):
            kwargs["alpha"] = g.py_scalar(g.pick(["int", "float", "bool"]))
        if name == "div" and g.p(0.5):
            kwargs["rounding_mode"] = g.pick(["trunc", "floor"])
        if name == "pow" and v == "functional" and g.p(0.15):
            return "torch.pow", [g.py_scalar(g.scalar_kind(dt)), a], {}
        return finish(g, name, v, [a, b], kwargs, bcast(shape, shape_of(g, b)), dt)
    op(name, "binary", diff=name in ("add", "sub", "mul", "div", "pow", "atan2", "maximum", "minimum",
                                      "fmax", "fmin", "hypot", "logaddexp", "logaddexp2", "xlogy"))(gen)


for _n, _p in BINARY.items():
    _binary(_n, _p)

OPERATORS = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and_", "or_", "xor", "lshift", "rshift",
             "iadd", "imul", "ifloordiv"]


@op("operator", "binary")
def _operator(g: G) -> Call:
    name = g.pick(OPERATORS)
    dt = g.dtype(ALL, wild=0.0)
    shape = g.shape()
    a = g.t(shape, dt, inplace=name.startswith("i"))
    b = g.operand(shape, dt)
    if not name.startswith("i") and g.p(0.3) and not isinstance(b, dict):
        return f"operator.{name}", [b, a], {}
    return f"operator.{name}", [a, b], {}


# ---- elementwise: unary ----------------------------------------------------------------

UNARY = {
    "abs": REAL + ["complex64"], "neg": REAL + ["complex64"], "exp": FLOAT + ["complex64"], "exp2": FLOAT,
    "expm1": FLOAT, "log": FLOAT + ["complex64"], "log2": FLOAT, "log10": FLOAT, "log1p": FLOAT,
    "sqrt": FLOAT + ["complex64"], "rsqrt": FLOAT, "sin": FLOAT, "cos": FLOAT, "tan": FLOAT, "asin": FLOAT,
    "acos": FLOAT, "atan": FLOAT, "sinh": FLOAT, "cosh": FLOAT, "tanh": FLOAT + ["complex64"], "asinh": FLOAT,
    "acosh": FLOAT, "atanh": FLOAT, "sigmoid": FLOAT, "erf": FLOAT, "erfc": FLOAT, "erfinv": FLOAT,
    "floor": REAL, "ceil": REAL, "round": REAL, "trunc": REAL, "frac": FLOAT, "sign": REAL, "sgn": REAL + ["complex64"],
    "reciprocal": FLOAT, "square": REAL, "isnan": ALL, "isinf": ALL, "isfinite": ALL, "signbit": REAL,
    "logical_not": ALL, "bitwise_not": INT + ["bool"], "nan_to_num": FLOAT, "relu": REAL, "lgamma": FLOAT,
    "digamma": FLOAT, "angle": FLOAT + ["complex64"], "positive": REAL, "i0": FLOAT, "sinc": FLOAT,
    "deg2rad": FLOAT, "rad2deg": FLOAT, "logit": FLOAT, "conj_physical": ALL,
}
NO_INPLACE = {"isnan", "isinf", "isfinite", "signbit", "angle", "positive", "conj_physical"}
NO_OUT = {"isnan", "isinf", "isfinite", "positive", "relu"}


def _unary(name: str, pool: list[str]) -> None:
    def gen(g: G) -> Call:
        v = variant(g, inplace=name not in NO_INPLACE, out=name not in NO_OUT)
        dt = g.dtype(pool)
        shape = g.shape()
        a = g.t(shape, dt, inplace=v == "inplace")
        kwargs: dict = {}
        if name == "round" and g.p(0.3):
            kwargs["decimals"] = g.pick([1, 2, -1])
        if name == "nan_to_num" and g.p(0.5):
            kwargs.update(nan=g.pick([0.0, 1.5]), posinf=g.pick([None, 1e10]), neginf=g.pick([None, -3.0]))
        if name == "logit" and g.p(0.4):
            kwargs["eps"] = g.pick([1e-6, 0.1])
        return finish(g, name, v, [a], kwargs, shape, dt)
    op(name, "unary", diff=name not in {"isnan", "isinf", "isfinite", "signbit", "logical_not", "bitwise_not",
                                        "floor", "ceil", "round", "trunc", "sign"})(gen)


for _n, _p in UNARY.items():
    _unary(_n, _p)

ACTIVATIONS = ["gelu", "silu", "mish", "softplus", "elu", "selu", "celu", "leaky_relu", "hardtanh", "hardswish",
               "hardsigmoid", "relu6", "logsigmoid", "softsign", "tanhshrink", "softshrink", "hardshrink", "glu",
               "threshold", "prelu", "rrelu_eval"]


@op("activation", "unary")
def _activation(g: G) -> Call:
    name = g.pick(ACTIVATIONS)
    dt = g.dtype(FLOAT)
    shape = g.shape()
    a = g.t(shape, dt)
    kw: dict = {}
    if name == "gelu" and g.p(0.5):
        kw["approximate"] = "tanh"
    if name == "softplus" and g.p(0.5):
        kw.update(beta=g.pick([0.5, 2.0]), threshold=g.pick([1.0, 20.0]))
    if name in ("elu", "celu") and g.p(0.5):
        kw["alpha"] = g.pick([0.5, 2.0])
    if name == "leaky_relu" and g.p(0.5):
        kw["negative_slope"] = g.pick([0.2, -0.5])
    if name == "hardtanh" and g.p(0.5):
        kw.update(min_val=g.pick([-2.0, 0.5]), max_val=g.pick([1.0, 3.0]))
    if name in ("softshrink", "hardshrink") and g.p(0.5):
        kw["lambd"] = g.pick([0.0, 1.0])
    if name == "glu":
        return "F.glu", [a], {"dim": g.dim(len(shape))}
    if name == "threshold":
        return "F.threshold", [a, g.pick([0.0, 0.5]), g.pick([-1.0, 2.0])], {}
    if name == "prelu":
        c = shape[1] if len(shape) > 1 and g.p(0.6) else 1
        return "F.prelu", [a, g.t([c], dt)], {}
    if name == "rrelu_eval":
        return "F.rrelu", [a], {"training": False}
    if g.p(0.15) and name in ("silu", "relu6", "hardswish", "hardsigmoid", "elu", "leaky_relu", "hardtanh", "selu",
                              "celu", "mish"):
        kw["inplace"] = True
    return f"F.{name}", [a], kw


# ---- elementwise: ternary and scalar-taking -----------------------------------------------

@op("where", "ternary")
def _where(g: G) -> Call:
    shape = g.shape()
    dt = g.dtype(ALL, wild=0.0)
    c = g.t(g.bshape(shape), "bool" if g.p(0.9) else g.dtype(ALL, 0), fill="mask")
    a = g.t(shape, dt) if g.p(0.7) else g.operand(shape, dt)
    b = g.operand(shape, dt)
    if g.p(0.1):
        return "torch.where", [c], {}
    if g.p(0.15):
        return "torch.where", [c, a, b], {"out": g.out(bcast(shape, shape_of(g, b)), dt)}
    return "torch.where", [c, a, b], {}


@op("clamp", "ternary")
def _clamp(g: G) -> Call:
    v = variant(g)
    dt = g.dtype(REAL + ["bool"], wild=0.05)
    shape = g.shape()
    a = g.t(shape, dt, inplace=v == "inplace")

    def bound() -> Any:
        roll = g.r.random()
        if roll < 0.2:
            return None
        if roll < 0.7:
            return g.py_scalar(g.scalar_kind(dt))
        if roll < 0.8:
            return g.t([], g.dtype([dt], 0.4), cpu=True)
        return g.t(g.bshape(shape), g.dtype([dt], 0.3))
    lo, hi = bound(), bound()
    if lo is None and hi is None:
        lo = g.py_scalar(g.scalar_kind(dt))
    if g.p(0.2):
        name = g.pick(["clamp_min", "clamp_max"])
        return finish(g, name, v, [a, lo if lo is not None else hi], {}, shape, dt)
    return finish(g, "clamp", v, [a], {"min": lo, "max": hi}, shape, dt)


@op("lerp", "ternary")
def _lerp(g: G) -> Call:
    v = variant(g)
    dt = g.dtype(FLOAT)
    shape = g.shape()
    a = g.t(shape, dt, inplace=v == "inplace")
    b = g.t(g.bshape(shape), dt if g.p(0.9) else g.dtype(FLOAT, 0))
    w = g.py_scalar("float") if g.p(0.5) else g.t(g.bshape(shape), dt)
    return finish(g, "lerp", v, [a, b, w], {}, shape, dt)


@op("addcmul", "ternary")
def _addcmul(g: G) -> Call:
    name = g.pick(["addcmul", "addcdiv"])
    v = variant(g)
    dt = g.dtype(FLOAT + INT)
    shape = g.shape()
    a = g.t(shape, dt, inplace=v == "inplace")
    b, c = g.t(g.bshape(shape), dt), g.t(g.bshape(shape), dt if g.p(0.9) else g.dtype(ALL, 0))
    kw = {"value": g.py_scalar(g.scalar_kind(dt))} if g.p(0.5) else {}
    return finish(g, name, v, [a, b, c], kw, shape, dt)


@op("fill_", "scalar", diff=False)
def _fill(g: G) -> Call:
    dt = g.dtype(ALL, wild=0.0)
    a = g.t(g.shape(), dt, inplace=True)
    roll = g.r.random()
    if roll < 0.1:
        return "Tensor.zero_", [a], {}
    val = g.py_scalar(g.scalar_kind(dt)) if roll < 0.8 else g.t([], g.dtype(ALL, 0), cpu=g.p(0.6))
    return "Tensor.fill_", [a, val], {}


@op("masked_fill", "index")
def _masked_fill(g: G) -> Call:
    dt = g.dtype(ALL, wild=0.0)
    shape = g.shape()
    inplace = g.p(0.4)
    a = g.t(shape, dt, inplace=inplace)
    m = g.t(g.bshape(shape), "bool" if g.p(0.92) else "uint8", fill="mask")
    val = g.py_scalar(g.scalar_kind(dt)) if g.p(0.7) else g.t([], g.dtype([dt], 0.4), cpu=g.p(0.5))
    return ("Tensor.masked_fill_" if inplace else "torch.masked_fill"), [a, m, val], {}


@op("copy_", "copy", diff=False)
def _copy(g: G) -> Call:
    shape = g.shape()
    dst_dt, src_dt = g.dtype(ALL, 0), g.dtype(ALL, 0)
    dst = g.t(shape, dst_dt, inplace=True, fill="ints")
    fill = "normal" if (dst_dt in INT and src_dt in FLOAT) else None  # float->int of nan/inf is undefined
    src = g.t(g.bshape(shape, wrong=0.03), src_dt, fill=fill)
    return "Tensor.copy_", [dst, src], {}


@op("to", "copy")
def _to(g: G) -> Call:
    src_dt, dst_dt = g.dtype(ALL, 0), g.dtype(ALL, 0)
    fill = "normal" if (dst_dt in INT + ["bool"] and src_dt in FLOAT + ["complex64"]) else None
    a = g.t(g.shape(), src_dt, fill=fill)
    roll = g.r.random()
    if roll < 0.6:
        return "Tensor.to", [a, {"dtype": dst_dt}], {}
    if roll < 0.8:
        return "Tensor.clone", [a], ({"memory_format": {"mf": "contiguous_format"}} if g.p(0.5) else {})
    return "Tensor.contiguous", [a], {}


@op("complex", "complex")
def _complex(g: G) -> Call:
    name = g.pick(["complex", "polar", "view_as_real", "real", "imag", "conj", "abs"])
    shape = g.shape()
    if name in ("complex", "polar"):
        dt = g.dtype(FLOAT, wild=0.1)
        a = g.t(shape, dt)
        b = g.t(g.bshape(shape), dt) if g.p(0.85) else g.t([], dt, cpu=True)
        return f"torch.{name}", [a, b], {}
    a = g.t(shape, "complex64")
    return f"torch.{name}", [a], {}


# ---- reductions and scans -------------------------------------------------------------

REDUCE = {
    "sum": ALL, "mean": FLOAT + ["complex64"], "prod": REAL + ["bool"], "amax": REAL + ["bool"],
    "amin": REAL + ["bool"], "all": ALL, "any": ALL, "var": FLOAT, "std": FLOAT, "logsumexp": FLOAT + INT,
    "nansum": REAL, "nanmean": FLOAT, "count_nonzero": ALL, "max": REAL + ["bool"], "min": REAL + ["bool"],
    "argmax": REAL, "argmin": REAL, "median": REAL, "nanmedian": REAL, "mode": REAL, "aminmax": REAL,
    "var_mean": FLOAT, "std_mean": FLOAT,
}
TAKES_DTYPE = {"sum", "mean", "prod", "nansum", "nanmean"}
ONE_DIM = {"max", "min", "argmax", "argmin", "median", "nanmedian", "mode", "aminmax"}
TIES_OPS = {"max", "min", "argmax", "argmin", "median", "nanmedian", "mode"}


def _reduce(name: str, pool: list[str]) -> None:
    def gen(g: G) -> Call:
        dt = g.dtype(pool)
        shape = g.shape()
        nd = len(shape)
        fill = "distinct" if name in TIES_OPS and g.p(0.7) else None
        a = g.t(shape, dt, fill=fill)
        kw: dict = {}
        if name in ONE_DIM:
            if name in ("max", "min", "median", "nanmedian", "argmax", "argmin") and g.p(0.25):
                return f"torch.{name}", [a], {}
            kw["dim"] = g.dim(nd)
        elif name == "count_nonzero":
            d = g.dims(nd)
            if d is not None:
                kw["dim"] = d
            return "torch.count_nonzero", [a], kw
        elif name == "prod":
            if g.p(0.6):
                kw["dim"] = g.dim(nd)
        else:
            d = g.dims(nd)
            if d is not None or name in ("logsumexp",):
                kw["dim"] = d if d is not None else g.dim(nd)
        if name in ("var", "std", "var_mean", "std_mean") and g.p(0.5):
            kw["correction"] = g.pick([0, 1, 2])
        if "dim" in kw and name not in ("mode",) and g.p(0.4):
            kw["keepdim"] = g.p(0.5)
        if name == "mode" and g.p(0.3):
            kw["keepdim"] = True
        if name in TAKES_DTYPE and g.p(0.35):
            kw["dtype"] = {"dtype": g.dtype(ALL, 0)}
        if g.p(0.12) and name in TAKES_DTYPE | {"amax", "amin", "logsumexp", "all", "any"} and "dim" in kw:
            kw["out"] = g.out([0], (kw.get("dtype") or {}).get("dtype", dt))
        fn = f"Tensor.{name}" if g.p(0.3) and name not in ("var_mean", "std_mean") else f"torch.{name}"
        return fn, [a], kw
    op(name, "reduce", diff=name not in {"all", "any", "count_nonzero", "argmax", "argmin"}, acc=True,
       ties=name in TIES_OPS)(gen)


for _n, _p in REDUCE.items():
    _reduce(_n, _p)


@op("vector_norm", "reduce", acc=True)
def _vector_norm(g: G) -> Call:
    dt = g.dtype(FLOAT + ["complex64"])
    shape = g.shape()
    a = g.t(shape, dt)
    kw: dict = {"ord": fnum(g.pick([2, 1, 0, 3, float("inf"), float("-inf"), 0.5]))}
    d = g.dims(len(shape))
    if d is not None:
        kw["dim"] = d
        kw["keepdim"] = g.p(0.3)
    if g.p(0.2):
        kw["dtype"] = {"dtype": g.dtype(FLOAT + ["complex64"], 0)}
    if g.p(0.3):
        return "torch.norm", [a], {"p": kw["ord"], **{k: kw[k] for k in ("dim", "keepdim") if k in kw}}
    return "linalg.vector_norm", [a], kw


SCANS = {"cumsum": ALL, "cumprod": REAL, "cummax": REAL + ["bool"], "cummin": REAL + ["bool"],
         "logcumsumexp": FLOAT, "softmax": FLOAT, "log_softmax": FLOAT}


def _scan(name: str, pool: list[str]) -> None:
    def gen(g: G) -> Call:
        dt = g.dtype(pool)
        shape = g.shape()
        a = g.t(shape, dt, fill="distinct" if name in ("cummax", "cummin") and g.p(0.6) else None)
        kw: dict = {"dim": g.dim(len(shape))}
        if name in ("cumsum", "cumprod", "softmax", "log_softmax") and g.p(0.35):
            kw["dtype"] = {"dtype": g.dtype(ALL, 0)}
        if name in ("cumsum", "cumprod") and g.p(0.15):
            return f"Tensor.{name}_", [g.t(shape, dt, inplace=True)], kw
        if name in ("softmax", "log_softmax") and g.p(0.4):
            return f"F.{name}", [a], kw
        return f"torch.{name}", [a], kw
    op(name, "scan", acc=True, ties=name in ("cummax", "cummin"))(gen)


for _n, _p in SCANS.items():
    _scan(_n, _p)


# ---- matmuls ------------------------------------------------------------------------------

def _mmdt(g: G) -> tuple[str, str]:
    dt = g.dtype(FLOAT + ["int64", "complex64"], wild=0.05)
    return dt, (dt if g.p(0.88) else g.dtype(FLOAT + INT, 0))


@op("mm", "matmul", acc=True)
def _mm(g: G) -> Call:
    dt, dt2 = _mmdt(g)
    m, k, n = g.size(0, 8), g.size(0, 8), g.size(0, 8)
    a, b = g.t([m, k], dt), g.t([k, n], dt2)
    if g.p(0.2):
        return "torch.mm", [a, b], {"out": g.out([m, n], dt)}
    return "torch.mm", [a, b], {}


@op("bmm", "matmul", acc=True)
def _bmm(g: G) -> Call:
    dt, dt2 = _mmdt(g)
    bs, m, k, n = g.size(0, 3), g.size(0, 6), g.size(0, 6), g.size(0, 6)
    return "torch.bmm", [g.t([bs, m, k], dt), g.t([bs, k, n], dt2)], {}


@op("matmul", "matmul", acc=True)
def _matmul(g: G) -> Call:
    dt, dt2 = _mmdt(g)
    k = g.size(0, 6)
    sa = g.shape(0, 2, 0, 4)[:g.r.randint(0, 2)] + [g.size(0, 5), k] if g.p(0.8) else [k]
    sb = [k, g.size(0, 5)] if g.p(0.8) else [k]
    if len(sa) >= 3 and g.p(0.5):
        sb = sa[:-2] + sb if len(sb) == 2 else sb
    return "torch.matmul", [g.t(sa, dt), g.t(sb, dt2)], {}


@op("addmm", "matmul", acc=True)
def _addmm(g: G) -> Call:
    dt, dt2 = _mmdt(g)
    name = g.pick(["addmm", "addmv", "addbmm", "baddbmm", "addr"])
    m, k, n, bs = g.size(0, 6), g.size(0, 6), g.size(0, 6), g.size(0, 3)
    kw: dict = {}
    if g.p(0.5):
        kw["beta"] = g.pick([0, 0.5, 1, 2.0])
    if g.p(0.5):
        kw["alpha"] = g.pick([0, 0.5, 1, -1.0])
    if name == "addmm":
        mats = [g.t([m, k], dt), g.t([k, n], dt2)]
        res = [m, n]
    elif name == "addmv":
        mats = [g.t([m, k], dt), g.t([k], dt2)]
        res = [m]
    elif name == "addbmm":
        mats = [g.t([bs, m, k], dt), g.t([bs, k, n], dt2)]
        res = [m, n]
    elif name == "addr":
        mats = [g.t([m], dt), g.t([n], dt2)]
        res = [m, n]
    else:
        mats = [g.t([bs, m, k], dt), g.t([bs, k, n], dt2)]
        res = [bs, m, n]
    bias = g.t(g.bshape(res, wrong=0.02) if g.p(0.8) else [], dt, cpu=False)
    if g.p(0.15):
        return f"Tensor.{name}_", [g.t(res, dt, inplace=True)] + mats, kw
    return f"torch.{name}", [bias] + mats, kw


@op("vecdot", "matmul", acc=True)
def _vec(g: G) -> Call:
    name = g.pick(["dot", "vdot", "mv", "outer", "inner", "kron", "tensordot", "einsum"])
    dt, dt2 = _mmdt(g)
    n, m = g.size(0, 8), g.size(0, 5)
    if name == "mv":
        return "torch.mv", [g.t([m, n], dt), g.t([n], dt2)], {}
    if name == "outer":
        return "torch.outer", [g.t([m], dt), g.t([n], dt2)], {}
    if name in ("inner", "kron"):
        return f"torch.{name}", [g.t([m, n], dt), g.t([n], dt2) if g.p(0.5) else g.t([m, n], dt2)], {}
    if name == "tensordot":
        return "torch.tensordot", [g.t([m, n], dt), g.t([n, m], dt2)], {"dims": 1}
    if name == "einsum":
        return "torch.einsum", ["ij,jk->ik", g.t([m, n], dt), g.t([n, m], dt2)], {}
    return f"torch.{name}", [g.t([n], dt), g.t([n], dt2)], {}


@op("linear", "matmul", acc=True)
def _linear(g: G) -> Call:
    dt, dt2 = _mmdt(g)
    i, o = g.size(0, 6), g.size(0, 6)
    x = g.t(g.shape(0, 2, 0, 4)[:g.r.randint(0, 2)] + [i], dt)
    w = g.t([o, i], dt2)
    args = [x, w]
    if g.p(0.6):
        args.append(g.t([o] if g.p(0.9) else [], dt))
    return "F.linear", args, {}


# ---- indexing -------------------------------------------------------------------------------

def _idx(g: G, shape: list, hi: Any, neg: bool = True, dt: str | None = None) -> dict:
    dt = dt or ("int64" if g.p(0.85) else g.pick(["int32", "int16", "uint8", "float32"]))
    return g.t(shape, dt, fill="index", role="idx", hi=hi, neg=neg and g.p(0.3))


@op("getitem", "index", diff=True)
def _getitem(g: G) -> Call:
    dt = g.dtype(ALL, 0)
    shape = g.shape(1, 3)
    a = g.t(shape, dt)
    key: list = []
    for i, s in enumerate(shape):
        roll = g.r.random()
        if roll < 0.35:
            key.append(_idx(g, g.bshape([g.size(0, 4)]) if g.p(0.8) else [], s))
        elif roll < 0.45:
            key.append(g.t([s], "bool", fill="mask", role="mask"))
        elif roll < 0.6:
            key.append({"slice": [g.pick([None, 1, -2]), g.pick([None, 3]), g.pick([None, 2])]})
        elif roll < 0.7:
            key.append(None)
            key.append({"slice": [None, None, None]})
        elif roll < 0.8 and g.val(s) > 0:
            key.append(g.pick([0, -1]))
        else:
            key.append({"slice": [None, None, None]})
    if g.p(0.1):
        key = [{"ellipsis": 1}] + key[-1:]
    if g.p(0.1):
        return "getitem", [a, g.t(shape, "bool", fill="mask", role="mask")], {}
    return "getitem", [a, {"tuple": key}], {}


@op("index_put_", "index", diff=False)
def _index_put(g: G) -> Call:
    dt = g.dtype(ALL, 0)
    shape = g.shape(1, 3)
    a = g.t(shape, dt, inplace=True)
    k = g.r.randint(1, len(shape))
    ishape = [g.size(0, 4)]
    idx = []
    for s in shape[:k]:
        idx.append(_idx(g, g.bshape(ishape, wrong=0.05), s, neg=True))
    if g.p(0.1):
        idx = [g.t(shape, "bool", fill="mask", role="mask")]
        vshape: list = [1]
    else:
        vshape = g.bshape(ishape + shape[k:])
    vals = g.t(vshape, dt if g.p(0.8) else g.dtype(ALL, 0), fill="ints") if g.p(0.85) else g.t([], dt)
    kw = {"accumulate": True} if g.p(0.4) else {}
    if g.p(0.25):
        return "setitem", [a, {"tuple": idx}, vals if g.p(0.8) else g.py_scalar(g.scalar_kind(dt))], {}
    return "Tensor.index_put_", [a, {"tuple": idx}, vals], kw


@op("gather", "index")
def _gather(g: G) -> Call:
    dt = g.dtype(ALL, 0)
    shape = g.shape(0, 3)
    d = g.dim(len(shape))
    a = g.t(shape, dt)
    ishape = [g.size(0, 4) if i == (d % max(len(shape), 1)) else s for i, s in enumerate(shape)]
    hi = shape[d % len(shape)] if shape else 1
    return "torch.gather", [a, d, _idx(g, ishape, hi, neg=False, dt="int64" if g.p(0.9) else "int32")], {}


@op("scatter", "index", diff=True)
def _scatter(g: G) -> Call:
    dt = g.dtype(ALL, 0)
    shape = g.shape(1, 3)
    d = g.dim(len(shape), bad=0.0)
    ishape = [g.size(0, 3) if i == d % len(shape) else s for i, s in enumerate(shape)]
    idx = _idx(g, ishape, shape[d % len(shape)], neg=False, dt="int64")
    name = g.pick(["scatter", "scatter_add", "scatter_reduce", "scatter_value"])
    inplace = g.p(0.3)
    a = g.t(shape, dt, inplace=inplace)
    src = g.t(ishape, dt if g.p(0.9) else g.dtype(ALL, 0))
    sfx = "_" if inplace else ""
    fn = f"Tensor.{name.replace('_value', '')}{sfx}" if inplace else f"torch.{name.replace('_value', '')}"
    if name == "scatter_reduce":
        return fn, [a, d, idx, src, g.pick(["sum", "prod", "mean", "amax", "amin"])], {"include_self": g.p(0.5)}
    if name == "scatter_value":
        kw = {"reduce": g.pick(["add", "multiply"])} if g.p(0.2) else {}
        return fn, [a, d, idx, g.py_scalar(g.scalar_kind(dt))], kw
    return fn, [a, d, idx, src], {}


@op("index_select", "index")
def _index_ops(g: G) -> Call:
    name = g.pick(["index_select", "index_add", "index_copy", "index_fill", "take", "put", "index_reduce"])
    dt = g.dtype(ALL, 0)
    shape = g.shape(1, 3)
    d = g.dim(len(shape), bad=0.0)
    n = g.size(0, 4)
    a = g.t(shape, dt)
    if name == "take":
        return "torch.take", [a, _idx(g, g.shape(0, 2), g.numel(shape) or 1, neg=True)], {}
    if name == "put":
        i = _idx(g, [n], g.numel(shape) or 1, neg=True)
        return "Tensor.put", [a, i, g.t([n], dt)], {"accumulate": g.p(0.5)}
    idx = _idx(g, [n] if g.p(0.9) else [], shape[d], neg=name == "index_select", dt="int64" if g.p(0.9) else "int32")
    if name == "index_select":
        return "torch.index_select", [a, d, idx], {}
    if name == "index_fill":
        return "Tensor.index_fill", [a, d, idx, g.py_scalar(g.scalar_kind(dt))], {}
    src_shape = [n if i == d else s for i, s in enumerate(shape)]
    src = g.t(src_shape, dt if g.p(0.9) else g.dtype(ALL, 0))
    if name == "index_add":
        return "torch.index_add", [a, d, idx, src], ({"alpha": g.pick([2, 0.5])} if g.p(0.3) else {})
    if name == "index_reduce":
        return "Tensor.index_reduce", [a, d, idx, src, g.pick(["prod", "mean", "amax", "amin"])], \
            {"include_self": g.p(0.5)}
    return "torch.index_copy", [a, d, idx, src], {}


@op("masked", "index")
def _masked(g: G) -> Call:
    name = g.pick(["masked_select", "masked_scatter", "nonzero", "argwhere", "where1"])
    dt = g.dtype(ALL, 0)
    shape = g.shape()
    a = g.t(shape, dt)
    m = g.t(g.bshape(shape), "bool" if g.p(0.92) else "uint8", fill="mask")
    if name == "masked_select":
        return "torch.masked_select", [a, m], {}
    if name == "masked_scatter":
        return "Tensor.masked_scatter", [a, m, g.t(shape, dt)], {}
    if name == "where1":
        return "torch.where", [a], {}
    return f"torch.{name}", [a], {}


# ---- views, copies, shape ops -----------------------------------------------------------------

@op("view", "shape")
def _view(g: G) -> Call:
    dt = g.dtype(ALL, 0)
    shape = g.shape(0, 4)
    nd = len(shape)
    a = g.t(shape, dt)
    name = g.pick(["reshape", "view", "permute", "transpose", "t", "expand", "squeeze", "unsqueeze", "flatten",
                   "narrow", "select", "movedim", "diagonal", "unfold", "unbind", "split", "chunk", "T", "mT"])
    if name in ("reshape", "view"):
        return f"Tensor.{name}", [a, -1], {}
    if name == "permute":
        return "Tensor.permute", [a, g.r.sample(range(nd), nd)], {}
    if name in ("transpose", "movedim"):
        return f"torch.{name}", [a, g.dim(nd), g.dim(nd)], {}
    if name == "t":
        return "torch.t", [a], {}
    if name == "expand":
        return "Tensor.expand", [a, [g.sz(g.size(1, 3))] + [-1] * nd], {}
    if name == "squeeze":
        return "torch.squeeze", [a] + ([g.dim(nd)] if g.p(0.6) else []), {}
    if name == "unsqueeze":
        return "torch.unsqueeze", [a, g.dim(nd + 1)], {}
    if name == "flatten":
        return "torch.flatten", [a], {}
    if name in ("narrow", "select", "unfold") and nd:
        d = g.dim(nd)
        if name == "narrow":
            return "torch.narrow", [a, d, g.pick([0, 1]), g.pick([0, 1])], {}
        if name == "unfold":
            return "Tensor.unfold", [a, d, g.pick([1, 2, 3]), g.pick([1, 2])], {}
        return "torch.select", [a, d, g.pick([0, -1])], {}
    if name == "diagonal" and nd >= 2:
        return "torch.diagonal", [a], {"offset": g.pick([0, 1, -1])}
    if name in ("split", "chunk"):
        return f"torch.{name}", [a, g.pick([1, 2, 3])], {"dim": g.dim(nd)}
    if name in ("T", "mT"):
        return "getattr", [a, name], {}
    return "torch.unbind", [a], {"dim": g.dim(nd)}


@op("cat", "shape")
def _cat(g: G) -> Call:
    name = g.pick(["cat", "stack", "hstack", "vstack"])
    shape = g.shape(0, 3)
    d = g.dim(len(shape) + (name == "stack"))
    dt = g.dtype(ALL, 0)
    ts = []
    for _ in range(g.r.randint(1, 3)):
        s = list(shape)
        if name == "cat" and s and g.p(0.7):
            s[d % len(s)] = g.size(0, 3)
        if g.p(0.15):
            s = [0]   # the legacy empty tensor cat skips
        ts.append(g.t(s, dt if g.p(0.8) else g.dtype(ALL, 0)))
    kw = {"dim": d} if name in ("cat", "stack") else {}
    if name == "cat" and g.p(0.15):
        kw["out"] = g.out([0], dt)
    return f"torch.{name}", [ts], kw


@op("flip", "shape")
def _flip(g: G) -> Call:
    name = g.pick(["flip", "roll", "repeat", "tril", "triu", "diag", "diag_embed", "tile", "repeat_interleave",
                   "clone_cl", "rot90"])
    dt = g.dtype(ALL, 0)
    shape = g.shape(0, 4)
    nd = len(shape)
    a = g.t(shape, dt)
    if name == "flip":
        return "torch.flip", [a, g.r.sample(range(nd), g.r.randint(0, nd))], {}
    if name == "roll":
        return "torch.roll", [a, g.pick([1, -2, 5])], ({"dims": g.dim(nd)} if g.p(0.7) else {})
    if name in ("repeat", "tile"):
        return f"Tensor.{name}", [a, [g.pick([1, 2]) for _ in range(nd + g.pick([0, 1]))]], {}
    if name in ("tril", "triu"):
        return f"torch.{name}", [a], {"diagonal": g.pick([0, 1, -1])}
    if name in ("diag", "diag_embed"):
        return f"torch.{name}", [a], {}
    if name == "repeat_interleave":
        return "torch.repeat_interleave", [a, g.pick([1, 2])], ({"dim": g.dim(nd)} if g.p(0.6) else {})
    if name == "rot90":
        return "torch.rot90", [a, g.pick([1, 2, -1])], {}
    return "Tensor.contiguous", [a], {"memory_format": {"mf": "channels_last"}}


@op("pad", "shape")
def _pad(g: G) -> Call:
    dt = g.dtype(FLOAT, 0.1)
    mode = g.pick(["constant", "reflect", "replicate", "circular"])
    nd = g.r.randint(2, 4)
    shape = [g.size(1, 3) for _ in range(nd - 1)] + [g.size(0, 6)]
    pads = [g.pick([0, 1, 2, -1]) for _ in range(2 * (1 if mode != "constant" or g.p(0.5) else 2))]
    kw = {"mode": mode}
    if mode == "constant" and g.p(0.5):
        kw["value"] = g.py_scalar("float")
    return "F.pad", [g.t(shape, dt), pads], kw


# ---- sorting --------------------------------------------------------------------------------

@op("sort", "sort", ties=True)
def _sort(g: G) -> Call:
    name = g.pick(["sort", "argsort", "topk", "kthvalue", "msort", "unique", "searchsorted"])
    dt = g.dtype(REAL, 0.1)
    shape = g.shape(0, 3)
    nd = len(shape)
    a = g.t(shape, dt, fill="distinct" if g.p(0.75) else None)
    d = g.dim(nd)
    if name in ("sort", "argsort"):
        kw = {"dim": d, "descending": g.p(0.5)}
        if g.p(0.5):
            kw["stable"] = True
        return f"torch.{name}", [a], kw
    if name in ("topk", "kthvalue"):
        s = g.val(shape[d]) if shape and -nd <= d < nd else 1
        k = g.pick([1, s, max(s // 2, 1), s + 1])
        if name == "topk":
            return "torch.topk", [a, k], {"dim": d, "largest": g.p(0.5), "sorted": True}
        return "torch.kthvalue", [a, max(k, 1)], {"dim": d, "keepdim": g.p(0.3)}
    if name == "unique":
        return "torch.unique", [a], {"sorted": True, "return_inverse": g.p(0.5), "return_counts": g.p(0.5)}
    if name == "searchsorted":
        b = g.t([g.size(0, 6)], dt, fill="sorted")
        return "torch.searchsorted", [b, a], {"right": g.p(0.5)}
    return "torch.msort", [a], {}


# ---- normalisation -----------------------------------------------------------------------------

@op("layer_norm", "norm", acc=True)
def _layer_norm(g: G) -> Call:
    dt = g.dtype(FLOAT, 0.05)
    shape = g.shape(1, 4)
    k = g.r.randint(1, len(shape))
    ns = shape[-k:]
    args = [g.t(shape, dt), g.sz(ns)]
    kw: dict = {}
    if g.p(0.6):
        kw["weight"] = g.t(ns, dt if g.p(0.9) else g.dtype(FLOAT, 0))
    if g.p(0.5):
        kw["bias"] = g.t(ns, dt)
    if g.p(0.3):
        kw["eps"] = g.pick([0.0, 1e-3])
    if g.p(0.25):
        return "F.rms_norm", args, {k2: v for k2, v in kw.items() if k2 != "bias"}
    return "F.layer_norm", args, kw


@op("group_norm", "norm", acc=True)
def _group_norm(g: G) -> Call:
    dt = g.dtype(FLOAT, 0.05)
    groups = g.pick([1, 2, 3])
    c = g.pick([groups, 2 * groups, 4]) if g.p(0.9) else 5
    n = g.size(0, 3)
    shape = [n, c] + [g.size(1, 4) for _ in range(g.r.randint(0, 2))]
    kw: dict = {}
    if g.p(0.6):
        kw.update(weight=g.t([c], dt), bias=g.t([c], dt))
    if g.p(0.3):
        kw["eps"] = g.pick([0.0, 1e-2])
    if g.p(0.25):
        return "F.instance_norm", [g.t(shape, dt)], {k: v for k, v in kw.items() if k != "eps"}
    return "F.group_norm", [g.t(shape, dt), groups], kw


@op("batch_norm", "norm", acc=True)
def _batch_norm(g: G) -> Call:
    dt = g.dtype(FLOAT, 0.05)
    c = g.size(1, 4)
    shape = [g.size(1, 4), c] + [g.size(1, 4) for _ in range(g.r.randint(0, 2))]
    training = g.p(0.6)
    rm = g.t([c], "float32" if g.p(0.7) else dt, fill="normal", role="w")
    rv = g.t([c], "float32" if g.p(0.7) else dt, fill="positive", role="w")
    kw: dict = {"training": training}
    if g.p(0.6):
        kw.update(weight=g.t([c], dt), bias=g.t([c], dt))
    if g.p(0.3):
        kw["momentum"] = g.pick([0.0, 0.5, 1.0])
    return "F.batch_norm", [g.t(shape, dt), rm, rv], kw


@op("normalize", "norm", acc=True)
def _normalize(g: G) -> Call:
    dt = g.dtype(FLOAT, 0.05)
    shape = g.shape(1, 3)
    return "F.normalize", [g.t(shape, dt)], {"p": g.pick([2.0, 1.0, 0.0]), "dim": g.dim(len(shape))}


# ---- convolution and pooling ------------------------------------------------------------------

@op("conv", "conv", acc=True)
def _conv(g: G) -> Call:
    nd = g.pick([1, 2, 2, 3])
    transposed = g.p(0.25)
    dt = g.dtype(FLOAT + ["complex64"], 0.05)
    groups = g.pick([1, 1, 2])
    cin, cout = groups * g.pick([1, 2]), groups * g.pick([1, 2, 3])
    n = g.size(0, 2)
    sp = [g.size(1, 7 if nd < 3 else 4) for _ in range(nd)]
    k = [g.pick([1, 2, 3]) for _ in range(nd)]
    x = g.t([n, cin] + sp if g.p(0.9) else [cin] + sp, dt)
    wshape = ([cin, cout // groups] if transposed else [cout, cin // groups]) + k
    w = g.t(wshape, dt if g.p(0.92) else g.dtype(FLOAT, 0))
    kw: dict = {}
    if g.p(0.6):
        kw["bias"] = g.t([cout], dt)
    if g.p(0.4):
        kw["stride"] = g.pick([1, 2])
    if g.p(0.4):
        kw["padding"] = g.pick([0, 1, 2] + ([] if transposed else ["same", "valid"]))
    if g.p(0.3) and kw.get("padding") != "same":
        kw["dilation"] = g.pick([1, 2])
    if groups > 1:
        kw["groups"] = groups
    if transposed and g.p(0.3) and kw.get("stride", 1) > 1:
        kw["output_padding"] = 1
    return f"F.conv{'_transpose' if transposed else ''}{nd}d", [x, w], kw


@op("pool", "pool", acc=True, ties=True)
def _pool(g: G) -> Call:
    name = g.pick(["max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d",
                   "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d", "max_pool3d", "avg_pool3d",
                   "lp_pool2d"])
    nd = int(name[-2])
    dt = g.dtype(FLOAT + ["int64"] if name.startswith("max") else FLOAT, 0.05)
    shape = [g.size(0, 2), g.size(1, 3)][:g.r.randint(1, 2)] + [g.size(1, 7) for _ in range(nd)]
    fill = "distinct" if name.startswith(("max", "adaptive_max")) and g.p(0.6) else None
    x = g.t(shape, dt, fill=fill)
    if name.startswith("adaptive"):
        kw = {"return_indices": True} if "max" in name and g.p(0.4) else {}
        return f"F.{name}", [x, g.pick([1, 2, 3, [2, 1][:nd] if nd > 1 else 2])], kw
    ks = g.pick([1, 2, 3])
    kw = {"stride": g.pick([None, 1, 2]), "padding": g.pick([0, 0, 1]), "ceil_mode": g.p(0.3)}
    if name.startswith("max") and g.p(0.3):
        kw["dilation"] = 2
        # PyTorch's CPU max pooling with dilation and padding can leave a window empty, return an
        # out-of-range index and write its gradient there (heap corruption: known.py,
        # cpu-bug-maxpool-dilation); the backward would poison the worker, so only the forward runs.
        g.backward_ok = not kw["padding"]
    if name.startswith("max") and g.p(0.3):
        kw["return_indices"] = True
    if name.startswith("avg"):
        kw["count_include_pad"] = g.p(0.5)
        if nd > 1 and g.p(0.2):
            kw["divisor_override"] = g.pick([1, 3])
    if name == "lp_pool2d":
        return "F.lp_pool2d", [x, g.pick([1.0, 2.0]), ks], {"ceil_mode": kw["ceil_mode"]}
    return f"F.{name}", [x, ks], kw


@op("interpolate", "resample", acc=True)
def _interp(g: G) -> Call:
    mode = g.pick(["nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area"])
    nd = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}.get(mode, g.pick([1, 2]))
    dt = g.dtype(FLOAT, 0.05)
    x = g.t([g.size(1, 2), g.size(1, 3)] + [g.size(1, 5) for _ in range(nd)], dt)
    kw: dict = {"mode": mode}
    if g.p(0.5):
        kw["size"] = [g.pick([1, 3, 4, 7]) for _ in range(nd)]
    else:
        kw["scale_factor"] = g.pick([0.5, 2.0, 1.5, 3.0])
    if mode in ("linear", "bilinear", "bicubic", "trilinear"):
        kw["align_corners"] = g.p(0.5)
        if g.p(0.2) and mode in ("bilinear", "bicubic"):
            kw["antialias"] = True
    return "F.interpolate", [x], kw


@op("unfold", "resample", acc=True)
def _unfold(g: G) -> Call:
    dt = g.dtype(FLOAT, 0.05)
    x = g.t([g.size(1, 2), g.size(1, 3), g.size(0, 5), g.size(0, 5)], dt)
    return "F.unfold", [x], {"kernel_size": g.pick([1, 2, 3, [2, 1]]), "dilation": g.pick([1, 2]),
                             "padding": g.pick([0, 1]), "stride": g.pick([1, 2])}


@op("cdist", "distance", acc=True)
def _cdist(g: G) -> Call:
    dt = g.dtype(["float32", "float64"], 0.1)
    d = g.size(0, 5)
    a = g.t(g.shape(0, 1, 1, 3)[:g.r.randint(0, 1)] + [g.size(0, 5), d], dt)
    b = g.t([g.size(0, 5), d], dt)
    if g.p(0.25):
        return "F.pairwise_distance", [g.t([g.size(1, 4), d], dt), b], {"p": g.pick([2.0, 1.0])}
    return "torch.cdist", [a, b], {"p": fnum(g.pick([2.0, 1.0, 0.0, 3.0, float("inf")]))}


# ---- attention ------------------------------------------------------------------------------------

@op("sdpa", "attention", acc=True)
def _sdpa(g: G) -> Call:
    dt = g.dtype(FLOAT, 0.03)
    b, h, lq, lk, e = g.size(1, 2), g.size(1, 3), g.size(0, 5), g.size(0, 5), g.size(1, 8)
    ev = e if g.p(0.8) else g.size(1, 6)
    q, k, v = g.t([b, h, lq, e], dt), g.t([b, h, lk, e], dt), g.t([b, h, lk, ev], dt)
    kw: dict = {}
    roll = g.r.random()
    if roll < 0.3:
        kw["attn_mask"] = g.t(g.bshape([b, h, lq, lk], wrong=0.0), "bool", fill="mask", role="mask")
    elif roll < 0.55:
        kw["attn_mask"] = g.t(g.bshape([b, h, lq, lk], wrong=0.0), dt, fill="maskrows")
    elif roll < 0.75:
        kw["is_causal"] = True
    if g.p(0.3):
        kw["scale"] = g.pick([0.5, 1.0, 0.0])
    return "F.scaled_dot_product_attention", [q, k, v], kw


# ---- losses ----------------------------------------------------------------------------------------

@op("loss", "loss", acc=True)
def _loss(g: G) -> Call:
    name = g.pick(["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "binary_cross_entropy",
                   "binary_cross_entropy_with_logits", "soft_margin_loss", "poisson_nll_loss"])
    dt = g.dtype(FLOAT, 0.05)
    shape = g.shape(0, 3)
    x = g.t(shape, dt, fill="unit" if name == "binary_cross_entropy" else None)
    roll = g.r.random()
    if roll < 0.1 and name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"):
        y = g.t([], dt, cpu=True)
    elif roll < 0.2:
        y = g.t(g.bshape(shape), dt, fill="unit" if "binary" in name else None)
    else:
        y = g.t(shape, dt if g.p(0.9) else g.dtype(FLOAT, 0), fill="unit" if "binary" in name else None)
    kw: dict = {"reduction": g.pick(["mean", "sum", "none"])}
    if name == "smooth_l1_loss" and g.p(0.5):
        kw["beta"] = g.pick([0.0, 0.5, 2.0])
    if name == "huber_loss" and g.p(0.5):
        kw["delta"] = g.pick([0.5, 2.0])
    if name == "kl_div" and g.p(0.5):
        kw["log_target"] = True
    if name == "binary_cross_entropy_with_logits" and g.p(0.3):
        kw["pos_weight"] = g.t(shape[-1:] if shape else [], dt, fill="positive")
    return f"F.{name}", [x, y], kw


@op("cross_entropy", "loss", acc=True)
def _ce(g: G) -> Call:
    name = g.pick(["cross_entropy", "nll_loss", "multi_margin_loss", "cross_entropy_prob"])
    dt = g.dtype(FLOAT, 0.03)
    n, c = g.size(0, 4), g.size(1, 5)
    extra = [g.size(1, 3)] if g.p(0.25) else []
    x = g.t([n, c] + extra if g.p(0.9) else [c], dt)
    kw: dict = {}
    if name == "cross_entropy_prob":
        return "F.cross_entropy", [x, g.t(shape_of(g, x), dt, fill="unit")], \
            ({"label_smoothing": 0.1} if g.p(0.3) else {})
    tgt_shape = [n] + extra if len(shape_of(g, x)) > 1 else []
    tgt = g.t(tgt_shape, "int64" if g.p(0.95) else "int32", fill="index", role="idx", hi=c, ignore=g.p(0.3))
    if g.p(0.3):
        kw["weight"] = g.t([c], dt, fill="positive")
    if name != "multi_margin_loss" and g.p(0.3):
        kw["ignore_index"] = g.pick([-100, 0, 1])
    if g.p(0.5):
        kw["reduction"] = g.pick(["mean", "sum", "none"])
    if name == "cross_entropy" and g.p(0.3):
        kw["label_smoothing"] = g.pick([0.1, 0.5])
    if name == "multi_margin_loss" and extra:
        x = g.t([n, c], dt)
        tgt = g.t([n], "int64", fill="index", role="idx", hi=c)
    return f"F.{name}", [x, tgt], kw


@op("embedding", "index")
def _embedding(g: G) -> Call:
    dt = g.dtype(FLOAT, 0.05)
    nw, d = g.size(1, 8), g.size(0, 4)
    w = g.t([nw, d], dt)
    idx = _idx(g, g.shape(0, 2), nw, neg=False, dt="int64" if g.p(0.9) else "int32")
    if g.p(0.2):
        return "F.one_hot", [_idx(g, g.shape(0, 2), nw, neg=False, dt="int64"), g.pick([-1, g.val(nw) + 1])], {}
    kw = {"padding_idx": 0} if g.p(0.3) else {}
    return "F.embedding", [idx, w], kw


OPS_BY_NAME = {o.name: o for o in OPS}


def pick_op(g: G, table: list[Op]) -> Op:
    """A family with weight sqrt(its number of ops), then an op of it: the
    dozens of unary and binary entries do not crowd out convolutions or attention."""
    fams: dict[str, list[Op]] = {}
    for o in table:
        fams.setdefault(o.family, []).append(o)
    names = sorted(fams)
    fam = g.r.choices(names, weights=[len(fams[n]) ** 0.5 for n in names])[0]
    return g.pick(fams[fam])


def make_case(seed: int, index: int, ops: list[Op] | None = None) -> dict:
    """Case number `index` of the run seeded `seed` (the same dict every time)."""
    g = G(seed, index)
    o = pick_op(g, ops or OPS)
    fn, args, kwargs = o.gen(g)
    backward = (o.diff and g.backward_ok and not fn.endswith("_") and "out" not in kwargs and not kwargs.get("inplace")
                and fn not in ("setitem",) and g.p(0.35)
                and any(t["role"] == "in" and t["dtype"] in FLOAT and not t.get("cpu") for t in g.tensors))
    return {"id": f"{seed}-{index}", "op": o.name, "family": o.family, "fn": fn, "args": args,
            "kwargs": kwargs, "tensors": g.tensors, "sizes": g.sizes, "backward": backward,
            "compare": {"acc": o.acc, "ties": o.ties}}
