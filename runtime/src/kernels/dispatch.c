/* The one switch from a launch to its kernel family, and CPU feature
 * detection for the families that pick a vector ISA at run time. */
#include "kernels/kernels.h"
#include "nrt/ops/linalg.h"
#include "nrt/ops/norm.h"

nrt_status nrt_kernel_execute(const nrt_launch *launch) {
  switch (nrt_op_kind(launch->op)) {
  case NRT_KIND_POINTWISE: return nrt_pointwise_execute(launch);
  case NRT_KIND_REDUCE: return nrt_reduce_execute(launch);
  case NRT_KIND_ROW: return nrt_row_execute(launch);
  case NRT_KIND_GEMM: return nrt_gemm_execute(launch);
  case NRT_KIND_INDEX: return nrt_index_execute(launch);
  case NRT_KIND_NORM:
    return launch->op == NRT_OP(LAYER_NORM) || launch->op == NRT_OP(LAYER_NORM_BACKWARD)
               ? nrt_norm_execute(launch)
               : nrt_channel_norm_execute(launch);
  case NRT_KIND_LINALG:
    return launch->op == NRT_OP(CHOLESKY) || launch->op == NRT_OP(TRIANGULAR_SOLVE)
               ? nrt_linalg_execute(launch)
               : nrt_decomp_execute(launch);
  case NRT_KIND_CONV: return nrt_conv_execute(launch);
  case NRT_KIND_POOLING: return nrt_pool_execute(launch);
  case NRT_KIND_COUNT: break;
  case NRT_KIND_RESAMPLE: return nrt_resample_execute(launch);
  case NRT_KIND_SELECT: return nrt_select_execute(launch);
  case NRT_KIND_SEGMENT: return nrt_segment_execute(launch);
  case NRT_KIND_COMPLEX: return nrt_complex_execute(launch);
  case NRT_KIND_ATTENTION: return nrt_attention_execute(launch);
  }
  nrt_set_error_message("kernel: unknown op %d", (int)launch->op);
  return NRT_ERROR_UNSUPPORTED;
}

/* The detected ISA is cached once (cpuid is not free); the limit lets the
 * tests run the AVX2 and portable code paths on an AVX-512 host. Both are
 * process-wide, like nrt_kernels_set_reference(). */
static _Atomic int detected_isa = -1;
static _Atomic int isa_limit = NRT_ISA_BEST;

static int detect_isa(void) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return __builtin_cpu_supports("avx512bf16") ? NRT_ISA_AVX512_BF16 : NRT_ISA_AVX512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c"))
    return NRT_ISA_AVX2;
  return NRT_ISA_BASELINE;
}

nrt_isa nrt_kernels_isa(void) {
  int d = detected_isa;
  if (d < 0) detected_isa = d = detect_isa();
  int lim = isa_limit;
  return (nrt_isa)(d < lim ? d : lim);
}

void nrt_kernels_limit_isa(nrt_isa limit) { isa_limit = (int)limit; }
