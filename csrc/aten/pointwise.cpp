// Native pointwise ops: one table entry per op. TensorIterator decides
// broadcasting, type promotion, output allocation and out=/in-place rules;
// the runtime's pointwise kernels compute.
#include <ATen/native/TypeProperties.h>
#include <ATen/ScalarOps.h>
#include <ATen/ops/remainder.h>
#include <ATen/TensorIterator.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/OpMathType.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/result_type.h>
#include <c10/core/DeviceGuard.h>

#include <cmath>
#include <limits>
#include <optional>

#include "launch/launch.h"
#include "launch/scalar.h"
#include "registry/variants.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using at::TensorIterator;
using c10::Scalar;

// A Scalar argument converted to the iterator's compute dtype, or to its
// math type (float32 for float16/bfloat16: at::toOpMathType) where the
// op's CPU kernel converts to that, with the CPU's overflow check
// (launch/scalar.h).
nrt_scalar scalar_for(const at::TensorIteratorBase &iter, const Scalar &s, nrt_scalar *imag = nullptr) {
  return checked_scalar(s, iter.common_dtype(), imag);
}
nrt_scalar opmath_scalar_for(const at::TensorIteratorBase &iter, const Scalar &s, nrt_scalar *imag = nullptr) {
  return checked_scalar(s, at::toOpMathType(iter.common_dtype()), imag);
}
// The same for the activations, which take a floating tensor: a
// non-floating one keeps the value unconverted for the dtype check that
// raises first, as the CPU's dispatch does.
nrt_scalar opmath_scalar_of(const Tensor &a, const Scalar &s) {
  if (!at::isFloatingType(a.scalar_type())) {
    nrt_scalar v;
    v.f = s.isComplex() ? s.toComplexDouble().real() : s.toDouble();
    return v;
  }
  return checked_scalar(s, at::toOpMathType(a.scalar_type()));
}

// ---- the CPU's dtype coverage --------------------------------------------------
// The device kernels read every real dtype (through float32 or int64), the
// CPU's kernel of an op dispatches over fewer. An input the CPU has no kernel
// for raises what the CPU raises (NotImplementedError naming the CPU kernel,
// or its RuntimeError), here at the op: the kernel itself would only fail at
// the next synchronisation.
enum class Dtypes { Integral, IntegralBool, Floating, FloatingComplex, RealNoBool, NoBool, NoComplexHalf, NoBoolComplexHalf };

bool covers(Dtypes set, at::ScalarType t) {
  switch (set) {
    case Dtypes::Integral: return at::isIntegralType(t, /*includeBool=*/false);
    case Dtypes::IntegralBool: return at::isIntegralType(t, /*includeBool=*/true);
    case Dtypes::Floating: return at::isFloatingType(t);
    case Dtypes::FloatingComplex: return at::isFloatingType(t) || at::isComplexType(t);
    case Dtypes::RealNoBool: return t != at::kBool && !at::isComplexType(t);
    case Dtypes::NoBool: return t != at::kBool;
    case Dtypes::NoComplexHalf: return t != at::kComplexHalf;
    case Dtypes::NoBoolComplexHalf: return t != at::kBool && t != at::kComplexHalf;
  }
  return true;
}

struct CpuKernel {
  const char *name;
  Dtypes dtypes;
};

// Ops whose CPU kernel covers fewer dtypes than the device's, with the name
// the CPU's dispatch reports.
std::optional<CpuKernel> cpu_kernel(nrt_op op) {
  switch (op) {
    case NRT_OP_BITWISE_AND: return CpuKernel{"bitwise_and_cpu", Dtypes::IntegralBool};
    case NRT_OP_BITWISE_OR: return CpuKernel{"bitwise_or_cpu", Dtypes::IntegralBool};
    case NRT_OP_BITWISE_XOR: return CpuKernel{"bitwise_xor_cpu", Dtypes::IntegralBool};
    case NRT_OP_BITWISE_NOT: return CpuKernel{"bitwise_not_cpu", Dtypes::IntegralBool};
    case NRT_OP_SHIFT_LEFT: return CpuKernel{"lshift_cpu", Dtypes::Integral};
    case NRT_OP_SHIFT_RIGHT: return CpuKernel{"rshift_cpu", Dtypes::Integral};
    case NRT_OP_HYPOT: return CpuKernel{"hypot_cpu", Dtypes::Floating};
    case NRT_OP_ATAN2: return CpuKernel{"atan2_cpu", Dtypes::Floating};
    case NRT_OP_XLOGY: return CpuKernel{"xlogy_cpu", Dtypes::Floating};
    case NRT_OP_DIV: return CpuKernel{"div_cpu", Dtypes::NoComplexHalf};  // true division promotes the rest
    case NRT_OP_DIV_FLOOR: return CpuKernel{"div_floor_cpu", Dtypes::RealNoBool};
    case NRT_OP_DIV_TRUNC: return CpuKernel{"div_trunc_cpu", Dtypes::RealNoBool};
    case NRT_OP_REMAINDER: return CpuKernel{"remainder_cpu", Dtypes::RealNoBool};
    case NRT_OP_FMOD: return CpuKernel{"fmod_cpu", Dtypes::RealNoBool};
    case NRT_OP_POW:
    case NRT_OP_POW_SCALAR: return CpuKernel{"pow", Dtypes::NoBoolComplexHalf};
    case NRT_OP_ABS: return CpuKernel{"abs_cpu", Dtypes::NoBool};
    case NRT_OP_CEIL: return CpuKernel{"ceil_vml_cpu", Dtypes::RealNoBool};
    case NRT_OP_FLOOR: return CpuKernel{"floor_vml_cpu", Dtypes::RealNoBool};
    case NRT_OP_ROUND: return CpuKernel{"round_vml_cpu", Dtypes::RealNoBool};
    case NRT_OP_TRUNC: return CpuKernel{"trunc_vml_cpu", Dtypes::RealNoBool};
    case NRT_OP_FRAC: return CpuKernel{"frac_cpu", Dtypes::Floating};
    case NRT_OP_SILU: return CpuKernel{"silu_cpu", Dtypes::FloatingComplex};
    case NRT_OP_MISH: return CpuKernel{"mish_cpu", Dtypes::Floating};
    case NRT_OP_HARDSIGMOID: return CpuKernel{"hardsigmoid_cpu", Dtypes::Floating};
    case NRT_OP_HARDSWISH: return CpuKernel{"hardswish_cpu", Dtypes::Floating};
    case NRT_OP_GELU: return CpuKernel{"GeluKernelImpl", Dtypes::Floating};
    case NRT_OP_LEAKY_RELU: return CpuKernel{"leaky_relu_cpu", Dtypes::Floating};
    case NRT_OP_ELU: return CpuKernel{"elu_cpu", Dtypes::Floating};
    case NRT_OP_SOFTPLUS: return CpuKernel{"softplus_cpu", Dtypes::Floating};
    case NRT_OP_ADDCMUL: return CpuKernel{"addcmul_cpu_out", Dtypes::NoBool};
    case NRT_OP_ADDCDIV: return CpuKernel{"addcdiv_cpu_out", Dtypes::NoComplexHalf};  // its meta refuses integers
    case NRT_OP_LOGICAL_AND: return CpuKernel{"logical_and_cpu", Dtypes::NoComplexHalf};
    case NRT_OP_LOGICAL_OR: return CpuKernel{"logical_or_cpu", Dtypes::NoComplexHalf};
    case NRT_OP_LOGICAL_XOR: return CpuKernel{"logical_xor_cpu", Dtypes::NoComplexHalf};
    default: return std::nullopt;
  }
}

