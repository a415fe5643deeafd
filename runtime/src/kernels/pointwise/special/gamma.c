/* Gamma-related special functions in double precision: digamma,
 * polygamma (through the Hurwitz zeta function for n >= 2) and the
 * regularised incomplete gamma functions. See special_math.h. */
#include <math.h>
#include "kernels/pointwise/special/special.h"

#define SF_PI 3.14159265358979323846

/* Bernoulli numbers B_2 .. B_24, for the Euler-Maclaurin tails below. */
static const double bernoulli_2k[12] = {
    1.0 / 6.0,    -1.0 / 30.0,      1.0 / 42.0,      -1.0 / 30.0,
    5.0 / 66.0,   -691.0 / 2730.0,  7.0 / 6.0,       -3617.0 / 510.0,
    43867.0 / 798.0, -174611.0 / 330.0, 854513.0 / 138.0, -236364091.0 / 2730.0,
};

double nrt_sf_digamma(double x) {
  /* PyTorch (and the C library's gamma functions): a signed infinity at
   * +-0, NaN at the negative integers and at -inf. */
  if (x == 0) return copysign(INFINITY, -x);
  if (isnan(x)) return x;
  if (x < 0) {
    if (x == trunc(x)) return NAN;
    /* Reflection; tan of pi times the fractional part keeps the
     * argument small, so tan stays accurate for large |x|. */
    double r = x - trunc(x);
    return nrt_sf_digamma(1.0 - x) - SF_PI / tan(SF_PI * r);
  }
  if (x == INFINITY) return x;
  /* Recur up to x >= 10, where the asymptotic series with seven
   * Bernoulli terms is exact to double rounding. */
  double acc = 0;
  while (x < 10) {
    acc -= 1.0 / x;
    x += 1.0;
  }
  double z = 1.0 / (x * x);
  double tail = z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 -
                z * (1.0 / 132 - z * (691.0 / 32760 - z / 12))))));
  return acc + log(x) - 0.5 / x - tail;
}

double nrt_sf_trigamma(double x) {
  if (isnan(x)) return x;
  double sign = 1, acc = 0;
  if (x < 0.5) {
    /* Reflection psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x). PyTorch
     * takes sin(pi * x) as is, so poles give huge values rather than
     * infinities except at 0; do the same. */
    double s = sin(SF_PI * x);
    acc = -(SF_PI * SF_PI) / (s * s);
    sign = -1;
    x = 1.0 - x;
  }
  if (x == INFINITY) return sign * acc;
  while (x < 10) {
    acc += 1.0 / (x * x);
    x += 1.0;
  }
  double z = 1.0 / (x * x);
  double tail = (1.0 + 0.5 / x + z * (1.0 / 6 - z * (1.0 / 30 - z * (1.0 / 42 - z * (1.0 / 30 -
                 z * (5.0 / 66 - z * (691.0 / 2730 - z * 7.0 / 6))))))) / x;
  return sign * (acc + tail);
}

double nrt_sf_zeta(double s, double q) {
  if (isnan(s) || isnan(q)) return NAN;
  if (s == 1) return INFINITY;
  if (s < 1) return NAN;
  /* PyTorch's summation gives these at the infinities: q -> +inf is
   * NaN (0 * inf in its tail); s -> +inf leaves q^-inf, which is 1, inf
   * or 0 (then NaN again from the tail). */
  if (q == INFINITY) return NAN;
  if (q <= 0) {
    if (q == floor(q)) return INFINITY;
    if (s != floor(s)) return NAN; /* (q + k)^-s of a negative base */
  }
  if (s == INFINITY) return q == 1 ? 1.0 : (fabs(q) < 1 ? INFINITY : NAN);
  /* Sum the first terms directly until q + N is large enough for the
   * Euler-Maclaurin tail to converge quickly (its terms shrink like
   * ((s + 2j) / (2 pi a))^2). */
  double sum = 0, a = q;
  int n = 0;
  while (n < 9 || a < 10 || (a < s && n < 1000)) {
    double t = pow(a, -s);
    sum += t;
    /* Positive terms only decrease from here: stop once negligible. */
    if (a > 0 && fabs(t) <= 1e-17 * fabs(sum)) return sum;
    a += 1.0;
    n++;
  }
  double as = pow(a, -s);
  double tail = a * as / (s - 1.0) + 0.5 * as;
  double fac = s * as / a; /* s (s+1) ... (s+2j-2) a^(-s-2j+1), j = 1 */
  double fact = 2.0;       /* (2j)! */
  for (int j = 1; j <= 12; j++) {
    double t = bernoulli_2k[j - 1] / fact * fac;
    tail += t;
    if (fabs(t) <= 1e-17 * fabs(sum + tail)) break;
    fac *= (s + 2 * j - 1) * (s + 2 * j) / (a * a);
    fact *= (2.0 * j + 1) * (2.0 * j + 2);
  }
  return sum + tail;
}

double nrt_sf_polygamma(int64_t n, double x) {
  if (n == 0) return nrt_sf_digamma(x);
  if (n == 1) return nrt_sf_trigamma(x);
  /* psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x) */
  double sign = (n % 2) ? 1.0 : -1.0;
  return sign * exp(lgamma((double)n + 1.0)) * nrt_sf_zeta((double)n + 1.0, x);
}

/* ---- incomplete gamma ------------------------------------------------------
 * x^a e^-x / Gamma(a), the factor both expansions share, through logs so
 * that large a and x do not overflow on the way. */
static double igam_factor(double a, double x) {
  int sg;
  return exp(a * log(x) - x - lgamma_r(a, &sg));
}

/* P(a, x) by its power series, for x < a + 1 (terms shrink from the
 * start). */
static double igam_series(double a, double x) {
  double term = 1.0, sum = 1.0;
  for (int k = 1; k < 100000; k++) {
    term *= x / (a + k);
    sum += term;
    if (term <= 1e-17 * sum) break;
  }
  return igam_factor(a, x) * sum / a;
}

/* Q(a, x) by its continued fraction (evaluated with the modified Lentz
 * method), for x >= a + 1 where it converges fast. */
static double igamc_fraction(double a, double x) {
  const double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 10000; i++) {
    double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    double del = d * c;
    h *= del;
    if (fabs(del - 1.0) <= 1e-16) break;
  }
  return igam_factor(a, x) * h;
}

/* Domain edges as PyTorch: NaN for negative arguments, a == 0 is the
 * limit a -> 0+ (all mass at 0), infinities take their limits. Returns
 * 1 with *edge set when (a, x) is such a case (upper = want Q). */
static int igam_edge(double a, double x, int upper, double *edge) {
  if (isnan(a) || isnan(x) || x < 0 || a < 0) {
    *edge = NAN;
  } else if (a == 0) {
    *edge = x > 0 ? (upper ? 0.0 : 1.0) : NAN;
  } else if (x == 0) {
    *edge = upper ? 1.0 : 0.0;
  } else if (isinf(a)) {
    *edge = isinf(x) ? NAN : (upper ? 1.0 : 0.0);
  } else if (isinf(x)) {
    *edge = upper ? 0.0 : 1.0;
  } else {
    return 0;
  }
  return 1;
}

double nrt_sf_igamma(double a, double x) {
  double e;
  if (igam_edge(a, x, 0, &e)) return e;
  if (x < a + 1.0) return igam_series(a, x);
  return 1.0 - igamc_fraction(a, x);
}

double nrt_sf_igammac(double a, double x) {
  double e;
  if (igam_edge(a, x, 1, &e)) return e;
  if (x < a + 1.0) return 1.0 - igam_series(a, x);
  return igamc_fraction(a, x);
}
