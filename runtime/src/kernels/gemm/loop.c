/* GEMM in the CPU's plain loops (GEMM p0 != NRT_GEMM_PACKED): the shapes
 * where PyTorch's CPU does not reach a blocked BLAS kernel but ATen's own
 * loops (bmm/baddbmm below 400 multiply-adds per batch entry, gemv with a
 * zero-stride vector) or the reference BLAS loops. There each product is
 * rounded before it is added, in k order from the first, with no fused
 * multiply-add, so sums of huge terms overflow or cancel, and 0 * inf turns
 * into NaN, exactly where the CPU's do; the packed kernels' fused k blocks
 * do not (3e38 * 0.3 - 3e38 * 0.3 leaves the first product's rounding
 * error, -3.8e30, where the CPU gets 0).
 *
 * Accumulation is in the operands' math type as on the CPU: float for
 * float32/bfloat16/float16, double for float64. p0 (nrt_gemm_order) says
 * where alpha and the bias go:
 *   AFTER    C = alpha * sum + beta * bias (ATen's loop: r * beta + alpha *
 *            sum, r read after the sum; BLAS's 'T' loops; gemv 't')
 *   ALPHA_A  C starts as beta * bias (0 for beta == 0, the bias itself for
 *   ALPHA_B  beta == 1) and adds (alpha * a_k) * b_k, or a_k * (alpha *
 *            b_k), for each k (BLAS's 'N' loops, ATen's gemv 'n')
 *   DOT8     AFTER with the sum as MKL's small 'T' sgemm takes it when both
 *            operands run along k: 8 lanes (k mod 8) halved 4 + 4, 2 + 2,
 *            1 + 1, then the last k % 8 products in order (measured with
 *            +-3e38 pairs and a 1 over every k up to 29)
 *   SUM4     ATen's cpublas loops for bfloat16/float16 (gemm_notrans_ and
 *   VDOT     gemm_transab_: SUM4; gemm_transa_: VDOT), which the CPU runs
 *            for every float16 GEMM on a CPU without AVX512-FP16 and for
 *            bfloat16 ones of at most 16^3 multiply-adds (oneDNN above):
 *            C = fma(beta, bias, alpha * sum) in float, the sum as below
 *            (sum4_dot, vdot8). Measured on the installed build with
 *            +-L / 1 one-hot rows (which products meet first) and +-3.4e38
 *            pairs (which adds are fused).
 *   SGEMV_N8 MKL's AVX-512 sgemv 'n' (Intel hosts) for a vector of 16 or more
 *            outputs: C starts as beta * bias; for the outputs in whole
 *            vectors of 16 (j < N / 16 * 16), each whole block of 8
 *            products p0..p7 (k = 8t + q, alpha on A's element) adds as
 *            C = (((C + p6) + p4) + (p5 + p7)) + ((p0 + p2) + (p1 + p3)), every
 *            "+ p" fused into its partial (p7, p2, p3 rounded first: 0 of
 *            4,800 finite random outputs differ); then the k % 8 tail is fused into
 *            C in order; the outputs past the last whole vector fuse every
 *            product in order (measured with rooted triples 2^25, -2^25, 1
 *            over k up to 25 and 16 to 50 outputs, C included as a leaf)
 * p2 != 0 (ALPHA_A / ALPHA_B): each product fused into C, as ATen's
 * gemm_transb_ for those dtypes (float C = beta * bias first, alpha on
 * BLAS's 'b'). p3 != 0 (ALPHA_A / ALPHA_B): the products are summed from 0,
 * and the sum and beta * bias (the bias as is for beta == 1), each rounded
 * to C's dtype, added last, as ATen's gemv 'n' for bfloat16 does;
 * (AFTER) beta * bias is rounded to C's dtype before alpha * sum is added,
 * as ATen's gemv 't' computes it in bfloat16.
 * p1 != 0: C's elements share memory (an expanded in-place self): one
 * thread, outputs in (batch, row, column) order, each reading the bias
 * just before its store, as the CPU's loop does through the aliases.
 * This loop is both the kernel and its reference: these shapes are small. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/common/common.h"
#include "kernels/common/convert.h"
#include "kernels/gemm/loop.h"
#include "nrt/ops/gemm.h"

typedef struct loop_job {
  const nrt_launch *l;
  int64_t M, N, K, nb, nblocks;
  int order;
  bool bias, fused, bias_last;
  _Atomic int failed;
} loop_job;

#define AT(o, b, i, j) ((char *)(o)->data + (b) * (o)->strides[0] + (i) * (o)->strides[1] + (j) * (o)->strides[2])

/* Element loads and stores: float32/float64 directly (the common case,
 * where a call per element was most of a small product's time), the other
 * dtypes through the converters. */
