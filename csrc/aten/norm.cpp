// Native normalisation (family NORM): layer norm, and the channel norms
// (batch norm in training and eval, group norm) with their backward
// passes. Shapes, defaults and errors follow ATen's functions of the same
// name; the runtime's NORM kernels compute the per-row and per-channel
// parts, the device's reductions the rest.
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mean.h>
#include <c10/core/DeviceGuard.h>

#include "launch/launch.h"
#include "nrt/ops/norm.h"
#include "registry/variants.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using c10::IntArrayRef;

// A per-channel vector (or a 0-dim tensor, broadcast).
void put_vec(nrt_operand &o, const Tensor &t) { set_operand(o, t, {t.dim() == 0 ? -1 : 0}); }

void check_float(const Tensor &t, const char *op) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t.scalar_type()), "\"", op, "\" not implemented for '",
                              t.scalar_type(), "'");
  if (t.scalar_type() == at::kDouble) warn_float64_once();
}

// The CPU's parameter dtypes for layer norm and batch norm (its
// is_mixed_type / check_mixed_data_type, then its kernels' accessors): the
// first defined parameter decides; if it has the input's dtype, all must,
// else all must be float32 and the input float16 or bfloat16. Layer norm
// checks them before the input's own dtype, as the CPU does.
void check_param_dtypes(const Tensor &input, std::initializer_list<const std::optional<Tensor> *> params) {
  const Tensor *first = nullptr;
  for (auto *p : params)
    if (*p && (*p)->defined()) {
      first = &**p;
      break;
    }
  if (!first) return;
  if (first->scalar_type() != input.scalar_type()) {
    for (auto *p : params)
      TORCH_CHECK(!(*p && (*p)->defined()) || (*p)->scalar_type() == at::kFloat,
                  "mixed dtype (CPU): expect parameter to have scalar type of Float");
    TORCH_CHECK(at::isReducedFloatingType(input.scalar_type()), "mixed dtype (CPU): all inputs must share same "
                "datatype.");
    return;
  }
  for (auto *p : params)
    TORCH_CHECK(!(*p && (*p)->defined()) || (*p)->scalar_type() == input.scalar_type(), "expected scalar type ",
                input.scalar_type(), " but found ", (*p)->scalar_type());
}

// The thread count the CPU's kernels split their work by (its per-thread
// partial sums decide the order). A backward runs on the autograd engine's
// device thread, whose OpenMP setting is its own: init_num_threads re-reads
// the count torch.set_num_threads last set, as the caller's CPU backward
// sees it.
int64_t cpu_threads() {
  at::init_num_threads();
  return at::get_num_threads();
}

at::TensorOptions act_options(const Tensor &like) {
  return like.options().memory_format(like.suggest_memory_format());
}

