/* Modified Bessel functions of orders 0 and 1 (I, K and their
 * exponentially scaled forms) and the Airy function Ai, in double
 * precision. See special_math.h.
 *
 * Each function switches between a power series where it is accurate
 * and the asymptotic expansion for large arguments, whose smallest term
 * (about exp(-2x)) bounds its error. I's series has positive terms only,
 * so it is accurate for any x; K's and Ai's series cancel, losing about
 * exp(2x) / 1e16 relative, hence the crossovers chosen below. */
#include <math.h>
#include <stdbool.h>
#include "kernels/pointwise/special/special.h"

#define SF_PI 3.14159265358979323846
#define SF_EULER 0.57721566490153286061

/* I_nu(x) for nu in {0, 1}, x >= 0 finite: sum (x/2)^(2k+nu) / (k! (k+nu)!). */
static double i_series(double x, int nu) {
  double t = 0.5 * x, q = t * t;
  double term = nu ? t : 1.0, sum = term;
  for (int k = 1; k < 500; k++) {
    term *= q / ((double)k * (k + nu));
    sum += term;
    if (term <= 1e-17 * sum) break;
  }
  return sum;
}

/* The asymptotic series sum_k s^k a_k(nu) / x^k, with
 * a_k(nu) = prod_{j<=k} (4 nu^2 - (2j-1)^2) / (k! 8^k); s = -1 for I,
 * +1 for K. Stops at the smallest term. */
static double bessel_asym(double x, int nu, double s) {
  double mu = 4.0 * nu * nu, term = 1.0, sum = 1.0, prev = INFINITY;
  for (int k = 1; k < 200; k++) {
    double odd = 2.0 * k - 1.0;
    term *= s * (mu - odd * odd) / (8.0 * k * x);
    if (fabs(term) >= prev) break;
    sum += term;
    prev = fabs(term);
    if (prev <= 1e-17 * fabs(sum)) break;
  }
  return sum;
}

#define I_ASYM_FROM 30.0 /* asymptotic error ~exp(-60) */
#define K_ASYM_FROM 9.0  /* series ~exp(18) * 1e-16, expansion ~exp(-18) */

/* exp(-x) I_nu(x), x >= 0. */
static double i_scaled(double x, int nu) {
  if (x == INFINITY) return 0.0;
  if (x <= I_ASYM_FROM) return exp(-x) * i_series(x, nu);
  return bessel_asym(x, nu, -1.0) / sqrt(2.0 * SF_PI * x);
}

static double i_plain(double x, int nu) {
  if (x <= I_ASYM_FROM) return i_series(x, nu);
  if (x == INFINITY) return x;
  /* exp(x) overflows before the scaled value underflows: split it so
   * the result is right up to the overflow threshold. */
  double h = exp(0.5 * x);
  return h * (bessel_asym(x, nu, -1.0) / sqrt(2.0 * SF_PI * x)) * h;
}

/* PyTorch's I0 and I1 are NaN at the infinities (the scaled forms are 0). */
double nrt_sf_i0(double x) { return isnan(x) || isinf(x) ? NAN : i_plain(fabs(x), 0); }
double nrt_sf_i0e(double x) { return isnan(x) ? x : i_scaled(fabs(x), 0); }
double nrt_sf_i1(double x) { return isnan(x) || isinf(x) ? NAN : copysign(i_plain(fabs(x), 1), x); }
double nrt_sf_i1e(double x) { return isnan(x) ? x : copysign(i_scaled(fabs(x), 1), x); }

/* K_0 and K_1 by their series (DLMF 10.31.1), 0 < x <= K_ASYM_FROM. */
static double k0_series(double x) {
  double q = 0.25 * x * x, term = 1.0, h = 0.0, si = 1.0, sh = 0.0;
  for (int k = 1; k < 500; k++) {
    term *= q / ((double)k * k);
    h += 1.0 / k;
    si += term;
    sh += term * h;
    if (term * (h + 1.0) <= 1e-17 * si) break;
  }
  return -(log(0.5 * x) + SF_EULER) * si + sh;
}

static double k1_series(double x) {
  /* K1 = 1/x + ln(x/2) I1 - (x/4) sum (psi(k+1) + psi(k+2)) q^k / (k! (k+1)!) */
  double q = 0.25 * x * x, term = 1.0, hk = 0.0, hk1 = 1.0;
  double si = 1.0, sp = -2.0 * SF_EULER + hk + hk1;
  for (int k = 1; k < 500; k++) {
    term *= q / ((double)k * (k + 1));
    hk += 1.0 / k;
    hk1 += 1.0 / (k + 1);
    si += term;
    sp += term * (-2.0 * SF_EULER + hk + hk1);
    if (term * (hk + hk1 + 2.0) <= 1e-17 * si) break;
  }
  return 1.0 / x + log(0.5 * x) * (0.5 * x * si) - 0.25 * x * sp;
}

