/* Family SPECIAL (nrt/ops/special.h): special functions and extra
 * elementwise math as pointwise block functions.
 *
 * Every function here is a plain scalar loop that widens each element
 * to double, calls the scalar function (special_*.c or libm) and rounds
 * once on the way out: these functions lose accuracy quickly in float32
 * arithmetic (recurrences, reflections, cancelling series), and none of
 * them is hot enough to be worth a vectorised twin. With no fast
 * version, the engine's reference path runs these same loops. */
#include "kernels/pointwise/pointwise.h"
#include "kernels/pointwise/special/special.h"
#include "nrt/ops/special.h"

#define SF_PI 3.14159265358979323846

/* Block function over one input: out[i] = (float)EXPR, x = (double)a[i]. */
#define SP_UNARY(name, EXPR)                                                             \
  static void name##_f32(float *out, const float *a, const float *b, const float *c,    \
                         int64_t n, const nrt_launch *l) {                              \
    for (int64_t i = 0; i < n; i++) {                                                   \
      const double x = a[i];                                                            \
      out[i] = (float)(EXPR);                                                           \
    }                                                                                   \
  }
/* Over two inputs: x = a[i], y = b[i]. */
#define SP_BINARY(name, EXPR)                                                            \
  static void name##_f32(float *out, const float *a, const float *b, const float *c,    \
                         int64_t n, const nrt_launch *l) {                              \
    for (int64_t i = 0; i < n; i++) {                                                   \
      const double x = a[i], y = b[i];                                                  \
      out[i] = (float)(EXPR);                                                           \
    }                                                                                   \
  }

/* ---- gamma family ------------------------------------------------------------ */
static double lgamma_one(double x) {
  int sg; /* lgamma_r: lgamma's sign global would be a data race */
  return lgamma_r(x, &sg);
}
SP_UNARY(digamma, nrt_sf_digamma(x))
SP_UNARY(lgamma, lgamma_one(x))
/* ATen's calc_trigamma<float> step for step, as the CPU computes
 * polygamma(1, x) (and digamma's gradient) for float32: the reflection's
 * sin(pi x) in float with float pi, the six-term recurrence in float, the
 * asymptotic tail in double (its double literals), each added to the
 * float result. At the poles (x a non-positive integer) the value is the
 * float rounding error of pi x: the CPU's 1.7e16 at -3 where double
 * arithmetic gives 7.3e31 (fuzz 19402-282530); elsewhere it is within a
 * few ulp of the double evaluation (0.2: 26.267382 against 26.267378). */
static float trigamma_f32(float x) {
  float sign = 1.0f, result = 0.0f;
  if (x < 0.5f) {
    sign = -1.0f;
    const float pi = (float)SF_PI, sin_pi_x = sinf(pi * x);
    result -= (pi * pi) / (sin_pi_x * sin_pi_x);
    x = 1 - x;
  }
  for (int i = 0; i < 6; ++i) {
    result += 1 / (x * x);
    x += 1;
  }
  const float ixx = 1 / (x * x);
  result += (1 + 1 / (2 * x) + ixx * (1. / 6 - ixx * (1. / 30 - ixx * (1. / 42)))) / x;
  return sign * result;
}
SP_UNARY(polygamma, l->params[0] == 1 ? (double)trigamma_f32((float)x) : nrt_sf_polygamma(l->params[0], x))

/* ---- Bessel ------------------------------------------------------------------ */
SP_UNARY(i0, nrt_sf_i0(x))
SP_UNARY(i0e, nrt_sf_i0e(x))
SP_UNARY(i1, nrt_sf_i1(x))
SP_UNARY(i1e, nrt_sf_i1e(x))
SP_UNARY(k0, nrt_sf_k0(x))
SP_UNARY(k0e, nrt_sf_k0e(x))
SP_UNARY(k1, nrt_sf_k1(x))
SP_UNARY(k1e, nrt_sf_k1e(x))

/* J and Y of orders 0 and 1 come from libm (POSIX). PyTorch's edges: J
 * is even/odd, Y is -inf at 0 and NaN for negative arguments, and all
 * four are NaN at the infinities. */