// ---- layer norm ---------------------------------------------------------------
std::tuple<Tensor, Tensor, Tensor> layer_norm_fn(const Tensor &input, c10::IntArrayRef normalized_shape,
                                                 const std::optional<Tensor> &weight,
                                                 const std::optional<Tensor> &bias, double eps) {
  c10::DeviceGuard guard(input.device());
  check_param_dtypes(input, {&weight, &bias});
  int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(axis >= 0 && input.sizes().slice(axis).equals(normalized_shape),
              "Given normalized_shape=", normalized_shape, ", expected input with shape [*, ",
              c10::Join(", ", normalized_shape), "], but got input of size", input.sizes());
  check_float(input, "LayerNormKernelImpl");  // the CPU's kernel checks even an empty input
  int64_t m = 1, n = 1;
  for (int64_t i = 0; i < axis; ++i) m *= input.size(i);
  for (int64_t i = axis; i < input.dim(); ++i) n *= input.size(i);
  Tensor x = input.contiguous().view({m, n});
  Tensor y = at::empty(input.sizes(), input.options());
  // float32 statistics for a 16-bit input, as the meta function and CUDA
  // keep them (ATen's CPU kernel rounds them to the input's dtype; a
  // compiled graph is planned from the meta function)
  at::ScalarType stat_t = at::toOpMathType(input.scalar_type());
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
  set_operand(d.operands[k++], y2, {0, 1});
  set_operand(d.operands[k++], mean1, {0, -1});
  set_operand(d.operands[k++], rstd1, {0, -1});
  set_operand(d.operands[k++], x, {0, 1});
  if (has_w) set_operand(d.operands[k++], w, {-1, 0});
  if (has_b) set_operand(d.operands[k++], b, {-1, 0});
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
      set_operand(d.operands[0], gi2, {0, 1});
      set_operand(d.operands[1], g, {0, 1});
      set_operand(d.operands[2], x, {0, 1});
      set_operand(d.operands[3], mean1, {0, -1});
      set_operand(d.operands[4], rstd1, {0, -1});
      d.ninputs = 4;
      if (has_w) {
        set_operand(d.operands[5], w, {-1, 0});
        d.ninputs = 5;
      }
      d.compute_dtype = to_nrt_dtype(input.scalar_type());
      launch(input.device().index(), d);
    }
  }
  bool want_w = mask[1] && has_w, want_b = mask[2] && bias && bias->defined();
  if (want_w) gw = at::empty(weight->sizes(), weight->options());
  if (want_b) gb = at::empty(bias->sizes(), bias->options());
  if ((want_w || want_b) && m == 0) {
    if (want_w) gw.zero_();
    if (want_b) gb.zero_();
  } else if ((want_w || want_b) && n > 0) {
    // d(weight) and d(bias) in the CPU's order (layer_norm.c): per-thread
    // partial sums over its chunks of rows, in the input's dtype
    nrt_launch d = new_launch(NRT_OP(LAYER_NORM_PARAM_GRADS), {m, n});
    int k = 0;
    if (want_w) set_operand(d.operands[k++], gw.view({n}), {-1, 0});
    if (want_b) set_operand(d.operands[k++], gb.view({n}), {-1, 0});
    d.noutputs = k;
    set_operand(d.operands[k++], g, {0, 1});
    set_operand(d.operands[k++], x, {0, 1});
    set_operand(d.operands[k++], mean1, {0, -1});
    set_operand(d.operands[k++], rstd1, {0, -1});
    d.ninputs = 4;
    d.params[0] = (want_w ? 2 : 0) | (want_b ? 4 : 0);
    d.params[1] = has_w && weight->scalar_type() == at::kFloat && at::isReducedFloatingType(x.scalar_type()) ? 1 : 0;
    d.params[3] = cpu_threads();
    d.compute_dtype = to_nrt_dtype(input.scalar_type());
    launch(input.device().index(), d);
  }
  return {gi, gw, gb};
}

// ---- channel normalisation ---------------------------------------------------------

// Byte strides {n, c, s} of an [N, C, *] tensor whose spatial dims collapse
// into one run; false if they do not.
bool ncs_strides(const Tensor &t, int64_t st[3]) {
  int64_t es = static_cast<int64_t>(t.element_size());
  st[0] = t.stride(0) * es;
  st[1] = t.dim() > 1 ? t.stride(1) * es : 0;
  st[2] = es;
  int64_t inner_stride = -1, inner_size = 1;
  for (int64_t j = t.dim() - 1; j >= 2; --j) {
    if (t.size(j) == 1) continue;
    if (inner_stride < 0) {
      inner_stride = t.stride(j);
      st[2] = inner_stride * es;
    } else if (t.stride(j) != inner_stride * inner_size) {
      return false;
    }
    inner_size *= t.size(j);
  }
  return true;
}

// The [N, C, S] operand of an activation (made contiguous when its spatial
// dims do not collapse).
Tensor ncs(const Tensor &t) {
  int64_t st[3];
  return ncs_strides(t, st) ? t : t.contiguous();
}

void put_ncs(nrt_operand &o, const Tensor &t) {
  int64_t st[3];
  bool ok = ncs_strides(t, st);
  TORCH_INTERNAL_ASSERT(ok, "neuron channel norm: spatial dims do not collapse");
  set_operand(o, t, {});
  for (int j = 0; j < 3; ++j) o.strides[j] = st[j];
}

int64_t spatial(const Tensor &t) {
  int64_t s = 1;
  for (int64_t j = 2; j < t.dim(); ++j) s *= t.size(j);
  return s;
}

bool defined(const std::optional<Tensor> &t) { return t && t->defined(); }

