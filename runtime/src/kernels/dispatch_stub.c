/* TEMPORARY stub so the runtime core links before kernels/dispatch.c
 * lands. Delete this file as soon as dispatch.c exists. */
#include "internal.h"

nrt_status nrt_kernel_execute(const nrt_launch *launch) {
  nrt_set_error_message("no kernels built (dispatch stub): %s", nrt_op_name(launch->op));
  return NRT_ERROR_UNSUPPORTED;
}