static double y0_one(double x) { return x == 0 ? -INFINITY : (x < 0 || isinf(x) ? NAN : y0(x)); }
static double y1_one(double x) { return x == 0 ? -INFINITY : (x < 0 || isinf(x) ? NAN : y1(x)); }
static double j0_one(double x) { return isinf(x) ? NAN : j0(fabs(x)); }
static double j1_one(double x) { return isinf(x) ? NAN : (x < 0 ? -j1(-x) : j1(x)); }
SP_UNARY(bessel_j0, j0_one(x))
SP_UNARY(bessel_j1, j1_one(x))
SP_UNARY(bessel_y0, y0_one(x))
SP_UNARY(bessel_y1, y1_one(x))

static double spherical_j0_one(double x) {
  if (isinf(x)) return 0.0;
  /* sin(x)/x loses nothing in double except at 0 itself. */
  return x == 0 ? 1.0 : sin(x) / x;
}
SP_UNARY(spherical_bessel_j0, spherical_j0_one(x))
SP_UNARY(airy_ai, nrt_sf_airy_ai(x))

/* ---- error functions ---------------------------------------------------------- */
SP_UNARY(erfcx, nrt_sf_erfcx(x))
SP_UNARY(log_ndtr, nrt_sf_log_ndtr(x))
SP_UNARY(ndtri, nrt_sf_ndtri(x))

/* ---- elementary extras --------------------------------------------------------- */
static double sinc_one(double x) {
  if (x == 0) return 1.0;
  double px = SF_PI * x;
  return sin(px) / px;
}
SP_UNARY(sinc, sinc_one(x))
/* entr: -x log x, 0 at 0, -inf for negative x, NaN stays NaN. */
SP_UNARY(entr, x != x ? x : (x > 0 ? -x * log(x) : (x == 0 ? 0.0 : -INFINITY)))

static void frexp_mantissa_f32(float *out, const float *a, const float *b, const float *c,
                               int64_t n, const nrt_launch *l) {
  for (int64_t i = 0; i < n; i++) {
    int e;
    out[i] = frexpf(a[i], &e);
  }
}
/* The exponent is a small integer, exact in float; the engine's store
 * converts it to the int32 output. Infinities and NaN give 0, as
 * std::frexp does on the CPU. */
static void frexp_exponent_f32(float *out, const float *a, const float *b, const float *c,
                               int64_t n, const nrt_launch *l) {
  for (int64_t i = 0; i < n; i++) {
    int e = 0;
    if (isfinite(a[i])) frexpf(a[i], &e);
    out[i] = (float)e;
  }
}

/* PyTorch's round(decimals=d) computes in float32 for float32, bfloat16
 * and float16 data: nearbyint(x * 10^d) / 10^d, or for d < 0
 * nearbyint(x / 10^-d) * 10^-d, with 10^|d| rounded to float. Doing the
 * same arithmetic gives the same (double-rounded) answers. */
static void round_decimals_f32(float *out, const float *a, const float *b, const float *c,
                               int64_t n, const nrt_launch *l) {
  const float ten = (float)l->scalars[0].f;
  if (l->params[0])
    for (int64_t i = 0; i < n; i++) out[i] = nearbyintf(a[i] / ten) * ten;
  else
    for (int64_t i = 0; i < n; i++) out[i] = nearbyintf(a[i] * ten) / ten;
}

/* ---- binary ---------------------------------------------------------------------- */
SP_BINARY(igamma, nrt_sf_igamma(x, y))
SP_BINARY(igammac, nrt_sf_igammac(x, y))
SP_BINARY(zeta, nrt_sf_zeta(x, y))
/* xlog1py: 0 where x == 0 unless y is NaN; log1p(y) rounded to a 16-bit
 * compute dtype first, as the CPU's kernel (see xlogy in binary.c). */
SP_BINARY(xlog1py, y != y ? y : (x == 0 ? 0.0 : x * (double)nrt_pw_round16((float)log1p(y), l->compute_dtype)))

static double logaddexp2_one(double x, double y) {
  /* Equal infinities would give inf - inf below. */
  if (isinf(x) && x == y) return x;
  double m = x > y ? x : y;
  if (x != x || y != y) return NAN;
  return m + log1p(exp2(-fabs(x - y))) / 0.69314718055994530942;
}
SP_BINARY(logaddexp2, logaddexp2_one(x, y))

/* nextafter steps in the compute dtype (the operands' promoted one, which
 * an in-place bfloat16 self beside a float32 other is not): for bfloat16 and float16
 * the neighbour is one unit of the 16-bit format, computed on its bit
 * pattern (the value is exact in float, so the store does not round). */
