/* AVX-512 and AVX2 GEMM micro-kernels (see gemm.h for the contract).
 * Compiled with function target attributes so the library still runs on
 * x86-64-v2 hosts; gemm.c only calls them after checking the CPU.
 *
 * Shapes: the accumulators must fit the register file with room for the
 * B row and the A broadcast. AVX-512: 14 x 32 = 28 zmm accumulators, 2 zmm
 * of B, broadcasts folded into the FMAs. AVX2: 6 x 16 = 12 ymm
 * accumulators. Both hide the 4-cycle FMA latency with many independent
 * chains. */
#include <immintrin.h>
#include "kernels/common/gemm_ukernel.h"

#define MR512 14
#define NR512 32

NRT_TARGET_AVX512 static void ukernel_avx512(int64_t kc, const float *a, const float *b, float *c,
                                             int64_t ldc, float alpha, int accumulate) {
  __m512 acc[MR512][2];
#pragma GCC unroll 14
  for (int i = 0; i < MR512; i++) {
    acc[i][0] = _mm512_setzero_ps();
    acc[i][1] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < kc; k++) {
    __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
    _mm_prefetch((const char *)(b + 8 * NR512), _MM_HINT_T0);
#pragma GCC unroll 14
    for (int i = 0; i < MR512; i++) {
      __m512 av = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
    }
    a += MR512;
    b += NR512;
  }
  __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 14
  for (int i = 0; i < MR512; i++) {
    float *ci = c + i * ldc;
    if (accumulate) {
      _mm512_storeu_ps(ci, _mm512_fmadd_ps(va, acc[i][0], _mm512_loadu_ps(ci)));
      _mm512_storeu_ps(ci + 16, _mm512_fmadd_ps(va, acc[i][1], _mm512_loadu_ps(ci + 16)));
    } else {
      _mm512_storeu_ps(ci, _mm512_mul_ps(va, acc[i][0]));
      _mm512_storeu_ps(ci + 16, _mm512_mul_ps(va, acc[i][1]));
    }
  }
}

/* In-register 16 x 16 transpose: r[i] holds row i; afterwards r[c] holds
 * column c. Unpacks interleave 32- then 64-bit elements within 128-bit
 * lanes, then two rounds of lane shuffles gather each column's four lanes. */
