/* GEMM micro-kernels, shared by the gemm and conv families: one file per
 * ISA (gemm_ukernel_avx512.c, gemm_ukernel_avx512_bf16.c,
 * gemm_ukernel_avx2.c) and the portable kernel with the choice between
 * them and the panel helpers (gemm_ukernel.c).
 *
 * A micro-kernel computes one MR x NR block of C from packed panels:
 *   a: kc steps of MR floats (column k of the A block),
 *   b: kc steps of NR floats (row k of the B block), 64-byte aligned,
 *   c[i * ldc + j] = (accumulate ? c[i * ldc + j] : 0) + alpha * sum_k a[k][i] * b[k][j]
 * for the full MR x NR block; the driver handles edges through a scratch
 * block (nrt_gemm_ukernel_block). The bfloat16 kernel reads 32-bit units
 * holding pairs of k instead of floats (see gemm_ukernel_avx512_bf16.c). */
#ifndef NRT_KERNELS_COMMON_GEMM_UKERNEL_H
#define NRT_KERNELS_COMMON_GEMM_UKERNEL_H

#include "kernels/common/common.h"

typedef void (*nrt_gemm_ukernel_fn)(int64_t kc, const float *a, const float *b, float *c,
                                    int64_t ldc, float alpha, int accumulate);

typedef struct nrt_gemm_ukernel {
  const char *name;
  int mr, nr;
  /* cache blocking for this kernel: KC deep panels, MC x NC tiles of C */
  int kc, mc, nc;
  /* panels hold pairs of bfloat16 per 32-bit unit (and kc counts pairs) */
  bool bf16_pairs;
  nrt_gemm_ukernel_fn fn;
} nrt_gemm_ukernel;

extern const nrt_gemm_ukernel nrt_gemm_ukernel_portable;
extern const nrt_gemm_ukernel nrt_gemm_ukernel_avx2;
extern const nrt_gemm_ukernel nrt_gemm_ukernel_avx512;
extern const nrt_gemm_ukernel nrt_gemm_ukernel_avx512_bf16;

/* The micro-kernel for A and B of these dtypes on this host (after
 * nrt_kernels_limit_isa): the bfloat16 pair kernel when both are bfloat16
 * and the CPU has AVX512_BF16, else the best float32 kernel. */
const nrt_gemm_ukernel *nrt_gemm_ukernel_pick(nrt_dtype a, nrt_dtype b);

/* The AVX-512 kernels' block: 14 rows of 32 columns. */
enum { NRT_GEMM_MR512 = 14, NRT_GEMM_NR512 = 32 };

/* AVX-512 packing of full panels for the 14 x 32 kernels, moving 32-bit
 * units (a float32, or a pair of bfloat16): 14 rows of A whose units are
 * contiguous; 32 columns of B whose units are contiguous. */
void nrt_gemm_pack_a14_avx512(const void *const *rows, int64_t kc, void *panel);
void nrt_gemm_pack_b32_avx512(const void *const *cols, int64_t kc, void *panel);
/* The 14 x 32 float32 kernel over strided operands, any rows x cols block
 * (rows <= 14, cols <= 32; gemm_ukernel_avx512_strided.c):
 *   c[i * ldc + j] = (accumulate ? c[i * ldc + j] : 0) + alpha * sum_k a[i * rsa + k * csa] * b[k * ldb + j]
 * for i < rows, j < cols; csa == 1 or rsa == 1 (strides in floats). A
 * packed A panel is rsa = 1, csa = 14; a packed B panel is ldb = 32.
 * nrt_gemm_ukernel_strided_ref is the plain loop it must agree with. */
void nrt_gemm_ukernel_avx512_strided(int rows, int cols, int64_t kc, const float *a, int64_t rsa, int64_t csa,
                                     const float *b, int64_t ldb, float *c, int64_t ldc, float alpha,
                                     int accumulate);
/* The bfloat16 pair version for row-major bfloat16 A: A(i, pair kp) is the
 * 32-bit unit a[i * rsa + kp] (rsa in units; the row stride must be a
 * multiple of 4 bytes and the pairs 4-byte aligned), B a packed pair
 * panel; kpairs pairs of k. */
