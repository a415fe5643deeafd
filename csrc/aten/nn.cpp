// The NN family's glue: activations beyond pointwise.cpp (threshold,
// hard/soft shrink, logit, nan_to_num, signbit, angle, PReLU, RReLU, GLU,
// log_sigmoid), the Huber, smooth-L1, binary cross-entropy and MSE losses
// with their backward, and the fused addr. Elementwise parts run the
// NN-family kernels (nrt/ops/nn.h); loss reductions, weights and GLU's
// halves are composed from other native ops on the device.
#include <limits>

#include <ATen/OpMathType.h>
#include <ATen/ScalarOps.h>
#include <ATen/TensorIterator.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Reduction.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/atan2.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/imag.h>
#include <ATen/ops/real.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/leaky_relu.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/softplus.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sum.h>
#include <c10/core/DeviceGuard.h>

#include "launch/launch.h"
#include "launch/scalar.h"
#include "nrt/ops/nn.h"
#include "registry/variants.h"

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
// A Scalar in the iterator's compute domain (float or int64), converted as
// the CPU's threshold kernel converts it: to the math type of the compute
// dtype (float32 for float16/bfloat16), with its overflow check.
nrt_scalar dom(const at::TensorIteratorBase &iter, const Scalar &s) {
  return checked_scalar(s, at::toOpMathType(iter.common_dtype()));
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


Tensor reduce_loss(const Tensor &loss, int64_t reduction) {
  if (reduction == at::Reduction::Mean) return at::mean(loss);
  if (reduction == at::Reduction::Sum) return at::sum(loss);
  return loss;
}
double norm_for(const Tensor &self, int64_t reduction) {
  return reduction == at::Reduction::Mean ? 1.0 / static_cast<double>(self.numel()) : 1.0;
}

// ---- threshold, shrink ---------------------------------------------------------
// The CPU's threshold iterator does not check for internal overlap (an
// in-place threshold of an expanded tensor computes: every copy of an
// element gets the same value), and its kernel dispatches on the result's
// dtype, all but bool and complex, before it converts the scalars.
Tensor threshold_into(Tensor out, const Tensor &self, const Scalar &th, const Scalar &value) {
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(false)
                  .add_output(out)
                  .add_const_input(self)
                  .promote_inputs_to_common_dtype(true)
                  .cast_common_dtype_to_outputs(true)
                  .enforce_safe_casting_to_output(true)
                  .build();
  at::ScalarType t = iter.dtype();
  TORCH_CHECK_NOT_IMPLEMENTED(t != at::kBool && !at::isComplexType(t), "\"threshold_cpu\" not implemented for '",
                              c10::toString(t), "'");
  return run(iter, NRT_OP(THRESHOLD), {dom(iter, th), dom(iter, value)});
}

// The CPU kernels of these activations dispatch on floating dtypes only: an
// integer or bool input is NotImplementedError naming the kernel, at the op
// (complex inputs go to the complex family's own refusal).
void check_activation_dtype(at::ScalarType t, const char *cpu_kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t) || at::isComplexType(t), "\"", cpu_kernel,
                              "\" not implemented for '", t, "'");
}

Tensor shrink_into(Tensor out, const Tensor &self, const Scalar &lambd, nrt_op op) {
  auto iter = TensorIterator::unary_op(out, self);
  check_activation_dtype(iter.common_dtype(), op == NRT_OP(HARDSHRINK) ? "hardshrink_cpu" : "softshrink_check");
  // The CPU's hardshrink converts lambda to the dtype itself (float16
  // refuses 1e30); softshrink checks its own range above.
  bool hard = op == NRT_OP(HARDSHRINK) && at::isFloatingType(iter.common_dtype());
  return run(iter, op, {hard ? checked_scalar(lambd, iter.common_dtype()) : fs(lambd.toDouble())});
}
Tensor hardshrink_into(Tensor out, const Tensor &self, const Scalar &l) {
  return shrink_into(out, self, l, NRT_OP(HARDSHRINK));
}
Tensor softshrink_into(Tensor out, const Tensor &self, const Scalar &l) {
  TORCH_CHECK(l.toDouble() >= 0, "lambda must be greater or equal to 0, but found to be ", l.toDouble(), ".");
  return shrink_into(out, self, l, NRT_OP(SOFTSHRINK));
}
Tensor shrink_backward_into(Tensor out, const Tensor &g, const Tensor &self, const Scalar &l) {
  auto iter = TensorIterator::borrowing_binary_op(out, g, self);
  return run(iter, NRT_OP(SHRINK_BACKWARD), {fs(l.toDouble())});
}

