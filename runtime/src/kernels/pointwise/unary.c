/* Unary math, rounding, classification and the scalar-parameterised
 * unary ops (FILL, NAN_TO_NUM, CLAMP_SCALAR, POW_SCALAR, RPOW_SCALAR).
 *
 * exp, log and tanh use the vectorisable vmath.h versions in the fast
 * path and libm in the reference one; everything else calls libm in both
 * (its float functions are correctly rounded or within 1 ulp, matching
 * PyTorch's results closely). Ops PyTorch computes in floating point only
 * (sqrt, exp, ...) have no integer version: TensorIterator promotes their
 * integer inputs to float before they reach us. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/pointwise/pointwise.h"

PW_F32_MV(fill, 0, s0)
PW_I64(fill, 0, s0)

PW_F32_MV(neg, 1, -x)
PW_I64(neg, 1, nrt_wsub(0, x))
PW_F32_MV(abs, 1, fabsf(x))
PW_I64(abs, 1, x < 0 ? nrt_wsub(0, x) : x)
/* torch.sign: NaN -> 0 and -0 -> 0. */
PW_F32_MV(sign, 1, (float)((x > 0.0f) - (x < 0.0f)))
PW_I64(sign, 1, (x > 0) - (x < 0))
PW_F32_MV(reciprocal, 1, 1.0f / x)
static void sqrt_f32(float *out, const float *a, const float *b, const float *c, int64_t n,
                     const nrt_launch *l) {
  nrt_sqrt_block(out, a, n);
}
static void rsqrt_f32(float *out, const float *a, const float *b, const float *c, int64_t n,
                      const nrt_launch *l) {
  nrt_sqrt_block(out, a, n);
  for (int64_t i = 0; i < n; i++) out[i] = 1.0f / out[i];
}

PW_F32_MV(exp, 1, nrt_vexpf(x))
PW_F32(exp_ref, 1, expf(x))
PW_F32(exp2, 1, exp2f(x))
PW_F32(expm1, 1, expm1f(x))
PW_F32_MV(log, 1, nrt_vlogf(x))
PW_F32(log_ref, 1, logf(x))
PW_F32(log2, 1, log2f(x))
PW_F32(log10, 1, log10f(x))
PW_F32(log1p, 1, log1pf(x))
PW_F32(sin, 1, sinf(x))
PW_F32(cos, 1, cosf(x))
PW_F32(tan, 1, tanf(x))
PW_F32(asin, 1, asinf(x))
PW_F32(acos, 1, acosf(x))
PW_F32(atan, 1, atanf(x))
PW_F32(sinh, 1, sinhf(x))
PW_F32(cosh, 1, coshf(x))
PW_F32_MV(tanh, 1, nrt_vtanhf(x))
PW_F32(tanh_ref, 1, tanhf(x))
PW_F32(asinh, 1, asinhf(x))
PW_F32(acosh, 1, acoshf(x))
PW_F32(atanh, 1, atanhf(x))
PW_F32(erf, 1, erff(x))
PW_F32(erfc, 1, erfcf(x))

/* libm has no erfinv. A single-precision starting point (M. Giles,
 * "Approximating the erfinv function", GPU Computing Gems, 2011) polished
 * by two Newton steps on erf in double gives a correctly rounded float
 * almost everywhere, including near +-1 where the derivative blows up. */
static float erfinv_one(float yf) {
  if (!(yf > -1.0f && yf < 1.0f)) {
    if (yf == 1.0f) return INFINITY;
    if (yf == -1.0f) return -INFINITY;
    return NAN;
  }
  double y = yf;
  double w = -log((1.0 - y) * (1.0 + y)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double x = p * y;
  for (int it = 0; it < 2; it++) x -= (erf(x) - y) / (1.1283791670955126 * exp(-x * x));
  return (float)x;
}
PW_F32(erfinv, 1, erfinv_one(x))

PW_F32_MV(ceil, 1, ceilf(x))
PW_F32_MV(floor, 1, floorf(x))
PW_F32_MV(round, 1, nearbyintf(x)) /* half to even in the default mode */
PW_F32_MV(trunc, 1, truncf(x))
PW_F32_MV(frac, 1, x - truncf(x))
PW_I64(identity, 1, x)

/* NaN is "true" in PyTorch's logical ops (it is != 0). */
PW_F32_MV(logical_not, 1, (float)(x == 0.0f))
PW_I64(logical_not, 1, x == 0)
static int bitwise_not_i64(int64_t *out, const int64_t *a, const int64_t *b, const int64_t *c,
                           int64_t n, const nrt_launch *l) {
  /* On bool, ~ is logical negation; on the 0/1 int64 image of a bool,
   * ~1 would be -2, which stores as true. */
  if (l->operands[0].dtype == NRT_BOOL || l->compute_dtype == NRT_BOOL)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] == 0;
  else
    for (int64_t i = 0; i < n; i++) out[i] = ~a[i];
  return 0;
}
PW_F32_MV(isnan, 1, (float)(x != x))
PW_F32_MV(isinf, 1, (float)(fabsf(x) == INFINITY))
PW_F32_MV(isfinite, 1, (float)(fabsf(x) < INFINITY))
PW_I64(zero, 1, 0)
PW_I64(one, 1, 1)