static float nextafter16(float x, float y, bool bf16) {
  if (x != x || y != y) return NAN;
  if (x == y) return y;
  uint16_t bits = bf16 ? (uint16_t)(nrt_f32_bits(x) >> 16) : nrt_k_f32_to_f16(x);
  if (x == 0) bits = (uint16_t)((y < 0 ? 0x8000u : 0u) | 1u); /* smallest subnormal */
  else if ((x < y) == (x > 0)) bits++;                        /* away from zero */
  else bits--;
  return bf16 ? nrt_k_bf16_to_f32(bits) : nrt_k_f16_to_f32(bits);
}
static void nextafter_f32(float *out, const float *a, const float *b, const float *c, int64_t n,
                          const nrt_launch *l) {
  nrt_dtype dt = l->compute_dtype;
  if (dt == NRT_BFLOAT16 || dt == NRT_FLOAT16)
    for (int64_t i = 0; i < n; i++) out[i] = nextafter16(a[i], b[i], dt == NRT_BFLOAT16);
  else
    for (int64_t i = 0; i < n; i++) out[i] = nextafterf(a[i], b[i]);
}

/* heaviside: NaN input is neither 0 nor positive, so gives 0 (as on the CPU). */
static void heaviside_f32(float *out, const float *a, const float *b, const float *c, int64_t n,
                          const nrt_launch *l) {
  for (int64_t i = 0; i < n; i++) out[i] = a[i] == 0.0f ? b[i] : (float)(a[i] > 0.0f);
}
static int heaviside_i64(int64_t *out, const int64_t *a, const int64_t *b, const int64_t *c,
                         int64_t n, const nrt_launch *l) {
  for (int64_t i = 0; i < n; i++) out[i] = a[i] == 0 ? b[i] : (a[i] > 0);
  return 0;
}

/* gcd/lcm by Euclid on magnitudes (unsigned, so INT64_MIN wraps as it
 * does on the CPU instead of overflowing). */
static uint64_t gcd_u(uint64_t x, uint64_t y) {
  while (y) {
    uint64_t t = x % y;
    x = y;
    y = t;
  }
  return x;
}
static uint64_t mag(int64_t v) { return v < 0 ? 0 - (uint64_t)v : (uint64_t)v; }
static int gcd_i64(int64_t *out, const int64_t *a, const int64_t *b, const int64_t *c, int64_t n,
                   const nrt_launch *l) {
  for (int64_t i = 0; i < n; i++) out[i] = (int64_t)gcd_u(mag(a[i]), mag(b[i]));
  return 0;
}
static int lcm_i64(int64_t *out, const int64_t *a, const int64_t *b, const int64_t *c, int64_t n,
                   const nrt_launch *l) {
  /* PyTorch's |a / g * b| in wrapping int64 arithmetic, overflow included. */
  for (int64_t i = 0; i < n; i++) {
    uint64_t g = gcd_u(mag(a[i]), mag(b[i]));
    if (g == 0) {
      out[i] = 0;
      continue;
    }
    int64_t q = g > (uint64_t)INT64_MAX ? (a[i] == INT64_MIN ? 1 : 0) : a[i] / (int64_t)g;
    out[i] = (int64_t)mag(nrt_wmul(q, b[i]));
  }
  return 0;
}

/* ---- orthogonal polynomials -------------------------------------------------------
 * PyTorch's rules, in double: n is truncated to an integer (NaN and
 * out-of-range give a negative n); n < 0 gives 0; the end points +-1 take
 * their exact values; inside (-1, 1) high orders of the Chebyshev
 * families use the trigonometric forms; otherwise the three-term
 * recurrence runs, stopping early once it has turned NaN. */
static int64_t poly_order(double n) {
  return (n > -9.2e18 && n < 9.2e18) ? (int64_t)n : -1;
}

/* Shared Chebyshev recurrence r_k = 2x r_{k-1} - r_{k-2}, from r_0 = 1
 * and r_1 = q1. */
static double cheb_recur(double x, int64_t n, double q1) {
  if (n == 0) return 1.0;
  double p = 1.0, q = q1;
  for (int64_t k = 2; k <= n && q == q; k++) {
    double r = (x + x) * q - p;
    p = q;
    q = r;
  }
  return q;
}