// ---- logit, nan_to_num, signbit, angle -------------------------------------------
Tensor logit_into(Tensor out, const Tensor &self, std::optional<double> eps) {
  auto iter = TensorIterator::unary_float_op(out, self);
  // ATen ignores a negative eps (no clamping).
  bool has = eps.has_value() && *eps >= 0;
  return run(iter, NRT_OP_LOGIT, {fs(has ? *eps : 0.0)}, {has});
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

Tensor nan_to_num_into(Tensor out, const Tensor &self, std::optional<double> nan, std::optional<double> posinf,
                       std::optional<double> neginf) {
  TORCH_CHECK(!out.defined() || out.scalar_type() == self.scalar_type(), "nan_to_num: dtype of out: ",
              out.scalar_type(), " should be same as input: ", self.scalar_type());
  if (at::isIntegralType(self.scalar_type(), /*includeBool=*/true)) {
    // Integer and bool tensors hold no NaN or infinity: the CPU copies them
    // without an iterator, so an in-place call on an expanded tensor is not
    // refused as overlapping (it leaves it as it is).
    if (out.is_same(self)) return out;
    if (!out.defined()) return self.clone();
    at::native::resize_output(out, self.sizes());
    return out.copy_(self);
  }
  if (self.is_complex()) {
    // The CPU replaces non-finite real and imaginary parts independently,
    // with the limits of the part's own (real) dtype.
    Tensor res = out.defined() ? out : at::empty_like(self);
    at::native::resize_output(res, self.sizes());
    for (bool imag : {false, true}) {
      Tensor part = imag ? at::imag(res) : at::real(res);
      at::nan_to_num_out(part, imag ? at::imag(self) : at::real(self), nan, posinf, neginf);
    }
    return res;
  }
  auto iter = TensorIterator::unary_op(out, self);
  double big = std::numeric_limits<double>::max(), low = std::numeric_limits<double>::lowest();
  switch (self.scalar_type()) {
    case at::kFloat: big = std::numeric_limits<float>::max(); low = std::numeric_limits<float>::lowest(); break;
    case at::kBFloat16: big = std::numeric_limits<c10::BFloat16>::max(); low = std::numeric_limits<c10::BFloat16>::lowest(); break;
    case at::kHalf: big = std::numeric_limits<c10::Half>::max(); low = std::numeric_limits<c10::Half>::lowest(); break;
    default: break;
  }
  return run(iter, NRT_OP_NAN_TO_NUM, {fs(nan.value_or(0.0)), fs(posinf.value_or(big)), fs(neginf.value_or(low))});
}

Tensor signbit_into(Tensor out, const Tensor &self) {
  // ATen's meta refuses complex first (an empty input too, an out= of any dtype).
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "signbit is not implemented for complex tensors.");
  // Bool result (as isnan); the input keeps its own compute domain.
  if (!out.defined()) out = at::empty(self.sizes(), self.options().dtype(at::kBool));
  TORCH_CHECK(out.scalar_type() == at::kBool, "signbit: result type Bool can't be cast to the desired output type ",
              out.scalar_type());
  auto iter = at::TensorIteratorConfig().add_output(out).add_const_input(self).check_all_same_dtype(false).build();
  return run(iter, NRT_OP(SIGNBIT));
}

Tensor angle_into(Tensor out, const Tensor &self) {
  if (self.is_complex()) {
    // arg(z) = atan2(im, re), a real result: the native atan2 over the
    // (re, im) views, so this file needs no COMPLEX-family kernel.
    at::ScalarType rt = c10::toRealValueType(self.scalar_type());
    if (!out.defined()) out = at::empty(self.sizes(), self.options().dtype(rt));
    if (out.scalar_type() == rt) return at::atan2_out(out, at::imag(self), at::real(self));
    // ATen's unary_op_impl_with_complex_to_float_out: a real out= the angle
    // can be cast to takes it; a complex one any self's dtype casts to (the
    // angle as its real part).
    at::ScalarType from = out.is_complex() ? self.scalar_type() : rt;
    TORCH_CHECK(at::canCast(from, out.scalar_type()), "result type ", from, " can't be cast to the desired output type ",
                out.scalar_type());
    Tensor r = at::atan2(at::imag(self), at::real(self));
    at::native::resize_output(out, r.sizes());
    return out.copy_(r);
  }
  auto iter = TensorIterator::unary_float_op(out, self);
  return run(iter, NRT_OP(ANGLE));
}

