/* Error-function relatives in double precision: the scaled complementary
 * error function, the log of the normal CDF and its inverse. See
 * special_math.h. */
#include <math.h>
#include "kernels/pointwise/special/special.h"

#define SF_SQRT1_2 0.70710678118654752440
#define SF_SQRT2PI 2.50662827463100050242
#define SF_1_SQRTPI 0.56418958354775628695

double nrt_sf_erfcx(double x) {
  if (isnan(x)) return x;
  /* Up to x = 26 both factors are representable and exact to a few ulp
   * (the float argument squares exactly in double; libm's erfc keeps
   * its relative accuracy deep in the tail). Beyond, the asymptotic
   * series 1/(x sqrt(pi)) (1 - 1/(2x^2) + 3/(4x^4) - ...) is exact to
   * double rounding after a few terms. */
  if (x < 26.0) return exp(x * x) * erfc(x);
  if (x == INFINITY) return 0.0;
  double z = 1.0 / (2.0 * x * x), term = 1.0, sum = 1.0;
  for (int k = 1; k < 8; k++) {
    term *= -(2.0 * k - 1) * z;
    sum += term;
  }
  return SF_1_SQRTPI / x * sum;
}

double nrt_sf_log_ndtr(double x) {
  double t = x * SF_SQRT1_2;
  /* For x < -1 the CDF underflows long before its log does: write it
   * as erfcx(-t) / 2 * exp(-t^2). */
  if (x < -1.0) return log(0.5 * nrt_sf_erfcx(-t)) - t * t;
  return log1p(-0.5 * erfc(t));
}

/* Standard normal CDF and density. */
static double ndtr(double x) { return 0.5 * erfc(-x * SF_SQRT1_2); }
static double npdf(double x) { return exp(-0.5 * x * x) / SF_SQRT2PI; }

double nrt_sf_ndtri(double p) {
  if (isnan(p)) return p;
  if (p == 0.0) return -INFINITY;
  if (p == 1.0) return INFINITY;
  if (p < 0.0 || p > 1.0) return NAN;
  /* Solve in the lower tail and reflect: the CDF's relative accuracy is
   * there (1 - p is exact for a float p). */
  int upper = p > 0.5;
  double q = upper ? 1.0 - p : p;
  /* Starting point: Abramowitz & Stegun 26.2.23 (|error| < 4.5e-4). */
  double t = sqrt(-2.0 * log(q));
  double x = -(t - (2.515517 + t * (0.802853 + t * 0.010328)) /
                       (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))));
  /* Halley steps on ndtr(x) = q; cubic convergence, so three polish the
   * 4.5e-4 start to double rounding. The density underflows only for
   * q below ~1e-300, where the starting point is already relatively
   * exact to 1e-5; skip the step then. */
  for (int it = 0; it < 4; it++) {
    double d = npdf(x);
    if (!(d > 0)) break;
    double f = (ndtr(x) - q) / d;
    x -= f / (1.0 + 0.5 * x * f);
  }
  return upper ? -x : x;
}
