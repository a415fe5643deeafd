// The GEMM family's glue: mm, addmm, bmm, baddbmm. Checks as ATen's meta
// functions make them, then one GEMM launch with the operands' own strides
// (transposed views need no copy: the runtime packs them).
#include <ATen/OpMathType.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/complex.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/empty.h>
#include <ATen/TensorOperators.h>
#include <c10/core/DeviceGuard.h>

#include "launch/launch.h"
#include "launch/scalar.h"
#include "nrt/ops/gemm.h"
#include "registry/variants.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using c10::Scalar;

void check_same_dtype(const Tensor &a, const Tensor &b, const char *what) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "expected ", what, " to have the same dtype, but got: ",
              a.scalar_type(), " != ", b.scalar_type());
}


// alpha and beta as the CPU's GEMMs convert them: to the math type of the
// operands' dtype (float32 for float16/bfloat16), with its overflow check.
nrt_scalar scalar_in(const Tensor &t, const Scalar &s) { return checked_scalar(s, at::toOpMathType(t.scalar_type())); }

// Complex C = alpha * A @ B + beta * bias from four real GEMMs over the
// (re, im) planes of A and B (strided views of the same memory: no copies
// beyond resolving conjugate/negative bits), combined by native complex
// elementwise ops. The GEMM kernel itself is real-only.
void complex_gemm(const Tensor &c, const Tensor &a, const Tensor &b, const Tensor &bias, const Scalar &alpha,
                  const Scalar &beta) {
  Tensor ar = at::view_as_real(a.resolve_conj().resolve_neg()), br = at::view_as_real(b.resolve_conj().resolve_neg());
  Tensor a0 = ar.select(-1, 0), a1 = ar.select(-1, 1), b0 = br.select(-1, 0), b1 = br.select(-1, 1);
  Tensor re = at::bmm(a0, b0).sub_(at::bmm(a1, b1));
  Tensor im = at::bmm(a0, b1).add_(at::bmm(a1, b0));
  Tensor t = at::complex(re, im);
  if (!(alpha.isIntegral(false) && alpha.toLong() == 1)) t = t.mul(alpha);
  if (bias.defined()) t = t.add(bias.mul(beta));
  c.copy_(t);
}

// alpha == 0: BLAS does not read A and B, so a NaN or inf in them stays out
// of the result (C = beta * bias). The CPU calls BLAS for float32/float64
// addmm (so addmv and addbmm too) and for baddbmm from 400 multiply-adds
// per batch (bfloat16 there too, where oneDNN takes bfloat16: a CPU with
// AVX-512 BW/VL/DQ, ATen's mkldnn_bf16_device_check); its own loops (16-bit
// addmm, smaller baddbmm, float16 baddbmm, bfloat16 on an AVX2-only CPU)
// multiply the product by 0, NaN included, as the kernel does.
bool cpu_bf16_blas() {
  static const bool has = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512dq");
  return has;
}

bool cpu_skips_product(const Tensor &a, const Scalar &alpha, bool batched, int64_t macs) {
  if (!scalar_is_zero(alpha) || a.is_complex()) return false;
  at::ScalarType t = a.scalar_type();
  bool blas = t == at::kFloat || t == at::kDouble;
  if (!batched) return blas;
  return macs >= 400 && (blas || (t == at::kBFloat16 && cpu_bf16_blas()));
}

// C = beta * bias (bias undefined: beta is 0 or there is none), the result of
// a product the CPU skips.
void fill_without_product(Tensor &out, const Tensor &bias, const Scalar &beta) {
  if (bias.defined()) out.copy_(bias.mul(beta));
  else out.zero_();
}

// The CPU's GEMMs with K = 0 (nothing to multiply): an empty result is
// returned as is; otherwise zeros (beta == 0, or no bias), or the bias
// copied in and scaled in place by beta, so a fractional beta refuses an
// integer result there as on the CPU (result.mul_(beta)).
void fill_k0(Tensor &out, const Tensor &bias, const Scalar &beta) {
  if (out.numel() == 0) return;
  if (!bias.defined() || scalar_is_zero(beta)) {
    out.zero_();
    return;
  }
  if (!(bias.data_ptr() == out.data_ptr() && bias.strides() == out.strides())) out.copy_(bias);
  out.mul_(beta);
}

