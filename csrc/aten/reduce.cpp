// Native reductions and row ops (softmax family, cumulative ops). Output
// shapes and dtypes come from ATen's reduction helpers (make_reduction);
// the runtime reduces over TensorIterator's layout (outputs stride 0 along
// the reduced dimensions).
#include <array>
#include <cmath>
#include <ATen/ops/abs.h>
#include <ATen/ops/complex.h>
#include <ATen/ops/imag.h>
#include <ATen/ops/isneginf.h>
#include <ATen/ops/isposinf.h>
#include <ATen/ops/where.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/real.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>
#include <ATen/Version.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>

#include "launch/launch.h"
#include "registry/variants.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using c10::Scalar;
using c10::ScalarType;

nrt_scalar fscalar(double d) { nrt_scalar v; v.f = d; return v; }

ScalarType sum_dtype(const Tensor &self, std::optional<ScalarType> dtype) {
  if (dtype) return *dtype;
  return at::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? at::kLong : self.scalar_type();
}

// Sums, means, products, norms and scans convert their input to the
// result's dtype first, as ATen does (sum(dtype=int64) of [.6, .6, .6] is 0,
// cumsum(dtype=int64) of [.7, .7] is [0, 0], the mean of int64 with
// dtype=float32 a float mean); a 16-bit float input with a float32 result is
// read as it is, the same values either way.
ScalarType converted_input_dtype(ScalarType in, ScalarType out) {
  return at::isReducedFloatingType(in) && out == at::kFloat ? in : out;
}

// Runs reduction `op` of `self` over `dims` into `result` (allocated when
// undefined). `empty_value` fills outputs of reductions over zero elements;
// when unset, such reductions are an error, as in PyTorch.
Tensor &reduce_into(Tensor &result, const Tensor &self, at::OptionalIntArrayRef dims, bool keepdim,
                    ScalarType out_dtype, nrt_op op, const char *name, std::optional<double> empty_value,
                    std::initializer_list<nrt_scalar> scalars = {}, std::initializer_list<int64_t> params = {}) {
  c10::DeviceGuard guard(self.device());
  if (!result.defined()) result = at::empty({0}, self.options().dtype(out_dtype));
  bool converts = op == NRT_OP_SUM || op == NRT_OP_MEAN || op == NRT_OP_PROD || op == NRT_OP_NORM;
  ScalarType in_dtype = converts ? converted_input_dtype(self.scalar_type(), out_dtype) : self.scalar_type();
  // The CPU's prod always reads its input converted to the result dtype
  // (make_reduction_from_out_ty); its layout after .to() decides the order.
  if (op == NRT_OP_PROD) in_dtype = out_dtype;
  auto iter = at::native::make_reduction(name, result, self, dims, keepdim, in_dtype, out_dtype);
  if (self.numel() == 0) {
    // Reductions with no identity (amax, amin) check as ATen's meta does: an
    // empty reduced dim is an IndexError, no dims at all a RuntimeError.
    if (!empty_value.has_value()) {
      std::string fn = std::string(name) + "()";
      at::native::zero_numel_check_dims(self, dims.value_or(c10::IntArrayRef{}), fn.c_str());
    }
    if (result.numel() > 0) {
      // the mean of nothing is 0 / 0: NaN in both parts of a complex result, as the CPU's division
      double v = *empty_value;
      if (result.is_complex() && std::isnan(v)) result.fill_(Scalar(c10::complex<double>(v, v)));
      else result.fill_(v);
    }
    return result;
  }
  launch_iter(iter, op, scalars, params);
  return result;
}


// The CPU's sum kernel vector width in bytes: sum_stub is registered with
// REGISTER_DISPATCH, so AVX-512 machines run its AVX2 build (32 bytes).
constexpr int64_t kCpuSumVectorBytes = 32;

// Float sums and means follow the CPU's cascade order (SUM/MEAN p0 = 1,
// runtime/src/kernels/reduce/cascade.c), in its accumulator (float for
// float32 and the 16-bit dtypes, double for float64), over the input
// converted to the result dtype as make_reduction_from_out_ty converts it:
// terms near the float limits overflow and cancel where the CPU's do.
// nan0 reads NaN as 0 (nansum: the CPU's cascade_sum with ignore_nan).
Tensor &float_sum_into(Tensor &result, const Tensor &self, at::OptionalIntArrayRef dims, bool keepdim,
                       ScalarType t, nrt_op op, double empty_value, bool nan0 = false) {
  c10::DeviceGuard guard(self.device());
  if (!result.defined()) result = at::empty({0}, self.options().dtype(t));
  const char *name = nan0 ? "nansum" : op == NRT_OP_SUM ? "sum" : "mean";
  auto iter = at::native::make_reduction(name, result, self, dims, keepdim, t, t);
  if (self.numel() == 0) {
    if (result.numel() > 0) result.fill_(empty_value);
    return result;
  }
  // should_use_acc_buffer: a 16-bit sum whose 2-d loop reduces both of its
  // dims sums a float32 copy of the input and rounds once (sum_out's rule;
  // nansum_out has none).
  if (!nan0 && at::isReducedFloatingType(t) && iter.ndim() >= 2 && iter.strides(0)[0] == 0 && iter.strides(0)[1] == 0) {
    Tensor wide;
    float_sum_into(wide, self, dims, keepdim, at::kFloat, op, empty_value);
    result.copy_(wide);
    return result;
  }
  // p3: the CPU's thread count, which decides how its parallel_reduce
  // splits a whole-tensor sum (1 inside a parallel region: it runs serially)
  int64_t threads = at::in_parallel_region() ? 1 : at::get_num_threads();
  launch_iter(iter, op, {}, {1, kCpuSumVectorBytes, nan0 ? 1 : 0, threads});
  return result;
}

