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
#include "kernels/gemm.h"

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

/* KC * NR * 4 = 32 KiB of B streams from L2 per call while the MR x KC A
 * panel (14 KiB) stays in L1; MC x KC of A and KC x NC of B fit L2. */
const nrt_gemm_ukernel nrt_gemm_ukernel_avx512 = {
    .name = "avx512-14x32", .mr = MR512, .nr = NR512, .kc = 256, .mc = 168, .nc = 512,
    .fn = ukernel_avx512};

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
