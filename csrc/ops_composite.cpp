// Ops expressed through other native ops (each step a device kernel): the
// ATen signature and checks are PyTorch's, the arithmetic is a short chain
// of native launches. Where one of these becomes hot, it earns a kernel.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <c10/core/DeviceGuard.h>

#include "iter_launch.h"
#include "registry.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using c10::Scalar;

Tensor &write_out(Tensor &out, const Tensor &value) {
  at::native::resize_output(out, value.sizes());
  out.copy_(value);
  return out;
}

}  // namespace
Tensor complex_sgn(const Tensor &self);  // ops_complex.cpp: z / |z|, 0 at 0
namespace {

// sgn is sign for real tensors, z / |z| for complex ones.
Tensor sgn_fn(const Tensor &self) { return self.is_complex() ? complex_sgn(self) : self.sign(); }
Tensor &sgn_out(const Tensor &self, Tensor &out) { return write_out(out, sgn_fn(self)); }
Tensor &sgn_ip(Tensor &self) { return self.is_complex() ? self.copy_(complex_sgn(self)) : self.sign_(); }

Tensor dot_fn(const Tensor &a, const Tensor &b) {
  TORCH_CHECK(a.dim() == 1 && b.dim() == 1, "1D tensors expected, but got ", a.dim(), "D and ", b.dim(), "D tensors");
  TORCH_CHECK(a.numel() == b.numel(), "inconsistent tensor size, expected tensor [", a.numel(),
              "] and src [", b.numel(), "] to have the same number of elements, but got ", a.numel(), " and ",
              b.numel(), " elements respectively");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
              a.scalar_type(), " and ", b.scalar_type());
  return a.unsqueeze(0).mm(b.unsqueeze(1)).reshape({});
}

// vdot conjugates its first argument (a no-op for real tensors).
Tensor vdot_fn(const Tensor &a, const Tensor &b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "vdot : expected both vectors to have same dtype, but found ",
              a.scalar_type(), " and ", b.scalar_type());
  return dot_fn(a.is_complex() ? a.conj() : a, b);
}

Tensor addmv_fn(const Tensor &self, const Tensor &mat, const Tensor &vec, const Scalar &beta, const Scalar &alpha) {
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1, "vector + matrix @ vector expected, got ", self.dim(), ", ",
              mat.dim(), ", ", vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0), "size mismatch, got input (", self.size(0), "), mat (", mat.size(0), "x",
              mat.size(1), "), vec (", vec.size(0), ")");
  return at::addmm(self.dim() == 0 ? self : self.unsqueeze(1), mat, vec.unsqueeze(1), beta, alpha).squeeze(1);
}
Tensor &addmv_out(const Tensor &self, const Tensor &mat, const Tensor &vec, const Scalar &beta, const Scalar &alpha,
                  Tensor &out) {
  return write_out(out, addmv_fn(self, mat, vec, beta, alpha));
}

// index_add / index_fill_: advanced indexing along `dim` (accumulating for add).
c10::List<std::optional<Tensor>> dim_index(int64_t dim, const Tensor &index) {
  c10::List<std::optional<Tensor>> l;
  for (int64_t d = 0; d < dim; ++d) l.push_back(std::nullopt);
  l.push_back(index.reshape({-1}));
  return l;
}
Tensor index_add_fn(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &source, const Scalar &alpha) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(index.dim() <= 1, "index_add_(): Index is supposed to be a vector");
  Tensor out = self.clone();
  if (self.dim() == 0) {
    out.reshape({1}).index_put_(dim_index(0, index), source.reshape({-1}).mul(alpha), /*accumulate=*/true);
    return out;
  }
  Tensor src = alpha.equal(1) ? source : source.mul(alpha);
  out.index_put_(dim_index(dim, index), src.dim() == 0 ? src.reshape({1}) : src, /*accumulate=*/true);
  return out;
}
Tensor &index_add_out(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &source, const Scalar &alpha,
                      Tensor &out) {
  return write_out(out, index_add_fn(self, dim, index, source, alpha));
}
Tensor &index_fill_scalar(Tensor &self, int64_t dim, const Tensor &index, const Scalar &value) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  Tensor v = at::empty({}, self.options()).fill_(value);
  if (self.dim() == 0) {
    self.reshape({1}).index_put_(dim_index(0, index), v, false);
    return self;
  }
  self.index_put_(dim_index(dim, index), v, false);
  return self;
}
Tensor &index_fill_tensor(Tensor &self, int64_t dim, const Tensor &index, const Tensor &value) {
  TORCH_CHECK(value.dim() == 0, "Only supports 0-dimensional value tensor. Got a tensor with ", value.dim(),
              " dimensions.");
  return index_fill_scalar(self, dim, index, value.item());
}

std::tuple<Tensor, Tensor> var_mean_fn(const Tensor &self, at::OptionalIntArrayRef dim,
                                       const std::optional<Scalar> &correction, bool keepdim) {
  return {at::var(self, dim, correction, keepdim), at::mean(self, dim, keepdim)};
}
std::tuple<Tensor, Tensor> std_mean_fn(const Tensor &self, at::OptionalIntArrayRef dim,
                                       const std::optional<Scalar> &correction, bool keepdim) {
  return {at::std(self, dim, correction, keepdim), at::mean(self, dim, keepdim)};
}

Tensor rsub_fn(const Tensor &self, const Tensor &other, const Scalar &alpha) { return at::sub(other, self, alpha); }

