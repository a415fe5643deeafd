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
 * s0/s1: alpha (re, im), s2/s3: beta (re, im); p1 != 0: C's elements share
 * memory (an expanded in-place self), so the outputs are computed on one
 * thread in (batch, row, column) order, each reading the bias (C itself)
 * just before its store, as the CPU's loop does. p2 != 0: CGEMM_ALPHA_AFTER
 * adds the bias as is when beta == 1 (BLAS's gemv leaves y alone there; its
 * gemm loops multiply). p3 != 0: CGEMM_ALPHA_AFTER as MKL's 'T' gemm loop,
 * which scales C by a beta != 1 in a pass of its own and then adds it as
 * 1 * C, so the NaN that beta * (inf + 0i) leaves in one part spreads to
 * both (measured: every non-finite C gives NaN + NaN i there; ATen's
 * small-batch loop multiplies once). Scalar loop only: these
 * shapes are small in at least one dimension (the glue sends the rest to
 * the real GEMM), so the loop is both the kernel and its reference. */
#include <string.h>
#include "kernels/gemm/cgemm.h"
#include "kernels/common/common.h"
#include "nrt/ops/gemm.h"

typedef struct cgemm_job {
  const nrt_launch *l;
  int64_t M, N, K, nblocks;
  int mode, lanes;
  bool bias, beta_one_as_is, beta_pass;
} cgemm_job;

/* aux[0] (ALPHA_AFTER / NONE): sum each output's products in this many
 * lanes (k % lanes, each in k order) and reduce them in halves (x + h for
 * h = lanes / 2 .. 1), as MKL's AVX-512 cgemv/zgemv 't' does in one zmm of
 * 8 complex64 or 4 complex128 values (probed on an Intel Xeon with +-1e18
 * pairs and a 1 around them: every triple of positions, K up to 47, 2 to
 * 64 rows, unit and strided x); 0: k order. */
#define CGEMM_MAX_LANES 16

/* Columns per task: the row's partial sums stay in L1 while B is read a
 * row segment at a time (walking B down a column per output element was
 * 10x slower for a 1 x 2048 @ 2048 x 2048). */
#define CGEMM_NB 128

#define AT(o, b, i, j) ((char *)(o)->data + (b) * (o)->strides[0] + (i) * (o)->strides[1] + (j) * (o)->strides[2])

/* Output row i of batch b, columns [j0, j0 + nj): each element's products
 * still add in k order. T is the part type, float or double. */
