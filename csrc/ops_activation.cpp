// Activations and elementwise losses beyond ops_pointwise.cpp: threshold,
// hard/soft shrink, logit, nan_to_num, signbit, angle, PReLU, RReLU, GLU,
// and the Huber, smooth-L1 and binary cross-entropy losses with their
// backward. Elementwise parts run the NN-family kernels (nrt/ops/nn.h);
// loss reductions, weights and GLU's halves are composed from other native
// ops on the device.
#include <limits>

#include <ATen/ScalarOps.h>
#include <ATen/TensorIterator.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Reduction.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/leaky_relu.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sum.h>
#include <c10/core/DeviceGuard.h>

#include "iter_launch.h"
#include "nrt/ops/complex.h"
#include "nrt/ops/nn.h"
#include "registry.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using at::TensorIterator;
using c10::Scalar;

nrt_scalar fs(double d) {
  nrt_scalar v;
  v.f = d;
  return v;
}
// A Scalar in the iterator's compute domain (float or int64).
nrt_scalar dom(const at::TensorIteratorBase &iter, const Scalar &s) {
  nrt_scalar v;
  if (at::isFloatingType(iter.common_dtype())) {
    v.f = s.toDouble();
  } else {
    v.i = s.isFloatingPoint() ? static_cast<int64_t>(s.toDouble()) : s.toLong();
  }
  return v;
}

Tensor run(TensorIterator iter, nrt_op op, std::initializer_list<nrt_scalar> s = {},
           std::initializer_list<int64_t> p = {}) {
  launch_iter(iter, op, s, p);
  return iter.output();
}

// grad, input, target (or grad, x, weight): the output broadcasts over all
// three, as ATen's loss backward iterators do.
TensorIterator ternary(Tensor &out, const Tensor &a, const Tensor &b, const Tensor &c) {
  return at::TensorIteratorConfig()
      .add_output(out)
      .add_const_input(a)
      .add_const_input(b)
      .add_const_input(c)
      .promote_inputs_to_common_dtype(true)
      .cast_common_dtype_to_outputs(true)
      .enforce_safe_casting_to_output(true)
      .build();
}

// Writes `r` into a caller's out= tensor with ATen's resize rules.
Tensor &into(Tensor &out, const Tensor &r) {
  at::native::resize_output(out, r.sizes());
  out.copy_(r);
  return out;
}

Tensor reduce_loss(const Tensor &loss, int64_t reduction) {
  if (reduction == at::Reduction::Mean) return at::mean(loss);
  if (reduction == at::Reduction::Sum) return at::sum(loss);
  return loss;
}
double norm_for(const Tensor &self, int64_t reduction) {
  return reduction == at::Reduction::Mean ? 1.0 / static_cast<double>(self.numel()) : 1.0;
}

// ---- threshold, shrink ---------------------------------------------------------
Tensor threshold_into(Tensor out, const Tensor &self, const Scalar &th, const Scalar &value) {
  auto iter = TensorIterator::unary_op(out, self);
  return run(iter, NRT_OP(THRESHOLD), {dom(iter, th), dom(iter, value)});
}
Tensor threshold_fn(const Tensor &self, const Scalar &th, const Scalar &v) { return threshold_into(Tensor(), self, th, v); }
Tensor &threshold_ip(Tensor &self, const Scalar &th, const Scalar &v) {
  threshold_into(self, self, th, v);
  return self;
}
Tensor &threshold_out(const Tensor &self, const Scalar &th, const Scalar &v, Tensor &out) {
  threshold_into(out, self, th, v);
  return out;
}

Tensor shrink_into(Tensor out, const Tensor &self, const Scalar &lambd, nrt_op op) {
  auto iter = TensorIterator::unary_op(out, self);
  return run(iter, op, {fs(lambd.toDouble())});
}
Tensor hardshrink_fn(const Tensor &self, const Scalar &l) { return shrink_into(Tensor(), self, l, NRT_OP(HARDSHRINK)); }
Tensor &hardshrink_out(const Tensor &self, const Scalar &l, Tensor &out) {
  shrink_into(out, self, l, NRT_OP(HARDSHRINK));
  return out;
}
Tensor softshrink_fn(const Tensor &self, const Scalar &l) {
  TORCH_CHECK(l.toDouble() >= 0, "lambda must be greater or equal to 0, but found to be ", l.toDouble(), ".");
  return shrink_into(Tensor(), self, l, NRT_OP(SOFTSHRINK));
}
Tensor &softshrink_out(const Tensor &self, const Scalar &l, Tensor &out) {
  TORCH_CHECK(l.toDouble() >= 0, "lambda must be greater or equal to 0, but found to be ", l.toDouble(), ".");
  shrink_into(out, self, l, NRT_OP(SOFTSHRINK));
  return out;
}
Tensor shrink_backward_into(Tensor out, const Tensor &g, const Tensor &self, const Scalar &l) {
  auto iter = TensorIterator::borrowing_binary_op(out, g, self);
  return run(iter, NRT_OP(SHRINK_BACKWARD), {fs(l.toDouble())});
}
Tensor shrink_backward_fn(const Tensor &g, const Tensor &self, const Scalar &l) {
  return shrink_backward_into(Tensor(), g, self, l);
}
Tensor &shrink_backward_out(const Tensor &g, const Tensor &self, const Scalar &l, Tensor &gi) {
  shrink_backward_into(gi, g, self, l);
  return gi;
}

