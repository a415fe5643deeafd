/* Op family COMPLEX. Complex elementwise ops on interleaved (re, im)
 * pairs (kernels/complex.c, complex_math.c, complex_reduce.c), and FFTs (kernels/fft.c,
 * fft_plan.c).
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered.
 *
 * Elementwise ops use the POINTWISE layout (outputs then inputs, byte
 * strides per element over `sizes`; TensorIterator's strides on the
 * complex tensors). Any operand may be complex32/64/128 or real (a real
 * input reads as (x, 0); a real output stores the real part, which is
 * PyTorch's complex -> real cast). Values compute in double and round once
 * on store, except where a complex64 result's special values or rounding
 * depend on the CPU's float arithmetic (pow, sqrt, rsqrt, reciprocal,
 * exp2, log1p, sgn: kernels/complex/math.c); compute_dtype is ignored. */
#ifndef NRT_OPS_COMPLEX_H
#define NRT_OPS_COMPLEX_H

#include "nrt/launch.h"

#define NRT_OPS_COMPLEX(X)                                                                  \
  /* data movement */                                                                       \
  X(CX_COPY, COMPLEX, 1, 1)     /* out = in, conj'd if p0, negated if p1 (conj/neg bits) */ \
  X(CX_FILL, COMPLEX, 0, 0)     /* out = s0 + i s1 */                                       \
  /* binary: out = f(a, b) */                                                               \
  X(CX_ADD, COMPLEX, 2, 2)      /* a + (s0 + i s1) * b */                                   \
  X(CX_SUB, COMPLEX, 2, 2)      /* a - (s0 + i s1) * b */                                   \
  X(CX_MUL, COMPLEX, 2, 2)                                                                  \
  X(CX_DIV, COMPLEX, 2, 2)      /* scaled (Smith's) division, no spurious overflow */       \
  X(CX_EQ, COMPLEX, 2, 2)       /* bool out: both parts equal */                            \
  X(CX_NE, COMPLEX, 2, 2)                                                                   \
  X(CX_WHERE, COMPLEX, 3, 3)    /* cond (any dtype, nonzero real part) ? a : b */           \
  /* constructors from real parts */                                                        \
  X(CX_COMPLEX, COMPLEX, 2, 2)  /* a + i b */                                               \
  X(CX_POLAR, COMPLEX, 2, 2)    /* a (cos b + i sin b) */                                   \
  /* unary */                                                                               \
  X(CX_ABS, COMPLEX, 1, 1)      /* |z| (hypot; the output is real) */                       \
  X(CX_ANGLE, COMPLEX, 1, 1)    /* atan2(im, re) (real output) */                           \
  X(CX_SGN, COMPLEX, 1, 1)      /* z / |z|, 0 at 0; p0 = the CPU's vector block (elements   \
                                   of a row its vector body takes, 0: none) */              \
  X(CX_MATH, COMPLEX, 1, 1)     /* p0 = the base op computed on z: EXP, EXP2, EXPM1, LOG,   \
                                   LOG2, LOG10, LOG1P, SQRT, RSQRT, RECIPROCAL, SIN, COS,   \
                                   TAN, SINH, COSH, TANH, ASIN, ACOS, ATAN, ASINH, ACOSH,   \
                                   ATANH, SIGMOID; ISNAN, LOGICAL_NOT (bool outputs) */     \
  X(CX_POW_SCALAR, COMPLEX, 1, 1) /* z ** (s0 + s1 i) as pow.Tensor_Scalar: x*x, sqrt,      \
                                   1/x... for 2, 3, 0.5, -0.5, -1, -2, else cpow */         \
  X(CX_POW, COMPLEX, 2, 2)      /* a ** b = C99 cpow (cpowf for complex64 results); p0 = 1: \
                                   b is a Tensor_Scalar exponent (as CX_POW_SCALAR), 2: a   \
                                   is a Scalar_Tensor base (1 ** b = 1); p1 (also of        \
                                   CX_POW_SCALAR) = the CPU's vector block, as CX_SGN's p0 */ \
  X(CX_LOGICAL, COMPLEX, 2, 2)  /* bool out; p0 = 0 and, 1 or, 2 xor of (a != 0, b != 0) */ \
  X(CX_LOGADDEXP, COMPLEX, 2, 2) /* log(exp(a) + exp(b)), PyTorch's complex formula: the     \
                                   operand with the smaller real part is "min";             \
                                   log1p(exp(min - max)) + max; NaN in either part of       \
                                   either -> NaN + NaN i; equal infinite real parts: -inf   \
                                   gives min, +inf log(exp(min) + exp(max)) */              \
  /* ternary */                                                                             \
  X(CX_ADDCMUL, COMPLEX, 3, 3)  /* self + (s0 + i s1) * t1 * t2 */                          \
  X(CX_ADDCDIV, COMPLEX, 3, 3)  /* self + (s0 + i s1) * t1 / t2 */                          \
  X(CX_LERP, COMPLEX, 3, 3)     /* self + w (end - self), from end when |w| >= 0.5 */       \
  /* reduction, REDUCE layout: operands[0] has stride 0 along reduced dims */               \
  X(CX_REDUCE, COMPLEX, 1, 1)   /* p0: 0 sum, 1 mean (sum / reduced count), 2 prod,         \
                                   3 all, 4 any (nonzero tests; bool outputs); prod with    \
                                   p1 != 0: the CPU's order in the dtype's precision, p1 =  \
                                   its vector width in bytes */                             \
  /* FFTs along one dim of an N-d tensor, batched over the others (ndim >= 1).              \
     sizes = the output's shape, p0 = the transformed dim, aux[0] = the input's             \
     length along it (the other dims match the output); s0 = scale applied to               \
     the result (normalisation). Any length (mixed radix, Bluestein for large               \
     prime factors); double inside. */                                                      \
  X(FFT_C2C, COMPLEX, 1, 1)     /* complex -> complex, p1 = 1 forward (e^-i), 0 inverse;    \
                                   input length == output length */                         \
  X(FFT_R2C, COMPLEX, 1, 1)     /* real -> complex, forward; output length n/2+1            \
                                   (onesided) or n, n = aux[0] */                           \
  X(FFT_C2R, COMPLEX, 1, 1)     /* Hermitian complex -> real, inverse (e^+i); output        \
                                   length n: uses input[0 .. n/2] (zeros beyond aux[0]),    \
                                   imaginary parts of the 0 and n/2 terms ignored */

NRT_OP_FAMILY_ENUM(COMPLEX, NRT_OPS_COMPLEX);

#endif
