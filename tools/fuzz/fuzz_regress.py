"""Turning a fuzz case into a regression test: `append_case` adds the case
as one JSON line to the CASES list of tests/fuzz/test_fuzz_regressions.py,
which replays each case through the fuzzer's runner and asserts that the
CPU and neuron agree (``python tools/fuzz/fuzz.py --to-test CASE_ID``).
"""
from __future__ import annotations

import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEST_FILE = os.path.join(ROOT, "tests", "fuzz", "test_fuzz_regressions.py")
END_MARKER = "]  # end of CASES"


def strip_case(case: dict) -> dict:
    """The case without the fuzzer's private keys."""
    return {k: v for k, v in case.items() if not k.startswith("_")}


def append_case(case: dict, found_as: str, note: str = "", path: str = TEST_FILE) -> str:
    """Appends `case` (with the class it was found as) to the test file's CASES;
    returns the pytest id. A case already there is not added twice."""
    case = dict(strip_case(case), found_as=found_as)
    if note:
        case["note"] = note
    with open(path) as f:
        text = f.read()
    if END_MARKER not in text:
        raise RuntimeError(f"{path}: no '{END_MARKER}' line")
    if json.dumps(case["id"]) in text:
        return case["id"]
    line = "    " + repr(json.dumps(case, sort_keys=True)) + ",\n"
    text = text.replace(END_MARKER, line + END_MARKER, 1)
    with open(path, "w") as f:
        f.write(text)
    return case["id"]
