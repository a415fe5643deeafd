// Complex tensors on the device: the COMPLEX kernel family behind the
// general ops (registered with the launch layer as an extension, so
// launch_iter hands it every iteration with a complex operand), the
// complex-only ops (complex, polar, conj_physical, sgn), logaddexp (whose
// complex form is a kernel of the family), the view_as_real /
// view_as_complex views, and the conjugate / negative bit plumbing of
// copies.
//
// Conjugate and negative views keep their bit and their physical data;
// PyTorch materialises them through copy_ -> _copy_from. Its Conjugate and
// Negative fallbacks would first resolve the bit of _copy_from's input by
// cloning it, which is itself a copy_ -> _copy_from of the same input: an
// endless recursion for a backend that implements copies with _copy_from.
// So _copy_from falls through those keys and our copy applies the bits
// itself (the CX_COPY kernel conjugates / negates on the fly).
#include <ATen/TensorIterator.h>
#include <ATen/ExpandUtils.h>
#include <ATen/Version.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/where.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include "launch/iter.h"
#include "launch/launch.h"
#include "nrt/ops/complex.h"
#include "registry/variants.h"

namespace torch_neuronx {
namespace {

using at::Tensor;

// The COMPLEX op that computes base op `op` on complex operands, with its
// params; false if there is none.
bool complex_op_for(at::TensorIteratorBase &iter, nrt_op op, nrt_op *out, int64_t *p0, int64_t *p1) {
  *p0 = *p1 = 0;
  if (nrt_op_kind(op) == NRT_KIND_COMPLEX) {
    *out = op;
    return true;
  }
  switch (op) {
    case NRT_OP_COPY:
      *out = NRT_OP(CX_COPY);
      *p0 = iter.tensor_base(0).is_conj() != iter.tensor_base(1).is_conj();
      *p1 = iter.tensor_base(0).is_neg() != iter.tensor_base(1).is_neg();
      return true;
    case NRT_OP_NEG: *out = NRT_OP(CX_COPY); *p1 = 1; return true;
    case NRT_OP_FILL: *out = NRT_OP(CX_FILL); return true;
    case NRT_OP_ADD: *out = NRT_OP(CX_ADD); return true;
    case NRT_OP_SUB: *out = NRT_OP(CX_SUB); return true;
    case NRT_OP_MUL: *out = NRT_OP(CX_MUL); return true;
    case NRT_OP_DIV: *out = NRT_OP(CX_DIV); return true;
    case NRT_OP_EQ: *out = NRT_OP(CX_EQ); return true;
    case NRT_OP_NE: *out = NRT_OP(CX_NE); return true;
    case NRT_OP_WHERE: *out = NRT_OP(CX_WHERE); return true;
    case NRT_OP_SUM: *out = NRT_OP(CX_REDUCE); return true;
    case NRT_OP_MEAN: *out = NRT_OP(CX_REDUCE); *p0 = 1; return true;
    // p1: the CPU's order and precision for a complex64/complex128 product,
    // 32 the width of prod_stub's AVX2 build, which AVX-512 machines run too
    case NRT_OP_PROD:
      *out = NRT_OP(CX_REDUCE);
      *p0 = 2;
      if (iter.dtype(0) == iter.dtype(1) && (iter.dtype(0) == at::kComplexFloat || iter.dtype(0) == at::kComplexDouble))
        *p1 = 32;
      return true;
    case NRT_OP_ALL: *out = NRT_OP(CX_REDUCE); *p0 = 3; return true;
    case NRT_OP_ANY: *out = NRT_OP(CX_REDUCE); *p0 = 4; return true;
    case NRT_OP_POW:
      // A wrapped-number exponent is pow.Tensor_Scalar's (its kernel has
      // special forms for 2, 3, -2, 0.5, -0.5, -1), a wrapped-number base
      // pow.Scalar's (a base of 1 is a fill of 1): the glue reaches both as
      // a ** b with the scalar wrapped. (A bool base never equals 1 for
      // Scalar::equal: True ** nan is NaN.)
      *out = NRT_OP(CX_POW);
      if (iter.ntensors() == 3 && iter.tensor_base(2).unsafeGetTensorImpl()->is_wrapped_number()) *p0 = 1;
      else if (iter.ntensors() == 3 && iter.tensor_base(1).unsafeGetTensorImpl()->is_wrapped_number() &&
               iter.tensor_base(1).scalar_type() != at::kBool)
        *p0 = 2;
      return true;
    case NRT_OP_POW_SCALAR: *out = NRT_OP(CX_POW_SCALAR); return true;
    case NRT_OP_LOGICAL_AND: *out = NRT_OP(CX_LOGICAL); return true;
    case NRT_OP_LOGICAL_OR: *out = NRT_OP(CX_LOGICAL); *p0 = 1; return true;
    case NRT_OP_LOGICAL_XOR: *out = NRT_OP(CX_LOGICAL); *p0 = 2; return true;
    case NRT_OP_ADDCMUL: *out = NRT_OP(CX_ADDCMUL); return true;
    case NRT_OP_ADDCDIV: *out = NRT_OP(CX_ADDCDIV); return true;
    case NRT_OP_LERP: *out = NRT_OP(CX_LERP); return true;
    case NRT_OP_EXP: case NRT_OP_EXP2: case NRT_OP_EXPM1: case NRT_OP_LOG: case NRT_OP_LOG2:
    case NRT_OP_LOG10: case NRT_OP_LOG1P: case NRT_OP_SQRT: case NRT_OP_RSQRT: case NRT_OP_RECIPROCAL:
    case NRT_OP_SIN: case NRT_OP_COS: case NRT_OP_TAN: case NRT_OP_SINH: case NRT_OP_COSH:
    case NRT_OP_TANH: case NRT_OP_ASIN: case NRT_OP_ACOS: case NRT_OP_ATAN: case NRT_OP_ASINH:
    case NRT_OP_ACOSH: case NRT_OP_ATANH: case NRT_OP_SIGMOID: case NRT_OP_ISNAN: case NRT_OP_LOGICAL_NOT:
      *out = NRT_OP(CX_MATH);
      *p0 = op;
      return true;
    case NRT_OP_ABS:
      // |z| is real: only when the caller gave a real output.
      if (at::isComplexType(iter.dtype(0))) return false;
      *out = NRT_OP(CX_ABS);
      return true;
    default: return false;
  }
}

// How many elements of a row ATen's cpu_kernel_vec computes in its vector
// body per step (two vectors of the dispatched CPU capability: 16 complex64
// with AVX-512, 8 with AVX2), the rest of a row going through the scalar
// function; sgn and pow's products give other special values in each
// (nrt_cx_for_each_split). 0 for complex32, which has no vector kernel.
int64_t cpu_vector_block(at::ScalarType t) {
  if (!at::isComplexType(t) || t == at::kComplexHalf) return 0;
  static const int64_t bytes = at::get_cpu_capability() == "AVX512" ? 64 : 32;
  return 2 * bytes / static_cast<int64_t>(c10::elementSize(t));
}

void launch_iter_complex(at::TensorIteratorBase &iter, nrt_op op, std::initializer_list<nrt_scalar> scalars,
                         std::initializer_list<int64_t> params) {
  nrt_op cop;
  int64_t p0, p1;
  if (!complex_op_for(iter, op, &cop, &p0, &p1)) {
    at::ScalarType t = iter.dtype(0);
    for (int i = 0; i < iter.ntensors(); ++i)
      if (at::isComplexType(iter.dtype(i))) t = iter.dtype(i);
    TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: ", nrt_op_name(op), " does not support complex tensors (got ", t, ")");
  }
  if (iter.numel() == 0) return;
  TORCH_CHECK(iter.ndim() <= NRT_MAX_DIMS, "neuron kernels support at most ", NRT_MAX_DIMS,
              " dimensions after coalescing, got ", iter.ndim());
  TORCH_CHECK(iter.ntensors() <= NRT_MAX_OPERANDS, "too many operands for a neuron kernel");
  c10::Device device = iter.device();
  c10::DeviceGuard guard(device);

  nrt_launch d = iter_desc(iter, cop);
  d.compute_dtype = to_nrt_dtype(iter.dtype(0));  // unused by the family, must be valid
  int k = 0;
  for (const auto &s : scalars) d.scalars[k++] = s;
  if (nrt_op_kind(op) == NRT_KIND_COMPLEX) {
    k = 0;
    for (int64_t p : params) d.params[k++] = p;
  } else {
    d.params[0] = p0;
    d.params[1] = p1;
    if (op == NRT_OP_POW || op == NRT_OP_POW_SCALAR) d.params[1] = cpu_vector_block(iter.dtype(0));
  }

  c10::SmallVector<at::Tensor, 1> temps;  // device copies of CPU scalars, freed in stream order
  int ninline = 0;
  for (int i = 0; i < iter.ntensors(); ++i) {
    nrt_operand &o = d.operands[i];
    if (iter.device(i).is_cpu()) {
      // A wrapped number: its exact value as a complex128, broadcast with
      // stride 0 (the kernels compute in double anyway); carried in the
      // descriptor while a slot is free, else filled on the device.
      TORCH_INTERNAL_ASSERT(i >= iter.noutputs(), "CPU output in a neuron kernel");
      c10::complex<double> v = iter.scalar_value<c10::complex<double>>(i);
      if (ninline < NRT_MAX_INLINE) {
        d.inline_values[ninline].f64[0] = v.real();
        d.inline_values[ninline].f64[1] = v.imag();
        o.inline_slot = ++ninline;
        o.data = nullptr;
        o.dtype = NRT_COMPLEX128;
        continue;
      }
      at::Tensor t = at::empty({}, at::TensorOptions().dtype(at::kComplexDouble).device(device));
      nrt_launch f = new_launch(NRT_OP(CX_FILL));
      f.noutputs = 1;
      f.compute_dtype = NRT_COMPLEX128;
      f.scalars[0].f = v.real();
      f.scalars[1].f = v.imag();
      f.operands[0].data = t.data_ptr();
      f.operands[0].dtype = NRT_COMPLEX128;
      launch(device.index(), f);
      o.data = t.data_ptr();
      o.dtype = NRT_COMPLEX128;
      temps.push_back(std::move(t));
      continue;
    }
    set_iter_operand(o, iter, i);
  }
  launch(device.index(), d);
}

// A real computation written into a complex out= (sqrt(x, out=complex)):
// the CPU computes in the inputs' real common dtype and casts into out, so
// sqrt(-2) is NaN+0j, not 1.41j, and a bfloat16 input's result is rounded to
// bfloat16 first. The general kernel computes into a real temporary with
// out's element layout (the iterator's byte strides rescaled), which is
// then copied into out. A Python scalar (a CPU 0-d operand) is cast to the
// common dtype and put on the device, as the CPU's iterator casts it, so
// integer arithmetic wraps as on the CPU (int32 - 200000 into a complex
// out=). False: not such an iteration.
bool launch_real_into_complex(at::TensorIteratorBase &iter, nrt_op op, std::initializer_list<nrt_scalar> scalars,
                              std::initializer_list<int64_t> params) {
  if (nrt_op_kind(op) == NRT_KIND_COMPLEX || op == NRT_OP_COPY || iter.ninputs() == 0 || iter.noutputs() != 1)
    return false;
  for (int i = iter.noutputs(); i < iter.ntensors(); ++i)
    if (at::isComplexType(iter.dtype(i))) return false;
  at::ScalarType common = iter.common_dtype();
  if (at::isComplexType(common) || !at::isComplexType(iter.dtype(0))) return false;
  if (iter.numel() == 0) return true;
  c10::Device device = iter.device();
  c10::DeviceGuard guard(device);
  const at::TensorBase &out = iter.tensor_base(0);
  at::Tensor tmp = at::empty_strided(out.sizes(), out.strides(), out.options().dtype(common));
  int64_t csize = static_cast<int64_t>(out.element_size()), rsize = static_cast<int64_t>(tmp.element_size());
  nrt_launch d = iter_desc(iter, op);
  d.compute_dtype = to_nrt_dtype(common);
  int k = 0;
  for (const auto &sc : scalars) d.scalars[k++] = sc;
  k = 0;
  for (int64_t p : params) d.params[k++] = p;
  c10::SmallVector<at::Tensor, 1> temps;  // device copies of CPU scalars, freed in stream order
  int ninline = 0;
  for (int i = 0; i < iter.ntensors(); ++i) {
    if (!iter.device(i).is_cpu()) {
      set_iter_operand(d.operands[i], iter, i);
      continue;
    }
    nrt_operand &o = d.operands[i];
    if (at::isReducedFloatingType(common)) {
      // Carried inline in float32 as the general launch carries it: the
      // value the CPU's kernel computes with (lerp's Python weight 1e-40
      // is not rounded to float16's 0 there), and no conversion to the
      // 16-bit compute dtype on its way in.
      nrt_scalar s;
      s.f = reduced_float_scalar(op, common, iter.scalar_value<double>(i),
                                 iter.tensor_base(i).unsafeGetTensorImpl()->is_wrapped_number());
      if (ninline < NRT_MAX_INLINE && store_inline(d.inline_values[ninline], at::kFloat, s)) {
        o.inline_slot = ++ninline;
        o.data = nullptr;
        o.dtype = NRT_FLOAT32;
        continue;
      }
    }
    at::Tensor v = iter.tensor(i).to(common).to(device);
    o.data = v.data_ptr();
    o.dtype = to_nrt_dtype(common);
    for (int j = 0; j < d.ndim; ++j) o.strides[j] = 0;  // one value, broadcast
    temps.push_back(std::move(v));
  }
  int64_t offset = (static_cast<char *>(iter.data_ptr(0)) - static_cast<char *>(out.data_ptr())) / csize;
  d.operands[0].data = static_cast<char *>(tmp.data_ptr()) + offset * rsize;
  d.operands[0].dtype = to_nrt_dtype(common);
  for (int j = 0; j < d.ndim; ++j) d.operands[0].strides[j] = d.operands[0].strides[j] / csize * rsize;
  launch(device.index(), d);
  at::Tensor(out).copy_(tmp);
  return true;
}

// A sum in the CPU's cascade order (SUM p0 = 1) reads complex operands
// itself, one part at a time (kernels/reduce/cascade.c): it goes to the
// general launch as it is.
bool cascade_sum(nrt_op op, int64_t p0) { return op == NRT_OP_SUM && p0 == 1; }

// The launch extension: iterations the general kernels cannot read (a
// complex operand, a COMPLEX op, or a copy that must apply a conjugate /
// negative bit) run here.
bool take_iter(at::TensorIteratorBase &iter, nrt_op op, std::initializer_list<nrt_scalar> scalars,
               std::initializer_list<int64_t> params) {
  if (cascade_sum(op, params.size() > 0 ? *params.begin() : 0)) return false;
  bool complex = nrt_op_kind(op) == NRT_KIND_COMPLEX;
  for (int i = 0; i < iter.ntensors() && !complex; ++i) complex = at::isComplexType(iter.dtype(i));
  if (!complex && !(op == NRT_OP_COPY && (iter.tensor_base(0).is_conj() != iter.tensor_base(1).is_conj() ||
                                          iter.tensor_base(0).is_neg() != iter.tensor_base(1).is_neg())))
    return false;
  if (launch_real_into_complex(iter, op, scalars, params)) return true;
  launch_iter_complex(iter, op, scalars, params);
  return true;
}

// Hand-built descriptors: the family's own ops go straight to the runtime,
// and hand-built copies (flip, ...) of complex data become CX_COPY, which
// has the same operand layout. Anything else with a complex operand is left
// to the general check, which raises.
bool take_launch(c10::DeviceIndex device, const nrt_launch &desc) {
  if (nrt_op_kind(desc.op) == NRT_KIND_COMPLEX || cascade_sum(desc.op, desc.params[0])) {
    enqueue(device, desc);
    return true;
  }
  if (desc.op != NRT_OP_COPY) return false;
  bool complex = false;
  for (int i = 0; i < desc.noutputs + desc.ninputs && i < NRT_MAX_OPERANDS; ++i)
    complex |= nrt_dtype_is_complex(desc.operands[i].dtype);
  if (!complex) return false;
  nrt_launch c = desc;
  c.op = NRT_OP(CX_COPY);
  c.params[0] = c.params[1] = 0;
  enqueue(device, c);
  return true;
}

struct RegisterExtension {
  RegisterExtension() { register_launch_extension({&take_iter, &take_launch}); }
} g_register_extension;

// ---- views -----------------------------------------------------------------
// ATen's own kernels only rewrite metadata (a new TensorImpl on the same
// storage), which is right for any device.
Tensor view_as_real_fn(const Tensor &self) { return at::native::view_as_real(self); }
Tensor view_as_complex_fn(const Tensor &self) { return at::native::view_as_complex(self); }

// ---- sgn -------------------------------------------------------------------
// sign for real tensors, z / |z| (0 at 0) for complex ones.
Tensor sgn_into(Tensor out, const Tensor &self) {
  // The CPU's sgn iterator keeps one dtype: an out= of another is refused,
  // also when empty.
  if (out.defined() && !out.is_same(self))
    TORCH_CHECK(out.scalar_type() == self.scalar_type(), "Found dtype ", out.scalar_type(), " but expected ",
                self.scalar_type());
  if (!self.is_complex()) return out.is_same(self) ? self.sign_() : self.sign();
  // out= and in-place are the iterator's output, as in the CPU's structured
  // kernel: its layout orders the iteration, and that order picks the vector
  // body or the scalar function per row (they differ at inf parts).
  Tensor result = out;
  auto iter = at::TensorIterator::unary_op(result, self);
  launch_iter_complex(iter, NRT_OP(CX_SGN), {}, {cpu_vector_block(self.scalar_type())});
  return iter.output();
}

// ---- conj_physical ---------------------------------------------------------
Tensor &conj_physical_out(const Tensor &self, Tensor &out) {
  // The CPU's iterator for it keeps one dtype: out= must have self's.
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "Found dtype ", out.scalar_type(), " but expected ",
              self.scalar_type());
  auto iter = at::TensorIteratorConfig()
                  .add_output(out)
                  .add_const_input(self)
                  .resize_outputs(true)
                  .check_all_same_dtype(false)
                  .build();
  c10::DeviceGuard guard(self.device());
  if (!self.is_complex() && !out.is_complex()) {
    launch_iter(iter, NRT_OP_COPY);  // conj of a real tensor is a copy
  } else {
    launch_iter_complex(iter, NRT_OP(CX_COPY), {}, {1, 0});
  }
  return out;
}

// ---- logaddexp -------------------------------------------------------------
// Registered here because its complex form is this family's kernel
// (CX_LOGADDEXP: the CPU's formula, so special values agree); real dtypes
// are composed of native ops: max + log1p(exp(-|a - b|)), with equal
// infinities handled as PyTorch does (log(2 * exp(inf)) = inf, -inf stays
// -inf).
Tensor logaddexp_into(Tensor out, const Tensor &a, const Tensor &b) {
  // The CPU's iterator checks, in its order: the shapes broadcast, the
  // result type casts into out=, then its kernel takes floating and complex
  // dtypes only.
  at::infer_size(a.sizes(), b.sizes());
  at::ScalarType t = at::result_type(a, b);
  TORCH_CHECK(!out.defined() || at::canCast(t, out.scalar_type()), "result type ", t,
              " can't be cast to the desired output type ", out.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t) || at::isComplexType(t), "\"logaddexp_cpu\" not implemented for '",
                              t, "'");
  if (at::isComplexType(t)) {
    TORCH_CHECK_NOT_IMPLEMENTED(t != at::kComplexHalf, "\"logaddexp_cpu\" not implemented for '", t, "'");
    auto iter = at::TensorIterator::binary_op(out, a, b);
    c10::DeviceGuard guard(iter.device());
    launch_iter_complex(iter, NRT_OP(CX_LOGADDEXP), {}, {});
    return iter.output();
  }
  // in the result dtype first: a bool operand beside a float one is valid
  // for the CPU's kernel, but not for sub; float16/bfloat16 operands are
  // then computed in float32 and rounded once, as the CPU's kernel does
  // (composed in 16-bit, each step would round)
  at::ScalarType ct = t == at::kBFloat16 || t == at::kHalf ? at::kFloat : t;
  const Tensor x = (a.scalar_type() == t ? a : a.to(t)).to(ct), y = (b.scalar_type() == t ? b : b.to(t)).to(ct);
  Tensor m = at::maximum(x, y);
  Tensor r = m.add(x.sub(y).abs().neg().exp().log1p());
  Tensor res = at::where(x.eq(y).logical_and(x.isinf()), x, r);
  return ct == t ? res : res.to(t);
}

