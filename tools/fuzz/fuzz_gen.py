"""Random case builder used by the op table (fuzz_ops.py). No torch import:
the parent process generates cases, the workers run them.

A case is a JSON-able dict; what the user sees of it is the reproducer and
the `id` (``<seed>-<index>``). Its fields:

  op        the op-table name (``add``, ``sum.dtype``, ``conv2d`` ...)
  family    the op-table family (``binary``, ``reduce``, ...)
  fn        what is called: ``torch.X``, ``Tensor.X`` (first arg is self),
            ``F.X`` (torch.nn.functional), ``linalg.X``, ``special.X``,
            ``operator.X``, ``getitem`` / ``setitem``
  args, kwargs   encoded arguments (see `encode` in fuzz_case.py):
            {"t": i} tensor i, {"f": "nan"} a non-finite float, {"c": [re, im]},
            {"dtype": "int64"}, {"tuple": [...]}, {"slice": [a, b, c]},
            {"ellipsis": 1}, {"mf": "channels_last"}, lists, numbers, null
  tensors   one description per tensor: shape (ints or size names), dtype,
            fill (how values are drawn), layout, seed, role (in / idx / mask /
            out / w), cpu (a CPU tensor on both sides: 0-d scalars)
  sizes     size name -> value (the minimiser shrinks these)
  backward  also compare grads of sum(out * fixed weights)
  compare   hints for the comparison: acc (atol scales with |ref|),
            ties (index outputs checked through the values they select)
"""
from __future__ import annotations

import random
from typing import Any

FLOAT = ["float32", "bfloat16", "float16", "float64"]
INT = ["int8", "int16", "int32", "int64", "uint8"]
ALL = FLOAT + INT + ["bool", "complex64"]
REAL = FLOAT + INT
LAYOUTS = ["contiguous", "transposed", "strided", "expanded", "offset", "channels_last"]


def fnum(x: float) -> Any:
    """A float as JSON: non-finite values and -0.0 as {"f": ...}."""
    if x != x:
        return {"f": "nan"}
    if x in (float("inf"), float("-inf")):
        return {"f": "inf" if x > 0 else "-inf"}
    if x == 0.0 and str(x).startswith("-"):
        return {"f": "-0.0"}
    return float(x)


