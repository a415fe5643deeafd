/* The AVX2 float32 GEMM micro-kernel (see gemm_ukernel.h for the
 * contract), compiled with a function target attribute so the library
 * still runs on x86-64-v2 hosts. 6 x 16 = 12 ymm accumulators: enough
 * independent FMA chains to hide their latency, with room for the B row
 * and the A broadcast. */
#include <immintrin.h>
#include "kernels/common/gemm_ukernel.h"

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
