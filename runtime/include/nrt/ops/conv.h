/* Op family CONV. Convolution (kernels/conv/): forward and both backward passes.
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered. */
#ifndef NRT_OPS_CONV_H
#define NRT_OPS_CONV_H

#include "nrt/launch.h"

#define NRT_OPS_CONV(X)                                                      \
  /* Grouped N-d convolution as     \
     im2col x packed GEMM, 1-3 spatial dims (unused leading ones size 1).   \
     sizes (ndim 13) = {N, G, Cog, Cig, OD, OH, OW, ID, IH, IW, KD, KH, KW}: \
     batch, groups, out / in channels per group, output, input and kernel  \
     extents; aux[0..8] = stride d,h,w, padding d,h,w, dilation d,h,w.     \
     Activation strides {n, c, d, h, w} (channel = g * C?g + c), weight    \
     strides {o, i, kd, kh, kw} (shape [G*Cog, Cig, KD, KH, KW]), bias {c}. \
     Floats accumulate in float32 (float64 at float32); integers (not bool) \
     in wrapping int64, through the plain loop nest. Outputs may be fewer   \
     than the input allows (transposed conv with output_padding >= stride). \
     A transposed convolution is CONV_BACKWARD_INPUT of the forward one. */ \
  X(CONV, CONV, 2, 3)            /* output y [N, G*Cog, O*]; inputs x       \
     [N, G*Cig, I*], weight, optional bias [G*Cog] (ninputs 2..3) */        \
  X(CONV_BACKWARD_INPUT, CONV, 2, 3) /* output grad_x [N, G*Cig, I*] (fully    \
     written); inputs grad_y [N, G*Cog, O*], weight, optional bias [G*Cig]  \
     added to every grad_x element of its channel (ninputs 2..3) */         \
  X(CONV_BACKWARD_WEIGHT, CONV, 2, 2) /* output grad_w [G*Cog, Cig, K*] (fully \
     written); inputs grad_y [N, G*Cog, O*], x [N, G*Cig, I*] */

NRT_OP_FAMILY_ENUM(CONV, NRT_OPS_CONV);

#endif