bool cascade_dtype(ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}
// A complex sum too is the CPU's cascade_sum, in complex<float> (complex<double>).
bool cascade_sum_dtype(ScalarType t) { return cascade_dtype(t) || t == at::kComplexFloat || t == at::kComplexDouble; }

// A new result takes sum_dtype; out= keeps its dtype unless one is asked for.
Tensor sum_into(Tensor out, const Tensor &self, at::OptionalIntArrayRef dim, bool keepdim,
                std::optional<ScalarType> dtype) {
  ScalarType t = out.defined() ? (dtype ? *dtype : out.scalar_type()) : sum_dtype(self, dtype);
  // (a complex input with a real dtype= sums its real parts, converted first)
  if (cascade_sum_dtype(t)) return float_sum_into(out, self, dim, keepdim, t, NRT_OP_SUM, 0.0);
  return reduce_into(out, self, dim, keepdim, t, NRT_OP_SUM, "sum", 0.0);
}

// nansum, as ATen's nansum_out: an integer or bool input is a plain sum;
// a float one sums in the CPU's cascade order reading NaN as 0 (SUM p2 = 1)
// over self converted to the result dtype, in self's own layout (a
// where(isnan, 0, x) copy would be dense and change the order). Into an
// integer or bool dtype the CPU sums nan_to_num(self) (NaN 0, +-inf the
// largest finite values): float16 inf is 65504 there, not INT_MIN.
Tensor nansum_fn(const Tensor &self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<ScalarType> dtype) {
  // the reduced dims are wrapped first (its result is made before anything
  // else), no complex input (its CPU check), and its kernel has no complex
  // result dtype, only reached with elements to sum
  if (dim)
    for (int64_t d : *dim) (void)at::maybe_wrap_dim(d, self.dim());
  TORCH_CHECK(!self.is_complex(), "nansum does not support complex inputs");
  if (at::isIntegralType(self.scalar_type(), /*includeBool=*/true)) return at::sum(self, dim, keepdim, dtype);
  ScalarType t = dtype ? *dtype : self.scalar_type();
  if (self.numel() > 0)
    TORCH_CHECK_NOT_IMPLEMENTED(!at::isComplexType(t), "\"nansum_cpu\" not implemented for '", c10::toString(t), "'");
  if (!at::isFloatingType(t)) {
    // nan_to_num(self) converted to t, built from exact steps (neuron's
    // float64 arithmetic, where() included, runs at float32 precision): the
    // conversion first, then NaN's 0 selected in the integer result. +-inf
    // and +-max convert alike on x86 (out of range: the integer
    // indefinite), except float16's max 65504, an integer: selected first.
    Tensor src = self;
    if (self.scalar_type() == at::kHalf) {
      src = at::where(at::isposinf(self), Scalar(65504.0), src);
      src = at::where(at::isneginf(self), Scalar(-65504.0), src);
    }
    Tensor x = at::where(self.isnan(), Scalar(0), src.to(t));
    return at::sum(x, dim, keepdim, t);
  }
  Tensor r;
  return float_sum_into(r, self, dim, keepdim, t, NRT_OP_SUM, 0.0, /*nan0=*/true);
}
// nansum.out: out's dtype unless dtype= names one, which must then be out's
// (make_reduction's check)
Tensor nansum_into(Tensor out, const Tensor &self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<ScalarType> dtype) {
  if (out.defined()) {
    // nansum_out refuses a complex self before it looks at the dims
    TORCH_CHECK(!self.is_complex(), "nansum does not support complex inputs");
    TORCH_CHECK(!dtype || *dtype == out.scalar_type(), "nansum: provided dtype must match dtype of result. Got ",
                c10::toString(out.scalar_type()), " and ", c10::toString(*dtype), ".");
    // An explicit dtype= computes as the functional form does, an integer or
    // bool one too; only an out= dtype alone reaches the CPU's floating-only
    // kernel.
    if (!dtype && at::isFloatingType(self.scalar_type()) && self.numel() > 0)
      TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(out.scalar_type()), "\"nansum_cpu\" not implemented for '",
                                  c10::toString(out.scalar_type()), "'");
    dtype = out.scalar_type();
  }
  return nansum_fn(self, dim, keepdim, dtype);
}

ScalarType mean_dtype(const Tensor &self, std::optional<ScalarType> dtype) {
  ScalarType t = dtype ? *dtype : self.scalar_type();
  TORCH_CHECK(at::isFloatingType(t) || at::isComplexType(t),
              "mean(): could not infer output dtype. ",
              (dtype ? "Optional" : "Input"), " dtype must be either a floating point or complex dtype. ",
              "Got: ", t);
  return t;
}

