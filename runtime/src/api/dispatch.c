/* The one switch from a launch to its kernel engine (nrt_kind, the kind
 * column of the op's row). */
#include "api/api.h"
#include "kernels/kernels.h"
#include "nrt/ops/foreach.h"

static nrt_status execute(const nrt_launch *launch) {
  switch (nrt_op_kind(launch->op)) {
  case NRT_KIND_POINTWISE: return nrt_pointwise_execute(launch);
  case NRT_KIND_REDUCE: return nrt_reduce_execute(launch);
  case NRT_KIND_ROW: return nrt_row_execute(launch);
  case NRT_KIND_GEMM: return nrt_gemm_execute(launch);
  case NRT_KIND_INDEX: return nrt_index_execute(launch);
  case NRT_KIND_NORM: return nrt_norm_execute(launch);
  case NRT_KIND_CONV: return nrt_conv_execute(launch);
  case NRT_KIND_POOLING: return nrt_pooling_execute(launch);
  case NRT_KIND_LINALG: return nrt_linalg_execute(launch);
  case NRT_KIND_RESAMPLE: return nrt_resample_execute(launch);
  case NRT_KIND_SELECT: return nrt_select_execute(launch);
  case NRT_KIND_SEGMENT: return nrt_segment_execute(launch);
  case NRT_KIND_COMPLEX: return nrt_complex_execute(launch);
  case NRT_KIND_ATTENTION: return nrt_attention_execute(launch);
  case NRT_KIND_RNN: return nrt_rnn_execute(launch);
  case NRT_KIND_FOREACH: return nrt_foreach_execute(launch);
  case NRT_KIND_COUNT: break;
  }
  nrt_set_error_message("kernel: unknown op %d", (int)launch->op);
  return NRT_ERROR_UNSUPPORTED;
}

/* Inline values (nrt/launch.h) become ordinary stride-0 operands pointing
 * into a copy of the descriptor that lives as long as the kernel runs, so
 * no engine knows about them. */
nrt_status nrt_kernel_execute(const nrt_launch *launch) {
  int n = launch->noutputs + launch->ninputs;
  int i = launch->noutputs;
  while (i < n && launch->operands[i].inline_slot == 0) i++;
  if (i == n) return execute(launch);
  nrt_launch bound = *launch;
  for (; i < n; i++) {
    nrt_operand *o = &bound.operands[i];
    if (o->inline_slot != 0) o->data = bound.inline_values[o->inline_slot - 1].bytes;
  }
  return execute(&bound);
}