// ---- logit, nan_to_num, signbit, angle -------------------------------------------
Tensor logit_into(Tensor out, const Tensor &self, std::optional<double> eps) {
  auto iter = TensorIterator::unary_float_op(out, self);
  // ATen ignores a negative eps (no clamping).
  bool has = eps.has_value() && *eps >= 0;
  return run(iter, NRT_OP_LOGIT, {fs(has ? *eps : 0.0)}, {has});
}
Tensor logit_fn(const Tensor &self, std::optional<double> eps) { return logit_into(Tensor(), self, eps); }
Tensor &logit_ip(Tensor &self, std::optional<double> eps) {
  logit_into(self, self, eps);
  return self;
}
Tensor &logit_out(const Tensor &self, std::optional<double> eps, Tensor &out) {
  logit_into(out, self, eps);
  return out;
}
Tensor logit_backward_into(Tensor out, const Tensor &g, const Tensor &self, std::optional<double> eps) {
  auto iter = TensorIterator::borrowing_binary_op(out, g, self);
  bool has = eps.has_value() && *eps >= 0;
  double lo = has ? *eps : 0.0, hi = 1.0 - lo;
  // ATen forms the band [eps, 1 - eps] in the tensor's dtype; in bfloat16
  // and float16 that rounding decides which elements get a gradient.
  if (iter.common_dtype() == at::kBFloat16) {
    lo = static_cast<float>(c10::BFloat16(static_cast<float>(lo)));
    hi = static_cast<float>(c10::BFloat16(static_cast<float>(1.0 - lo)));
  } else if (iter.common_dtype() == at::kHalf) {
    lo = static_cast<float>(c10::Half(static_cast<float>(lo)));
    hi = static_cast<float>(c10::Half(static_cast<float>(1.0 - lo)));
  }
  return run(iter, NRT_OP(LOGIT_BACKWARD), {fs(lo), fs(hi)}, {has});
}
Tensor logit_backward_fn(const Tensor &g, const Tensor &self, std::optional<double> eps) {
  return logit_backward_into(Tensor(), g, self, eps);
}
Tensor &logit_backward_out(const Tensor &g, const Tensor &self, std::optional<double> eps, Tensor &gi) {
  logit_backward_into(gi, g, self, eps);
  return gi;
}

Tensor nan_to_num_into(Tensor out, const Tensor &self, std::optional<double> nan, std::optional<double> posinf,
                       std::optional<double> neginf) {
  auto iter = TensorIterator::unary_op(out, self);
  double big = std::numeric_limits<double>::max(), low = std::numeric_limits<double>::lowest();
  switch (self.scalar_type()) {
    case at::kFloat: big = std::numeric_limits<float>::max(); low = std::numeric_limits<float>::lowest(); break;
    case at::kBFloat16: big = std::numeric_limits<c10::BFloat16>::max(); low = std::numeric_limits<c10::BFloat16>::lowest(); break;
    case at::kHalf: big = std::numeric_limits<c10::Half>::max(); low = std::numeric_limits<c10::Half>::lowest(); break;
    default: break;
  }
  // Integer and bool tensors hold no NaN or infinity: the kernel copies.
  return run(iter, NRT_OP_NAN_TO_NUM, {fs(nan.value_or(0.0)), fs(posinf.value_or(big)), fs(neginf.value_or(low))});
}
Tensor nan_to_num_fn(const Tensor &self, std::optional<double> n, std::optional<double> p, std::optional<double> m) {
  return nan_to_num_into(Tensor(), self, n, p, m);
}
Tensor &nan_to_num_ip(Tensor &self, std::optional<double> n, std::optional<double> p, std::optional<double> m) {
  nan_to_num_into(self, self, n, p, m);
  return self;
}
Tensor &nan_to_num_out(const Tensor &self, std::optional<double> n, std::optional<double> p, std::optional<double> m,
                       Tensor &out) {
  nan_to_num_into(out, self, n, p, m);
  return out;
}

