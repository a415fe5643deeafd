/* Op family NN. Activations and elementwise losses beyond the base list,
 * run by the pointwise engine (kernels/nn_pointwise.c). Operand layout as
 * POINTWISE: outputs, then inputs.
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered. */
#ifndef NRT_OPS_NN_H
#define NRT_OPS_NN_H

#include "nrt/launch.h"

#define NRT_OPS_NN(X)

NRT_OP_FAMILY_ENUM(NN, NRT_OPS_NN);

#endif