Tensor mean_into(Tensor out, const Tensor &self, at::OptionalIntArrayRef dim, bool keepdim,
                 std::optional<ScalarType> dtype) {
  ScalarType t = mean_dtype(self, dtype);
  // The CPU's mean into a 16-bit float dtype from another input dtype is a
  // float32 mean of the input cast to float32, rounded once at the end (so
  // float32 3.4e38 and -3.4e38 average to 0, not to inf - inf): converting
  // the input to the 16-bit dtype first would overflow.
  // A 16-bit mean is the CPU's too: a float32 sum of the input converted to
  // float32, divided, rounded once.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (at::isReducedFloatingType(t) && (!out.defined() || out.scalar_type() == t)) {
    Tensor wide;
    return float_sum_into(wide, self, dim, keepdim, at::kFloat, NRT_OP_MEAN, nan).to(t);
  }
  if (cascade_dtype(t) && (!out.defined() || out.scalar_type() == t))
    return float_sum_into(out, self, dim, keepdim, t, NRT_OP_MEAN, nan);
  // A complex mean is the CPU's sum followed by div_ by the count, a
  // complex division (an infinite part makes the other NaN; the mean of
  // nothing is 0 / 0, NaN in both parts).
  if (at::isComplexType(t) && cascade_sum_dtype(t) && (!out.defined() || out.scalar_type() == t)) {
    float_sum_into(out, self, dim, keepdim, t, NRT_OP_SUM, 0.0);
    return out.div_(out.numel() == 0 ? 1 : self.numel() / out.numel());
  }
  return reduce_into(out, self, dim, keepdim, t, NRT_OP_MEAN, "mean", nan);
}

Tensor amax_into(Tensor out, const Tensor &self, c10::IntArrayRef dim, bool keepdim) {
  return reduce_into(out, self, dim, keepdim, self.scalar_type(), NRT_OP_AMAX, "amax", std::nullopt);
}
Tensor amin_into(Tensor out, const Tensor &self, c10::IntArrayRef dim, bool keepdim) {
  return reduce_into(out, self, dim, keepdim, self.scalar_type(), NRT_OP_AMIN, "amin", std::nullopt);
}
Tensor max_all(const Tensor &self) {
  TORCH_CHECK(self.numel() > 0, "max(): Expected reduction dim to be specified for input.numel() == 0. "
                                "Specify the reduction dim with the 'dim' argument.");
  return amax_into(Tensor(), self, {}, false);
}
Tensor min_all(const Tensor &self) {
  TORCH_CHECK(self.numel() > 0, "min(): Expected reduction dim to be specified for input.numel() == 0. "
                                "Specify the reduction dim with the 'dim' argument.");
  return amin_into(Tensor(), self, {}, false);
}

// max.dim / min.dim: values and int64 indices from one kernel.
std::tuple<Tensor, Tensor> extreme_dim(const Tensor &self, int64_t dim, bool keepdim, nrt_op op, const char *name) {
  c10::DeviceGuard guard(self.device());
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (self.numel() == 0) {
    // ATen's max.dim / min.dim meta: IndexError for an empty reduced dim,
    // before its refusal of complex inputs (which holds for other empty ones).
    at::native::zero_numel_check_dims(self, dim, (std::string(name) + "()").c_str());
  }
  TORCH_CHECK(!self.is_complex(), name, "(): does not support complex input");
  Tensor values = at::empty({0}, self.options());
  Tensor indices = at::empty({0}, self.options().dtype(at::kLong));
  auto iter = at::native::make_reduction(name, values, indices, self, dim, keepdim, self.scalar_type(), at::kLong);
  if (self.numel() > 0) launch_iter(iter, op);
  return {values, indices};
}
std::tuple<Tensor, Tensor> max_dim(const Tensor &self, int64_t dim, bool keepdim) {
  return extreme_dim(self, dim, keepdim, NRT_OP_MAX_WITH_INDEX, "max");
}
std::tuple<Tensor, Tensor> min_dim(const Tensor &self, int64_t dim, bool keepdim) {
  return extreme_dim(self, dim, keepdim, NRT_OP_MIN_WITH_INDEX, "min");
}

Tensor arg_extreme(const Tensor &self, std::optional<int64_t> dim, bool keepdim, nrt_op op, const char *name) {
  // ATen's argmax/argmin meta refuses bool and complex inputs first
  // (RuntimeError), before any check of the reduced dim.
  TORCH_CHECK(!self.is_complex(), name, "(): does not support complex input");
  TORCH_CHECK(self.scalar_type() != at::kBool, name, "(): does not support bool input");
  c10::DeviceGuard guard(self.device());
  Tensor input = self;
  Tensor result = at::empty({0}, self.options().dtype(at::kLong));
  if (dim) {
    int64_t d = at::maybe_wrap_dim(*dim, self.dim());
    at::native::zero_numel_check_dims(self, d, name);
    auto iter = at::native::make_reduction(name, result, input, c10::IntArrayRef{d}, keepdim, self.scalar_type(),
                                           at::kLong);
    if (self.numel() > 0) launch_iter(iter, op);
    return result;
  }
  // As ATen's argmax/argmin meta (check_argmax_argmin): IndexError.
  TORCH_CHECK_INDEX(self.numel() > 0, name, "(): Expected reduction dim to be specified for input.numel() == 0.");
  // No dim: index into the flattened tensor.
  input = self.reshape({-1});
  auto iter = at::native::make_reduction(name, result, input, c10::IntArrayRef{0}, false, self.scalar_type(),
                                         at::kLong);
  launch_iter(iter, op);
  if (keepdim) {
    std::vector<int64_t> ones(self.dim(), 1);
    result = result.reshape(ones);
  }
  return result;
}
Tensor argmax_fn(const Tensor &self, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(self, dim, keepdim, NRT_OP_ARGMAX, "argmax");
}
Tensor argmin_fn(const Tensor &self, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(self, dim, keepdim, NRT_OP_ARGMIN, "argmin");
}

