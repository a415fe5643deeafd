// The GEMM family's glue: mm, addmm, bmm, baddbmm, addbmm. Checks as ATen's meta
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
// elementwise ops: the shapes where the CPU's BLAS kernel keeps the plain
// sum of the products (the same inf/NaN pattern as these four sums). That
// kernel scales one operand by alpha (measured: the one it gets as BLAS's
// 'a', alpha_on_b: our B) unless alpha is 1 or -1, and adds a bias it scales
// unless beta == 1.
// alpha_after: the sum times alpha (a complex product even for -1; none
// for 1) instead of an operand (MKL's AVX-512 cgemm adding a beta == 1
// bias, cpu_complex_mm_path).
void complex_gemm_blas(const Tensor &c, const Tensor &a, const Tensor &b, const Tensor &bias, const Scalar &alpha,
                       const Scalar &beta, bool alpha_on_b, bool alpha_after = false) {
  Tensor a1 = a.resolve_conj().resolve_neg(), b1 = b.resolve_conj().resolve_neg();
  c10::complex<double> al = alpha.toComplexDouble();
  bool alpha_one = al == c10::complex<double>(1, 0), alpha_minus_one = al == c10::complex<double>(-1, 0);
  if (alpha_after) alpha_minus_one = false;
  if (!alpha_one && !alpha_minus_one && !alpha_after) {
    if (alpha_on_b) b1 = b1.mul(alpha);
    else a1 = a1.mul(alpha);
  }
  Tensor ar = at::view_as_real(a1), br = at::view_as_real(b1);
  Tensor a0 = ar.select(-1, 0), ai = ar.select(-1, 1), b0 = br.select(-1, 0), bi = br.select(-1, 1);
  Tensor re = at::bmm(a0, b0).sub_(at::bmm(ai, bi));
  Tensor im = at::bmm(a0, bi).add_(at::bmm(ai, b0));
  Tensor t = at::complex(re, im);
  if (alpha_minus_one) t = t.neg();  // MKL negates the sum (measured) rather than scaling an operand
  if (alpha_after && !alpha_one) t = t.mul(alpha);
  if (bias.defined()) {
    bool beta_one = !beta.isComplex() ? beta.toDouble() == 1.0 : beta.toComplexDouble() == c10::complex<double>(1, 0);
    // part by part, as BLAS adds: a complex add multiplies its other operand
    // by alpha = 1 + 0i, which turns -inf + 0i into -inf + NaN i
    Tensor y = beta_one ? bias : bias.mul(beta);
    at::view_as_real(t).add_(at::view_as_real(y.resolve_conj().resolve_neg()));
  }
  c.copy_(t);
}

// Which of the CPU's complex GEMM paths a product takes (its BLAS kernel:
// CX_BLAS_ALPHA_A / _B, by the operand it scales; otherwise where alpha
// goes, nrt_cgemm_alpha),
// as ATen hands it to MKL's cgemm and as MKL then splits by size (measured:
// complex64 mm of every shape up to 8 in each dim and both layouts of each
// operand, against inf/NaN parts). ATen's addmm_impl_cpu_ picks the
// column-major problem: C^T = B^T A^T (a row-major result: 'a' is our B, m
// = N) unless the result is a column (N == 1), and an operand's 'T' flag
// from its strides. MKL takes its blocked kernel from m >= 4, n >= 2, k >= 4;
// below that it runs the reference BLAS loops: 'a' transposed sums the
// products and multiplies by alpha (even alpha == 1, so inf + inf i turns
// into NaN + NaN i), 'a' not transposed adds (alpha * b_lj) * a_il for
// each l. Two measured exceptions: k == 1 with a row-major result and n >= 2
// scales 'b' whatever 'a' is, and m == n == 1 follows 'b' instead of 'a' (its 'T'
// scales 'a'). With n == 1 (*gemv) MKL's loop adds a beta == 1 bias as
// is (measured; as its gemv). 2-d views (one batch entry).
constexpr int CX_BLAS_ALPHA_A = -1, CX_BLAS_ALPHA_B = -2, CX_BLAS_ALPHA_AFTER = -3;
// sgemm (float32, measured as above on 8100 shapes up to 64 x 64 x 64 and
// three layouts per operand, each row of A holding 3e38 and alpha = 0.5):
// the same paths, except that with 'a' transposed the blocked kernel
// takes m >= 12, n >= 4, k >= 2 instead.
struct BlasShape {
  int64_t m, n, k;
  bool ta, tb, tc;  // tc: BLAS computes C^T = B^T A^T ('a' is our B)
};
int cpu_complex_mm_path(const Tensor &c, const Tensor &a, const Tensor &b, bool *gemv, bool sgemm = false,
                        BlasShape *shape = nullptr, bool bias_beta_one = false) {
  const int64_t M = c.size(0), N = c.size(1), K = a.size(1);
  auto cs = c.strides();
  bool tc;
  if (cs[0] == 1 && (N == 1 || cs[1] >= std::max<int64_t>(1, M))) tc = false;
  else if (cs[1] == 1 && (M == 1 || cs[0] >= std::max<int64_t>(1, N))) tc = true;
  else tc = false;
  const int64_t m = tc ? N : M, n = tc ? M : N, k = K;
  const Tensor &m1 = tc ? b : a, &m2 = tc ? a : b;  // BLAS's 'a' and 'b'
  int r = tc ? 1 : 0, q = tc ? 0 : 1;                // their (row, col) stride in BLAS's column-major terms
  auto s1 = m1.strides(), s2 = m2.strides();
  bool ta, tb;
  if (s1[r] == 1 && s1[q] >= std::max<int64_t>(1, m)) ta = false;
  else if (s1[q] == 1 && s1[r] >= std::max<int64_t>(1, k)) ta = true;
  else ta = !tc;  // ATen copies it contiguous
  if (s2[r] == 1 && s2[q] >= std::max<int64_t>(1, k)) tb = false;
  else if (s2[q] == 1 && s2[r] >= std::max<int64_t>(1, n)) tb = true;
  else tb = !tc;
  *gemv = n == 1;
  if (shape) *shape = BlasShape{m, n, k, ta, tb, tc};
  const int blas_kernel = tc ? CX_BLAS_ALPHA_B : CX_BLAS_ALPHA_A;
  // alpha on BLAS's 'b' / 'a' element, in our operands' names
  const int on_b = tc ? NRT_CGEMM_ALPHA_A : NRT_CGEMM_ALPHA_B, on_a = tc ? NRT_CGEMM_ALPHA_B : NRT_CGEMM_ALPHA_A;
  if (!sgemm && nrt_kernels_host_blas() == NRT_HOST_BLAS_INTEL_AVX512) {
    // MKL's AVX-512 cgemm/zgemm split otherwise (measured on an Intel
    // Xeon: complex64 and complex128 mm, every shape up to 12 x 12 x 8 and
    // random ones up to 150, all four transposes, against inf/NaN parts).
    // The blocked kernel: m >= 2, n >= 4, k >= 2, or with only 'a'
    // transposed n >= 2 and m >= 8 (zgemm: 12). Below that, 'a' transposed
    // sums then scales, 'a' not transposed scales 'b', as does k == 1.
    // One column of C (n == 1, any k) follows 'a' the same way; one row
    // (m == 1) scales 'a' if 'b' is transposed, else sums then scales, as
    // does a 1 x 1 result unless 'b' is transposed (then 'a', any k: 21101-1726015,
    // k = 1 with a strided 1 x 1 'b').
    // The vector cases were probed with every stride ATen tells apart
    // (a unit leading dimension makes a vector count as transposed).
    // With a bias added as is (beta == 1) cgemm takes a small kernel of
    // its own for m and n in 3..10 and k in 2..10, which scales the sum by
    // alpha (zgemm splits otherwise there, not followed). The loops' bias: as is
    // for beta == 1 in a single column (n == 1), else times beta (a
    // complex product even for 1).
    if (m == 1 && n == 1) return !tb ? NRT_CGEMM_ALPHA_AFTER : on_a;
    if (m == 1) {
      *gemv = true;
      return tb ? on_a : NRT_CGEMM_ALPHA_AFTER;
    }
    if (n == 1) return ta ? NRT_CGEMM_ALPHA_AFTER : on_b;
    if (k == 1) return on_b;
    if (bias_beta_one && a.scalar_type() == at::kComplexFloat && std::min(m, n) >= 3 && std::max({m, n, k}) <= 10)
      return CX_BLAS_ALPHA_AFTER;
    if (ta && !tb) return n >= 2 && m >= (a.scalar_type() == at::kComplexDouble ? 12 : 8) ? blas_kernel
                                                                                       : NRT_CGEMM_ALPHA_AFTER;
    if (n >= 4) return blas_kernel;
    return ta ? NRT_CGEMM_ALPHA_AFTER : on_b;
  }
  bool blocked = sgemm && ta ? m >= 12 && n >= 4 && k >= 2 : m >= 4 && n >= 2 && k >= 4;
  if (blocked) return blas_kernel;
  if (m == 1 && (n == 1 || !sgemm)) {
    *gemv = true;
    return tb ? on_a : NRT_CGEMM_ALPHA_AFTER;
  }
  // sgemm with k == 1 scales 'b' for a column-major C too where both m and
  // n are at least 2 (measured: 243 of 243 layouts, fuzz 9301-10022:
  // addbmm_ into a strided self, whose addmm_ steps run on a column-major copy)
  // (and with m == 1 there, 'a': 27 of 27 layouts for a 1 x 4 result)
  if (sgemm && k == 1 && m == 1 && n >= 2 && !tc) return on_a;
  if (k == 1 && (tc || !sgemm || m >= 2) && n >= 2) return on_b;
  return ta ? NRT_CGEMM_ALPHA_AFTER : on_b;
}