// Statistics dtype: float32 when a reduced-precision input meets float32
// parameters (ATen's mixed type), else the input's.
at::ScalarType stat_type(const Tensor &input, std::initializer_list<const std::optional<Tensor> *> params) {
  if (at::isReducedFloatingType(input.scalar_type()))
    for (auto *p : params)
      if (defined(*p) && (*p)->scalar_type() == at::kFloat) return at::kFloat;
  return input.scalar_type();
}

std::tuple<Tensor, Tensor, Tensor> bn_forward(const Tensor &input, const std::optional<Tensor> &weight,
                                              const std::optional<Tensor> &bias,
                                              const std::optional<Tensor> &running_mean,
                                              const std::optional<Tensor> &running_var, bool training,
                                              double momentum, double eps) {
  // The CPU's batch_norm_cpu checks in this order. In training, with no
  // mixed-type parameters (the first defined one has the input's dtype, or
  // none is given), a non-contiguous input has its mean taken by at::mean
  // before anything else, which refuses an integer or bool input; then the
  // channel dim is read (IndexError for a 1-d input); then the running
  // stats must come in pairs (ValueError); then its kernel dispatches on
  // the input's dtype, before its mixed-type checks of the parameters
  // (layer norm checks them first).
  if (training && !at::isFloatingType(input.scalar_type()) && !at::isComplexType(input.scalar_type()) &&
      !input.is_contiguous() && !input.is_contiguous(at::MemoryFormat::ChannelsLast)) {
    const Tensor *first = nullptr;
    for (const auto *p : {&weight, &bias, &running_mean, &running_var})
      if (defined(*p)) {
        first = &**p;
        break;
      }
    TORCH_CHECK(first && first->scalar_type() != input.scalar_type(),
                "mean(): could not infer output dtype. Input dtype must be either a floating point or complex "
                "dtype. Got: ", c10::toString(input.scalar_type()));
  }
  if (training) {
    (void)input.size(1);
    TORCH_CHECK_VALUE(defined(running_mean) == defined(running_var),
                      "running_mean and running_var must either both be None or neither be None");
  }
  check_float(input, "batch_norm");
  check_param_dtypes(input, {&weight, &bias, &running_mean, &running_var});
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected at least 2-D input, got ", input.dim(), "-D");
  TORCH_CHECK(input.numel() > 0, "input tensor must have at least one element, but got input_sizes = ",
              input.sizes());
  c10::DeviceGuard guard(input.device());
  int64_t n = input.size(0), c = input.size(1), s = spatial(input);
  // Saved statistics in float32 for a 16-bit input whatever the parameters'
  // dtype, as the meta function (and CUDA) return them.
  at::ScalarType st = at::toOpMathType(input.scalar_type());
  Tensor x = ncs(input);
  Tensor y = at::empty_like(input, act_options(input));
  bool has_w = defined(weight), has_b = defined(bias);
  for (const auto *p : {&weight, &bias, &running_mean, &running_var})
    TORCH_CHECK(!defined(*p) || (*p)->numel() == c, "batch_norm: expected ", c, " channel parameters, got ",
                (*p)->sizes());
  nrt_launch d = new_launch(training ? NRT_OP(BATCH_NORM) : NRT_OP(BATCH_NORM_EVAL), {n, c, s});
  d.compute_dtype = to_nrt_dtype(input.scalar_type());
  d.scalars[0].f = eps;
  d.scalars[1].f = momentum;
  d.params[1] = (has_w ? 1 : 0) | (has_b ? 2 : 0);
  // Which of ATen's CPU kernels the CPU runs for these tensors (its
  // batch_norm_cpu): the kernel follows that one's arithmetic and order, so
  // that sums at the float limits and infinite weights give the CPU's
  // values (channel_norm.c). The channels-last statistics split the rows
  // by the CPU's thread count.
  auto any_contig = [](const Tensor &t) {
    return t.is_contiguous() || t.is_contiguous(at::MemoryFormat::ChannelsLast) ||
           t.is_contiguous(at::MemoryFormat::ChannelsLast3d);
  };
  bool all_contig = any_contig(input);
  for (const auto *p : {&weight, &bias, &running_mean, &running_var})
    all_contig = all_contig && (!defined(*p) || (*p)->is_contiguous());
  if (!all_contig) d.params[1] |= NRT_BN_STRIDED;
  if (at::isReducedFloatingType(input.scalar_type()) &&
      stat_type(input, {&weight, &bias, &running_mean, &running_var}) != at::kFloat)
    d.params[1] |= NRT_BN_ROUND16;
  d.params[2] = !any_contig(input) ? NRT_BN_STATS_STRIDED
                : input.suggest_memory_format() == at::MemoryFormat::Contiguous && s > 1 ? NRT_BN_STATS_PLANES
                                                                                        : NRT_BN_STATS_ROWS;
  d.params[3] = at::get_num_threads();
  Tensor mean, invstd;
  int k = 0;
  put_ncs(d.operands[k++], y);
  if (training) {
    mean = at::empty({c}, input.options().dtype(st));
    invstd = at::empty({c}, input.options().dtype(st));
    put_vec(d.operands[k++], mean);
    put_vec(d.operands[k++], invstd);
    if (defined(running_mean)) {
      put_vec(d.operands[k++], *running_mean);
      put_vec(d.operands[k++], *running_var);
    }
    d.noutputs = k;
    put_ncs(d.operands[k++], x);
  } else {
    TORCH_CHECK(defined(running_mean) && defined(running_var),
                "batch_norm: running_mean and running_var must be defined in evaluation mode");
    // [C] saved statistics (the running mean and 1/sqrt(running_var +
    // eps)) as the meta function returns them off the CPU; the CPU's
    // kernel returns empty ones
    mean = at::empty({c}, input.options().dtype(st));
    invstd = at::empty({c}, input.options().dtype(st));
    put_vec(d.operands[k++], mean);
    put_vec(d.operands[k++], invstd);
    d.noutputs = k;
    put_ncs(d.operands[k++], x);
    put_vec(d.operands[k++], *running_mean);
    put_vec(d.operands[k++], *running_var);
  }
  if (has_w) put_vec(d.operands[k++], *weight);
  if (has_b) put_vec(d.operands[k++], *bias);
  if (training && d.params[2] == NRT_BN_STATS_STRIDED && input.scalar_type() == at::kFloat) {
    // The CPU takes a strided input's mean with at::mean (a float cascade
    // sum: 3e38 + 3e38 overflows there); the device's mean follows that
    // order. It is written into save_mean first, where the kernel reads it
    // (p0 = 1; the stream runs the two in order)
    std::vector<int64_t> dims{0};
    for (int64_t j = 2; j < input.dim(); ++j) dims.push_back(j);
    mean.copy_(at::mean(input, dims));
    d.params[0] = 1;
  }
  d.ninputs = k - d.noutputs;
  launch(input.device().index(), d);
  return {y, mean, invstd};
}

