/* Op family GEMM. Matrix multiplication (kernels/gemm/): batched, strided
 * operands (no copy for transposed views), optional bias.
 * sizes = {batch, M, N, K}; operands: 0 = C (out), 1 = A, 2 = B, 3 = optional
 * bias/C-in (ninputs == 3); strides per operand: A {batch, m, k}, B {batch,
 * k, n}, C/bias {batch, m, n}. C = alpha * A@B + beta * bias.
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered. */
#ifndef NRT_OPS_GEMM_H
#define NRT_OPS_GEMM_H

#include "nrt/launch.h"

#define NRT_OPS_GEMM(X)                                                      \
  X(GEMM, GEMM, 2, 3)            /* s0 alpha, s1 beta; 3 inputs with bias; p0, p1 */ \
  X(CGEMM, GEMM, 2, 3)           /* complex: s0+s1 i alpha, s2+s3 i beta, p0..p2 */

NRT_OP_FAMILY_ENUM(GEMM, NRT_OPS_GEMM);

/* Where CGEMM applies alpha: the CPU's complex GEMM paths differ in it, and
 * so in where inf/NaN parts cancel (kernels/gemm/cgemm.c). */
typedef enum nrt_cgemm_alpha {
  NRT_CGEMM_ALPHA_NONE = 0,  /* C = A @ B (alpha, beta, bias unused) */
  NRT_CGEMM_ALPHA_AFTER = 1, /* C = alpha * (A @ B) + beta * bias */
  NRT_CGEMM_ALPHA_A = 2,     /* C = beta * bias, then += (alpha * a_k) * b_k */
  NRT_CGEMM_ALPHA_B = 3,     /* C = beta * bias, then += a_k * (alpha * b_k) */
} nrt_cgemm_alpha; /* p1 != 0: C aliases itself, computed in order on one thread;
                     p2 != 0: ALPHA_AFTER adds the bias as is for beta == 1;
                     p3 != 0: ALPHA_AFTER adds 1 * (beta * bias) for beta != 1;
                     aux[0] > 0: each output's sum in that many lanes, then
                     halves (MKL's AVX-512 gemv 't'; kernels/gemm/cgemm.c) */

/* GEMM p0: how the sum is formed. PACKED: the packed micro-kernels (fused
 * multiply-adds over k blocks, bias added to the finished sum). The others
 * are the CPU's plain loops (kernels/gemm/loop.c: products rounded, added in
 * k order, float or, for float64, double accumulation), with alpha and the
 * bias where nrt_cgemm_alpha's AFTER / A / B put them. p1 != 0 (loops): C
 * aliases itself, computed in order on one thread. p2 != 0 (ALPHA_A /
 * ALPHA_B): each product is fused into C (fma(alpha * a_k, b_k, c)); p3 != 0
 * (ALPHA_A / ALPHA_B): the products summed from 0, the sum and beta * bias
 * each rounded to C's dtype and added last;
 * (AFTER) beta * bias rounded to C's dtype before the sum is added;
 * (PACKED) C = fma(beta, bias, alpha * sum) unless alpha == beta == 1. */
typedef enum nrt_gemm_order {
  NRT_GEMM_PACKED = 0,
  NRT_GEMM_LOOP_AFTER = 1,   /* C = alpha * sum + beta * bias */
  NRT_GEMM_LOOP_ALPHA_A = 2, /* C = beta * bias, then += (alpha * a_k) * b_k */
  NRT_GEMM_LOOP_ALPHA_B = 3, /* C = beta * bias, then += a_k * (alpha * b_k) */
  NRT_GEMM_LOOP_DOT8 = 4,    /* as AFTER, the sum in 8 lanes (k mod 8), halved
                                4 + 4, 2 + 2, 1 + 1, then the k % 8 tail in order */
  NRT_GEMM_LOOP_SUM4 = 5,    /* float only: C = fma(beta, bias, alpha * sum), the sum
                                in 4 partials (k mod 4, fused) over whole blocks
                                of 4, the rest added unfused to the first */
  NRT_GEMM_LOOP_VDOT = 6,    /* float only: SUM4's C with the sum as ATen's
                                vectorised dot (kernels/gemm/loop.c) */
  NRT_GEMM_LOOP_SGEMV_T = 7, /* float32, N = 1, A's rows and B of unit k-stride:
                                MKL's sgemv 't' order (kernels/gemm/sgemv.c);
                                p2 != 0: B was a strided vector (mv), copied */
  NRT_GEMM_LOOP_SGEMV_N8 = 8, /* float only: C = beta * bias, then k in blocks of
                                 8 and a fused tail, as MKL's AVX-512 sgemv 'n'
                                 (kernels/gemm/loop.c); alpha on A's element */
  NRT_GEMM_LOOP_SDOT = 9,     /* float32, M = N = 1, no bias: C = A's row . B's
                                 column in MKL's AVX-512 sdot order
                                 (kernels/gemm/sdot.c); p2 != 0: an increment
                                 other than 1 (its strided kernel) */
} nrt_gemm_order;

#endif
