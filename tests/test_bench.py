"""`make bench` runs: benchmarks/run.py --smoke puts every case family through
the harness once at tiny sizes into a temporary directory. Checks that every
case has times on both devices and that the report was written; never how
fast anything is."""
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import cases  # noqa: E402
import report  # noqa: E402


def finite_positive(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def test_smoke_run_writes_every_case_and_the_report(tmp_path):
    # The timeout only stops a hang; it is not a speed check.
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "run.py"), "--smoke", "--out",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    with open(tmp_path / "results.json") as f:
        results = json.load(f)
    expected = cases.all_cases(cases.Scale("smoke"))
    rows = {row["name"]: row for row in results["results"]}
    assert sorted(rows) == sorted(c.name for c in expected)
    assert {row["family"] for row in rows.values()} == {c.family for c in expected}
    for name, row in rows.items():
        assert not row["error"], (name, row["error"])
        for dev in ("cpu", "neuron"):
            assert finite_positive(row[dev]["median_s"]), (name, dev, row[dev])
        assert finite_positive(row["ratio"]), name
        if row["limit"]:  # every limit a case names is one the run measured (bf16 may be n/a)
            assert row["limit"] in report.LIMIT_NAMES, (name, row["limit"])
            if report.ceiling(row["limit"], results["limits"]):
                assert finite_positive(row["neuron_fraction"]), name
        assert isinstance(row["fallbacks"], dict)

    machine = results["machine"]
    assert machine["cpu"]["cores"] >= 1 and machine["torch"]
    assert finite_positive(results["limits"]["triad_gbs"])
    assert finite_positive(results["limits"]["peak_fp32_gflops"])
    scaling = results["thread_scaling"]
    assert set(scaling) == {"1", str(min(2, os.cpu_count()))}
    for per_case in scaling.values():
        assert per_case, scaling
        for row in per_case.values():
            assert finite_positive(row["neuron"]["median_s"]) and finite_positive(row["cpu"]["median_s"])

    doc = (tmp_path / "performance.md").read_text()
    assert "## Targets" in doc and "## Machine" in doc
    for name in rows:
        assert f"| {name} |" in doc, name
    for png in ("gemm.png", "bandwidth.png", "batch.png", "threads.png"):
        assert (tmp_path / "perf" / png).stat().st_size > 0


def _row(name, family, ratio, limit=None, fraction=None, rate=None, x=None):
    return dict(name=name, family=family, ratio=ratio, limit=limit, neuron_fraction=fraction, neuron_rate=rate,
                x=x, error={})


def test_targets_are_computed_from_the_results():
    rows = [
        _row("add, 1 element", cases.DISPATCH, 0.9),
        _row("mm f32 1024", cases.GEMM_SQUARE, 0.8, "fp32", 0.9, 200.0, 1024),
        _row("mm bf16 1024", cases.GEMM_SQUARE, 1.2, "bf16", 0.5, 300.0, 1024),
        _row("add f32", cases.ELEMENTWISE, 0.95, "bw", 0.92),
        _row("GPT-2 small training step f32", cases.MODELS, 0.9, "fp32", 0.3),
        dict(_row("broken", cases.REDUCTIONS, None), error={"neuron": "RuntimeError: no kernel"}),
    ]
    found = report.targets(rows)

    def target(words: str) -> dict:
        return next(t for t in found if words in t["target"])

    every = target("Every case")
    assert every["status"] == "missed"
    assert [m.split(" (")[0] for m in every["missed"]] == ["mm bf16 1024", "broken"]
    assert target("Model steps")["status"] == "missed"
    assert target("square sizes")["status"] == "met"
    assert target("transformer shape")["status"] == "n/a"
    assert target("bfloat16 >= 1.7x")["status"] == "missed"
    assert target("bfloat16 >= 1.7x")["missed"] == ["mm bf16 1024 (1.50x)"]
    assert target("triad")["status"] == "met"
    assert target("Dispatch")["status"] == "met"
