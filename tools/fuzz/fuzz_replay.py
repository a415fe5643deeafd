"""Replaying one case for a test: in this process, or in a worker process
when the case was found as a crash or hang (so it cannot take pytest down).
The result is annotated with known.py / allowances.py like a fuzz run's."""
from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def replay(case: dict, timeout: float = 120.0) -> dict:
    """Runs `case` on the CPU and on neuron; returns its result record."""
    from allowances import ALLOWANCES
    from fuzz_match import annotate
    from known import KNOWN

    if case.get("found_as") in ("crash", "hang"):
        res = _in_worker(case, timeout)
    else:
        from fuzz_worker import run_case
        res = run_case(case)
    annotate(case, res, ALLOWANCES, KNOWN)
    return res


def _in_worker(case: dict, timeout: float) -> dict:
    msg = json.dumps({"case": case, "repro": True}) + "\n"
    try:
        p = subprocess.run([sys.executable, os.path.join(HERE, "fuzz_worker.py")], input=msg, capture_output=True,
                           text=True, timeout=timeout, cwd=HERE)
    except subprocess.TimeoutExpired:
        return {"id": case["id"], "op": case["op"], "cls": "hang", "detail": {"timeout": timeout}}
    for line in p.stdout.splitlines():
        obj = json.loads(line)
        if "result" in obj:
            return obj["result"]
    return {"id": case["id"], "op": case["op"], "cls": "crash",
            "detail": {"returncode": p.returncode, "stderr_tail": p.stderr[-800:]}}
