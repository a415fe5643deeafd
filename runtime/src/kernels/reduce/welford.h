/* var_mean / std_mean in the CPU's Welford order (welford.c). */
#ifndef NRT_KERNELS_REDUCE_WELFORD_H
#define NRT_KERNELS_REDUCE_WELFORD_H
#include "nrt/launch.h"
#include "nrt/status.h"

/* A VAR launch with p1 = 1: outputs var (std when p0 = 1) and mean, one
 * float dtype throughout, s0 the correction, p2 the CPU's thread count. */
nrt_status nrt_reduce_welford(const nrt_launch *l);

#endif
