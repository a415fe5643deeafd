/* The GEMM family's plain-loop kernel (loop.c), reached from
 * nrt_gemm_execute for NRT_OP(GEMM) with p0 != NRT_GEMM_PACKED. */
#ifndef NRT_KERNELS_GEMM_LOOP_H
#define NRT_KERNELS_GEMM_LOOP_H

#include "nrt/launch.h"

nrt_status nrt_gemm_loop_execute(const nrt_launch *l);
/* p0 = NRT_GEMM_LOOP_SGEMV_T (sgemv.c): MKL's sgemv 't' order */
nrt_status nrt_gemm_sgemv_t_execute(const nrt_launch *l);
/* p0 = NRT_GEMM_LOOP_SDOT (sdot.c): MKL's sdot order */
nrt_status nrt_gemm_sdot_execute(const nrt_launch *l);

#endif