Tensor var_std(const Tensor &self, at::OptionalIntArrayRef dim, const std::optional<Scalar> &correction,
               bool keepdim, bool is_std);

// A complex variance is the sum of its parts' variances (E|x - mean|^2), a
// real result: computed on the real view, one extra dimension holding the parts.
Tensor var_std_complex(const Tensor &self, at::OptionalIntArrayRef dim, const std::optional<Scalar> &correction,
                       bool keepdim, bool is_std) {
  std::vector<int64_t> dims;
  if (dim && !dim->empty()) {
    for (int64_t d : *dim) dims.push_back(at::maybe_wrap_dim(d, self.dim()));
  } else {
    for (int64_t d = 0; d < self.dim(); ++d) dims.push_back(d);
  }
  // A 0-d input reduces over its one element: a dim of its own keeps the
  // parts dimension out of the reduction.
  Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  if (self.dim() == 0) dims = {0}, keepdim = false;
  Tensor parts = at::view_as_real(x.resolve_conj());
  Tensor v = var_std(parts, c10::IntArrayRef(dims), correction, keepdim, false).sum(-1);
  return is_std ? v.sqrt() : v;
}

Tensor var_std(const Tensor &self, at::OptionalIntArrayRef dim, const std::optional<Scalar> &correction,
               bool keepdim, bool is_std) {
  if (self.is_complex()) return var_std_complex(self, dim, correction, keepdim, is_std);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              (is_std ? "std" : "var"), " only supports floating point and complex dtypes, got ", self.scalar_type());
  double c = correction ? correction->toDouble() : 1.0;
  Tensor r;
  return reduce_into(r, self, dim, keepdim, self.scalar_type(), NRT_OP_VAR, is_std ? "std" : "var",
                     std::numeric_limits<double>::quiet_NaN(), {fscalar(c)}, {is_std ? 1 : 0});
}
Tensor var_correction(const Tensor &self, at::OptionalIntArrayRef dim, const std::optional<Scalar> &correction,
                      bool keepdim) {
  return var_std(self, dim, correction, keepdim, false);
}
Tensor std_correction(const Tensor &self, at::OptionalIntArrayRef dim, const std::optional<Scalar> &correction,
                      bool keepdim) {
  return var_std(self, dim, correction, keepdim, true);
}

// var_mean / std_mean: both results from one Welford pass in the CPU's
// order (VAR p1 = 1, kernels/reduce/welford.c), as std_var_mean_out runs
// them; its mean is the running Welford mean, not mean(), so terms of 1e18
// that cancel leave what the CPU's leave. p2 is the CPU's thread count,
// which decides how it splits one output's elements (1 inside a parallel
// region, where at::parallel_for runs inline).
std::tuple<Tensor, Tensor> var_mean_common(const Tensor &self, at::OptionalIntArrayRef dim,
                                           const std::optional<Scalar> &correction, bool keepdim, bool is_std) {
  const char *fname = is_std ? "std_mean" : "var_mean";
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()), fname,
              " only support floating point and complex dtypes");
  if (self.is_complex()) {
    // The CPU's complex rule: each part's var_mean, the variances added
    // (then the root for std), the means the parts of a complex mean.
    Tensor x = self.resolve_conj();
    auto [vr, mr] = var_mean_common(at::real(x), dim, correction, keepdim, false);
    auto [vi, mi] = var_mean_common(at::imag(x), dim, correction, keepdim, false);
    Tensor v = vr.add(vi);
    if (is_std) v = v.sqrt();
    return {v, at::complex(mr, mi)};
  }
  c10::DeviceGuard guard(self.device());
  ScalarType t = self.scalar_type();
  double c = correction ? correction->toDouble() : 1.0;
  Tensor var = at::empty({0}, self.options()), mean = at::empty({0}, self.options());
  auto iter = at::native::make_reduction(fname, var, mean, self, dim, keepdim, t, t);
  int64_t per_output = iter.num_output_elements() == 0 ? 0 : iter.numel() / iter.num_output_elements();
  if (per_output - c <= 0)
    TORCH_WARN(fname, "(): degrees of freedom is <= 0. Correction should be strictly less than the reduction factor "
               "(input numel divided by output numel).");
  if (iter.numel() == 0) {
    var.fill_(std::numeric_limits<double>::quiet_NaN());
    mean.fill_(std::numeric_limits<double>::quiet_NaN());
    return {var, mean};
  }
  int64_t threads = at::in_parallel_region() ? 1 : at::get_num_threads();
  launch_iter(iter, NRT_OP_VAR, {fscalar(c)}, {is_std ? 1 : 0, 1, threads});
  return {var, mean};
}
std::tuple<Tensor, Tensor> var_mean_fn(const Tensor &self, at::OptionalIntArrayRef dim,
                                       const std::optional<Scalar> &correction, bool keepdim) {
  return var_mean_common(self, dim, correction, keepdim, false);
}
std::tuple<Tensor, Tensor> std_mean_fn(const Tensor &self, at::OptionalIntArrayRef dim,
                                       const std::optional<Scalar> &correction, bool keepdim) {
  return var_mean_common(self, dim, correction, keepdim, true);
}

