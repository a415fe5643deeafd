/* Op family NN. Activations, elementwise losses and fused elementwise
 * helpers beyond the base list, run by the pointwise engine
 * (kernels/nn_pointwise.c). Operand layout as
 * POINTWISE: outputs, then inputs.
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered. */
#ifndef NRT_OPS_NN_H
#define NRT_OPS_NN_H

#include "nrt/launch.h"

#define NRT_OPS_NN(X)                                                         \
  /* unary */                                                                \
  X(SIGNBIT, POINTWISE, 1, 1)      /* out (bool) = sign bit of x; ints x < 0 */ \
  X(ANGLE, POINTWISE, 1, 1)        /* real angle: NaN stays, x < 0 ? pi : 0 */  \
  X(THRESHOLD, POINTWISE, 1, 1)    /* x <= s0 ? s1 : x (s0 threshold, s1 value) */ \
  X(HARDSHRINK, POINTWISE, 1, 1)   /* -s0 <= x <= s0 ? 0 : x (s0 lambd) */      \
  X(SOFTSHRINK, POINTWISE, 1, 1)   /* x > s0 ? x - s0 : x < -s0 ? x + s0 : 0 */ \
  /* binary: a, b */                                                         \
  X(SHRINK_BACKWARD, POINTWISE, 2, 2) /* a = grad, b = x: -s0 <= x <= s0 ? 0 : grad \
                                         (hardshrink and softshrink alike) */ \
  X(LOGIT_BACKWARD, POINTWISE, 2, 2)  /* a = grad, b = x; p0 has eps: x     \
                                         outside [s0, s1] = [eps, 1 - eps]    \
                                         gives 0, else grad / (x (1 - x));   \
                                         without eps, x outside [0, 1] gives \
                                         NaN */                              \
  X(HUBER, POINTWISE, 2, 2)        /* a = input, b = target; s0 delta */      \
  X(SMOOTH_L1, POINTWISE, 2, 2)    /* a = input, b = target; s0 beta */       \
  X(BCE, POINTWISE, 2, 2)          /* a = input (in [0, 1]), b = target:      \
                                      log terms clamped at -100 */           \
  X(PRELU, POINTWISE, 2, 2)        /* a = x, b = weight: x > 0 ? x : w x */   \
  X(PRELU_BACKWARD_WEIGHT, POINTWISE, 2, 2) /* a = grad, b = x: x > 0 ? 0 : x grad \
                                               (summed to w's shape after) */ \
  /* ternary: a, b, c */                                                     \
  X(HUBER_BACKWARD, POINTWISE, 3, 3)     /* a = grad, b = input, c = target; \
                                            s0 delta, s1 norm (1/N or 1) */  \
  X(SMOOTH_L1_BACKWARD, POINTWISE, 3, 3) /* as HUBER_BACKWARD; s0 beta */     \
  X(BCE_BACKWARD, POINTWISE, 3, 3)       /* a = grad, b = input, c = target: \
                                            grad (x - t) / max(x (1 - x), 1e-12) */ \
  X(PRELU_BACKWARD_INPUT, POINTWISE, 3, 3) /* a = grad, b = x, c = weight:     \
                                              x > 0 ? grad : w grad */       \
  X(SCALED_ADDCMUL, POINTWISE, 3, 3) /* s0 a + (s1 b) c, one rounding (addr: \
                                        a = self, b c the outer product); p0: \
                                        s0 == 0, a is ignored (NaN too) */

NRT_OP_FAMILY_ENUM(NN, NRT_OPS_NN);

#endif
