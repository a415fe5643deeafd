"""Which ATen ops a training step runs on the device, and what each means for
a migration: native or CPU fallback, and whether ``torch.compile(backend=
"neuron")`` can lower it.

Two views are taken of the same step. The device's own accounting
(``torch_neuronx.get_executed_ops()`` / ``get_fallback_counts()``) gives
every op the backend executed, per phase (forward, backward, optimizer).
A TorchDispatchMode sees each op as it is dispatched to the device, with
its input shapes and dtypes: the number of distinct (op, shapes, dtypes)
signatures is what an eager accelerator compiles a kernel for on first use,
and float64 inputs are noticed there.
"""
from __future__ import annotations

import threading
import types
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

import torch_neuronx

PHASES = ("forward", "backward", "optimizer")

# Ops whose result is read on the host or whose output size depends on device
# data: Dynamo breaks the graph there (the op runs eagerly between graphs),
# and a host read inside a captured region fails the capture.
HOST_READ_OPS = frozenset({
    "aten::_local_scalar_dense", "aten::item", "aten::nonzero", "aten::nonzero_static",
    "aten::masked_select", "aten::_unique2", "aten::unique_dim", "aten::unique_consecutive",
    "aten::repeat_interleave.Tensor", "aten::_assert_async.msg", "aten::equal",
})

_IGNORED_NAMESPACES = ("profiler::",)


def _overload(name: str) -> Optional[torch._ops.OpOverload]:
    ns, _, rest = name.partition("::")
    base, _, ov = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, ns), base)
        return getattr(packet, ov or "default")
    except (AttributeError, RuntimeError):
        return None


def compile_status(name: str) -> Tuple[str, str]:
    """('yes' | 'no' | 'graph break', why) for one op under the neuron
    compiler, using the compiler's own legality rule (read only)."""
    from torch_neuronx.compiler.graph import lowerable

    if name in HOST_READ_OPS:
        return "graph break", "reads device data on the host: Dynamo splits the graph there and runs it eagerly"
    op = _overload(name)
    if op is None:
        return "yes", "not an operator overload (infrastructure)"
    if lowerable(types.SimpleNamespace(op="call_function", target=op)):
        return "yes", ""
    return "no", "no native kernel: torch.compile(backend='neuron') fails on it"


def _leaf_signature(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return (tuple(x.shape), str(x.dtype).replace("torch.", ""))
    return None


class OpRecorder(TorchDispatchMode):
    """Records, per phase, every op dispatched to the device with its input
    shapes and dtypes. Autograd's worker threads inherit the mode, so the
    backward is seen too; a lock keeps their updates apart."""

    def __init__(self) -> None:
        super().__init__()
        self.phase = "forward"
        self.signatures: Dict[str, set] = {p: set() for p in PHASES}
        self.dispatched: Dict[str, Dict[str, int]] = {p: {} for p in PHASES}
        self.float64_ops: Dict[str, int] = {}
        self._lock = threading.Lock()

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.name()
        if not name.startswith(_IGNORED_NAMESPACES):
            leaves = pytree.tree_leaves((args, kwargs))
            on_device = any(isinstance(x, torch.Tensor) and x.device.type == "neuron" for x in leaves)
            if on_device:
                sig = (name, tuple(s for s in (_leaf_signature(x) for x in leaves) if s is not None))
                f64 = any(isinstance(x, torch.Tensor) and x.dtype in (torch.float64, torch.complex128)
                          for x in leaves)
                with self._lock:
                    self.signatures[self.phase].add(sig)
                    d = self.dispatched[self.phase]
                    d[name] = d.get(name, 0) + 1
                    if f64:
                        self.float64_ops[name] = self.float64_ops.get(name, 0) + 1
        return func(*args, **kwargs)


class PhaseTracker:
    """Reads the device's op accounting between the phases of one step:
    ``with tracker.phase("forward"): ...``. It clears the counters first, so
    the caller's own counts are lost (evaluate runs on its own copies)."""

    def __init__(self, recorder: Optional[OpRecorder] = None) -> None:
        self.recorder = recorder
        self.executed: Dict[str, Dict[str, int]] = {p: {} for p in PHASES}
        self.fallback: Dict[str, Dict[str, int]] = {p: {} for p in PHASES}

    def phase(self, name: str) -> "_Phase":
        return _Phase(self, name)


class _Phase:
    def __init__(self, tracker: PhaseTracker, name: str) -> None:
        self.tracker, self.name = tracker, name

    def __enter__(self) -> None:
        torch.neuron.synchronize()
        torch_neuronx.clear_op_tracking()
        if self.tracker.recorder is not None:
            self.tracker.recorder.phase = self.name

    def __exit__(self, *exc: Any) -> bool:
        torch.neuron.synchronize()
        for k, v in torch_neuronx.get_executed_ops().items():
            self.tracker.executed[self.name][k] = self.tracker.executed[self.name].get(k, 0) + v
        for k, v in torch_neuronx.get_fallback_counts().items():
            self.tracker.fallback[self.name][k] = self.tracker.fallback[self.name].get(k, 0) + v
        torch_neuronx.clear_op_tracking()
        return False


def op_table(tracker: PhaseTracker) -> dict:
    """The report's op section: one row per executed op (calls per phase,
    native or fallback, compile status), the fallback and non-lowerable
    lists, and the signature counts."""
    names = sorted(set().union(*(tracker.executed[p] for p in PHASES)))
    fallback_names = set().union(*(tracker.fallback[p] for p in PHASES))
    rows: List[dict] = []
    for name in names:
        calls = {p: tracker.executed[p].get(name, 0) for p in PHASES}
        status, why = compile_status(name)
        rows.append({
            "name": name, **calls, "calls": sum(calls.values()),
            "execution": "cpu fallback" if name in fallback_names else "native",
            "compiler": status, "compiler_note": why,
        })
    rows.sort(key=lambda r: (-r["calls"], r["name"]))
    rec = tracker.recorder
    sig_by_phase = {p: len(rec.signatures[p]) for p in PHASES} if rec else {}
    all_sigs = set().union(*rec.signatures.values()) if rec else set()
    return {
        "ops": rows,
        "distinct_ops": len(rows),
        "calls": sum(r["calls"] for r in rows),
        "ops_by_phase": {p: len(tracker.executed[p]) for p in PHASES},
        "fallback_ops": sorted(fallback_names),
        "fallback_calls": {n: sum(tracker.fallback[p].get(n, 0) for p in PHASES) for n in sorted(fallback_names)},
        "not_lowerable": [r["name"] for r in rows if r["compiler"] == "no"],
        "graph_breaks": [r["name"] for r in rows if r["compiler"] == "graph break"],
        "signatures": len(all_sigs),
        "signatures_by_phase": sig_by_phase,
        "float64_ops": dict(sorted(rec.float64_ops.items())) if rec else {},
        "dispatched": {p: dict(sorted(rec.dispatched[p].items())) for p in PHASES} if rec else {},
    }