// The CPU's path for a batched product (bmm_out_or_baddbmm_): ATen's own
// loop below 400 multiply-adds per batch entry (the plain sum for bmm,
// alpha * sum + beta * self for baddbmm), else the 2-d choice per entry.
// shape: BLAS's view of an entry, where the 2-d choice is made.
int cpu_complex_path(const Tensor &c, const Tensor &a, const Tensor &b, bool batched, bool has_self, bool *gemv,
                     bool bias_beta_one, BlasShape *shape) {
  *gemv = false;
  if (batched && a.size(1) * a.size(2) * b.size(2) < 400)
    return has_self ? NRT_CGEMM_ALPHA_AFTER : NRT_CGEMM_ALPHA_NONE;
  return cpu_complex_mm_path(c.select(0, 0), a.select(0, 0), b.select(0, 0), gemv, false, shape, bias_beta_one);
}

// Complex C = A @ B with alpha/beta where the CPU's path puts them: its
// BLAS kernel as four real GEMMs, its other loops in the CGEMM kernel.
void launch_cgemm(const Tensor &c, const Tensor &a, const Tensor &b, const Tensor &bias, const Scalar &alpha,
                  const Scalar &beta, int path, bool gemv, bool blas = false, int lanes = 0);
void complex_gemm(const Tensor &c, const Tensor &a, const Tensor &b, const Tensor &bias, const Scalar &alpha,
                  const Scalar &beta, bool batched, bool has_self) {
  bool gemv;
  BlasShape s{};  // set where the 2-d choice is made (not ATen's small-batch loop)
  bool beta_one = !beta.isComplex() ? beta.toDouble() == 1.0 : beta.toComplexDouble() == c10::complex<double>(1, 0);
  int path = cpu_complex_path(c, a, b, batched, has_self, &gemv, bias.defined() && beta_one, &s);
  if (path < 0)
    return complex_gemm_blas(c, a, b, bias, alpha, beta, path == CX_BLAS_ALPHA_B, path == CX_BLAS_ALPHA_AFTER);
  bool aten_loop = batched && a.size(1) * a.size(2) * b.size(2) < 400;
  // MKL's AMD loops scale a beta != 1 bias in a pass of their own, its
  // AVX-512 ones multiply it in place (measured, cpu_complex_mm_path)
  bool intel = nrt_kernels_host_blas() == NRT_HOST_BLAS_INTEL_AVX512;
  bool beta_pass = !aten_loop && !intel;
  // ATen's _baddbmm_mkl_ (from 400 multiply-adds per entry, each entry
  // contiguous or transposed, the result contiguous) hands the batch to
  // MKL's batched cgemm, which on Intel AVX-512 hosts takes its blocked
  // kernel for k == 1 too, where m >= 2 and n >= 4 (the per-entry cgemm
  // takes its k == 1 loop there; probed: 14 shapes up to 400 x 1 x 1, the
  // blocked kernel exactly where m >= 2, n >= 4): 21101-1807477's
  // (-1e18 - inf i) (-3 + 0i) is NaN + inf i there, not NaN + NaN i
  // (576 random edge-valued batches of four layouts, alpha 1 / 2 /
  // 0.5 + i / -1 and beta none / 1 / 0.5 agree).
  auto item_ok = [](const Tensor &t) {
    return (t.stride(2) == 1 && t.stride(1) == t.size(2)) || (t.stride(1) == 1 && t.stride(2) == t.size(1));
  };
  bool mkl_batch = batched && !aten_loop && intel && item_ok(a) && item_ok(b) && c.is_contiguous();
  if (mkl_batch && a.size(2) == 1 && s.m >= 2 && s.n >= 4)
    return complex_gemm_blas(c, a, b, bias, alpha, beta, s.tc, false);
  // Nor does the batched path add a beta == 1 bias as is in one column,
  // as the per-entry gemv does: it multiplies, (1 + 0i) (-0 + inf i) is
  // NaN + inf i (baddbmm of 400 x 1 x 1 entries, alpha 1 and 0.5 + i: 5 of 5
  // random edge-valued batches agree, 0 before)
  if (mkl_batch) gemv = false;
  // One column of BLAS's C (one row of ours where BLAS computes C^T, as
  // for x @ W^T and F.linear of a vector) from a row-major 'a' of two or
  // more rows: MKL's AVX-512 cgemv/zgemv 't' sums each row in one zmm of
  // lanes, then in halves (20101-2248090: +-1e18 j products that cancel
  // there absorb the row's small terms, where a sum in k order keeps them)
  bool lanes = !aten_loop && intel && path == NRT_CGEMM_ALPHA_AFTER && s.n == 1 && s.m >= 2 && s.ta;
  launch_cgemm(c, a, b, bias, alpha, beta, path, gemv, beta_pass,
               lanes ? (a.scalar_type() == at::kComplexFloat ? 8 : 4) : 0);
}

