/* Op family SPECIAL. Special functions and extra elementwise math, run by
 * the pointwise engine (kernels/special.c). Operand layout as POINTWISE:
 * outputs, then inputs.
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered. */
#ifndef NRT_OPS_SPECIAL_H
#define NRT_OPS_SPECIAL_H

#include "nrt/launch.h"

#define NRT_OPS_SPECIAL(X)

NRT_OP_FAMILY_ENUM(SPECIAL, NRT_OPS_SPECIAL);

#endif
