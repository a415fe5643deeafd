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
    '{"args": [{"t": 0}, 0, {"t": 1}], "backward": false, "compare": {"acc": false, "ties": false}, "family": "index", "fn": "torch.gather", "found_as": "value-mismatch", "id": "44-132606.min", "kwargs": {}, "op": "gather", "sizes": {"s0": 3, "s1": 2, "s2": 2}, "tensors": [{"dtype": "float32", "fill": "ints", "layout": "contiguous", "role": "in", "seed": 170519511, "shape": ["s0", "s1"]}, {"dtype": "int32", "fill": "index", "fill_args": {"hi": "s0", "neg": false}, "layout": "expanded", "role": "idx", "seed": 605324995, "shape": ["s2", "s1"]}]}',
    '{"args": [{"t": 0}, {"t": 1}], "backward": false, "compare": {"acc": false, "ties": false}, "family": "binary", "fn": "torch.sub", "found_as": "value-mismatch", "id": "21-108709.min", "kwargs": {"out": {"t": 2}}, "op": "sub", "sizes": {"s0": 1, "s1": 1, "s2": 1, "s3": 1}, "tensors": [{"dtype": "uint8", "fill": "ints", "layout": "contiguous", "role": "in", "seed": 44367417, "shape": ["s0", "s1", "s2", "s3"]}, {"dtype": "uint8", "fill": "ints", "layout": "contiguous", "role": "in", "seed": 1007799139, "shape": [1, 1, "s2", 1]}, {"dtype": "float32", "fill": "ints", "layout": "contiguous", "role": "out", "seed": 294295390, "shape": [0]}]}',
    '{"args": [{"t": 0}], "backward": false, "compare": {"acc": true, "ties": false}, "family": "resample", "fn": "F.interpolate", "found_as": "value-mismatch", "id": "21-2957.min", "kwargs": {"antialias": true, "mode": "bilinear", "size": [7, 1]}, "op": "interpolate", "sizes": {"s0": 1, "s1": 1, "s2": 2, "s3": 2}, "tensors": [{"dtype": "float32", "fill": "ints", "layout": "contiguous", "role": "in", "seed": 1055944952, "shape": ["s0", "s1", "s2", "s3"]}]}',
    '{"args": [{"t": 0}], "backward": false, "compare": {"acc": false, "ties": false}, "family": "unary", "fn": "torch.sgn", "found_as": "ok", "id": "27182818-428860", "kwargs": {"out": {"t": 1}}, "op": "sgn", "sizes": {"s0": 4, "s1": 4}, "tensors": [{"dtype": "complex64", "fill": "edge", "layout": "transposed", "role": "in", "seed": 583604785, "shape": ["s0", "s1"]}, {"dtype": "complex64", "fill": "ints", "layout": "contiguous", "role": "out", "seed": 767647107, "shape": ["s0", "s1"]}]}',
    '{"args": [{"t": 0}, {"t": 1}, 1e-40], "backward": false, "compare": {"acc": false, "ties": false}, "family": "ternary", "fn": "torch.lerp", "found_as": "ok", "id": "57721566-309553", "kwargs": {"out": {"t": 2}}, "op": "lerp", "sizes": {"s0": 2}, "tensors": [{"dtype": "float16", "fill": "normal", "layout": "strided", "role": "in", "seed": 620231705, "shape": ["s0"]}, {"dtype": "float16", "fill": "edge", "layout": "contiguous", "role": "in", "seed": 154635188, "shape": ["s0"]}, {"dtype": "complex64", "fill": "ints", "layout": "contiguous", "role": "out", "seed": 871334406, "shape": ["s0"]}]}',
    '{"args": [{"t": 0}], "backward": false, "compare": {"acc": true, "ties": false}, "family": "reduce", "fn": "torch.prod", "found_as": "ok", "id": "57721566-669339", "kwargs": {"dim": -1, "dtype": {"dtype": "complex64"}}, "op": "prod", "sizes": {"s0": 1, "s1": 6, "s2": 3, "s3": 5}, "tensors": [{"dtype": "float32", "fill": "edge", "layout": "channels_last", "role": "in", "seed": 616608366, "shape": ["s0", "s1", "s2", "s3"]}]}',
    '{"args": [{"t": 0}], "backward": false, "compare": {"acc": true, "ties": false}, "family": "reduce", "fn": "torch.sum", "found_as": "ok", "id": "57721566-671848", "kwargs": {"dim": 0}, "op": "sum", "sizes": {"s0": 6}, "tensors": [{"dtype": "complex64", "fill": "edge", "layout": "offset", "role": "in", "seed": 597739873, "shape": ["s0"]}]}',
    '{"args": [{"t": 2}, {"t": 0}, {"t": 1}], "backward": false, "compare": {"acc": true, "ties": false}, "family": "matmul", "fn": "torch.addmv", "found_as": "ok", "id": "60221409-1330142.min", "kwargs": {"beta": 2.0}, "op": "addmm", "sizes": {"s0": 1, "s1": 6, "s2": 1, "s3": 1}, "tensors": [{"dtype": "float16", "fill": "ints", "layout": "offset", "role": "in", "seed": 111690930, "shape": ["s0", "s1"]}, {"dtype": "float16", "fill": "edge", "layout": "contiguous", "role": "in", "seed": 892052833, "shape": ["s1"]}, {"dtype": "float16", "fill": "edge", "layout": "strided", "role": "in", "seed": 727434250, "shape": ["s0"]}]}',
    '{"args": [{"t": 0}, 0.5], "backward": false, "compare": {"acc": false, "ties": false}, "family": "binary", "fn": "torch.pow", "found_as": "ok", "id": "161803398-2695336", "kwargs": {"out": {"t": 1}}, "op": "pow", "sizes": {"s0": 6, "s1": 4, "s2": 6}, "tensors": [{"dtype": "float32", "fill": "edge", "layout": "contiguous", "role": "in", "seed": 927105993, "shape": ["s0", "s1", "s2"]}, {"dtype": "bfloat16", "fill": "ints", "layout": "contiguous", "role": "out", "seed": 328839600, "shape": ["s0", "s1", "s2"]}]}',
    '{"args": [{"t": 4}, {"t": 0}, {"t": 1}], "backward": true, "compare": {"acc": true, "ties": false}, "family": "norm", "fn": "F.batch_norm", "found_as": "ok", "id": "18101-863788", "kwargs": {"bias": {"t": 3}, "training": true, "weight": {"t": 2}}, "op": "batch_norm", "sizes": {"s0": 3, "s1": 1, "s2": 4}, "tensors": [{"dtype": "float32", "fill": "normal", "layout": "contiguous", "role": "w", "seed": 192718679, "shape": ["s0"]}, {"dtype": "float32", "fill": "positive", "layout": "contiguous", "role": "w", "seed": 666364508, "shape": ["s0"]}, {"dtype": "float32", "fill": "normal", "layout": "contiguous", "role": "in", "seed": 905906553, "shape": ["s0"]}, {"dtype": "float32", "fill": "normal", "layout": "contiguous", "role": "in", "seed": 228410525, "shape": ["s0"]}, {"dtype": "float32", "fill": "edge", "layout": "transposed", "role": "in", "seed": 947077368, "shape": ["s1", "s0", "s2"]}]}',
    '{"args": [{"t": 0}, {"t": 1}, {"t": 2}], "backward": true, "compare": {"acc": true, "ties": false}, "family": "attention", "fn": "F.scaled_dot_product_attention", "found_as": "ok", "id": "19402-245661", "kwargs": {"attn_mask": {"t": 3}}, "op": "sdpa", "sizes": {"s0": 2, "s1": 3, "s2": 3, "s3": 1, "s4": 3}, "tensors": [{"dtype": "bfloat16", "fill": "edge", "layout": "contiguous", "role": "in", "seed": 191714098, "shape": ["s0", "s1", "s2", "s4"]}, {"dtype": "bfloat16", "fill": "normal", "layout": "transposed", "role": "in", "seed": 16999827, "shape": ["s0", "s1", "s3", "s4"]}, {"dtype": "bfloat16", "fill": "edge", "layout": "contiguous", "role": "in", "seed": 1030081571, "shape": ["s0", "s1", "s3", "s4"]}, {"dtype": "bool", "fill": "mask", "layout": "offset", "role": "mask", "seed": 735976010, "shape": ["s0", 1, "s2", 1]}]}',
    '{"args": [{"t": 0}, {"t": 1}, {"t": 2}], "backward": true, "compare": {"acc": true, "ties": false}, "family": "attention", "fn": "F.scaled_dot_product_attention", "found_as": "ok", "id": "15001-43567", "kwargs": {"scale": 1.0}, "op": "sdpa", "sizes": {"s0": 2, "s1": 2, "s2": 5, "s3": 2, "s4": 8}, "tensors": [{"dtype": "float16", "fill": "edge", "layout": "contiguous", "role": "in", "seed": 1034143494, "shape": ["s0", "s1", "s2", "s4"]}, {"dtype": "float16", "fill": "ints", "layout": "contiguous", "role": "in", "seed": 596023703, "shape": ["s0", "s1", "s3", "s4"]}, {"dtype": "float16", "fill": "normal", "layout": "contiguous", "role": "in", "seed": 59195288, "shape": ["s0", "s1", "s3", "s4"]}]}',
    '{"args": [{"t": 0}, {"t": 1}, {"t": 2}], "backward": false, "compare": {"acc": true, "ties": false}, "family": "attention", "fn": "F.scaled_dot_product_attention", "found_as": "ok", "id": "15001-121155", "kwargs": {"scale": 1.0}, "op": "sdpa", "sizes": {"s0": 2, "s1": 3, "s2": 1, "s3": 2, "s4": 8}, "tensors": [{"dtype": "bfloat16", "fill": "edge", "layout": "contiguous", "role": "in", "seed": 1046639919, "shape": ["s0", "s1", "s2", "s4"]}, {"dtype": "bfloat16", "fill": "ints", "layout": "contiguous", "role": "in", "seed": 937679636, "shape": ["s0", "s1", "s3", "s4"]}, {"dtype": "bfloat16", "fill": "edge", "layout": "contiguous", "role": "in", "seed": 883004283, "shape": ["s0", "s1", "s3", "s4"]}]}',
    '{"args": [{"t": 0}, 2], "backward": true, "compare": {"acc": true, "ties": false}, "family": "norm", "fn": "F.group_norm", "found_as": "ok", "id": "20101-2263595", "kwargs": {}, "op": "group_norm", "sizes": {"s0": 3, "s1": 2}, "tensors": [{"dtype": "float64", "fill": "normal", "layout": "strided", "role": "in", "seed": 375722214, "shape": ["s0", 2, "s1"]}]}',
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
