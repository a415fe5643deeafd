"""The device profiler: torch_neuronx.profiler's records and table, and
torch.profiler's PrivateUse1 activity. References: the launches the test
itself makes (how many, which kernels, their FLOPs) and the wall clock."""
import json

import pytest
import torch
from torch.profiler import ProfilerActivity

import torch_neuronx
from torch_neuronx import profiler as nprof

NO_LIMITS = {"triad_gbs": 10.0, "peak_fp32_gflops": 100.0, "peak_bf16_gflops": 200.0}


def test_one_record_per_launch_and_times_add_up(tmp_path):
    a = torch.randn(256, 256, device="neuron")
    b = torch.randn(256, 256, device="neuron")
    torch.neuron.synchronize()
    trace = tmp_path / "trace.json"
    with nprof.profile(trace_path=str(trace), print_table=False, limits=NO_LIMITS) as prof:
        for _ in range(5):
            c = a + b
        d = a @ b
        e = d.cpu()
    assert torch.equal(e, (a.cpu() @ b.cpu()).to(e.dtype)) or torch.allclose(e, a.cpu() @ b.cpu(), atol=1e-3)
    acts = prof.activities()
    names = [x.name for x in acts]
    assert names.count("ADD") == 5
    assert names.count("GEMM") == 1
    assert names.count("memcpy_DtoH") == 1
    gemm = next(x for x in acts if x.name == "GEMM")
    assert gemm.flops == 2 * 256 ** 3 and gemm.dtype == "float32" and gemm.kind == "kernel"
    add = next(x for x in acts if x.name == "ADD")
    assert add.bytes == 3 * 256 * 256 * 4
    for x in acts:
        assert x.enqueue_ns <= x.start_ns <= x.end_ns
    assert 0 < prof.device_time_ns <= prof.wall_ns

    rows = {r["name"]: r for r in prof.kernels()}
    assert rows["ADD"]["calls"] == 5 and rows["GEMM"]["calls"] == 1
    assert rows["GEMM"]["gflops"] == pytest.approx(2 * 256 ** 3 / (gemm.end_ns - gemm.start_ns))
    assert rows["GEMM"]["peak_fraction"] == pytest.approx(rows["GEMM"]["gflops"] / 100.0)
    assert sum(r["share"] for r in rows.values()) == pytest.approx(1.0)
    table = prof.table()
    assert "GEMM" in table and "ADD" in table and "limits: memory bandwidth 10.0 GB/s" in table

    events = json.loads(trace.read_text())["traceEvents"]
    kernels = [ev for ev in events if ev.get("ph") == "X"]
    assert sorted(ev["name"] for ev in kernels) == sorted(names)
    assert all(ev["dur"] >= 0 and ev["ts"] >= 0 for ev in kernels)
    assert {"process_name", "thread_name"} <= {ev["name"] for ev in events if ev["ph"] == "M"}
    del c


def test_work_outside_the_window_is_not_recorded():
    a = torch.ones(1000, device="neuron")
    one = torch.ones(1000, device="neuron")
    for _ in range(3):
        a = a * 2  # queued before the start: drained by __enter__, not recorded
    with nprof.profile(print_table=False, limits=False) as prof:
        b = a + one
    _ = b * 3
    assert [x.name for x in prof.activities()] == ["ADD"]
    assert torch.equal(b.cpu(), torch.full((1000,), 9.0))


def test_side_streams_and_table_printing(capsys):
    s = torch.neuron.Stream()
    x = torch.randn(1 << 16, device="neuron")
    with nprof.profile(limits=False) as prof:
        with torch.neuron.stream(s):
            y = torch.relu(x)
        s.synchronize()
    streams = {a.stream for a in prof.activities() if a.name != "event_record"}
    assert s.stream_id in streams or len(streams) == 1
    assert torch.equal(y.cpu(), torch.relu(x.cpu()))
    out = capsys.readouterr().out
    assert out.startswith("neuron profile:") and "RELU" in out.upper()


def test_cannot_nest_or_overlap():
    with nprof.profile(print_table=False, limits=False):
        with pytest.raises(RuntimeError, match="already on"):
            with nprof.profile(print_table=False, limits=False):
                pass


def _cpu_op_ids(events, name):
    return {ev["args"]["External id"] for ev in events if ev.get("cat") == "cpu_op" and ev["name"] == name}


def test_torch_profiler_shows_device_time_per_op(tmp_path):
    a = torch.randn(128, 128, device="neuron")
    b = torch.randn(128, 128, device="neuron")
    torch.neuron.synchronize()
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:
        c = torch.mm(a, b)
        d = c + a
        torch.neuron.synchronize()
    avg = {e.key: e for e in p.key_averages()}
    assert avg["aten::mm"].device_time_total > 0
    assert avg["aten::add"].device_time_total > 0
    assert avg["GEMM"].self_device_time_total > 0
    table = p.key_averages().table(sort_by="device_time_total", row_limit=10)
    assert "NEURON" in table and "aten::mm" in table

    path = tmp_path / "torch_trace.json"
    p.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    kern = {ev["name"]: ev for ev in events if ev.get("cat") == "kernel"}
    assert {"GEMM", "ADD"} <= set(kern)
    # Each device row points at the CPU op that launched it.
    assert kern["GEMM"]["args"]["External id"] in _cpu_op_ids(events, "aten::mm")
    assert kern["ADD"]["args"]["External id"] in _cpu_op_ids(events, "aten::add")
    assert torch.allclose(d.cpu(), a.cpu() @ b.cpu() + a.cpu(), atol=1e-4)


def test_torch_profiler_cpu_only_records_no_device_rows():
    a = torch.randn(64, device="neuron")
    with torch.profiler.profile(activities=[ProfilerActivity.CPU]) as p:
        (a * 2).cpu()
    assert all(e.device_time_total == 0 for e in p.key_averages())
    assert not torch_neuronx._C._profiler_active()
