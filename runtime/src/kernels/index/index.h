/* Entry points shared inside the INDEX family (kernels/index/). */
#ifndef NRT_KERNELS_INDEX_H
#define NRT_KERNELS_INDEX_H

#include "nrt/launch.h"

nrt_status nrt_index_copy_ordered(const nrt_launch *l); /* copy_ordered.c */

#endif