// The CGEMM kernel with the CPU path `path` (nrt_cgemm_alpha); gemv: a
// beta == 1 bias is added as is after an alpha-scaled sum; blas: MKL's
// gemm loops, which scale the bias by beta in a pass of their own first.
void launch_cgemm(const Tensor &c, const Tensor &a, const Tensor &b, const Tensor &bias, const Scalar &alpha,
                  const Scalar &beta, int path, bool gemv, bool blas, int lanes) {
  Tensor ar = a.resolve_conj().resolve_neg(), br = b.resolve_conj().resolve_neg();
  // an out= that shares memory with A or B gets the result after the
  // launch (the kernel stores each element once it has read its row and
  // column, so a bias at C's own place is fine)
  bool aliased = c.is_alias_of(ar) || c.is_alias_of(br);
  Tensor out = aliased ? at::empty_like(c, at::MemoryFormat::Contiguous) : c;
  nrt_launch d = new_launch(NRT_OP(CGEMM), {c.size(0), c.size(1), c.size(2), a.size(2)});
  d.noutputs = 1;
  d.ninputs = bias.defined() ? 3 : 2;
  d.compute_dtype = to_nrt_dtype(a.scalar_type());
  set_operand(d.operands[0], out, {0, 1, 2});
  set_operand(d.operands[1], ar, {0, 1, 2});
  set_operand(d.operands[2], br, {0, 1, 2});
  Tensor bias_r;
  if (bias.defined()) {
    bias_r = bias.resolve_conj().resolve_neg();
    set_operand(d.operands[3], bias_r, {0, 1, 2});
  }
  d.scalars[0] = checked_scalar(alpha, a.scalar_type(), &d.scalars[1]);
  d.scalars[2] = checked_scalar(beta, a.scalar_type(), &d.scalars[3]);
  d.params[0] = path;
  // an expanded in-place self (baddbmm_, below 400 multiply-adds: ATen's
  // loop) is read and written through its aliases in (batch, row, column)
  // order, each step seeing the last one's value: one thread, in that order
  d.params[1] = at::has_internal_overlap(out) == at::MemOverlap::Yes;
  d.params[2] = gemv;
  d.params[3] = blas && !gemv;
  d.aux[0] = lanes;
  enqueue(c.device().index(), d);  // as is: CGEMM reads complex operands itself
  if (aliased) c.copy_(out);
}

// alpha == 0: BLAS does not read A and B, so a NaN or inf in them stays out
// of the result (C = beta * bias). The CPU calls BLAS for float32/float64/complex
// addmm (so addmv and addbmm too) and for baddbmm from 400 multiply-adds
// per batch (bfloat16 there too where oneDNN takes the whole batch: a CPU
// with AVX-512 BW/VL/DQ, ATen's mkldnn_bf16_device_check, and more than
// 16^3 multiply-adds in all); its own loops (16-bit addmm, smaller
// baddbmm, float16 baddbmm, bfloat16 baddbmm of at most 16^3 in all or on
// an AVX2-only CPU) multiply the product by 0, NaN included, as the
// kernel does.
bool cpu_bf16_blas() {
  static const bool has = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512dq");
  return has;
}

// Whether oneDNN takes a bfloat16 batched product whole: more than 16^3
// multiply-adds in all, on a CPU with its bfloat16 support.
bool cpu_bf16_whole_batch(at::ScalarType t, int64_t total_macs) {
  return t == at::kBFloat16 && cpu_bf16_blas() && total_macs > 4096;
}

bool cpu_skips_product(const Tensor &a, const Scalar &alpha, bool batched, int64_t macs) {
  if (!scalar_is_zero(alpha)) return false;
  at::ScalarType t = a.scalar_type();
  bool blas = t == at::kFloat || t == at::kDouble || t == at::kComplexFloat || t == at::kComplexDouble;
  if (!batched) return blas;
  return macs >= 400 && (blas || cpu_bf16_whole_batch(t, a.size(0) * macs));
}

