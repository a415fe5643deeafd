/* The GEMM family's complex kernel (cgemm.c), reached from
 * nrt_gemm_execute for NRT_OP(CGEMM). */
#ifndef NRT_KERNELS_GEMM_CGEMM_H
#define NRT_KERNELS_GEMM_CGEMM_H

#include "nrt/launch.h"

nrt_status nrt_cgemm_execute(const nrt_launch *l);

#endif