// The CPU's checks made before its kernel runs (meta functions and the
// dispatch of its kernel), for an iterator whose common dtype is computed.
void check_cpu_dtype(const at::TensorIteratorBase &iter, nrt_op op) {
  at::ScalarType t = iter.common_dtype();
  if (t == at::kBool) {
    TORCH_CHECK(op != NRT_OP_NEG, "Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
                "to invert a mask, use the `~` or `logical_not()` operator instead.");
    TORCH_CHECK(op != NRT_OP_RELU, "Boolean inputs not supported for relu");
    TORCH_CHECK(op != NRT_OP_HARDTANH, "Bool inputs not supported for hardtanh");
  }
  if (auto k = cpu_kernel(op)) {
    TORCH_CHECK_NOT_IMPLEMENTED(covers(k->dtypes, t), "\"", k->name, "\" not implemented for '", c10::toString(t),
                                "'");
  }
}

// ---- iterator builders ----------------------------------------------------
enum class Kind { Unary, UnaryFloat, UnaryBool, Binary, BinaryFloat, Compare, Backward };

TensorIterator build_unary(Tensor &out, const Tensor &a, Kind k) {
  switch (k) {
    case Kind::UnaryFloat: return TensorIterator::unary_float_op(out, a);
    case Kind::UnaryBool: {
      // isnan/logical_not style: bool result unless out= says otherwise.
      // an empty bool output: the iterator sizes it with its own layout (the meta function's)
      if (!out.defined()) out = at::empty({0}, a.options().dtype(at::kBool));
      return at::TensorIteratorConfig()
          .add_output(out)
          .add_const_input(a)
          .check_all_same_dtype(false)
          .build();
    }
    default: return TensorIterator::unary_op(out, a);
  }
}

TensorIterator build_binary(Tensor &out, const Tensor &a, const Tensor &b, Kind k) {
  switch (k) {
    case Kind::BinaryFloat: return TensorIterator::binary_float_op(out, a, b);
    case Kind::Compare: return TensorIterator::comparison_op(out, a, b);
    case Kind::Backward: return TensorIterator::borrowing_binary_op(out, a, b);
    default: return TensorIterator::binary_op(out, a, b);
  }
}

Tensor unary(Tensor out, const Tensor &a, nrt_op op, Kind k, std::initializer_list<nrt_scalar> s = {},
             std::initializer_list<int64_t> p = {}) {
  if (a.is_complex() && op == NRT_OP_SILU) {
    // the CPU's complex silu is x / (1 + exp(-x)), composed here of the
    // complex family's native ops
    Tensor r = a.div(a.neg().exp().add_(1));
    if (!out.defined()) return r;
    TORCH_CHECK(at::canCast(r.scalar_type(), out.scalar_type()), "result type ", r.scalar_type(),
                " can't be cast to the desired output type ", out.scalar_type());
    at::native::resize_output(out, r.sizes());
    return out.copy_(r);
  }
  if (a.is_complex()) {  // ATen's meta functions, before the iterator's dtype checks
    const char *name = op == NRT_OP_CEIL ? "ceil" : op == NRT_OP_FLOOR ? "floor" : op == NRT_OP_TRUNC ? "trunc" : nullptr;
    TORCH_CHECK_NOT_IMPLEMENTED(!name, name, " is not supported for complex inputs");
    // the CPU's relu is clamp_min(0), whose meta function refuses complex
    // before any iterator (an expanded relu_ raises this, not the overlap error)
    TORCH_CHECK_NOT_IMPLEMENTED(op != NRT_OP_RELU, "clamp is not supported for complex types");
    TORCH_CHECK_NOT_IMPLEMENTED(op != NRT_OP_SIGN, "Unlike NumPy, torch.sign is not intended to support complex "
                                "numbers. Please use torch.sgn instead.");
  }
  auto iter = build_unary(out, a, k);
  if (k != Kind::UnaryBool) check_cpu_dtype(iter, op);
  launch_iter(iter, op, s, p);
  return iter.output();
}

Tensor binary(Tensor out, const Tensor &a_in, const Tensor &b_in, nrt_op op, Kind k,
              const Scalar *alpha = nullptr, std::initializer_list<int64_t> p = {}) {
  // a broadcast CPU value beside a device tensor (F.l1_loss's expanded 0-d
  // CPU target): computed as on the CPU
  Tensor a = broadcast_host_scalar(a_in, b_in), b = broadcast_host_scalar(b_in, a_in);
  auto iter = build_binary(out, a, b, k);
  check_cpu_dtype(iter, op);
  if (alpha) {
    // The CPU checks alpha against the compute dtype (its iterator computes
    // into a temporary of that dtype, not into an out= of another).
    at::native::alpha_check(iter.common_dtype(), *alpha);
    // ATen's sub is add with -alpha, and the negated alpha is what it
    // converts: int8 sub with alpha=128 is fine, alpha=-128 overflows.
    // alpha's imaginary part goes to the COMPLEX family's s1.
    nrt_scalar im, re = scalar_for(iter, op == NRT_OP_SUB ? -*alpha : *alpha, &im);
    launch_iter(iter, op == NRT_OP_SUB ? NRT_OP_ADD : op, {re, im}, p);
  } else {
    launch_iter(iter, op, {}, p);
  }
  return iter.output();
}

