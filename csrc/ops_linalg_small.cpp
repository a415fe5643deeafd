// Small dense linear algebra on the device: Cholesky and triangular solves
// (torch.linalg.cholesky(_ex), torch.linalg.solve_triangular), which
// torch.distributions.MultivariateNormal needs. Batch dimensions broadcast
// as in ATen's linalg functions; the LINALG kernels compute.
#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>

#include "iter_launch.h"
#include "registry.h"
#include "nrt/ops/linalg.h"

namespace torch_neuronx {
namespace {

using at::Tensor;

void put3(nrt_launch &d, int i, const Tensor &t3) { set_operand(d.operands[i], t3, {0, 1, 2}); }

std::tuple<Tensor, Tensor> cholesky_ex_fn(const Tensor &self, bool upper, bool check_errors) {
  TORCH_CHECK(self.dim() >= 2, "linalg.cholesky: The input tensor A must have at least 2 dimensions.");
  TORCH_CHECK(self.size(-1) == self.size(-2), "linalg.cholesky: A must be batches of square matrices, but they are ",
              self.size(-2), " by ", self.size(-1), " matrices");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "linalg.cholesky: Expected a floating point tensor, got ",
              self.scalar_type());
  c10::DeviceGuard guard(self.device());
  int64_t n = self.size(-1);
  auto batch = self.sizes().slice(0, self.dim() - 2);
  Tensor L = at::empty(self.sizes(), self.options());
  Tensor info = at::zeros(batch, self.options().dtype(at::kInt));
  int64_t nb = 1;
  for (auto b : batch) nb *= b;
  if (nb > 0 && n > 0) {
    Tensor A3 = self.reshape({nb, n, n});
    Tensor L3 = L.view({nb, n, n});
    Tensor info1 = info.view({nb, 1, 1});
    nrt_launch d = new_launch(NRT_OP(CHOLESKY), {nb, n});
    d.noutputs = 2;
    d.ninputs = 1;
    put3(d, 0, L3);
    put3(d, 1, info1);
    put3(d, 2, A3);
    d.compute_dtype = to_nrt_dtype(self.scalar_type());
    d.params[0] = upper ? 1 : 0;
    launch(self.device().index(), d);
  }
  if (check_errors) {
    // Reading info synchronises, as it does on CUDA.
    int64_t bad = info.numel() ? info.max().item<int64_t>() : 0;
    TORCH_CHECK(bad == 0, "linalg.cholesky: The factorization could not be completed because the input is not "
                          "positive-definite (the leading minor of order ", bad, " is not positive-definite).");
  }
  return {L, info};
}

Tensor solve_triangular_fn(const Tensor &A, const Tensor &B, bool upper, bool left, bool unitriangular) {
  TORCH_CHECK(A.dim() >= 2 && B.dim() >= 2, "linalg.solve_triangular: The input tensors must have at least 2 dimensions.");
  TORCH_CHECK(A.size(-1) == A.size(-2), "linalg.solve_triangular: A must be batches of square matrices");
  int64_t m = B.size(-2), k = B.size(-1);
  TORCH_CHECK(left ? A.size(-1) == m : A.size(-1) == k, "linalg.solve_triangular: Incompatible shapes of A and B for the equation ",
              left ? "AX = B" : "XA = B", " (", A.sizes(), " and ", B.sizes(), ")");
  TORCH_CHECK(A.scalar_type() == B.scalar_type(), "linalg.solve_triangular: Expected A and B to have the same dtype, but found A of type ",
              A.scalar_type(), " and B of type ", B.scalar_type(), " instead");
  c10::DeviceGuard guard(A.device());
  auto batch = at::infer_size(A.sizes().slice(0, A.dim() - 2), B.sizes().slice(0, B.dim() - 2));
  int64_t nb = 1;
  for (auto b : batch) nb *= b;
  std::vector<int64_t> ashape(batch), bshape(batch);
  ashape.push_back(A.size(-2));
  ashape.push_back(A.size(-1));
  bshape.push_back(m);
  bshape.push_back(k);
  Tensor X = at::empty(bshape, B.options());
  if (nb > 0 && m > 0 && k > 0) {
    Tensor A3 = A.expand(ashape).reshape({nb, A.size(-2), A.size(-1)});
    Tensor B3 = B.expand(bshape).reshape({nb, m, k});
    Tensor X3 = X.view({nb, m, k});
    nrt_launch d = new_launch(NRT_OP(TRIANGULAR_SOLVE), {nb, m, k});
    d.noutputs = 1;
    d.ninputs = 2;
    put3(d, 0, X3);
    put3(d, 1, A3);
    put3(d, 2, B3);
    d.compute_dtype = to_nrt_dtype(A.scalar_type());
    d.params[0] = upper;
    d.params[1] = left;
    d.params[2] = unitriangular;
    launch(A.device().index(), d);
  }
  return X;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "linalg_cholesky_ex", cholesky_ex_fn);
  NEURON_IMPL(m, "linalg_solve_triangular", solve_triangular_fn);
}

}  // namespace torch_neuronx