Tensor signbit_into(Tensor out, const Tensor &self) {
  // Bool result (as isnan); the input keeps its own compute domain.
  if (!out.defined()) out = at::empty(self.sizes(), self.options().dtype(at::kBool));
  TORCH_CHECK(out.scalar_type() == at::kBool, "signbit: result type Bool can't be cast to the desired output type ",
              out.scalar_type());
  auto iter = at::TensorIteratorConfig().add_output(out).add_const_input(self).check_all_same_dtype(false).build();
  return run(iter, NRT_OP(SIGNBIT));
}
Tensor signbit_fn(const Tensor &self) { return signbit_into(Tensor(), self); }
Tensor &signbit_out(const Tensor &self, Tensor &out) {
  signbit_into(out, self);
  return out;
}

Tensor angle_into(Tensor out, const Tensor &self) {
  if (self.is_complex()) {  // atan2(im, re), real result
    at::ScalarType rt = c10::toRealValueType(self.scalar_type());
    if (!out.defined()) out = at::empty(self.sizes(), self.options().dtype(rt));
    TORCH_CHECK(out.scalar_type() == rt, "angle: result type ", rt, " can't be cast to the desired output type ",
                out.scalar_type());
    auto iter = at::TensorIteratorConfig().add_output(out).add_const_input(self).check_all_same_dtype(false).build();
    return run(iter, NRT_OP(CX_ANGLE));
  }
  auto iter = TensorIterator::unary_float_op(out, self);
  return run(iter, NRT_OP(ANGLE));
}
Tensor angle_fn(const Tensor &self) { return angle_into(Tensor(), self); }
Tensor &angle_out(const Tensor &self, Tensor &out) {
  angle_into(out, self);
  return out;
}

// ---- PReLU, RReLU, GLU -------------------------------------------------------------
Tensor prelu_fn(const Tensor &self, const Tensor &weight) {
  Tensor out;
  return run(TensorIterator::binary_op(out, self, weight), NRT_OP(PRELU));
}
// grad_weight keeps the broadcast (input) shape, as ATen's kernel does;
// autograd sums it to the weight's shape.
std::tuple<Tensor, Tensor> prelu_backward_fn(const Tensor &g, const Tensor &self, const Tensor &weight) {
  Tensor gi, gw;
  gi = run(ternary(gi, g, self, weight), NRT_OP(PRELU_BACKWARD_INPUT));
  gw = run(TensorIterator::binary_op(gw, g, self), NRT_OP(PRELU_BACKWARD_WEIGHT));
  return {gi, gw};
}

// Training: each non-positive element gets a slope drawn from U(lower,
// upper), saved in `noise` (1 where the input is positive); evaluation is a
// leaky ReLU with the mean slope. Random numbers come from the device's
// generator through the native uniform_.
Tensor &rrelu_into(Tensor &out, const Tensor &self, Tensor &noise, const Scalar &lower, const Scalar &upper,
                   bool training, std::optional<at::Generator> gen) {
  double lo = lower.toDouble(), hi = upper.toDouble();
  TORCH_CHECK(hi >= lo, "Lower bound should be less than or equal to the upper bound");
  if (!training) {
    Tensor r = at::leaky_relu(self, (lo + hi) / 2);
    return out.is_same(self) ? out.copy_(r) : into(out, r);
  }
  TORCH_CHECK(noise.sizes() == self.sizes(), "rrelu_with_noise: noise must have the shape of the input");
  noise.uniform_(lo, hi, gen);
  noise.masked_fill_(self > 0, 1);
  Tensor r = self * noise;
  return out.is_same(self) ? out.copy_(r) : into(out, r);
}
Tensor rrelu_fn(const Tensor &self, Tensor &noise, const Scalar &l, const Scalar &u, bool training,
                std::optional<at::Generator> gen) {
  Tensor out = at::empty_like(self);
  rrelu_into(out, self, noise, l, u, training, gen);
  return out;
}
Tensor &rrelu_ip(Tensor &self, Tensor &noise, const Scalar &l, const Scalar &u, bool training,
                 std::optional<at::Generator> gen) {
  return rrelu_into(self, self, noise, l, u, training, gen);
}
Tensor &rrelu_out(const Tensor &self, Tensor &noise, const Scalar &l, const Scalar &u, bool training,
                  std::optional<at::Generator> gen, Tensor &out) {
  return rrelu_into(out, self, noise, l, u, training, gen);
}