// all/any give bool, except uint8 inputs give uint8 (PyTorch's rule); an
// out= must be bool or uint8 and keeps its dtype (ATen's allany_meta).
ScalarType logical_reduce_dtype(const Tensor &self, const Tensor &out, const char *name) {
  if (out.defined()) {
    TORCH_CHECK(out.scalar_type() == at::kBool || out.scalar_type() == at::kByte, name,
                " only supports bool tensor for result, got: ", out.scalar_type());
    return out.scalar_type();
  }
  return self.scalar_type() == at::kByte ? at::kByte : at::kBool;
}
Tensor all_dims_into(Tensor out, const Tensor &self, at::OptionalIntArrayRef dim, bool keepdim) {
  return reduce_into(out, self, dim, keepdim, logical_reduce_dtype(self, out, "all"), NRT_OP_ALL, "all", 1.0);
}
Tensor any_dims_into(Tensor out, const Tensor &self, at::OptionalIntArrayRef dim, bool keepdim) {
  return reduce_into(out, self, dim, keepdim, logical_reduce_dtype(self, out, "any"), NRT_OP_ANY, "any", 0.0);
}
Tensor all_dim_into(Tensor out, const Tensor &self, int64_t dim, bool keepdim) {
  return all_dims_into(out, self, c10::IntArrayRef{dim}, keepdim);
}
Tensor any_dim_into(Tensor out, const Tensor &self, int64_t dim, bool keepdim) {
  return any_dims_into(out, self, c10::IntArrayRef{dim}, keepdim);
}
Tensor all_all_into(Tensor out, const Tensor &self) { return all_dims_into(out, self, std::nullopt, false); }
Tensor any_all_into(Tensor out, const Tensor &self) { return any_dims_into(out, self, std::nullopt, false); }

// The CPU multiplies a float16, bfloat16 or float32 product in that dtype,
// rounding every step, in an order set by its vectorised reduction (PROD
// p0 = 1; p1 = its vector width in bytes): float16 32768 * 32768 * 0 is NaN
// there, not 0. The width is 32 even under AVX-512: prod_stub is registered
// with REGISTER_DISPATCH, which leaves AVX-512 machines the AVX2 kernel
// (float32 [1e30, 1e30, 1 x 6, 1e-30, 1e-30, 1 x 22] is 1 there, a 31-long
// row inf). Float64 and the rest keep the double (or wrapping int64)
// accumulation.
Tensor &prod_into(Tensor &out, const Tensor &self, at::OptionalIntArrayRef dims, bool keepdim, ScalarType t) {
  if (t == at::kHalf || t == at::kBFloat16 || t == at::kFloat)
    return reduce_into(out, self, dims, keepdim, t, NRT_OP_PROD, "prod", 1.0, {}, {1, 32});
  return reduce_into(out, self, dims, keepdim, t, NRT_OP_PROD, "prod", 1.0);
}
Tensor prod_all(const Tensor &self, std::optional<ScalarType> dtype) {
  Tensor r;
  return prod_into(r, self, std::nullopt, false, sum_dtype(self, dtype));
}
// prod's meta: out= keeps its dtype unless dtype= names one, which it must have
Tensor prod_dim_into(Tensor out, const Tensor &self, int64_t dim, bool keepdim, std::optional<ScalarType> dtype) {
  ScalarType t = out.defined() && !dtype ? out.scalar_type() : sum_dtype(self, dtype);
  check_out_dtype(out, t);
  return prod_into(out, self, c10::IntArrayRef{dim}, keepdim, t);
}

// ATen's check_linalg_norm_dtype: dtype= may only widen, and keeps the
// input's real or complex kind.
void check_norm_dtype(std::optional<ScalarType> dtype, ScalarType self_t, const char *name) {
  if (!dtype) return;
  ScalarType d = *dtype;
  TORCH_CHECK(at::isFloatingType(d) || at::isComplexType(d), name, ": dtype should be floating point or complex, but "
              "got ", d);
  TORCH_CHECK(at::isComplexType(self_t) == at::isComplexType(d), name, ": dtype should be ",
              at::isComplexType(self_t) ? "complex" : "real", " for ", at::isComplexType(self_t) ? "complex" : "real",
              " inputs, but got ", d);
  TORCH_CHECK(c10::promoteTypes(self_t, d) == d, name, ": the dtype of the input (", self_t, ") should be "
              "convertible without narrowing to the specified dtype (", d, ")");
}