// C[b] = alpha * A[b] @ B[b] + beta * bias[b]; all operands are 3-d views
// (batch, rows, cols); `bias` may be undefined.
void launch_gemm(const Tensor &c, const Tensor &a, const Tensor &b, const Tensor &bias, const Scalar &alpha,
                 const Scalar &beta) {
  if (c.numel() == 0) return;
  if (a.is_complex()) {
    (void)scalar_in(a, alpha);
    (void)scalar_in(a, beta);
    return complex_gemm(c, a, b, bias, alpha, beta);
  }
  nrt_launch d = new_launch(NRT_OP(GEMM), {c.size(0), c.size(1), c.size(2), a.size(2)});
  d.noutputs = 1;
  d.ninputs = bias.defined() ? 3 : 2;
  d.compute_dtype = to_nrt_dtype(a.scalar_type());
  bool f64 = false;
  auto put = [&](int i, const Tensor &t) {
    set_operand(d.operands[i], t, {0, 1, 2});
    f64 |= d.operands[i].dtype == NRT_FLOAT64;
  };
  put(0, c);
  put(1, a);
  put(2, b);
  if (bias.defined()) put(3, bias);
  d.scalars[0] = scalar_in(a, alpha);
  d.scalars[1] = scalar_in(a, beta);
  if (f64) warn_float64_once();
  launch(c.device().index(), d);
}

// The CPU's GEMM kernels dispatch over every dtype but bool, and only when
// there are products to compute (an empty result or K = 0 returns first):
// NotImplementedError naming the CPU's kernel, as there.
void check_gemm_dtype(const Tensor &a, int64_t outputs, int64_t k, const char *cpu_kernel) {
  if (outputs != 0 && k != 0)
    TORCH_CHECK_NOT_IMPLEMENTED(a.scalar_type() != at::kBool, "\"", cpu_kernel, "\" not implemented for 'Bool'");
}

// A structured op's out= (or in-place self) must already have the result's
// dtype, as ATen's generated wrappers check before the kernel runs.
void check_gemm_out(const Tensor &out, const Tensor &self, c10::ScalarType result) {
  if (out.defined() && self.defined() && out.is_same(self)) {
    TORCH_CHECK(out.scalar_type() == result, "Bad in-place call: input tensor dtype ", out.dtype(),
                " and output tensor dtype ", c10::scalarTypeToTypeMeta(result), " should match");
  } else {
    check_out_dtype(out, result);
  }
}

void check_mm(const Tensor &a, const Tensor &b, const char *an, const char *bn) {
  TORCH_CHECK(a.dim() == 2, an, " must be a matrix, got ", a.dim(), "-D tensor");
  TORCH_CHECK(b.dim() == 2, bn, " must be a matrix, got ", b.dim(), "-D tensor");
  TORCH_CHECK(a.size(1) == b.size(0), an, " and ", bn, " shapes cannot be multiplied (", a.size(0), "x",
              a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  check_same_dtype(a, b, "self and mat2");
  TORCH_CHECK(a.device() == b.device(), "Expected all tensors to be on the same device, but found at least two devices, ",
              a.device(), " and ", b.device(), "!");
}

Tensor &mm_into(Tensor &out, const Tensor &a, const Tensor &b, const Tensor *bias, const Scalar &beta,
                const Scalar &alpha) {
  c10::DeviceGuard guard(a.device());
  if (!out.defined()) {
    out = at::empty({a.size(0), b.size(1)}, a.options());
  } else {
    TORCH_CHECK(out.scalar_type() == a.scalar_type(), "Expected out tensor to have dtype ", a.scalar_type(),
                ", but got ", out.scalar_type(), " instead");
    out.resize_({a.size(0), b.size(1)});
  }
  check_gemm_dtype(a, out.numel(), a.size(1), "addmm_impl_cpu_");
  Tensor bias3;
  if (bias && bias->defined() && !scalar_is_zero(beta)) {
    bias3 = bias->expand({a.size(0), b.size(1)}).unsqueeze(0);
  }
  if (a.size(1) == 0) {
    fill_k0(out, bias3.defined() ? bias3.squeeze(0) : bias3, beta);
    return out;
  }
  if (cpu_skips_product(a, alpha, false, 0)) {
    fill_without_product(out, bias3.defined() ? bias3.squeeze(0) : bias3, beta);
    return out;
  }
  launch_gemm(out.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), bias3, alpha, beta);
  return out;
}


Tensor matmul_into(Tensor out, const Tensor &a, const Tensor &b) {
  check_mm(a, b, "self", "mat2");
  return mm_into(out, a, b, nullptr, 0, 1);
}

