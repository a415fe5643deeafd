"""Copies host<->device and device<->device: strided, broadcast, dtype
conversion, non_blocking with pinned memory."""
import pytest
import torch

from helpers import assert_no_fallbacks

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int8, torch.uint8, torch.int16,
          torch.int32, torch.int64, torch.bool]


@pytest.mark.parametrize("dtype", DTYPES)
def test_roundtrip_exact(dtype):
    x = (torch.randn(37, 5) * 50).to(dtype)
    assert torch.equal(x.to("neuron").cpu(), x)


def test_float64_roundtrip_keeps_precision():
    x = torch.tensor([1.0 + 2**-40, 3.141592653589793], dtype=torch.float64)
    assert torch.equal(x.to("neuron").cpu(), x)


@pytest.mark.parametrize("src", [torch.float32, torch.int64, torch.bfloat16, torch.bool])
@pytest.mark.parametrize("dst", [torch.float32, torch.float16, torch.int32, torch.bool])
def test_dtype_conversion_on_device(src, dst):
    x = (torch.randn(64) * 10).to(src)
    y = x.to("neuron").to(dst)
    assert y.dtype == dst
    assert torch.equal(y.cpu(), x.to(dst))
    assert torch.equal(x.to("neuron", dst).cpu(), x.to(dst))


def test_strided_views():
    x = torch.randn(6, 8, 5)
    d = x.to("neuron")
    for view in (lambda t: t.transpose(0, 2), lambda t: t[::2, 1:, ::3], lambda t: t.permute(2, 0, 1)[1],
                 lambda t: t.expand(2, 6, 8, 5)[1]):
        assert torch.equal(view(d).cpu(), view(x))
        assert torch.equal(view(d).contiguous().cpu(), view(x).contiguous())
    # Strided destinations on both sides.
    out = torch.zeros(5, 8, 6)
    out.copy_(d.permute(2, 1, 0))
    assert torch.equal(out, x.permute(2, 1, 0))
    dd = torch.zeros(5, 8, 6, device="neuron")
    dd.transpose(0, 2).copy_(x)
    assert torch.equal(dd.cpu(), x.transpose(0, 2))
    assert_no_fallbacks()


def test_broadcast_copy():
    d = torch.zeros(4, 3, device="neuron")
    d.copy_(torch.tensor([1.0, 2.0, 3.0]))
    assert torch.equal(d.cpu(), torch.tensor([1.0, 2.0, 3.0]).expand(4, 3))
    d.copy_(torch.tensor([[5.0], [6.0], [7.0], [8.0]], device="neuron"))
    assert torch.equal(d.cpu()[:, 2], torch.tensor([5.0, 6.0, 7.0, 8.0]))


def test_non_blocking_pinned():
    x = torch.randn(1 << 16).pin_memory()
    assert x.is_pinned()
    d = x.to("neuron", non_blocking=True)
    back = torch.empty_like(x).pin_memory()
    back.copy_(d, non_blocking=True)
    torch.neuron.synchronize()
    assert torch.equal(back, x)


def test_pageable_source_can_change_after_copy():
    x = torch.ones(1000)
    d = x.to("neuron", non_blocking=True)
    x.fill_(7)  # the device copy must have captured the old values
    assert torch.equal(d.cpu(), torch.ones(1000))


def test_cross_device_copy():
    x = torch.randn(33, 7)
    a = x.to("neuron:0")
    b = a.to("neuron:1")
    assert b.device == torch.device("neuron", 1)
    assert torch.equal(b.cpu(), x)
    c = a.t().to("neuron:1")
    assert torch.equal(c.cpu(), x.t())


def test_item_and_scalar_reads():
    for v, dt in ((3.5, torch.float32), (-7, torch.int64), (True, torch.bool), (2.5, torch.bfloat16)):
        t = torch.tensor(v, dtype=dt, device="neuron")
        assert t.item() == v
    t = torch.arange(5.0).to("neuron")
    assert t[3].item() == 3.0
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_fill_zero_and_factories():
    t = torch.empty(3, 4, device="neuron").fill_(2.5)
    assert torch.equal(t.cpu(), torch.full((3, 4), 2.5))
    t.zero_()
    assert torch.equal(t.cpu(), torch.zeros(3, 4))
    assert torch.equal(torch.ones(2, 3, device="neuron", dtype=torch.int32).cpu(), torch.ones(2, 3, dtype=torch.int32))
    assert torch.equal(torch.full((2,), 7, device="neuron").cpu(), torch.full((2,), 7))
    t = torch.ones(2, 2, device="neuron")
    t.fill_(torch.tensor(4.0, device="neuron"))
    assert torch.equal(t.cpu(), torch.full((2, 2), 4.0))
    assert_no_fallbacks()