std::tuple<Tensor, Tensor, Tensor> native_bn_fn(const Tensor &input, const std::optional<Tensor> &weight,
                                                const std::optional<Tensor> &bias,
                                                const std::optional<Tensor> &running_mean,
                                                const std::optional<Tensor> &running_var, bool training,
                                                double momentum, double eps) {
  return bn_forward(input, weight, bias, running_mean, running_var, training, momentum, eps);
}
std::tuple<Tensor, Tensor, Tensor> bn_legit_fn(const Tensor &input, const std::optional<Tensor> &weight,
                                               const std::optional<Tensor> &bias, Tensor &running_mean,
                                               Tensor &running_var, bool training, double momentum, double eps) {
  return bn_forward(input, weight, bias, running_mean, running_var, training, momentum, eps);
}
std::tuple<Tensor, Tensor, Tensor> bn_legit_no_stats_fn(const Tensor &input, const std::optional<Tensor> &weight,
                                                        const std::optional<Tensor> &bias, bool training,
                                                        double momentum, double eps) {
  return bn_forward(input, weight, bias, std::nullopt, std::nullopt, training, momentum, eps);
}
std::tuple<Tensor, Tensor, Tensor> bn_legit_no_training_fn(const Tensor &input, const std::optional<Tensor> &weight,
                                                           const std::optional<Tensor> &bias,
                                                           const Tensor &running_mean, const Tensor &running_var,
                                                           double momentum, double eps) {
  return bn_forward(input, weight, bias, running_mean, running_var, false, momentum, eps);
}
std::tuple<Tensor, Tensor, Tensor, Tensor> bn_with_update_fn(const Tensor &input, const std::optional<Tensor> &weight,
                                                             const std::optional<Tensor> &bias, Tensor &running_mean,
                                                             Tensor &running_var, double momentum, double eps) {
  auto [y, m, v] = bn_forward(input, weight, bias, running_mean, running_var, true, momentum, eps);
  return {y, m, v, at::empty({0}, input.options().dtype(at::kByte))};
}

