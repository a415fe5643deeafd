/* Family ATTENTION (nrt/ops/attention.h). */
#include "kernels/kernels.h"
#include "nrt/ops/attention.h"

nrt_status nrt_attention_execute(const nrt_launch *l) {
  /* Switch on (int)l->op: family ids are not enumerators of nrt_op. */
  switch ((int)l->op) {
  default: break;
  }
  nrt_set_error_message("attention: op %s has no kernel", nrt_op_name(l->op));
  return NRT_ERROR_UNSUPPORTED;
}
