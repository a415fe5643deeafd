"""Matchers for known.py and allowances.py, and the annotation of results.

A group is ``Group(id, ops, classes, match, reason)``: it covers a result
when the result's op is in `ops` (``"*"``: any op), its class is in
`classes`, and ``match(case, result)`` is true. The predicates below build
`match`; combine them with `all_of` / `any_of` / `not_`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from fuzz_gen import FLOAT, INT

Pred = Callable[[dict, dict], bool]


@dataclass(frozen=True)
class Group:
    id: str
    ops: tuple[str, ...]
    classes: tuple[str, ...]
    match: Pred
    reason: str

    def covers(self, case: dict, res: dict) -> bool:
        """True when this group explains the result."""
        if "*" not in self.ops and res.get("op") not in self.ops:
            return False
        if res.get("cls") not in self.classes:
            return False
        try:
            return bool(self.match(case, res))
        except (KeyError, IndexError, TypeError, AttributeError):
            return False


# ---- predicates ------------------------------------------------------------------------------

def always(case: dict, res: dict) -> bool:
    return True


def all_of(*ps: Pred) -> Pred:
    return lambda c, r: all(p(c, r) for p in ps)


def any_of(*ps: Pred) -> Pred:
    return lambda c, r: any(p(c, r) for p in ps)


def not_(p: Pred) -> Pred:
    return lambda c, r: not p(c, r)


def fn(*names: str) -> Pred:
    """The call is one of these `fn` strings (``torch.sum``, ``Tensor.fill_``, ``F.conv2d``...)."""
    return lambda c, r: c["fn"] in names


def fn_prefix(*prefixes: str) -> Pred:
    return lambda c, r: c["fn"].startswith(prefixes)


def fn_suffix(*suffixes: str) -> Pred:
    """The called function's name ends with one of these (``_``: an in-place method)."""
    return lambda c, r: c["fn"].endswith(suffixes)


def kwarg(name: str, value: Any = ...) -> Pred:
    """The call has keyword `name` (with that value when given)."""
    def p(c: dict, r: dict) -> bool:
        return name in c["kwargs"] and (value is ... or c["kwargs"][name] == value)
    return p


def _tensors(c: dict, roles: tuple[str, ...] = ("in",)) -> list[dict]:
    return [t for t in c["tensors"] if t["role"] in roles]


def in_dtype(*dtypes: str, roles: tuple[str, ...] = ("in",)) -> Pred:
    """Some input tensor has one of these dtypes (``"float"``/``"int"`` stand for the groups)."""
    want = set()
    for d in dtypes:
        want |= set(FLOAT) if d == "float" else set(INT) if d == "int" else {d}
    return lambda c, r: any(t["dtype"] in want for t in _tensors(c, roles))


def self_tensor(c: dict) -> dict | None:
    """The description of the call's first argument when it is a tensor (self)."""
    a0 = c["args"][0] if c["args"] else None
    if isinstance(a0, dict) and "t" in a0:
        return c["tensors"][a0["t"]]
    return None


def first_dtype(*dtypes: str) -> Pred:
    """The first argument (self) is a tensor of one of these dtypes."""
    want = set()
    for d in dtypes:
        want |= set(FLOAT) if d == "float" else set(INT) if d == "int" else {d}
    return lambda c, r: (self_tensor(c) or {}).get("dtype") in want


def mixed_dtypes(roles: tuple[str, ...] = ("in",)) -> Pred:
    """Input tensors of more than one dtype."""
    return lambda c, r: len({t["dtype"] for t in _tensors(c, roles)}) > 1


def out_dtype(*dtypes: str) -> Pred:
    """An out= tensor of one of these dtypes."""
    return in_dtype(*dtypes, roles=("out",))


def has_out(c: dict, r: dict) -> bool:
    return "out" in c["kwargs"]


def out_differs_from_input(c: dict, r: dict) -> bool:
    """The out= tensor's dtype differs from some input tensor's dtype."""
    outs = {t["dtype"] for t in c["tensors"] if t["role"] == "out"}
    ins = {t["dtype"] for t in c["tensors"] if t["role"] == "in"}
    return bool(outs) and bool(ins) and outs != ins


def zero_dim_operand(c: dict, r: dict) -> bool:
    """A 0-d tensor (on either device) among the inputs, next to a tensor of another dtype."""
    ins = [t for t in c["tensors"] if t["role"] == "in"]
    return any(not t["shape"] for t in ins) and len({t["dtype"] for t in ins}) > 1


def fill(*fills: str) -> Pred:
    """Some tensor's values are drawn with one of these fills (``edge``: NaN, inf, -0.0, limits)."""
    return lambda c, r: any(t["fill"] in fills for t in c["tensors"])