NRT_TARGET_AVX512 static inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  /* s[4g + j]: lane L holds column 4L + j of rows 4g .. 4g+3 */
  __m512 s4[16];
  for (int g = 0; g < 4; g++) {
    __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
    __m512d c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
    s4[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    s4[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    s4[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    s4[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int j = 0; j < 4; j++) {
    __m512 u01 = _mm512_shuffle_f32x4(s4[j], s4[4 + j], 0x44);
    __m512 w01 = _mm512_shuffle_f32x4(s4[8 + j], s4[12 + j], 0x44);
    __m512 u23 = _mm512_shuffle_f32x4(s4[j], s4[4 + j], 0xee);
    __m512 w23 = _mm512_shuffle_f32x4(s4[8 + j], s4[12 + j], 0xee);
    r[j] = _mm512_shuffle_f32x4(u01, w01, 0x88);
    r[4 + j] = _mm512_shuffle_f32x4(u01, w01, 0xdd);
    r[8 + j] = _mm512_shuffle_f32x4(u23, w23, 0x88);
    r[12 + j] = _mm512_shuffle_f32x4(u23, w23, 0xdd);
  }
}

/* Packs a full MR512-row panel from rows of contiguous 32-bit units:
 * panel[k * 14 + r] = rows[r][k]. The units are float32 values, or pairs
 * of bfloat16 for the BF16 kernel; only bits move. Sixteen k at a time
 * through the transpose, the rest one by one. */
NRT_TARGET_AVX512 void nrt_gemm_pack_a14_avx512(const void *const *rows, int64_t kc, void *panel) {
  char *dst = panel;
  int64_t k = 0;
  for (; k + 16 <= kc; k += 16) {
    __m512 r[16];
    for (int i = 0; i < MR512; i++) r[i] = _mm512_loadu_ps((const char *)rows[i] + 4 * k);
    r[14] = r[15] = _mm512_setzero_ps();
    transpose16(r);
    for (int c = 0; c < 16; c++) _mm512_mask_storeu_ps(dst + 4 * (k + c) * MR512, 0x3fff, r[c]);
  }
  for (; k < kc; k++)
    for (int i = 0; i < MR512; i++) memcpy(dst + 4 * (k * MR512 + i), (const char *)rows[i] + 4 * k, 4);
}

/* Packs a full NR512-column panel from contiguous columns of 32-bit units
 * (B = W^T with W row-major, as in x @ W^T): panel[k * 32 + c] =
 * cols[c][k]. The panel is 64-byte aligned. */
NRT_TARGET_AVX512 void nrt_gemm_pack_b32_avx512(const void *const *cols, int64_t kc, void *panel) {
  char *dst = panel;
  int64_t k = 0;
  for (; k + 16 <= kc; k += 16) {
    for (int h = 0; h < 2; h++) {
      __m512 r[16];
      for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps((const char *)cols[16 * h + i] + 4 * k);
      transpose16(r);
      for (int c = 0; c < 16; c++) _mm512_store_ps(dst + 4 * ((k + c) * NR512 + 16 * h), r[c]);
    }
  }
  for (; k < kc; k++)
    for (int c = 0; c < NR512; c++) memcpy(dst + 4 * (k * NR512 + c), (const char *)cols[c] + 4 * k, 4);
}

/* bfloat16 pair panels from the layouts where the pairs are not
 * contiguous, interleaving two k rows/columns 16 bits at a time. */

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

/* KC * NR * 4 = 32 KiB of B streams from L2 per call while the MR x KC A
 * panel (14 KiB) stays in L1; MC x KC of A and KC x NC of B fit L2. */
const nrt_gemm_ukernel nrt_gemm_ukernel_avx512 = {
    .name = "avx512-14x32", .mr = MR512, .nr = NR512, .kc = 256, .mc = 168, .nc = 512,
    .fn = ukernel_avx512};

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
#pragma GCC unroll 14
  for (int i = 0; i < MR512; i++) {
    acc[i][0] = _mm512_setzero_ps();
    acc[i][1] = _mm512_setzero_ps();
  }
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
  __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 14
  for (int i = 0; i < MR512; i++) {
    float *ci = c + i * ldc;
    if (accumulate) {
      _mm512_storeu_ps(ci, _mm512_fmadd_ps(va, acc[i][0], _mm512_loadu_ps(ci)));
      _mm512_storeu_ps(ci + 16, _mm512_fmadd_ps(va, acc[i][1], _mm512_loadu_ps(ci + 16)));
    } else {
      _mm512_storeu_ps(ci, _mm512_mul_ps(va, acc[i][0]));
      _mm512_storeu_ps(ci + 16, _mm512_mul_ps(va, acc[i][1]));
    }
  }
}

/* Same cache budget as the float32 kernel in bytes: a pair unit covers
 * two k, so KC (in k) doubles. */
const nrt_gemm_ukernel nrt_gemm_ukernel_avx512_bf16 = {
    .name = "avx512bf16-14x32", .mr = MR512, .nr = NR512, .kc = 512, .mc = 168, .nc = 512,
    .bf16_pairs = true, .fn = ukernel_avx512_bf16};

#define MR256 6
#define NR256 16

NRT_TARGET_AVX2 static void ukernel_avx2(int64_t kc, const float *a, const float *b, float *c,
                                         int64_t ldc, float alpha, int accumulate) {
  __m256 acc[MR256][2];
#pragma GCC unroll 6
  for (int i = 0; i < MR256; i++) {
    acc[i][0] = _mm256_setzero_ps();
    acc[i][1] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < kc; k++) {
    __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < MR256; i++) {
      __m256 av = _mm256_broadcast_ss(a + i);
      acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
    }
    a += MR256;
    b += NR256;
  }
  __m256 va = _mm256_set1_ps(alpha);
#pragma GCC unroll 6
  for (int i = 0; i < MR256; i++) {
    float *ci = c + i * ldc;
    if (accumulate) {
      _mm256_storeu_ps(ci, _mm256_fmadd_ps(va, acc[i][0], _mm256_loadu_ps(ci)));
      _mm256_storeu_ps(ci + 8, _mm256_fmadd_ps(va, acc[i][1], _mm256_loadu_ps(ci + 8)));
    } else {
      _mm256_storeu_ps(ci, _mm256_mul_ps(va, acc[i][0]));
      _mm256_storeu_ps(ci + 8, _mm256_mul_ps(va, acc[i][1]));
    }
  }
}

const nrt_gemm_ukernel nrt_gemm_ukernel_avx2 = {
    .name = "avx2-6x16", .mr = MR256, .nr = NR256, .kc = 256, .mc = 120, .nc = 512,
    .fn = ukernel_avx2};
