/* Placeholder until the index kernels land: every op of the kind is unsupported. */
#include "internal.h"

nrt_status nrt_index_execute(const nrt_launch *launch) {
  nrt_set_error_message("kernel %s: not implemented yet", nrt_op_name(launch->op));
  return NRT_ERROR_UNSUPPORTED;
}
