/* placeholder, being written */
#include "kernels/kernels.h"
nrt_status nrt_channel_norm_execute(const nrt_launch *l) {
  nrt_set_error_message("%s: not implemented yet", nrt_op_name(l->op));
  return NRT_ERROR_UNSUPPORTED;
}