#define CGEMM_ROW(T, NAME)                                                                                  \
  static void NAME(const cgemm_job *jb, int64_t b, int64_t i, int64_t j0, int64_t nj) {                    \
    const nrt_launch *l = jb->l;                                                                            \
    const nrt_operand *C = &l->operands[0], *A = &l->operands[1], *B = &l->operands[2];                     \
    const nrt_operand *Y = &l->operands[3];                                                                 \
    const T ar_ = (T)l->scalars[0].f, ai_ = (T)l->scalars[1].f;                                             \
    const T br_ = (T)l->scalars[2].f, bi_ = (T)l->scalars[3].f;                                             \
    const bool scale_first = jb->mode == NRT_CGEMM_ALPHA_A || jb->mode == NRT_CGEMM_ALPHA_B;                \
    T sr[CGEMM_NB], si[CGEMM_NB];                                                                           \
    for (int64_t j = 0; j < nj; j++) {                                                                      \
      sr[j] = 0;                                                                                            \
      si[j] = 0;                                                                                            \
      if (jb->bias && scale_first) {                                                                        \
        const T *y = (const T *)AT(Y, b, i, j0 + j);                                                        \
        if (br_ == 1 && bi_ == 0) {                                                                         \
          sr[j] = y[0];                                                                                     \
          si[j] = y[1];                                                                                     \
        } else {                                                                                            \
          sr[j] = br_ * y[0] - bi_ * y[1];                                                                  \
          si[j] = br_ * y[1] + bi_ * y[0];                                                                  \
        }                                                                                                   \
      }                                                                                                     \
    }                                                                                                       \
    const int64_t sj = B->strides[2];                                                                       \
    if (jb->lanes) { /* MKL's gemv 't' per element: lane k % lanes, then halves */                          \
      for (int64_t j = 0; j < nj; j++) {                                                                    \
        T lr[CGEMM_MAX_LANES] = {0}, li[CGEMM_MAX_LANES] = {0};                                             \
        const int L = jb->lanes;                                                                            \
        const char *xa = AT(A, b, i, 0), *yb = AT(B, b, 0, j0 + j);                                         \
        const int64_t xs = A->strides[2], ys = B->strides[1];                                               \
        int64_t k = 0;                                                                                      \
        if (xs == 2 * (int64_t)sizeof(T) && ys == xs) { /* unit strides: whole rows of lanes vectorise */   \
          const T *x = (const T *)xa, *y = (const T *)yb;                                                   \
          for (; k + L <= jb->K; k += L)                                                                    \
            for (int q = 0; q < L; q++) {                                                                   \
              lr[q] += x[2 * (k + q)] * y[2 * (k + q)] - x[2 * (k + q) + 1] * y[2 * (k + q) + 1];           \
              li[q] += x[2 * (k + q)] * y[2 * (k + q) + 1] + x[2 * (k + q) + 1] * y[2 * (k + q)];           \
            }                                                                                               \
        }                                                                                                   \
        for (; k < jb->K; k++) { /* lane k % L, in k order */                                               \
          const T *x = (const T *)(xa + k * xs), *y = (const T *)(yb + k * ys);                             \
          int q = (int)(k % L);                                                                             \
          lr[q] += x[0] * y[0] - x[1] * y[1];                                                               \
          li[q] += x[0] * y[1] + x[1] * y[0];                                                               \
        }                                                                                                   \
        for (int h = L / 2; h >= 1; h /= 2)                                                                 \
          for (int q = 0; q < h; q++) {                                                                     \
            lr[q] += lr[q + h];                                                                             \
            li[q] += li[q + h];                                                                             \
          }                                                                                                 \
        sr[j] = lr[0];                                                                                      \
        si[j] = li[0];                                                                                      \
      }                                                                                                     \
    } else if (nj == 1) { /* one column (matrix-vector): the sums in registers */                           \
      T r = sr[0], m = si[0];                                                                               \
      for (int64_t k = 0; k < jb->K; k++) {                                                                 \
        const T *x = (const T *)AT(A, b, i, k), *y = (const T *)AT(B, b, k, j0);                            \
        T xr = x[0], xi = x[1], yr = y[0], yi = y[1];                                                       \
        if (jb->mode == NRT_CGEMM_ALPHA_A) {                                                                \
          T t = ar_ * xr - ai_ * xi;                                                                        \
          xi = ar_ * xi + ai_ * xr;                                                                         \
          xr = t;                                                                                           \
        } else if (jb->mode == NRT_CGEMM_ALPHA_B) {                                                         \
          T t = ar_ * yr - ai_ * yi;                                                                        \
          yi = ar_ * yi + ai_ * yr;                                                                         \
          yr = t;                                                                                           \
        }                                                                                                   \
        r += xr * yr - xi * yi;                                                                             \
        m += xr * yi + xi * yr;                                                                             \
      }                                                                                                     \
      sr[0] = r;                                                                                            \
      si[0] = m;                                                                                            \
    }                                                                                                       \
    for (int64_t k = 0; nj > 1 && !jb->lanes && k < jb->K; k++) {                                           \
      const T *x = (const T *)AT(A, b, i, k);                                                               \
      T xr = x[0], xi = x[1];                                                                               \
      if (jb->mode == NRT_CGEMM_ALPHA_A) {                                                                  \
        T r = ar_ * xr - ai_ * xi;                                                                          \
        xi = ar_ * xi + ai_ * xr;                                                                           \
        xr = r;                                                                                             \
      }                                                                                                     \
      const char *yrow = AT(B, b, k, j0);                                                                   \
      if (jb->mode == NRT_CGEMM_ALPHA_B) {                                                                  \
        for (int64_t j = 0; j < nj; j++) {                                                                  \
          const T *y = (const T *)(yrow + j * sj);                                                          \
          T yr = ar_ * y[0] - ai_ * y[1], yi = ar_ * y[1] + ai_ * y[0];                                     \
          sr[j] += xr * yr - xi * yi;                                                                       \
          si[j] += xr * yi + xi * yr;                                                                       \
        }                                                                                                   \
      } else if (sj == 2 * (int64_t)sizeof(T)) { /* unit-stride row: the loop vectorises */                \
        const T *y = (const T *)yrow;                                                                       \
        for (int64_t j = 0; j < nj; j++) {                                                                  \
          sr[j] += xr * y[2 * j] - xi * y[2 * j + 1];                                                       \
          si[j] += xr * y[2 * j + 1] + xi * y[2 * j];                                                       \
        }                                                                                                   \
      } else {                                                                                              \
        for (int64_t j = 0; j < nj; j++) {                                                                  \
          const T *y = (const T *)(yrow + j * sj);                                                          \
          sr[j] += xr * y[0] - xi * y[1];                                                                   \
          si[j] += xr * y[1] + xi * y[0];                                                                   \
        }                                                                                                   \
      }                                                                                                     \
    }                                                                                                       \
    for (int64_t j = 0; j < nj; j++) {                                                                      \
      T r = sr[j], m = si[j];                                                                               \
      if (jb->mode == NRT_CGEMM_ALPHA_AFTER) {                                                              \
        r = ar_ * sr[j] - ai_ * si[j];                                                                      \
        m = ar_ * si[j] + ai_ * sr[j];                                                                      \
        if (jb->bias) {                                                                                     \
          const T *y = (const T *)AT(Y, b, i, j0 + j);                                                      \
          if (jb->beta_one_as_is && br_ == 1 && bi_ == 0) {                                                 \
            r += y[0];                                                                                      \
            m += y[1];                                                                                      \
          } else if (jb->beta_pass && !(br_ == 1 && bi_ == 0)) {                                            \
            T zr = br_ * y[0] - bi_ * y[1], zi = br_ * y[1] + bi_ * y[0];                                   \
            r += (T)1 * zr - (T)0 * zi;                                                                     \
            m += (T)1 * zi + (T)0 * zr;                                                                     \
          } else {                                                                                          \
            r += br_ * y[0] - bi_ * y[1];                                                                   \
            m += br_ * y[1] + bi_ * y[0];                                                                   \
          }                                                                                                 \
        }                                                                                                   \
      }                                                                                                     \
      T *out = (T *)AT(C, b, i, j0 + j);                                                                    \
      out[0] = r;                                                                                           \
      out[1] = m;                                                                                           \
    }                                                                                                       \
  }

