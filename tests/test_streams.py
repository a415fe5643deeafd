"""Streams and events, asynchronous execution and its errors."""
import threading
import time

import pytest
import torch

from helpers import run_python


def test_stream_objects():
    s = torch.neuron.Stream()
    assert s.device == torch.device("neuron", 0)
    assert s != torch.neuron.default_stream()
    with torch.neuron.stream(s):
        assert torch.neuron.current_stream() == s
    assert torch.neuron.current_stream() == torch.neuron.default_stream()
    s2 = torch.Stream(device="neuron")
    assert s2.device_type == s.device_type
    s.synchronize()
    assert s.query()


def test_work_on_side_stream_with_events():
    s = torch.neuron.Stream()
    x = torch.randn(512, 512, device="neuron")
    done = torch.neuron.Event()
    s.wait_stream(torch.neuron.current_stream())
    with torch.neuron.stream(s):
        y = x @ x
        done.record()
    torch.neuron.current_stream().wait_event(done)
    z = y + 1
    torch.testing.assert_close(z.cpu(), x.cpu() @ x.cpu() + 1, rtol=1e-4, atol=1e-3)
    assert done.query()


def test_event_timing():
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    x = torch.randn(512, 512, device="neuron")
    start.record()
    for _ in range(5):
        x = x @ x / 512
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert ms > 0
    no_timing = torch.neuron.Event()
    no_timing.record()
    with pytest.raises(ValueError, match="enable_timing=True"):
        start.elapsed_time(no_timing)


def test_async_runs_ahead_of_python():
    # Eight 1024^3 matmuls take tens of milliseconds; enqueuing them must
    # return before they ran, so the stream is still busy right after.
    x = torch.randn(1024, 1024, device="neuron")
    torch.neuron.synchronize()
    for _ in range(8):
        x = x @ x / 1024
    assert not torch.neuron.current_stream().query(), "launches ran inline instead of being queued"
    torch.neuron.synchronize()
    assert torch.neuron.current_stream().query()
    assert torch.isfinite(x.cpu()).all()


def test_two_threads_two_streams():
    errors = []
    results = {}

    def worker(i):
        try:
            s = torch.neuron.Stream()
            with torch.neuron.stream(s):
                a = torch.full((300, 300), float(i + 1), device="neuron")
                for _ in range(10):
                    a = a * 1.0 + 1.0
                results[i] = a.sum().item()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(2):
        assert results[i] == pytest.approx((i + 1 + 10) * 300 * 300)


def test_async_error_names_kernel():
    a = torch.tensor([1, 2, 3], device="neuron")
    zero = torch.zeros(3, dtype=torch.int64, device="neuron")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        (a // zero)
        torch.neuron.synchronize()
    # The error was reported once; the device works afterwards.
    assert (a + 1).cpu().tolist() == [2, 3, 4]


def test_launch_blocking():
    r = run_python("""
        import torch
        a = torch.tensor([1, 2], device="neuron")
        try:
            b = a // torch.zeros(2, dtype=torch.int64, device="neuron")
            print("no error at launch")
        except RuntimeError as e:
            print("raised at launch:", "DIV_FLOOR" in str(e))
    """, env={"NEURON_LAUNCH_BLOCKING": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "raised at launch: True"


def test_record_stream_keeps_a_side_stream_block_alive():
    # The side-stream idiom: a tensor made on the current stream and used on
    # another; record_stream keeps its block from being reused too early.
    x = torch.randn(1 << 16)
    s = torch.neuron.Stream()
    a = x.to("neuron")
    s.wait_stream(torch.neuron.current_stream())
    with torch.neuron.stream(s):
        b = a * 2
    a.record_stream(s)
    del a
    # A new allocation may take a's block only after s has read it: b is
    # right although the current stream overwrites that memory at once.
    torch.full((1 << 16,), -7.0, device="neuron")
    s.synchronize()
    torch.testing.assert_close(b.cpu(), x * 2)
    with pytest.raises(RuntimeError, match="neuron stream"):
        torch.ones(2, device="neuron").record_stream(torch.Stream(device="cpu"))
