"""Minimiser: makes a failing case smaller while it keeps failing the same way.

Each round builds every one-step simplification of the current case (no
backward, one keyword argument dropped, one tensor contiguous, simpler
values, one size made 1, halved or one smaller), runs them all, and keeps
the first that still gives the same signature (class, phase, and the
exception classes on each side). It stops when no step keeps the
signature, after `max_rounds`, or when the time budget is spent.
"""
from __future__ import annotations

import copy
import time
from typing import Callable

SIMPLER_FILL = {"edge": "normal", "normal": "ints", "distinct": "ints", "positive": "ints", "unit": "ints",
                "sorted": "ints", "maskrows": "ints"}


def signature(res: dict) -> tuple:
    """What must stay the same while shrinking."""
    def cls_of(k: str) -> str | None:
        v = res.get(k)
        return v[0] if v else None
    return (res.get("cls"), res.get("detail", {}).get("phase"), cls_of("cpu_exc"), cls_of("dev_exc"),
            cls_of("cpu_bexc"), cls_of("dev_bexc"))


def candidates(case: dict) -> list[dict]:
    """Every one-step simplification of `case`, simplest kind first."""
    out: list[dict] = []

    def variant(mut: Callable[[dict], None]) -> None:
        c = copy.deepcopy(case)
        mut(c)
        out.append(c)

    if case.get("backward"):
        variant(lambda c: c.__setitem__("backward", False))
    for k in list(case["kwargs"]):
        variant(lambda c, k=k: c["kwargs"].pop(k))
    for i, t in enumerate(case["tensors"]):
        if t["layout"] != "contiguous":
            variant(lambda c, i=i: c["tensors"][i].__setitem__("layout", "contiguous"))
    for i, t in enumerate(case["tensors"]):
        if t["fill"] in SIMPLER_FILL and t["role"] != "idx":
            variant(lambda c, i=i, f=SIMPLER_FILL[t["fill"]]: c["tensors"][i].__setitem__("fill", f))
    for name, v in case["sizes"].items():
        for nv in sorted({1, (v + 1) // 2, v - 1}, key=lambda x: x):
            if 0 < nv < v:
                variant(lambda c, name=name, nv=nv: c["sizes"].__setitem__(name, nv))
    return out


def minimise(case: dict, res: dict, run: Callable[[list[dict]], list[dict]], budget_s: float = 60.0,
             max_rounds: int = 30) -> tuple[dict, dict]:
    """The smallest case found that fails like `res`, and its result. `run`
    runs a list of cases and returns their results (any order)."""
    want = signature(res)
    best, best_res = case, res
    t_end = time.monotonic() + budget_s
    for rnd in range(max_rounds):
        if time.monotonic() > t_end:
            break
        cands = candidates(best)
        if not cands:
            break
        base_id = case["id"].split(".")[0]
        for k, c in enumerate(cands):
            c["id"] = f"{base_id}.m{rnd}.{k}"
        results = {r["id"]: r for r in run(cands)}
        for c in cands:
            r = results.get(c["id"])
            if r is not None and signature(r) == want:
                best, best_res = c, r
                break
        else:
            break
    best = copy.deepcopy(best)
    best["id"] = case["id"].split(".")[0] + ".min"
    best_res = dict(best_res, id=best["id"])
    if "repro" in best_res:
        best_res["repro"] = best_res["repro"].replace(f"# fuzz case {best_res['repro'].split()[3]}",
                                                      f"# fuzz case {best['id']}", 1)
    return best, best_res
