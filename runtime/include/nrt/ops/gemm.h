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
  X(GEMM, GEMM, 2, 3)            /* s0 alpha, s1 beta; 3 inputs with bias */

NRT_OP_FAMILY_ENUM(GEMM, NRT_OPS_GEMM);

#endif
