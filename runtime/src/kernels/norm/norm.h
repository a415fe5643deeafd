/* The norm family's private header (nrt/ops/norm.h): layer norm over rows
 * (layer_norm.c) and the channel norms, batch and group (channel_norm.c),
 * behind one entry point (norm.c). */
#ifndef NRT_KERNELS_NORM_H
#define NRT_KERNELS_NORM_H

#include "kernels/common/common.h"
#include "nrt/ops/norm.h"

nrt_status nrt_layer_norm_run(const nrt_launch *launch);   /* LAYER_NORM* */
nrt_status nrt_channel_norm_run(const nrt_launch *launch); /* BATCH_NORM*, GROUP_NORM* */

/* Mean and biased variance of x[0..n) in the order of ATen's CPU
 * RowwiseMoments (layer_norm.c); parts = 2 for a 16-bit input. */
void nrt_norm_row_moments(const float *x, int64_t n, int parts, float *mean, float *var);
/* ds = sum gy x and db = sum gy in the order of ATen's CPU map2_reduce_all
 * (8 float lanes; layer_norm.c). */
void nrt_norm_row_dot_sums(const float *gy, const float *x, int64_t n, float *ds, float *db);

#endif
