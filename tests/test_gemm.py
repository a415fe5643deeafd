"""GEMM family: mm, addmm, bmm and matmul (transposed operands, shape errors)
against PyTorch on the CPU with zero CPU fallbacks. Complex matrix multiplies
are in test_complex.py, addr in test_nn.py."""
import pytest
import torch

from helpers import assert_no_fallbacks, close


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (17, 33, 65), (128, 64, 256)])
def test_matmul_family(m, k, n):
    a, b, bias = torch.randn(m, k), torch.randn(k, n), torch.randn(n)
    da, db, dbias = a.neuron(), b.neuron(), bias.neuron()
    close(da @ db, a @ b, atol=1e-4, rtol=1e-4)
    close(torch.addmm(dbias, da, db, beta=0.5, alpha=2), torch.addmm(bias, a, b, beta=0.5, alpha=2), atol=1e-4,
          rtol=1e-4)
    close(db.t() @ da.t(), b.t() @ a.t(), atol=1e-4, rtol=1e-4)
    ba, bb = torch.randn(3, m, k), torch.randn(3, k, n)
    close(torch.bmm(ba.neuron(), bb.neuron()), torch.bmm(ba, bb), atol=1e-4, rtol=1e-4)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        da @ torch.randn(k + 1, 2).neuron()
    assert_no_fallbacks()
