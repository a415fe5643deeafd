"""Device memory: statistics, the caching allocator, out-of-memory."""
import gc

import pytest
import torch

from helpers import run_python

MiB = 1 << 20


def test_stats_track_allocations():
    torch.neuron.synchronize()
    base = torch.neuron.memory_allocated()
    x = torch.empty(4 * MiB // 4, device="neuron")  # 4 MiB
    assert torch.neuron.memory_allocated() == base + 4 * MiB
    assert torch.neuron.max_memory_allocated() >= base + 4 * MiB
    assert torch.neuron.memory_reserved() >= torch.neuron.memory_allocated()
    stats = torch.neuron.memory_stats()
    assert stats["allocated_bytes.all.current"] == base + 4 * MiB
    assert stats["allocation.all.current"] >= 1
    # torch.accelerator's memory API reads the same allocator.
    assert torch.accelerator.memory_allocated(0) == base + 4 * MiB
    del x
    assert torch.neuron.memory_allocated() == base
    assert torch.neuron.memory_reserved() > 0  # cached, not returned


def test_small_allocations_round_to_512():
    base = torch.neuron.memory_allocated()
    x = torch.empty(1, device="neuron")
    assert torch.neuron.memory_allocated() - base == 512
    del x


def test_cache_reuse_and_empty_cache():
    x = torch.empty(8 * MiB // 4, device="neuron")
    reserved = torch.neuron.memory_reserved()
    ptr = x.data_ptr()
    del x
    y = torch.empty(8 * MiB // 4, device="neuron")
    assert y.data_ptr() == ptr, "freed block should be reused from the cache"
    assert torch.neuron.memory_reserved() == reserved
    del y
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() == torch.neuron.memory_allocated() or \
        torch.neuron.memory_reserved() < reserved


def test_peak_reset():
    x = torch.empty(16 * MiB // 4, device="neuron")
    del x
    assert torch.neuron.max_memory_allocated() >= 16 * MiB
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == torch.neuron.memory_allocated()
    torch.neuron.reset_accumulated_memory_stats()
    assert torch.neuron.memory_stats()["allocation.all.allocated"] == 0


def test_mem_get_info_and_summary():
    free, total = torch.neuron.mem_get_info()
    assert total == torch.neuron.get_device_properties(0).total_memory
    assert 0 < free <= total
    s = torch.neuron.memory_summary()
    assert "Allocated memory" in s and "Reserved memory" in s


def test_out_of_memory_reports_figures_and_recovers():
    r = run_python("""
        import torch
        torch.neuron.set_memory_capacity(64 << 20)
        keep = torch.ones(20 << 18, device="neuron")   # 20 MiB
        try:
            torch.empty(100 << 18, device="neuron")     # 100 MiB > 64 MiB
        except torch.OutOfMemoryError as e:
            msg = str(e)
            print("OOM", "tried to allocate" in msg, "capacity 64.00 MiB" in msg, "already allocated" in msg)
        else:
            print("no error")
        s = torch.neuron.memory_stats()
        print("ooms", s["num_ooms"])
        print("allocated_mib", torch.neuron.memory_allocated() >> 20)
        y = keep * 2                                     # device still works
        print("sum", y.sum().item() == 2 * (20 << 18))
    """, env={"TORCH_NEURONX_DEVICE_MEMORY": ""})
    assert r.returncode == 0, r.stderr
    out = r.stdout.split("\n")
    assert out[0] == "OOM True True True", r.stdout
    assert out[1] == "ooms 1"
    assert out[2] == "allocated_mib 20"
    assert out[3] == "sum True"


def test_capacity_env_var():
    r = run_python("import torch; print(torch.neuron.get_device_properties(0).total_memory)",
                   env={"TORCH_NEURONX_DEVICE_MEMORY": "2GiB"})
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == 2 << 30


def test_free_in_stream_order_after_async_work():
    # A tensor freed while work that reads it is queued must keep its bytes
    # until that work ran: reuse waits in stream order.
    for _ in range(20):
        a = torch.randn(256, 256, device="neuron")
        b = a @ a
        ref = (a.cpu() @ a.cpu())
        del a
        c = torch.zeros(256, 256, device="neuron")  # likely reuses a's block
        torch.testing.assert_close(b.cpu(), ref, rtol=1e-4, atol=1e-3)
        del b, c
    gc.collect()


def test_scalar_operands_need_no_device_memory():
    # A CPU scalar (x + 1, x * torch.tensor(2.0)) travels inside the launch,
    # so in-place scalar ops keep working when device memory is full.
    r = run_python("""
        import torch
        torch.neuron.set_memory_capacity(16 << 20)
        x = torch.arange(8, dtype=torch.float32, device="neuron")
        z = torch.tensor([1 + 2j, -3j], device="neuron")
        hold = []
        for size in (1 << 18, 128):                      # 1 MiB blocks, then 512-byte ones
            while True:
                try:
                    hold.append(torch.empty(size, device="neuron"))
                except torch.OutOfMemoryError:
                    break
        try:
            torch.empty(128, device="neuron")
            print("memory not full")
        except torch.OutOfMemoryError:
            pass
        x.add_(1).mul_(2.5).sub_(torch.tensor(0.5)).div_(torch.tensor(2, dtype=torch.int64))
        z.mul_(1j).add_(2)
        xc = torch.arange(8, dtype=torch.float32).add_(1).mul_(2.5).sub_(0.5).div_(2)
        zc = torch.tensor([1 + 2j, -3j]).mul_(1j).add_(2)
        print(torch.equal(x.cpu(), xc), torch.equal(z.cpu(), zc))
    """, env={"TORCH_NEURONX_DEVICE_MEMORY": ""})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True True", r.stdout
