"""The training-utilities conformance table (part of `make test`): every case
of tests/conformance/utilities_sweep.py (AMP GradScaler and autocast,
weight/spectral norm and parametrizations, gradient clipping, every optimizer
with foreach and fused, LR schedulers, checkpointing, gradient accumulation,
DataLoader with pinned memory, distribution samplers, EMA/SWA), each run on
the CPU and on neuron and compared, in worker processes.

Each case must have the status (and fallback ops) the last full run recorded
in docs/op-support.json (key "utilities"): a regression and a fix both fail.
Every expected non-native status must have its reason in
known_gaps.UTILITY_GAPS. Tolerances: utilities_sweep.py's docstring."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))

import known_gaps  # noqa: E402
from gen_op_support import extra_gap_key  # noqa: E402


def _expected() -> dict:
    with open(os.path.join(ROOT, "docs", "op-support.json")) as f:
        doc = json.load(f)
    return {(r["op"], r["variant"]): r for r in doc.get("utilities", {}).get("records", [])}


EXPECTED = _expected()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("utilities") / "all.jsonl")
    r = subprocess.run([sys.executable, os.path.join(HERE, "utilities_sweep.py"), "--out", out],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(out) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    return {(x["op"], x["variant"]): x for x in recs}


@pytest.mark.parametrize("case", sorted(EXPECTED), ids=lambda c: f"{c[0]}[{c[1]}]" if c[1] else c[0])
def test_utility_matches_recorded_status(results, case):
    exp = EXPECTED[case]
    got = results.get(case)
    assert got is not None, f"{case}: no such case in utilities_sweep.py any more; rerun `make conformance`"
    if exp["status"] not in ("native-pass",):
        assert extra_gap_key("utilities", exp), f"{case} is {exp['status']} but has no reason in known_gaps.UTILITY_GAPS"
    hint = ("fixed? rerun `make conformance` and delete its known_gaps.UTILITY_GAPS entry"
            if got["status"] == "native-pass" else "regression")
    assert got["status"] == exp["status"], (
        f"{case}: {got['status']} ({got.get('reason', '')}), recorded {exp['status']} ({exp.get('reason', '')}): {hint}")
    assert sorted(got.get("fallback_ops", [])) == sorted(exp.get("fallback_ops", [])), got.get("reason")


def test_every_case_is_recorded(results):
    missing = sorted(set(results) - set(EXPECTED))
    assert not missing, f"cases with no recorded status (rerun `make conformance`): {missing}"


def test_utility_gaps_are_current():
    for gk in known_gaps.UTILITY_GAPS:
        hits = [r for r in EXPECTED.values() if extra_gap_key("utilities", r) == gk]
        assert hits, f"known gap {gk!r}: no such utility case"
        assert any(r["status"] != "native-pass" for r in hits), f"known gap {gk!r} passes natively now: delete it"
