/* The kernels layer's interface to the api layer: one entry point per
 * kernel engine (nrt_kind), each called on a stream worker with a
 * validated descriptor. Each family folder keeps its internals in its own
 * private header; what families share is in kernels/common/. */
#ifndef NRT_KERNELS_KERNELS_H
#define NRT_KERNELS_KERNELS_H

#include "nrt/launch.h"

nrt_status nrt_pointwise_execute(const nrt_launch *launch); /* pointwise/ */
nrt_status nrt_reduce_execute(const nrt_launch *launch);    /* reduce/reduce.c */
nrt_status nrt_row_execute(const nrt_launch *launch);       /* reduce/row.c */
nrt_status nrt_gemm_execute(const nrt_launch *launch);      /* gemm/ */
nrt_status nrt_index_execute(const nrt_launch *launch);     /* index/ */
nrt_status nrt_norm_execute(const nrt_launch *launch);      /* norm/ */
nrt_status nrt_conv_execute(const nrt_launch *launch);      /* conv/ */
nrt_status nrt_pooling_execute(const nrt_launch *launch);   /* pooling/ */
nrt_status nrt_linalg_execute(const nrt_launch *launch);    /* linalg/ */
nrt_status nrt_resample_execute(const nrt_launch *launch);  /* resample/ */
nrt_status nrt_select_execute(const nrt_launch *launch);    /* select/ */
nrt_status nrt_segment_execute(const nrt_launch *launch);   /* segment/ */
nrt_status nrt_complex_execute(const nrt_launch *launch);   /* complex/ */
nrt_status nrt_attention_execute(const nrt_launch *launch); /* attention/ */
nrt_status nrt_rnn_execute(const nrt_launch *launch);       /* rnn/ */

#endif