// ---- unary table ------------------------------------------------------------
#define NEURON_UNARY_TABLE(X)            \
  X(neg, NEG, Unary)                     \
  X(sign, SIGN, Unary)                   \
  X(reciprocal, RECIPROCAL, UnaryFloat)  \
  X(sqrt, SQRT, UnaryFloat)              \
  X(rsqrt, RSQRT, UnaryFloat)            \
  X(exp, EXP, UnaryFloat)                \
  X(exp2, EXP2, UnaryFloat)              \
  X(expm1, EXPM1, UnaryFloat)            \
  X(log, LOG, UnaryFloat)                \
  X(log2, LOG2, UnaryFloat)              \
  X(log10, LOG10, UnaryFloat)            \
  X(log1p, LOG1P, UnaryFloat)            \
  X(sin, SIN, UnaryFloat)                \
  X(cos, COS, UnaryFloat)                \
  X(tan, TAN, UnaryFloat)                \
  X(asin, ASIN, UnaryFloat)              \
  X(acos, ACOS, UnaryFloat)              \
  X(atan, ATAN, UnaryFloat)              \
  X(sinh, SINH, UnaryFloat)              \
  X(cosh, COSH, UnaryFloat)              \
  X(tanh, TANH, UnaryFloat)              \
  X(asinh, ASINH, UnaryFloat)            \
  X(acosh, ACOSH, UnaryFloat)            \
  X(atanh, ATANH, UnaryFloat)            \
  X(erf, ERF, UnaryFloat)                \
  X(erfc, ERFC, UnaryFloat)              \
  X(erfinv, ERFINV, UnaryFloat)          \
  X(ceil, CEIL, Unary)                   \
  X(floor, FLOOR, Unary)                 \
  X(round, ROUND, Unary)                 \
  X(trunc, TRUNC, Unary)                 \
  X(frac, FRAC, Unary)                   \
  X(sigmoid, SIGMOID, UnaryFloat)        \
  X(relu, RELU, Unary)                   \
  X(silu, SILU, Unary)                   \
  X(mish, MISH, Unary)                   \
  X(hardsigmoid, HARDSIGMOID, Unary)     \
  X(hardswish, HARDSWISH, Unary)         \
  X(bitwise_not, BITWISE_NOT, Unary)

#define DEFINE_UNARY(name, OP, K) \
  Tensor name##_into(Tensor out, const Tensor &a) { return unary(out, a, NRT_OP_##OP, Kind::K); }
NEURON_UNARY_TABLE(DEFINE_UNARY)
#undef DEFINE_UNARY

// abs: a complex input gives its real magnitude (launch_iter routes ABS
// with a real output to the COMPLEX family); real inputs keep their dtype.
Tensor abs_into(Tensor out, const Tensor &a) {
  if (!a.is_complex()) return unary(out, a, NRT_OP_ABS, Kind::Unary);
  at::ScalarType rt = c10::toRealValueType(a.scalar_type());
  // empty: the iterator sizes it in its layout (the meta function's), not contiguous
  if (!out.defined()) out = at::empty({0}, a.options().dtype(rt));
  TORCH_CHECK(!out.is_same(a), "In-place abs is not supported for complex tensors.");
  if (out.scalar_type() != rt) {
    // ATen's unary_op_impl_with_complex_to_float_out: a real out= the
    // magnitude can be cast to takes it; a complex one must be self's dtype
    // (the complex iterator's same-dtype check) and gets it as its real part.
    if (out.is_complex()) {
      TORCH_CHECK(out.scalar_type() == a.scalar_type(), "Found dtype ", out.scalar_type(), " but expected ",
                  a.scalar_type());
    } else {
      TORCH_CHECK(at::canCast(rt, out.scalar_type()), "result type ", rt, " can't be cast to the desired output type ",
                  out.scalar_type());
    }
    Tensor r = abs_into(Tensor(), a);
    at::native::resize_output(out, r.sizes());
    return out.copy_(r);
  }
  auto iter = at::TensorIteratorConfig().add_output(out).add_const_input(a).check_all_same_dtype(false).build();
  launch_iter(iter, NRT_OP_ABS);
  return iter.output();
}

// Bool-valued unary ops.
#define NEURON_UNARY_BOOL_TABLE(X) X(isnan, ISNAN) X(logical_not, LOGICAL_NOT)
#define DEFINE_UNARY_BOOL(name, OP) \
  Tensor name##_into(Tensor out, const Tensor &a) { return unary(out, a, NRT_OP_##OP, Kind::UnaryBool); }
NEURON_UNARY_BOOL_TABLE(DEFINE_UNARY_BOOL)
#undef DEFINE_UNARY_BOOL

// ---- binary table -------------------------------------------------------
#define NEURON_BINARY_TABLE(X)                                                                     \
  X(mul, "mul.Tensor", "mul_.Tensor", "mul.out", MUL, Binary)                                      \
  X(div, "div.Tensor", "div_.Tensor", "div.out", DIV, BinaryFloat)                                 \
  X(floor_divide, "floor_divide", "floor_divide_.Tensor", "floor_divide.out", DIV_FLOOR, Binary)    \
  X(remainder, "remainder.Tensor", "remainder_.Tensor", "remainder.Tensor_out", REMAINDER, Binary) \
  X(fmod, "fmod.Tensor", "fmod_.Tensor", "fmod.Tensor_out", FMOD, Binary)                          \
  X(pow, "pow.Tensor_Tensor", "pow_.Tensor", "pow.Tensor_Tensor_out", POW, Binary)                 \
  X(atan2, "atan2", "atan2_", "atan2.out", ATAN2, BinaryFloat)                                     \
  X(hypot, "hypot", "hypot_", "hypot.out", HYPOT, Binary)                                          \
  X(copysign, "copysign.Tensor", "copysign_.Tensor", "copysign.out", COPYSIGN, BinaryFloat)        \
  X(xlogy, "xlogy.Tensor", "xlogy_.Tensor", "xlogy.OutTensor", XLOGY, BinaryFloat)                 \
  X(maximum, "maximum", nullptr, "maximum.out", MAXIMUM, Binary)                                   \
  X(minimum, "minimum", nullptr, "minimum.out", MINIMUM, Binary)                                   \
  X(fmax, "fmax", nullptr, "fmax.out", FMAX, Binary)                                               \
  X(fmin, "fmin", nullptr, "fmin.out", FMIN, Binary)                                               \
  X(bitwise_and, "bitwise_and.Tensor", "bitwise_and_.Tensor", "bitwise_and.Tensor_out", BITWISE_AND, Binary) \
  X(bitwise_or, "bitwise_or.Tensor", "bitwise_or_.Tensor", "bitwise_or.Tensor_out", BITWISE_OR, Binary)      \
  X(bitwise_xor, "bitwise_xor.Tensor", "bitwise_xor_.Tensor", "bitwise_xor.Tensor_out", BITWISE_XOR, Binary) \
  X(bitwise_left_shift, "bitwise_left_shift.Tensor", "bitwise_left_shift_.Tensor",                     \
    "bitwise_left_shift.Tensor_out", SHIFT_LEFT, Binary)                                               \
  X(bitwise_right_shift, "bitwise_right_shift.Tensor", "bitwise_right_shift_.Tensor",                  \
    "bitwise_right_shift.Tensor_out", SHIFT_RIGHT, Binary)                                             \
  X(eq, "eq.Tensor", "eq_.Tensor", "eq.Tensor_out", EQ, Compare)                                   \
  X(ne, "ne.Tensor", "ne_.Tensor", "ne.Tensor_out", NE, Compare)                                   \
  X(lt, "lt.Tensor", "lt_.Tensor", "lt.Tensor_out", LT, Compare)                                   \
  X(le, "le.Tensor", "le_.Tensor", "le.Tensor_out", LE, Compare)                                   \
  X(gt, "gt.Tensor", "gt_.Tensor", "gt.Tensor_out", GT, Compare)                                   \
  X(ge, "ge.Tensor", "ge_.Tensor", "ge.Tensor_out", GE, Compare)                                   \
  X(logical_and, "logical_and", "logical_and_", "logical_and.out", LOGICAL_AND, Compare)           \
  X(logical_or, "logical_or", "logical_or_", "logical_or.out", LOGICAL_OR, Compare)                \
  X(logical_xor, "logical_xor", "logical_xor_", "logical_xor.out", LOGICAL_XOR, Compare)

