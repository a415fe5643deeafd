"""The capture plan: what a graph's first call learns by capturing, kept so
a new process with the same graph and inputs skips the capture.

A first call with a new input signature runs the graph's nodes eagerly
while the stream captures (graph.py), and each captured segment's program
is cached under its graph text (cache.py). Finding that text needs the
capture, so a cached program alone still costs a full eager run. The plan
holds the rest of what the capture decided: which nodes run eagerly, and
for each compiled segment its program key, input slots, output metadata
and RNG replay. It is keyed before any capture, by

- the FX graph in canonical form: nodes by position (never by name),
  targets, arguments, get_attr constants by content;
- the input signature (graph.signature: dtypes, sizes, strides, storage
  sharing, host scalar values);
- the compiler version, its flags, the fallback-execution setting, the
  host's CPU features;
- what decides the eager kernels the capture records: the PyTorch version,
  this extension's build and the runtime's and glue's environment settings.

A hit rebuilds the steps from the plan and the cached programs and runs
them: no eager run, no capture, no compile. A plan is plain JSON with a
checksum of its body; a damaged or inconsistent plan is reported and the
graph is captured again (and the plan rewritten).
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch.fx import GraphModule, Node

from .. import _C

VERSION = 1


class Unkeyable(Exception):
    """A graph with a value the canonical form cannot name (no plan is kept)."""


# ---- the key ---------------------------------------------------------------------------------

def _target_name(t: Any) -> str:
    if isinstance(t, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return str(t)
    if isinstance(t, torch._ops.HigherOrderOperator):
        return "hop:" + t.name()
    if isinstance(t, str):
        return t
    mod, qual = getattr(t, "__module__", None), getattr(t, "__qualname__", None)
    if mod and qual and "<" not in qual:
        return f"{mod}.{qual}"
    raise Unkeyable(f"target {t!r}")


def _tensor_digest(t: torch.Tensor) -> str:
    h = hashlib.sha256(f"{t.dtype} {tuple(t.shape)} {tuple(t.stride())} {t.device.type}".encode())
    c = t.detach().to("cpu").contiguous()
    h.update(c.view(torch.uint8).numpy().tobytes() if c.numel() else b"")
    return h.hexdigest()


def canonical_text(gm: GraphModule) -> str:
    """The graph with nodes named by position: equal for two traces of the
    same program, different when any op, argument or constant differs."""
    index: Dict[Node, int] = {}

    def enc(a: Any) -> str:
        if isinstance(a, Node):
            return f"%{index[a]}"
        if isinstance(a, tuple):
            return "(" + ",".join(enc(x) for x in a) + ")"
        if isinstance(a, list):
            return "[" + ",".join(enc(x) for x in a) + "]"
        if isinstance(a, dict):
            return "{" + ",".join(f"{k!r}:{enc(v)}" for k, v in sorted(a.items(), key=lambda kv: repr(kv[0]))) + "}"
        if a is None or isinstance(a, (bool, int, float, complex, str, slice, torch.dtype, torch.device,
                                       torch.memory_format, torch.layout)):
            return repr(a)
        if isinstance(a, (torch._ops.OpOverload, torch._ops.OpOverloadPacket, torch._ops.HigherOrderOperator)):
            return _target_name(a)
        raise Unkeyable(f"argument {type(a).__name__}")

    lines = []
    for i, n in enumerate(gm.graph.nodes):
        index[n] = i
        if n.op == "get_attr":
            obj = gm
            for part in n.target.split("."):
                obj = getattr(obj, part)
            if isinstance(obj, torch.Tensor):
                lines.append(f"{i} const {_tensor_digest(obj)}")
            elif isinstance(obj, GraphModule):
                sub = canonical_text(obj)
                lines.append(f"{i} module {hashlib.sha256(sub.encode()).hexdigest()}")
            else:
                raise Unkeyable(f"get_attr of {type(obj).__name__}")
        elif n.op == "placeholder":
            lines.append(f"{i} input")
        else:
            lines.append(f"{i} {n.op} {_target_name(n.target)} {enc(n.args)} {enc(dict(n.kwargs))}")
    return "\n".join(lines)


def _build_id() -> str:
    st = os.stat(_C.__file__)
    return f"{st.st_size}:{st.st_mtime_ns}"


def _eager_settings() -> str:
    """Environment settings the eager run reads (runtime and glue rows of
    the env table); the compile-cache and debug settings change nothing."""
    rows = [r for r in _C._env_table() if str(r.get("reader", "")).startswith(("runtime", "glue"))]
    return ";".join(f"{r['name']}={r['value']}" for r in rows)


def plan_key(graph_text: str, sig: tuple, flags: str, fallback_execution: bool) -> str:
    h = hashlib.sha256()
    for part in (f"plan {VERSION}", _C._COMPILER_VERSION, " ".join(flags.split()), _C._host_cpu_features(),
                 torch.__version__, _build_id(), _eager_settings(), f"fallback={fallback_execution}",
                 repr(sig), graph_text):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


# ---- the record ------------------------------------------------------------------------------

def _enc_leaf(leaf: tuple) -> list:
    kind = leaf[0]
    if kind in ("slot", "alias"):
        _, slot, dtype, size, stride, offset = leaf
        return [kind, slot, str(dtype), list(size), list(stride), offset]
    if kind == "rng":
        return [kind, leaf[1]]
    if kind == "empty":
        return [kind, str(leaf[1]), list(leaf[2]), list(leaf[3])]
    v = leaf[1]
    if v is None or type(v) in (bool, int, float, str):
        return [kind, v]
    if isinstance(v, torch.Tensor) and v.device.type == "cpu" and v.layout == torch.strided \
            and v.numel() <= 64 and not v.is_complex():
        # a host tensor the capture produced (SDPA's Philox seed and offset): kept by value
        return ["host_tensor", str(v.dtype), list(v.shape), v.reshape(-1).tolist()]
    raise Unkeyable(f"constant output of type {type(v).__name__}")


def _dtype(name: str) -> torch.dtype:
    d = getattr(torch, name.rsplit(".", 1)[-1], None)
    if not isinstance(d, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return d


def _dec_leaf(v: list) -> tuple:
    kind = v[0]
    if kind in ("slot", "alias"):
        return (kind, int(v[1]), _dtype(v[2]), tuple(v[3]), tuple(v[4]), int(v[5]))
    if kind == "rng":
        return (kind, int(v[1]))
    if kind == "empty":
        return (kind, _dtype(v[1]), tuple(v[2]), tuple(v[3]))
    if kind == "const":
        return (kind, v[1])
    if kind == "host_tensor":
        return ("const", torch.tensor(v[3], dtype=_dtype(v[1])).reshape(tuple(v[2])))
    raise ValueError(f"unknown output kind {kind!r}")


def encode(steps: Sequence[Any], position: Dict[Node, int]) -> dict:
    """The JSON body of a variant's steps (graph.EagerStep / CompiledStep)."""
    import torch.utils._pytree as pytree

    out: List[dict] = []
    for st in steps:
        if not hasattr(st, "program"):
            out.append({"eager": position[st.node]})
            continue
        out.append({
            "key": st.key, "name": st.name, "nodes": st.node_count, "device": st.device,
            "in_refs": [[slot, j, k] for slot, (j, k) in sorted(st.in_refs.items())],
            "replay": list(st.replay) if st.replay is not None else None,
            "outs": [[position[n], pytree.treespec_dumps(spec), [_enc_leaf(x) for x in leaves]]
                     for n, spec, leaves in st.out_specs],
        })
    return {"steps": out}