// C = beta * bias (bias undefined: beta is 0 or there is none), the result of
// a product the CPU skips.
void fill_without_product(Tensor &out, const Tensor &bias, const Scalar &beta) {
  // BLAS leaves C alone for beta == 1 (a complex 1 * (inf + inf i) would be NaN)
  bool beta_one = !beta.isComplex() ? beta.toDouble() == 1.0 : beta.toComplexDouble() == c10::complex<double>(1, 0);
  if (bias.defined()) out.copy_(beta_one ? bias : bias.mul(beta));
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
// batched: bmm/baddbmm (the CPU's small-batch loop applies), has_self:
// baddbmm, whose loop scales the sum by alpha. order (nrt_gemm_order, real
// floating types): the packed kernels, or the CPU's plain loops with alpha
// where they put it; a C whose elements share memory (an expanded in-place
// self) is then computed in the CPU's element order.
void launch_gemm(const Tensor &c, const Tensor &a, const Tensor &b, const Tensor &bias, const Scalar &alpha,
                 const Scalar &beta, bool batched = false, bool has_self = false, int order = NRT_GEMM_PACKED,
                 bool fused = false, bool bias_last = false) {
  if (c.numel() == 0) return;
  if (a.is_complex()) {
    (void)scalar_in(a, alpha);
    (void)scalar_in(a, beta);
    return complex_gemm(c, a, b, bias, alpha, beta, batched, has_self);
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
  if (order == NRT_GEMM_PACKED) d.params[3] = bias_last;
  if (order != NRT_GEMM_PACKED && a.is_floating_point()) {
    d.params[0] = order;
    d.params[1] = at::has_internal_overlap(c) == at::MemOverlap::Yes;
    d.params[2] = fused;
    d.params[3] = bias_last;
    f64 = false;  // the loops accumulate float64 in double, as the CPU does
  }
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

// MKL's sgemm below m 12 or n 4 (BLAS terms) runs loops without fused
// multiply-adds (measured on this host: 0.3 * 3e38 - 0.3 * 3e38 is 0 there,
// the rounding error of the first product from m 12 and n 4 on, in every
// layout): 'a' transposed sums each output's products in k order and
// scales the sum (as an 8-lane dot when 'b' is not transposed and k >= 8;
// its lanes also depend on the rows' alignment, not followed: a row
// starting off a 32-byte boundary differs in about 5% of crafted
// cases), otherwise C (times beta) first and then each product with
// alpha on the operand cpu_complex_mm_path names, in k order. The GEMM's
// loop orders replay them where the work is small (the loops are scalar);
// elsewhere the packed kernels (fused, C added to the finished sum).
int sgemm_loop_order(int path, const BlasShape &s) {
  if ((s.m >= 12 && s.n >= 4) || s.m * s.n * s.k > 65536) return NRT_GEMM_PACKED;
  if (nrt_kernels_host_blas() == NRT_HOST_BLAS_INTEL_AVX512 && s.m >= 2 && s.n >= 2) return NRT_GEMM_PACKED;
  // one column: MKL's sgemv (launch_sgemv_t for 'a' along k; its 'n' is not
  // followed); a 1 x 1 result runs the loops (measured: C = beta * y, then
  // (alpha * a_k) * b_k added in k order, 500 of 500 crafted addmm, K < 60)
  if (s.n == 1 && s.k >= 8 && s.m != 1) return NRT_GEMM_PACKED;
  if (path == CX_BLAS_ALPHA_A || path == NRT_CGEMM_ALPHA_A) return NRT_GEMM_LOOP_ALPHA_A;
  if (path == CX_BLAS_ALPHA_B || path == NRT_CGEMM_ALPHA_B) return NRT_GEMM_LOOP_ALPHA_B;
  return s.ta && !s.tb && s.k >= 8 ? NRT_GEMM_LOOP_DOT8 : NRT_GEMM_LOOP_AFTER;
}

// MKL's sgemv 't' (GEMM SGEMV_T, kernels/gemm/sgemv.c): y [m] = alpha * mat
// [m, k] @ vec [k] + beta * bias, the order the CPU takes for float32 mv /
// addmv of a row-major matrix and mm / addmm with one output column (or
// row) whose BLAS 'a' runs along k. MKL's order follows the addresses of
// mat's rows and of vec (modulo 16 bytes), so mat and vec are the tensors
// ATen hands to BLAS: copied contiguous (a fresh block, aligned as the
// CPU's fresh copy) where ATen copies them, as is otherwise. A strided
// vector is copied too: mm's MKL reads it through an aligned buffer, and
// mv's sums the rows after the blocks in an order of its own (SGEMV_T p2).
bool sgemv_t_operands(Tensor &mat, Tensor &vec, bool copy_mat, bool copy_vec) {
  if (mat.size(1) < 2) return false;
  if (copy_mat) mat = mat.clone(at::MemoryFormat::Contiguous);
  if (copy_vec) vec = vec.clone(at::MemoryFormat::Contiguous);
  return mat.stride(1) == 1 && vec.stride(0) == 1;
}
// strided_mv: vec is a contiguous copy of mv's strided vector (SGEMV_T p2,
// passed as launch_gemm's `fused`), whose rows after the blocks MKL's gemv
// sums in an order of its own
void launch_sgemv_t(const Tensor &y, const Tensor &mat, const Tensor &vec, const Tensor &bias, const Scalar &alpha,
                    const Scalar &beta, bool strided_mv = false) {
  const int64_t m = mat.size(0), k = mat.size(1);
  Tensor b3 = bias.defined() ? bias.unsqueeze(0).unsqueeze(2) : bias;
  // MKL's AVX-512 sgemv 't' on Intel hosts (SGEMV_T p3, kernels/gemm/sgemv.c:
  // rows one at a time, so up to 8k multiply-adds, 2-4x the CPU's time
  // there; above, the Zen order's vector kernel)
  bool intel = nrt_kernels_host_blas() == NRT_HOST_BLAS_INTEL_AVX512 && m * k <= 8192;
  launch_gemm(y.view({1, m, 1}), mat.unsqueeze(0), vec.view({1, k, 1}), b3, alpha, beta, false, false,
              NRT_GEMM_LOOP_SGEMV_T, strided_mv, intel);
}

// MKL's AVX-512 sgemv 'n' (Intel hosts): y [m] = beta * bias + alpha * mat
// [m, k] @ vec [k], mat of unit stride along m, alpha on vec's element;
// below 16 outputs each product fused into y in k order, from 16 in blocks
// of 8 (GEMM SGEMV_N8, kernels/gemm/loop.c). Measured with rooted triples
// for mm with one row or one column of C and for mv. Up to 64k
// multiply-adds: these loops are scalar.
bool intel_sgemv_n(int64_t m, int64_t k) {
  return nrt_kernels_host_blas() == NRT_HOST_BLAS_INTEL_AVX512 && m >= 2 && m * k <= 65536;
}
void launch_sgemv_n(const Tensor &y, const Tensor &mat, const Tensor &vec, const Tensor &bias, const Scalar &alpha,
                    const Scalar &beta) {
  const int64_t m = mat.size(0), k = mat.size(1);
  bool n8 = m >= 16;
  // y^T = vec^T mat^T: the loops scale their A operand's element by alpha
  launch_gemm(y.view({1, 1, m}), vec.reshape({1, 1, k}), mat.t().unsqueeze(0),
              bias.defined() ? bias.reshape({1, 1, m}) : bias, alpha, beta, false, false,
              n8 ? NRT_GEMM_LOOP_SGEMV_N8 : NRT_GEMM_LOOP_ALPHA_A, !n8);
}

// The CPU computes bfloat16 products of at most 16^3 multiply-adds (larger
// ones go to oneDNN: ATen's mkldnn checksize and mkldnn_bf16_gemm) and
// every float16 product (oneDNN takes float16 only on CPUs with
// AVX512-FP16 or AMX-FP16, which the CPUs we follow lack) in ATen's cpublas
// loops, in float, chosen by BLAS's transposes (cpu_complex_mm_path's
// view of the problem): 'N' 'N' and 'T' 'T' sum each output's products in
// 4 partials, 'T' 'N' as ATen's vectorised dot, both then C = fma(beta,
// bias, alpha * sum); 'N' 'T' (gemm_transb_) starts from beta * bias in
// float and fuses each product, alpha on BLAS's 'b', into it in k order.
// Measured on the installed build: 0 of 560 crafted bfloat16 addmm
// (edge values, 3 layouts per operand, alpha/beta 0.3..2) differ.
// Above 64k multiply-adds (float16, or bfloat16 on a CPU without oneDNN's
// bfloat16) the packed kernels stay: the loops are scalar.
bool cpu_reduced_loops(at::ScalarType t, int64_t macs) {
  if (t == at::kBFloat16) return macs <= 4096 || (!cpu_bf16_blas() && macs <= 65536);
  return t == at::kHalf && macs <= 65536;
}
struct ReducedLoop {
  int order;
  bool fused;
};
ReducedLoop reduced_loop_order(const Tensor &c, const Tensor &a, const Tensor &b) {
  bool gemv;
  BlasShape s;
  cpu_complex_mm_path(c, a, b, &gemv, false, &s);
  if (!s.ta && s.tb) return {s.tc ? NRT_GEMM_LOOP_ALPHA_A : NRT_GEMM_LOOP_ALPHA_B, true};
  return {s.ta && !s.tb ? NRT_GEMM_LOOP_VDOT : NRT_GEMM_LOOP_SUM4, false};
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
  if (cpu_reduced_loops(a.scalar_type(), a.size(0) * a.size(1) * b.size(1))) {
    ReducedLoop r = reduced_loop_order(out, a, b);
    launch_gemm(out.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), bias3, alpha, beta, false, false, r.order, r.fused);
    return out;
  }
  // MKL's sgemm scales one operand by alpha before multiplying on most of
  // its paths (cpu_complex_mm_path), so alpha * a * b need not overflow
  // where a * b does (3e38 * 2 * 0.5 is 3e38, not inf); elsewhere it
  // scales the sum as the kernel does. alpha == +-1 scales exactly either way.
  if (a.scalar_type() == at::kFloat && !a.is_complex()) {
    double al = alpha.toDouble();
    bool gemv;
    BlasShape bs;
    int mkl_path = cpu_complex_mm_path(out, a, b, &gemv, true, &bs);
    // one output column in BLAS's terms with 'a' along k: MKL's sgemv 't'
    // (C^T = B^T A^T when the result is a row: 'a' is B^T, the vector A's row);
    // a 1 x 1 result takes another order there (a dot: 280 of 300 crafted
    // cases agree with sgemv's, alpha placed on neither operand), not followed
    if (bs.n == 1 && !bs.ta && intel_sgemv_n(bs.m, bs.k) && at::has_internal_overlap(out) != at::MemOverlap::Yes) {
      Tensor mat = bs.tc ? b.t() : a, vec = (bs.tc ? a.t() : b).select(1, 0), y = (bs.tc ? out.t() : out).select(1, 0);
      Tensor yb = bias3.defined() ? (bs.tc ? bias3.squeeze(0).t() : bias3.squeeze(0)).select(1, 0) : bias3;
      bool direct = y.is_contiguous() && !y.is_alias_of(mat) && !y.is_alias_of(vec);
      Tensor res = direct ? y : at::empty({y.size(0)}, y.options());
      launch_sgemv_n(res, mat, vec, yb, alpha, beta);
      if (!direct) y.copy_(res);
      return out;
    }
    // (on Intel AVX-512 hosts a 1 x 1 result with 'b' not transposed too)
    bool intel_dot = nrt_kernels_host_blas() == NRT_HOST_BLAS_INTEL_AVX512 && bs.m == 1 && !bs.tb;
    if (bs.n == 1 && (bs.m >= 2 || intel_dot) && bs.ta && bs.k >= 2 &&
        at::has_internal_overlap(out) != at::MemOverlap::Yes) {
      Tensor mat = bs.tc ? b.t() : a, vec = (bs.tc ? a.t() : b).select(1, 0), y = bs.tc ? out.t() : out;
      bool copy_mat = !(mat.stride(1) == 1 && mat.stride(0) >= std::max<int64_t>(1, bs.k));
      // ATen keeps BLAS's 'b' where either layout test passes (cpu_complex_mm_path)
      Tensor vb = bs.tc ? a : b;
      auto s2 = vb.strides();
      int r = bs.tc ? 1 : 0, q = bs.tc ? 0 : 1;
      bool keep_vec = (s2[r] == 1 && s2[q] >= std::max<int64_t>(1, bs.k)) || (s2[q] == 1 && s2[r] >= 1);
      // a strided vector: MKL's sgemm reads it through an aligned buffer of
      // its own (measured: rows after the blocks take the head of a 16-byte
      // aligned vector: 198 of 200 crafted mm, strides 2 and 3), as a fresh copy is
      if (sgemv_t_operands(mat, vec, copy_mat, !keep_vec || vec.stride(0) != 1)) {
        Tensor yb = bias3.defined() ? (bs.tc ? bias3.squeeze(0).t() : bias3.squeeze(0)).select(1, 0) : bias3;
        Tensor col = y.select(1, 0);
        bool direct = col.stride(0) == 1 && !col.is_alias_of(mat) && !col.is_alias_of(vec);
        Tensor res = direct ? col : at::empty({col.size(0)}, col.options());
        launch_sgemv_t(res, mat, vec, yb, alpha, beta);
        if (!direct) col.copy_(res);
        return out;
      }
    }
    int order = sgemm_loop_order(mkl_path, bs);
    if (order == NRT_GEMM_PACKED && nrt_kernels_host_blas() == NRT_HOST_BLAS_INTEL_AVX512 && bs.m >= 2 &&
        bs.n >= 2) {
      if (bs.k == 1 && at::has_internal_overlap(out) != at::MemOverlap::Yes) {
        // k == 1 scales BLAS's 'b' by alpha and, for beta == 1, fuses the
        // product into C; otherwise fma(beta, C, product) (measured: 20 of
        // 20 outputs each, 300 random shapes, four layouts, alpha 0.3..1.3)
        bool on_a = bs.tc;
        bool beta_one = bias3.defined() && beta.toDouble() == 1.0;
        if (beta_one) {
          launch_gemm(out.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), bias3, alpha, beta, false, false,
                      on_a ? NRT_GEMM_LOOP_ALPHA_A : NRT_GEMM_LOOP_ALPHA_B, true);
        } else {
          (void)scalar_in(a, alpha);
          launch_gemm(out.unsqueeze(0), (on_a ? a.mul(alpha) : a).unsqueeze(0), (on_a ? b : b.mul(alpha)).unsqueeze(0),
                      bias3, 1, beta, false, false, NRT_GEMM_PACKED, false, true);
        }
        return out;
      }
      // MKL's AVX-512 sgemm: C = fma(beta, bias, alpha * sum), the sum fused
      // in k order from 0 (measured: 0 of 54 shapes up to 20 differ with
      // finite values, alpha 0.3 / beta 0.7, 'a' not transposed)
      launch_gemm(out.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), bias3, alpha, beta, false, false,
                  NRT_GEMM_PACKED, false, true);
      return out;
    }
    if (order != NRT_GEMM_PACKED) {
      // MKL's AVX-512 one-row k == 1 loop fuses (alpha * a) * b into beta * C
      // (measured: 200 of 200 strided-self addmm_, beta 0 / 0.7 / 1), as does
      // its 1 x 1 loop with 'b' transposed, each product in k order (rooted
      // triples, C a leaf; with 'b' not transposed it takes sgemv 't', not
      // followed)
      bool fused = nrt_kernels_host_blas() == NRT_HOST_BLAS_INTEL_AVX512 && bs.m == 1 &&
                   (bs.k == 1 || (bs.n == 1 && bs.tb)) &&
                   (order == NRT_GEMM_LOOP_ALPHA_A || order == NRT_GEMM_LOOP_ALPHA_B);
      launch_gemm(out.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), bias3, alpha, beta, false, false, order, fused);
      return out;
    }
    int path = al == 1.0 || al == -1.0 ? NRT_CGEMM_ALPHA_AFTER : mkl_path;
    bool on_a = path == CX_BLAS_ALPHA_A || path == NRT_CGEMM_ALPHA_A;
    bool on_b = path == CX_BLAS_ALPHA_B || path == NRT_CGEMM_ALPHA_B;
    if (on_a || on_b) {
      (void)scalar_in(a, alpha);
      launch_gemm(out.unsqueeze(0), (on_a ? a.mul(alpha) : a).unsqueeze(0), (on_b ? b.mul(alpha) : b).unsqueeze(0),
                  bias3, 1, beta);
      return out;
    }
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
    // The CPU's addmm_ refuses an expanded self (it would alias its results)
    // except where it writes no product: an empty result is returned as is
    // and K = 0 with beta == 0 is zero_(), which takes aliases; with
    // products a bool self is refused by the kernel's dispatch first.
    bool no_write = self.numel() == 0 || (m1.size(1) == 0 && scalar_is_zero(beta));
    if (!no_write) {
      check_gemm_dtype(m1, self.numel(), m1.size(1), "addmm_impl_cpu_");
      at::assert_no_internal_overlap(self);
    }
  }
  return mm_into(out, m1, m2, &self, beta, alpha);
}