/* exp(x) K_nu(x) for large x. */
static double k_scaled_asym(double x, int nu) {
  if (x == INFINITY) return 0.0;
  return sqrt(SF_PI / (2.0 * x)) * bessel_asym(x, nu, 1.0);
}

/* PyTorch: K_nu(0) = +inf, NaN for negative arguments. */
#define K_EDGES(x)                        \
  if (isnan(x)) return x;                 \
  if ((x) == 0) return INFINITY;          \
  if ((x) < 0) return NAN;

/* K_nu(x), or with scaled exp(x) K_nu(x), for nu = 0, 1. */
static double k_nu(double x, int nu, bool scaled) {
  K_EDGES(x)
  if (x <= K_ASYM_FROM) {
    double k = nu ? k1_series(x) : k0_series(x);
    return scaled ? exp(x) * k : k;
  }
  return scaled ? k_scaled_asym(x, nu) : exp(-x) * k_scaled_asym(x, nu);
}

double nrt_sf_k0(double x) { return k_nu(x, 0, false); }
double nrt_sf_k0e(double x) { return k_nu(x, 0, true); }
double nrt_sf_k1(double x) { return k_nu(x, 1, false); }
double nrt_sf_k1e(double x) { return k_nu(x, 1, true); }

/* ---- Airy Ai ----------------------------------------------------------------- */

/* The coefficients u_k of the Airy asymptotic expansions (DLMF 9.7.2):
 * u_k = u_{k-1} (6k-5)(6k-3)(6k-1) / ((2k-1) 216 k). */
static double airy_u_next(double u, int k) {
  return u * (6.0 * k - 5) * (6.0 * k - 3) * (6.0 * k - 1) / ((2.0 * k - 1) * 216.0 * k);
}

double nrt_sf_airy_ai(double x) {
  /* PyTorch: NaN at both infinities, exactly 0 past x = 103.892. */
  if (isnan(x) || isinf(x)) return NAN;
  if (x > 103.892) return 0.0;
  if (x >= -5.0 && x <= 5.0) {
    /* Ai = Ai(0) f(x) + Ai'(0) g(x) with the Maclaurin series
     * f = 1 + x^3/3! + 1*4 x^6/6! + ..., g = x + 2 x^4/4! + 2*5 x^7/7! + ... */
    const double ai0 = 0.355028053887817239260, dai0 = -0.258819403792806798405;
    double x3 = x * x * x, f = 1.0, g = x, tf = 1.0, tg = x;
    for (int k = 1; k < 200; k++) {
      tf *= x3 / ((3.0 * k - 1) * (3.0 * k));
      tg *= x3 / ((3.0 * k) * (3.0 * k + 1));
      f += tf;
      g += tg;
      if (fabs(tf) <= 1e-17 * fabs(f) && fabs(tg) <= 1e-17 * fabs(g) + 1e-300) break;
    }
    return ai0 * f + dai0 * g;
  }
  double z = fabs(x), zeta = 2.0 / 3.0 * z * sqrt(z), z4 = sqrt(sqrt(z));
  if (x > 0) {
    /* Ai(x) ~ exp(-zeta) / (2 sqrt(pi) x^(1/4)) sum (-1)^k u_k zeta^-k */
    double u = 1.0, term = 1.0, sum = 1.0, prev = INFINITY;
    for (int k = 1; k < 100; k++) {
      u = airy_u_next(u, k);
      term = (k % 2 ? -u : u) / pow(zeta, k);
      if (fabs(term) >= prev || fabs(term) <= 1e-17 * fabs(sum)) break;
      sum += term;
      prev = fabs(term);
    }
    return exp(-zeta) / (2.0 * sqrt(SF_PI) * z4) * sum;
  }
  /* Ai(-z) ~ (sin(zeta + pi/4) P - cos(zeta + pi/4) Q) / (sqrt(pi) z^(1/4)),
   * P = sum (-1)^k u_2k zeta^-2k, Q = sum (-1)^k u_2k+1 zeta^-(2k+1). */
  double u = 1.0, p = 1.0, qs = 0.0, prev = INFINITY;
  for (int k = 1; k < 100; k++) {
    u = airy_u_next(u, k);
    double t = u / pow(zeta, k);
    if (t >= prev || t <= 1e-17) break;
    prev = t;
    int j = k / 2; /* index within P (k even) or Q (k odd) */
    double sgn = (j % 2) ? -1.0 : 1.0;
    if (k % 2) qs += sgn * t;
    else p += sgn * t;
  }
  double th = zeta + 0.25 * SF_PI;
  return (sin(th) * p - cos(th) * qs) / (sqrt(SF_PI) * z4);
}
