/* The portable GEMM micro-kernel (the plain loop the others must agree
 * with, and the kernel of hosts without AVX2), the choice of micro-kernel
 * and the float32 panel packers; the ISA kernels are in
 * gemm_ukernel_<isa>.c. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/common/gemm_ukernel.h"

/* ---- portable micro-kernel --------------------------------------------- */

#define MRS 4
#define NRS 16

static void ukernel_scalar(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                           float alpha, int accumulate) {
  float acc[MRS][NRS];
  for (int i = 0; i < MRS; i++)
    for (int j = 0; j < NRS; j++) acc[i][j] = 0.0f;
  for (int64_t k = 0; k < kc; k++) {
    for (int i = 0; i < MRS; i++)
      for (int j = 0; j < NRS; j++) acc[i][j] += a[i] * b[j];
    a += MRS;
    b += NRS;
  }
  for (int i = 0; i < MRS; i++)
    for (int j = 0; j < NRS; j++)
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + alpha * acc[i][j] : alpha * acc[i][j];
}

const nrt_gemm_ukernel nrt_gemm_ukernel_portable = {
    .name = "portable-4x16", .mr = MRS, .nr = NRS, .kc = 256, .mc = 64, .nc = 256,
    .fn = ukernel_scalar};

/* The strided kernel's plain loop (see gemm_ukernel.h). */
void nrt_gemm_ukernel_strided_ref(int rows, int cols, int64_t kc, const float *a, int64_t rsa, int64_t csa,
                                  const float *b, int64_t ldb, float *c, int64_t ldc, float alpha, int accumulate) {
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) {
      float acc = 0.0f;
      for (int64_t k = 0; k < kc; k++) acc += a[i * rsa + k * csa] * b[k * ldb + j];
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + alpha * acc : alpha * acc;
    }
}

/* ---- choice ---------------------------------------------------------------- */

const nrt_gemm_ukernel *nrt_gemm_ukernel_pick(nrt_dtype a, nrt_dtype b) {
  switch (nrt_kernels_isa()) {
  case NRT_ISA_AVX512_BF16:
    if (a == NRT_BFLOAT16 && b == NRT_BFLOAT16) return &nrt_gemm_ukernel_avx512_bf16;
    return &nrt_gemm_ukernel_avx512;
  case NRT_ISA_AVX512: return &nrt_gemm_ukernel_avx512;
  case NRT_ISA_AVX2: return &nrt_gemm_ukernel_avx2;
  default: return &nrt_gemm_ukernel_portable;
  }
}

/* ---- full float32 panels --------------------------------------------------- */

void nrt_gemm_pack_full(const nrt_gemm_ukernel *uk, bool is_a, const float *const *lanes, int64_t kc, float *panel) {
  if (uk == &nrt_gemm_ukernel_avx512) {
    if (is_a) nrt_gemm_pack_a14_avx512((const void *const *)lanes, kc, panel);
    else nrt_gemm_pack_b32_avx512((const void *const *)lanes, kc, panel);
    return;
  }
  int w = is_a ? uk->mr : uk->nr;
  for (int64_t k = 0; k < kc; k++)
    for (int i = 0; i < w; i++) panel[k * w + i] = lanes[i][k];
}

void nrt_gemm_pack_lanes(const nrt_gemm_ukernel *uk, bool is_a, const char *base, int64_t sk, int64_t kc, float *panel) {
  if (uk == &nrt_gemm_ukernel_avx512) {
    if (is_a) nrt_gemm_pack_a14_lanes_avx512(base, sk, kc, panel);
    else nrt_gemm_pack_b32_lanes_avx512(base, sk, kc, panel);
    return;
  }
  int w = is_a ? uk->mr : uk->nr;
  for (int64_t k = 0; k < kc; k++)
    for (int i = 0; i < w; i++) panel[k * w + i] = ((const float *)(base + k * sk))[i];
}
