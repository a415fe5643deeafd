/* Family NN (nrt/ops/nn.h): activations and elementwise losses beyond the
 * base list, as pointwise block functions. */
#include "kernels/kernels.h"
#include "nrt/ops/nn.h"

const nrt_pw_kernel *nrt_pw_nn_kernel(nrt_op op) {
  /* Switch on (int)op: family ids are not enumerators of nrt_op. */
  switch ((int)op) {
  default: return NULL;
  }
}
