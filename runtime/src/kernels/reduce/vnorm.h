/* Vector norms in the CPU's float accumulator and order (vnorm.c). */
#ifndef NRT_KERNELS_REDUCE_VNORM_H
#define NRT_KERNELS_REDUCE_VNORM_H
#include "nrt/launch.h"
#include "nrt/status.h"

/* A NORM launch with p1 = 1: a finite nonzero order s0, a float32,
 * bfloat16 or float16 output, p2 the CPU's thread count. */
nrt_status nrt_reduce_vnorm(const nrt_launch *l);

#endif
