"""torch_neuronx.meta_check: the FakeTensor cross-reference that holds every
native kernel's output layout to its meta function (the model tests and the
OpInfo sweep run under it). Here: it catches a kernel whose layout differs
from its meta function, accepts the fused attention's host Philox scalars,
and the layouts it found wrong stay fixed (values against the CPU)."""
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from torch_neuronx.meta_check import MetadataMismatchError, meta_crossref

from helpers import close

DEV = "neuron"


@torch.library.custom_op("neuron_meta_check_test::transposed", mutates_args=())
def _transposed(x: torch.Tensor) -> torch.Tensor:
    return x.clone()  # the kernel: a contiguous copy


@_transposed.register_fake
def _(x):
    return torch.empty_strided(x.shape, (1, x.shape[0]), dtype=x.dtype, device=x.device)  # its "meta": column-major


def test_catches_a_kernel_whose_layout_differs_from_its_meta_function():
    x = torch.randn(4, 3, device=DEV)
    close(_transposed(x), x.cpu())  # outside the check nothing is compared
    with pytest.raises(MetadataMismatchError, match="Stride mismatch"):
        with meta_crossref():
            _transposed(x)


def test_sdpa_output_and_gradients_keep_the_meta_layout():
    # GPT-2's layout: q, k, v are (B, L, H, D) buffers viewed as (B, H, L, D)
    torch.manual_seed(0)
    qkv = torch.randn(2, 16, 3, 4, 8, requires_grad=True)
    bias = torch.randn(1, 4, 16, 16, requires_grad=True)

    def run(dev):
        a = qkv.detach().to(dev).requires_grad_()
        b = bias.detach().to(dev).requires_grad_()
        q, k, v = a.unbind(2)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=b)
        out.pow(2).sum().backward()
        return out, a.grad, b.grad

    ref = run("cpu")
    # a mask that requires grad takes the math path by default (the CPU's
    # choice); the fused kernel's layouts are the ones checked here
    with meta_crossref(), sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
        got = run(DEV)
    assert got[0].stride() == (512, 8, 32, 1)  # the query's dim order, as the meta function gives
    for g, r in zip(got, ref):
        close(g, r, atol=1e-5, rtol=1e-4)


def test_cat_of_channels_last_inputs_stays_channels_last():
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    with meta_crossref():
        got = torch.cat([x.to(DEV), x.to(DEV)], 1)
    ref = torch.cat([x, x], 1)
    assert got.stride() == ref.stride()
    close(got, ref)


# _cdist_backward returns the gradient of the broadcast x1 (autograd sums it
# to x1's shape), and zeros of x1's own shape when there is nothing to compute,
# as ATen's kernel and the meta function do; the gradients equal the CPU's.
@pytest.mark.parametrize("shapes", [((1, 2, 2), (2, 1, 3, 2)), ((0, 4, 5), (3, 5)), ((4, 5), (0, 3, 5))],
                         ids=["broadcast", "empty x1 batch", "empty x2 batch"])
def test_cdist_backward_keeps_the_meta_shape(shapes):
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(s, generator=g, requires_grad=True) for s in shapes)
    want = torch.autograd.grad(torch.cdist(a, b).sum(), (a, b))
    ad, bd = (t.detach().to(DEV).requires_grad_() for t in (a, b))
    with meta_crossref():
        got = torch.autograd.grad(torch.cdist(ad, bd).sum(), (ad, bd))
    for gt, wt in zip(got, want):
        close(gt, wt)
