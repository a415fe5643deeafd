/* Op family SELECT. Order statistics, scans with indices, bucketing and
 * uniqueness (kernels/select.c).
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered. */
#ifndef NRT_OPS_SELECT_H
#define NRT_OPS_SELECT_H

#include "nrt/launch.h"

#define NRT_OPS_SELECT(X)

NRT_OP_FAMILY_ENUM(SELECT, NRT_OPS_SELECT);

#endif
