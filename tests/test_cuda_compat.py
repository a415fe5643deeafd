"""The torch.cuda names that ported code calls, on torch.neuron: each behaves
as its torch.cuda counterpart does (or, where the device has nothing to
report, says so plainly)."""
import gc

import pytest
import torch


def test_stream_priority():
    s = torch.neuron.Stream(priority=-1)
    assert isinstance(s, torch.Stream) and isinstance(s, torch.neuron.Stream)
    # One priority level: a requested priority is clamped into the range, as CUDA does.
    assert torch.neuron.Stream.priority_range() == (0, 0)
    assert s.priority == 0
    assert torch.neuron.current_stream().priority == 0
    assert torch.neuron.default_stream().priority == 0
    # The subclass interoperates with PyTorch's stream/event methods.
    x = torch.ones(1000, device="neuron")
    s.wait_stream(torch.neuron.current_stream())  # x is made on the current stream
    with torch.neuron.stream(s):
        y = x * 2
    torch.neuron.current_stream().wait_stream(s)
    e = s.record_event()
    e.synchronize()
    assert torch.equal(y.cpu(), torch.full((1000,), 2.0))


def test_per_process_memory_fraction():
    dev = torch.neuron.device_count() - 1
    full = torch.neuron.get_device_properties(dev).total_memory
    try:
        torch.neuron.set_per_process_memory_fraction(0.25, dev)
        assert torch.neuron.mem_get_info(dev)[1] == int(full * 0.25)
        assert torch.neuron.get_per_process_memory_fraction(dev) == pytest.approx(0.25)
        with pytest.raises(torch.neuron.OutOfMemoryError, match="out of memory"):
            torch.empty(int(full * 0.3), dtype=torch.uint8, device=f"neuron:{dev}")
        t = torch.empty(int(full * 0.2), dtype=torch.uint8, device=f"neuron:{dev}")  # fits
        del t
        with pytest.raises(ValueError, match="Allowed range"):
            torch.neuron.set_per_process_memory_fraction(1.5, dev)
        with pytest.raises(TypeError):
            torch.neuron.set_per_process_memory_fraction("half", dev)
    finally:
        torch.neuron.empty_cache()
        torch.neuron.set_per_process_memory_fraction(1.0, dev)
    assert torch.neuron.mem_get_info(dev)[1] == full


def test_memory_aliases_and_errors():
    assert torch.neuron.OutOfMemoryError is torch.OutOfMemoryError
    x = torch.empty(1 << 20, device="neuron")
    assert torch.neuron.max_memory_cached() == torch.neuron.max_memory_reserved() > 0
    assert torch.neuron.memory_cached() == torch.neuron.memory_reserved()
    del x


def test_arch_list():
    archs = torch.neuron.get_arch_list()
    assert archs == ["neuroncore-v3"]
    assert torch.neuron.get_device_name().startswith("NeuronCore-v3")


def test_autocast_defaults_to_bfloat16():
    assert torch.get_autocast_dtype("neuron") == torch.bfloat16
    a = torch.randn(8, 8, device="neuron")
    with torch.autocast("neuron"):
        y = a @ a
    assert y.dtype == torch.bfloat16
    ref = (a.cpu().bfloat16() @ a.cpu().bfloat16())
    torch.testing.assert_close(y.cpu(), ref, rtol=1.6e-2, atol=1e-2)


def test_memory_snapshot_lists_live_blocks():
    x = torch.empty(3 << 20, dtype=torch.uint8, device="neuron")  # a large-pool block
    # earlier tests' tensors still held by reference cycles (an exception's
    # traceback keeps its frames) would be freed by a garbage collection
    # that the snapshots' own allocations may trigger, and temporaries are
    # freed in stream order: both go first, so that the two snapshots below
    # see the same blocks
    gc.collect()
    torch.neuron.synchronize()
    snap = torch.neuron.memory_snapshot()
    segs = [s for s in snap if s["device"] == x.device.index]
    blocks = [b for s in segs for b in s["blocks"]]
    assert any(b["address"] == x.data_ptr() and b["state"] == "active_allocated" for b in blocks)
    for s in segs:
        assert s["total_size"] == sum(b["size"] for b in s["blocks"])
        assert s["segment_type"] in ("small", "large")
    # The snapshot agrees with the allocator's statistics.
    assert sum(s["allocated_size"] for s in segs) == torch.neuron.memory_allocated(x.device.index)
    assert sum(s["total_size"] for s in segs) == torch.neuron.memory_reserved(x.device.index)
    assert torch.neuron.memory._snapshot()["segments"] == torch.neuron.memory_snapshot()
    torch.neuron.memory._record_memory_history(enabled=None)  # turning history off is fine
    with pytest.raises(NotImplementedError, match="stack traces"):
        torch.neuron.memory._record_memory_history()
    del x


def test_host_memory_stats_count_pinned_memory():
    before = torch.neuron.host_memory_stats()
    p = torch.empty(1 << 16, dtype=torch.uint8, pin_memory=True)
    during = torch.neuron.host_memory_stats()
    assert during["allocated_bytes.current"] >= before["allocated_bytes.current"] + (1 << 16)
    assert during["allocations.current"] == before["allocations.current"] + 1
    del p


def test_utilization_measures_busy_time():
    torch.neuron.utilization()  # start a sampling interval
    a = torch.randn(768, 768, device="neuron")
    for _ in range(40):
        a = torch.tanh(a @ a)
    torch.neuron.synchronize()
    busy = torch.neuron.utilization()
    assert 0 < busy <= 100
    import time
    time.sleep(0.2)
    assert torch.neuron.utilization() < busy  # an idle interval


def test_external_stream_round_trip():
    s = torch.neuron.Stream()
    h = torch.neuron.stream_handle(s)
    e = torch.neuron.ExternalStream(h)
    assert (e.device_index, e.stream_id) == (s.device_index, s.stream_id)
    assert isinstance(e, torch.neuron.Stream) and e.priority == 0
    with pytest.raises(ValueError, match="not a neuron stream"):
        torch.neuron.ExternalStream(h + 1)
    with pytest.raises(ValueError, match="not a neuron stream"):
        torch.neuron.ExternalStream(id(s))