Tensor vector_norm(const Tensor &self, const Scalar &ord, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<ScalarType> dtype);
Tensor vector_norm_into(Tensor out, const Tensor &self, const Scalar &ord, at::OptionalIntArrayRef dim,
                        bool keepdim, std::optional<ScalarType> dtype) {
  Tensor r = vector_norm(self, ord, dim, keepdim, dtype);  // its checks first, as the meta function's
  check_out_dtype(out, r.scalar_type());
  return r;
}
Tensor vector_norm(const Tensor &self, const Scalar &ord, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<ScalarType> dtype) {
  // ATen's linalg_vector_norm meta, in its order
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()),
              "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ", self.scalar_type());
  TORCH_CHECK(!ord.isComplex(), "linalg.vector_norm: Expected a non-complex scalar as the order of norm.");
  double p = ord.toDouble();
  if (self.numel() == 0 && (p < 0 || p == INFINITY)) {
    // no identity: a RuntimeError of its own
    TORCH_CHECK(dim.has_value() && !dim->empty(), "linalg.vector_norm cannot compute the ", ord, " norm on an empty ",
                "tensor because the operation does not have an identity");
    for (int64_t d : *dim)
      TORCH_CHECK(self.size(d) != 0, "linalg.vector_norm cannot compute the ", ord, " norm on the dimension ", d,
                  "because this dimension is empty and the operation does not have an identity");
  }
  check_norm_dtype(dtype, self.scalar_type(), "linalg.vector_norm");
  // A complex vector's norm is the norm of its elements' magnitudes.
  if (self.is_complex()) {
    ScalarType want = c10::toRealValueType(dtype ? *dtype : self.scalar_type());
    return vector_norm(at::abs(self), ord, dim, keepdim, want);
  }
  ScalarType out = dtype ? *dtype : self.scalar_type();
  std::optional<double> empty = 0.0;
  if (p < 0 || std::isinf(p)) empty = std::nullopt;
  Tensor r;
  // Into float32 and the 16-bit dtypes the CPU sums its terms in float
  // (NORM p1 = 1, kernels/reduce/vnorm.c), so squares of 1e20 overflow and
  // of 1e-30 vanish as there (and a gradient masked where the norm is 0
  // follows); p2 is its thread count, which splits one large output. Any
  // finite nonzero order: p = 0 and +-inf count or compare, exact either
  // way.
  if (p != 0.0 && std::isfinite(p) && (out == at::kFloat || at::isReducedFloatingType(out))) {
    int64_t threads = at::in_parallel_region() ? 1 : at::get_num_threads();
    // p3: a 0-d input given a dim skips the CPU's one-element shortcut (vnorm.c)
    bool no_shortcut = self.dim() == 0 && dim.has_value() && !dim->empty();
    return reduce_into(r, self, dim, keepdim, out, NRT_OP_NORM, "linalg.vector_norm", empty, {fscalar(p)},
                       {0, 1, threads, no_shortcut ? 1 : 0});
  }
  return reduce_into(r, self, dim, keepdim, out, NRT_OP_NORM, "linalg.vector_norm", empty, {fscalar(p)});
}

// ---- row ops ------------------------------------------------------------------
// Describes same-shaped tensors with `dim` moved last, so the runtime sees
// independent rows along the last dimension.
void launch_row(nrt_op op, int64_t dim, std::initializer_list<const Tensor *> outs,
                std::initializer_list<const Tensor *> ins, int64_t p0 = 0,
                std::array<int64_t, 3> p123 = {0, 0, 0}) {
  const Tensor &ref = **outs.begin();
  if (ref.numel() == 0) return;
  int64_t nd = ref.dim();
  TORCH_CHECK(nd <= NRT_MAX_DIMS, "neuron row kernels support at most ", NRT_MAX_DIMS, " dims");
  nrt_launch d = new_launch(op);
  d.noutputs = static_cast<int>(outs.size());
  d.ninputs = static_cast<int>(ins.size());
  d.compute_dtype = to_nrt_dtype((*ins.begin())->scalar_type());
  d.params[0] = p0;
  for (int i = 0; i < 3; ++i) d.params[i + 1] = p123[i];
  if (nd == 0) {
    d.ndim = 1;
    d.sizes[0] = 1;
  } else {
    d.ndim = static_cast<int>(nd);
    int k = 0;
    for (int64_t i = 0; i < nd; ++i)
      if (i != dim) d.sizes[k++] = ref.size(i);
    d.sizes[k] = ref.size(dim);
  }
  int idx = 0;
  bool f64 = false;
  auto fill = [&](const Tensor *t) {
    TORCH_CHECK(t->sizes() == ref.sizes(), "internal: row op operand shapes differ");
    nrt_operand &o = d.operands[idx++];
    o.data = const_cast<void *>(t->const_data_ptr());
    o.dtype = to_nrt_dtype(t->scalar_type());
    f64 |= o.dtype == NRT_FLOAT64;
    int64_t item = t->element_size();
    if (nd == 0) {
      o.strides[0] = item;
      return;
    }
    int k = 0;
    for (int64_t i = 0; i < nd; ++i)
      if (i != dim) o.strides[k++] = t->stride(i) * item;
    o.strides[k] = t->stride(dim) * item;
  };
  for (auto *t : outs) fill(t);
  for (auto *t : ins) fill(t);
  if (f64) warn_float64_once();
  launch(ref.device().index(), d);
}

// Lanes of the CPU's float16/bfloat16 vectors (at::vec::Vectorized<Half>):
// 64-byte registers under its AVX512 kernels, 32 bytes under AVX2 and the
// default build. x86 only, as is the runtime.
int64_t cpu_16bit_lanes() {
  static const int64_t lanes = at::get_cpu_capability() == "AVX512" ? 32 : 16;
  return lanes;
}

