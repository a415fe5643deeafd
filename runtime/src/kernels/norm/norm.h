/* The norm family's private header (nrt/ops/norm.h): layer norm over rows
 * (layer_norm.c) and the channel norms, batch and group (channel_norm.c),
 * behind one entry point (norm.c). */
#ifndef NRT_KERNELS_NORM_H
#define NRT_KERNELS_NORM_H

#include "kernels/common/common.h"
#include "nrt/ops/norm.h"

nrt_status nrt_layer_norm_run(const nrt_launch *launch);   /* LAYER_NORM* */
nrt_status nrt_channel_norm_run(const nrt_launch *launch); /* BATCH_NORM*, GROUP_NORM* */

#endif
