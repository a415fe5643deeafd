/* GEMM micro-kernels, shared by gemm.c (driver, packing) and gemm_simd.c
 * (the AVX2 and AVX-512 micro-kernels).
 *
 * A micro-kernel computes one MR x NR block of C from packed panels:
 *   a: kc steps of MR floats (column k of the A block),
 *   b: kc steps of NR floats (row k of the B block), 64-byte aligned,
 *   c[i * ldc + j] = (accumulate ? c[i * ldc + j] : 0) + alpha * sum_k a[k][i] * b[k][j]
 * for the full MR x NR block; the driver handles edges through a scratch
 * block. The bfloat16 kernel reads 32-bit units holding pairs of k
 * instead of floats (see gemm_simd.c). */
#ifndef NRT_KERNELS_GEMM_H
#define NRT_KERNELS_GEMM_H

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

extern const nrt_gemm_ukernel nrt_gemm_ukernel_avx512;
extern const nrt_gemm_ukernel nrt_gemm_ukernel_avx512_bf16;
/* AVX-512 packing of full panels for the 14 x 32 kernels, moving 32-bit
 * units (a float32, or a pair of bfloat16): 14 rows of A whose units are
 * contiguous; 32 columns of B whose units are contiguous. */
void nrt_gemm_pack_a14_avx512(const void *const *rows, int64_t kc, void *panel);
void nrt_gemm_pack_b32_avx512(const void *const *cols, int64_t kc, void *panel);
/* Pairs of bfloat16 from column-major A / row-major B (see gemm_simd.c). */
void nrt_gemm_pack_a14_bf16_cols_avx512(const char *a, int64_t sk, int64_t kpairs, void *panel);
void nrt_gemm_pack_b32_bf16_rows_avx512(const char *b, int64_t sk, int64_t kpairs, void *panel);
extern const nrt_gemm_ukernel nrt_gemm_ukernel_avx2;
/* The float32 micro-kernel gemm.c would pick on this host (portable,
 * AVX2 or AVX-512, after nrt_kernels_limit_isa). */
const nrt_gemm_ukernel *nrt_gemm_ukernel_f32(void);

#endif