static inline double ld(const char *p, nrt_dtype dt) {
  if (dt == NRT_FLOAT32) {
    float v;
    memcpy(&v, p, 4);
    return v;
  }
  if (dt == NRT_FLOAT64) {
    double v;
    memcpy(&v, p, 8);
    return v;
  }
  return nrt_ref_load_f64(p, dt);
}

static inline void st(char *p, nrt_dtype dt, double v) {
  if (dt == NRT_FLOAT32) {
    float f = (float)v;
    memcpy(p, &f, 4);
  } else if (dt == NRT_FLOAT64) {
    memcpy(p, &v, 8);
  } else {
    nrt_ref_store_f64(p, dt, v);
  }
}

/* v rounded to dtype dt (through a store and a load). */
static inline double round_to(nrt_dtype dt, double v) {
  char tmp[16];
  st(tmp, dt, v);
  return ld(tmp, dt);
}

/* Columns per block: a row's partial sums (and DOT8's 8 lanes of them) stay
 * in L1 while B is read a row segment at a time; each element's products
 * still add in k order, so the loops over the block's columns vectorise
 * without changing a single rounding (no fused multiply-add, below). */
#define LOOP_NB 64

/* Output row i of batch b, columns [j0, j0 + nj); T is the math type
 * (float or double). */