// ---- PReLU, RReLU, GLU -------------------------------------------------------------
Tensor prelu_fn(const Tensor &self, const Tensor &weight) {
  Tensor out;
  auto iter = TensorIterator::binary_op(out, self, weight);
  check_activation_dtype(iter.common_dtype(), "prelu_cpu");
  return run(iter, NRT_OP(PRELU));
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
Tensor rrelu_into(Tensor /*out: Variants copies*/, const Tensor &self, Tensor &noise, const Scalar &lower,
                  const Scalar &upper, bool training, std::optional<at::Generator> gen) {
  double lo = lower.toDouble(), hi = upper.toDouble();
  TORCH_CHECK(hi >= lo, "Lower bound should be less than or equal to the upper bound");
  if (!training) return at::leaky_relu(self, (lo + hi) / 2);
  TORCH_CHECK(noise.sizes() == self.sizes(), "rrelu_with_noise: noise must have the shape of the input");
  noise.uniform_(lo, hi, gen);
  noise.masked_fill_(self > 0, 1);
  return self * noise;
}

int64_t glu_dim(const Tensor &self, int64_t dim) {
  TORCH_CHECK(self.dim() > 0, "glu does not support scalars because halving size must be even");
  int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(self.size(d) % 2 == 0, "Halving dimension must be even, but dimension ", d, " is size ", self.size(d));
  return d;
}
Tensor glu_into(Tensor, const Tensor &self, int64_t dim) {
  int64_t d = glu_dim(self, dim), h = self.size(d) / 2;
  // The CPU's glu kernel has floating dtypes only (no complex, unlike the
  // activations above), empty or not.
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"glu_cpu\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  return self.narrow(d, 0, h) * at::sigmoid(self.narrow(d, h, h));
}
Tensor glu_backward_into(Tensor, const Tensor &g, const Tensor &self, int64_t dim) {
  int64_t d = glu_dim(self, dim), h = self.size(d) / 2;
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"glu_backward_cpu\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  Tensor a = self.narrow(d, 0, h), s = at::sigmoid(self.narrow(d, h, h));
  Tensor ga = s * g;
  Tensor gb = (1.0 - s) * s * a * g;
  return at::cat({ga, gb}, d);
}

// ---- losses ----
// The composed ones return a fresh result, which the out= overload copies
// in (registry/variants.h), hence their unnamed `out`.--------------------------------------------------------------------
// The CPU's loss kernels compute floating dtypes only: another common dtype
// raises NotImplementedError naming the CPU's kernel, at the op (not in a
// later mean of the integer result).
void check_loss_dtype(at::ScalarType t, const char *cpu_kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t), "\"", cpu_kernel, "\" not implemented for '", c10::toString(t),
                              "'");
}
// F.mse_loss/huber_loss/smooth_l1_loss broadcast the target to the input
// first (broadcast_tensors), which turns a 0-d CPU target, a value to the
// CPU and to ATen's iterators, into a CPU tensor whose every stride is 0.
// That one element goes to the device and is expanded there again: the
// same shape and dtype, so the same promotion, as the CPU computes.
Tensor loss_operand(const Tensor &t, const Tensor &other) {
  if (!t.is_cpu() || other.is_cpu()) return t;
  if (t.dim() == 0) return t.to(other.device());  // the backward iterators take no CPU scalar
  if (t.numel() == 0) return at::empty(t.sizes(), t.options().device(other.device()));
  return broadcast_host_scalar(t, other);
}

