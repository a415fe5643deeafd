"""The ModuleInfo conformance subset (part of `make test`): a representative
set of module_db entries (layers, norms, recurrent cells and modules,
attention and transformers, pooling, losses, lazy and random-sample modules)
× float32/bfloat16 × train/eval, each compared with the CPU (forward, input
and parameter gradients, buffers) by tests/conformance/moduleinfo_sweep.py in
worker processes.

Each case must have the status the last full sweep recorded in
docs/op-support.json (key "modules"): a regression (a case that passed and
now mismatches, errors or crashes) and a fix (a known gap that passes now)
both fail, the latter asking to rerun `make conformance` and update
known_gaps.py. Every expected non-native status must have its reason in
known_gaps.MODULE_GAPS. Tolerances: the OpInfo sweep's TOLERANCES."""
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

SUBSET = (
    "nn.Linear", "nn.Bilinear", "nn.Conv2d", "nn.ConvTranspose2d", "nn.LazyConv2d", "nn.BatchNorm2d",
    "nn.LayerNorm", "nn.GroupNorm", "nn.RMSNorm", "nn.InstanceNorm2d", "nn.Embedding", "nn.PReLU", "nn.GELU",
    "nn.MaxPool2d", "nn.AdaptiveAvgPool2d", "nn.FractionalMaxPool2d", "nn.ReflectionPad2d",
    "nn.CrossEntropyLoss", "nn.CTCLoss", "nn.LSTMCell", "nn.GRUCell", "nn.LSTM", "nn.GRU",
    "nn.MultiheadAttention", "nn.TransformerEncoderLayer", "nn.TransformerEncoder", "nn.Transformer",
)
DTYPES = ("float32", "bfloat16")
MODES = ("train", "eval")


def _expected() -> dict:
    with open(os.path.join(ROOT, "docs", "op-support.json")) as f:
        doc = json.load(f)
    return {(r["op"], r["variant"], r["dtype"]): r for r in doc.get("modules", {}).get("records", [])}


EXPECTED = _expected()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("modules") / "subset.jsonl")
    r = subprocess.run([sys.executable, os.path.join(HERE, "moduleinfo_sweep.py"), "--modules", ",".join(SUBSET),
                        "--dtypes", ",".join(DTYPES), "--modes", ",".join(MODES), "--out", out],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(out) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    return {(x["op"], x["variant"], x["dtype"]): x for x in recs}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("module", SUBSET)
def test_module_matches_recorded_status(results, module, mode, dtype):
    key = (module, mode, dtype)
    assert key in EXPECTED, f"{key} is not in docs/op-support.json: run `make conformance`"
    exp = EXPECTED[key]
    got = results.get(key)
    assert got is not None, f"no result for {key}"
    if exp["status"] not in ("native-pass", "skipped-cpu"):
        assert extra_gap_key("modules", exp), f"{key} is {exp['status']} but has no reason in known_gaps.MODULE_GAPS"
    hint = ("fixed? rerun `make conformance` and delete its known_gaps.MODULE_GAPS entry"
            if got["status"] == "native-pass" else "regression")
    assert got["status"] == exp["status"], (
        f"{module} {mode} {dtype}: {got['status']} ({got.get('reason', '')}), recorded {exp['status']} "
        f"({exp.get('reason', '')}): {hint}")
    assert sorted(got.get("fallback_ops", [])) == sorted(exp.get("fallback_ops", [])), got.get("reason")


def test_module_gaps_are_current():
    """Every MODULE_GAPS entry names a ModuleInfo that has a non-native case."""
    names = {k[0] for k in EXPECTED}
    for gk in known_gaps.MODULE_GAPS:
        base = gk.split("@")[0]
        assert base in names or base.rsplit(".", 1)[0] in names, f"known gap {gk!r}: no such ModuleInfo"
        hits = [r for r in EXPECTED.values() if extra_gap_key("modules", r) == gk]
        assert any(r["status"] != "native-pass" for r in hits), f"known gap {gk!r} passes natively now: delete it"