// ATen's bmm/baddbmm meta checks the shapes only; the result takes
// batch2's dtype, and the CPU's kernel compares the operands' dtypes only
// when it has products to compute (an empty result, or K = 0, takes mixed
// dtypes: einsum and matmul of empty operands too).
void check_bmm_shapes(const Tensor &a, const Tensor &b) {
  TORCH_CHECK(a.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(b.size(0) == a.size(0) && b.size(1) == a.size(2), "Expected size for first two dimensions of batch2 "
              "tensor to be: [", a.size(0), ", ", a.size(2), "] but got: [", b.size(0), ", ", b.size(1), "].");
}
// The kernel's checks, after the structured wrapper's out= / in-place dtype
// check (a bool self of baddbmm_ with a bfloat16 batch2 is that
// RuntimeError on the CPU, not the kernel's bool NotImplementedError).
void check_bmm_kernel(const Tensor &a, const Tensor &b) {
  // From 400 multiply-adds per batch entry the CPU's bmm compares the
  // dtypes before dispatching (a bool batch1 beside another dtype is that
  // RuntimeError, not the bool NotImplementedError); below, its kernel
  // dispatches on batch1's dtype, then reads batch2 as it
  bool products = a.size(0) * a.size(1) * b.size(2) != 0 && a.size(2) != 0;
  TORCH_CHECK(!(products && a.size(1) * a.size(2) * b.size(2) >= 400 && a.scalar_type() == at::kBool &&
                b.scalar_type() != at::kBool),
              "expected m1 and m2 to have the same dtype, but got: ", a.dtype().name(), " != ", b.dtype().name());
  check_gemm_dtype(a, a.size(0) * a.size(1) * b.size(2), a.size(2), "bmm");
  if (products) check_same_dtype(a, b, "batch1 and batch2");
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
  // From 400 multiply-adds the CPU computes an in-place self that is not
  // contiguous one batch entry at a time with addmm_, which refuses an
  // entry that overlaps itself (self expanded over rows or columns); one
  // expanded over the batch only is taken, each entry seeing the last
  // one's writes (20101-1952986); below 400, its loop takes either.
  // (A float16 or bfloat16 product oneDNN takes whole, on hosts with its
  // support, takes a self expanded within an entry too, with a result that
  // depends on its blocking and thread count, or a SIGFPE: refused here.)
  if (a.size(1) * a.size(2) * b.size(2) >= 400 && bias && bias->is_same(out) && out.size(0) > 0)
    at::assert_no_internal_overlap(out.select(0, 0));
  if (cpu_skips_product(a, alpha, true, a.size(1) * a.size(2) * b.size(2))) {
    fill_without_product(out, bias3, beta);
    return out;
  }
  // Below 400 multiply-adds per batch entry the CPU runs ATen's own loop
  // (baddbmm_cpu_kernel): r * beta + alpha * sum, the sum in k order with
  // each product rounded, an expanded in-place self read and written
  // through its aliases in (batch, row, column) order.
  const int64_t macs = a.size(1) * a.size(2) * b.size(2);
  if (macs < 400) {
    launch_gemm(out, a, b, bias3, alpha, beta, true, bias != nullptr, NRT_GEMM_LOOP_AFTER);
    return out;
  }
  // From 400 the CPU's bmm takes oneDNN for the whole batch where it can
  // (bfloat16 above 16^3 multiply-adds in all), else one addmm_ / mm per
  // entry: the 16-bit loops of mm_into for each, with one entry's layout.
  at::ScalarType t = a.scalar_type();
  bool whole_blas = cpu_bf16_whole_batch(t, a.size(0) * macs);
  if (out.numel() == 0) return out;
  if (!whole_blas && cpu_reduced_loops(t, a.size(0) * macs)) {
    ReducedLoop r = reduced_loop_order(out.select(0, 0), a.select(0, 0), b.select(0, 0));
    if (at::has_internal_overlap(out) != at::MemOverlap::Yes) {
      launch_gemm(out, a, b, bias3, alpha, beta, true, bias != nullptr, r.order, r.fused);
      return out;
    }
    // a self expanded over the batch: the CPU's addmm_ per entry (or
    // oneDNN's whole-batch loop, with one thread), each entry reading the
    // last one's result; one launch per entry, in order (the 16-bit dot
    // loops take no aliased C)
    for (int64_t i = 0; i < out.size(0); i++)
      launch_gemm(out.narrow(0, i, 1), a.narrow(0, i, 1), b.narrow(0, i, 1),
                  bias3.defined() ? bias3.narrow(0, i, 1) : bias3, alpha, beta, true, bias != nullptr, r.order,
                  r.fused);
    return out;
  }
  // float32: one addmm_ per entry on the CPU, so MKL's sgemm paths as in
  // mm_into (its loops for small entries, alpha on an operand), chosen from
  // the first entry's layout (every entry has it); one launch for the batch
  if (t == at::kFloat && a.size(0) > 0) {
    bool gemv;
    BlasShape bs;
    int mkl_path = cpu_complex_mm_path(out.select(0, 0), a.select(0, 0), b.select(0, 0), &gemv, true, &bs);
    int order = sgemm_loop_order(mkl_path, bs);
    if (order == NRT_GEMM_PACKED && nrt_kernels_host_blas() == NRT_HOST_BLAS_INTEL_AVX512 && bs.m >= 2 &&
        bs.n >= 2) {
      // MKL's AVX-512 sgemm: C = fma(beta, bias, alpha * sum), the sum fused
      // in k order from 0, as in mm_into
      launch_gemm(out, a, b, bias3, alpha, beta, true, bias != nullptr, NRT_GEMM_PACKED, false, true);
      return out;
    }
    if (order != NRT_GEMM_PACKED) {
      launch_gemm(out, a, b, bias3, alpha, beta, true, bias != nullptr, order);
      return out;
    }
    double al = alpha.toDouble();
    int path = al == 1.0 || al == -1.0 ? NRT_CGEMM_ALPHA_AFTER : mkl_path;
    bool on_a = path == CX_BLAS_ALPHA_A || path == NRT_CGEMM_ALPHA_A;
    bool on_b = path == CX_BLAS_ALPHA_B || path == NRT_CGEMM_ALPHA_B;
    if (on_a || on_b) {
      (void)scalar_in(a, alpha);
      launch_gemm(out, on_a ? a.mul(alpha) : a, on_b ? b.mul(alpha) : b, bias3, 1, beta, true, bias != nullptr,
                  NRT_GEMM_PACKED);
      return out;
    }
  }
  launch_gemm(out, a, b, bias3, alpha, beta, true, bias != nullptr, NRT_GEMM_PACKED);
  return out;
}
Tensor bmm_only_into(Tensor out, const Tensor &a, const Tensor &b) {
  check_bmm_shapes(a, b);
  check_gemm_out(out, Tensor(), b.scalar_type());
  check_bmm_kernel(a, b);
  return bmm_into(out, a, b, nullptr, 0, 1);
}
Tensor baddbmm_into(Tensor out, const Tensor &self, const Tensor &a, const Tensor &b, const Scalar &beta,
                    const Scalar &alpha) {
  // ATen's baddbmm meta: self must expand to the result, and have batch1's
  // dtype, before the shape checks of the batches
  (void)at::expand_size(self, {a.size(0), a.size(1), b.size(2)}, "baddbmm");
  TORCH_CHECK(self.dtype() == a.dtype(), "Input dtypes must be the same, got: input ", self.dtype(), ", batch1: ",
              a.dtype(), ", batch2: ", b.dtype());
  check_bmm_shapes(a, b);
  check_gemm_out(out, self, b.scalar_type());
  check_bmm_kernel(a, b);
  return bmm_into(out, a, b, &self, beta, alpha);
}

// ATen's addbmm_out: self expands to the result; the result is beta * self
// plus one addmm_ per batch entry in order, beta = 1 (an integer) after the
// first. Each entry's sum is rounded into the result before the next, so
// huge terms overflow or cancel per entry as on the CPU, and infinities
// meet the running result as there (one GEMM over the folded batch, [n,
// B*k] @ [B*k, p], sums across entries). addmm_ brings the CPU's refusals:
// an expanded in-place self, a bool result scaled by beta.
Tensor addbmm_into(Tensor out, const Tensor &self, const Tensor &b1, const Tensor &b2, const Scalar &beta,
                   const Scalar &alpha) {
  auto b_self = at::expand_size(self, {b1.size(1), b2.size(2)}, "addbmm_out");
  TORCH_CHECK(b1.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(b1.size(0) == b2.size(0), "batch1 and batch2 must have same number of batches, got ", b1.size(0),
              " and ", b2.size(0));
  TORCH_CHECK(b1.size(2) == b2.size(1), "Incompatible matrix sizes for bmm (", b1.size(1), "x", b1.size(2), " and ",
              b2.size(1), "x", b2.size(2), ")");
  c10::DeviceGuard guard(self.device());
  Tensor result = out.defined() ? out : at::empty({0}, self.options());
  result.resize_as_(*b_self);
  if (!scalar_is_zero(beta) && !result.is_same(*b_self)) result.copy_(*b_self);
  if (b1.size(0) == 0) return scalar_is_zero(beta) ? result.zero_() : result.mul_(beta);
  Scalar step_beta = beta;
  for (int64_t i = 0; i < b1.size(0); ++i) {
    result.addmm_(b1.select(0, i), b2.select(0, i), step_beta, alpha);
    step_beta = 1;
  }
  return result;
}

// Complex dot/vdot as the CPU's MKL cdotu/cdotc leave inf/NaN parts
// (measured on 1050 small probes each, all matched): the plain sum of full
// complex products, except that the imaginary part also takes 0 times the
// real part of one operand (x's for cdotu, y's for cdotc) for the elements
// outside its paired vector loop: the last one of an odd count on unit
// strides, every one on other strides (an inf there makes it NaN). An mm
// of 1 x n by n x 1 placed its NaNs elsewhere. Composed from native ops.
// MKL's AVX-512 cdotu/cdotc (Intel hosts) keep the plain sum (measured: an
// inf real part at any place, counts 1..33, strides 1 and 2).
Tensor complex_dot(const Tensor &a, const Tensor &b, bool conjugate_a) {
  const int64_t n = a.numel();
  Tensor r = (conjugate_a ? a.conj() : a).mul(b).sum();
  if (nrt_kernels_host_blas() == NRT_HOST_BLAS_INTEL_AVX512) return r;
  Tensor quirk_src = (conjugate_a ? b : a).resolve_conj();
  bool unit = n == 1 || (a.stride(0) == 1 && b.stride(0) == 1);  // ATen passes inc 1 for one element
  Tensor lanes = unit ? (n % 2 == 1 ? quirk_src.narrow(0, n - 1, 1) : quirk_src.narrow(0, 0, 0)) : quirk_src;
  if (lanes.numel() == 0) return r;
  Tensor zero_times_real = at::real(lanes).mul(0).sum();
  at::view_as_real(r).select(0, 1).add_(zero_times_real);
  return r;
}

// The CPU's dot checks in this order, then dispatches on the dtype, an empty
// input included: no bool or complex32 form.
Tensor dot_fn(const Tensor &a, const Tensor &b) {
  TORCH_CHECK(a.dim() == 1 && b.dim() == 1, "1D tensors expected, but got ", a.dim(), "D and ", b.dim(), "D tensors");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
              a.scalar_type(), " and ", b.scalar_type());
  TORCH_CHECK(a.numel() == b.numel(), "inconsistent tensor size, expected tensor [", a.numel(),
              "] and src [", b.numel(), "] to have the same number of elements, but got ", a.numel(), " and ",
              b.numel(), " elements respectively");
  TORCH_CHECK_NOT_IMPLEMENTED(a.scalar_type() != at::kBool && a.scalar_type() != at::kComplexHalf,
                              "\"dot\" not implemented for '", a.scalar_type(), "'");
  if (a.is_complex()) {
    // ATen's dot resolves conjugate views into vdot (cdotc) this way
    if (a.is_conj() && b.is_conj()) return complex_dot(a.conj(), b.conj(), false).conj();
    if (a.is_conj()) return complex_dot(a.conj(), b, true);
    if (b.is_conj()) return complex_dot(b.conj(), a, true);
    return complex_dot(a, b, false);
  }
  // float32 on an Intel AVX-512 host: MKL's sdot there, in its order
  // (kernels/gemm/sdot.c), for the increments ATen passes (1 and 1 for one
  // element); elsewhere, and for the other dtypes, a 1 x n by n x 1 product.
  if (a.scalar_type() == at::kFloat && nrt_kernels_host_blas() == NRT_HOST_BLAS_INTEL_AVX512 && a.numel() > 0 &&
      a.device() == b.device()) {
    c10::DeviceGuard guard(a.device());
    Tensor out = at::empty({}, a.options());
    bool unit = a.numel() == 1 || (a.stride(0) == 1 && b.stride(0) == 1);
    launch_gemm(out.view({1, 1, 1}), a.as_strided({1, 1, a.numel()}, {0, 0, a.stride(0)}),
                b.as_strided({1, b.numel(), 1}, {0, b.stride(0), 0}), Tensor(), 1, 0, false, false,
                NRT_GEMM_LOOP_SDOT, !unit);
    return out;
  }
  return a.unsqueeze(0).mm(b.unsqueeze(1)).reshape({});
}


// vdot conjugates its first argument; the CPU's is dot for real tensors
// (its checks and messages too).
Tensor vdot_fn(const Tensor &a, const Tensor &b) {
  if (!a.is_complex()) return dot_fn(a, b);
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "vdot : expected both vectors to have same dtype, but found ",
              a.scalar_type(), " and ", b.scalar_type());
  return dot_fn(a.is_complex() ? a.conj() : a, b);
}

}  // namespace