def cpu_scalar(c: dict, r: dict) -> bool:
    """A 0-d CPU tensor among the arguments."""
    return any(t.get("cpu") for t in c["tensors"])


def py_scalar_arg(kind: type | tuple) -> Pred:
    """A Python scalar of `kind` among the positional or keyword arguments."""
    def walk(x: Any) -> bool:
        if isinstance(x, dict):
            if "f" in x:
                return float in (kind if isinstance(kind, tuple) else (kind,))
            if "c" in x:
                return complex in (kind if isinstance(kind, tuple) else (kind,))
            return any(walk(v) for v in x.values()) if "t" not in x else False
        if isinstance(x, list):
            return any(walk(v) for v in x)
        return isinstance(x, kind) and not (kind is int and isinstance(x, bool))
    return lambda c, r: walk(c["args"]) or walk(list(c["kwargs"].values()))


def py_scalar_beyond(limit: float) -> Pred:
    """A real Python scalar argument of magnitude `limit` or more (inf too)."""
    def walk(x: Any) -> bool:
        if isinstance(x, dict):
            if "f" in x:  # a non-finite float spelled as a string
                return str(x["f"]).lstrip("+-") == "inf"
            return any(walk(v) for v in x.values()) if "t" not in x and "c" not in x else False
        if isinstance(x, list):
            return any(walk(v) for v in x)
        return isinstance(x, (int, float)) and not isinstance(x, bool) and abs(x) >= limit
    return lambda c, r: walk(c["args"]) or walk(list(c["kwargs"].values()))


def zero_size(c: dict, r: dict) -> bool:
    """Some tensor has a 0-size dimension."""
    return any(any((c["sizes"].get(s, 1) if isinstance(s, str) else s) == 0 for s in t["shape"])
               for t in c["tensors"])


def layout(*layouts: str) -> Pred:
    return lambda c, r: any(t["layout"] in layouts for t in c["tensors"])


def cpu_msg(*subs: str) -> Pred:
    """The CPU's exception message (forward or backward) contains one of these."""
    return lambda c, r: any(s in _msg(r, "cpu") for s in subs)


def dev_msg(*subs: str) -> Pred:
    """The device's exception message (forward or backward) contains one of these."""
    return lambda c, r: any(s in _msg(r, "dev") for s in subs)


def cpu_exc(*classes: str) -> Pred:
    return lambda c, r: any((r.get(k) or [None])[0] in classes for k in ("cpu_exc", "cpu_bexc"))


def dev_exc(*classes: str) -> Pred:
    return lambda c, r: any((r.get(k) or [None])[0] in classes for k in ("dev_exc", "dev_bexc"))


def dev_stage(*stages: str) -> Pred:
    """The device raised at one of these stages (call, sync, copy, backward)."""
    return lambda c, r: any((r.get(k) or [None, None, None])[2] in stages for k in ("dev_exc", "dev_bexc"))


def nonfinite(c: dict, r: dict) -> bool:
    """Every differing element is NaN or infinite on one side (non-finite propagation)."""
    return bool(r.get("detail", {}).get("nonfinite"))


def differs(*names: str) -> Pred:
    """The mismatching results include one of these (``out``, ``out[1]``, ``in0``, ``grad0`` ...)."""
    return lambda c, r: any(n in r.get("detail", {}).get("names", {}) for n in names)


def maxdiff_below(limit: float) -> Pred:
    """Every mismatching result differs from the CPU by less than `limit` (absolute)."""
    def p(c: dict, r: dict) -> bool:
        diffs = r.get("detail", {}).get("maxdiff", {})
        vals = []
        for v in diffs.values():
            if "max|dev-cpu|=" not in v:
                return False
            vals.append(float(v.split("=")[1].split()[0]))
        return bool(vals) and max(vals) < limit
    return p


def phase(name: str) -> Pred:
    """The disagreement is in the forward or the backward."""
    return lambda c, r: r.get("detail", {}).get("phase") == name


def _msg(r: dict, side: str) -> str:
    return " ".join(str((r.get(f"{side}_{k}") or ["", ""])[1]) for k in ("exc", "bexc"))


# ---- annotation ---------------------------------------------------------------------------------

def annotate(case: dict, res: dict, allowances: list[Group], known: list[Group]) -> None:
    """Marks `res` with ``allowed`` (a deliberate extension) or ``known`` (a
    listed disagreement) when a group covers it."""
    if res.get("cls") in (None, "ok"):
        return
    for g in allowances:
        if g.covers(case, res):
            res["allowed"] = g.id
            return
    for g in known:
        if g.covers(case, res):
            res["known"] = g.id
            return


def is_new(res: dict) -> bool:
    """A disagreement, crash or hang not covered by known.py or allowances.py."""
    return res.get("cls") not in ("ok", "repro") and not res.get("known") and not res.get("allowed")