Tensor pointwise_loss(const Tensor &self, const Tensor &target, nrt_op op, double param, const char *cpu_kernel) {
  Tensor loss;
  auto iter = TensorIterator::borrowing_binary_op(loss, self, target);
  check_loss_dtype(iter.common_dtype(), cpu_kernel);
  return run(iter, op, {fs(param)});
}
Tensor loss_backward(const Tensor &g, const Tensor &self, const Tensor &target, nrt_op op, double param,
                     int64_t reduction) {
  Tensor gi;
  gi = run(ternary(gi, g, loss_operand(self, g), loss_operand(target, g)), op,
           {fs(param), fs(norm_for(self, reduction))});
  return gi;
}

// The CPU's huber and binary cross-entropy kernels build their iterators
// without promotion: every operand must have the first input's dtype
// (RuntimeError "Found dtype Float but expected Half"), checked before the
// kernel's own dtype support.
void check_same_dtype(const Tensor &first, std::initializer_list<const Tensor *> others) {
  for (const Tensor *t : others) {
    if (t->defined())
      TORCH_CHECK(t->scalar_type() == first.scalar_type(), "Found dtype ", t->scalar_type(), " but expected ",
                  first.scalar_type());
  }
}

Tensor huber_into(Tensor, const Tensor &self, const Tensor &target, int64_t reduction, double delta) {
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  // ATen's huber_loss writes into empty_like(input): it computes in the
  // promoted dtype and casts to the input's before reducing, so its
  // iterator first refuses a promoted dtype the input's cannot hold (an
  // integer input beside a float target), before the kernel's dtype check.
  at::ScalarType common = at::result_type(self, target);
  TORCH_CHECK(at::canCast(common, self.scalar_type()), "result type ", common,
              " can't be cast to the desired output type ", self.scalar_type());
  Tensor loss = pointwise_loss(loss_operand(self, target), loss_operand(target, self), NRT_OP(HUBER), delta,
                               "huber_cpu");
  if (loss.scalar_type() != self.scalar_type()) loss = loss.to(self.scalar_type());
  return reduce_loss(loss, reduction);
}
Tensor huber_backward_into(Tensor, const Tensor &g, const Tensor &self, const Tensor &target, int64_t reduction,
                          double delta) {
  check_same_dtype(self, {&target, &g});
  return loss_backward(g, self, target, NRT_OP(HUBER_BACKWARD), delta, reduction);
}

Tensor smooth_l1_into(Tensor, const Tensor &self, const Tensor &target, int64_t reduction, double beta) {
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  return reduce_loss(pointwise_loss(loss_operand(self, target), loss_operand(target, self), NRT_OP(SMOOTH_L1), beta,
                                    "smooth_l1_cpu"),
                     reduction);
}
Tensor smooth_l1_backward_into(Tensor, const Tensor &g, const Tensor &self, const Tensor &target,
                               int64_t reduction, double beta) {
  return loss_backward(g, self, target, NRT_OP(SMOOTH_L1_BACKWARD), beta, reduction);
}

// The CPU kernel rejects probabilities outside [0, 1]; checking it here reads
// one flag back from the device (a synchronisation, like CUDA's device
// assert surfacing), which a loss computed once per step can afford.
void check_probabilities(const Tensor &self) {
  if (self.numel() == 0) return;
  bool bad = ((self < 0) | (self > 1)).any().item<bool>();
  TORCH_CHECK(!bad, "all elements of input should be between 0 and 1");
}
Tensor bce_into(Tensor, const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight,
                int64_t reduction) {
  check_same_dtype(self, {&target});
  check_loss_dtype(self.scalar_type(), "binary_cross_entropy");
  check_probabilities(self);
  Tensor loss = pointwise_loss(self, target, NRT_OP(BCE), 0.0, "binary_cross_entropy");
  if (weight.has_value() && weight->defined()) loss = loss * *weight;
  return reduce_loss(loss, reduction);
}
Tensor bce_backward_into(Tensor, const Tensor &g, const Tensor &self, const Tensor &target,
                         const std::optional<Tensor> &weight, int64_t reduction) {
  check_same_dtype(g, {&self, &target});
  Tensor gi;
  gi = run(ternary(gi, g, self, target), NRT_OP(BCE_BACKWARD));
  if (weight.has_value() && weight->defined()) gi = gi * *weight;
  if (reduction == at::Reduction::Mean) gi = gi / static_cast<double>(self.numel());
  return gi;
}

