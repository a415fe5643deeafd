"""The fuzzer's process isolation (tools/fuzz/fuzz_pool.py), with a stand-in
worker that needs no device: a case that aborts its worker is a ``crash``, one
that outlives the per-case timeout a ``hang``, the other cases of the batch
are re-run one by one and keep their own results, and a case that dies only
after another one is still reported, with the case it needs."""
import os
import sys

FUZZ_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools", "fuzz")
if FUZZ_DIR not in sys.path:
    sys.path.insert(0, FUZZ_DIR)

from fuzz_pool import Pool  # noqa: E402

FAKE_WORKER = r'''
import json, os, sys, time
out = os.fdopen(os.dup(1), "w", buffering=1)
out.write(json.dumps({"ready": os.getpid(), "native": ["aten::add.Tensor"]}) + "\n")
armed = False
for line in sys.stdin:
    case = json.loads(line)["case"]
    out.write(json.dumps({"start": case["id"]}) + "\n")
    out.write(json.dumps({"phase": "neuron"}) + "\n")
    what = case["what"]
    if what == "crash" or (what == "crash-after-arm" and armed):
        os.abort()
    if what == "hang":
        time.sleep(60)
    if what == "arm":
        armed = True
    out.write(json.dumps({"result": {"id": case["id"], "op": "fake", "cls": "ok",
                                     "executed": ["aten::add.Tensor"]}}) + "\n")
'''


def _run(tmp_path, whats, batch_size):
    worker = tmp_path / "fake_worker.py"
    worker.write_text(FAKE_WORKER)
    cases = [{"id": f"t-{i}", "op": "fake", "what": w} for i, w in enumerate(whats)]
    pool = Pool(2, case_timeout=1.5, log_dir=str(tmp_path / "logs"), worker=str(worker))
    got = {}
    try:
        pool.run(iter(cases), lambda r: got.__setitem__(r["id"], r), batch_size=batch_size)
    finally:
        pool.close()
    return got, pool


def test_crash_and_hang_cost_one_case_each(tmp_path):
    got, pool = _run(tmp_path, ["ok", "crash", "ok", "hang", "ok", "ok"], batch_size=6)
    assert {k: v["cls"] for k, v in got.items()} == {
        "t-0": "ok", "t-1": "crash", "t-2": "ok", "t-3": "hang", "t-4": "ok", "t-5": "ok"}
    assert got["t-1"]["detail"]["reason"] == "signal SIGABRT"
    assert got["t-1"]["detail"]["side"] == "neuron"
    assert pool.native == {"aten::add.Tensor"} and pool.executed == {"aten::add.Tensor"}


def test_crash_that_needs_an_earlier_case_names_it(tmp_path):
    got, _ = _run(tmp_path, ["arm", "crash-after-arm", "ok"], batch_size=3)
    assert got["t-1"]["cls"] == "crash"
    assert got["t-1"]["detail"]["only_after"] == ["t-0"]
    assert got["t-1"]["detail"]["alone"] == "ok"
    assert got["t-2"]["cls"] == "ok"
