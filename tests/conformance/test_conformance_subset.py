"""The fast OpInfo conformance subset (part of `make test`): about 40 common ops
in float32, each compared with the CPU forward and backward, run in worker
processes by tests/conformance/opinfo_sweep.py --subset.

Fails on any mismatch or crash, and on an error of an op that has a native
kernel (or of any op the known-gaps list does not mention). Fallbacks do not
fail: they are reported as a warning. The full sweep (`make conformance`) is
not a pytest test; opinfo_sweep.py is not collected (no test_ prefix)."""
import json
import os
import subprocess
import sys
import warnings

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SWEEP = os.path.join(HERE, "opinfo_sweep.py")
sys.path.insert(0, HERE)

import torch_neuronx  # noqa: E402
from known_gaps import KNOWN_GAPS  # noqa: E402
from opinfo_sweep import SUBSET, has_native_kernel  # noqa: E402


def _run(args, out, env=None, timeout=600):
    full_env = dict(os.environ)
    full_env.update(env or {})
    r = subprocess.run([sys.executable, SWEEP, *args, "--out", out], capture_output=True, text=True,
                       cwd=ROOT, env=full_env, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(out) as f:
        return [json.loads(line) for line in f if line.strip()], r.stderr


def _key(r):
    return r["op"] + ("." + r["variant"] if r["variant"] else "")


def _expects_native(r):
    return has_native_kernel(r["op"], torch_neuronx.native_ops())


def _listed(r):
    return any(k in KNOWN_GAPS for k in (f"{_key(r)}@{r['dtype']}", f"{r['op']}@{r['dtype']}", _key(r), r["op"]))


def test_subset_matches_cpu():
    out = os.path.join(ROOT, "build", "conformance", "subset.jsonl")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    results, log = _run(["--subset"], out)
    seen = {_key(r) for r in results} | {r["op"] for r in results}
    missing = [k for k in SUBSET if k not in seen]
    assert not missing, f"subset entries with no OpInfo in this torch's op_db: {missing}"

    failures = []
    for r in results:
        st = r["status"]
        if st in ("mismatch", "crash"):
            failures.append(r)
        elif st == "error" and (_expects_native(r) or not _listed(r)):
            failures.append(r)
    fallbacks = sorted(f"{_key(r)}: {', '.join(r['fallback_ops'])}" for r in results
                       if r["status"] == "fallback-pass")
    if fallbacks:
        warnings.warn("conformance subset: ops that ran through the CPU fallback:\n  " + "\n  ".join(fallbacks))
    assert not failures, "conformance subset failures (details in build/conformance/subset.jsonl):\n" + "\n".join(
        f"  {_key(r)} {r['dtype']}: {r['status']}: {r.get('reason', '')}" for r in failures)


def test_harness_isolates_crashes_and_hangs(tmp_path):
    """A worker that segfaults or hangs costs only its task: the task is
    recorded as a crash and a new worker finishes the others."""
    results, _ = _run(["--ops", "neg,abs,exp", "--dtypes", "float32,int64", "--workers", "1", "--timeout", "20"],
                      str(tmp_path / "crash.jsonl"), env={"CONFORMANCE_SELFTEST": "crash:abs"})
    by = {(r["op"], r["dtype"]): r for r in results}
    assert {op for op, _ in by} == {"neg", "abs", "exp"}
    for (op, _), r in by.items():
        if op == "abs":
            assert r["status"] == "crash" and "SIGSEGV" in r["reason"], r
        else:
            assert r["status"] in ("native-pass", "fallback-pass"), r

    results, _ = _run(["--ops", "neg,abs", "--dtypes", "float32", "--workers", "1", "--timeout", "5"],
                      str(tmp_path / "hang.jsonl"), env={"CONFORMANCE_SELFTEST": "hang:neg"})
    by = {r["op"]: r for r in results}
    assert by["neg"]["status"] == "crash" and "timeout" in by["neg"]["reason"]
    assert by["abs"]["status"] in ("native-pass", "fallback-pass")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