// ---- mse_loss ------------------------------------------------------------------
Tensor mse_loss_fn(const Tensor &self, const Tensor &target, int64_t reduction) {
  at::ScalarType rt = at::result_type(self, target);
  check_loss_dtype(rt, "mse_cpu");
  // in the promoted dtype, as the CPU's iterator reads both (a bool input
  // beside a float target is a number there, not a bool to subtract)
  Tensor d = loss_operand(self, target).to(rt).sub(loss_operand(target, self).to(rt));
  Tensor sq = d.mul(d);
  if (reduction == at::Reduction::Mean) return sq.mean();
  if (reduction == at::Reduction::Sum) return sq.sum();
  return sq;
}
Tensor mse_loss_backward_fn(const Tensor &grad_output, const Tensor &self, const Tensor &target, int64_t reduction) {
  double norm = reduction == at::Reduction::Mean ? 2.0 / static_cast<double>(self.numel()) : 2.0;
  at::ScalarType rt = at::result_type(self, target);
  return loss_operand(self, grad_output).to(rt).sub(loss_operand(target, grad_output).to(rt)).mul(norm).mul(grad_output);
}

// log_sigmoid = -softplus(-x); its backward grad * sigmoid(-x). The buffer
// output is scratch the backward here does not read; it has the input's
// shape and the output's layout because the meta function (the
// decomposition, which gives CUDA alone an empty buffer) says so.
std::tuple<Tensor, Tensor> log_sigmoid_forward_fn(const Tensor &self) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"log_sigmoid_cpu\" not implemented for '",
                              self.scalar_type(), "'");  // the CPU kernel's dtypes, before the composition's
  Tensor out = at::softplus(self.neg(), 1, 20).neg_();
  return {out, at::empty_like(out)};
}
Tensor log_sigmoid_backward_fn(const Tensor &grad, const Tensor &self, const Tensor & /*buffer*/) {
  return self.neg().sigmoid().mul_(grad);
}