// Complex addmv (mat not empty, self not aliased to the result): ATen's
// addmv_out_cpu calls gemv itself, with its own layout test (a matrix with
// one column counts as column-major whatever its strides, where addmm's
// would not), and MKL's cgemv then places inf/NaN parts as the reference
// loops do: 'n' (column-major mat) adds (alpha * vec_j) * mat_ij to beta *
// self for each j, 't' sums each row's products and multiplies by alpha
// (even 1) and adds beta * self (beta == 1 too: 1 * (NaN + 1i) is NaN +
// NaN i, unlike addmm's n == 1 gemm). Measured against the CPU on
// one-row, one-column and small matrices of both layouts.
Tensor complex_addmv(const Tensor &self, const Tensor &mat, const Tensor &vec, const Scalar &beta,
                     const Scalar &alpha) {
  const int64_t m = mat.size(0), n = mat.size(1);
  (void)scalar_in(mat, alpha);
  (void)scalar_in(mat, beta);
  bool column_major = mat.stride(0) == 1 && (n == 1 || mat.stride(1) >= std::max<int64_t>(1, m));
  Tensor c = at::empty({1, m, 1}, vec.options());
  Tensor bias = scalar_is_zero(beta) ? Tensor() : self.expand({m}).unsqueeze(0).unsqueeze(2);
  launch_cgemm(c, mat.unsqueeze(0), vec.unsqueeze(0).unsqueeze(2), bias, alpha, beta,
               column_major ? NRT_CGEMM_ALPHA_B : NRT_CGEMM_ALPHA_AFTER, false);
  return c.view({m});
}