#define GEMM_LOOP_ROW(T, NAME, FMA, TARGET)                                                             \
  TARGET static void NAME(const loop_job *jb, int64_t b, int64_t i, int64_t j0, int64_t nj) {           \
    const nrt_launch *l = jb->l;                                                                        \
    const nrt_operand *C = &l->operands[0], *A = &l->operands[1], *B = &l->operands[2];                 \
    const nrt_operand *Y = &l->operands[3];                                                             \
    const T alpha = (T)l->scalars[0].f, beta = (T)l->scalars[1].f;                                      \
    const bool after = jb->order == NRT_GEMM_LOOP_AFTER || jb->order == NRT_GEMM_LOOP_DOT8;             \
    const bool b_plain = B->dtype == (sizeof(T) == 4 ? NRT_FLOAT32 : NRT_FLOAT64) && B->strides[2] == (int64_t)sizeof(T); \
    T acc[LOOP_NB], y[LOOP_NB], lane[8][LOOP_NB];                                                      \
    for (int64_t j = 0; j < nj; j++) {                                                                  \
      acc[j] = 0;                                                                                       \
      if (!after && jb->bias && !jb->bias_last) {                                                       \
        acc[j] = (T)ld(AT(Y, b, i, j0 + j), Y->dtype);                                    \
        if (beta != 1) acc[j] = beta * acc[j];                                                          \
      }                                                                                                 \
    }                                                                                                   \
    int64_t k = 0;                                                                                      \
    const bool lanes = jb->order == NRT_GEMM_LOOP_DOT8 && jb->K >= 8;                                   \
    if (lanes)                                                                                          \
      for (int q = 0; q < 8; q++)                                                                       \
        for (int64_t j = 0; j < nj; j++) lane[q][j] = 0;                                                \
    for (; k < jb->K; k++) {                                                                            \
      T x = (T)ld(AT(A, b, i, k), A->dtype);                                              \
      if (jb->order == NRT_GEMM_LOOP_ALPHA_A) x = alpha * x;                                            \
      const char *brow = AT(B, b, k, j0);                                                               \
      const T *yk = y;                                                                                  \
      if (b_plain && jb->order != NRT_GEMM_LOOP_ALPHA_B) {                                              \
        yk = (const T *)brow; /* read in place: tensors keep their elements aligned */                 \
      } else {                                                                                          \
        for (int64_t j = 0; j < nj; j++) y[j] = (T)ld(brow + j * B->strides[2], B->dtype);              \
        if (jb->order == NRT_GEMM_LOOP_ALPHA_B)                                                         \
          for (int64_t j = 0; j < nj; j++) y[j] = alpha * y[j];                                         \
      }                                                                                                 \
      T *dst = lanes && k < jb->K / 8 * 8 ? lane[k % 8] : acc;                                          \
      if (lanes && k == jb->K / 8 * 8) { /* the lanes halved 4 + 4, 2 + 2, 1 + 1 before the tail */    \
        for (int h = 4; h >= 1; h /= 2)                                                                 \
          for (int q = 0; q < h; q++)                                                                   \
            for (int64_t j = 0; j < nj; j++) lane[q][j] += lane[q + h][j];                              \
        for (int64_t j = 0; j < nj; j++) acc[j] = lane[0][j];                                           \
      }                                                                                                 \
      if (jb->fused)                                                                                    \
        for (int64_t j = 0; j < nj; j++) dst[j] = FMA(x, yk[j], dst[j]);                                \
      else                                                                                              \
        for (int64_t j = 0; j < nj; j++) dst[j] += x * yk[j];                                           \
    }                                                                                                   \
    if (lanes && jb->K % 8 == 0) {                                                                      \
      for (int h = 4; h >= 1; h /= 2)                                                                   \
        for (int q = 0; q < h; q++)                                                                     \
          for (int64_t j = 0; j < nj; j++) lane[q][j] += lane[q + h][j];                                \
      for (int64_t j = 0; j < nj; j++) acc[j] = lane[0][j];                                             \
    }                                                                                                   \
    for (int64_t j = 0; j < nj; j++) {                                                                  \
      T r = acc[j];                                                                                     \
      if (after) {                                                                                      \
        r = alpha * r;                                                                                  \
        if (jb->bias) {                                                                                 \
          T yb = (T)ld(AT(Y, b, i, j0 + j), Y->dtype) * beta;                                           \
          if (jb->bias_last) yb = (T)round_to(C->dtype, (double)yb);                                    \
          r = yb + r;                                                                                   \
        }                                                                                               \
      } else if (jb->bias && jb->bias_last) {                                                           \
        T yb = (T)ld(AT(Y, b, i, j0 + j), Y->dtype);                                                    \
        if (beta != 1) yb = (T)round_to(C->dtype, (double)(beta * yb));                                \
        r = (T)round_to(C->dtype, (double)r) + yb;                                                      \
      }                                                                                                 \
      st(AT(C, b, i, j0 + j), C->dtype, (double)r);                                      \
    }                                                                                                   \
  }

/* SGEMV_N8 for float32: row i of batch b, columns [j0, j0 + nj). The
 * block's four partials per column are explicit fmaf calls, so the loop
 * is its own reference (the compiler may not reassociate them). */
