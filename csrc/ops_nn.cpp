// Native neural-network ops: nll_loss (the back half of cross_entropy),
// layer_norm, mse_loss. Shapes, reductions and defaults follow ATen's
// functions of the same name; the runtime's NLL and NORM kernels compute the
// per-row parts and the device's reductions the rest.
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Reduction.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/softplus.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>

#include "iter_launch.h"
#include "registry.h"
#include "nrt/ops/index.h"
#include "nrt/ops/norm.h"

namespace torch_neuronx {
namespace {

using at::Tensor;

void put(nrt_launch &d, int i, const Tensor &t, std::initializer_list<int64_t> dims) {
  set_operand(d.operands[i], t, dims);
}

// Per-sample loss and weight (0 where ignored) for self [N, C], target [N].
std::pair<Tensor, Tensor> nll_rows(const Tensor &self2, const Tensor &target1, const Tensor *weight,
                                   int64_t ignore_index) {
  int64_t n = self2.size(0), c = self2.size(1);
  Tensor loss = at::empty({n}, self2.options());
  Tensor w = at::empty({n}, self2.options());
  if (n == 0) return {loss, w};
  nrt_launch d = new_launch(NRT_OP(NLL_LOSS), {n, c});
  d.noutputs = 2;
  d.ninputs = weight ? 3 : 2;
  put(d, 0, loss, {0, -1});
  put(d, 1, w, {0, -1});
  put(d, 2, self2, {0, 1});
  put(d, 3, target1, {0, -1});
  if (weight) put(d, 4, *weight, {-1, 0});
  d.compute_dtype = to_nrt_dtype(self2.scalar_type());
  d.params[0] = ignore_index;
  if (self2.scalar_type() == at::kDouble) warn_float64_once();
  launch(self2.device().index(), d);
  return {loss, w};
}

void nll_check(const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  bool no_batch = self.dim() == 1 && target.dim() == 0;
  TORCH_CHECK(no_batch || self.size(0) == target.size(0), "size mismatch (got input: ", self.sizes(),
              ", target: ", target.sizes(), ")");
  TORCH_CHECK(target.scalar_type() == at::kLong || target.scalar_type() == at::kByte,
              "expected scalar type Long but found ", target.scalar_type());
  int64_t c = self.size(-1);
  TORCH_CHECK(!weight || !weight->defined() || weight->numel() == c,
              "weight tensor should be defined either for all ", c, " classes or no classes but got weight tensor of shape: ",
              weight->sizes());
}

std::tuple<Tensor, Tensor> nll_loss_forward_fn(const Tensor &self, const Tensor &target,
                                               const std::optional<Tensor> &weight, int64_t reduction,
                                               int64_t ignore_index) {
  nll_check(self, target, weight);
  c10::DeviceGuard guard(self.device());
  Tensor self2 = self.dim() == 1 ? self.unsqueeze(0) : self;
  Tensor target1 = target.dim() == 0 ? target.reshape({1}) : target;
  if (target1.scalar_type() != at::kLong) target1 = target1.to(at::kLong);
  const Tensor *w = weight && weight->defined() ? &*weight : nullptr;
  auto [loss, ws] = nll_rows(self2, target1, w, ignore_index);
  if (reduction == at::Reduction::None) {
    Tensor total = at::zeros({}, self.options());
    return {self.dim() == 1 ? loss.reshape({}) : loss, total};
  }
  Tensor total = ws.sum();
  Tensor out = loss.sum();
  if (reduction == at::Reduction::Mean) out = out.div(total);
  return {out, total};
}

Tensor nll_loss_backward_fn(const Tensor &grad_output, const Tensor &self, const Tensor &target,
                            const std::optional<Tensor> &weight, int64_t reduction, int64_t ignore_index,
                            const Tensor &total_weight) {
  c10::DeviceGuard guard(self.device());
  Tensor self2 = self.dim() == 1 ? self.unsqueeze(0) : self;
  Tensor target1 = target.dim() == 0 ? target.reshape({1}) : target;
  if (target1.scalar_type() != at::kLong) target1 = target1.to(at::kLong);
  const Tensor *w = weight && weight->defined() ? &*weight : nullptr;
  int64_t n = self2.size(0), c = self2.size(1);
  Tensor grad_input = at::empty({n, c}, self.options());
  if (n > 0 && c > 0) {
    Tensor ws = nll_rows(self2, target1, w, ignore_index).second;
    Tensor g = reduction == at::Reduction::None ? grad_output.reshape({n}) : grad_output.reshape({1}).expand({n});
    Tensor gscale = ws.mul(g);
    if (reduction == at::Reduction::Mean) gscale = gscale.div(total_weight);
    gscale = gscale.contiguous();
    nrt_launch d = new_launch(NRT_OP(NLL_LOSS_BACKWARD), {n, c});
    d.noutputs = 1;
    d.ninputs = 2;
    put(d, 0, grad_input, {0, 1});
    put(d, 1, target1, {0, -1});
    put(d, 2, gscale, {0, -1});
    d.compute_dtype = to_nrt_dtype(self.scalar_type());
    d.params[0] = ignore_index;
    launch(self.device().index(), d);
  } else if (grad_input.numel() > 0) {
    grad_input.zero_();
  }
  return self.dim() == 1 ? grad_input.reshape({c}) : grad_input;
}

// ---- layer norm ---------------------------------------------------------------
std::tuple<Tensor, Tensor, Tensor> layer_norm_fn(const Tensor &input, c10::IntArrayRef normalized_shape,
                                                 const std::optional<Tensor> &weight,
                                                 const std::optional<Tensor> &bias, double eps) {
  c10::DeviceGuard guard(input.device());
  int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(axis >= 0 && input.sizes().slice(axis).equals(normalized_shape),
              "Given normalized_shape=", normalized_shape, ", expected input with shape [*, ",
              c10::Join(", ", normalized_shape), "], but got input of size", input.sizes());
  int64_t m = 1, n = 1;
  for (int64_t i = 0; i < axis; ++i) m *= input.size(i);
  for (int64_t i = axis; i < input.dim(); ++i) n *= input.size(i);
  Tensor x = input.contiguous().view({m, n});
  Tensor y = at::empty(input.sizes(), input.options());
  at::ScalarType stat_t = input.scalar_type();  // as ATen's CPU kernel returns them
  std::vector<int64_t> stat_shape(input.sizes().begin(), input.sizes().begin() + axis);
  stat_shape.resize(input.dim(), 1);
  Tensor mean = at::empty(stat_shape, input.options().dtype(stat_t));
  Tensor rstd = at::empty(stat_shape, input.options().dtype(stat_t));
  if (m == 0 || n == 0) return {y, mean, rstd};
  Tensor y2 = y.view({m, n}), mean1 = mean.view({m}), rstd1 = rstd.view({m});
  bool has_w = weight && weight->defined(), has_b = bias && bias->defined();
  Tensor w = has_w ? weight->contiguous().view({n}) : Tensor();
  Tensor b = has_b ? bias->contiguous().view({n}) : Tensor();
  nrt_launch d = new_launch(NRT_OP(LAYER_NORM), {m, n});
  d.noutputs = 3;
  int k = 0;
  put(d, k++, y2, {0, 1});
  put(d, k++, mean1, {0, -1});
  put(d, k++, rstd1, {0, -1});
  put(d, k++, x, {0, 1});
  if (has_w) put(d, k++, w, {-1, 0});
  if (has_b) put(d, k++, b, {-1, 0});
  d.ninputs = k - 3;
  d.params[1] = (has_w ? 1 : 0) | (has_b ? 2 : 0);
  d.scalars[0].f = eps;
  d.compute_dtype = to_nrt_dtype(input.scalar_type());
  if (input.scalar_type() == at::kDouble) warn_float64_once();
  launch(input.device().index(), d);
  return {y, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_backward_fn(const Tensor &grad_out, const Tensor &input,
                                                          c10::IntArrayRef normalized_shape, const Tensor &mean,
                                                          const Tensor &rstd, const std::optional<Tensor> &weight,
                                                          const std::optional<Tensor> &bias,
                                                          std::array<bool, 3> mask) {
  c10::DeviceGuard guard(input.device());
  int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  int64_t m = 1, n = 1;
  for (int64_t i = 0; i < axis; ++i) m *= input.size(i);
  for (int64_t i = axis; i < input.dim(); ++i) n *= input.size(i);
  bool has_w = weight && weight->defined();
  Tensor gi, gw, gb;
  Tensor x = input.contiguous().view({m, n});
  Tensor g = grad_out.contiguous().view({m, n});
  Tensor mean1 = mean.contiguous().view({m}), rstd1 = rstd.contiguous().view({m});
  if (mask[0]) {
    gi = at::empty(input.sizes(), input.options());
    if (m > 0 && n > 0) {
      Tensor gi2 = gi.view({m, n});
      Tensor w = has_w ? weight->contiguous().view({n}) : Tensor();
      nrt_launch d = new_launch(NRT_OP(LAYER_NORM_BACKWARD), {m, n});
      d.noutputs = 1;
      put(d, 0, gi2, {0, 1});
      put(d, 1, g, {0, 1});
      put(d, 2, x, {0, 1});
      put(d, 3, mean1, {0, -1});
      put(d, 4, rstd1, {0, -1});
      d.ninputs = 4;
      if (has_w) {
        put(d, 5, w, {-1, 0});
        d.ninputs = 5;
      }
      d.compute_dtype = to_nrt_dtype(input.scalar_type());
      launch(input.device().index(), d);
    }
  }
  if (mask[1] && has_w) {
    // d(weight) = sum over rows of grad * xhat, xhat = (x - mean) * rstd
    Tensor xhat = x.sub(mean1.unsqueeze(1)).mul(rstd1.unsqueeze(1));
    gw = g.mul(xhat).sum(0).to(weight->scalar_type()).view(weight->sizes());
  }
  if (mask[2] && bias && bias->defined()) gb = g.sum(0).to(bias->scalar_type()).view(bias->sizes());
  return {gi, gw, gb};
}

// ---- mse_loss ------------------------------------------------------------------
Tensor mse_loss_fn(const Tensor &self, const Tensor &target, int64_t reduction) {
  Tensor d = self.sub(target);
  Tensor sq = d.mul(d);
  if (reduction == at::Reduction::Mean) return sq.mean();
  if (reduction == at::Reduction::Sum) return sq.sum();
  return sq;
}
Tensor mse_loss_backward_fn(const Tensor &grad_output, const Tensor &self, const Tensor &target, int64_t reduction) {
  double norm = reduction == at::Reduction::Mean ? 2.0 / static_cast<double>(self.numel()) : 2.0;
  return self.sub(target).mul(norm).mul(grad_output);
}

// log_sigmoid = -softplus(-x); its backward grad * sigmoid(-x). The buffer
// output is unused (CPU-only scratch in ATen), returned empty.
std::tuple<Tensor, Tensor> log_sigmoid_forward_fn(const Tensor &self) {
  Tensor out = at::softplus(self.neg(), 1, 20).neg_();
  return {out, at::empty({0}, self.options())};
}
Tensor log_sigmoid_backward_fn(const Tensor &grad, const Tensor &self, const Tensor & /*buffer*/) {
  return self.neg().sigmoid().mul_(grad);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "nll_loss_forward", nll_loss_forward_fn);
  NEURON_IMPL(m, "nll_loss_backward", nll_loss_backward_fn);
  NEURON_IMPL(m, "native_layer_norm", layer_norm_fn);
  NEURON_IMPL(m, "native_layer_norm_backward", layer_norm_backward_fn);
  NEURON_IMPL(m, "mse_loss", mse_loss_fn);
  NEURON_IMPL(m, "log_sigmoid_forward", log_sigmoid_forward_fn);
  NEURON_IMPL(m, "log_sigmoid_backward", log_sigmoid_backward_fn);
  NEURON_IMPL(m, "mse_loss_backward", mse_loss_backward_fn);
}

}  // namespace torch_neuronx