// ATen's meta functions of maximum, minimum, fmax and fmin refuse complex
// inputs with a RuntimeError.
bool complex_refused(nrt_op op) {
  return op == NRT_OP_MAXIMUM || op == NRT_OP_MINIMUM || op == NRT_OP_FMAX || op == NRT_OP_FMIN;
}

#define DEFINE_BINARY(name, fname, iname, oname, OP, K)                                          \
  Tensor name##_into(Tensor out, const Tensor &a, const Tensor &b) {                              \
    TORCH_CHECK(!complex_refused(NRT_OP_##OP) || (!a.is_complex() && !b.is_complex()), #name,     \
                " not implemented for complex tensors.");                                         \
    return binary(out, a, b, NRT_OP_##OP, Kind::K);                                               \
  }
NEURON_BINARY_TABLE(DEFINE_BINARY)
#undef DEFINE_BINARY

// Comparisons against a Scalar: the scalar becomes a wrapped number, so
// type promotion treats it exactly as PyTorch does.
#define NEURON_COMPARE_SCALAR_TABLE(X) X(eq, EQ) X(ne, NE) X(lt, LT) X(le, LE) X(gt, GT) X(ge, GE)
#define DEFINE_COMPARE_SCALAR(name, OP)                                                    \
  Tensor name##_scalar_into(Tensor out, const Tensor &a, const Scalar &b) {                \
    return binary(out, a, at::native::wrapped_scalar_tensor(b), NRT_OP_##OP, Kind::Compare); \
  }
NEURON_COMPARE_SCALAR_TABLE(DEFINE_COMPARE_SCALAR)
#undef DEFINE_COMPARE_SCALAR

// The << and >> operators: ATen runs them on the same shift kernels as
// bitwise_left_shift / bitwise_right_shift, with a Scalar as a wrapped number.
#define NEURON_SHIFT_SCALAR_TABLE(X) X(bitwise_left_shift, SHIFT_LEFT) X(bitwise_right_shift, SHIFT_RIGHT)
#define DEFINE_SHIFT_SCALAR(name, OP)                                                           \
  Tensor name##_scalar_into(Tensor out, const Tensor &a, const Scalar &b) {                     \
    return binary(out, a, at::native::wrapped_scalar_tensor(b), NRT_OP_##OP, Kind::Binary);     \
  }
NEURON_SHIFT_SCALAR_TABLE(DEFINE_SHIFT_SCALAR)
#undef DEFINE_SHIFT_SCALAR

// add/sub carry alpha.
Tensor add_into(Tensor out, const Tensor &a, const Tensor &b, const Scalar &alpha) {
  return binary(out, a, b, NRT_OP_ADD, Kind::Binary, &alpha);
}
Tensor sub_into(Tensor out, const Tensor &a, const Tensor &b, const Scalar &alpha) {
  at::native::sub_check(a, b);
  return binary(out, a, b, NRT_OP_SUB, Kind::Binary, &alpha);
}

// div with rounding_mode: None = true division; "trunc"/"floor" keep integer dtypes.
nrt_op div_mode_op(std::optional<c10::string_view> mode, Kind *k) {
  if (!mode.has_value()) {
    *k = Kind::BinaryFloat;
    return NRT_OP_DIV;
  }
  *k = Kind::Binary;
  if (*mode == "trunc") return NRT_OP_DIV_TRUNC;
  if (*mode == "floor") return NRT_OP_DIV_FLOOR;
  TORCH_CHECK(false, "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", *mode, "'");
}
Tensor div_mode_into(Tensor out, const Tensor &a, const Tensor &b, std::optional<c10::string_view> mode) {
  Kind k;
  nrt_op op = div_mode_op(mode, &k);
  return binary(out, a, b, op, k);
}

// pow with a Scalar exponent or base: wrapped numbers keep PyTorch's typing.
// When the exponent does not change the result dtype, POW_SCALAR runs
// instead: it has PyTorch's special forms for the common exponents (x*x,
// sqrt, 1/x, ...), which give the CPU's values bit for bit where powf would
// differ in the last place.
Tensor pow_ts_into(Tensor out, const Tensor &a, const Scalar &e) {
  // pow.Tensor_Scalar's meta function checks this before any kernel (NumPy's rule)
  TORCH_CHECK(!(at::isIntegralType(a.scalar_type(), true) && e.isIntegral(true) && e.toLong() < 0),
              "Integers to negative integer powers are not allowed.");
  at::ScalarType rt = at::result_type(a, e);
  // The CPU's pow kernel converts the exponent for its compute dtype (the
  // result dtype) first: to double for float32/float64 and complex<double>
  // for complex (which hold any exponent), to the dtype itself for
  // float16/bfloat16 and integers (int8 ** 1000 and float16 ** 70000 raise).
  (void)converted_scalar(e, rt == at::kFloat || rt == at::kDouble ? at::kDouble
                            : at::isComplexType(rt)              ? at::kComplexDouble
                                                                 : rt);
  // ATen's pow fills (exponent 0) or copies (exponent 1) into an output of
  // the result dtype before any kernel would check the dtype: bool ** True
  // into a float out= is a copy
  bool zero = e.equal(0) || (e.isBoolean() && !e.toBool()), one = e.equal(1) || (e.isBoolean() && e.toBool());
  if (zero || one) {
    if (out.defined()) {
      TORCH_CHECK(at::canCast(rt, out.scalar_type()), "result type ", rt, " can't be cast to the desired output type ",
                  out.scalar_type());
      at::native::resize_output(out, a.sizes());
      // the overlap checks the CPU's iterator makes
      at::assert_no_internal_overlap(out);
      at::assert_no_partial_overlap(out, a);
    } else {
      out = at::empty_like(a, a.options().dtype(rt));
    }
    return zero ? out.fill_(1) : out.copy_(a);
  }
  // POW_SCALAR takes a real exponent: a complex one with an imaginary part
  // runs as the complex a ** b of a wrapped number.
  bool real_exponent = !e.isComplex() || e.toComplexDouble().imag() == 0.0;
  // An out= of another dtype: the CPU computes in the result dtype (with
  // the special forms: x ** 0.5 is sqrt, NaN for -inf) and casts on the
  // store; so does this, through a temporary (fuzz 161803398-2695336:
  // pow(-inf, 0.5) into bfloat16 was inf, the generic powf's answer).
  if (rt == a.scalar_type() && out.defined() && out.scalar_type() != rt && real_exponent &&
      at::canCast(rt, out.scalar_type())) {
    at::assert_no_internal_overlap(out);
    at::assert_no_partial_overlap(out, a);
    Tensor tmp = pow_ts_into(Tensor(), a, e);
    at::native::resize_output(out, tmp.sizes());
    return out.copy_(tmp);
  }
  if (rt == a.scalar_type() && (!out.defined() || out.scalar_type() == rt) && real_exponent) {
    auto iter = TensorIterator::unary_op(out, a);
    check_cpu_dtype(iter, NRT_OP_POW_SCALAR);
    nrt_scalar v;
    if (e.isComplex()) {
      v.f = e.toComplexDouble().real();
    } else if (at::isComplexType(rt)) {
      v.f = e.toDouble();  // complex<double> on the CPU holds any real exponent (3.5e38 too)
    } else {
      // the exponent the CPU's kernel computes with: a double for float32
      // and float64, rounded to the dtype for float16/bfloat16 (x ** 0.3
      // raises to 0.30078125 in bfloat16)
      bool reduced = rt == at::kBFloat16 || rt == at::kHalf;
      v = at::isFloatingType(rt) ? checked_scalar(e, reduced ? rt : at::kDouble) : scalar_for(iter, e);
    }
    launch_iter(iter, NRT_OP_POW_SCALAR, {v});
    return iter.output();
  }
  return binary(out, a, at::native::wrapped_scalar_tensor(e), NRT_OP_POW, Kind::Binary);
}
Tensor pow_st_fn(const Scalar &base, const Tensor &e) {
  return binary(Tensor(), at::native::wrapped_scalar_tensor(base), e, NRT_OP_POW, Kind::Binary);
}

// ---- activations with parameters -----------------------------------------
int64_t gelu_mode(c10::string_view approximate) {
  if (approximate == "none") return 0;
  if (approximate == "tanh") return 1;
  TORCH_CHECK(false, "approximate argument must be either none or tanh.");
}
Tensor gelu_into(Tensor out, const Tensor &a, c10::string_view approx) {
  return unary(out, a, NRT_OP_GELU, Kind::Unary, {}, {gelu_mode(approx)});
}
Tensor leaky_relu_into(Tensor out, const Tensor &a, const Scalar &slope) {
  return unary(out, a, NRT_OP_LEAKY_RELU, Kind::Unary, {opmath_scalar_of(a, slope)});
}
Tensor elu_into(Tensor out, const Tensor &a, const Scalar &alpha, const Scalar &scale, const Scalar &iscale) {
  return unary(out, a, NRT_OP_ELU, Kind::Unary,
               {opmath_scalar_of(a, alpha), opmath_scalar_of(a, scale), opmath_scalar_of(a, iscale)});
}
Tensor softplus_into(Tensor out, const Tensor &a, const Scalar &beta, const Scalar &thr) {
  return unary(out, a, NRT_OP_SOFTPLUS, Kind::Unary, {opmath_scalar_of(a, beta), opmath_scalar_of(a, thr)});
}
Tensor hardtanh_into(Tensor out, const Tensor &a, const Scalar &lo, const Scalar &hi) {
  // ATen's hardtanh is a clamp: its meta refuses complex before the
  // iterator looks at the output (an expanded in-place self).
  TORCH_CHECK_NOT_IMPLEMENTED(!a.is_complex(), "clamp is not supported for complex types");
  auto iter = build_unary(out, a, Kind::Unary);
  check_cpu_dtype(iter, NRT_OP_HARDTANH);
  TORCH_CHECK(iter.common_dtype() != at::kByte || lo.to<int64_t>() >= 0,  // uint8: the one unsigned dtype
              "cannot do hardtanh on an unsigned type with negative limits");
  launch_iter(iter, NRT_OP_HARDTANH, {scalar_for(iter, lo), scalar_for(iter, hi)});
  return iter.output();
}

// clamp with optional Scalar bounds.
// The bounds take part in type promotion, as in ATen's clamp: an integer or
// bool tensor clamped by a float bound gives a float result, which an
// in-place clamp cannot store.
Tensor clamp_into(Tensor out, const Tensor &a_in, const std::optional<Scalar> &lo, const std::optional<Scalar> &hi) {
  TORCH_CHECK(lo.has_value() || hi.has_value(), "torch.clamp: At least one of 'min' or 'max' must not be None");
  // As ATen: the result type may not be complex (a complex bound with a
  // zero imaginary part is accepted for a floating tensor).
  TORCH_CHECK_NOT_IMPLEMENTED(!a_in.is_complex(), "clamp is not supported for complex types");
  Tensor a = a_in;
  if (!at::isFloatingType(a_in.scalar_type())) {
    at::native::ResultTypeState state = {};
    state = at::native::update_result_type_state(a_in, state);
    if (lo) state = at::native::update_result_type_state(*lo, state);
    if (hi) state = at::native::update_result_type_state(*hi, state);
    c10::ScalarType rt = at::native::result_type(state);
    // ATen's order: the in-place cast first, then the complex result
    TORCH_CHECK(rt == a_in.scalar_type() || !out.defined() || !out.is_same(a_in), "result type ", rt,
                " can't be cast to the desired output type ", a_in.scalar_type());
    TORCH_CHECK_NOT_IMPLEMENTED(!at::isComplexType(rt), "clamp is not supported for complex types");
    if (rt != a_in.scalar_type()) a = a_in.to(rt);
  }
  auto iter = build_unary(out, a, Kind::Unary);
  // The CPU's three clamp kernels have no bool form.
  TORCH_CHECK_NOT_IMPLEMENTED(iter.common_dtype() != at::kBool, "\"",
                              lo && hi ? "clamp_scalar_cpu" : (hi ? "clamp_max_scalar_cpu" : "clamp_min_scalar_cpu"),
                              "\" not implemented for 'Bool'");
  // ATen's clamp with two bounds, one of them NaN, fills the result with NaN
  // and converts neither bound to the tensor's type (min=nan, max=3.5e38 is
  // no overflow); its NaN test reads each bound as a double, which refuses a
  // complex bound with an imaginary part.
  auto is_nan = [](const Scalar &s) { return std::isnan(s.toDouble()); };
  if (lo && hi) {
    bool nan_lo = is_nan(*lo), nan_hi = is_nan(*hi);  // both read, as the CPU reads both
    if (nan_lo || nan_hi) return iter.output().fill_(std::numeric_limits<double>::quiet_NaN());
  }
  nrt_scalar l = lo ? scalar_for(iter, *lo) : nrt_scalar{}, h = hi ? scalar_for(iter, *hi) : nrt_scalar{};
  launch_iter(iter, NRT_OP_CLAMP_SCALAR, {l, h}, {lo.has_value(), hi.has_value()});
  return iter.output();
}
// ATen's clamp_min / clamp_max metas refuse a complex bound first (the
// two-bound clamp does not).
Tensor clamp_min_into(Tensor out, const Tensor &a, const Scalar &lo) {
  TORCH_CHECK_NOT_IMPLEMENTED(!a.is_complex() && !lo.isComplex(), "clamp is not supported for complex types");
  return clamp_into(out, a, lo, std::nullopt);
}
Tensor clamp_max_into(Tensor out, const Tensor &a, const Scalar &hi) {
  TORCH_CHECK_NOT_IMPLEMENTED(!a.is_complex() && !hi.isComplex(), "clamp is not supported for complex types");
  return clamp_into(out, a, std::nullopt, hi);
}

// clamp with tensor bounds, as ATen's clamp.Tensor: one iterator over self
// and the bounds promotes all three to their common dtype (int8 clamped by
// a 0-d int64 300 and a float 1000.5 clamps at 300.0, not at int8 44), casts
// the result to an out= or in-place self it can be cast to and refuses the
// rest ("result type Float can't be cast to the desired output type Char");
// then the CPU's kernel: clamp_cpu for two bounds, maximum_cpu or
// minimum_cpu for one, each refusing the dtypes it has no kernel for.
const char *clamp_t_kernel(bool lo, bool hi) { return lo && hi ? "clamp_cpu" : lo ? "maximum_cpu" : "minimum_cpu"; }

Tensor clamp_iter_launch(at::TensorIteratorBase &iter, bool lo, bool hi) {
  at::ScalarType t = iter.common_dtype();
  TORCH_CHECK_NOT_IMPLEMENTED(!at::isComplexType(t) && (t != at::kBool || !(lo && hi)), "\"",
                              clamp_t_kernel(lo, hi), "\" not implemented for '", c10::toString(t), "'");
  launch_iter(iter, lo && hi ? NRT_OP_CLAMP : lo ? NRT_OP_MAXIMUM : NRT_OP_MINIMUM);
  return iter.output();
}

Tensor clamp_t_into(Tensor out, const Tensor &self, const std::optional<Tensor> &lo, const std::optional<Tensor> &hi) {
  bool has_lo = lo && lo->defined(), has_hi = hi && hi->defined();
  TORCH_CHECK(has_lo || has_hi, "torch.clamp: At least one of 'min' or 'max' must not be None");
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "clamp is not supported for complex types");
  // 0-d CPU bounds are values (as maximum / minimum take them, and the
  // CPU, where everything is on the CPU).
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(true)
      .allow_cpu_scalars(true)
      .add_output(out)
      .add_const_input(self)
      .promote_inputs_to_common_dtype(true)
      .cast_common_dtype_to_outputs(true)
      .enforce_safe_casting_to_output(true);
  if (has_lo) config.add_const_input(*lo);
  // TensorIterator takes one CPU scalar into a device kernel: a second
  // 0-d CPU bound moves to the device (promotion treats a 0-d tensor the
  // same wherever it lives).
  Tensor hi_t = has_hi ? *hi : Tensor();
  if (has_lo && has_hi && lo->is_cpu() && lo->dim() == 0 && hi_t.is_cpu() && hi_t.dim() == 0 && !self.is_cpu())
    hi_t = hi_t.to(self.device());
  if (has_hi) config.add_const_input(hi_t);
  auto iter = config.build();
  return clamp_iter_launch(iter, has_lo, has_hi);
}

