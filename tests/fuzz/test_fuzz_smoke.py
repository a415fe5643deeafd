"""A short seeded run of the differential fuzzer (tools/fuzz) as a regression
guard: the same SEED and case count every time, 2 workers, at most ~60 s.
It fails on any crash, hang, or disagreement between the CPU and neuron that
tools/fuzz/known.py and allowances.py do not list (the new ones are printed
with reproducers). A fixed root shrinks known.py; this run then guards it.
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FUZZ = os.path.join(ROOT, "tools", "fuzz", "fuzz.py")
OUT = os.path.join(ROOT, "build", "fuzz", "smoke")
SEED = 20261201
MAX_CASES = 15000
SECONDS = 50


def test_seeded_fuzz_has_nothing_new():
    cmd = [sys.executable, FUZZ, "--seed", str(SEED), "--max-cases", str(MAX_CASES), "--seconds", str(SECONDS),
           "--workers", "2", "--no-minimise", "--strict", "--quiet", "--out", OUT]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=SECONDS + 70, cwd=ROOT)
    new = []
    results = os.path.join(OUT, "results.jsonl")
    if os.path.exists(results):
        with open(results) as f:
            for line in f:
                if '"cls": "ok"' in line:
                    continue
                r = json.loads(line)
                if not r.get("known") and not r.get("allowed"):
                    new.append(r)
    shown = "\n\n".join(f"{r['id']} {r['op']} {r['cls']}: cpu {r.get('cpu_exc')} neuron {r.get('dev_exc')} "
                        f"{(r.get('detail') or {}).get('maxdiff', '')}\n{r.get('repro', '')}" for r in new[:5])
    assert p.returncode == 0 and not new, (
        f"fuzz exit {p.returncode}; {len(new)} new disagreements (not in tools/fuzz/known.py or allowances.py):\n"
        f"{shown}\n--- stdout tail ---\n{p.stdout[-3000:]}\n--- stderr tail ---\n{p.stderr[-2000:]}")
