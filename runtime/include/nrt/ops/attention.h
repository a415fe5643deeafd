/* Op family ATTENTION. Fused scaled dot-product attention, forward and
 * backward (kernels/attention.c).
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered. */
#ifndef NRT_OPS_ATTENTION_H
#define NRT_OPS_ATTENTION_H

#include "nrt/launch.h"

#define NRT_OPS_ATTENTION(X)

NRT_OP_FAMILY_ENUM(ATTENTION, NRT_OPS_ATTENTION);

#endif
