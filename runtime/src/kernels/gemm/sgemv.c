/* GEMM p0 = NRT_GEMM_LOOP_SGEMV_T: y = alpha * A x + beta * bias for a
 * float32 A whose rows run along k (unit k-stride) and a unit-stride x, in
 * the order of MKL's sgemv 't', which the CPU's float32 mv/addmv of a
 * row-major matrix, mm/addmm with one output column (or row) and F.linear
 * of a vector reach. Where huge terms overflow or cancel depends on that
 * order, and MKL's depends on addresses (measured on the installed build
 * with +-2^60 pairs among ones, which tell the order products meet, and
 * +-3e38 edge values; up to 4096 x 4096, 1 and 2 threads):
 *
 *  - rows in blocks of 4 (rows 0..M/4*4-1): a head of h products summed in
 *    order into lane 0, h = 4 - (e mod 4) where e is the element address
 *    (bytes / 4) of the block's LAST row (h = 4 when it is 16-byte
 *    aligned); then 4 lanes, lane q taking products h + q, h + 4 + q, ...
 *    while 4 remain; then (l0 + l2) + (l1 + l3), then the remaining
 *    products in order. If h + 4 > K, the plain sum in order.
 *  - the rows after the blocks take h from x's address instead: the first
 *    and third 8 lanes (8 at a time, lane sum ((l0 + l4) + (l2 + l6)) +
 *    ((l1 + l5) + (l3 + l7))), the second 4 lanes 8 products at a time
 *    (two steps of 4 per pass); the plain sum if h + 8 > K.
 *  - every product rounded before it is added (no fused multiply-add),
 *    then alpha * sum, and beta * y + that where beta != 0.
 * The glue hands over A and x where the CPU's BLAS call reads them (a
 * contiguous copy where ATen copies), so their addresses modulo 16 are
 * the CPU's (device blocks are 512-byte aligned, the CPU's 64).
 *
 * row_ref is the reference loop for one row; the blocks run four rows at
 * once in SSE registers, one register per row (lane q = register lane q),
 * the same adds in the same order. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include "kernels/common/common.h"
#include "kernels/gemm/loop.h"
#include "nrt/ops/gemm.h"

#pragma GCC push_options
#pragma GCC optimize("O3,fp-contract=off")

/* h for a row or vector starting at p: the products before the first
 * 16-byte boundary after p, or 4 on one */
static inline int64_t head_of(const float *p) { return 4 - (int64_t)(((uintptr_t)p >> 2) & 3); }

/* One row's sum: head h, `lanes` lanes (4 or 8) filled `step` products a
 * pass (lanes or 2 * lanes for the second tail row's 4 lanes). */