// clamp_min / clamp_max with a tensor bound: ATen's binary-op iterator
// (promoting, castable results only) and the maximum / minimum kernels.
Tensor clamp_min_t_into(Tensor out, const Tensor &self, const Tensor &lo) {
  auto iter = TensorIterator::borrowing_binary_op(out, self, lo);
  return clamp_iter_launch(iter, true, false);
}
Tensor clamp_max_t_into(Tensor out, const Tensor &self, const Tensor &hi) {
  auto iter = TensorIterator::borrowing_binary_op(out, self, hi);
  return clamp_iter_launch(iter, false, true);
}

// ---- backward helpers --------------------------------------------------------
Tensor threshold_backward_fn(const Tensor &g, const Tensor &self, const Scalar &thr) {
  Tensor out;
  auto iter = TensorIterator::borrowing_binary_op(out, g, self);
  launch_iter(iter, NRT_OP_THRESHOLD_BACKWARD, {opmath_scalar_for(iter, thr)});
  return iter.output();
}
#define NEURON_SIMPLE_BACKWARD_TABLE(X)                         \
  X(sigmoid_backward, SIGMOID_BACKWARD)                         \
  X(tanh_backward, TANH_BACKWARD)                               \
  X(silu_backward, SILU_BACKWARD)                               \
  X(mish_backward, MISH_BACKWARD)                               \
  X(hardsigmoid_backward, HARDSIGMOID_BACKWARD)                 \
  X(hardswish_backward, HARDSWISH_BACKWARD)