Tensor softmax_common(const Tensor &self, int64_t dim, bool half_to_float, nrt_op op) {
  c10::DeviceGuard guard(self.device());
  dim = at::maybe_wrap_dim(dim, self.dim());
  ScalarType out_t = half_to_float ? at::kFloat : self.scalar_type();
  Tensor out = at::empty_like(self, self.options().dtype(out_t), c10::MemoryFormat::Contiguous);
  // As the CPU: an empty input is returned before its kernel checks the
  // dtype (NotImplementedError, named after the kernel the CPU would run).
  if (self.numel() == 0) return out;
  bool last = dim == std::max<int64_t>(self.dim(), 1) - 1;
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"", op == NRT_OP_LOG_SOFTMAX ? "log_" : "",
                              "softmax_", last ? "lastdim_" : "", "kernel_impl\" not implemented for '",
                              self.scalar_type(), "'");
  // The CPU's 16-bit kernels round some intermediates to the 16-bit type:
  // softmax's exps over a dim other than the last, log_softmax's sum and
  // its log over the last (row ops p0 = 1).
  bool sixteen = out_t == at::kHalf || out_t == at::kBFloat16;
  bool rounds = sixteen && (op == NRT_OP_SOFTMAX ? !last : last);
  // Softmax over another dim rounds only the columns its CPU kernel sends
  // down its scalar path, which depends on its vector width and on how
  // parallel_for splits the columns over the threads it would use now
  // (one inside a parallel region); the row kernel applies the rule.
  std::array<int64_t, 3> split = {0, 0, 0};
  if (rounds && op == NRT_OP_SOFTMAX) {
    int64_t inner = 1;
    for (int64_t i = dim + 1; i < self.dim(); ++i) inner *= self.size(i);
    split = {cpu_16bit_lanes(), inner, at::in_parallel_region() ? 1 : at::get_num_threads()};
  }
  launch_row(op, dim, {&out}, {&self}, rounds ? 1 : 0, split);
  return out;
}
Tensor softmax_into(Tensor out, const Tensor &self, int64_t dim, bool h2f) {
  check_out_dtype(out, h2f ? at::kFloat : self.scalar_type());
  return softmax_common(self, dim, h2f, NRT_OP_SOFTMAX);
}
Tensor log_softmax_into(Tensor out, const Tensor &self, int64_t dim, bool h2f) {
  check_out_dtype(out, h2f ? at::kFloat : self.scalar_type());
  return softmax_common(self, dim, h2f, NRT_OP_LOG_SOFTMAX);
}
Tensor softmax_backward_common(const Tensor &grad, const Tensor &output, int64_t dim, ScalarType input_dtype,
                               nrt_op op) {
  c10::DeviceGuard guard(grad.device());
  dim = at::maybe_wrap_dim(dim, grad.dim());
  Tensor gi = at::empty_like(grad, grad.options().dtype(input_dtype), c10::MemoryFormat::Contiguous);
  launch_row(op, dim, {&gi}, {&grad, &output});
  return gi;
}
Tensor softmax_backward_fn(const Tensor &g, const Tensor &o, int64_t dim, ScalarType t) {
  return softmax_backward_common(g, o, dim, t, NRT_OP_SOFTMAX_BACKWARD);
}
Tensor log_softmax_backward_fn(const Tensor &g, const Tensor &o, int64_t dim, ScalarType t) {
  return softmax_backward_common(g, o, dim, t, NRT_OP_LOG_SOFTMAX_BACKWARD);
}

