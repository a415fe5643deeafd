"""The Dynamo backend ``neuron``: static shapes, AOTAutograd with Core ATen
decompositions minus the ops the device runs natively, and every forward,
backward and inference graph compiled through capture (graph.py)."""
from __future__ import annotations

import functools
import itertools
from typing import Any, List, Optional

import torch
from torch.fx import GraphModule

from . import metrics
from .config import resolve_options
from .graph import GraphRunner, NeuronCompileError

_graph_ids = itertools.count()

DYNAMIC_MESSAGE = (
    "torch.compile(backend='neuron') compiles static shapes only: {what}. A NeuronCore program is built "
    "for fixed tensor sizes (its memory plan and launches are fixed at compile time), so a dynamic "
    "dimension cannot be compiled. Drop dynamic=True / mark_dynamic; with the default dynamic=None each "
    "new input shape compiles its own static graph (cached). To bound the number of graphs, pad inputs "
    "to a fixed size or bucket them into a few sizes (e.g. sequence lengths rounded up to 128).")


@functools.lru_cache(maxsize=None)
def decompositions() -> dict:
    """Core ATen decompositions, minus the ops with a native neuron kernel
    (kept as single nodes: one fused kernel beats its decomposition)."""
    from torch._decomp import core_aten_decompositions

    from .. import native_ops

    native = set(native_ops())
    table = dict(core_aten_decompositions())
    keep = {}
    for op, fn in table.items():
        name = op.name() if hasattr(op, "name") else str(op)
        short = name.split("::", 1)[-1]
        base = short.split(".", 1)[0]
        if name in native or short in native or base in native:
            continue
        keep[op] = fn
    return keep


def _check_static(gm: GraphModule, example_inputs: List[Any]) -> None:
    """dynamic=True / mark_dynamic are errors; dimensions Dynamo made
    dynamic by itself after a shape change are specialised back to ints."""
    import torch._dynamo.config as dconfig
    from torch.fx.experimental.symbolic_shapes import guard_int

    if not dconfig.assume_static_by_default:
        raise NeuronCompileError(DYNAMIC_MESSAGE.format(what="torch.compile(..., dynamic=True) was given"))
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        ga = node.meta.get("grapharg")
        ex = getattr(ga, "example", None) if ga is not None else None
        if isinstance(ex, torch.Tensor) and getattr(ex, "_dynamo_dynamic_indices", None):
            dims = sorted(ex._dynamo_dynamic_indices)
            raise NeuronCompileError(DYNAMIC_MESSAGE.format(
                what=f"torch._dynamo.mark_dynamic marked dimension(s) {dims} of input '{node.name}' dynamic"))
    for x in example_inputs:
        if isinstance(x, torch.SymInt):
            guard_int(x)
        elif isinstance(x, torch.Tensor):
            for s in list(x.shape) + list(x.stride()) + [x.storage_offset()]:
                if isinstance(s, torch.SymInt):
                    guard_int(s)


_frame_inputs: dict = {}


def _shapes(example_inputs: List[Any]) -> list:
    out = []
    for x in example_inputs:  # tensors only: Dynamo adds size inputs when it tries a dynamic graph
        if isinstance(x, torch.Tensor):
            out.append(("tensor", tuple(int(s) for s in x.shape), x.dtype))
    return out


def _note_recompile(gid: int, example_inputs: List[Any]) -> None:
    """A frame Dynamo compiles again (its guards failed): record why, in the
    terms a static-shape user needs (which input changed shape)."""
    try:
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
    except Exception:
        cid = None
    if cid is None or cid.frame_id is None:
        return
    key = (cid.frame_id, getattr(cid, "compiled_autograd_id", None))
    shapes = _shapes(example_inputs)
    prev = _frame_inputs.get(key)
    _frame_inputs[key] = shapes
    if prev is None or not cid.frame_compile_id:
        return
    cause = "guards failed (same input shapes)"
    if len(prev) != len(shapes):
        cause = f"{len(shapes)} tensor inputs (was {len(prev)})"
    else:
        for i, (a, b) in enumerate(zip(prev, shapes)):
            if a != b:
                if a[1] != b[1]:
                    cause = f"tensor input {i}: new shape {b[1]} (was {a[1]})"
                else:
                    cause = f"tensor input {i}: new dtype {b[2]} (was {a[2]})"
                break
    metrics.append("recompiles", {"graph": f"g{gid}", "frame": str(cid), "cause": cause})


def neuron_backend(gm: GraphModule, example_inputs: List[Any], options: Optional[dict] = None, **kwargs: Any):
    """``torch.compile(model, backend="neuron")``."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import default_partition

    from . import install

    install()
    if kwargs.get("mode") not in (None, "default"):
        import warnings

        warnings.warn(f"torch.compile(backend='neuron'): mode={kwargs['mode']!r} has no effect; using the default",
                      RuntimeWarning, stacklevel=2)
    opts = resolve_options(options)
    _check_static(gm, example_inputs)
    gid = next(_graph_ids)
    _note_recompile(gid, example_inputs)
    counter = itertools.count()

    def compiler(kind: str):
        def compile_graph(g: GraphModule, inputs: List[Any]):
            name = f"g{gid}_{kind}" + (f"{next(counter)}" if kind == "inference" else "")
            return GraphRunner(g, kind, name, opts)

        return compile_graph

    backend = aot_autograd(
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
        decompositions=decompositions(),
        partition_fn=default_partition,
        keep_inference_input_mutations=True,
    )
    return backend(gm, example_inputs)


neuron_backend.compiler_name = "neuron"
