"""Regression cases found by the differential fuzzer (tools/fuzz), replayed
through the fuzzer's own runner: each case runs on the CPU and on neuron
from identical inputs and must agree (class ``ok``). A case whose
disagreement is still listed in tools/fuzz/known.py is reported as xfail;
once fixed it passes, and the test guards the fix.

Add a case with ``python tools/fuzz/fuzz.py --to-test CASE_ID`` (it is
minimised first); the list below is data, one JSON case per line.
"""
import json
import os
import sys

import pytest

FUZZ_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools", "fuzz")
if FUZZ_DIR not in sys.path:
    sys.path.insert(0, FUZZ_DIR)

CASES: list[str] = [
]  # end of CASES


def _load() -> list[dict]:
    return [json.loads(s) for s in CASES]


@pytest.mark.parametrize("case", _load(), ids=lambda c: f"{c['id']}-{c['op']}")
def test_fuzz_case_agrees(case):
    from fuzz_replay import replay

    res = replay(case)
    if res["cls"] != "ok" and res.get("known"):
        pytest.xfail(f"known disagreement {res['known']}")
    assert res["cls"] == "ok", f"{res['cls']}: {res.get('detail')}\n{res.get('repro', '')}"