def test_resize_and_set():
    t = torch.arange(6.0).to("neuron")
    t.resize_(2, 3)
    assert t.shape == (2, 3)
    assert torch.equal(t.cpu(), torch.arange(6.0).view(2, 3))
    t.resize_(4, 4)  # grows storage; keeps the first bytes
    assert torch.equal(t.cpu().flatten()[:6], torch.arange(6.0))
    u = torch.empty(0, device="neuron")
    u.set_(t)
    assert u.shape == (4, 4) and u.data_ptr() == t.data_ptr()
    v = torch.empty(0, device="neuron").set_(t.untyped_storage(), 4, (2,), (1,))
    assert torch.equal(v.cpu(), torch.tensor([4.0, 5.0]))


@pytest.mark.parametrize("case", [
    ("bool fill 0.5", lambda d: torch.zeros(3, dtype=torch.bool, device=d).fill_(0.5)),
    ("bool full -0.1", lambda d: torch.full((2,), -0.1, dtype=torch.bool, device=d)),
    ("bool masked_fill 0.3", lambda d: torch.zeros(3, dtype=torch.bool, device=d).masked_fill(
        torch.tensor([True, False, True], device=d), 0.3)),
    ("bool index_fill 0.7", lambda d: torch.zeros(3, dtype=torch.bool, device=d).index_fill(
        0, torch.tensor([1], device=d), 0.7)),
    ("int fill 3.9", lambda d: torch.zeros(2, dtype=torch.int32, device=d).fill_(3.9)),
    ("int fill -3.9", lambda d: torch.zeros(2, dtype=torch.int64, device=d).fill_(-3.9)),
    ("uint8 fill 255", lambda d: torch.zeros(2, dtype=torch.uint8, device=d).fill_(255)),
    ("uint8 fill -1 wraps", lambda d: torch.zeros(2, dtype=torch.uint8, device=d).fill_(-1)),
    ("half fill 1/3", lambda d: torch.zeros(2, dtype=torch.half, device=d).fill_(1 / 3)),
], ids=lambda c: c[0])
def test_fill_converts_the_value_like_the_cpu(case):
    _, fn = case
    want, got = fn("cpu"), fn("neuron")
    assert got.dtype == want.dtype and torch.equal(got.cpu(), want)


@pytest.mark.parametrize("case", [
    ("int16 fill 100000", lambda d: torch.zeros(2, dtype=torch.int16, device=d).fill_(100000)),
    ("int8 full 300", lambda d: torch.full((2,), 300, dtype=torch.int8, device=d)),
    ("half fill 1e6", lambda d: torch.zeros(2, dtype=torch.half, device=d).fill_(1e6)),
    ("int16 index_fill 1e5", lambda d: torch.zeros(3, dtype=torch.int16, device=d).index_fill(
        0, torch.tensor([1], device=d), 100000)),
], ids=lambda c: c[0])
def test_fill_value_out_of_range_raises_like_the_cpu(case):
    _, fn = case
    with pytest.raises(RuntimeError, match="without overflow") as cpu:
        fn("cpu")
    with pytest.raises(type(cpu.value), match="without overflow"):
        fn("neuron")


# fill_ and zero_ are idempotent, so the CPU allows an expanded self.
def test_fill_and_zero_of_an_expanded_tensor():
    for value in (7, 2.5):
        x = torch.zeros(2, device="neuron")
        x[:1].expand(3, 2).fill_(value)
        assert torch.equal(x.cpu(), torch.tensor([float(value), 0.0]))
    x.expand(4, 2).zero_()
    assert torch.equal(x.cpu(), torch.zeros(2))
    assert_no_fallbacks()