PW_F32_MV(nan_to_num, 1, x != x ? s0 : (x == INFINITY ? s1 : (x == -INFINITY ? s2 : x)))

/* clamp with scalar bounds; a NaN bound makes every result NaN, as in
 * PyTorch. */
static void clamp_scalar_f32(float *out, const float *a, const float *b, const float *c,
                             int64_t n, const nrt_launch *l) {
  float lo = l->params[0] ? (float)l->scalars[0].f : -INFINITY;
  float hi = l->params[1] ? (float)l->scalars[1].f : INFINITY;
  for (int64_t i = 0; i < n; i++) out[i] = pw_minf(pw_maxf(a[i], lo), hi);
}
static int clamp_scalar_i64(int64_t *out, const int64_t *a, const int64_t *b, const int64_t *c,
                            int64_t n, const nrt_launch *l) {
  int64_t lo = l->params[0] ? l->scalars[0].i : INT64_MIN;
  int64_t hi = l->params[1] ? l->scalars[1].i : INT64_MAX;
  for (int64_t i = 0; i < n; i++) {
    int64_t v = a[i] < lo ? lo : a[i];
    out[i] = v > hi ? hi : v;
  }
  return 0;
}

static void pow_scalar_f32(float *out, const float *a, const float *b, const float *c, int64_t n,
                           const nrt_launch *l) {
  nrt_pow_scalar_block(out, a, n, l->scalars[0].f, l->compute_dtype == NRT_BFLOAT16);
}
PW_I64(pow_scalar, 1, nrt_ipow(x, s0))
PW_F32(rpow_scalar, 1, powf(s0, x))
PW_I64(rpow_scalar, 1, nrt_ipow(s0, x))

const nrt_pw_kernel *nrt_pw_unary_kernel(nrt_op op) {
  switch (op) {
    PW_CASE(FILL, PW_MV(fill), .i64 = fill_i64)
    PW_CASE(NEG, PW_MV(neg), .i64 = neg_i64)
    PW_CASE(ABS, PW_MV(abs), .i64 = abs_i64)
    PW_CASE(SIGN, PW_MV(sign), .i64 = sign_i64)
    PW_CASE(RECIPROCAL, PW_MV(reciprocal))
    PW_CASE(SQRT, .f32 = sqrt_f32)
    PW_CASE(RSQRT, .f32 = rsqrt_f32)
    PW_CASE(EXP, PW_MV(exp), .f32_ref = exp_ref_f32)
    PW_CASE(EXP2, .f32 = exp2_f32)
    PW_CASE(EXPM1, .f32 = expm1_f32)
    PW_CASE(LOG, PW_MV(log), .f32_ref = log_ref_f32)
    PW_CASE(LOG2, .f32 = log2_f32)
    PW_CASE(LOG10, .f32 = log10_f32)
    PW_CASE(LOG1P, .f32 = log1p_f32)
    PW_CASE(SIN, .f32 = sin_f32)
    PW_CASE(COS, .f32 = cos_f32)
    PW_CASE(TAN, .f32 = tan_f32)
    PW_CASE(ASIN, .f32 = asin_f32)
    PW_CASE(ACOS, .f32 = acos_f32)
    PW_CASE(ATAN, .f32 = atan_f32)
    PW_CASE(SINH, .f32 = sinh_f32)
    PW_CASE(COSH, .f32 = cosh_f32)
    PW_CASE(TANH, PW_MV(tanh), .f32_ref = tanh_ref_f32)
    PW_CASE(ASINH, .f32 = asinh_f32)
    PW_CASE(ACOSH, .f32 = acosh_f32)
    PW_CASE(ATANH, .f32 = atanh_f32)
    PW_CASE(ERF, .f32 = erf_f32)
    PW_CASE(ERFC, .f32 = erfc_f32)
    PW_CASE(ERFINV, .f32 = erfinv_f32)
    PW_CASE(CEIL, PW_MV(ceil), .i64 = identity_i64)
    PW_CASE(FLOOR, PW_MV(floor), .i64 = identity_i64)
    PW_CASE(ROUND, PW_MV(round), .i64 = identity_i64)
    PW_CASE(TRUNC, PW_MV(trunc), .i64 = identity_i64)
    PW_CASE(FRAC, PW_MV(frac), .i64 = zero_i64)
    PW_CASE(LOGICAL_NOT, PW_MV(logical_not), .i64 = logical_not_i64)
    PW_CASE(BITWISE_NOT, .i64 = bitwise_not_i64)
    PW_CASE(ISNAN, PW_MV(isnan), .i64 = zero_i64)
    PW_CASE(ISINF, PW_MV(isinf), .i64 = zero_i64)
    PW_CASE(ISFINITE, PW_MV(isfinite), .i64 = one_i64)
    PW_CASE(NAN_TO_NUM, PW_MV(nan_to_num), .i64 = identity_i64)
    PW_CASE(CLAMP_SCALAR, .f32 = clamp_scalar_f32, .i64 = clamp_scalar_i64)
    PW_CASE(POW_SCALAR, .f32 = pow_scalar_f32, .i64 = pow_scalar_i64)
    PW_CASE(RPOW_SCALAR, .f32 = rpow_scalar_f32, .i64 = rpow_scalar_i64)
  default: return NULL;
  }
}