Tensor clamp_min_t(const Tensor &self, const Tensor &lo) { return at::maximum(self, lo); }
Tensor clamp_max_t(const Tensor &self, const Tensor &hi) { return at::minimum(self, hi); }
Tensor &clamp_min_t_out(const Tensor &self, const Tensor &lo, Tensor &out) { return at::maximum_out(out, self, lo); }
Tensor &clamp_max_t_out(const Tensor &self, const Tensor &hi, Tensor &out) { return at::minimum_out(out, self, hi); }

// clamp with tensor bounds: maximum then minimum (NaN-propagating, as clamp).
Tensor clamp_t(const Tensor &self, const std::optional<Tensor> &lo, const std::optional<Tensor> &hi) {
  bool has_lo = lo && lo->defined(), has_hi = hi && hi->defined();
  TORCH_CHECK(has_lo || has_hi, "torch.clamp: At least one of 'min' or 'max' must not be None");
  Tensor r = has_lo ? at::maximum(self, *lo) : self;
  if (has_hi) r = at::minimum(r, *hi);
  if (!has_lo && !has_hi) r = self.clone();
  return r;
}
Tensor &clamp_t_out(const Tensor &self, const std::optional<Tensor> &lo, const std::optional<Tensor> &hi,
                    Tensor &out) {
  return write_out(out, clamp_t(self, lo, hi));
}
Tensor &clamp_t_ip(Tensor &self, const std::optional<Tensor> &lo, const std::optional<Tensor> &hi) {
  self.copy_(clamp_t(self, lo, hi));
  return self;
}

// logaddexp = max + log1p(exp(-|a - b|)), with equal infinities handled as
// PyTorch does (log(2 * exp(inf)) = inf, -inf stays -inf).
Tensor logaddexp_fn(const Tensor &a, const Tensor &b) {
  Tensor m = at::maximum(a, b);
  Tensor r = m.add(a.sub(b).abs().neg().exp().log1p());
  return at::where(a.eq(b).logical_and(a.isinf()), a, r);
}
Tensor &logaddexp_out(const Tensor &a, const Tensor &b, Tensor &out) { return write_out(out, logaddexp_fn(a, b)); }

bool equal_fn(const Tensor &a, const Tensor &b) {
  TORCH_CHECK(a.device() == b.device(), "Cannot compare two tensors on different devices. Got: ", a.device(),
              " and ", b.device());
  if (a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;
  return a.eq(b).all().item<bool>();
}

Tensor nansum_fn(const Tensor &self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype) {
  Tensor x = at::isFloatingType(self.scalar_type()) ? at::where(self.isnan(), at::zeros_like(self), self) : self;
  return at::sum(x, dim, keepdim, dtype);
}

Tensor norm_dim(const Tensor &self, const std::optional<Scalar> &p, c10::IntArrayRef dim, bool keepdim) {
  return at::linalg_vector_norm(self, p.value_or(2), dim, keepdim, std::nullopt);
}
Tensor norm_dim_dtype(const Tensor &self, const std::optional<Scalar> &p, c10::IntArrayRef dim, bool keepdim,
                      c10::ScalarType dtype) {
  return at::linalg_vector_norm(self, p.value_or(2), dim, keepdim, dtype);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "sgn", sgn_fn);
  NEURON_IMPL(m, "sgn.out", sgn_out);
  NEURON_IMPL(m, "sgn_", sgn_ip);
  NEURON_IMPL(m, "dot", dot_fn);
  NEURON_IMPL(m, "vdot", vdot_fn);
  NEURON_IMPL(m, "addmv", addmv_fn);
  NEURON_IMPL(m, "addmv.out", addmv_out);
  NEURON_IMPL(m, "index_add", index_add_fn);
  NEURON_IMPL(m, "index_add.out", index_add_out);
  NEURON_IMPL(m, "index_fill_.int_Scalar", index_fill_scalar);
  NEURON_IMPL(m, "index_fill_.int_Tensor", index_fill_tensor);
  NEURON_IMPL(m, "var_mean.correction", var_mean_fn);
  NEURON_IMPL(m, "std_mean.correction", std_mean_fn);
  NEURON_IMPL(m, "rsub.Tensor", rsub_fn);
  NEURON_IMPL(m, "clamp_min.Tensor", clamp_min_t);
  NEURON_IMPL(m, "clamp_max.Tensor", clamp_max_t);
  NEURON_IMPL(m, "clamp_min.Tensor_out", clamp_min_t_out);
  NEURON_IMPL(m, "clamp_max.Tensor_out", clamp_max_t_out);
  NEURON_IMPL(m, "clamp.Tensor", clamp_t);
  NEURON_IMPL(m, "clamp.Tensor_out", clamp_t_out);
  NEURON_IMPL(m, "clamp_.Tensor", clamp_t_ip);
  NEURON_IMPL(m, "logaddexp", logaddexp_fn);
  NEURON_IMPL(m, "logaddexp.out", logaddexp_out);
  NEURON_IMPL(m, "equal", equal_fn);
  NEURON_IMPL(m, "nansum", nansum_fn);
  NEURON_IMPL(m, "norm.ScalarOpt_dim", norm_dim);
  NEURON_IMPL(m, "norm.ScalarOpt_dim_dtype", norm_dim_dtype);
}

}  // namespace torch_neuronx