// Real addmv with a zero-stride (expanded) vector: BLAS refuses incx == 0,
// so ATen's gemv runs its own loops (float32/float64; the 16-bit types
// have gemv kernels of their own): 'n' for a column-major matrix (as
// complex_addmv decides) scales y by beta (left alone for 1, zeroed for 0)
// and adds (alpha * vec_j) * mat_ij for each j; 't' otherwise, beta * y +
// alpha * the row's sum. Products are rounded before they are added and
// alpha == 0 still multiplies (0 * inf is NaN there, where MKL's sgemv
// never reads the matrix).
// bfloat16 always takes ATen's gemv (CPUBlas' gemv<BFloat16>, no BLAS): 't'
// with a unit-stride vector, alpha 1 and beta 0 (torch.mv of a row-major
// matrix) is its fast path, one ATen vectorised dot per row (GEMM VDOT);
// other 't' calls sum each row's rounded products in order, then beta * y
// + alpha * sum with alpha, beta and beta * y in bfloat16 (its scalar_t).
// Measured with one-hot rows, +-3.4e38 pairs and 1.7 * y - 1.703125
// against the installed build. Its 'n' (a column-major matrix of more than
// one row) sums (alpha * vec_j) * mat_ij over j in float and adds the sum,
// rounded to bfloat16, to bf16(beta * y) (6058 of 6091 random rows, the
// rest one-row matrices, which take 't').
// float32 with a column-major matrix (MKL's sgemv 'n'): C = beta * y, then
// (alpha * vec_j) * mat_ij added for each j in order, unfused, as the
// loop's ALPHA_B (measured: 400 of 400 edge-valued addmv up to 200 x 60;
// fuzz 7103-83813: alpha 0.5 on a 4 x 1 matrix, inf where neuron scaled
// the sum), up to 64k multiply-adds (the loop is scalar).
bool addmv_takes_aten_gemv_loop(const Tensor &mat, const Tensor &vec) {
  at::ScalarType t = mat.scalar_type();
  bool column_major = mat.stride(0) == 1 && (mat.size(1) == 1 || mat.stride(1) >= std::max<int64_t>(1, mat.size(0)));
  bool sgemv_n = t == at::kFloat && column_major && vec.stride(0) > 0 && mat.numel() <= 65536;
  bool sgemv_t = t == at::kFloat && !column_major && vec.stride(0) > 0 && mat.size(1) >= 2;
  return (vec.stride(0) == 0 && (t == at::kFloat || t == at::kDouble)) || t == at::kBFloat16 || t == at::kHalf ||
         sgemv_n || sgemv_t;
}

