/* Op family RESAMPLE. Resampling: linear/cubic interpolation, grid sampling,
 * im2col/col2im, unpooling (kernels/resample*.c).
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered.
 *
 * Activation layout shared by INTERP*, MAX_UNPOOL and FRACTIONAL_MAX_POOL*:
 * sizes (ndim 8) = {N, C, OD, OH, OW, ID, IH, IW}, every activation operand
 * has byte strides {n, c, d, h, w}; 1-d and 2-d ops are the 3-d case with
 * leading extents 1 (stride 0). "O" is the resampled side, "I" the source
 * side, in forward and backward alike. */
#ifndef NRT_OPS_RESAMPLE_H
#define NRT_OPS_RESAMPLE_H

#include "nrt/launch.h"

/* Interpolation modes (INTERP p0). Index and weight rules are ATen's
 * (UpSample.h): source coordinates computed in float32, nearest through
 * floorf of a float product, linear/cubic through
 * area_pixel_compute_source_index, antialiased modes with PIL's support
 * and normalised triangle / cubic (a = -0.5) filters. */
enum {
  NRT_INTERP_NEAREST = 0,       /* upsample_nearest*d */
  NRT_INTERP_NEAREST_EXACT = 1, /* _upsample_nearest_exact*d */
  NRT_INTERP_LINEAR = 2,        /* upsample_linear1d / bilinear2d / trilinear3d */
  NRT_INTERP_CUBIC = 3,         /* upsample_bicubic2d (a = -0.75, clamped taps) */
  NRT_INTERP_AA_LINEAR = 4,     /* _upsample_bilinear2d_aa */
  NRT_INTERP_AA_CUBIC = 5       /* _upsample_bicubic2d_aa */
};

/* Grid sampler modes (GRID_SAMPLE p0 / p1), ATen's numbering. */
enum { NRT_GRID_BILINEAR = 0, NRT_GRID_NEAREST = 1, NRT_GRID_BICUBIC = 2 };
enum { NRT_GRID_PAD_ZEROS = 0, NRT_GRID_PAD_BORDER = 1, NRT_GRID_PAD_REFLECTION = 2 };

#define NRT_OPS_RESAMPLE(X)                                                   \
  /* Separable interpolation: each output point is a weighted sum over a   \
     per-dim tap set (weights depend only on sizes, mode, align_corners    \
     and scales, so the kernel builds the tables). p0 = mode (NRT_INTERP_*),\
     p1 = align_corners; p2 = the op's spatial dims, the last p2 of d, h, \
     w (1..3; 0: three): the others read their one element with weight 1  \
     (no zero-weight tap that would make an inf NaN); s0..s2 (.f) = the   \
     scales argument for d, h, w                                          \
     (0 or negative: none). Float dtypes compute in float32; integer      \
     dtypes only for the nearest modes (exact copies), and uint8 in the    \
     other forward modes with the depth unchanged: the CPU's fixed-point   \
     separable passes (w, then h, each rounded to uint8; interp_u8.c). */  \
  X(INTERP, RESAMPLE, 1, 1)          /* output y [N,C,O*]; input x [N,C,I*] */ \
  X(INTERP_BACKWARD, RESAMPLE, 1, 1) /* output grad_x [N,C,I*] (fully      \
     written, sums in float32 per (n, c) plane in a fixed order); input    \
     grad_y [N,C,O*]; params/scalars as INTERP */                          \
  /* Max unpooling: y zero-filled, then y.plane[idx] = x for every element \
     of x in order (a repeated index keeps the last value, as the CPU).    \
     Indices are int64 offsets within the output plane, d*OH*OW + h*OW + w; \
     one outside [0, OD*OH*OW) fails the launch ("Found an invalid max    \
     index"). Bytes are copied, so every dtype is exact. */                \
  X(MAX_UNPOOL, RESAMPLE, 2, 2)      /* output y [N,C,O*]; inputs x [N,C,I*],\
     indices [N,C,I*] */                                                   \
  /* im2col / col2im over 2 spatial dims. sizes (ndim 8) = {N, C, OH, OW,   \
     IH, IW, KH, KW}: OH x OW sliding-window positions over the IH x IW    \
     image; aux[0..5] = dilation h,w, padding h,w, stride h,w. Image       \
     strides {n, c, h, w}; column strides {n, c, kh, kw, oh, ow} (the      \
     column tensor [N, C*KH*KW, OH*OW] viewed 6-d by the caller). */        \
  X(IM2COL, RESAMPLE, 1, 1)          /* output col; input image (padding    \
     reads as 0); bytes copied, every dtype exact */                       \
  X(COL2IM, RESAMPLE, 1, 1)          /* output image (fully written: sum of \
     every column entry that reads it, fixed order); input col. Float in   \
     float32, integers in wrapping int64 */                                \
  /* Grid sampler. sizes (ndim 8) = {N, C, OD, OH, OW, ID, IH, IW} (2-d: OD \
     = ID = 1); input / grad_input strides {n, c, d, h, w}; output /       \
     grad_output strides {n, c, d, h, w}; grid / grad_grid strides {n, d,  \
     h, w, k} (k = coordinate x, y[, z]). p0 = interpolation (NRT_GRID_*), \
     p1 = padding mode, p2 = align_corners, p3 = 2 or 3 spatial dims       \
     (bicubic only with 2). Floats only, computed in float32. */           \
  X(GRID_SAMPLE, RESAMPLE, 2, 2)     /* output y; inputs x, grid */          \
  X(GRID_SAMPLE_BACKWARD, RESAMPLE, 3, 3) /* outputs grad_x (fully written; \
     absent when noutputs is 1), grad_grid (fully written); inputs grad_y, \
     x, grid. Work is split by n: each batch element writes its own grad_x \
     planes and grad_grid rows, summing in a fixed order */                 \
  /* Fractional max pooling forward (the backward is POOL's               \
     MAX_POOL_BACKWARD through the indices). Layout {N, C, O*, I*};       \
     aux[0..2] = pool size d, h, w; p0 = 2 or 3 spatial dims. Window      \
     starts come from ATen's generate_intervals on the per-(n, c) samples \
     (sample k of a plane drives dim w, h for 2-d and d, h, w for 3-d),   \
     evaluated in the input's dtype as the CPU does. Max rule as MAX_POOL: \
     first maximum, a NaN wins (the last one). */                         \
  X(FRACTIONAL_MAX_POOL, RESAMPLE, 2, 2) /* outputs y, int64 indices      \
     (offsets d*IH*IW + h*IW + w in the input plane); inputs x, samples   \
     [N, C, nsp] with strides {n, c, k} */

NRT_OP_FAMILY_ENUM(RESAMPLE, NRT_OPS_RESAMPLE);

#endif
