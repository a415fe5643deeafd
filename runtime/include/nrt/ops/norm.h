/* Op family NORM. Normalisation (kernels/norm/): layer norm over rows, batch and
 * group norm over channels, forward and backward.
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered. */
#ifndef NRT_OPS_NORM_H
#define NRT_OPS_NORM_H

#include "nrt/launch.h"

#define NRT_OPS_NORM(X)                                                      \
  /* Layer norm: rows along the last dim of sizes,     \
     leading dims index rows; all float domain. */                          \
  X(LAYER_NORM, NORM, 1, 3)      /* outputs y, mean[rows], rstd[rows];       \
     inputs x, optional weight[row], optional bias[row] (ninputs 1..3,      \
     p1 bit0 = has weight, bit1 = has bias); s0 = eps */                   \
  X(LAYER_NORM_BACKWARD, NORM, 4, 5) /* output grad_x; inputs grad_y, x, mean, \
     rstd, optional weight (ninputs 4..5) */                                \
  /* Batch and group norm: activations [N, C, S] \
     with strides {n, c, s} (spatial dims collapsed into s by the caller),  \
     per-channel vectors strides {c}. Statistics accumulate in double; p1  \
     bit0 = has weight, bit1 = has bias (those inputs follow in order). */ \
  X(BATCH_NORM, NORM, 1, 3)      /* training: sizes {N, C, S}; outputs y,   \
     save_mean[C], save_invstd[C] (1/sqrt(biased var + s0)) and, when       \
     noutputs = 5, running_mean[C], running_var[C] updated in place with   \
     momentum s1 (unbiased var); inputs x, weight?, bias? (1..3) */         \
  X(BATCH_NORM_EVAL, NORM, 3, 5)      /* sizes {N, C, S}; output y, or y,   \
     save_mean[C], save_invstd[C] (running_mean, 1/sqrt(running_var + s0)); \
     inputs x, running_mean, running_var, weight?, bias? (3..5); s0 eps */  \
  X(BATCH_NORM_BACKWARD, NORM, 4, 5)      /* sizes {N, C, S}; outputs by    \
     p0 mask, in order: bit0 grad_x, bit1 grad_weight (sum dy*xhat), bit2   \
     grad_bias (sum dy); inputs grad_y, x, mean, invstd, weight? (4..5).    \
     p2 = 1 training (grad_x through the batch statistics); p2 = 0: mean,  \
     invstd are running_mean, running_var and invstd = 1/sqrt(var + s0) */  \
  X(GROUP_NORM, NORM, 1, 3)      /* sizes {N, G, Cg, S}; outputs y, mean,    \
     rstd (strides {n, g}); inputs x, weight?, bias? (1..3); s0 eps */      \
  X(GROUP_NORM_BACKWARD, NORM, 4, 5)      /* sizes {N, G, Cg, S}; outputs   \
     by p0 mask as BATCH_NORM_BACKWARD (grad_x, grad_weight, grad_bias);   \
     inputs grad_y, x, mean, rstd, weight? (4..5) */                        \
  X(LAYER_NORM_PARAM_GRADS, NORM, 4, 4) /* layer norm's grad_weight[row] and \
     grad_bias[row] (outputs by p0 mask bit1 / bit2, in that order; stride  \
     0 over the leading dims) from inputs grad_y, x, mean, rstd, in the      \
     CPU's order: p3 = its thread count; p1 = 1: its weight is float32 (its  \
     statistics of a 16-bit input are float32, else 16-bit) */

NRT_OP_FAMILY_ENUM(NORM, NRT_OPS_NORM);

/* BATCH_NORM / BATCH_NORM_EVAL: which of ATen's CPU kernels the forward
 * follows, so that results at the float limits match the CPU's
 * (kernels/norm/channel_norm.c). p1 bit2: its TensorIterator formula
 * ((x - mean) * invstd) * w + b (a non-contiguous input, weight, bias or
 * running stat), else its folded fma(x, a, b - mean * a); p1 bit3: the
 * statistics are kept in the 16-bit input dtype (no float32 parameter).
 * BATCH_NORM p2: the statistics' order and types, p3: the CPU's thread
 * count (ROWS splits the rows in that many chunks). */
#define NRT_BN_STRIDED 4
#define NRT_BN_ROUND16 8
/* BATCH_NORM_BACKWARD p1 (bit0: has weight): NRT_BN_STRIDED, the CPU's
 * TensorIterator path (input and grad not contiguous in one format);
 * NRT_BN_ROUND16, the CPU's saved mean / invstd of a 16-bit input are
 * 16-bit; NRT_BN_BWD_ROWS, its channels-last kernel (channels-last, or one
 * value per plane), else its contiguous one; p3 its thread count. */
#define NRT_BN_BWD_ROWS 16
#define NRT_BN_STATS_PLANES 0  /* contiguous NCHW with S > 1 */
#define NRT_BN_STATS_ROWS 1    /* channels-last, or S == 1 */
#define NRT_BN_STATS_STRIDED 2 /* any other input */

#endif