void check_addmm(const Tensor &self, const Tensor &m1, const Tensor &m2) {
  TORCH_CHECK(m1.dim() == 2, "mat1 must be a matrix, got ", m1.dim(), "-D tensor");
  TORCH_CHECK(m2.dim() == 2, "mat2 must be a matrix, got ", m2.dim(), "-D tensor");
  TORCH_CHECK(m1.size(1) == m2.size(0), "mat1 and mat2 shapes cannot be multiplied (", m1.size(0), "x", m1.size(1),
              " and ", m2.size(0), "x", m2.size(1), ")");
  check_same_dtype(m1, m2, "mat1 and mat2");
  check_same_dtype(self, m1, "self and mat2");
  TORCH_CHECK(at::is_expandable_to(self.sizes(), {m1.size(0), m2.size(1)}), "The expanded size of self ",
              self.sizes(), " must match the output size ", c10::IntArrayRef{m1.size(0), m2.size(1)});
}

Tensor addmm_into(Tensor out, const Tensor &self, const Tensor &m1, const Tensor &m2, const Scalar &beta,
                  const Scalar &alpha) {
  check_addmm(self, m1, m2);
  // In place the GEMM reads bias and writes C through the same memory,
  // element by element after the full dot product, which is safe; but self
  // cannot grow to the output shape.
  if (out.is_same(self)) {
    TORCH_CHECK(self.sizes() == c10::IntArrayRef({m1.size(0), m2.size(1)}), "addmm_: self must have the output shape");
    at::assert_no_internal_overlap(self);  // as the CPU's addmm_ (an expanded self would alias its results)
  }
  return mm_into(out, m1, m2, &self, beta, alpha);
}

// ATen's bmm/baddbmm meta checks the shapes only; the result takes
// batch2's dtype, and the CPU's kernel compares the operands' dtypes only
// when it has products to compute (an empty result, or K = 0, takes mixed
// dtypes: einsum and matmul of empty operands too).
void check_bmm(const Tensor &a, const Tensor &b) {
  TORCH_CHECK(a.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(b.size(0) == a.size(0) && b.size(1) == a.size(2), "Expected size for first two dimensions of batch2 "
              "tensor to be: [", a.size(0), ", ", a.size(2), "] but got: [", b.size(0), ", ", b.size(1), "].");
  // the CPU's kernel dispatches on batch1's dtype, then reads batch2 as it
  check_gemm_dtype(a, a.size(0) * a.size(1) * b.size(2), a.size(2), "bmm");
  if (a.size(0) * a.size(1) * b.size(2) != 0 && a.size(2) != 0) check_same_dtype(a, b, "batch1 and batch2");
}
Tensor &bmm_into(Tensor &out, const Tensor &a, const Tensor &b, const Tensor *bias, const Scalar &beta,
                 const Scalar &alpha) {
  c10::DeviceGuard guard(a.device());
  std::vector<int64_t> shape{a.size(0), a.size(1), b.size(2)};
  if (!out.defined()) {
    out = at::empty(shape, b.options());
  } else {
    out.resize_(shape);
  }
  Tensor bias3;
  if (bias && bias->defined() && !scalar_is_zero(beta)) {
    bias3 = bias->expand(shape);
  }
  if (a.size(2) == 0) {  // no product (mixed dtypes allowed)
    fill_k0(out, bias3, beta);
    return out;
  }
  if (cpu_skips_product(a, alpha, true, a.size(1) * a.size(2) * b.size(2))) {
    fill_without_product(out, bias3, beta);
    return out;
  }
  launch_gemm(out, a, b, bias3, alpha, beta);
  return out;
}
Tensor bmm_only_into(Tensor out, const Tensor &a, const Tensor &b) {
  check_bmm(a, b);
  check_gemm_out(out, Tensor(), b.scalar_type());
  return bmm_into(out, a, b, nullptr, 0, 1);
}
Tensor baddbmm_into(Tensor out, const Tensor &self, const Tensor &a, const Tensor &b, const Scalar &beta,
                    const Scalar &alpha) {
  // ATen's baddbmm meta: self must expand to the result, and have batch1's
  // dtype, before the shape checks of the batches
  (void)at::expand_size(self, {a.size(0), a.size(1), b.size(2)}, "baddbmm");
  TORCH_CHECK(self.dtype() == a.dtype(), "Input dtypes must be the same, got: input ", self.dtype(), ", batch1: ",
              a.dtype(), ", batch2: ", b.dtype());
  check_bmm(a, b);
  check_gemm_out(out, self, b.scalar_type());
  return bmm_into(out, a, b, &self, beta, alpha);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_VARIANTS(m, matmul_into, "mm", nullptr, "mm.out");
  NEURON_VARIANTS(m, addmm_into, "addmm", "addmm_", "addmm.out");
  NEURON_VARIANTS(m, bmm_only_into, "bmm", nullptr, "bmm.out");
  NEURON_VARIANTS(m, baddbmm_into, "baddbmm", "baddbmm_", "baddbmm.out");
}

}  // namespace torch_neuronx