#pragma GCC push_options
#pragma GCC optimize("O3,fp-contract=off")
NRT_TARGET_AVX2 static void row_sgemv_n8(const loop_job *jb, int64_t b, int64_t i, int64_t j0, int64_t nj) {
  const nrt_launch *l = jb->l;
  const nrt_operand *C = &l->operands[0], *A = &l->operands[1], *B = &l->operands[2], *Y = &l->operands[3];
  const float alpha = (float)l->scalars[0].f, beta = (float)l->scalars[1].f;
  const int64_t whole = jb->K / 8 * 8, vec_end = jb->N / 16 * 16;
  /* columns [j0, jv) lie in whole vectors of 16 and take the blocks */
  const int64_t jv = nrt_max_i64(j0, nrt_min_i64(j0 + nj, vec_end));
  const bool b_plain = B->dtype == NRT_FLOAT32 && B->strides[2] == 4;
  float acc[LOOP_NB], y[8][LOOP_NB];
  for (int64_t j = 0; j < nj; j++) {
    acc[j] = 0;
    if (jb->bias) {
      acc[j] = (float)ld(AT(Y, b, i, j0 + j), Y->dtype);
      if (beta != 1) acc[j] = beta * acc[j];
    }
  }
  const int64_t nv = jv - j0;
  for (int64_t k = 0; nv > 0 && k < whole; k += 8) {
    float x[8];
    const float *r[8];
    for (int q = 0; q < 8; q++) {
      x[q] = alpha * (float)ld(AT(A, b, i, k + q), A->dtype);
      if (b_plain) {
        r[q] = (const float *)AT(B, b, k + q, j0);
      } else {
        for (int64_t j = 0; j < nv; j++) y[q][j] = (float)ld(AT(B, b, k + q, j0 + j), B->dtype);
        r[q] = y[q];
      }
    }
    for (int64_t j = 0; j < nv; j++) {
      float t1 = fmaf(x[4], r[4][j], fmaf(x[6], r[6][j], acc[j]));
      float t2 = fmaf(x[5], r[5][j], x[7] * r[7][j]);
      float t3 = fmaf(x[0], r[0][j], x[2] * r[2][j]);
      float t4 = fmaf(x[1], r[1][j], x[3] * r[3][j]);
      acc[j] = (t1 + t2) + (t3 + t4);
    }
  }
  /* the k % 8 tail of those, and every k of the columns past the last
   * whole vector, fused in order */
  for (int64_t k = 0; k < jb->K; k++) {
    float xk = alpha * (float)ld(AT(A, b, i, k), A->dtype);
    for (int64_t j = k < whole ? nv : 0; j < nj; j++)
      acc[j] = fmaf(xk, b_plain ? ((const float *)AT(B, b, k, j0))[j] : (float)ld(AT(B, b, k, j0 + j), B->dtype),
                    acc[j]);
  }
  for (int64_t j = 0; j < nj; j++) st(AT(C, b, i, j0 + j), C->dtype, (double)acc[j]);
}
#pragma GCC pop_options

/* No contraction of x * y + r into a fused multiply-add: the CPU's loops
 * round each product (their builds target x86-64 without FMA). */
#pragma GCC push_options
#pragma GCC optimize("O3,fp-contract=off")
GEMM_LOOP_ROW(float, row_f32, fmaf, )
GEMM_LOOP_ROW(double, row_f64, fma, )
/* the fused orders with fmaf inlined (elsewhere a library call per product) */
GEMM_LOOP_ROW(float, row_f32_fma, fmaf, NRT_TARGET_AVX2)

/* ATen's sum() over k as the CPU's build compiles it: 4 partial sums (k mod
 * 4) over the whole blocks of 4, each step a fused multiply-add (the loop is
 * unrolled and contracted), the last K % 4 products rounded and added to
 * the first partial, then ((p0 + p1) + p2) + p3. */
static inline __attribute__((always_inline)) float sum4_dot(const float *x, const float *y, int64_t K) {
  float p[4] = {0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 4 <= K; k += 4)
    for (int q = 0; q < 4; q++) p[q] = fmaf(x[k + q], y[k + q], p[q]);
  for (; k < K; k++) p[0] += x[k] * y[k];
  return ((p[0] + p[1]) + p[2]) + p[3];
}

/* ATen's vectorised vector halving: lane i += lane i ^ h for h = 4, 2, 1. */
static inline __attribute__((always_inline)) float lanes8_sum(float v[8]) {
  for (int h = 4; h >= 1; h /= 2)
    for (int q = 0; q < h; q++) v[q] += v[q + h];
  return v[0];
}

/* ATen's dot_with_fp32_arith for 16-bit inputs as the installed build runs
 * it (8 float lanes): blocks of 64 products into 8 registers of 8 lanes
 * (register r lane l holds k = 64 t + 8 r + l, fused), the registers
 * halved 4, 2, 1 and their lanes summed; then blocks of 16 into one more
 * register (k and k + 8 on lane l, fused), its lanes summed and added; the
 * last K % 16 products rounded and added in order. */
