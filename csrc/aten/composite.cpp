// Ops expressed through other native ops (each step a device kernel): the
// ATen signature and checks are PyTorch's, the arithmetic is a short chain
// of native launches. Where one of these becomes hot, it earns a kernel.
// Each op returns a fresh result; its out= and in-place overloads copy it
// where asked (registry/variants.h), hence the unnamed `out` parameters.
#include <algorithm>
#include <vector>

#include <ATen/MemoryOverlap.h>
#include <ATen/OpMathType.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/_unique.h>
#include <ATen/ops/_weight_norm_differentiable_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/norm_except_dim.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/where.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <c10/core/DeviceGuard.h>

#include "launch/launch.h"
#include "launch/scalar.h"
#include "nrt/launch.h"
#include "registry/variants.h"

namespace torch_neuronx {
// gemm.cpp: complex addmv on the CPU's gemv paths
at::Tensor complex_addmv(const at::Tensor &self, const at::Tensor &mat, const at::Tensor &vec, const c10::Scalar &beta,
                     const c10::Scalar &alpha);
// gemm.cpp: whether ATen's own gemv loops compute this real addmv, and that addmv
bool addmv_takes_aten_gemv_loop(const at::Tensor &mat, const at::Tensor &vec);
at::Tensor addmv_aten_gemv_loop(const at::Tensor &self, const at::Tensor &mat, const at::Tensor &vec,
                                const c10::Scalar &beta, const c10::Scalar &alpha);
namespace {

using at::Tensor;
using c10::Scalar;

// Tensor.addmv_ on an expanded self (one element aliased m times): the CPU
// allows it and its gemv loop (BLAS refuses a zero stride) updates that one
// element row after row. Row-major mat (its 't' loop): y = beta * y + alpha
// * dot(row i, vec) for each i, so y = beta^m y0 + sum_i beta^(m-1-i) c_i,
// and with beta == 0 only the last row counts (y0 never read). Column-major
// mat (its 'n' loop): y scaled by beta m times (skipped for 0 and 1), then
// every product added; with beta == 0 each row of the first column zeroes y
// before adding, so only the last row of column 0 survives. Composed from
// native ops in the math type, rounded once where the CPU rounds per step.
void addmv_into_aliased_self(const Tensor &self, const Tensor &mat, const Tensor &vec, const Scalar &beta,
                             const Scalar &alpha) {
  const int64_t m = mat.size(0), n = mat.size(1);
  at::ScalarType math = at::toOpMathType(mat.scalar_type());
  Tensor a = mat.to(math), z = vec.to(math).mul(alpha);  // z_j = alpha * vec_j, as the 'n' loop forms it
  Tensor c = at::mm(a, z.unsqueeze(1)).squeeze(1);       // c_i = alpha * dot(row i, vec)
  // the CPU's gemv choice (addmv_out_cpu): column-major when rows are unit-strided and columns far enough apart
  bool column_major = mat.stride(0) == 1 && (n == 1 || mat.stride(1) >= std::max<int64_t>(1, m));
  Tensor element = self.as_strided({}, {});
  Tensor y;
  if (scalar_is_zero(beta)) {
    if (!column_major) {
      y = c.select(0, m - 1);
    } else {
      y = z.select(0, 0).mul(a.select(0, m - 1).select(0, 0));
      if (n > 1) y = y.add(at::mm(a.narrow(1, 1, n - 1), z.narrow(0, 1, n - 1).unsqueeze(1)).sum());
    }
  } else {
    Tensor y0 = element.to(math);
    if (beta.equal(1)) {
      y = y0.add(c.sum());
    } else {
      // powers[k] = beta^(m-k): beta^m scales y0; row i < m-1 of the 't' loop is scaled m-1-i times
      Tensor powers = at::full({m}, beta, a.options()).cumprod(0).flip({0});
      Tensor rows = column_major ? c.sum()
                                 : c.narrow(0, 0, m - 1).mul(powers.narrow(0, 1, m - 1)).sum().add(c.select(0, m - 1));
      y = y0.mul(powers.select(0, 0)).add(rows);
    }
  }
  element.copy_(y);
}

Tensor addmv_into(Tensor out, const Tensor &self, const Tensor &mat, const Tensor &vec, const Scalar &beta,
                  const Scalar &alpha) {
  // ATen's addmv meta, in its order (the empty-matrix shortcut below needs
  // them as much as addmm's checks do): self at most 1-d, with mat.size(0)
  // elements or one (the message reads self.size(0), so a 0-d self raises
  // its IndexError there), one dtype for all three, then out='s dtype.
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1 && self.dim() <= 1, "vector + matrix @ vector expected, got ",
              self.dim(), ", ", mat.dim(), ", ", vec.dim());
  if (!(mat.size(1) == vec.size(0) && (mat.size(0) == self.numel() || self.numel() == 1)))
    TORCH_CHECK(false, "size mismatch, got input (", self.size(0), "), mat (", mat.size(0), "x", mat.size(1),
                "), vec (", vec.size(0), ")");
  TORCH_CHECK(self.scalar_type() == mat.scalar_type() && mat.scalar_type() == vec.scalar_type(),
              "addmv input tensors must have the same dtype, but got ", self.scalar_type(), ", ", mat.scalar_type(),
              ", and ", vec.scalar_type());
  if (out.defined() && !out.is_same(self)) check_out_dtype(out, vec.scalar_type());
  if (mat.numel() != 0) {
    // The CPU's kernel dispatches on the dtype, then converts beta and
    // alpha to it (float16 refuses 1e30, which addmm's float32 math type
    // would take); its empty-matrix shortcut does neither.
    TORCH_CHECK_NOT_IMPLEMENTED(mat.scalar_type() != at::kBool, "\"addmv_impl_cpu\" not implemented for 'Bool'");
    Scalar beta_t = converted_scalar(beta, mat.scalar_type());
    Scalar alpha_t = converted_scalar(alpha, mat.scalar_type());
    if (out.defined() && out.is_same(self) && at::has_internal_overlap(self) == at::MemOverlap::Yes) {
      addmv_into_aliased_self(self, mat, vec, beta_t, alpha_t);
      return self;
    }
  } else if (out.defined() && out.is_same(self) && at::has_internal_overlap(self) == at::MemOverlap::Yes &&
             scalar_is_zero(beta)) {
    // the CPU zeroes its result; with another beta its mul_out into the
    // aliased self raises the internal-overlap error, as the copy below does
    return self.zero_();
  }
  if (mat.numel() == 0) {
    // The CPU's empty-matrix shortcut: zeros when beta == 0, else self times
    // beta as a scalar tensor of self's dtype (an integer self takes beta=2.0
    // as 2, where addmm's in-place scaling refuses it), into vec's dtype.
    Tensor r = at::empty({mat.size(0)}, vec.options());
    if (scalar_is_zero(beta)) return r.zero_();
    return at::mul_out(r, self, at::scalar_tensor(beta, self.options().dtype(self.scalar_type()).device(at::kCPU)));
  }
  if (mat.is_complex()) return complex_addmv(self, mat, vec, beta, alpha);
  if (addmv_takes_aten_gemv_loop(mat, vec)) return addmv_aten_gemv_loop(self, mat, vec, beta, alpha);
  return at::addmm(self.dim() == 0 ? self : self.unsqueeze(1), mat, vec.unsqueeze(1), beta, alpha).squeeze(1);
}

Tensor rsub_fn(const Tensor &self, const Tensor &other, const Scalar &alpha) { return at::sub(other, self, alpha); }


bool equal_fn(const Tensor &a, const Tensor &b) {
  TORCH_CHECK(a.device() == b.device(), "Cannot compare two tensors on different devices. Got: ", a.device(),
              " and ", b.device());
  if (a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;
  return a.eq(b).all().item<bool>();
}

Tensor norm_dim(const Tensor &self, const std::optional<Scalar> &p, c10::IntArrayRef dim, bool keepdim) {
  return at::linalg_vector_norm(self, p.value_or(2), dim, keepdim, std::nullopt);
}
Tensor norm_dim_dtype(const Tensor &self, const std::optional<Scalar> &p, c10::IntArrayRef dim, bool keepdim,
                      c10::ScalarType dtype) {
  return at::linalg_vector_norm(self, p.value_or(2), dim, keepdim, dtype);
}

// weight_norm (nn.utils.weight_norm, parametrizations.weight_norm): w = v * g
// / ||v|| over every dim but `dim`. The norm keeps float32 for bfloat16, as
// the CPU's kernel does, and bfloat16 math is done in float32 and rounded once.
std::tuple<Tensor, Tensor> weight_norm_fn(const Tensor &v, const Tensor &g, int64_t dim) {
  TORCH_CHECK(v.device() == g.device(), "weight_norm: v on ", v.device(), ", g on ", g.device());
  c10::DeviceGuard guard(v.device());
  at::ScalarType norm_type = g.scalar_type() == at::kBFloat16 ? at::kFloat : g.scalar_type();
  bool low = v.scalar_type() == at::kBFloat16 || v.scalar_type() == at::kHalf;
  Tensor vf = low ? v.to(at::kFloat) : v;
  Tensor norms = at::norm_except_dim(vf, 2, dim);
  Tensor w = vf.mul(g.to(vf.scalar_type()).div(norms)).to(v.scalar_type()).contiguous();
  return {w, norms.to(norm_type)};
}

// Its backward is PyTorch's own differentiable formula (native ops only).
std::tuple<Tensor, Tensor> weight_norm_backward_fn(const Tensor &grad_w, const Tensor &v, const Tensor &g,
                                                   const Tensor &norms, int64_t dim) {
  TORCH_CHECK(v.is_contiguous() && g.is_contiguous() && norms.is_contiguous(), "_weight_norm_interface_backward: ",
              "saved_v, saved_g and saved_norms must be contiguous");
  c10::DeviceGuard guard(v.device());
  auto f = [](const Tensor &t) { return at::isReducedFloatingType(t.scalar_type()) ? t.to(at::kFloat) : t; };
  auto [gv, gg] = at::_weight_norm_differentiable_backward(f(grad_w.contiguous()), f(v), f(g), f(norms), dim);
  return {gv.to(v.scalar_type()), gg.to(g.scalar_type())};
}

// nn.Embedding(max_norm=...): each distinct referenced row whose norm
// exceeds max_norm is scaled to max_norm / (norm + 1e-7), as on the CPU.
Tensor &embedding_renorm_fn(Tensor &self, const Tensor &indices, double max_norm, double norm_type) {
  TORCH_CHECK(self.dim() == 2, "embedding_renorm_(): expected self to be 2-D, but got ", self.dim(), "-D");
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "embedding_renorm_(): Expected indices to have type Long or Int, but got ", indices.scalar_type());
  if (indices.numel() == 0) return self;
  c10::DeviceGuard guard(self.device());
  Tensor rows_idx = std::get<0>(at::_unique(indices.reshape(-1).to(at::kLong), /*sorted=*/true));
  Tensor rows = self.index_select(0, rows_idx);
  Tensor norms = at::linalg_vector_norm(rows, norm_type, {1}, /*keepdim=*/true, at::kFloat);
  Tensor scale = at::where(norms.gt(max_norm), norms.add(1e-7).reciprocal_().mul_(max_norm),
                           at::ones({}, norms.options()));
  self.index_copy_(0, rows_idx, rows.mul(scale).to(self.scalar_type()));
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "_weight_norm_interface", weight_norm_fn);
  NEURON_IMPL(m, "_weight_norm_interface_backward", weight_norm_backward_fn);
  NEURON_IMPL(m, "embedding_renorm_", embedding_renorm_fn);
  NEURON_VARIANTS(m, addmv_into, "addmv", nullptr, "addmv.out");
  NEURON_IMPL(m, "rsub.Tensor", rsub_fn);
  NEURON_IMPL(m, "equal", equal_fn);
  NEURON_IMPL(m, "norm.ScalarOpt_dim", norm_dim);
  NEURON_OUT_OF(m, norm_dim, "norm.out");
  NEURON_IMPL(m, "norm.ScalarOpt_dim_dtype", norm_dim_dtype);
  NEURON_OUT_OF(m, norm_dim_dtype, "norm.dtype_out");
}

}  // namespace torch_neuronx
