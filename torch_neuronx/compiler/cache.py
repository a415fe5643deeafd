"""The artifact cache: compiled programs in memory and on disk.

A key holds everything that changes the program: the captured graph's text
(ops, shapes, dtypes, byte strides, offsets, constants, Philox params) with
its source-location lines removed, the compiler version, the flags and the
host's CPU features. Addresses and FX node names never reach the graph text,
so two processes capturing the same model share entries. Files are written
by nrt_program_save (temporary file + rename): a concurrent reader sees the
old entry, the new one or none, never a torn file; a damaged entry fails
the artifact's checksum on load and is rebuilt.
"""
from __future__ import annotations

import hashlib
import os
import threading
import warnings
from typing import Callable, Optional, Tuple

from .. import _C
from . import metrics

_memory: dict = {}
_lock = threading.Lock()


def graph_key(graph_text: str, flags: str) -> str:
    lines = [ln for ln in graph_text.splitlines() if not ln.lstrip().startswith("loc ")]
    h = hashlib.sha256()
    for part in (_C._COMPILER_VERSION, " ".join(flags.split()), _C._host_cpu_features()):
        h.update(part.encode())
        h.update(b"\0")
    h.update("\n".join(lines).encode())
    return h.hexdigest()


def entry_path(cache_dir: str, key: str) -> str:
    return os.path.join(cache_dir, key[:2], key + ".neff")


def clear_memory_cache() -> None:
    with _lock:
        _memory.clear()


def get_or_compile(key: str, compile_fn: Callable[[], Tuple[object, dict]], *, enabled: bool,
                   cache_dir: str) -> Tuple[object, Optional[dict], str]:
    """Returns (program, compile report or None, source) where source is
    'memory', 'disk' or 'compiled'."""
    if not enabled:
        prog, report = compile_fn()
        return prog, report, "compiled"
    with _lock:
        prog = _memory.get(key)
    if prog is not None:
        metrics.record("cache.memory_hits", 1)
        return prog, None, "memory"
    path = entry_path(cache_dir, key)
    if os.path.exists(path):
        try:
            prog = _C._program_load(path)
        except RuntimeError as e:
            metrics.record("cache.corrupt_entries", 1)
            warnings.warn(f"torch_neuronx: corrupted compile cache entry {path} ({e}); rebuilding it",
                          RuntimeWarning, stacklevel=3)
            prog = None
        if prog is not None:
            metrics.record("cache.disk_hits", 1)
            with _lock:
                _memory[key] = prog
            return prog, None, "disk"
    metrics.record("cache.misses", 1)
    prog, report = compile_fn()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        prog.save(path)
        metrics.record("cache.disk_writes", 1)
    except (OSError, RuntimeError) as e:
        warnings.warn(f"torch_neuronx: could not write the compile cache entry {path}: {e}", RuntimeWarning,
                      stacklevel=3)
    with _lock:
        _memory[key] = prog
    return prog, report, "compiled"