static inline __attribute__((always_inline)) float vdot8(const float *x, const float *y, int64_t K) {
  float s = 0.0f;
  int64_t la = K / 64 * 64, lv = K / 16 * 16;
  if (la > 0) {
    float r[8][8] = {{0}};
    for (int64_t k = 0; k < la; k += 64)
      for (int q = 0; q < 8; q++)
        for (int l = 0; l < 8; l++) r[q][l] = fmaf(x[k + 8 * q + l], y[k + 8 * q + l], r[q][l]);
    for (int h = 4; h >= 1; h /= 2)
      for (int q = 0; q < h; q++)
        for (int l = 0; l < 8; l++) r[q][l] += r[q + h][l];
    s = lanes8_sum(r[0]);
  }
  float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t k = la; k < lv; k += 16) {
    for (int l = 0; l < 8; l++) t[l] = fmaf(x[k + l], y[k + l], t[l]);
    for (int l = 0; l < 8; l++) t[l] = fmaf(x[k + 8 + l], y[k + 8 + l], t[l]);
  }
  s += lanes8_sum(t);
  for (int64_t k = lv; k < K; k++) s += x[k] * y[k];
  return s;
}

/* SUM4 / VDOT: rows [i0, i0 + ni) x columns [j0, j0 + nj) of batch b, one
 * dot of A's row and B's column (both widened to float) per output; the
 * block's columns are widened once for all its rows. */
static inline __attribute__((always_inline)) bool dot_block(const loop_job *jb, int64_t b, int64_t i0, int64_t ni,
                                                            int64_t j0, int64_t nj) {
  const nrt_launch *l = jb->l;
  const nrt_operand *C = &l->operands[0], *A = &l->operands[1], *B = &l->operands[2], *Y = &l->operands[3];
  const float alpha = (float)l->scalars[0].f, beta = (float)l->scalars[1].f;
  const int64_t K = jb->K;
  float *x = malloc(sizeof(float) * (size_t)(K * (nj + 1)));
  if (!x) return false;
  float *y = x + K;
  for (int64_t j = 0; j < nj; j++) nrt_load_f32(y + j * K, AT(B, b, 0, j0 + j), B->strides[1], B->dtype, K);
  for (int64_t i = i0; i < i0 + ni; i++) {
    nrt_load_f32(x, AT(A, b, i, 0), A->strides[2], A->dtype, K);
    for (int64_t j = 0; j < nj; j++) {
      float d = jb->order == NRT_GEMM_LOOP_SUM4 ? sum4_dot(x, y + j * K, K) : vdot8(x, y + j * K, K);
      float r = alpha * d;
      if (jb->bias) r = fmaf(beta, (float)ld(AT(Y, b, i, j0 + j), Y->dtype), r);
      st(AT(C, b, i, j0 + j), C->dtype, (double)r);
    }
  }
  free(x);
  return true;
}
/* The same code twice: with FMA enabled fmaf is one instruction, otherwise a
 * library call per product; the results are the same. */
NRT_TARGET_AVX2 static bool dot_block_fma(const loop_job *jb, int64_t b, int64_t i0, int64_t ni, int64_t j0,
                                          int64_t nj) {
  return dot_block(jb, b, i0, ni, j0, nj);
}
static bool dot_block_plain(const loop_job *jb, int64_t b, int64_t i0, int64_t ni, int64_t j0, int64_t nj) {
  return dot_block(jb, b, i0, ni, j0, nj);
}
#pragma GCC pop_options

/* A task: one row segment of nb columns (nb = 1 for an aliased C, whose
 * elements must be finished one at a time in order); for SUM4 / VDOT,
 * DOT_ROWS rows of that segment. */
#define DOT_ROWS 16

