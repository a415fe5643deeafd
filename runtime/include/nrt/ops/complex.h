/* Op family COMPLEX. Complex elementwise ops on interleaved (re, im)
 * pairs, and FFTs (kernels/complex.c).
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered. */
#ifndef NRT_OPS_COMPLEX_H
#define NRT_OPS_COMPLEX_H

#include "nrt/launch.h"

#define NRT_OPS_COMPLEX(X)

NRT_OP_FAMILY_ENUM(COMPLEX, NRT_OPS_COMPLEX);

#endif
