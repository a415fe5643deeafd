/* The AVX-512 float32 GEMM micro-kernel over strided operands: the 14 x 32
 * kernel of gemm_ukernel_avx512.c, but reading A and B where they are
 * instead of from packed panels, and computing partial blocks directly;
 * and its bfloat16 pair twin (vdpbf16ps) for row-major bfloat16 A, whose
 * k pairs are already adjacent, against packed pair panels of B.
 *
 * Packing costs a pass over each operand for every block of the other
 * that reuses it; when the reuse is short (M = 256 tokens, 128 x 128
 * attention heads) that pass was 10-40% of the time. The broadcast operand
 * A needs no particular layout: A(i, k) = a[i * rsa + k * csa] is read
 * with one broadcast per element either way, so row-major A (x @ W^T,
 * Q @ K^T) and column-major A (dY^T @ X) go straight in. B rows are read
 * as vectors, so B must be contiguous along n: a packed panel (ldb = 32)
 * or a row-major B (dY @ W, P @ V) with its own row stride.
 *
 * rows (1..14) is a compile-time constant in each instance, so an edge
 * block runs only the rows it has (a 128-row head is 9 full blocks and a
 * 2-row one, not 10 full ones); cols (1..32) become load/store masks, so
 * nothing outside the block is read or written. */
#include <immintrin.h>
#include "kernels/common/gemm_ukernel.h"

#define MR512 NRT_GEMM_MR512
#define NR512 NRT_GEMM_NR512

#define A_AHEAD 64

/* float32: acc + a * b */
#define STRIDED_BLOCK_NAME strided_block
#define STRIDED_BLOCK_TARGET NRT_TARGET_AVX512
#define STRIDED_MADD(acc, a, b) _mm512_fmadd_ps(a, b, acc)
#include "kernels/common/gemm_ukernel_avx512_strided_block.h"
#undef STRIDED_BLOCK_NAME
#undef STRIDED_BLOCK_TARGET
#undef STRIDED_MADD

/* bfloat16 pairs per 32-bit unit, as in gemm_ukernel_avx512_bf16.c */
#define STRIDED_BLOCK_NAME strided_block_bf16
#define STRIDED_BLOCK_TARGET NRT_TARGET_AVX512_BF16
#define STRIDED_MADD(acc, a, b) _mm512_dpbf16_ps(acc, (__m512bh)(a), (__m512bh)(b))
#include "kernels/common/gemm_ukernel_avx512_strided_block.h"
#undef STRIDED_BLOCK_NAME
#undef STRIDED_BLOCK_TARGET
#undef STRIDED_MADD

/* One instance per row count and A layout: rows of A contiguous in k
 * (csa = 1) or the block's rows contiguous for each k (rsa = 1: packed
 * panels, column-major A). */
#define NRT_STRIDED_INSTANCES(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14)

#define NRT_STRIDED_DEFINE(R)                                                                                 \
  NRT_TARGET_AVX512 static void rowmajor_##R(int64_t kc, const float *a, int64_t rsa, int64_t csa,            \
                                             const float *b, int64_t ldb, float *c, int64_t ldc, int cols,    \
                                             float alpha, int accumulate) {                                   \
    (void)csa;                                                                                                \
    strided_block(R, kc, a, rsa, 1, b, ldb, c, ldc, cols, alpha, accumulate);                          \
  }                                                                                                           \
  NRT_TARGET_AVX512 static void kmajor_##R(int64_t kc, const float *a, int64_t rsa, int64_t csa,              \
                                           const float *b, int64_t ldb, float *c, int64_t ldc, int cols,      \
                                           float alpha, int accumulate) {                                     \
    (void)rsa;                                                                                                \
    strided_block(R, kc, a, 1, csa, b, ldb, c, ldc, cols, alpha, accumulate);                          \
  }                                                                                                           \
  NRT_TARGET_AVX512_BF16 static void bf16_rowmajor_##R(int64_t kc, const float *a, int64_t rsa, int64_t csa,  \
                                                       const float *b, int64_t ldb, float *c, int64_t ldc,    \
                                                       int cols, float alpha, int accumulate) {               \
    (void)csa;                                                                                                \
    strided_block_bf16(R, kc, a, rsa, 1, b, ldb, c, ldc, cols, alpha, accumulate);                           \
  }
NRT_STRIDED_INSTANCES(NRT_STRIDED_DEFINE)

typedef void (*strided_fn)(int64_t, const float *, int64_t, int64_t, const float *, int64_t, float *, int64_t,
                           int, float, int);
#define NRT_STRIDED_ROW(R) rowmajor_##R,
#define NRT_STRIDED_KMAJOR(R) kmajor_##R,
#define NRT_STRIDED_BF16(R) bf16_rowmajor_##R,
static const strided_fn instances[2][MR512] = {{NRT_STRIDED_INSTANCES(NRT_STRIDED_ROW)},
                                               {NRT_STRIDED_INSTANCES(NRT_STRIDED_KMAJOR)}};

static const strided_fn bf16_instances[MR512] = {NRT_STRIDED_INSTANCES(NRT_STRIDED_BF16)};

void nrt_gemm_ukernel_avx512_bf16_strided(int rows, int cols, int64_t kpairs, const float *a, int64_t rsa,
                                          const float *b, float *c, int64_t ldc, float alpha, int accumulate) {
  bf16_instances[rows - 1](kpairs, a, rsa, 1, b, NR512, c, ldc, cols, alpha, accumulate);
}

void nrt_gemm_ukernel_avx512_strided(int rows, int cols, int64_t kc, const float *a, int64_t rsa, int64_t csa,
                                     const float *b, int64_t ldb, float *c, int64_t ldc, float alpha,
                                     int accumulate) {
  instances[csa != 1][rows - 1](kc, a, rsa, csa, b, ldb, c, ldc, cols, alpha, accumulate);
}