def decode_step(d: dict, nodes: List[Node]) -> dict:
    """One step's fields with nodes, specs and dtypes restored (ValueError,
    KeyError, IndexError or TypeError on a plan that does not fit)."""
    import torch.utils._pytree as pytree

    if "eager" in d:
        return {"eager": nodes[int(d["eager"])]}
    return {
        "key": str(d["key"]), "name": str(d["name"]), "nodes": int(d["nodes"]), "device": int(d["device"]),
        "in_refs": {int(s): (int(j), int(k)) for s, j, k in d["in_refs"]},
        "replay": tuple(int(x) for x in d["replay"]) if d["replay"] is not None else None,
        "outs": [(nodes[int(i)], pytree.treespec_loads(spec), [_dec_leaf(x) for x in leaves])
                 for i, spec, leaves in d["outs"]],
    }


def dumps(body: dict) -> bytes:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()
    return json.dumps({"nrt-plan": VERSION, "sha256": digest, "body": text}).encode()


def loads(data: bytes) -> dict:
    """The body of a plan file; ValueError if damaged or of another version."""
    try:
        outer = json.loads(data.decode())
        text = outer["body"]
        ok = outer.get("nrt-plan") == VERSION and hashlib.sha256(text.encode()).hexdigest() == outer["sha256"]
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"unreadable plan ({type(e).__name__})") from None
    if not ok:
        raise ValueError("checksum or version mismatch")
    return json.loads(text)
