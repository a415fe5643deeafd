/* Private to the SEGMENT family: the executors that kernels/segment.c
 * dispatches to, one file per concept. Each takes a descriptor already
 * validated against its X entry (nrt/ops/segment.h). */
#ifndef NRT_SEGMENT_KERNELS_H
#define NRT_SEGMENT_KERNELS_H

#include "nrt/launch.h"

nrt_status nrt_segment_reduce_execute(const nrt_launch *l);   /* segment_reduce.c */
nrt_status nrt_segment_reduce_backward_execute(const nrt_launch *l);
nrt_status nrt_ctc_loss_execute(const nrt_launch *l);          /* segment_ctc.c */
nrt_status nrt_ctc_loss_backward_execute(const nrt_launch *l);

#endif
