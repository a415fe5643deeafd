/* Entry points of the RESAMPLE family's kernel files, called by
 * nrt_resample_execute (kernels/resample.c) with a validated descriptor. */
#ifndef NRT_RESAMPLE_KERNELS_H
#define NRT_RESAMPLE_KERNELS_H

#include "kernels/common/common.h"
#include "nrt/ops/resample.h"

nrt_status nrt_resample_interp(const nrt_launch *l);      /* resample.c: INTERP, INTERP_BACKWARD */
nrt_status nrt_resample_unpool(const nrt_launch *l);      /* resample_unpool.c: MAX_UNPOOL */
nrt_status nrt_resample_fold(const nrt_launch *l);        /* resample_fold.c: IM2COL, COL2IM */
nrt_status nrt_resample_grid(const nrt_launch *l);        /* resample_grid.c: GRID_SAMPLE(_BACKWARD) */
nrt_status nrt_resample_fracpool(const nrt_launch *l);    /* resample_fracpool.c: FRACTIONAL_MAX_POOL */

/* Activation geometry of the {N, C, O[3], I[3]} layout. */
typedef struct nrt_resample_geom {
  int64_t N, C, O[3], I[3];
  int64_t OL, IL; /* elements per output / input plane */
} nrt_resample_geom;

/* Reads sizes (ndim 8) into g; fails on a wrong ndim or negative extent. */
nrt_status nrt_resample_geom_init(const nrt_launch *l, nrt_resample_geom *g);

/* interp_u8.c: INTERP of uint8 in the linear, cubic and antialiased modes. */
nrt_status nrt_resample_interp_u8(const nrt_launch *l, const nrt_resample_geom *g);

#endif
