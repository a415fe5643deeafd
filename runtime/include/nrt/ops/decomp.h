/* Op family DECOMP. Matrix decompositions and solves: LU, QR, SVD, symmetric
 * eigen and what is built on them (kernels/decomp*.c). Batched matrices,
 * computed in double; strides per operand are {batch, row, col} in bytes
 * unless an op says otherwise.
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered. */
#ifndef NRT_OPS_DECOMP_H
#define NRT_OPS_DECOMP_H

#include "nrt/launch.h"

#define NRT_OPS_DECOMP(X)

NRT_OP_FAMILY_ENUM(DECOMP, NRT_OPS_DECOMP);

#endif
