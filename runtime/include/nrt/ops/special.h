/* Op family SPECIAL. Special functions and extra elementwise math, run by
 * the pointwise engine (kernels/special.c). Operand layout as POINTWISE:
 * outputs, then inputs.
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered.
 *
 * All are float-domain ops (the glue's TensorIterator promotes integer
 * inputs) except HEAVISIDE, which also has an integer form. Values are
 * computed in double inside and rounded once on store. */
#ifndef NRT_OPS_SPECIAL_H
#define NRT_OPS_SPECIAL_H

#include "nrt/launch.h"

#define NRT_OPS_SPECIAL(X)                                                              \
  /* gamma family: out = f(x) */                                                        \
  X(DIGAMMA, POINTWISE, 1, 1)                                                           \
  X(LGAMMA, POINTWISE, 1, 1)                                                            \
  X(POLYGAMMA, POINTWISE, 1, 1)         /* p0: order n >= 0 */                          \
  /* modified Bessel and friends: out = f(x) */                                         \
  X(I0, POINTWISE, 1, 1)                                                                \
  X(I0E, POINTWISE, 1, 1)               /* exp(-|x|) I0(x) */                           \
  X(I1, POINTWISE, 1, 1)                                                                \
  X(I1E, POINTWISE, 1, 1)               /* exp(-|x|) I1(x) */                           \
  X(K0, POINTWISE, 1, 1)                                                                \
  X(K0E, POINTWISE, 1, 1)               /* exp(x) K0(x) */                              \
  X(K1, POINTWISE, 1, 1)                                                                \
  X(K1E, POINTWISE, 1, 1)               /* exp(x) K1(x) */                              \
  X(BESSEL_J0, POINTWISE, 1, 1)                                                         \
  X(BESSEL_J1, POINTWISE, 1, 1)                                                         \
  X(BESSEL_Y0, POINTWISE, 1, 1)                                                         \
  X(BESSEL_Y1, POINTWISE, 1, 1)                                                         \
  X(SPHERICAL_BESSEL_J0, POINTWISE, 1, 1)                                               \
  X(AIRY_AI, POINTWISE, 1, 1)                                                           \
  /* normal distribution and error functions: out = f(x) */                             \
  X(ERFCX, POINTWISE, 1, 1)                                                             \
  X(LOG_NDTR, POINTWISE, 1, 1)                                                          \
  X(NDTRI, POINTWISE, 1, 1)                                                             \
  /* elementary extras: out = f(x) */                                                   \
  X(SINC, POINTWISE, 1, 1)                                                              \
  X(ENTR, POINTWISE, 1, 1)              /* -x log x */                                  \
  X(FREXP_MANTISSA, POINTWISE, 1, 1)    /* frexp's first output */                      \
  X(FREXP_EXPONENT, POINTWISE, 1, 1)    /* frexp's second (an int32 output) */          \
  X(ROUND_DECIMALS, POINTWISE, 1, 1)    /* s0: 10^|decimals|, p0: decimals < 0 */       \
  /* binary: out = f(a, b) */                                                           \
  X(IGAMMA, POINTWISE, 2, 2)            /* regularised lower incomplete gamma P(a, x) */ \
  X(IGAMMAC, POINTWISE, 2, 2)           /* upper Q(a, x) */                             \
  X(ZETA, POINTWISE, 2, 2)              /* Hurwitz zeta(x, q) */                        \
  X(XLOG1PY, POINTWISE, 2, 2)                                                           \
  X(NEXTAFTER, POINTWISE, 2, 2)         /* in the output's dtype */                     \
  X(HEAVISIDE, POINTWISE, 2, 2)         /* a == 0 ? b : a > 0; float and integer */     \
  X(LOGADDEXP2, POINTWISE, 2, 2)                                                        \
  X(GCD, POINTWISE, 2, 2)               /* integers only; gcd(0, 0) = 0, result >= 0 */ \
  X(LCM, POINTWISE, 2, 2)               /* integers only; |a / gcd * b|, 0 if either is 0 */ \
  /* orthogonal polynomials: out = P_n(x), a = x, b = n (truncated to an integer) */    \
  X(CHEBYSHEV_T, POINTWISE, 2, 2)                                                       \
  X(CHEBYSHEV_U, POINTWISE, 2, 2)                                                       \
  X(CHEBYSHEV_V, POINTWISE, 2, 2)                                                       \
  X(CHEBYSHEV_W, POINTWISE, 2, 2)                                                       \
  X(SHIFTED_CHEBYSHEV_T, POINTWISE, 2, 2)                                               \
  X(SHIFTED_CHEBYSHEV_U, POINTWISE, 2, 2)                                               \
  X(SHIFTED_CHEBYSHEV_V, POINTWISE, 2, 2)                                               \
  X(SHIFTED_CHEBYSHEV_W, POINTWISE, 2, 2)                                               \
  X(HERMITE_H, POINTWISE, 2, 2)                                                         \
  X(HERMITE_HE, POINTWISE, 2, 2)                                                        \
  X(LAGUERRE_L, POINTWISE, 2, 2)                                                        \
  X(LEGENDRE_P, POINTWISE, 2, 2)

NRT_OP_FAMILY_ENUM(SPECIAL, NRT_OPS_SPECIAL);

#endif
