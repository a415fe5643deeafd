/* The elementwise FOREACH ops as block functions. Each expression is the
 * one the base list's single-tensor kernel computes (kernels/pointwise/
 * binary.c, unary.c), so a foreach op gives the bits of the per-tensor
 * launches it replaces: same association, no contraction into FMAs (the
 * runtime builds with -std=c11, which turns contraction off), exp through
 * vmath.h on the fast path and libm on the reference one. The engines
 * cannot share code (families include no other family), hence the copies;
 * tests/test_foreach.py compares the two on the device. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/foreach/foreach.h"

#define FE_U __attribute__((unused))
#define FE_X1 FE_U const float x = a[i];
#define FE_X2 FE_U const float x = a[i], y = b[i];
#define FE_X3 FE_U const float x = a[i], y = b[i], z = c[i];

#define FE_DEF(fname, ATTR, ARITY, EXPR)                                                      \
  ATTR static void fname(float *out, const float *a, const float *b, const float *c, int64_t n, \
                         const fe_args *k) {                                                  \
    FE_U const float alpha = k->alpha, v = k->v;                                              \
    for (int64_t i = 0; i < n; i++) {                                                         \
      FE_X##ARITY                                                                             \
      out[i] = (EXPR);                                                                        \
    }                                                                                         \
  }
/* name_f32 and name_f32_avx512 (picked on AVX-512 hosts). */
#define FE_MV(name, ARITY, EXPR)              \
  FE_DEF(name##_f32, , ARITY, EXPR)           \
  FE_DEF(name##_f32_avx512, NRT_TARGET_AVX512, ARITY, EXPR)
#define FE_F32(name, ARITY, EXPR) FE_DEF(name##_f32, , ARITY, EXPR)

/* NaN-propagating max/min, as torch.maximum and clamp: any NaN wins. */
static inline float fe_maxf(float a, float b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
static inline float fe_minf(float a, float b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }

/* One fused multiply-add each, as the single-tensor ADD/SUB/ADDCMUL/LERP
 * (the CPU's _foreach_ ops run the single-tensor kernels per tensor). */
FE_MV(add, 2, alpha == 1.0f ? x + y : fmaf(alpha, y, x))
FE_MV(sub, 2, alpha == 1.0f ? x - y : fmaf(-alpha, y, x))
FE_MV(mul, 2, x * y)
FE_MV(div, 2, x / y)
FE_MV(maximum, 2, fe_maxf(x, y))
FE_MV(minimum, 2, fe_minf(x, y))
FE_F32(pow, 2, powf(x, y))
FE_F32(rpow, 2, powf(y, x))
/* ATen's association: self + (value * t1) * t2, self + (value * t1) / t2. */
FE_MV(addcmul, 3, fmaf(v * y, z, x))
FE_MV(addcdiv, 3, x + v * y / z)
/* ATen's lerp switches formula at |w| = 0.5 so that w = 1 gives end exactly. */
FE_MV(lerp, 3, fabsf(z) < 0.5f ? fmaf(z, y - x, x) : fmaf(z - 1.0f, y - x, y))
FE_MV(neg, 1, -x)
FE_MV(reciprocal, 1, 1.0f / x)
FE_MV(abs, 1, fabsf(x))
/* torch.sign: NaN -> 0 and -0 -> 0. */
FE_MV(sign, 1, (float)((x > 0.0f) - (x < 0.0f)))
FE_MV(exp, 1, nrt_vexpf(x))
FE_F32(exp_ref, 1, expf(x))

static void sqrt_f32(float *out, const float *a, const float *b, const float *c, int64_t n, const fe_args *k) {
  nrt_sqrt_block(out, a, n);
}

/* x ** e for a scalar exponent, as POW_SCALAR computes it. */
static void pow_scalar_f32(float *out, const float *a, const float *b, const float *c, int64_t n,
                           const fe_args *k) {
  nrt_pow_scalar_block(out, a, n, k->e, k->dt == NRT_BFLOAT16);
}

#define FE_CASE(OP, ...)                          \
  case NRT_OP_##OP: {                             \
    static const fe_kernel k_ = {__VA_ARGS__};    \
    return &k_;                                   \
  }
#define FE_BUILDS(name) .f32 = name##_f32, .f32_avx512 = name##_f32_avx512

const fe_kernel *nrt_fe_kernel(nrt_op op) {
  switch ((int)op) { /* FOREACH ids lie past nrt_op's enumerators */
    FE_CASE(FOREACH_ADD, FE_BUILDS(add), .ninputs = 2, .scalar = 1)
    FE_CASE(FOREACH_SUB, FE_BUILDS(sub), .ninputs = 2, .scalar = 1)
    FE_CASE(FOREACH_MUL, FE_BUILDS(mul), .ninputs = 2, .scalar = 1)
    FE_CASE(FOREACH_DIV, FE_BUILDS(div), .ninputs = 2, .scalar = 1)
    FE_CASE(FOREACH_MAXIMUM, FE_BUILDS(maximum), .ninputs = 2, .scalar = 1)
    FE_CASE(FOREACH_MINIMUM, FE_BUILDS(minimum), .ninputs = 2, .scalar = 1)
    FE_CASE(FOREACH_POW, .f32 = pow_f32, .scalar_f32 = pow_scalar_f32, .ninputs = 2, .scalar = 1)
    FE_CASE(FOREACH_RPOW, .f32 = rpow_f32, .ninputs = 2, .scalar = 1)
    FE_CASE(FOREACH_ADDCMUL, FE_BUILDS(addcmul), .ninputs = 3, .scalar = FE_VALUE)
    FE_CASE(FOREACH_ADDCDIV, FE_BUILDS(addcdiv), .ninputs = 3, .scalar = FE_VALUE)
    FE_CASE(FOREACH_LERP, FE_BUILDS(lerp), .ninputs = 3, .scalar = 2)
    FE_CASE(FOREACH_SQRT, .f32 = sqrt_f32, .ninputs = 1, .scalar = FE_NONE)
    FE_CASE(FOREACH_NEG, FE_BUILDS(neg), .ninputs = 1, .scalar = FE_NONE)
    FE_CASE(FOREACH_RECIPROCAL, FE_BUILDS(reciprocal), .ninputs = 1, .scalar = FE_NONE)
    FE_CASE(FOREACH_ABS, FE_BUILDS(abs), .ninputs = 1, .scalar = FE_NONE)
    FE_CASE(FOREACH_SIGN, FE_BUILDS(sign), .ninputs = 1, .scalar = FE_NONE)
    FE_CASE(FOREACH_EXP, FE_BUILDS(exp), .f32_ref = exp_ref_f32, .ninputs = 1, .scalar = FE_NONE)
  default: return NULL;
  }
}