void nrt_gemm_ukernel_avx512_bf16_strided(int rows, int cols, int64_t kpairs, const float *a, int64_t rsa,
                                          const float *b, float *c, int64_t ldc, float alpha, int accumulate);
void nrt_gemm_ukernel_strided_ref(int rows, int cols, int64_t kc, const float *a, int64_t rsa, int64_t csa,
                                  const float *b, int64_t ldb, float *c, int64_t ldc, float alpha, int accumulate);

/* float32 panels for the 14 x 32 kernel from lanes contiguous for each k
 * (column-major A, row-major B); sk is the byte step per k. */
void nrt_gemm_pack_a14_lanes_avx512(const char *base, int64_t sk, int64_t kc, float *panel);
void nrt_gemm_pack_b32_lanes_avx512(const char *base, int64_t sk, int64_t kc, float *panel);
/* Pairs of bfloat16 from column-major A / row-major B (see
 * gemm_ukernel_avx512_bf16.c). */
void nrt_gemm_pack_a14_bf16_cols_avx512(const char *a, int64_t sk, int64_t kpairs, void *panel);
void nrt_gemm_pack_b32_bf16_rows_avx512(const char *b, int64_t sk, int64_t kpairs, void *panel);

/* A full float32 panel of `uk` from w lanes of kc contiguous floats,
 * panel[k * w + i] = lanes[i][k]: an A panel (w = mr rows) or a B panel
 * (w = nr columns). The AVX-512 kernel's panels go through its in-register
 * transposes. */
void nrt_gemm_pack_full(const nrt_gemm_ukernel *uk, bool is_a, const float *const *lanes, int64_t kc, float *panel);

/* A full float32 panel of `uk` from w lanes that are contiguous for each
 * k: panel[k * w + i] = ((const float *)(base + k * sk))[i]. */
void nrt_gemm_pack_lanes(const nrt_gemm_ukernel *uk, bool is_a, const char *base, int64_t sk, int64_t kc, float *panel);

/* One micro-kernel call for a rows x cols block of C (at most MR x NR):
 * straight into C when the block is full, else through `edge` (MR * NR
 * floats) with only the block's part added or stored. */
static inline void nrt_gemm_ukernel_block(const nrt_gemm_ukernel *uk, int64_t kc, const float *ap,
                                          const float *bp, float *c, int64_t ldc, int64_t rows,
                                          int64_t cols, float alpha, int accumulate, float *edge) {
  if (rows == uk->mr && cols == uk->nr) {
    uk->fn(kc, ap, bp, c, ldc, alpha, accumulate);
    return;
  }
  uk->fn(kc, ap, bp, edge, uk->nr, alpha, 0);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++)
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + edge[i * uk->nr + j] : edge[i * uk->nr + j];
}

/* The prologue and epilogue of both AVX-512 kernels (float32 and bfloat16
 * pairs, whose accumulators are alike): the accumulators start at zero and
 * end as c = alpha * acc, plus c when accumulating. Inlined so that they
 * stay in registers. */
NRT_TARGET_AVX512 static inline __attribute__((always_inline)) void
nrt_gemm_zero_14x32_avx512(__m512 acc[NRT_GEMM_MR512][2], const float *c, int64_t ldc) {
  /* The C block is touched only after the k loop; asking for its lines now
   * hides their latency (C is often in L3 or beyond for large tiles). */
#pragma GCC unroll 14
  for (int i = 0; i < NRT_GEMM_MR512; i++) {
    _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0);
  }
#pragma GCC unroll 14
  for (int i = 0; i < NRT_GEMM_MR512; i++) {
    acc[i][0] = _mm512_setzero_ps();
    acc[i][1] = _mm512_setzero_ps();
  }
}

NRT_TARGET_AVX512 static inline __attribute__((always_inline)) void
nrt_gemm_store_14x32_avx512(__m512 acc[NRT_GEMM_MR512][2], float *c, int64_t ldc, float alpha, int accumulate) {
  __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 14
  for (int i = 0; i < NRT_GEMM_MR512; i++) {
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

#endif