static double cheb_t(double x, int64_t n, int trig_from) {
  if (n < 0) return 0.0;
  if (fabs(x) == 1.0) return (x > 0 || n % 2 == 0) ? 1.0 : -1.0;
  if (n > trig_from && fabs(x) < 1.0) return cos((double)n * acos(x));
  return cheb_recur(x, n, x);
}
static double cheb_u(double x, int64_t n, int trig_from) {
  if (n < 0) return 0.0;
  double n1 = (double)n + 1.0;
  if (fabs(x) == 1.0) return (x > 0 || n % 2 == 0) ? n1 : -n1;
  if (n > trig_from && fabs(x) < 1.0) {
    double t = acos(x);
    if (sin(t) != 0.0) return sin(n1 * t) / sin(t);
    return n1 * cos(n1 * t) / x;
  }
  return cheb_recur(x, n, x + x);
}
static double cheb_v(double x, int64_t n, int trig_from) {
  if (n < 0) return 0.0;
  double odd = 2.0 * (double)n + 1.0;
  if (fabs(x) == 1.0) return x > 0 ? 1.0 : (n % 2 == 0 ? odd : -odd);
  if (n > trig_from && fabs(x) < 1.0) {
    double t = acos(x);
    if (sin(t / 2.0) != 1.0) return cos(((double)n + 0.5) * t) / cos(t / 2.0);
    return n % 2 == 0 ? odd : -odd;
  }
  return cheb_recur(x, n, x + x - 1.0);
}
static double cheb_w(double x, int64_t n, int trig_from) {
  if (n < 0) return 0.0;
  double odd = 2.0 * (double)n + 1.0;
  if (fabs(x) == 1.0) return x > 0 ? odd : (n % 2 == 0 ? 1.0 : -1.0);
  if (n > trig_from && fabs(x) < 1.0) {
    double t = acos(x);
    if (cos(t / 2.0) != 1.0) return sin(((double)n + 0.5) * t) / sin(t / 2.0);
    return x > 0 ? odd : (n % 2 == 0 ? 1.0 : -1.0);
  }
  return cheb_recur(x, n, x + x + 1.0);
}

/* The shifted families are the plain ones at 2x - 1 (exact in double for
 * a float x), with PyTorch's own thresholds for the trigonometric form. */
SP_BINARY(chebyshev_t, cheb_t(x, poly_order(y), 6))
SP_BINARY(chebyshev_u, cheb_u(x, poly_order(y), 8))
SP_BINARY(chebyshev_v, cheb_v(x, poly_order(y), 8))
SP_BINARY(chebyshev_w, cheb_w(x, poly_order(y), 8))
SP_BINARY(shifted_chebyshev_t, cheb_t(x + x - 1.0, poly_order(y), 6))
SP_BINARY(shifted_chebyshev_u, cheb_u(x + x - 1.0, poly_order(y), 6))
SP_BINARY(shifted_chebyshev_v, cheb_v(x + x - 1.0, poly_order(y), 6))
SP_BINARY(shifted_chebyshev_w, cheb_w(x + x - 1.0, poly_order(y), 4))

/* Hermite orders above PyTorch's limit (128 for float32 data, 512 for
 * float64) give NaN there; keep the same limits. */
static int64_t hermite_limit(const nrt_launch *l) {
  return l->compute_dtype == NRT_FLOAT64 ? 512 : 128;
}
static double hermite_h(double x, int64_t n, int64_t limit) {
  if (n < 0) return 0.0;
  if (n == 0) return 1.0;
  if (n == 1) return x + x;
  if (n > limit) return NAN;
  double p = 1.0, q = x + x, r = 0.0;
  for (int64_t k = 2; k < n + n; k += 2) {
    r = (x + x) * q - (double)k * p;
    p = q;
    q = r;
  }
  return r;
}
static double hermite_he(double x, int64_t n, int64_t limit) {
  if (n < 0) return 0.0;
  if (n == 0) return 1.0;
  if (n == 1) return x;
  if (n > limit) return NAN;
  double p = 1.0, q = x, r = 0.0;
  for (int64_t k = 1; k < n; k++) {
    r = x * q - (double)k * p;
    p = q;
    q = r;
  }
  return r;
}
static double laguerre_l(double x, int64_t n) {
  if (n < 0) return 0.0;
  if (x == 0 || n == 0) return 1.0;
  double p = 1.0, q = 1.0 - x;
  for (int64_t k = 1; k < n && q == q; k++) {
    double r = ((double)(k + k) + (1.0 - x)) * q - (double)k * p;
    r /= (double)(k + 1);
    p = q;
    q = r;
  }
  return q;
}
static double legendre_p(double x, int64_t n) {
  if (n < 0) return 0.0;
  if (fabs(x) == 1.0) return (x > 0 || n % 2 == 0) ? 1.0 : -1.0;
  if (n == 0) return 1.0;
  double p = 1.0, q = x;
  for (int64_t k = 1; k < n && q == q; k++) {
    double r = ((double)(k + k + 1) * x * q - (double)k * p) / (double)(k + 1);
    p = q;
    q = r;
  }
  return q;
}
SP_BINARY(hermite_h, hermite_h(x, poly_order(y), hermite_limit(l)))
SP_BINARY(hermite_he, hermite_he(x, poly_order(y), hermite_limit(l)))
SP_BINARY(laguerre_l, laguerre_l(x, poly_order(y)))
SP_BINARY(legendre_p, legendre_p(x, poly_order(y)))

