/* GEMM micro-kernels, shared by gemm.c (driver, packing) and gemm_simd.c
 * (the AVX2 and AVX-512 micro-kernels).
 *
 * A micro-kernel computes one MR x NR block of C from packed panels:
 *   a: kc steps of MR floats (column k of the A block),
 *   b: kc steps of NR floats (row k of the B block), 64-byte aligned,
 *   c[i * ldc + j] = (accumulate ? c[i * ldc + j] : 0) + alpha * sum_k a[k][i] * b[k][j]
 * for the full MR x NR block; the driver handles edges through a scratch
 * block. */
#ifndef NRT_KERNELS_GEMM_H
#define NRT_KERNELS_GEMM_H

#include "kernels/kernels.h"

typedef void (*nrt_gemm_ukernel_fn)(int64_t kc, const float *a, const float *b, float *c,
                                    int64_t ldc, float alpha, int accumulate);

typedef struct nrt_gemm_ukernel {
  const char *name;
  int mr, nr;
  /* cache blocking for this kernel: KC deep panels, MC x NC tiles of C */
  int kc, mc, nc;
  nrt_gemm_ukernel_fn fn;
} nrt_gemm_ukernel;

extern const nrt_gemm_ukernel nrt_gemm_ukernel_avx512;
extern const nrt_gemm_ukernel nrt_gemm_ukernel_avx2;

#endif