#define DEFINE_BACKWARD(name, OP)                                        \
  Tensor name##_fn(const Tensor &g, const Tensor &x) {                   \
    return binary(Tensor(), g, x, NRT_OP_##OP, Kind::Backward);          \
  }
NEURON_SIMPLE_BACKWARD_TABLE(DEFINE_BACKWARD)
#undef DEFINE_BACKWARD
Tensor gelu_backward_fn(const Tensor &g, const Tensor &x, c10::string_view approx) {
  return binary(Tensor(), g, x, NRT_OP_GELU_BACKWARD, Kind::Backward, nullptr, {gelu_mode(approx)});
}
Tensor leaky_relu_backward_fn(const Tensor &g, const Tensor &x, const Scalar &slope, bool self_is_result) {
  TORCH_CHECK(!self_is_result || slope.to<double>() >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported.");
  Tensor out;
  auto iter = TensorIterator::borrowing_binary_op(out, g, x);
  launch_iter(iter, NRT_OP_LEAKY_RELU_BACKWARD, {opmath_scalar_for(iter, slope)});
  return iter.output();
}
Tensor elu_backward_fn(const Tensor &g, const Scalar &alpha, const Scalar &scale, const Scalar &iscale,
                       bool is_result, const Tensor &x) {
  Tensor out;
  auto iter = TensorIterator::borrowing_binary_op(out, g, x);
  launch_iter(iter, NRT_OP_ELU_BACKWARD,
              {opmath_scalar_for(iter, alpha), opmath_scalar_for(iter, scale), opmath_scalar_for(iter, iscale)},
              {is_result});
  return iter.output();
}
Tensor softplus_backward_fn(const Tensor &g, const Tensor &x, const Scalar &beta, const Scalar &thr) {
  Tensor out;
  auto iter = TensorIterator::borrowing_binary_op(out, g, x);
  launch_iter(iter, NRT_OP_SOFTPLUS_BACKWARD, {opmath_scalar_for(iter, beta), opmath_scalar_for(iter, thr)});
  return iter.output();
}
Tensor hardtanh_backward_fn(const Tensor &g, const Tensor &x, const Scalar &lo, const Scalar &hi) {
  Tensor out;
  auto iter = TensorIterator::borrowing_binary_op(out, g, x);
  launch_iter(iter, NRT_OP_HARDTANH_BACKWARD, {opmath_scalar_for(iter, lo), opmath_scalar_for(iter, hi)});
  return iter.output();
}

// ---- ternary -----------------------------------------------------------------

// torch.where(cond, torch.tensor(1.0), x) works on the CPU and CUDA: 0-d
// CPU tensors are values, moved to the device (type promotion treats a 0-d
// tensor the same wherever it lives).
Tensor on_device(const Tensor &t, const Tensor &cond, const Tensor &a, const Tensor &b) {
  if (!t.is_cpu() || t.dim() != 0) return t;
  for (const Tensor *o : {&cond, &a, &b})
    if (o->device().type() == kNeuron) return t.to(o->device());
  return t;
}

Tensor where_into(Tensor out, const Tensor &cond_in, const Tensor &a_in, const Tensor &b_in) {
  // ATen's where_self_out: the out= must have the promoted type exactly,
  // checked before the condition's dtype.
  if (out.defined()) {
    at::ScalarType rt = at::result_type(a_in, b_in);
    TORCH_CHECK(out.scalar_type() == rt, "Expected out type to be ", rt, " but got ", out.scalar_type());
  }
  TORCH_CHECK(cond_in.scalar_type() == at::kBool || cond_in.scalar_type() == at::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ",
              cond_in.scalar_type());
  Tensor cond = on_device(cond_in, cond_in, a_in, b_in), a = on_device(a_in, cond_in, a_in, b_in),
         b = on_device(b_in, cond_in, a_in, b_in);
  at::TensorIteratorConfig config;
  config.check_all_same_dtype(false)
      .add_output(out)
      .add_const_input(cond)
      .add_const_input(a)
      .add_const_input(b)
      .promote_inputs_to_common_dtype(false);
  // A new result takes PyTorch's promoted type (an out= has it).
  if (!out.defined()) config.declare_static_dtype(at::result_type(a, b));
  auto iter = config.build();
  launch_iter(iter, NRT_OP_WHERE);
  return iter.output();
}

// isposinf / isneginf: a comparison with +-inf as a wrapped number (integers
// promote to float and compare false, as in PyTorch).
Tensor isinf_signed(Tensor out, const Tensor &a, double inf) {
  if (!out.defined()) out = at::empty({0}, a.options().dtype(at::kBool));  // sized by the iterator, in its layout
  return binary(out, a, at::native::wrapped_scalar_tensor(Scalar(inf)), NRT_OP_EQ, Kind::Compare);
}
Tensor isposinf_into(Tensor out, const Tensor &a) { return isinf_signed(out, a, INFINITY); }
Tensor isneginf_into(Tensor out, const Tensor &a) { return isinf_signed(out, a, -INFINITY); }


TensorIterator ternary_iter(Tensor &out, const Tensor &a, const Tensor &b, const Tensor &c) {
  return at::TensorIteratorConfig()
      .allow_cpu_scalars(true)
      .promote_inputs_to_common_dtype(true)
      .cast_common_dtype_to_outputs(true)
      .enforce_safe_casting_to_output(true)
      .add_output(out)
      .add_const_input(a)
      .add_const_input(b)
      .add_const_input(c)
      .build();
}

#define DEFINE_ADDC(name, OP)                                                                        \
  Tensor name##_into(Tensor out, const Tensor &s, const Tensor &t1, const Tensor &t2, const Scalar &v) { \
    check_##name(t1, t2);                                                                            \
    auto iter = ternary_iter(out, s, t1, t2);                                                        \
    check_cpu_dtype(iter, NRT_OP_##OP);                                                              \
    nrt_scalar im, re = opmath_scalar_for(iter, v, &im); /* the CPU: value.to<float> for 16-bit floats */ \
    launch_iter(iter, NRT_OP_##OP, {re, im});                                                        \
    return iter.output();                                                                            \
  }
void check_addcmul(const Tensor &, const Tensor &) {}
// ATen's addcdiv meta refuses integer division.
void check_addcdiv(const Tensor &t1, const Tensor &t2) {
  TORCH_CHECK(!(at::isIntegralType(t1.scalar_type(), true) && at::isIntegralType(t2.scalar_type(), true)),
              "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform "
              "a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + "
              "value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * "
              "tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter implementation: "
              "(input + value * tensor1 / tensor2), for all dtypes.");
}
DEFINE_ADDC(addcmul, ADDCMUL)
DEFINE_ADDC(addcdiv, ADDCDIV)
#undef DEFINE_ADDC

// lerp: ATen's meta functions require one dtype for self and end, and for a
// tensor weight of one or more dims (no promotion; an out= must match too);
// a 0-d weight takes part in type promotion (as a dim-0 tensor, on every
// device) and the result casts into any out= it safely can, as a binary
// op's does. Its kernels cover floating and complex dtypes only, checked
// after the iterator (an integer lerp into a float out= reaches the
// kernel's NotImplementedError, into a narrower one the cast error).
void check_lerp_dtype(const Tensor &s, const Tensor &other, const char *what) {
  TORCH_CHECK(s.dtype() == other.dtype(), "expected dtype ", s.dtype(), " for `", what, "` but got dtype ",
              other.dtype());
}
// (complex32 has none: the CPU computes it only in copies and a few ops)
bool lerp_has_kernel(at::ScalarType t) {
  return at::isFloatingType(t) || (at::isComplexType(t) && t != at::kComplexHalf);
}
void check_lerp_kernel(at::ScalarType t, const char *kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(lerp_has_kernel(t), "\"", kernel, "\" not implemented for '", c10::toString(t), "'");
}
Tensor lerp_t_into(Tensor out, const Tensor &s, const Tensor &e, const Tensor &w) {
  check_lerp_dtype(s, e, "end");
  bool promote_weight = w.dim() == 0;
  if (!promote_weight) check_lerp_dtype(s, w, "weight");
  auto iter = at::TensorIteratorConfig()
                  .allow_cpu_scalars(true)
                  .promote_inputs_to_common_dtype(promote_weight)
                  .enforce_safe_casting_to_output(promote_weight)
                  .cast_common_dtype_to_outputs(promote_weight)
                  .add_output(out)
                  .add_const_input(s)
                  .add_const_input(e)
                  .add_const_input(w)
                  .build();
  check_lerp_kernel(iter.common_dtype(), "lerp_kernel_tensor");
  launch_iter(iter, NRT_OP_LERP);
  return iter.output();
}
// remainder(Scalar, Tensor): ATen's wraps the scalar as a CPU 0-d tensor
Tensor remainder_scalar_tensor_fn(const Scalar &a, const Tensor &b) {
  return at::remainder(at::native::wrapped_scalar_tensor(a), b);
}
Tensor lerp_s_into(Tensor out, const Tensor &s, const Tensor &e, const Scalar &w) {
  check_lerp_dtype(s, e, "end");
  if (!lerp_has_kernel(s.scalar_type())) {
    // The CPU's iterator is self and end alone (the weight is a scalar, out
    // of its type promotion): its shape and out= errors come before its
    // kernel's dtype error.
    Tensor checked = out;
    (void)TensorIterator::borrowing_binary_op(checked, s, e);
    check_lerp_kernel(s.scalar_type(), "lerp_kernel_scalar");
  }
  // The CPU's kernel converts the weight to its math type (float32 for
  // float16/bfloat16; a complex weight of a real lerp overflows).
  (void)converted_scalar(w, at::toOpMathType(s.scalar_type()));
  Tensor weight = at::native::wrapped_scalar_tensor(w);  // the iterator borrows its inputs
  auto iter = ternary_iter(out, s, e, weight);
  launch_iter(iter, NRT_OP_LERP);
  return iter.output();
}


}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define REG_UNARY(name, OP, K) NEURON_VARIANTS(m, name##_into, #name, #name "_", #name ".out");
  NEURON_UNARY_TABLE(REG_UNARY)
  REG_UNARY(abs, ABS, Unary)
#undef REG_UNARY
  NEURON_VARIANTS(m, isnan_into, "isnan", nullptr, "isnan.out");
  NEURON_VARIANTS(m, logical_not_into, "logical_not", "logical_not_", "logical_not.out");
#define REG_BINARY(name, fname, iname, oname, OP, K) NEURON_VARIANTS(m, name##_into, fname, iname, oname);
  NEURON_BINARY_TABLE(REG_BINARY)
#undef REG_BINARY
#define REG_COMPARE_SCALAR(name, OP) \
  NEURON_VARIANTS(m, name##_scalar_into, #name ".Scalar", #name "_.Scalar", #name ".Scalar_out");
  NEURON_COMPARE_SCALAR_TABLE(REG_COMPARE_SCALAR)
#undef REG_COMPARE_SCALAR
  NEURON_VARIANTS(m, bitwise_left_shift_into, "__lshift__.Tensor", "__ilshift__.Tensor", "__lshift__.Tensor_out");
  NEURON_VARIANTS(m, bitwise_right_shift_into, "__rshift__.Tensor", "__irshift__.Tensor", "__rshift__.Tensor_out");
  NEURON_VARIANTS(m, bitwise_left_shift_scalar_into, "__lshift__.Scalar", "__ilshift__.Scalar", "__lshift__.Scalar_out");
  NEURON_VARIANTS(m, bitwise_right_shift_scalar_into, "__rshift__.Scalar", "__irshift__.Scalar", "__rshift__.Scalar_out");
  NEURON_VARIANTS(m, add_into, "add.Tensor", "add_.Tensor", "add.out");
  NEURON_VARIANTS(m, sub_into, "sub.Tensor", "sub_.Tensor", "sub.out");
  NEURON_VARIANTS(m, div_mode_into, "div.Tensor_mode", "div_.Tensor_mode", "div.out_mode");
  NEURON_VARIANTS(m, pow_ts_into, "pow.Tensor_Scalar", "pow_.Scalar", "pow.Tensor_Scalar_out");
  NEURON_IMPL(m, "pow.Scalar", pow_st_fn);
  NEURON_VARIANTS(m, gelu_into, "gelu", "gelu_", "gelu.out");
  NEURON_VARIANTS(m, leaky_relu_into, "leaky_relu", "leaky_relu_", "leaky_relu.out");
  NEURON_VARIANTS(m, elu_into, "elu", "elu_", "elu.out");
  NEURON_VARIANTS(m, softplus_into, "softplus", nullptr, "softplus.out");
  NEURON_VARIANTS(m, hardtanh_into, "hardtanh", "hardtanh_", "hardtanh.out");
  NEURON_VARIANTS(m, clamp_into, "clamp", "clamp_", "clamp.out");
  NEURON_VARIANTS(m, clamp_min_into, "clamp_min", "clamp_min_", "clamp_min.out");
  NEURON_VARIANTS(m, clamp_max_into, "clamp_max", "clamp_max_", "clamp_max.out");
  NEURON_VARIANTS(m, clamp_t_into, "clamp.Tensor", "clamp_.Tensor", "clamp.Tensor_out");
  NEURON_VARIANTS(m, clamp_min_t_into, "clamp_min.Tensor", "clamp_min_.Tensor", "clamp_min.Tensor_out");
  NEURON_VARIANTS(m, clamp_max_t_into, "clamp_max.Tensor", "clamp_max_.Tensor", "clamp_max.Tensor_out");
  NEURON_IMPL(m, "threshold_backward", threshold_backward_fn);
#define REG_BACKWARD(name, OP) NEURON_IMPL(m, #name, name##_fn);
  NEURON_SIMPLE_BACKWARD_TABLE(REG_BACKWARD)
#undef REG_BACKWARD
  NEURON_IMPL(m, "gelu_backward", gelu_backward_fn);
  NEURON_IMPL(m, "leaky_relu_backward", leaky_relu_backward_fn);
  NEURON_IMPL(m, "elu_backward", elu_backward_fn);
  NEURON_IMPL(m, "softplus_backward", softplus_backward_fn);
  NEURON_IMPL(m, "hardtanh_backward", hardtanh_backward_fn);
  NEURON_OUT_OF(m, gelu_backward_fn, "gelu_backward.grad_input");
  NEURON_OUT_OF(m, leaky_relu_backward_fn, "leaky_relu_backward.grad_input");
  NEURON_OUT_OF(m, elu_backward_fn, "elu_backward.grad_input");
  NEURON_OUT_OF(m, softplus_backward_fn, "softplus_backward.grad_input");
  NEURON_OUT_OF(m, hardtanh_backward_fn, "hardtanh_backward.grad_input");
  NEURON_OUT_OF(m, threshold_backward_fn, "threshold_backward.grad_input");
  NEURON_OUT_OF(m, sigmoid_backward_fn, "sigmoid_backward.grad_input");
  NEURON_OUT_OF(m, tanh_backward_fn, "tanh_backward.grad_input");
  NEURON_OUT_OF(m, silu_backward_fn, "silu_backward.grad_input");
  NEURON_OUT_OF(m, hardsigmoid_backward_fn, "hardsigmoid_backward.grad_input");
  NEURON_OUT_OF(m, pow_st_fn, "pow.Scalar_out");
  NEURON_VARIANTS(m, where_into, "where.self", nullptr, "where.self_out");
  NEURON_VARIANTS(m, isposinf_into, "isposinf", nullptr, "isposinf.out");
  NEURON_VARIANTS(m, isneginf_into, "isneginf", nullptr, "isneginf.out");
  NEURON_VARIANTS(m, addcmul_into, "addcmul", "addcmul_", "addcmul.out");
  NEURON_VARIANTS(m, addcdiv_into, "addcdiv", "addcdiv_", "addcdiv.out");
  NEURON_VARIANTS(m, lerp_t_into, "lerp.Tensor", "lerp_.Tensor", "lerp.Tensor_out");
  NEURON_VARIANTS(m, lerp_s_into, "lerp.Scalar", "lerp_.Scalar", "lerp.Scalar_out");
  NEURON_IMPL(m, "remainder.Scalar_Tensor", remainder_scalar_tensor_fn);
}

}  // namespace torch_neuronx