Tensor cumulative(const Tensor &input, int64_t dim, std::optional<ScalarType> dtype, nrt_op op) {
  c10::DeviceGuard guard(input.device());
  dim = at::maybe_wrap_dim(dim, input.dim());
  ScalarType out_t = sum_dtype(input, dtype);
  // ATen's cumulative ops: a 0-d input is copied in and an empty one
  // zero-filled before the CPU's kernel dispatches on the result dtype
  // (every type but bool) and reads the input cast to it (a complex input
  // with a real dtype= drops its imaginary parts there).
  if (input.dim() == 0) {
    Tensor r = at::empty({}, input.options().dtype(out_t));
    return r.fill_(input);
  }
  if (input.numel() == 0) return at::zeros(input.sizes(), input.options().dtype(out_t));
  TORCH_CHECK_NOT_IMPLEMENTED(out_t != at::kBool, "\"", op == NRT_OP_CUMSUM ? "cumsum" : "cumprod",
                              "_out_cpu\" not implemented for 'Bool'");
  Tensor self = input.is_complex() != at::isComplexType(out_t) ? input.to(out_t) : input;
  // A complex cumulative sum is one of each part (on the real view).
  if (self.is_complex() && op == NRT_OP_CUMSUM) {
    Tensor conv = self.resolve_conj().to(out_t);
    // a 0-d tensor is its own scan; its real view's one dim is the parts
    if (self.dim() == 0) return conv.clone();
    Tensor parts = at::view_as_real(conv);
    return at::view_as_complex(cumulative(parts, dim, c10::toRealValueType(out_t), op));
  }
  // A complex cumulative product: the CPU's sequential scan in complex
  // double (CUMPROD p0 = 1), which reads and writes each element's parts
  // through real views of the same shape (a conjugate view materialised
  // first, its real view not carrying the sign). Like the CPU's kernel, it
  // has no complex32 version.
  if (self.is_complex() && op == NRT_OP_CUMPROD) {
    TORCH_CHECK_NOT_IMPLEMENTED(out_t != at::kComplexHalf, "\"cumprod_out_cpu\" not implemented for 'ComplexHalf'");
    Tensor src = self.resolve_conj().to(out_t);
    Tensor out = at::empty_like(src, src.options(), c10::MemoryFormat::Contiguous);
    Tensor out_re = at::view_as_real(out).select(-1, 0), src_re = at::view_as_real(src).select(-1, 0);
    launch_row(op, dim, {&out_re}, {&src_re}, /*p0=*/1);
    return out;
  }
  Tensor out = at::empty_like(self, self.options().dtype(out_t), c10::MemoryFormat::Contiguous);
  ScalarType in_t = converted_input_dtype(self.scalar_type(), out_t);
  Tensor src = in_t == self.scalar_type() ? self : self.to(in_t);
  launch_row(op, dim, {&out}, {&src});
  return out;
}
// With out= (or in place) the result dtype is out's unless dtype= names
// one, which out must then have (ATen's cumulative meta).
std::optional<ScalarType> cumulative_dtype(const Tensor &out, std::optional<ScalarType> dtype) {
  if (!out.defined()) return dtype;
  if (dtype) check_out_dtype(out, *dtype);
  return out.scalar_type();
}
// The meta wraps the dim (IndexError) before anything compares dtypes.
Tensor cumsum_into(Tensor out, const Tensor &self, int64_t dim, std::optional<ScalarType> dtype) {
  (void)at::maybe_wrap_dim(dim, self.dim());
  return cumulative(self, dim, cumulative_dtype(out, dtype), NRT_OP_CUMSUM);
}
Tensor cumprod_into(Tensor out, const Tensor &self, int64_t dim, std::optional<ScalarType> dtype) {
  (void)at::maybe_wrap_dim(dim, self.dim());
  return cumulative(self, dim, cumulative_dtype(out, dtype), NRT_OP_CUMPROD);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_VARIANTS(m, sum_into, "sum.dim_IntList", nullptr, "sum.IntList_out");
  NEURON_VARIANTS(m, mean_into, "mean.dim", nullptr, "mean.out");
  NEURON_VARIANTS(m, nansum_into, "nansum", nullptr, "nansum.out");
  NEURON_VARIANTS(m, amax_into, "amax", nullptr, "amax.out");
  NEURON_VARIANTS(m, amin_into, "amin", nullptr, "amin.out");
  NEURON_IMPL(m, "max", max_all);
  NEURON_IMPL(m, "min", min_all);
  NEURON_IMPL(m, "max.dim", max_dim);
  NEURON_IMPL(m, "min.dim", min_dim);
  NEURON_IMPL(m, "argmax", argmax_fn);
  NEURON_IMPL(m, "argmin", argmin_fn);
  NEURON_IMPL(m, "var.correction", var_correction);
  NEURON_IMPL(m, "std.correction", std_correction);
  NEURON_OUT_OF(m, max_dim, "max.dim_max");
  NEURON_OUT_OF(m, min_dim, "min.dim_min");
  NEURON_OUT_OF(m, argmax_fn, "argmax.out");
  NEURON_OUT_OF(m, argmin_fn, "argmin.out");
  NEURON_OUT_OF(m, var_correction, "var.correction_out");
  NEURON_OUT_OF(m, std_correction, "std.correction_out");
  NEURON_IMPL(m, "var_mean.correction", var_mean_fn);
  NEURON_IMPL(m, "std_mean.correction", std_mean_fn);
  NEURON_VARIANTS(m, all_dims_into, "all.dims", nullptr, "all.dims_out");
  NEURON_VARIANTS(m, any_dims_into, "any.dims", nullptr, "any.dims_out");
  NEURON_VARIANTS(m, all_dim_into, "all.dim", nullptr, "all.out");
  NEURON_VARIANTS(m, any_dim_into, "any.dim", nullptr, "any.out");
  NEURON_VARIANTS(m, all_all_into, "all", nullptr, "all.all_out");
  NEURON_VARIANTS(m, any_all_into, "any", nullptr, "any.all_out");
  NEURON_IMPL(m, "prod", prod_all);
  NEURON_VARIANTS(m, prod_dim_into, "prod.dim_int", nullptr, "prod.int_out");
  NEURON_VARIANTS(m, vector_norm_into, "linalg_vector_norm", nullptr, "linalg_vector_norm.out");
  NEURON_VARIANTS(m, softmax_into, "_softmax", nullptr, "_softmax.out");
  NEURON_VARIANTS(m, log_softmax_into, "_log_softmax", nullptr, "_log_softmax.out");
  NEURON_IMPL(m, "_softmax_backward_data", softmax_backward_fn);
  NEURON_IMPL(m, "_log_softmax_backward_data", log_softmax_backward_fn);
  NEURON_OUT_OF(m, softmax_backward_fn, "_softmax_backward_data.out");
  NEURON_OUT_OF(m, log_softmax_backward_fn, "_log_softmax_backward_data.out");
  NEURON_OUT_OF(m, max_all, "max.unary_out");
  NEURON_OUT_OF(m, min_all, "min.unary_out");
  NEURON_VARIANTS(m, cumsum_into, "cumsum", "cumsum_", "cumsum.out");
  NEURON_VARIANTS(m, cumprod_into, "cumprod", "cumprod_", "cumprod.out");
}

}  // namespace torch_neuronx
