/* Op family SEGMENT. Keyed and segmented reductions and pairwise distances
 * (kernels/segment.c).
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered.
 *
 * Index operands (indices, offsets) may be any integer dtype and are read
 * as int64. Float operands compute in float32 (distances in double); every
 * op here is floating-only. Each kernel writes every element of its
 * outputs, and each output element is produced by exactly one task, so
 * results do not depend on the thread count. */
#ifndef NRT_OPS_SEGMENT_H
#define NRT_OPS_SEGMENT_H

#include "nrt/launch.h"

/* EMBEDDING_BAG modes (p0), ATen's numbering. */
enum { NRT_BAG_SUM = 0, NRT_BAG_MEAN = 1, NRT_BAG_MAX = 2 };

#define NRT_OPS_SEGMENT(X)                                                    \
  /* Bags of embedding rows. sizes (ndim 3) = {B, D, N}: bags, embedding   \
     width, number of indices. Outputs: out [B, D] strides {b, d};          \
     offset2bag int64 [N] (bag of each index) strides {n}; bag_size int64  \
     [B] (indices in the bag other than padding_idx) strides {b};          \
     with noutputs = 4, max_indices int64 [B, D] strides {b, d} (MAX mode: \
     the weight row of each maximum, the first on ties, -1 for an empty    \
     bag). Inputs: weight [V, D] strides {v, d}, indices [N] strides {n},  \
     offsets strides {b} (B + p2 entries), optional per_sample_weights [N] \
     strides {n} (SUM mode; ninputs 4). p0 = mode (NRT_BAG_*), p1 =        \
     padding_idx (-1: none; such indices add nothing), p2 =                \
     include_last_offset (offsets[B] ends the last bag, else N does);     \
     aux[0] = V. Bag b is [offsets[b], offsets[b+1]). Fails on offsets[0] \
     != 0, decreasing offsets, offsets past N, or an index outside [0, V). \
     SUM / MEAN accumulate in float32 in index order; an empty bag gives 0. */ \
  X(EMBEDDING_BAG, SEGMENT, 3, 4)                                           \
  /* Pairwise p-norm distances between rows. sizes (ndim 4) = {B, P, R,    \
     M}. s0 (.f) = p >= 0 (inf allowed): p = 0 counts differing           \
     coordinates, p = inf takes the largest |difference|. Sums in double. */ \
  X(CDIST, SEGMENT, 2, 2)            /* output dist [B, P, R] strides      \
     {b, p, r}; inputs x1 [B, P, M] strides {b, p, m}, x2 [B, R, M]       \
     strides {b, r, m} */                                                  \
  X(CDIST_BACKWARD, SEGMENT, 4, 4)   /* output grad_x1 [B, P, M] strides    \
     {b, p, m}; inputs grad [B, P, R] strides {b, p, r}, x1, x2 (as CDIST), \
     dist [B, P, R] (CDIST's result) strides {b, p, r}; s0 = p.           \
     grad_x1[i] = sum_j grad[i, j] * d dist(x1_i, x2_j) / d x1_i, with 0  \
     where dist is 0. The gradient of x2 is this op with the roles        \
     exchanged and grad, dist transposed. */                               \
  X(PDIST, SEGMENT, 1, 1)            /* sizes {N, M}; output [N(N-1)/2]    \
     strides {k}: the distances of rows i < j in row-major order of       \
     (i, j); input x [N, M] strides {n, m}; s0 = p as CDIST */             \
  X(PDIST_BACKWARD, SEGMENT, 3, 3)   /* sizes {N, M}; output grad_x [N, M] \
     strides {n, m}; inputs grad [N(N-1)/2] strides {k}, x [N, M], pdist   \
     [N(N-1)/2] strides {k}; s0 = p */

NRT_OP_FAMILY_ENUM(SEGMENT, NRT_OPS_SEGMENT);

#endif