// ---- addr ------------------------------------------------------------------------
// addr: beta * self + alpha * outer(vec1, vec2) as one elementwise kernel
// over ATen's own iterator (self broadcast to n x m, vec1 as a column), so
// bfloat16 rounds once instead of after each of the four steps.
Tensor addr_into(Tensor out, const Tensor &self, const Tensor &v1, const Tensor &v2, const Scalar &beta,
                 const Scalar &alpha) {
  TORCH_CHECK(v1.dim() == 1, "addr: Expected 1-D argument vec1, but got ", v1.dim(), "-D");
  TORCH_CHECK(v2.dim() == 1, "addr: Expected 1-D argument vec2, but got ", v2.dim(), "-D");
  Tensor s = self.expand({v1.size(0), v2.size(0)});
  Tensor col = v1.reshape({v1.size(0), 1});
  auto iter = at::TensorIteratorConfig()
                  .add_output(out)
                  .add_const_input(s)
                  .add_const_input(col)
                  .add_const_input(v2)
                  .promote_inputs_to_common_dtype(true)
                  .cast_common_dtype_to_outputs(true)
                  .enforce_safe_casting_to_output(true)
                  .build();
  at::ScalarType rt = iter.common_dtype();
  if (rt == at::kBool) {
    TORCH_CHECK(beta.isBoolean() || !beta.isFloatingPoint(), "Boolean beta only supported for Boolean results.");
    TORCH_CHECK(alpha.isBoolean() || !alpha.isFloatingPoint(), "Boolean alpha only supported for Boolean results.");
  } else if (at::isIntegralType(rt, /*includeBool=*/false)) {
    TORCH_CHECK(!beta.isFloatingPoint() && !alpha.isFloatingPoint(),
                "For integral input tensors, argument beta must not be a floating point number.");
  }
  bool fdom = at::isFloatingType(iter.common_dtype());
  // Converted to the result dtype itself, as the CPU's addr kernel does
  // (float16 refuses alpha=1e30, which addmm's float32 math type takes).
  nrt_scalar b = checked_scalar(beta, rt), a = checked_scalar(alpha, rt);
  if (at::isComplexType(rt)) {
    // The scaled addcmul kernel is real: complex composes the runtime's
    // complex elementwise ops (beta == 0 still ignores self, NaN included)
    // in the CPU kernel's order, (alpha * vec1) * vec2: an inf part meets
    // alpha's zero imaginary part before the outer product, not after it
    // (alpha * (1+2j) * inf is inf+infj, (1+2j) * inf * alpha nan+nanj).
    bool ignore_self = scalar_is_zero(beta);
    Tensor r = col.to(rt).mul(alpha).mul(v2.to(rt));
    // The CPU adds the two terms plainly; add() would first multiply r by
    // its alpha 1 + 0i (an inf part of r making the other NaN), so the sum
    // runs over the real views.
    if (!ignore_self) r = at::view_as_complex(at::view_as_real(s.to(rt).mul(beta)).add(at::view_as_real(r)));
    iter.output().copy_(r);
    return iter.output();
  }
  bool ignore_self = fdom ? beta.toDouble() == 0.0 : beta.toLong() == 0;
  launch_iter(iter, NRT_OP(SCALED_ADDCMUL), {b, a}, {ignore_self});
  return iter.output();
}
}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_VARIANTS(m, threshold_into, "threshold", "threshold_", "threshold.out");
  NEURON_VARIANTS(m, hardshrink_into, "hardshrink", nullptr, "hardshrink.out");
  NEURON_VARIANTS(m, softshrink_into, "softshrink", nullptr, "softshrink.out");
  NEURON_VARIANTS(m, shrink_backward_into, "hardshrink_backward", nullptr, "hardshrink_backward.grad_input");
  NEURON_VARIANTS(m, shrink_backward_into, "softshrink_backward", nullptr, "softshrink_backward.grad_input");
  NEURON_VARIANTS(m, logit_into, "logit", "logit_", "logit.out");
  NEURON_VARIANTS(m, logit_backward_into, "logit_backward", nullptr, "logit_backward.grad_input");
  NEURON_VARIANTS(m, nan_to_num_into, "nan_to_num", "nan_to_num_", "nan_to_num.out");
  NEURON_VARIANTS(m, signbit_into, "signbit", nullptr, "signbit.out");
  NEURON_VARIANTS(m, angle_into, "angle", nullptr, "angle.out");
  NEURON_IMPL(m, "_prelu_kernel", prelu_fn);
  NEURON_IMPL(m, "_prelu_kernel_backward", prelu_backward_fn);
  NEURON_VARIANTS(m, rrelu_into, "rrelu_with_noise", "rrelu_with_noise_", "rrelu_with_noise.out");
  NEURON_VARIANTS(m, glu_into, "glu", nullptr, "glu.out");
  NEURON_VARIANTS(m, glu_backward_into, "glu_backward", nullptr, "glu_backward.grad_input");
  NEURON_VARIANTS(m, huber_into, "huber_loss", nullptr, "huber_loss.out");
  NEURON_VARIANTS(m, huber_backward_into, "huber_loss_backward", nullptr, "huber_loss_backward.out");
  NEURON_VARIANTS(m, smooth_l1_into, "smooth_l1_loss", nullptr, "smooth_l1_loss.out");
  NEURON_VARIANTS(m, smooth_l1_backward_into, "smooth_l1_loss_backward", nullptr,
                  "smooth_l1_loss_backward.grad_input");
  NEURON_VARIANTS(m, bce_into, "binary_cross_entropy", nullptr, "binary_cross_entropy.out");
  NEURON_VARIANTS(m, bce_backward_into, "binary_cross_entropy_backward", nullptr,
                  "binary_cross_entropy_backward.grad_input");
  NEURON_IMPL(m, "mse_loss", mse_loss_fn);
  NEURON_IMPL(m, "mse_loss_backward", mse_loss_backward_fn);
  NEURON_IMPL(m, "log_sigmoid_forward", log_sigmoid_forward_fn);
  NEURON_IMPL(m, "log_sigmoid_backward", log_sigmoid_backward_fn);
  NEURON_OUT_OF(m, log_sigmoid_forward_fn, "log_sigmoid_forward.output");
  NEURON_OUT_OF(m, log_sigmoid_backward_fn, "log_sigmoid_backward.grad_input");
  NEURON_OUT_OF(m, mse_loss_fn, "mse_loss.out");
  NEURON_OUT_OF(m, mse_loss_backward_fn, "mse_loss_backward.grad_input");
  NEURON_VARIANTS(m, addr_into, "addr", nullptr, "addr.out");
}

}  // namespace torch_neuronx