/* ---- table ------------------------------------------------------------------------ */
#define SP_CASE(OP, ...)                           \
  case NRT_OP_##OP: {                              \
    static const nrt_pw_kernel k_ = {__VA_ARGS__}; \
    return &k_;                                    \
  }
#define SP_F(OP, name) SP_CASE(OP, .f32 = name##_f32)

const nrt_pw_kernel *nrt_pw_special_kernel(nrt_op op) {
  /* Switch on (int)op: family ids are not enumerators of nrt_op. */
  switch ((int)op) {
    SP_F(DIGAMMA, digamma)
    SP_F(LGAMMA, lgamma)
    SP_F(POLYGAMMA, polygamma)
    SP_F(I0, i0)
    SP_F(I0E, i0e)
    SP_F(I1, i1)
    SP_F(I1E, i1e)
    SP_F(K0, k0)
    SP_F(K0E, k0e)
    SP_F(K1, k1)
    SP_F(K1E, k1e)
    SP_F(BESSEL_J0, bessel_j0)
    SP_F(BESSEL_J1, bessel_j1)
    SP_F(BESSEL_Y0, bessel_y0)
    SP_F(BESSEL_Y1, bessel_y1)
    SP_F(SPHERICAL_BESSEL_J0, spherical_bessel_j0)
    SP_F(AIRY_AI, airy_ai)
    SP_F(ERFCX, erfcx)
    SP_F(LOG_NDTR, log_ndtr)
    SP_F(NDTRI, ndtri)
    SP_F(SINC, sinc)
    SP_F(ENTR, entr)
    SP_F(FREXP_MANTISSA, frexp_mantissa)
    SP_F(FREXP_EXPONENT, frexp_exponent)
    SP_F(ROUND_DECIMALS, round_decimals)
    SP_F(IGAMMA, igamma)
    SP_F(IGAMMAC, igammac)
    SP_F(ZETA, zeta)
    SP_F(XLOG1PY, xlog1py)
    SP_F(NEXTAFTER, nextafter)
    SP_CASE(HEAVISIDE, .f32 = heaviside_f32, .i64 = heaviside_i64)
    SP_CASE(GCD, .i64 = gcd_i64)
    SP_CASE(LCM, .i64 = lcm_i64)
    SP_F(LOGADDEXP2, logaddexp2)
    SP_F(CHEBYSHEV_T, chebyshev_t)
    SP_F(CHEBYSHEV_U, chebyshev_u)
    SP_F(CHEBYSHEV_V, chebyshev_v)
    SP_F(CHEBYSHEV_W, chebyshev_w)
    SP_F(SHIFTED_CHEBYSHEV_T, shifted_chebyshev_t)
    SP_F(SHIFTED_CHEBYSHEV_U, shifted_chebyshev_u)
    SP_F(SHIFTED_CHEBYSHEV_V, shifted_chebyshev_v)
    SP_F(SHIFTED_CHEBYSHEV_W, shifted_chebyshev_w)
    SP_F(HERMITE_H, hermite_h)
    SP_F(HERMITE_HE, hermite_he)
    SP_F(LAGUERRE_L, laguerre_l)
    SP_F(LEGENDRE_P, legendre_p)
  default: return NULL;
  }
}
