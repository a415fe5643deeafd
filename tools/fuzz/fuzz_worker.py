"""Worker process: reads cases (one JSON object a line) on stdin, runs each on
the CPU and on neuron, and writes ``{"start": id}`` before and
``{"result": {...}}`` after every case on its protocol stream (the original
stdout; anything else printed, by Python or by C code, goes to stderr).

Run by fuzz_pool.py; by hand: ``echo '<case json>' | python tools/fuzz/fuzz_worker.py``.
"""
from __future__ import annotations

import json
import os
import sys
import time
import warnings
from typing import Any, TextIO


def _protocol_stream() -> TextIO:
    """Keep fd 1 for the protocol only: dup it, then point fd 1 at stderr."""
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", buffering=1)


_PROTO: TextIO | None = None   # the protocol stream, in a worker process


def _phase(name: str) -> None:
    """Tells the pool which side runs now (a crash or hang is attributed to it)."""
    if _PROTO is not None:
        _PROTO.write(json.dumps({"phase": name}) + "\n")


_SEEN_OPS: set[str] = set()   # ops already reported by this worker (results carry only new ones)


def run_case(case: dict, want_repro: bool = True) -> dict:
    """Runs `case` on both sides and returns its result record (see fuzz_compare for the classes)."""
    import torch
    import torch_neuronx

    from fuzz_case import DEVICE, build_bases, repro_src, run_side
    from fuzz_compare import classify

    t0 = time.monotonic()
    res: dict[str, Any] = {"id": case["id"], "op": case["op"], "family": case["family"], "fn": case["fn"]}
    leaked = None
    try:
        torch.neuron.synchronize()
    except Exception as e:  # noqa: BLE001  an earlier case's error surfacing now
        leaked = f"{type(e).__name__}: {e}"
    try:
        bases = build_bases(case)
    except Exception as e:  # noqa: BLE001
        res.update(cls="invalid-case", detail={"error": f"{type(e).__name__}: {e}"}, secs=0.0)
        return res
    _phase("cpu")
    cpu = run_side(case, bases, "cpu")
    torch_neuronx.clear_op_tracking()
    _phase("neuron")
    dev = run_side(case, bases, DEVICE)
    executed = torch_neuronx.get_executed_ops()
    fallback = torch_neuronx.get_fallback_ops()
    def f64_run():  # noqa: ANN202
        _phase("cpu-float64")
        return run_side(case, bases, "cpu", f64=True)
    def f32_run():  # noqa: ANN202
        _phase("cpu-float32")
        return run_side(case, bases, "cpu", f32=True)
    has64 = any(t["dtype"] == "float64" for t in case["tensors"]) or "float64" in json.dumps(case["kwargs"])
    cls, detail = classify(case, cpu, dev, f64_run, f32_run if has64 else None)
    _phase("compare")
    new_ops = set(executed) - _SEEN_OPS
    _SEEN_OPS.update(new_ops)
    res.update(cls=cls, detail=detail, secs=round(time.monotonic() - t0, 4),
               cpu_exc=cpu.exc, dev_exc=dev.exc, cpu_bexc=cpu.bexc, dev_bexc=dev.bexc,
               executed=sorted(new_ops), fallback=fallback)
    if dev.late:
        res["dev_late"] = dev.late
    if leaked:
        res["leaked_from_previous"] = leaked
    res["dtypes"] = {str(k): str(v.dtype) for k, v in {**cpu.values, **dev.values}.items()
                     if isinstance(v, torch.Tensor) and k.startswith("out")}
    if want_repro and cls != "ok":
        try:
            res["repro"] = repro_src(case, bases)
        except Exception as e:  # noqa: BLE001
            res["repro"] = f"# reproducer failed: {type(e).__name__}: {e}"
    return res


def main() -> None:
    global _PROTO
    proto = _PROTO = _protocol_stream()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    warnings.simplefilter("ignore")
    import torch
    import torch_neuronx

    torch.set_num_threads(1)
    proto.write(json.dumps({"ready": os.getpid(), "native": torch_neuronx.native_ops()}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        case = msg["case"]
        if msg.get("repro_only"):
            from fuzz_case import build_bases, repro_src
            try:
                text = repro_src(case, build_bases(case))
            except Exception as e:  # noqa: BLE001
                text = f"# reproducer failed: {type(e).__name__}: {e}"
            proto.write(json.dumps({"start": case["id"]}) + "\n")
            proto.write(json.dumps({"result": {"id": case["id"], "op": case["op"], "cls": "repro",
                                               "repro": text}}) + "\n")
            continue
        proto.write(json.dumps({"start": case["id"]}) + "\n")
        try:
            res = run_case(case, msg.get("repro", True))
        except Exception as e:  # noqa: BLE001  a bug in the fuzzer itself, not in the op
            res = {"id": case["id"], "op": case["op"], "family": case.get("family"), "cls": "fuzzer-error",
                   "detail": {"error": f"{type(e).__name__}: {e}"}}
        proto.write(json.dumps({"result": res}, default=str) + "\n")


if __name__ == "__main__":
    main()
