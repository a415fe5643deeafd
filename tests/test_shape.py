"""Shape ops: cat, flip, roll, stack and constant padding (F.pad, mode
"constant"; reflection/replication padding is in test_resample.py), forward
and backward against PyTorch on the CPU with zero CPU fallbacks."""
import pytest
import torch
import torch.nn.functional as F

from helpers import assert_no_fallbacks, close, raises_like_cpu


def test_cat_flip_roll_stack():
    x = torch.randn(3, 4, 5)
    d = x.neuron()
    assert torch.equal(torch.flip(d, [0, 2]).cpu(), torch.flip(x, [0, 2]))
    assert torch.equal(torch.flip(d.transpose(0, 2), [1]).cpu(), torch.flip(x.transpose(0, 2), [1]))
    assert torch.equal(torch.roll(d, 2, 1).cpu(), torch.roll(x, 2, 1))
    assert torch.equal(torch.roll(d, (-1, 7), (0, 2)).cpu(), torch.roll(x, (-1, 7), (0, 2)))
    assert torch.equal(torch.roll(d, 3).cpu(), torch.roll(x, 3))
    assert torch.equal(torch.cat([d, d[:, :2]], 1).cpu(), torch.cat([x, x[:, :2]], 1))
    assert torch.equal(torch.stack([d, d], dim=2).cpu(), torch.stack([x, x], dim=2))
    mixed = torch.cat([torch.ones(2, dtype=torch.int32).neuron(), torch.ones(2).neuron(), torch.empty(0).neuron()])
    assert mixed.dtype == torch.float32 and mixed.tolist() == [1.0] * 4
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        torch.cat([d, torch.randn(2, 3, 5).neuron()], 1)
    assert_no_fallbacks()


@pytest.mark.parametrize("pad", [(1, 2), (1, 1, 2, 0), (-1, 2, 0, -2), (0, 0, 0, 0, 1, 1), (2, 2, 2, 2, 2, 2, 1, 1)])
def test_constant_pad(pad):
    x = torch.randn(2, 3, 4, 5, requires_grad=True)
    xd = x.detach().neuron().requires_grad_()
    y, yd = F.pad(x, pad, value=0.5), F.pad(xd, pad, value=0.5)
    assert torch.equal(yd.cpu(), y.detach())
    y.pow(2).sum().backward()
    yd.pow(2).sum().backward()
    close(xd.grad, x.grad)
    assert_no_fallbacks()


@pytest.mark.parametrize("case", [
    ("a 0-d tensor", lambda d: torch.cat([torch.ones(2, device=d), torch.tensor(1.0, device=d)]), RuntimeError),
    ("an out= the result cannot be cast to",
     lambda d: torch.cat([torch.ones(2, device=d)], out=torch.empty(2, dtype=torch.int32, device=d)), TypeError),
    ("dims differ", lambda d: torch.cat([torch.ones(2, 2, device=d), torch.ones(2, device=d)]), RuntimeError),
    ("dim out of range", lambda d: torch.cat([torch.ones(2, device=d)], dim=3), IndexError),
], ids=lambda c: c[0])
def test_cat_checks_its_inputs_like_the_cpu(case):
    raises_like_cpu(case[1], case[2])


# constant padding crops negative pads with ATen's narrows, so a crop longer
# than the input raises narrow's RuntimeError, as on the CPU (not IndexError).
def test_constant_pad_crop_past_the_input_raises_like_the_cpu():
    x = torch.ones(2, 0, 3)
    raises_like_cpu(lambda d: F.pad(x.to(d), [0, 0, -1, 2], value=1.0), RuntimeError)
    assert_no_fallbacks()



# The CPU rolls one dim at a time and returns a copy of an empty tensor
# before it reads the dim, so out-of-range dims of an empty tensor are not
# an error there (a non-empty one still raises IndexError).
@pytest.mark.parametrize("shape,shifts,dims", [((0,), 5, 2), ((0, 3), (1, 2), (5, -7)), ((3, 0), 1, None),
                                               ((0,), (1, 2), (0, 3))])
def test_roll_of_an_empty_tensor_ignores_its_dims_like_the_cpu(shape, shifts, dims):
    x = torch.empty(shape)
    want = torch.roll(x, shifts, dims) if dims is not None else torch.roll(x, shifts)
    got = torch.roll(x.neuron(), shifts, dims) if dims is not None else torch.roll(x.neuron(), shifts)
    assert (got.shape, got.stride(), got.dtype) == (want.shape, want.stride(), want.dtype)
    raises_like_cpu(lambda d: torch.roll(torch.ones(3, device=d), 1, 2), IndexError)
    assert_no_fallbacks()
