/* The norm family's entry point. */
#include "kernels/norm/norm.h"

nrt_status nrt_norm_execute(const nrt_launch *l) {
  switch ((int)l->op) {
  case NRT_OP(LAYER_NORM):
  case NRT_OP(LAYER_NORM_BACKWARD):
  case NRT_OP(LAYER_NORM_PARAM_GRADS): return nrt_layer_norm_run(l);
  default: return nrt_channel_norm_run(l);
  }
}
