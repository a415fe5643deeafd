/* Family SPECIAL (nrt/ops/special.h): special functions and extra
 * elementwise math as pointwise block functions. */
#include "kernels/kernels.h"
#include "nrt/ops/special.h"

const nrt_pw_kernel *nrt_pw_special_kernel(nrt_op op) {
  /* Switch on (int)op: family ids are not enumerators of nrt_op. */
  switch ((int)op) {
  default: return NULL;
  }
}