std::tuple<Tensor, Tensor, Tensor> bn_backward(const Tensor &grad_out, const Tensor &input,
                                               const std::optional<Tensor> &weight,
                                               const std::optional<Tensor> &running_mean,
                                               const std::optional<Tensor> &running_var,
                                               const std::optional<Tensor> &save_mean,
                                               const std::optional<Tensor> &save_invstd, bool train, double eps,
                                               std::array<bool, 3> mask) {
  check_float(input, "batch_norm_backward");
  c10::DeviceGuard guard(input.device());
  int64_t n = input.size(0), c = input.size(1), s = spatial(input);
  const std::optional<Tensor> &mean = train ? save_mean : running_mean;
  const std::optional<Tensor> &stat = train ? save_invstd : running_var;
  TORCH_CHECK(defined(mean) && defined(stat), "batch_norm_backward: ",
              train ? "save_mean and save_invstd" : "running_mean and running_var", " must be defined");
  Tensor gi, gw, gb;
  if (!(mask[0] || mask[1] || mask[2])) return {gi, gw, gb};
  at::ScalarType pt = defined(weight) ? weight->scalar_type() : stat_type(input, {&running_mean});
  if (mask[0]) gi = at::empty_like(input, act_options(input));
  if (mask[1]) gw = at::empty({c}, input.options().dtype(pt));
  if (mask[2]) gb = at::empty({c}, input.options().dtype(pt));
  if (input.numel() == 0) {
    if (mask[1]) gw.zero_();
    if (mask[2]) gb.zero_();
    return {gi, gw, gb};
  }
  Tensor x = ncs(input);
  Tensor gy = grad_out.scalar_type() == input.scalar_type() ? grad_out : grad_out.to(input.scalar_type());
  gy = ncs(gy);
  nrt_launch d = new_launch(NRT_OP(BATCH_NORM_BACKWARD));
  d.ndim = 3;
  d.sizes[0] = n;
  d.sizes[1] = c;
  d.sizes[2] = s;
  d.compute_dtype = to_nrt_dtype(input.scalar_type());
  d.scalars[0].f = eps;
  d.params[0] = (mask[0] ? 1 : 0) | (mask[1] ? 2 : 0) | (mask[2] ? 4 : 0);
  d.params[1] = defined(weight) ? 1 : 0;
  d.params[2] = train ? 1 : 0;
  // Which of the CPU's backward kernels runs (its batch_norm_backward_cpu
  // template): input and grad contiguous in one memory format take its
  // stub, channels-last or one value per plane its channels-last kernel;
  // a 16-bit input's saved statistics are 16-bit there unless a parameter
  // is float32 (its forward's mixed type).
  auto dense = [](const Tensor &t) {
    return t.is_contiguous() || t.is_contiguous(at::MemoryFormat::ChannelsLast) ||
           t.is_contiguous(at::MemoryFormat::ChannelsLast3d);
  };
  if (!(dense(input) && dense(grad_out) && input.suggest_memory_format() == grad_out.suggest_memory_format()))
    d.params[1] |= NRT_BN_STRIDED;
  else if (!input.is_contiguous() || s == 1) d.params[1] |= NRT_BN_BWD_ROWS;
  if (at::isReducedFloatingType(input.scalar_type()) && stat_type(input, {&weight, &running_mean, &running_var}) != at::kFloat)
    d.params[1] |= NRT_BN_ROUND16;
  d.params[3] = cpu_threads();
  int k = 0;
  if (mask[0]) put_ncs(d.operands[k++], gi);
  if (mask[1]) put_vec(d.operands[k++], gw);
  if (mask[2]) put_vec(d.operands[k++], gb);
  d.noutputs = k;
  put_ncs(d.operands[k++], gy);
  put_ncs(d.operands[k++], x);
  put_vec(d.operands[k++], *mean);
  put_vec(d.operands[k++], *stat);
  if (defined(weight)) put_vec(d.operands[k++], *weight);
  d.ninputs = k - d.noutputs;
  launch(input.device().index(), d);
  return {gi, gw, gb};
}

