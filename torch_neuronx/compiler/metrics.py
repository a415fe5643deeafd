"""Compile statistics: ``torch.neuron.get_dynamo_metrics()``."""
from __future__ import annotations

import copy
import threading
from typing import Any

_lock = threading.Lock()


def _fresh() -> dict:
    return {
        "graphs_compiled": 0,       # programs built by our compiler (capture + nrt_compile)
        "recompiles": [],           # {"graph", "cause"} for each graph compiled again for a new input signature
        "cache": {"memory_hits": 0, "disk_hits": 0, "misses": 0, "corrupt_entries": 0, "disk_writes": 0,
                  "plan_hits": 0},          # graphs whose first call skipped the capture (plan.py)
        "compile_time_s": 0.0,      # sum over graphs, our part (capture + compile + cache), no Dynamo/AOT tracing
        "graphs": [],               # one row per compiled program
        "eager_ops": {},            # op -> count of ops split out of graphs and run eagerly
        "layout_fixups": [],        # ops whose eager output layout differed from their meta function's
    }


_metrics = _fresh()


def record(path: str, value: Any) -> None:
    with _lock:
        d = _metrics
        keys = path.split(".")
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] += value


def append(key: str, row: Any) -> None:
    with _lock:
        _metrics[key].append(row)


def count_eager_op(op: str) -> None:
    with _lock:
        _metrics["eager_ops"][op] = _metrics["eager_ops"].get(op, 0) + 1


def get_dynamo_metrics() -> dict:
    """Statistics of ``torch.compile(backend="neuron")`` in this process.

    ``graphs_compiled``: programs our compiler built; ``recompiles``: each
    graph built again for a new input signature, with its cause (which input
    changed shape, dtype or layout); ``cache``: artifact cache hits in memory
    and on disk, misses, corrupted entries rebuilt; ``compile_time_s`` and
    ``graphs`` (per graph: name, kind, nodes, steps, compile seconds, cache
    source); ``eager_ops``: ops run eagerly outside a graph
    (``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0``); ``layout_fixups``: ops
    whose eager result had another layout than their meta function says
    (copied into the meta layout inside the graph)."""
    with _lock:
        return copy.deepcopy(_metrics)


def reset_dynamo_metrics() -> None:
    global _metrics
    with _lock:
        _metrics = _fresh()
