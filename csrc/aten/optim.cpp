// Fused optimizer steps (torch.optim's fused=True) of Adagrad, and the two
// ops of torch.amp.GradScaler (unscale with the non-finite check, scale
// update), which run on every mixed-precision step and so never read a
// value back to the host. (Adam, AdamW and SGD: one launch each, in
// foreach_optim.cpp.) Each parameter's Adagrad update is a short chain of
// native device ops; the step count and learning rate stay on the device as
// tensors, so a step never synchronises with the host. grad_scale divides
// the gradients and a nonzero found_inf turns the step into a no-op, as in
// ATen's fused kernels.
#include <ATen/ops/aminmax.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/where.h>
#include <c10/core/DeviceGuard.h>

#include "launch/launch.h"
#include "registry/variants.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using at::TensorList;

// Restores `t` from `saved` where found_inf is set (skipped step).
void keep_if_inf(const Tensor &t, const Tensor &saved, const Tensor &inf) {
  t.copy_(at::where(inf.ne(0), saved, t));
}

Tensor lr_tensor(TensorList params, double lr) {
  TORCH_CHECK(!params.empty(), "fused optimizer step with no parameters");
  return at::empty({}, params[0].options().dtype(at::kFloat)).fill_(lr);
}

// Adagrad (fused=True): the steps were already counted by torch.optim;
// lr decays as lr / (1 + (step - 1) * lr_decay), as in ATen's kernel.
void adagrad_impl(TensorList params, TensorList grads, TensorList sums, TensorList steps, const Tensor &lr,
                  double lr_decay, double weight_decay, double eps, bool maximize,
                  const std::optional<Tensor> &grad_scale, const std::optional<Tensor> &found_inf) {
  size_t n = params.size();
  TORCH_CHECK(grads.size() == n && sums.size() == n && steps.size() == n,
              "_fused_adagrad_: all tensor lists must have the same length");
  bool has_inf = found_inf && found_inf->defined();
  for (size_t i = 0; i < n; ++i) {
    const Tensor &p = params[i], &sum = sums[i];
    c10::DeviceGuard guard(p.device());
    Tensor saved_p, saved_s;
    if (has_inf) {
      saved_p = p.clone();
      saved_s = sum.clone();
    }
    Tensor g = grads[i].to(at::kFloat);
    if (grad_scale && grad_scale->defined()) g = g.div(*grad_scale);
    if (maximize) g = g.neg();
    Tensor pf = p.to(at::kFloat);
    if (weight_decay != 0) g = g.add(pf, weight_decay);
    Tensor clr = lr.div(steps[i].to(at::kFloat).sub(1).mul(lr_decay).add(1));
    sum.addcmul_(g.to(sum.scalar_type()), g.to(sum.scalar_type()), 1.0);
    Tensor denom = sum.to(at::kFloat).sqrt().add(eps);
    pf.sub_(g.div(denom).mul(clr));
    p.copy_(pf);
    if (has_inf) {
      keep_if_inf(p, saved_p, *found_inf);
      keep_if_inf(sum, saved_s, *found_inf);
    }
  }
}
void fused_adagrad(TensorList self, TensorList grads, TensorList sums, TensorList steps, double lr, double lr_decay,
                   double weight_decay, double eps, bool maximize, const std::optional<Tensor> &grad_scale,
                   const std::optional<Tensor> &found_inf) {
  if (self.empty()) return;
  adagrad_impl(self, grads, sums, steps, lr_tensor(self, lr), lr_decay, weight_decay, eps, maximize, grad_scale,
               found_inf);
}
void fused_adagrad_tlr(TensorList self, TensorList grads, TensorList sums, TensorList steps, const Tensor &lr,
                       double lr_decay, double weight_decay, double eps, bool maximize,
                       const std::optional<Tensor> &grad_scale, const std::optional<Tensor> &found_inf) {
  if (self.empty()) return;
  adagrad_impl(self, grads, sums, steps, lr.to(self[0].device(), at::kFloat), lr_decay, weight_decay, eps, maximize,
               grad_scale, found_inf);
}

// GradScaler.unscale_: found_inf becomes 1 if any gradient holds an inf or a
// NaN, and every gradient is multiplied by inv_scale (also the non-finite
// ones, as ATen's kernels do). amin/amax propagate NaN and infinities and,
// unlike a sum, cannot overflow on finite values.
void amp_non_finite_check_and_unscale(TensorList grads, Tensor &found_inf, const Tensor &inv_scale) {
  TORCH_CHECK(inv_scale.numel() == 1, "inv_scale must be a 1-element tensor.");
  TORCH_CHECK(found_inf.numel() == 1, "found_inf must be a 1-element tensor.");
  TORCH_CHECK(inv_scale.scalar_type() == at::kFloat, "inv_scale must be a float tensor.");
  TORCH_CHECK(found_inf.scalar_type() == at::kFloat, "found_inf must be a float tensor.");
  c10::DeviceGuard guard(found_inf.device());
  for (const Tensor &g : grads) {
    TORCH_CHECK(g.device() == found_inf.device(), "_amp_foreach_non_finite_check_and_unscale_: gradient on ",
                g.device(), ", found_inf on ", found_inf.device());
    TORCH_CHECK(at::isFloatingType(g.scalar_type()), "_amp_foreach_non_finite_check_and_unscale_: gradient of dtype ",
                g.scalar_type(), " is not floating point");
    if (g.numel() == 0) continue;
    auto [lo, hi] = at::aminmax(g);
    Tensor bad = lo.isfinite().logical_and_(hi.isfinite()).logical_not_();
    found_inf.copy_(at::where(bad, at::ones({}, found_inf.options()), found_inf));
    g.mul_(inv_scale);
  }
}

// GradScaler.update: back off after an overflow, grow after growth_interval
// clean steps unless growing would overflow float32, as ATen's kernel does,
// expressed as selects so nothing is read back.
Tensor &amp_update_scale(Tensor &scale, Tensor &growth_tracker, const Tensor &found_inf, double growth_factor,
                         double backoff_factor, int64_t growth_interval) {
  TORCH_CHECK(growth_tracker.numel() == 1 && growth_tracker.scalar_type() == at::kInt,
              "growth_tracker must be a one-element int tensor.");
  TORCH_CHECK(scale.numel() == 1 && scale.scalar_type() == at::kFloat, "current_scale must be a one-element float tensor.");
  TORCH_CHECK(found_inf.numel() == 1 && found_inf.scalar_type() == at::kFloat, "found_inf must be a one-element float tensor.");
  c10::DeviceGuard guard(scale.device());
  Tensor inf = found_inf.ne(0).reshape(scale.sizes());
  Tensor next = growth_tracker.add(1);
  Tensor grow = next.eq(growth_interval).logical_and_(inf.logical_not());
  Tensor grown = scale.mul(growth_factor);
  Tensor new_scale = at::where(inf, scale.mul(backoff_factor),
                               at::where(grow.logical_and(grown.isfinite()), grown, scale));
  Tensor new_tracker = at::where(inf.logical_or(grow), at::zeros({}, growth_tracker.options()), next);
  scale.copy_(new_scale);
  growth_tracker.copy_(new_tracker);
  return scale;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "_amp_foreach_non_finite_check_and_unscale_", amp_non_finite_check_and_unscale);
  NEURON_IMPL(m, "_amp_update_scale_", amp_update_scale);
  NEURON_IMPL(m, "_fused_adagrad_", fused_adagrad);
  NEURON_IMPL(m, "_fused_adagrad_.tensor_lr", fused_adagrad_tlr);
}

}  // namespace torch_neuronx
