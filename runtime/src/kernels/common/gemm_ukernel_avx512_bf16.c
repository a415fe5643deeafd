/* The AVX512_BF16 GEMM micro-kernel and the AVX-512 packers that build its
 * bfloat16 pair panels from layouts where the pairs are not contiguous
 * (see gemm_ukernel.h for the contract; the contiguous layouts go through
 * gemm_ukernel_avx512.c's 32-bit unit packers). */
#include <immintrin.h>
#include "kernels/common/gemm_ukernel.h"

#define MR512 NRT_GEMM_MR512
#define NR512 NRT_GEMM_NR512

/* A column-major (rows contiguous for each k): unit (kp, r) = (A[r][2kp],
 * A[r][2kp+1]); `a` points at A[row 0][k 0], sk is the byte step per k. */
NRT_TARGET_AVX512 void nrt_gemm_pack_a14_bf16_cols_avx512(const char *a, int64_t sk, int64_t kpairs,
                                                          void *panel) {
  uint32_t *dst = panel;
  for (int64_t kp = 0; kp < kpairs; kp++) {
    const char *c0 = a + 2 * kp * sk;
    __m256i x0 = _mm256_maskz_loadu_epi16(0x3fff, c0), x1 = _mm256_maskz_loadu_epi16(0x3fff, c0 + sk);
    __m256i lo = _mm256_unpacklo_epi16(x0, x1), hi = _mm256_unpackhi_epi16(x0, x1);
    /* lo: rows 0-3 | 8-11, hi: rows 4-7 | 12-15 */
    _mm256_storeu_si256((__m256i *)(dst + kp * MR512), _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_mask_storeu_epi32(dst + kp * MR512 + 8, 0x3f, _mm256_permute2x128_si256(lo, hi, 0x31));
  }
}

/* B row-major (columns contiguous for each k): unit (kp, c) = (B[2kp][c],
 * B[2kp+1][c]) for 32 columns; `b` points at B[k 0][col 0]. */
NRT_TARGET_AVX512 void nrt_gemm_pack_b32_bf16_rows_avx512(const char *b, int64_t sk, int64_t kpairs,
                                                          void *panel) {
  const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
  const __m512i second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  char *dst = panel;
  for (int64_t kp = 0; kp < kpairs; kp++) {
    const char *r0 = b + 2 * kp * sk;
    __m512i x0 = _mm512_loadu_si512(r0), x1 = _mm512_loadu_si512(r0 + sk);
    /* per 128-bit lane L: lo holds columns 8L..8L+3, hi 8L+4..8L+7 */
    __m512i lo = _mm512_unpacklo_epi16(x0, x1), hi = _mm512_unpackhi_epi16(x0, x1);
    _mm512_store_si512(dst + kp * 128, _mm512_permutex2var_epi64(lo, first, hi));
    _mm512_store_si512(dst + kp * 128 + 64, _mm512_permutex2var_epi64(lo, second, hi));
  }
}

/* bfloat16 x bfloat16 -> float32 with vdpbf16ps: each 32-bit unit of a
 * panel holds a pair of consecutive k, and one instruction does two
 * multiply-adds per lane, twice the float32 rate. kc counts pairs. A:
 * per pair, 14 units (one per row); B: per pair, 32 units (one per
 * column), 64-byte aligned. vdpbf16ps treats subnormal inputs and results
 * as zero, as the oneDNN kernels PyTorch uses on this hardware do. */
NRT_TARGET_AVX512_BF16 static void ukernel_avx512_bf16(int64_t kc, const float *a, const float *b,
                                                       float *c, int64_t ldc, float alpha,
                                                       int accumulate) {
  __m512 acc[MR512][2];
  nrt_gemm_zero_14x32_avx512(acc, c, ldc);
  for (int64_t k = 0; k < kc; k++) {
    __m512bh b0 = (__m512bh)_mm512_load_ps(b), b1 = (__m512bh)_mm512_load_ps(b + 16);
    _mm_prefetch((const char *)(b + 8 * NR512), _MM_HINT_T0);
#pragma GCC unroll 14
    for (int i = 0; i < MR512; i++) {
      __m512bh av = (__m512bh)_mm512_set1_ps(a[i]); /* the pair's bits, broadcast */
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, b1);
    }
    a += MR512;
    b += NR512;
  }
  nrt_gemm_store_14x32_avx512(acc, c, ldc, alpha, accumulate);
}

/* Same cache budget as the float32 kernel in bytes: a pair unit covers
 * two k, so KC (in k) doubles. */
const nrt_gemm_ukernel nrt_gemm_ukernel_avx512_bf16 = {
    .name = "avx512bf16-14x32", .mr = MR512, .nr = NR512, .kc = 512, .mc = 168, .nc = 512,
    .bf16_pairs = true, .fn = ukernel_avx512_bf16};