static float row_ref(const float *a, const float *x, int64_t K, int64_t h, int lanes, int step) {
  float s = a[0] * x[0];
  if (h + step > K) {
    for (int64_t k = 1; k < K; k++) s += a[k] * x[k];
    return s;
  }
  for (int64_t k = 1; k < h; k++) s += a[k] * x[k];
  float l[8] = {s, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = h;
  for (; k + step <= K; k += step)
    for (int q = 0; q < step; q++) l[q % lanes] += a[k + q] * x[k + q];
  if (lanes == 8)
    for (int q = 0; q < 4; q++) l[q] += l[q + 4];
  float r = (l[0] + l[2]) + (l[1] + l[3]);
  for (; k < K; k++) r += a[k] * x[k];
  return r;
}

/* Four rows of one block (rows a + r * lda, r < 4), all with the head h. */
static void block4(const float *a, int64_t lda, const float *x, int64_t K, int64_t h, float out[4]) {
  if (h + 4 > K) {
    for (int r = 0; r < 4; r++) out[r] = row_ref(a + r * lda, x, K, h, 4, 4);
    return;
  }
  const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;
  float s[4];
  for (int r = 0; r < 4; r++) {
    const float *ar = a + r * lda;
    s[r] = ar[0] * x[0];
    for (int64_t k = 1; k < h; k++) s[r] += ar[k] * x[k];
  }
  __m128 c0 = _mm_set_ss(s[0]), c1 = _mm_set_ss(s[1]), c2 = _mm_set_ss(s[2]), c3 = _mm_set_ss(s[3]);
  int64_t k = h;
  for (; k + 4 <= K; k += 4) {
    __m128 xv = _mm_loadu_ps(x + k);
    c0 = _mm_add_ps(c0, _mm_mul_ps(_mm_loadu_ps(a0 + k), xv));
    c1 = _mm_add_ps(c1, _mm_mul_ps(_mm_loadu_ps(a1 + k), xv));
    c2 = _mm_add_ps(c2, _mm_mul_ps(_mm_loadu_ps(a2 + k), xv));
    c3 = _mm_add_ps(c3, _mm_mul_ps(_mm_loadu_ps(a3 + k), xv));
  }
  __m128 c[4] = {c0, c1, c2, c3};
  for (int r = 0; r < 4; r++) {
    __m128 t = _mm_add_ps(c[r], _mm_movehl_ps(c[r], c[r])); /* l0 + l2, l1 + l3 */
    float v = _mm_cvtss_f32(t) + _mm_cvtss_f32(_mm_shuffle_ps(t, t, 1));
    const float *ar = a + r * lda;
    for (int64_t j = k; j < K; j++) v += ar[j] * x[j];
    out[r] = v;
  }
}

/* p2 != 0 (mv/addmv of a strided vector, which MKL's gemv reads in a loop
 * of its own; the glue passes a contiguous copy): the rows after the
 * blocks sum the first product, then 8 lanes 16 products a pass (lane 0
 * starting from the first product), the lanes added in order 0..7, then
 * the rest in order; the plain sum if 17 > K (measured: 416 of 418 rows,
 * strides 2 and 3, K up to 80). */
static float row_strided_ref(const float *a, const float *x, int64_t K) {
  float s = a[0] * x[0];
  if (17 > K) {
    for (int64_t k = 1; k < K; k++) s += a[k] * x[k];
    return s;
  }
  float l[8] = {s, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 1;
  for (; k + 16 <= K; k += 16)
    for (int q = 0; q < 16; q++) l[q % 8] += a[k + q] * x[k + q];
  float r = l[0];
  for (int q = 1; q < 8; q++) r += l[q];
  for (; k < K; k++) r += a[k] * x[k];
  return r;
}

/* p3 != 0: MKL's AVX-512 sgemv 't' (Intel hosts), whose order depends on
 * no address (measured with rooted triples 2^25, -2^25, 1 and fits on
 * finite rows: 994 of 994 rows, K up to 120, 1 to 13 rows; offsets of the
 * matrix and the vector change nothing). Each row sums its first product
 * p0 apart; the products 1..K-1 go to 16 lanes ((k - 1) mod 16), each
 * lane fused in k order, the lanes halved 8, 4, 2, 1:
 *  - rows in the blocks of 4: lane 0 starts from p0 (rounded); when the
 *    first 16-wide pass is not the only one, the passes cover the whole
 *    blocks of 16 and the rest goes to 8 lanes starting from the halved
 *    sum (lane 0): the first 8 fused, the others rounded and added, then
 *    halved 4, 2, 1;
 *  - the rows after the blocks (1st, 2nd, 3rd): the 1st and 3rd take
 *    blocks of 32 in two registers (k and k + 16 of a block apart, added
 *    lane by lane after the blocks), the rest fused into those lanes; the
 *    2nd keeps one register; then the halved sum + p0.
 * C = fma(alpha, sum, beta * y), beta * y rounded (150 of 150 addmv). */
NRT_TARGET_AVX2 static float t16_fold(float *l, int h) {
  for (; h >= 1; h /= 2)
    for (int q = 0; q < h; q++) l[q] += l[q + h];
  return l[0];
}
/* lanes q = 0..15 take a[k0 + q] * x[k0 + q] for the nq products from k0
 * (the loop over whole 16s vectorises; the same fused steps either way) */
NRT_TARGET_AVX2 static void t16_lanes(float *l, const float *a, const float *x, int64_t k0, int64_t nq) {
  int64_t c = 0;
  for (; c + 16 <= nq; c += 16)
    for (int q = 0; q < 16; q++) l[q] = fmaf(a[k0 + c + q], x[k0 + c + q], l[q]);
  for (int q = 0; c + q < nq; q++) l[q] = fmaf(a[k0 + c + q], x[k0 + c + q], l[q]);
}
NRT_TARGET_AVX2 static float t16_block_row(const float *a, const float *x, int64_t K) {
  const int64_t n = K - 1, main = n >= 16 ? n / 16 * 16 : n;
  float l[16] = {0};
  l[0] = a[0] * x[0];
  t16_lanes(l, a, x, 1, main);
  float s = t16_fold(l, 8);
  if (main == n) return s;
  float r[8] = {s, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t k = main + 1; k < K; k++) {
    int64_t q = (k - 1 - main) % 8;
    if (k - 1 - main < 8) r[q] = fmaf(a[k], x[k], r[q]);
    else r[q] += a[k] * x[k];
  }
  return t16_fold(r, 4);
}
NRT_TARGET_AVX2 static float t16_tail_row(const float *a, const float *x, int64_t K, bool two_registers) {
  const int64_t n = K - 1, main = two_registers ? n / 32 * 32 : 0;
  float l[16] = {0};
  if (main > 0) {
    float r0[16] = {0}, r1[16] = {0};
    for (int64_t c = 1; c <= main; c += 32) {
      t16_lanes(r0, a, x, c, 16);
      t16_lanes(r1, a, x, c + 16, 16);
    }
    for (int q = 0; q < 16; q++) l[q] = r0[q] + r1[q];
  }
  t16_lanes(l, a, x, main + 1, n - main);
  return t16_fold(l, 8) + a[0] * x[0];
}

typedef struct sgemv_job {
  const nrt_launch *l;
  int64_t M, K, chunks;
} sgemv_job;

/* Rows per task: a multiple of 4, so no block straddles two tasks. */
#define SGEMV_ROWS 64

static void sgemv_range(void *ctx, int64_t begin, int64_t end) {
  const sgemv_job *jb = ctx;
  const nrt_launch *l = jb->l;
  const nrt_operand *C = &l->operands[0], *A = &l->operands[1], *X = &l->operands[2], *Y = &l->operands[3];
  const bool bias = l->ninputs == 3 && l->scalars[1].f != 0.0;
  const float alpha = (float)l->scalars[0].f, beta = (float)l->scalars[1].f;
  const int64_t M = jb->M, K = jb->K, nb = M / 4 * 4, lda = A->strides[1] / 4;
  for (int64_t t = begin; t < end; t++) {
    int64_t b = t / jb->chunks, i0 = (t % jb->chunks) * SGEMV_ROWS, i1 = nrt_min_i64(M, i0 + SGEMV_ROWS);
    const float *a = (const float *)((const char *)A->data + b * A->strides[0]);
    const float *x = (const float *)((const char *)X->data + b * X->strides[0]);
    float sums[SGEMV_ROWS];
    for (int64_t i = i0; i < i1 && l->params[3]; i++)
      sums[i - i0] = i < nb ? t16_block_row(a + i * lda, x, K) : t16_tail_row(a + i * lda, x, K, i - nb != 1);
    for (int64_t i = i0; i < i1 && !l->params[3];) {
      if (i < nb) {
        const float *ai = a + i * lda;
        block4(ai, lda, x, K, head_of(ai + 3 * lda), sums + (i - i0));
        i += 4;
      } else {
        bool second = i - nb == 1;
        sums[i - i0] = l->params[2] ? row_strided_ref(a + i * lda, x, K)
                                    : row_ref(a + i * lda, x, K, head_of(x), second ? 4 : 8, 8);
        i++;
      }
    }
    for (int64_t i = i0; i < i1; i++) {
      float r = alpha * sums[i - i0];
      if (l->params[3]) {
        float by = 0;
        if (bias) {
          memcpy(&by, (const char *)Y->data + b * Y->strides[0] + i * Y->strides[1], 4);
          by = beta * by;
        }
        r = fmaf(alpha, sums[i - i0], by);
      } else if (bias) {
        float y;
        memcpy(&y, (const char *)Y->data + b * Y->strides[0] + i * Y->strides[1], 4);
        r = beta * y + r;
      }
      memcpy((char *)C->data + b * C->strides[0] + i * C->strides[1], &r, 4);
    }
  }
}
#pragma GCC pop_options

nrt_status nrt_gemm_sgemv_t_execute(const nrt_launch *l) {
  const nrt_operand *C = &l->operands[0], *A = &l->operands[1], *X = &l->operands[2];
  sgemv_job jb = {.l = l, .M = l->sizes[1], .K = l->sizes[3]};
  bool f32 = C->dtype == NRT_FLOAT32 && A->dtype == NRT_FLOAT32 && X->dtype == NRT_FLOAT32 &&
             (l->ninputs < 3 || l->operands[3].dtype == NRT_FLOAT32);
  if (!f32 || l->sizes[2] != 1 || A->strides[2] != 4 || X->strides[1] != 4 || A->strides[1] % 4 != 0 ||
      l->params[1])
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "GEMM: SGEMV_T takes float32 rows of unit k-stride, a unit-stride vector and N = 1");
  if (l->sizes[0] == 0 || jb.M == 0) return NRT_SUCCESS;
  if (jb.K == 0) return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "GEMM: SGEMV_T needs K >= 1");
  jb.chunks = nrt_cdiv(jb.M, SGEMV_ROWS);
  int64_t tasks = l->sizes[0] * jb.chunks;
  /* a thread's share from ~64k multiply-adds: below, a hand-off costs more */
  int64_t per_task = SGEMV_ROWS * jb.K;
  nrt_parallel_for(tasks, nrt_max_i64(1, 65536 / per_task), sgemv_range, &jb);
  return NRT_SUCCESS;
}