int64_t glu_dim(const Tensor &self, int64_t dim) {
  TORCH_CHECK(self.dim() > 0, "glu does not support scalars because halving size must be even");
  int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(self.size(d) % 2 == 0, "Halving dimension must be even, but dimension ", d, " is size ", self.size(d));
  return d;
}
Tensor glu_fn(const Tensor &self, int64_t dim) {
  int64_t d = glu_dim(self, dim), h = self.size(d) / 2;
  return self.narrow(d, 0, h) * at::sigmoid(self.narrow(d, h, h));
}
Tensor &glu_out(const Tensor &self, int64_t dim, Tensor &out) { return into(out, glu_fn(self, dim)); }
Tensor glu_backward_fn(const Tensor &g, const Tensor &self, int64_t dim) {
  int64_t d = glu_dim(self, dim), h = self.size(d) / 2;
  Tensor a = self.narrow(d, 0, h), s = at::sigmoid(self.narrow(d, h, h));
  Tensor ga = s * g;
  Tensor gb = (1.0 - s) * s * a * g;
  return at::cat({ga, gb}, d);
}
Tensor &glu_backward_out(const Tensor &g, const Tensor &self, int64_t dim, Tensor &gi) {
  return into(gi, glu_backward_fn(g, self, dim));
}

// ---- losses ------------------------------------------------------------------------
Tensor pointwise_loss(const Tensor &self, const Tensor &target, nrt_op op, double param) {
  Tensor loss;
  return run(TensorIterator::borrowing_binary_op(loss, self, target), op, {fs(param)});
}
Tensor loss_backward(const Tensor &g, const Tensor &self, const Tensor &target, nrt_op op, double param,
                     int64_t reduction) {
  Tensor gi;
  gi = run(ternary(gi, g, self, target), op, {fs(param), fs(norm_for(self, reduction))});
  return gi;
}

Tensor huber_fn(const Tensor &self, const Tensor &target, int64_t reduction, double delta) {
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  return reduce_loss(pointwise_loss(self, target, NRT_OP(HUBER), delta), reduction);
}
Tensor &huber_out(const Tensor &self, const Tensor &target, int64_t reduction, double delta, Tensor &out) {
  return into(out, huber_fn(self, target, reduction, delta));
}
Tensor huber_backward_fn(const Tensor &g, const Tensor &self, const Tensor &target, int64_t reduction, double delta) {
  return loss_backward(g, self, target, NRT_OP(HUBER_BACKWARD), delta, reduction);
}
Tensor &huber_backward_out(const Tensor &g, const Tensor &self, const Tensor &target, int64_t reduction, double delta,
                           Tensor &gi) {
  return into(gi, huber_backward_fn(g, self, target, reduction, delta));
}

Tensor smooth_l1_fn(const Tensor &self, const Tensor &target, int64_t reduction, double beta) {
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  return reduce_loss(pointwise_loss(self, target, NRT_OP(SMOOTH_L1), beta), reduction);
}
Tensor &smooth_l1_out(const Tensor &self, const Tensor &target, int64_t reduction, double beta, Tensor &out) {
  return into(out, smooth_l1_fn(self, target, reduction, beta));
}
Tensor smooth_l1_backward_fn(const Tensor &g, const Tensor &self, const Tensor &target, int64_t reduction,
                             double beta) {
  return loss_backward(g, self, target, NRT_OP(SMOOTH_L1_BACKWARD), beta, reduction);
}
Tensor &smooth_l1_backward_out(const Tensor &g, const Tensor &self, const Tensor &target, int64_t reduction,
                               double beta, Tensor &gi) {
  return into(gi, smooth_l1_backward_fn(g, self, target, reduction, beta));
}

