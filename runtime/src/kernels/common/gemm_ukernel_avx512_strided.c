/* The AVX-512 float32 GEMM micro-kernel over strided operands: the 14 x 32
 * kernel of gemm_ukernel_avx512.c, but reading A and B where they are
 * instead of from packed panels, and computing partial blocks directly.
 *
 * Packing costs a pass over each operand for every block of the other
 * that reuses it; when the reuse is short (M = 256 tokens, 128 x 128
 * attention heads) that pass was 10-40% of the time. The broadcast operand
 * A needs no particular layout: A(i, k) = a[i * rsa + k * csa] is read
 * with one broadcast per element either way, so row-major A (x @ W^T,
 * Q @ K^T) and column-major A (dY^T @ X) go straight in. B rows are read
 * as vectors, so B must be contiguous along n: a packed panel (ldb = 32)
 * or a row-major B (dY @ W, P @ V) with its own row stride.
 *
 * rows (1..14) is a compile-time constant in each instance, so an edge
 * block runs only the rows it has (a 128-row head is 9 full blocks and a
 * 2-row one, not 10 full ones); cols (1..32) become load/store masks, so
 * nothing outside the block is read or written. */
#include <immintrin.h>
#include "kernels/common/gemm_ukernel.h"

#define MR512 NRT_GEMM_MR512
#define NR512 NRT_GEMM_NR512

#define A_AHEAD 64

NRT_TARGET_AVX512 static inline __attribute__((always_inline)) void
strided_block(const int rows, int64_t kc, const float *a, int64_t rsa, int64_t csa, const float *b, int64_t ldb,
              float *c, int64_t ldc, int cols, float alpha, int accumulate) {
  const __mmask16 m0 = cols >= 16 ? 0xffff : (__mmask16)((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32 ? 0xffff : cols <= 16 ? 0 : (__mmask16)((1u << (cols - 16)) - 1);
  __m512 acc[MR512][2];
#pragma GCC unroll 14
  for (int i = 0; i < rows; i++) {
    acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0); /* see nrt_gemm_zero_14x32_avx512 */
    _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0);
  }
  int pr = 0; /* row-major A: the row whose line ahead this step asks for */
  for (int64_t k = 0; k < kc; k++) {
    __m512 b0 = _mm512_maskz_loadu_ps(m0, b), b1 = _mm512_maskz_loadu_ps(m1, b + 16);
    if (csa == 1) {
      /* Row-major A is `rows` separate streams, each fresh from L3 when
       * the block is first touched: one row per step, in turn, gets the
       * line A_AHEAD floats ahead, so every line of every row is asked for
       * (a row moves one line per 16 steps, the turn comes every `rows`). */
      _mm_prefetch((const char *)(a + pr * rsa + A_AHEAD), _MM_HINT_T0);
      pr = pr + 1 == rows ? 0 : pr + 1;
    }
    /* both lines of the B row eight steps ahead: an unpacked B row is not
     * next to the previous one */
    _mm_prefetch((const char *)(b + 8 * ldb), _MM_HINT_T0);
    _mm_prefetch((const char *)(b + 8 * ldb + 16), _MM_HINT_T0);
#pragma GCC unroll 14
    for (int i = 0; i < rows; i++) {
      __m512 av = _mm512_set1_ps(a[i * rsa]);
      acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
    }
    a += csa;
    b += ldb;
  }
  __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 14
  for (int i = 0; i < rows; i++) {
    float *ci = c + i * ldc;
    __m512 r0, r1;
    if (accumulate) {
      r0 = _mm512_fmadd_ps(va, acc[i][0], _mm512_maskz_loadu_ps(m0, ci));
      r1 = _mm512_fmadd_ps(va, acc[i][1], _mm512_maskz_loadu_ps(m1, ci + 16));
    } else {
      r0 = _mm512_mul_ps(va, acc[i][0]);
      r1 = _mm512_mul_ps(va, acc[i][1]);
    }
    _mm512_mask_storeu_ps(ci, m0, r0);
    _mm512_mask_storeu_ps(ci + 16, m1, r1);
  }
}

/* One instance per row count and A layout: rows of A contiguous in k
 * (csa = 1) or the block's rows contiguous for each k (rsa = 1: packed
 * panels, column-major A). */
#define NRT_STRIDED_INSTANCES(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14)

#define NRT_STRIDED_DEFINE(R)                                                                                 \
  NRT_TARGET_AVX512 static void rowmajor_##R(int64_t kc, const float *a, int64_t rsa, int64_t csa,            \
                                             const float *b, int64_t ldb, float *c, int64_t ldc, int cols,    \
                                             float alpha, int accumulate) {                                   \
    (void)csa;                                                                                                \
    strided_block(R, kc, a, rsa, 1, b, ldb, c, ldc, cols, alpha, accumulate);                                 \
  }                                                                                                           \
  NRT_TARGET_AVX512 static void kmajor_##R(int64_t kc, const float *a, int64_t rsa, int64_t csa,              \
                                           const float *b, int64_t ldb, float *c, int64_t ldc, int cols,      \
                                           float alpha, int accumulate) {                                     \
    (void)rsa;                                                                                                \
    strided_block(R, kc, a, 1, csa, b, ldb, c, ldc, cols, alpha, accumulate);                                 \
  }
NRT_STRIDED_INSTANCES(NRT_STRIDED_DEFINE)

typedef void (*strided_fn)(int64_t, const float *, int64_t, int64_t, const float *, int64_t, float *, int64_t,
                           int, float, int);
#define NRT_STRIDED_ROW(R) rowmajor_##R,
#define NRT_STRIDED_KMAJOR(R) kmajor_##R,
static const strided_fn instances[2][MR512] = {{NRT_STRIDED_INSTANCES(NRT_STRIDED_ROW)},
                                               {NRT_STRIDED_INSTANCES(NRT_STRIDED_KMAJOR)}};

void nrt_gemm_ukernel_avx512_strided(int rows, int cols, int64_t kc, const float *a, int64_t rsa, int64_t csa,
                                     const float *b, int64_t ldb, float *c, int64_t ldc, float alpha,
                                     int accumulate) {
  instances[csa != 1][rows - 1](kc, a, rsa, csa, b, ldb, c, ldc, cols, alpha, accumulate);
}
