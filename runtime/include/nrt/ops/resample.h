/* Op family RESAMPLE. Resampling: linear/cubic interpolation, grid sampling,
 * im2col/col2im, unpooling (kernels/resample.c).
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered. */
#ifndef NRT_OPS_RESAMPLE_H
#define NRT_OPS_RESAMPLE_H

#include "nrt/launch.h"

#define NRT_OPS_RESAMPLE(X)

NRT_OP_FAMILY_ENUM(RESAMPLE, NRT_OPS_RESAMPLE);

#endif