/* No contraction of a*b+c into an FMA: the CPU's loops round the product
 * first, and an FMA turns inf - inf patterns and overflows differently. */
#pragma GCC push_options
#pragma GCC optimize("O3,fp-contract=off")
CGEMM_ROW(float, row_c64)
CGEMM_ROW(double, row_c128)
#pragma GCC pop_options

/* A task: one output row segment of CGEMM_NB columns. */
static void cgemm_range(void *ctx, int64_t begin, int64_t end) {
  const cgemm_job *jb = ctx;
  bool c64 = jb->l->operands[0].dtype == NRT_COMPLEX64;
  for (int64_t t = begin; t < end; t++) {
    int64_t jblk = t % jb->nblocks, i = (t / jb->nblocks) % jb->M, b = t / (jb->nblocks * jb->M);
    int64_t j0 = jblk * CGEMM_NB, nj = nrt_min_i64(CGEMM_NB, jb->N - j0);
    if (c64) row_c64(jb, b, i, j0, nj);
    else row_c128(jb, b, i, j0, nj);
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
  jb.lanes = (int)l->aux[0];
  if (jb.lanes < 0 || jb.lanes > CGEMM_MAX_LANES || (jb.lanes & (jb.lanes - 1)) != 0 ||
      (jb.lanes && jb.mode != NRT_CGEMM_ALPHA_AFTER && jb.mode != NRT_CGEMM_ALPHA_NONE))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "CGEMM: aux[0] = %lld lanes (a power of two up to %d, ALPHA_AFTER or NONE only)",
                           (long long)l->aux[0], CGEMM_MAX_LANES);
  jb.beta_one_as_is = l->params[2] != 0;
  jb.beta_pass = l->params[3] != 0;
  jb.bias = l->ninputs == 3 && jb.mode != NRT_CGEMM_ALPHA_NONE && (l->scalars[2].f != 0.0 || l->scalars[3].f != 0.0);
  if (l->sizes[0] == 0 || jb.M == 0 || jb.N == 0) return NRT_SUCCESS;
  jb.nblocks = nrt_cdiv(jb.N, CGEMM_NB);
  int64_t tasks = l->sizes[0] * jb.M * jb.nblocks;
  /* about 8 flops per multiply-add: a thread's share from ~32k of them */
  int64_t per_task = nrt_min_i64(jb.N, CGEMM_NB) * (jb.K > 0 ? jb.K : 1);
  int64_t grain = nrt_max_i64(1, 32768 / per_task);
  if (l->params[1]) cgemm_range(&jb, 0, tasks); /* C aliases itself: in order, one thread */
  else nrt_parallel_for(tasks, grain, cgemm_range, &jb);
  return NRT_SUCCESS;
}