std::tuple<Tensor, Tensor, Tensor> native_bn_backward_fn(const Tensor &grad_out, const Tensor &input,
                                                         const std::optional<Tensor> &weight,
                                                         const std::optional<Tensor> &running_mean,
                                                         const std::optional<Tensor> &running_var,
                                                         const std::optional<Tensor> &save_mean,
                                                         const std::optional<Tensor> &save_invstd, bool train,
                                                         double eps, std::array<bool, 3> mask) {
  return bn_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, mask);
}
std::tuple<Tensor, Tensor, Tensor> bn_backward_fn(const Tensor &grad_out, const Tensor &input, const Tensor &weight,
                                                  const std::optional<Tensor> &running_mean,
                                                  const std::optional<Tensor> &running_var,
                                                  const std::optional<Tensor> &save_mean,
                                                  const std::optional<Tensor> &save_var, bool update, double eps,
                                                  std::array<bool, 3> mask, const Tensor &) {
  return bn_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_var, update, eps, mask);
}

std::tuple<Tensor, Tensor, Tensor> group_norm_fn(const Tensor &input, const std::optional<Tensor> &weight,
                                                 const std::optional<Tensor> &bias, int64_t n, int64_t c,
                                                 int64_t hxw, int64_t group, double eps) {
  check_float(input, "group_norm");
  c10::DeviceGuard guard(input.device());
  TORCH_CHECK(group > 0 && c % group == 0, "Expected number of channels in input to be divisible by num_groups, but "
              "got input of shape ", input.sizes(), " and num_groups=", group);
  TORCH_CHECK(input.numel() == n * c * hxw, "group_norm: input ", input.sizes(), " is not N=", n, " C=", c,
              " HxW=", hxw);
  at::ScalarType st = stat_type(input, {&weight, &bias});
  Tensor y = at::empty_like(input, act_options(input));
  Tensor mean = at::empty({n, group}, input.options().dtype(st));
  Tensor rstd = at::empty({n, group}, input.options().dtype(st));
  if (input.numel() == 0) return {y, mean, rstd};
  // [N, C, HxW] views
  Tensor x3 = ncs(input.dim() >= 2 ? input : input.view({n, c}));
  bool has_w = defined(weight), has_b = defined(bias);
  nrt_launch d = new_launch(NRT_OP(GROUP_NORM));
  d.ndim = 4;
  d.sizes[0] = n;
  d.sizes[1] = group;
  d.sizes[2] = c / group;
  d.sizes[3] = hxw;
  d.compute_dtype = to_nrt_dtype(input.scalar_type());
  d.scalars[0].f = eps;
  d.params[1] = (has_w ? 1 : 0) | (has_b ? 2 : 0);
  // p2 = 1: the CPU runs its contiguous kernel (RowwiseMoments over each
  // group), whose order the kernel then follows
  d.params[2] = input.suggest_memory_format() == at::MemoryFormat::Contiguous ? 1 : 0;
  // p2 = 2: its channels-last kernel's first way (planes under 1024
  // values, float32 followed)
  if (d.params[2] == 0 && input.scalar_type() == at::kFloat && hxw < 1024) d.params[2] = 2;
  put_ncs(d.operands[0], y);
  nrt_operand &m = d.operands[1], &r = d.operands[2];
  for (auto [o, t] : {std::pair<nrt_operand *, Tensor *>{&m, &mean}, {&r, &rstd}}) {
    o->data = t->data_ptr();
    o->dtype = to_nrt_dtype(t->scalar_type());
    o->strides[0] = t->stride(0) * static_cast<int64_t>(t->element_size());
    o->strides[1] = t->stride(1) * static_cast<int64_t>(t->element_size());
  }
  d.noutputs = 3;
  int k = 3;
  put_ncs(d.operands[k++], x3);
  if (has_w) put_vec(d.operands[k++], *weight);
  if (has_b) put_vec(d.operands[k++], *bias);
  d.ninputs = k - 3;
  launch(input.device().index(), d);
  return {y, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> group_norm_backward_fn(const Tensor &grad_out, const Tensor &input,
                                                          const Tensor &mean, const Tensor &rstd,
                                                          const std::optional<Tensor> &weight, int64_t n, int64_t c,
                                                          int64_t hxw, int64_t group, std::array<bool, 3> mask) {
  check_float(input, "group_norm_backward");
  c10::DeviceGuard guard(input.device());
  Tensor gi, gw, gb;
  at::ScalarType pt = defined(weight) ? weight->scalar_type() : input.scalar_type();
  if (mask[0]) gi = at::empty_like(input, act_options(input));
  if (mask[1]) gw = at::empty({c}, input.options().dtype(pt));
  if (mask[2]) gb = at::empty({c}, input.options().dtype(pt));
  if (!(mask[0] || mask[1] || mask[2])) return {gi, gw, gb};
  if (input.numel() == 0) {
    if (mask[1]) gw.zero_();
    if (mask[2]) gb.zero_();
    return {gi, gw, gb};
  }
  Tensor x = ncs(input);
  Tensor gy = grad_out.scalar_type() == input.scalar_type() ? grad_out : grad_out.to(input.scalar_type());
  gy = ncs(gy);
  Tensor mean2 = mean.view({n, group}), rstd2 = rstd.view({n, group});
  nrt_launch d = new_launch(NRT_OP(GROUP_NORM_BACKWARD));
  d.ndim = 4;
  d.sizes[0] = n;
  d.sizes[1] = group;
  d.sizes[2] = c / group;
  d.sizes[3] = hxw;
  d.compute_dtype = to_nrt_dtype(input.scalar_type());
  d.params[0] = (mask[0] ? 1 : 0) | (mask[1] ? 2 : 0) | (mask[2] ? 4 : 0);
  d.params[1] = defined(weight) ? 1 : 0;
  // p2 = 1: the CPU's contiguous kernel (float32: its float order is
  // followed; float64, computed at float32 precision, takes the same order
  // so that it gives the float32 result: a group of 2 nearly equal values
  // with equal gradients cancels to 0 there, not to 1.5e-3, 20101-2263595)
  d.params[2] = (input.scalar_type() == at::kFloat || input.scalar_type() == at::kDouble) &&
                input.suggest_memory_format() == at::MemoryFormat::Contiguous;
  int k = 0;
  if (mask[0]) put_ncs(d.operands[k++], gi);
  if (mask[1]) put_vec(d.operands[k++], gw);
  if (mask[2]) put_vec(d.operands[k++], gb);
  d.noutputs = k;
  put_ncs(d.operands[k++], gy);
  put_ncs(d.operands[k++], x);
  for (const Tensor *t : {&mean2, &rstd2}) {
    nrt_operand &o = d.operands[k++];
    o.data = const_cast<void *>(t->const_data_ptr());
    o.dtype = to_nrt_dtype(t->scalar_type());
    o.strides[0] = t->stride(0) * static_cast<int64_t>(t->element_size());
    o.strides[1] = t->stride(1) * static_cast<int64_t>(t->element_size());
  }
  if (defined(weight)) put_vec(d.operands[k++], *weight);
  d.ninputs = k - d.noutputs;
  launch(input.device().index(), d);
  return {gi, gw, gb};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "native_layer_norm", layer_norm_fn);
  NEURON_IMPL(m, "native_layer_norm_backward", layer_norm_backward_fn);
  NEURON_IMPL(m, "native_batch_norm", native_bn_fn);
  NEURON_IMPL(m, "_native_batch_norm_legit", bn_legit_fn);
  NEURON_IMPL(m, "_native_batch_norm_legit.no_stats", bn_legit_no_stats_fn);
  NEURON_IMPL(m, "_native_batch_norm_legit_no_training", bn_legit_no_training_fn);
  NEURON_IMPL(m, "_batch_norm_with_update", bn_with_update_fn);
  NEURON_OUT_OF(m, native_bn_fn, "native_batch_norm.out");
  NEURON_OUT_OF(m, bn_legit_fn, "_native_batch_norm_legit.out");
  NEURON_OUT_OF(m, bn_legit_no_stats_fn, "_native_batch_norm_legit.no_stats_out");
  NEURON_OUT_OF(m, bn_with_update_fn, "_batch_norm_with_update.out");
  NEURON_IMPL(m, "native_batch_norm_backward", native_bn_backward_fn);
  NEURON_IMPL(m, "batch_norm_backward", bn_backward_fn);
  NEURON_IMPL(m, "native_group_norm", group_norm_fn);
  NEURON_IMPL(m, "native_group_norm_backward", group_norm_backward_fn);
}

}  // namespace torch_neuronx
