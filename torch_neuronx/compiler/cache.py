"""The artifact cache: compiled programs in memory and on disk.

A key holds everything that changes the program: the captured graph's text
(ops, shapes, dtypes, byte strides, offsets, constants, Philox params) with
its source-location lines removed, the compiler version, the flags and the
host's CPU features. Addresses and FX node names never reach the graph text,
so two processes capturing the same model share entries. Files are written
by nrt_program_save (temporary file + rename): a concurrent reader sees the
old entry, the new one or none, never a torn file; a damaged entry fails
the artifact's checksum on load and is rebuilt.

Beside the programs live the capture plans (plan.py), keyed before any
capture, which let a new process skip the capture run on a hit.
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
_plans: dict = {}  # capture plans by plan key (plan.py)
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
        _plans.clear()


def lookup(key: str, cache_dir: str) -> Tuple[object, Optional[str]]:
    """(program, 'memory' or 'disk'), or (None, None) on a miss. A damaged
    entry is reported, counted and removed, so the next compile rewrites it."""
    with _lock:
        prog = _memory.get(key)
    if prog is not None:
        metrics.record("cache.memory_hits", 1)
        return prog, "memory"
    path = entry_path(cache_dir, key)
    if not os.path.exists(path):
        return None, None
    try:
        prog = _C._program_load(path)
    except RuntimeError as e:
        metrics.record("cache.corrupt_entries", 1)
        warnings.warn(f"torch_neuronx: corrupted compile cache entry {path} ({e}); rebuilding it",
                      RuntimeWarning, stacklevel=4)
        _remove(path)
        return None, None
    metrics.record("cache.disk_hits", 1)
    with _lock:
        _memory[key] = prog
    return prog, "disk"


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def get_or_compile(key: str, compile_fn: Callable[[], Tuple[object, dict]], *, enabled: bool,
                   cache_dir: str) -> Tuple[object, Optional[dict], str]:
    """Returns (program, compile report or None, source) where source is
    'memory', 'disk' or 'compiled'."""
    if not enabled:
        prog, report = compile_fn()
        return prog, report, "compiled"
    prog, source = lookup(key, cache_dir)
    if prog is not None:
        return prog, None, source
    path = entry_path(cache_dir, key)
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


# ---- capture plans (plan.py): keyed before the capture, JSON with a checksum ----------------

def plan_path(cache_dir: str, key: str) -> str:
    return os.path.join(cache_dir, key[:2], key + ".plan")


def get_plan(key: str, cache_dir: str) -> Tuple[Optional[dict], Optional[str]]:
    """(plan body, 'memory' or 'disk'), or (None, None). A damaged plan is
    reported, counted and removed."""
    from . import plan

    with _lock:
        body = _plans.get(key)
    if body is not None:
        return body, "memory"
    path = plan_path(cache_dir, key)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None, None
    try:
        body = plan.loads(data)
    except ValueError as e:
        bad_plan(key, cache_dir, str(e))
        return None, None
    with _lock:
        _plans[key] = body
    return body, "disk"


def bad_plan(key: str, cache_dir: str, why: str) -> None:
    """A plan that cannot be used (damaged, or it does not fit the cached
    programs): reported, counted, dropped; the graph is captured again."""
    path = plan_path(cache_dir, key)
    metrics.record("cache.corrupt_entries", 1)
    warnings.warn(f"torch_neuronx: corrupted compile cache entry {path} ({why}); rebuilding it", RuntimeWarning,
                  stacklevel=4)
    with _lock:
        _plans.pop(key, None)
    _remove(path)


def put_plan(key: str, body: dict, cache_dir: str) -> None:
    """Written to a temporary file and renamed: readers see a whole plan or none."""
    from . import plan

    with _lock:
        _plans[key] = body
    path = plan_path(cache_dir, key)
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(plan.dumps(body))
        os.replace(tmp, path)
        metrics.record("cache.disk_writes", 1)
    except OSError as e:
        _remove(tmp)
        warnings.warn(f"torch_neuronx: could not write the compile cache entry {path}: {e}", RuntimeWarning,
                      stacklevel=3)