Tensor addmv_aten_gemv_loop(const Tensor &self, const Tensor &mat, const Tensor &vec, const Scalar &beta,
                            const Scalar &alpha) {
  const int64_t m = mat.size(0), n = mat.size(1);
  bool column_major = mat.stride(0) == 1 && (n == 1 || mat.stride(1) >= std::max<int64_t>(1, m));
  Tensor c = at::empty({1, m, 1}, vec.options());
  Tensor bias = scalar_is_zero(beta) ? Tensor() : self.expand({m}).unsqueeze(0).unsqueeze(2);
  bool reduced = mat.scalar_type() == at::kBFloat16 || mat.scalar_type() == at::kHalf;
  bool half = mat.scalar_type() == at::kHalf;
  if (vec.stride(0) != 0 && mat.scalar_type() == at::kFloat && scalar_is_zero(alpha)) {
    fill_without_product(c, bias, beta);  // MKL's sgemv reads neither mat nor vec
    return c.view({m});
  }
  // float32 't' with a unit-stride vector: MKL's sgemv 't' on the matrix
  // ATen hands it (a contiguous copy unless its rows run along k with room)
  Tensor mv_mat = mat, mv_vec = vec;
  if (mat.scalar_type() == at::kFloat && !column_major && vec.stride(0) > 0 && n >= 2 &&
      sgemv_t_operands(mv_mat, mv_vec, !(mat.stride(1) == 1 && (m == 1 || mat.stride(0) >= std::max<int64_t>(1, n))),
                       vec.stride(0) != 1)) {
    launch_sgemv_t(c.view({m}), mv_mat, mv_vec, bias.defined() ? bias.view({m}) : bias, alpha, beta,
                   vec.stride(0) != 1);
    return c.view({m});
  }
  if (mat.scalar_type() == at::kFloat && column_major && vec.stride(0) > 0 && intel_sgemv_n(m, n)) {
    launch_sgemv_n(c.view({m}), mat, vec, bias.defined() ? bias.view({m}) : bias, alpha, beta);
    return c.view({m});
  }
  if (reduced && m == 1) column_major = false;
  int order = column_major ? NRT_GEMM_LOOP_ALPHA_B : NRT_GEMM_LOOP_AFTER;
  if (reduced && !column_major && vec.stride(0) == 1 && alpha.equal(1) && scalar_is_zero(beta))
    order = NRT_GEMM_LOOP_VDOT;
  auto to_scalar_t = [&](const Scalar &v) {
    return half ? Scalar(static_cast<double>(v.to<c10::Half>())) : Scalar(static_cast<double>(v.to<c10::BFloat16>()));
  };
  Scalar al = reduced ? to_scalar_t(alpha) : alpha;
  Scalar be = reduced ? to_scalar_t(beta) : beta;
  // (bias_last: ATen's gemv rounds beta * y to the 16-bit dtype first,
  // except float16's 't' with alpha == 1, which keeps it in float: 2 *
  // -65504 + 65505 is -65504 there, not -inf; measured on 300 random
  // row-major float16 addmv, alpha 1 / 0.3 / 2, beta 0.5 / 1 / 2 / -1.5)
  bool bias_last = reduced && order != NRT_GEMM_LOOP_VDOT && !(half && order == NRT_GEMM_LOOP_AFTER && alpha.equal(1));
  launch_gemm(c, mat.unsqueeze(0), vec.unsqueeze(0).unsqueeze(2), bias, al, be, false, false, order, false,
              bias_last);
  return c.view({m});
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPL(m, "dot", dot_fn);
  NEURON_IMPL(m, "vdot", vdot_fn);
  NEURON_VARIANTS(m, matmul_into, "mm", nullptr, "mm.out");
  NEURON_VARIANTS(m, addmm_into, "addmm", "addmm_", "addmm.out");
  NEURON_VARIANTS(m, bmm_only_into, "bmm", nullptr, "bmm.out");
  NEURON_VARIANTS(m, baddbmm_into, "baddbmm", "baddbmm_", "baddbmm.out");
  NEURON_VARIANTS(m, addbmm_into, "addbmm", "addbmm_", "addbmm.out");
}

}  // namespace torch_neuronx
