/* CGEMM: complex C[b] = alpha * A[b] @ B[b] + beta * bias[b], one output
 * element at a time, for the shapes where the CPU's result depends on the
 * order of its complex operations (inf/NaN parts cancel into NaN in some
 * orders and not in others). The large GEMMs stay four real GEMMs in the
 * glue: there the CPU's BLAS kernel keeps the plain sum, as those do.
 *
 * Every product is the textbook one (re = ar br - ai bi, im = ar bi + ai
 * br, no C99 Annex G recovery), accumulated in k order from zero, in the
 * precision of a part (float for complex64, as the CPU's single-precision
 * BLAS; double for complex128). p0 says where alpha goes, which is what
 * the CPU's paths differ in (the glue picks the path):
 *   CGEMM_ALPHA_NONE  C = sum (ATen's small bmm kernel; alpha and beta unused)
 *   CGEMM_ALPHA_AFTER C = alpha * sum + beta * bias (the reference BLAS 'T'
 *                     loops and ATen's small baddbmm kernel: alpha
 *                     multiplies even when it is 1, so inf + inf i turns
 *                     into NaN + NaN i)
 *   CGEMM_ALPHA_A / _B  C starts as beta * bias (0 when beta == 0, the bias
 *                     itself when beta == 1) and adds (alpha * a) * b or
 *                     a * (alpha * b) for each k (the reference BLAS 'N'
 *                     loops, which scale one operand's element by alpha)
 * s0/s1: alpha (re, im), s2/s3: beta (re, im). Scalar loop only: these
 * shapes are small in at least one dimension (the glue sends the rest to
 * the real GEMM), so the loop is both the kernel and its reference. */
#include <string.h>
#include "kernels/gemm/cgemm.h"
#include "kernels/common/common.h"
#include "nrt/ops/gemm.h"

typedef struct cgemm_job {
  const nrt_launch *l;
  int64_t M, N, K;
  int mode;
  bool bias;
} cgemm_job;

#define AT(o, b, i, j) ((char *)(o)->data + (b) * (o)->strides[0] + (i) * (o)->strides[1] + (j) * (o)->strides[2])

/* One loop body per part type: T is float or double. */
#define CGEMM_ELEMENT(T, NAME)                                                                              \
  static void NAME(const cgemm_job *jb, int64_t b, int64_t i, int64_t j) {                                 \
    const nrt_launch *l = jb->l;                                                                            \
    const nrt_operand *C = &l->operands[0], *A = &l->operands[1], *B = &l->operands[2];                     \
    T ar_ = (T)l->scalars[0].f, ai_ = (T)l->scalars[1].f, br_ = (T)l->scalars[2].f, bi_ = (T)l->scalars[3].f; \
    T sr = 0, si = 0;                                                                                       \
    if (jb->bias && (jb->mode == NRT_CGEMM_ALPHA_A || jb->mode == NRT_CGEMM_ALPHA_B)) {                     \
      const T *y = (const T *)AT(&l->operands[3], b, i, j);                                                 \
      if (br_ == 1 && bi_ == 0) {                                                                           \
        sr = y[0];                                                                                          \
        si = y[1];                                                                                          \
      } else {                                                                                              \
        sr = br_ * y[0] - bi_ * y[1];                                                                       \
        si = br_ * y[1] + bi_ * y[0];                                                                       \
      }                                                                                                     \
    }                                                                                                       \
    for (int64_t k = 0; k < jb->K; k++) {                                                                   \
      const T *x = (const T *)AT(A, b, i, k), *y = (const T *)AT(B, b, k, j);                               \
      T xr = x[0], xi = x[1], yr = y[0], yi = y[1];                                                         \
      if (jb->mode == NRT_CGEMM_ALPHA_A) {                                                                  \
        T r = ar_ * xr - ai_ * xi;                                                                          \
        xi = ar_ * xi + ai_ * xr;                                                                           \
        xr = r;                                                                                             \
      } else if (jb->mode == NRT_CGEMM_ALPHA_B) {                                                           \
        T r = ar_ * yr - ai_ * yi;                                                                          \
        yi = ar_ * yi + ai_ * yr;                                                                           \
        yr = r;                                                                                             \
      }                                                                                                     \
      sr += xr * yr - xi * yi;                                                                              \
      si += xr * yi + xi * yr;                                                                              \
    }                                                                                                       \
    if (jb->mode == NRT_CGEMM_ALPHA_AFTER) {                                                                \
      T r = ar_ * sr - ai_ * si;                                                                            \
      si = ar_ * si + ai_ * sr;                                                                             \
      sr = r;                                                                                               \
      if (jb->bias) {                                                                                       \
        const T *y = (const T *)AT(&l->operands[3], b, i, j);                                               \
        sr += br_ * y[0] - bi_ * y[1];                                                                      \
        si += br_ * y[1] + bi_ * y[0];                                                                      \
      }                                                                                                     \
    }                                                                                                       \
    T *out = (T *)AT(C, b, i, j);                                                                           \
    out[0] = sr;                                                                                            \
    out[1] = si;                                                                                            \
  }

/* No contraction of a*b+c into an FMA: the CPU's loops round the product
 * first, and an FMA turns inf - inf patterns and overflows differently. */
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
CGEMM_ELEMENT(float, element_c64)
CGEMM_ELEMENT(double, element_c128)
#pragma GCC pop_options

static void cgemm_range(void *ctx, int64_t begin, int64_t end) {
  const cgemm_job *jb = ctx;
  bool c64 = jb->l->operands[0].dtype == NRT_COMPLEX64;
  for (int64_t e = begin; e < end; e++) {
    int64_t j = e % jb->N, i = (e / jb->N) % jb->M, b = e / (jb->N * jb->M);
    if (c64) element_c64(jb, b, i, j);
    else element_c128(jb, b, i, j);
  }
}

nrt_status nrt_cgemm_execute(const nrt_launch *l) {
  cgemm_job jb = {.l = l, .M = l->sizes[1], .N = l->sizes[2], .K = l->sizes[3], .mode = (int)l->params[0]};
  if (l->noutputs != 1)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "CGEMM: expected 1 output, got %d", l->noutputs);
  nrt_dtype dt = l->operands[0].dtype;
  if (dt != NRT_COMPLEX64 && dt != NRT_COMPLEX128)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "CGEMM: complex64 or complex128 operands only");
  for (int o = 1; o < l->noutputs + l->ninputs; o++)
    if (l->operands[o].dtype != dt)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "CGEMM: every operand must have the output's dtype");
  if (jb.mode < NRT_CGEMM_ALPHA_NONE || jb.mode > NRT_CGEMM_ALPHA_B)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "CGEMM: p0 = %d is no alpha placement", jb.mode);
  jb.bias = l->ninputs == 3 && jb.mode != NRT_CGEMM_ALPHA_NONE && (l->scalars[2].f != 0.0 || l->scalars[3].f != 0.0);
  int64_t n = l->sizes[0] * jb.M * jb.N;
  if (n == 0) return NRT_SUCCESS;
  /* about 8 flops per multiply-add: split from a few hundred thousand */
  int64_t grain = nrt_max_i64(1, 32768 / (jb.K > 0 ? jb.K : 1));
  nrt_parallel_for(n, grain, cgemm_range, &jb);
  return NRT_SUCCESS;
}
