/* SUM/MEAN in the CPU's cascade order (cascade.c). */
#ifndef NRT_KERNELS_REDUCE_CASCADE_H
#define NRT_KERNELS_REDUCE_CASCADE_H
#include "nrt/launch.h"
#include "nrt/status.h"

/* A SUM or MEAN launch with p0 = 1: one float dtype for input and output,
 * p1 the CPU's vector width in bytes, p2 = 1 to read NaN as 0, p3 the
 * CPU's thread count (splits a whole-tensor sum as its parallel_reduce;
 * 0 or 1: serial). */
nrt_status nrt_reduce_cascade(const nrt_launch *l);

#endif