// ---- constructors from real parts (complex, polar) -------------------------
void check_parts(const Tensor &a, const Tensor &b, const Tensor &out) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "Expected object of scalar type ", a.scalar_type(),
              " but got scalar type ", b.scalar_type(), " for second argument");
  at::ScalarType t = a.scalar_type();
  TORCH_CHECK(t == at::kFloat || t == at::kDouble || t == at::kHalf,
              "Expected both inputs to be Half, Float or Double tensors but got ", a.scalar_type(), " and ",
              b.scalar_type());
  TORCH_CHECK(out.scalar_type() == c10::toComplexType(t), "Expected object of scalar type ",
              c10::toComplexType(t), " but got scalar type ", out.scalar_type(), " for argument 'out'");
}

// A 0-d CPU tensor next to device tensors is a value (as in where): it
// moves to the output's device.
Tensor value_on(const Tensor &t, const Tensor &out) {
  return t.is_cpu() && t.dim() == 0 && !out.is_cpu() ? t.to(out.device()) : t;
}

Tensor &from_parts(const Tensor &a_in, const Tensor &b_in, Tensor &out, nrt_op op) {
  check_parts(a_in, b_in, out);
  Tensor a = value_on(a_in, out), b = value_on(b_in, out);
  c10::DeviceGuard guard(out.device());
  auto iter = at::TensorIteratorConfig()
                  .add_output(out)
                  .add_const_input(a)
                  .add_const_input(b)
                  .check_all_same_dtype(false)
                  .build();
  launch_iter_complex(iter, op, {}, {});
  return out;
}
Tensor &complex_out(const Tensor &re, const Tensor &im, Tensor &out) {
  return from_parts(re, im, out, NRT_OP(CX_COMPLEX));
}
Tensor &polar_out(const Tensor &abs, const Tensor &angle, Tensor &out) {
  return from_parts(abs, angle, out, NRT_OP(CX_POLAR));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_VARIANTS(m, sgn_into, "sgn", "sgn_", "sgn.out");
  NEURON_IMPL(m, "view_as_real", view_as_real_fn);
  NEURON_IMPL(m, "view_as_complex", view_as_complex_fn);
  NEURON_IMPL(m, "conj_physical.out", conj_physical_out);
  NEURON_VARIANTS(m, logaddexp_into, "logaddexp", nullptr, "logaddexp.out");
  NEURON_IMPL(m, "complex.out", complex_out);
  NEURON_IMPL(m, "polar.out", polar_out);
}

// See the comment at the top: copies apply conjugate / negative bits themselves.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace torch_neuronx