static void loop_range(void *ctx, int64_t begin, int64_t end) {
  const loop_job *jb = ctx;
  bool f64 = jb->l->compute_dtype == NRT_FLOAT64;
  bool dots = jb->order == NRT_GEMM_LOOP_SUM4 || jb->order == NRT_GEMM_LOOP_VDOT;
  bool has_fma = nrt_kernels_isa() >= NRT_ISA_AVX2;
  loop_job *job = (loop_job *)ctx;
  for (int64_t t = begin; t < end; t++) {
    int64_t jblk = t % jb->nblocks, row = t / jb->nblocks;
    int64_t j0 = jblk * jb->nb, nj = nrt_min_i64(jb->nb, jb->N - j0);
    if (dots) {
      int64_t chunks = nrt_cdiv(jb->M, DOT_ROWS), b = row / chunks, i0 = (row % chunks) * DOT_ROWS;
      int64_t ni = nrt_min_i64(DOT_ROWS, jb->M - i0);
      bool ok = has_fma ? dot_block_fma(jb, b, i0, ni, j0, nj) : dot_block_plain(jb, b, i0, ni, j0, nj);
      if (!ok) job->failed = 1;
    } else if (jb->order == NRT_GEMM_LOOP_SGEMV_N8) {
      row_sgemv_n8(jb, row / jb->M, row % jb->M, j0, nj);
    } else if (f64) {
      row_f64(jb, row / jb->M, row % jb->M, j0, nj);
    } else {
      if (jb->fused && has_fma) row_f32_fma(jb, row / jb->M, row % jb->M, j0, nj);
      else row_f32(jb, row / jb->M, row % jb->M, j0, nj);
    }
  }
}

nrt_status nrt_gemm_loop_execute(const nrt_launch *l) {
  if (l->params[0] == NRT_GEMM_LOOP_SGEMV_T) return nrt_gemm_sgemv_t_execute(l);
  if (l->params[0] == NRT_GEMM_LOOP_SDOT) return nrt_gemm_sdot_execute(l);
  loop_job jb = {.l = l, .M = l->sizes[1], .N = l->sizes[2], .K = l->sizes[3], .order = (int)l->params[0]};
  if (jb.order < NRT_GEMM_LOOP_AFTER || jb.order > NRT_GEMM_LOOP_SGEMV_N8 || jb.order == NRT_GEMM_LOOP_SGEMV_T)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "GEMM: p0 = %d is no loop order", jb.order);
  if (!nrt_dtype_is_floating(l->compute_dtype))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "GEMM: the loop order takes floating operands only");
  /* the CPU's hardware FMA, whatever ISA cap the kernels run under */
  if (jb.order == NRT_GEMM_LOOP_SGEMV_N8 && (l->compute_dtype != NRT_FLOAT32 || !__builtin_cpu_supports("fma")))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "GEMM: loop order %d takes float32 math and an FMA CPU",
                           jb.order);
  bool dots = jb.order == NRT_GEMM_LOOP_SUM4 || jb.order == NRT_GEMM_LOOP_VDOT;
  if (dots && (l->compute_dtype == NRT_FLOAT64 || l->params[1]))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "GEMM: loop order %d takes float math and an unaliased C",
                           jb.order);
  jb.bias = l->ninputs == 3 && l->scalars[1].f != 0.0;
  jb.fused = l->params[2] != 0 && (jb.order == NRT_GEMM_LOOP_ALPHA_A || jb.order == NRT_GEMM_LOOP_ALPHA_B);
  jb.bias_last = l->params[3] != 0 && (jb.order == NRT_GEMM_LOOP_ALPHA_A || jb.order == NRT_GEMM_LOOP_ALPHA_B ||
                                       jb.order == NRT_GEMM_LOOP_AFTER);
  if (l->sizes[0] == 0 || jb.M == 0 || jb.N == 0) return NRT_SUCCESS;
  jb.nb = l->params[1] ? 1 : LOOP_NB;
  jb.nblocks = nrt_cdiv(jb.N, jb.nb);
  int64_t rows = dots ? nrt_cdiv(jb.M, DOT_ROWS) : jb.M;
  int64_t tasks = l->sizes[0] * rows * jb.nblocks;
  if (l->params[1]) {
    loop_range(&jb, 0, tasks); /* C aliases itself: in order, one thread */
    return NRT_SUCCESS;
  }
  /* a thread's share from ~64k multiply-adds: below, a hand-off costs more */
  int64_t per_task = nrt_min_i64(jb.N, jb.nb) * (jb.K > 0 ? jb.K : 1) * (dots ? DOT_ROWS : 1);
  nrt_parallel_for(tasks, nrt_max_i64(1, 65536 / per_task), loop_range, &jb);
  if (jb.failed) return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "GEMM: out of host memory for a row");
  return NRT_SUCCESS;
}
