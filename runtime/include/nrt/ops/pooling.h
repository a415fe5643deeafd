/* Op family POOLING. Spatial pooling (kernels/pooling/): max, average, adaptive,
 * forward and backward.
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered. */
#ifndef NRT_OPS_POOLING_H
#define NRT_OPS_POOLING_H

#include "nrt/launch.h"

#define NRT_OPS_POOLING(X)                                                      \
  /* Windows over the (d, h, w) planes  \
     of each (n, c). sizes (ndim 11) = {N, C, OD, OH, OW, ID, IH, IW, KD,   \
     KH, KW}; aux[0..8] = stride d,h,w, padding d,h,w, dilation d,h,w;      \
     strides {n, c, d, h, w}. p0 = 1: adaptive windows (start            \
     floor(o*I/O), end ceil((o+1)*I/O); kernel, aux ignored). Indices are  \
     int64 offsets within the input plane, d*IH*IW + h*IW + w. */           \
  X(MAX_POOL, POOLING, 1, 1)     /* outputs y, indices; input x. NaN wins   \
     (the last NaN of a window); an all -inf window gives its first        \
     in-bounds element */                                                  \
  X(MAX_POOL_BACKWARD, POOLING, 2, 2) /* output grad_x (fully written); inputs  \
     grad_y, indices (shaped like grad_y) */                                \
  X(AVG_POOL, POOLING, 1, 1)     /* output y; input x. p1 count_include_pad, \
     p2 divisor_override (0: none); window ends clip at I + pad for the    \
     divisor, at I for the sum (ATen's rule) */                            \
  X(AVG_POOL_BACKWARD, POOLING, 1, 1) /* output grad_x (fully written); input    \
     grad_y; params as AVG_POOL */

NRT_OP_FAMILY_ENUM(POOLING, NRT_OPS_POOLING);

#endif
