/* The body of the strided micro-kernels (gemm_ukernel_avx512_strided.c),
 * included once per arithmetic: define STRIDED_BLOCK_NAME, its target
 * attribute STRIDED_BLOCK_TARGET and STRIDED_MADD(acc, a, b) (float32
 * fused multiply-add, or the bfloat16 pair dot product) first. A header
 * so the two instances cannot drift apart; nothing else includes it. */
STRIDED_BLOCK_TARGET static inline __attribute__((always_inline)) void
STRIDED_BLOCK_NAME(const int rows, int64_t kc, const float *a, int64_t rsa, int64_t csa, const float *b,
              int64_t ldb, float *c, int64_t ldc, int cols, float alpha, int accumulate) {
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
      acc[i][0] = STRIDED_MADD(acc[i][0], av, b0);
      acc[i][1] = STRIDED_MADD(acc[i][1], av, b1);
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

