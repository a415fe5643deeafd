/* The AVX-512 float32 GEMM micro-kernel and its panel packers (see
 * gemm_ukernel.h for the contract). Compiled with function target
 * attributes so the library still runs on x86-64-v2 hosts; callers only
 * pick it after checking the CPU.
 *
 * Shape: the accumulators must fit the register file with room for the B
 * row and the A broadcast: 14 x 32 = 28 zmm accumulators, 2 zmm of B,
 * broadcasts folded into the FMAs; many independent chains hide the
 * 4-cycle FMA latency. */
#include <immintrin.h>
#include "kernels/common/gemm_ukernel.h"

#define MR512 NRT_GEMM_MR512
#define NR512 NRT_GEMM_NR512

NRT_TARGET_AVX512 static void ukernel_avx512(int64_t kc, const float *a, const float *b, float *c,
                                             int64_t ldc, float alpha, int accumulate) {
  __m512 acc[MR512][2];
  nrt_gemm_zero_14x32_avx512(acc, c, ldc);
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
  nrt_gemm_store_14x32_avx512(acc, c, ldc, alpha, accumulate);
}

/* KC * NR * 4 = 32 KiB of B streams from L2 per call while the MR x KC A
 * panel (14 KiB) stays in L1; MC x KC of A and KC x NC of B fit L2. */
const nrt_gemm_ukernel nrt_gemm_ukernel_avx512 = {
    .name = "avx512-14x32", .mr = MR512, .nr = NR512, .kc = 256, .mc = 168, .nc = 512,
    .fn = ukernel_avx512};

/* In-register 16 x 16 transpose: r[i] holds row i; afterwards r[c] holds
 * column c. Unpacks interleave 32- then 64-bit elements within 128-bit
 * lanes, then two rounds of lane shuffles gather each column's four lanes. */
NRT_TARGET_AVX512 static inline __attribute__((always_inline)) void transpose16(__m512 r[16]) {
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
    /* Full 16-lane stores, each overwritten two lanes later by the next
     * one: masked stores straddling lines at this 56-byte pitch made the
     * pack cost ~1.3 cycles per element. Only the panel's very last row
     * is stored masked, so nothing past the panel is written. */
    for (int c = 0; c < 15; c++) _mm512_storeu_ps(dst + 4 * (k + c) * MR512, r[c]);
    if (k + 16 < kc) _mm512_storeu_ps(dst + 4 * (k + 15) * MR512, r[15]);
    else _mm512_mask_storeu_ps(dst + 4 * (k + 15) * MR512, 0x3fff, r[15]);
  }
  for (; k < kc; k++)
    for (int i = 0; i < MR512; i++) memcpy(dst + 4 * (k * MR512 + i), (const char *)rows[i] + 4 * k, 4);
}

/* Full panels whose lanes are contiguous for each k (column-major A as in
 * dW = dY^T @ X, row-major B as in dX = dY @ W): a straight copy of 14 or
 * 32 floats per depth step from base + k * sk bytes. */
NRT_TARGET_AVX512 void nrt_gemm_pack_a14_lanes_avx512(const char *base, int64_t sk, int64_t kc, float *panel) {
  for (int64_t k = 0; k < kc; k++)
    _mm512_mask_storeu_ps(panel + k * MR512, 0x3fff, _mm512_maskz_loadu_ps(0x3fff, base + k * sk));
}

NRT_TARGET_AVX512 void nrt_gemm_pack_b32_lanes_avx512(const char *base, int64_t sk, int64_t kc, float *panel) {
  for (int64_t k = 0; k < kc; k++) {
    const char *src = base + k * sk;
    _mm512_store_ps(panel + k * NR512, _mm512_loadu_ps(src));
    _mm512_store_ps(panel + k * NR512 + 16, _mm512_loadu_ps(src + 64));
  }
}

/* Packs a full NR512-column panel from contiguous columns of 32-bit units
 * (B = W^T with W row-major, as in x @ W^T): panel[k * 32 + c] =
 * cols[c][k]. The panel is 64-byte aligned. */
NRT_TARGET_AVX512 void nrt_gemm_pack_b32_avx512(const void *const *cols, int64_t kc, void *panel) {
  char *dst = panel;
  int64_t k = 0, full = kc / 16 * 16;
  /* One half-panel (16 columns) over the whole depth, then the other: 16
   * streams at a time rather than 32 interleaved, which the prefetchers
   * follow better (packing x @ W^T's B from a 3072-deep W in L3: 0.7-1.3 ->
   * 0.35-0.5 ns per element; from DRAM, 50257 rows, ~1.1-1.2 either way). */
  for (int h = 0; h < 2; h++)
    for (k = 0; k < full; k += 16) {
      __m512 r[16];
      for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps((const char *)cols[16 * h + i] + 4 * k);
      transpose16(r);
      for (int c = 0; c < 16; c++) _mm512_store_ps(dst + 4 * ((k + c) * NR512 + 16 * h), r[c]);
    }
  for (k = full; k < kc; k++)
    for (int c = 0; c < NR512; c++) memcpy(dst + 4 * (k * NR512 + c), (const char *)cols[c] + 4 * k, 4);
}