// The CPU kernel rejects probabilities outside [0, 1]; checking it here reads
// one flag back from the device (a synchronisation, like CUDA's device
// assert surfacing), which a loss computed once per step can afford.
void check_probabilities(const Tensor &self) {
  if (self.numel() == 0) return;
  bool bad = ((self < 0) | (self > 1)).any().item<bool>();
  TORCH_CHECK(!bad, "all elements of input should be between 0 and 1");
}
Tensor bce_fn(const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight, int64_t reduction) {
  check_probabilities(self);
  Tensor loss = pointwise_loss(self, target, NRT_OP(BCE), 0.0);
  if (weight.has_value() && weight->defined()) loss = loss * *weight;
  return reduce_loss(loss, reduction);
}
Tensor &bce_out(const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight, int64_t reduction,
                Tensor &out) {
  return into(out, bce_fn(self, target, weight, reduction));
}
Tensor bce_backward_fn(const Tensor &g, const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight,
                       int64_t reduction) {
  Tensor gi;
  gi = run(ternary(gi, g, self, target), NRT_OP(BCE_BACKWARD));
  if (weight.has_value() && weight->defined()) gi = gi * *weight;
  if (reduction == at::Reduction::Mean) gi = gi / static_cast<double>(self.numel());
  return gi;
}
Tensor &bce_backward_out(const Tensor &g, const Tensor &self, const Tensor &target,
                         const std::optional<Tensor> &weight, int64_t reduction, Tensor &gi) {
  return into(gi, bce_backward_fn(g, self, target, weight, reduction));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "threshold", threshold_fn);
  NEURON_IMPL(m, "threshold_", threshold_ip);
  NEURON_IMPL(m, "threshold.out", threshold_out);
  NEURON_IMPL(m, "hardshrink", hardshrink_fn);
  NEURON_IMPL(m, "hardshrink.out", hardshrink_out);
  NEURON_IMPL(m, "softshrink", softshrink_fn);
  NEURON_IMPL(m, "softshrink.out", softshrink_out);
  NEURON_IMPL(m, "hardshrink_backward", shrink_backward_fn);
  NEURON_IMPL(m, "hardshrink_backward.grad_input", shrink_backward_out);
  NEURON_IMPL(m, "softshrink_backward", shrink_backward_fn);
  NEURON_IMPL(m, "softshrink_backward.grad_input", shrink_backward_out);
  NEURON_IMPL(m, "logit", logit_fn);
  NEURON_IMPL(m, "logit_", logit_ip);
  NEURON_IMPL(m, "logit.out", logit_out);
  NEURON_IMPL(m, "logit_backward", logit_backward_fn);
  NEURON_IMPL(m, "logit_backward.grad_input", logit_backward_out);
  NEURON_IMPL(m, "nan_to_num", nan_to_num_fn);
  NEURON_IMPL(m, "nan_to_num_", nan_to_num_ip);
  NEURON_IMPL(m, "nan_to_num.out", nan_to_num_out);
  NEURON_IMPL(m, "signbit", signbit_fn);
  NEURON_IMPL(m, "signbit.out", signbit_out);
  NEURON_IMPL(m, "angle", angle_fn);
  NEURON_IMPL(m, "angle.out", angle_out);
  NEURON_IMPL(m, "_prelu_kernel", prelu_fn);
  NEURON_IMPL(m, "_prelu_kernel_backward", prelu_backward_fn);
  NEURON_IMPL(m, "rrelu_with_noise", rrelu_fn);
  NEURON_IMPL(m, "rrelu_with_noise_", rrelu_ip);
  NEURON_IMPL(m, "rrelu_with_noise.out", rrelu_out);
  NEURON_IMPL(m, "glu", glu_fn);
  NEURON_IMPL(m, "glu.out", glu_out);
  NEURON_IMPL(m, "glu_backward", glu_backward_fn);
  NEURON_IMPL(m, "glu_backward.grad_input", glu_backward_out);
  NEURON_IMPL(m, "huber_loss", huber_fn);
  NEURON_IMPL(m, "huber_loss.out", huber_out);
  NEURON_IMPL(m, "huber_loss_backward", huber_backward_fn);
  NEURON_IMPL(m, "huber_loss_backward.out", huber_backward_out);
  NEURON_IMPL(m, "smooth_l1_loss", smooth_l1_fn);
  NEURON_IMPL(m, "smooth_l1_loss.out", smooth_l1_out);
  NEURON_IMPL(m, "smooth_l1_loss_backward", smooth_l1_backward_fn);
  NEURON_IMPL(m, "smooth_l1_loss_backward.grad_input", smooth_l1_backward_out);
  NEURON_IMPL(m, "binary_cross_entropy", bce_fn);
  NEURON_IMPL(m, "binary_cross_entropy.out", bce_out);
  NEURON_IMPL(m, "binary_cross_entropy_backward", bce_backward_fn);
  NEURON_IMPL(m, "binary_cross_entropy_backward.grad_input", bce_backward_out);
}

}  // namespace torch_neuronx