class G:
    """Draws one case: sizes, tensors, scalars, dtypes, layouts from one RNG."""

    def __init__(self, seed: int, index: int):
        self.r = random.Random(seed * 1_000_003 + index)
        self.tensors: list[dict] = []
        self.sizes: dict[str, int] = {}
        self.compare: dict[str, Any] = {}
        self.backward_ok = True   # an op's generator turns the backward off for a case

    # ---- choices -------------------------------------------------------------
    def p(self, prob: float) -> bool:
        return self.r.random() < prob

    def pick(self, seq: list | tuple) -> Any:
        return seq[self.r.randrange(len(seq))]

    def dtype(self, pool: list[str] = FLOAT, wild: float = 0.15) -> str:
        """A dtype from `pool` (float32 favoured); with probability `wild` any dtype."""
        if self.p(wild):
            return self.pick(ALL)
        if "float32" in pool and self.p(0.35):
            return "float32"
        return self.pick(pool)

    # ---- sizes and shapes ----------------------------------------------------
    def size(self, lo: int = 0, hi: int = 6) -> str:
        """A new size name; 0 and 1 are drawn often, rarely a larger size."""
        roll = self.r.random()
        if roll < 0.06 and lo <= 0:
            v = 0
        elif roll < 0.25 and lo <= 1:
            v = 1
        elif roll < 0.30:
            v = self.r.randint(max(lo, hi), max(lo, hi) * 3 + 3)
        else:
            v = self.r.randint(max(lo, 2), max(lo, 2, hi))
        name = f"s{len(self.sizes)}"
        self.sizes[name] = v
        return name

    def val(self, s: Any) -> int:
        return self.sizes[s] if isinstance(s, str) else int(s)

    def shape(self, lo: int = 0, hi: int = 4, size_lo: int = 0, size_hi: int = 6) -> list:
        """A shape of lo..hi dims (0-d drawn about one time in ten when lo == 0)."""
        nd = 0 if (lo == 0 and self.p(0.1)) else self.r.randint(max(lo, 1), max(hi, lo, 1))
        return [self.size(size_lo, size_hi) for _ in range(nd)]

    def bshape(self, shape: list, wrong: float = 0.04) -> list:
        """A shape that broadcasts with `shape` (sometimes one that does not)."""
        out = []
        for s in shape:
            roll = self.r.random()
            out.append(1 if roll < 0.25 else s)
        if out and self.p(0.3):
            out = out[self.r.randint(1, len(out)):]
        elif self.p(0.1):
            out = [1] + out
        if out and self.p(wrong):
            out[self.r.randrange(len(out))] = self.size(2, 5)
        return out

    def sz(self, x: Any) -> Any:
        """Size names inside an argument (a shape, a length) as {"size": name}."""
        if isinstance(x, list):
            return [self.sz(v) for v in x]
        return {"size": x} if isinstance(x, str) else x

    def numel(self, shape: list) -> int:
        n = 1
        for s in shape:
            n *= self.val(s)
        return n

    # ---- tensors ---------------------------------------------------------------
    def fill_for(self, dtype: str) -> str:
        roll = self.r.random()
        if dtype == "bool":
            return "normal"
        if roll < 0.55:
            return "normal"
        if roll < 0.80:
            return "edge"
        return "ints"

    def layout(self, nd: int, inplace: bool = False) -> str:
        roll = self.r.random()
        if roll < 0.45 or nd == 0:
            return "contiguous"
        choice = self.pick(LAYOUTS[1:])
        if choice == "expanded" and inplace and self.p(0.7):
            return "contiguous"
        if choice == "channels_last" and nd != 4:
            return self.pick(["transposed", "strided", "offset"])
        if choice == "transposed" and nd < 2:
            return "strided"
        return choice

    def t(self, shape: list, dtype: str, fill: str | None = None, layout: str | None = None,
          role: str = "in", cpu: bool = False, inplace: bool = False, **fill_args: Any) -> dict:
        """Registers a tensor and returns its reference {"t": i}."""
        if fill is None:
            fill = self.fill_for(dtype)
        if layout is None:
            layout = "contiguous" if cpu else self.layout(len(shape), inplace)
        desc = {"shape": list(shape), "dtype": dtype, "fill": fill, "layout": layout,
                "seed": self.r.randrange(1 << 30), "role": role}
        if cpu:
            desc["cpu"] = True
        if fill_args:
            desc["fill_args"] = fill_args
        self.tensors.append(desc)
        return {"t": len(self.tensors) - 1}

    def out(self, shape: list, dtype: str) -> dict:
        """An out= tensor: the right shape, or an empty one (resized by the op)."""
        shp = list(shape) if self.p(0.7) else [0]
        return self.t(shp, dtype, fill="ints", layout="contiguous", role="out")

    # ---- scalars ---------------------------------------------------------------
    def py_scalar(self, kind: str) -> Any:
        """A Python scalar of kind float / int / bool / complex (edge values included)."""
        if kind == "bool":
            return self.p(0.5)
        if kind == "int":
            return self.pick([0, 1, 2, -1, 3, -3, 7, 100000, 2**31, -(2**40)] if self.p(0.2) else [0, 1, 2, -1, 3, -2])
        if kind == "complex":
            return {"c": [fnum(self.pick([0.5, -1.0, 2.0, float("nan")])), fnum(self.pick([0.0, 1.0, -0.5]))]}
        if self.p(0.25):
            return fnum(self.pick([float("nan"), float("inf"), float("-inf"), -0.0, 1e-40, 1e30, 3.5e38, -1e-7]))
        return fnum(self.pick([0.5, -0.5, 0.75, 2.0, -1.5, 1.0, 0.0, 3.25, -2.0]))

    def scalar_kind(self, dtype: str) -> str:
        if self.p(0.2):
            return self.pick(["float", "int", "bool", "complex"])
        if dtype in FLOAT:
            return "float"
        if dtype == "bool":
            return "bool"
        if dtype == "complex64":
            return "complex"
        return "int"

    def operand(self, shape: list, dtype: str, scalars: bool = True, py: bool = True) -> Any:
        """The other operand of a binary op: a tensor broadcastable with `shape`,
        a Python scalar, or a 0-d tensor on the CPU or on the device."""
        roll = self.r.random() if scalars else 1.0
        if roll < 0.2 and not py:
            roll = 0.25
        if roll < 0.2:
            return self.py_scalar(self.scalar_kind(dtype))
        if roll < 0.3:
            return self.t([], self.dtype([dtype], wild=0.4), cpu=True)
        if roll < 0.36:
            return self.t([], self.dtype([dtype], wild=0.4))
        other = dtype if self.p(0.6) else self.dtype(ALL, wild=0.0)
        return self.t(self.bshape(shape), other)

    def dim(self, nd: int, bad: float = 0.02) -> int:
        """A valid dim for an nd-dim tensor (0-d takes 0 or -1); sometimes out of range."""
        if self.p(bad):
            return nd + 1
        n = max(nd, 1)
        return self.r.randrange(-n, n)

    def dims(self, nd: int) -> Any:
        """None, one dim, or a list of distinct dims (reductions)."""
        roll = self.r.random()
        if roll < 0.25:
            return None
        if roll < 0.75 or nd < 2:
            return self.dim(nd)
        k = self.r.randint(1, nd)
        return self.r.sample(range(nd), k)
