/* Op family SEGMENT. Keyed and segmented reductions and pairwise distances
 * (kernels/segment.c).
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered. */
#ifndef NRT_OPS_SEGMENT_H
#define NRT_OPS_SEGMENT_H

#include "nrt/launch.h"

#define NRT_OPS_SEGMENT(X)

NRT_OP_FAMILY_ENUM(SEGMENT, NRT_OPS_SEGMENT);

#endif