# copy_ with a PrivateUse1 tensor on either side reaches _copy_from before
# ATen's copy builds its iterator, so the shape check is the backend's: a
# source must broadcast to the destination (an empty one too), with the CPU's
# messages, whichever side is on the device.
@pytest.mark.parametrize("dst_dev,src_dev", [("neuron", "neuron"), ("neuron", "cpu"), ("cpu", "neuron")])
@pytest.mark.parametrize("dst_shape,src_shape", [
    ((0,), (1, 3)), ((0, 4, 2), (1, 0, 4, 1)), ((3, 0), (2, 3, 0)), ((3,), (0,)), ((0,), (2,)),
    ((6,), (2,)), ((3,), (1, 3)), ((2, 3), (3, 3)), ((2, 3), (1, 1, 3)), ((), (1,)),
])
def test_copy_from_a_source_that_does_not_broadcast_raises_like_the_cpu(dst_dev, src_dev, dst_shape, src_shape):
    src = torch.ones(src_shape, dtype=torch.float64)
    with pytest.raises(RuntimeError) as cpu:
        torch.zeros(dst_shape).copy_(src)
    dst = torch.zeros(dst_shape, device=dst_dev)
    with pytest.raises(RuntimeError) as dev:
        dst.copy_(src.to(src_dev))
    assert str(dev.value) == str(cpu.value)


@pytest.mark.parametrize("dst_dev,src_dev", [("neuron", "neuron"), ("neuron", "cpu"), ("cpu", "neuron")])
@pytest.mark.parametrize("dst_shape,src_shape", [((0,), (1,)), ((0, 3), (3,)), ((2, 0), (1, 1)), ((2, 3), (3,)),
                                                 ((2, 3), (1, 3)), ((1,), ())])
def test_copy_from_a_broadcastable_source_copies_like_the_cpu(dst_dev, src_dev, dst_shape, src_shape):
    src = torch.arange(torch.Size(src_shape).numel(), dtype=torch.float32).reshape(src_shape)
    want = torch.zeros(dst_shape).copy_(src)
    got = torch.zeros(dst_shape, device=dst_dev).copy_(src.to(src_dev))
    assert got.shape == want.shape and torch.equal(got.cpu(), want)
    assert_no_fallbacks()


def _shift_right(y):
    y[:, 1:] = y[:, :-1]  # rows of strided views: ATen cannot prove the overlap partial, the order decides


def _shift_left(y):
    y[:, :40] = y[:, 1:41]


def _shift_right_block(y):
    y[:, 1:41] = y[:, :40]


def _transpose_in_place(y):
    y.copy_(y.t())


def _broadcast_first_column(y):
    y[:, 1:].copy_(y[:, :1].expand(-1, y.shape[1] - 1))


def _contiguous_shift(y):
    y[1:] = y[:-1]  # dense and partially overlapping: refused on both


def _circular_pad_negative(y):
    return torch.nn.functional.pad(y[None, :3, :2], [-1, 2], mode="circular")


def _circular_pad_wide(y):
    return torch.nn.functional.pad(y[None, :4, :5], [3, 2], mode="circular")


@pytest.mark.parametrize("dtype", DTYPES + [torch.complex64, torch.complex32])
@pytest.mark.parametrize("fn", [_shift_right, _shift_left, _shift_right_block, _transpose_in_place,
                                _broadcast_first_column, _contiguous_shift, _circular_pad_negative,
                                _circular_pad_wide])
def test_copy_between_overlapping_views_reads_and_writes_in_the_cpus_order(dtype, fn):
    """A copy whose source overlaps its destination: the CPU's result depends
    on its loop's order (64-byte blocks along a contiguous row, then one
    element at a time); neuron copies in that order (COPY_ORDERED). F.pad
    circular copies its wraps out of the output it is filling."""
    base = (torch.arange(50 * 50) % 97).to(dtype).view(50, 50)
    results = []
    for dev in ("cpu", "neuron"):
        y = base.clone().to(dev)
        try:
            r = fn(y)
            results.append((r if r is not None else y).cpu())
        except RuntimeError as e:
            results.append(type(e))
    cpu, dev = results
    if isinstance(cpu, type):
        assert dev is cpu
    else:
        view = (lambda t: t.view(torch.uint8)) if dtype == torch.complex32 else (lambda t: t)
        assert torch.equal(view(dev), view(cpu))
