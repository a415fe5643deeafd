/* Family SPECIAL tests.
 *
 * 1. The scalar functions (special_math.h) against independent
 *    references computed here: identities, brute-force sums and
 *    quadratures, closed forms.
 * 2. The kernels through nrt_launch_run: fast path against the
 *    reference path on strided and broadcast layouts, 16-bit dtypes,
 *    empty shapes, and PyTorch's edge values. */
#include <stdint.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"
#include "kernels/pointwise/special/special.h"
#include "nrt/ops/special.h"

#define PI 3.14159265358979323846
#define EULER 0.57721566490153286061

/* ---- scalar functions ------------------------------------------------------- */

static void test_digamma_trigamma(void) {
  CHECK_NEAR(nrt_sf_digamma(1.0), -EULER, 1e-14);
  CHECK_NEAR(nrt_sf_digamma(0.5), -EULER - 2 * log(2.0), 1e-14);
  CHECK_NEAR(nrt_sf_trigamma(1.0), PI * PI / 6, 1e-14);
  CHECK_NEAR(nrt_sf_trigamma(0.5), PI * PI / 2, 1e-14);
  /* Recurrences psi(x+1) = psi(x) + 1/x, psi1(x+1) = psi1(x) - 1/x^2,
   * across the reflection and asymptotic switch points. */
  for (double x = -7.3; x < 30; x += 0.37) {
    CHECK_NEAR(nrt_sf_digamma(x + 1), nrt_sf_digamma(x) + 1 / x, 1e-11);
    CHECK_NEAR(nrt_sf_trigamma(x + 1), nrt_sf_trigamma(x) - 1 / (x * x), 1e-10);
  }
  CHECK(isinf(nrt_sf_digamma(0.0)) && nrt_sf_digamma(0.0) < 0);
  CHECK(isinf(nrt_sf_digamma(-0.0)) && nrt_sf_digamma(-0.0) > 0);
  CHECK(isnan(nrt_sf_digamma(-3.0)));
  CHECK(isnan(nrt_sf_digamma(-INFINITY)));
  CHECK(nrt_sf_digamma(INFINITY) == INFINITY);
}

/* (-1)^(n+1) n! sum_k (x+k)^-(n+1) by brute force, with the integral of
 * the remainder as its tail. */
static double polygamma_brute(int n, double x) {
  double s = 0;
  int K = 200000;
  for (int k = K - 1; k >= 0; k--) s += pow(x + k, -(n + 1));
  s += pow(x + K, -n) / n + 0.5 * pow(x + K, -(n + 1));
  return ((n % 2) ? 1 : -1) * tgamma(n + 1.0) * s;
}

static void test_polygamma_zeta(void) {
  for (int n = 1; n <= 5; n++)
    for (double x = 0.3; x < 20; x *= 1.9)
      CHECK_NEAR(nrt_sf_polygamma(n, x), polygamma_brute(n, x), 1e-9);
  CHECK_NEAR(nrt_sf_zeta(2, 1), PI * PI / 6, 1e-14);
  CHECK_NEAR(nrt_sf_zeta(4, 1), pow(PI, 4) / 90, 1e-14);
  CHECK_NEAR(nrt_sf_zeta(3.5, 2.25), nrt_sf_zeta(3.5, 1.25) - pow(1.25, -3.5), 1e-13);
  CHECK_NEAR(nrt_sf_zeta(4, -1.5), nrt_sf_zeta(4, 0.5) + pow(-1.5, -4) + pow(-0.5, -4), 1e-12);
  CHECK(nrt_sf_zeta(1, 2) == INFINITY);
  CHECK(isnan(nrt_sf_zeta(0.5, 2)));
  CHECK(nrt_sf_zeta(3, -2) == INFINITY);
  CHECK(isnan(nrt_sf_zeta(2.5, -0.5)));
  CHECK(isnan(nrt_sf_zeta(2, INFINITY)));
  CHECK(nrt_sf_zeta(INFINITY, 1) == 1.0);
}

static void test_incomplete_gamma(void) {
  for (double x = 0.01; x < 60; x *= 1.7) {
    CHECK_NEAR(nrt_sf_igamma(1, x), -expm1(-x), 1e-13);
    CHECK_NEAR(nrt_sf_igammac(0.5, x), erfc(sqrt(x)), 1e-12);
    /* P(n, x) = 1 - e^-x sum_{k<n} x^k / k! */
    double t = 1, s = 1;
    for (int k = 1; k < 6; k++) s += (t *= x / k);
    CHECK_NEAR(nrt_sf_igammac(6, x), exp(-x) * s, 1e-12);
    for (double a = 0.1; a < 80; a *= 2.3)
      CHECK_NEAR(nrt_sf_igamma(a, x) + nrt_sf_igammac(a, x), 1.0, 1e-12);
  }
  CHECK(isnan(nrt_sf_igamma(-1, 1)) && isnan(nrt_sf_igammac(1, -1)));
  CHECK(nrt_sf_igamma(0, 2) == 1.0 && nrt_sf_igammac(0, 2) == 0.0);
  CHECK(nrt_sf_igamma(2, 0) == 0.0 && nrt_sf_igammac(2, INFINITY) == 0.0);
}

/* Trapezoid rule: exponentially accurate for the smooth periodic or
 * decaying integrands below. */
static double i_quad(int nu, double x) { /* (1/pi) int_0^pi e^(x cos t) cos(nu t) dt */
  int m = 2000;
  double s = 0;
  for (int i = 0; i <= m; i++) {
    double t = PI * i / m, w = (i == 0 || i == m) ? 0.5 : 1.0;
    s += w * exp(x * cos(t)) * cos(nu * t);
  }
  return s / m;
}
static double k_quad(int nu, double x) { /* int_0^inf e^(-x cosh t) cosh(nu t) dt */
  int m = 20000;
  double h = 20.0 / m, s = 0;
  for (int i = 0; i <= m; i++) {
    double t = i * h;
    s += ((i == 0) ? 0.5 : 1.0) * exp(-x * cosh(t)) * cosh(nu * t);
  }
  return s * h;
}

static void test_modified_bessel(void) {
  for (double x = 0.05; x < 60; x *= 1.35) {
    CHECK_NEAR(nrt_sf_i0(x) / i_quad(0, x), 1.0, 1e-12);
    CHECK_NEAR(nrt_sf_i1(-x) / i_quad(1, x), -1.0, 1e-12);
    CHECK_NEAR(nrt_sf_i0e(x), exp(-x) * i_quad(0, x), 1e-12);
    CHECK_NEAR(nrt_sf_i1e(x), exp(-x) * i_quad(1, x), 1e-12);
    if (x < 40) {
      /* The series cancels up to ~1e-8 relative at its crossover (9). */
      CHECK_NEAR(nrt_sf_k0(x) / k_quad(0, x), 1.0, 5e-8);
      CHECK_NEAR(nrt_sf_k1(x) / k_quad(1, x), 1.0, 5e-8);
      CHECK_NEAR(nrt_sf_k0e(x) / (exp(x) * k_quad(0, x)), 1.0, 5e-8);
      CHECK_NEAR(nrt_sf_k1e(x) / (exp(x) * k_quad(1, x)), 1.0, 5e-8);
    }
  }
  CHECK(nrt_sf_k0(0) == INFINITY && isnan(nrt_sf_k1(-1)));
  CHECK(isnan(nrt_sf_i0(INFINITY)) && nrt_sf_i0e(-INFINITY) == 0.0);
}

static void test_airy(void) {
  CHECK_NEAR(nrt_sf_airy_ai(0), 0.355028053887817239, 1e-14);
  CHECK_NEAR(nrt_sf_airy_ai(1), 0.135292416312881416, 1e-12);
  CHECK_NEAR(nrt_sf_airy_ai(-1), 0.535560883292352059, 1e-12);
  /* Ai'' = x Ai, by central differences, on both sides of the switches
   * between the series and the expansions. */
  for (double x = -12; x < 12; x += 0.61) {
    double h = 1e-3, d2 = (nrt_sf_airy_ai(x + h) - 2 * nrt_sf_airy_ai(x) + nrt_sf_airy_ai(x - h)) / (h * h);
    CHECK(fabs(d2 - x * nrt_sf_airy_ai(x)) < 1e-5 * (1 + fabs(x)));
  }
  CHECK(isnan(nrt_sf_airy_ai(INFINITY)) && nrt_sf_airy_ai(200) == 0.0);
}

static void test_normal(void) {
  for (double x = -8; x < 8; x += 0.13) {
    double ndtr = 0.5 * erfc(-x / sqrt(2.0));
    CHECK_NEAR(nrt_sf_log_ndtr(x), log(ndtr), 1e-12);
    /* Near 1 the CDF itself has too few digits to invert. */
    if (x < 3) CHECK_NEAR(nrt_sf_ndtri(ndtr), x, 1e-9);
    CHECK_NEAR(nrt_sf_erfcx(x), exp(x * x) * erfc(x), 1e-12);
  }
  CHECK_NEAR(nrt_sf_erfcx(1e4), 1 / (1e4 * sqrt(PI)) * (1 - 0.5e-8), 1e-14);
  CHECK_NEAR(nrt_sf_log_ndtr(-100), -5000 - log(100 * sqrt(2 * PI)), 1e-6);
  CHECK(nrt_sf_ndtri(0) == -INFINITY && nrt_sf_ndtri(1) == INFINITY && isnan(nrt_sf_ndtri(1.5)));
}

/* ---- kernels ------------------------------------------------------------------ */

/* A 1-d elementwise launch of n elements. */
static nrt_launch new_launch(nrt_op op, int64_t n, nrt_dtype compute) {
  return nrt_test_launch_op(op, compute, 1, &n);
}

/* Every unary/binary float op: fast path == reference path, with a
 * strided input and a broadcast second input; and the results are the
 * scalar function rounded to float. */
static void test_fast_matches_reference(void) {
  static const nrt_op ops[] = {
      NRT_OP(DIGAMMA), NRT_OP(LGAMMA), NRT_OP(POLYGAMMA), NRT_OP(I0), NRT_OP(I0E), NRT_OP(I1),
      NRT_OP(I1E), NRT_OP(K0), NRT_OP(K0E), NRT_OP(K1), NRT_OP(K1E), NRT_OP(BESSEL_J0),
      NRT_OP(BESSEL_J1), NRT_OP(BESSEL_Y0), NRT_OP(BESSEL_Y1), NRT_OP(SPHERICAL_BESSEL_J0),
      NRT_OP(AIRY_AI), NRT_OP(ERFCX), NRT_OP(LOG_NDTR), NRT_OP(NDTRI), NRT_OP(SINC), NRT_OP(ENTR),
      NRT_OP(FREXP_MANTISSA), NRT_OP(FREXP_EXPONENT), NRT_OP(ROUND_DECIMALS), NRT_OP(IGAMMA),
      NRT_OP(IGAMMAC), NRT_OP(ZETA), NRT_OP(XLOG1PY), NRT_OP(NEXTAFTER), NRT_OP(HEAVISIDE),
      NRT_OP(LOGADDEXP2), NRT_OP(CHEBYSHEV_T), NRT_OP(CHEBYSHEV_U), NRT_OP(CHEBYSHEV_V),
      NRT_OP(CHEBYSHEV_W), NRT_OP(SHIFTED_CHEBYSHEV_T), NRT_OP(SHIFTED_CHEBYSHEV_U),
      NRT_OP(SHIFTED_CHEBYSHEV_V), NRT_OP(SHIFTED_CHEBYSHEV_W), NRT_OP(HERMITE_H),
      NRT_OP(HERMITE_HE), NRT_OP(LAGUERRE_L), NRT_OP(LEGENDRE_P)};
  enum { N = 1000 };
  static float in[2 * N], fast[N], ref[N];
  float second = 3.0f;
  for (int i = 0; i < 2 * N; i++) in[i] = -6.0f + 12.0f * (float)i / (2 * N);
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
    nrt_launch l = new_launch(ops[o], N, NRT_FLOAT32);
    l.params[0] = 2;
    l.scalars[0].f = 100.0;
    nrt_test_operand_1d(&l, 1, in, NRT_FLOAT32, 2); /* every other element */
    if (l.ninputs == 2) nrt_test_operand_1d(&l, 2, &second, NRT_FLOAT32, 0);
    nrt_test_operand_1d(&l, 0, fast, NRT_FLOAT32, 1);
    CHECK_OK(nrt_launch_run(&l));
    nrt_kernels_set_reference(true);
    nrt_test_operand_1d(&l, 0, ref, NRT_FLOAT32, 1);
    CHECK_OK(nrt_launch_run(&l));
    nrt_kernels_set_reference(false);
    int same = 0;
    for (int i = 0; i < N; i++) same += memcmp(&fast[i], &ref[i], 4) == 0;
    if (same != N) fprintf(stderr, "%s: %d of %d differ\n", nrt_op_name(ops[o]), N - same, N);
    CHECK(same == N);
  }
  /* Values: a few ops against their scalar functions. */
  nrt_launch l = new_launch(NRT_OP(POLYGAMMA), N, NRT_FLOAT32);
  l.params[0] = 3;
  nrt_test_operand_1d(&l, 1, in, NRT_FLOAT32, 2);
  nrt_test_operand_1d(&l, 0, fast, NRT_FLOAT32, 1);
  CHECK_OK(nrt_launch_run(&l));
  for (int i = 0; i < N; i++) {
    float want = (float)nrt_sf_polygamma(3, in[2 * i]);
    CHECK(memcmp(&fast[i], &want, 4) == 0 || (isnan(fast[i]) && isnan(want)));
  }
  /* Empty: nothing is touched. */
  l = new_launch(NRT_OP(I0), 0, NRT_FLOAT32);
  nrt_test_operand_1d(&l, 1, NULL, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 0, NULL, NRT_FLOAT32, 1);
  CHECK_OK(nrt_launch_run(&l));
}

static void test_sixteen_bit(void) {
  /* bfloat16 in, bfloat16 out: computed in double, rounded once. */
  enum { N = 64 };
  uint16_t x[N], out[N];
  for (int i = 0; i < N; i++) x[i] = nrt_f32_to_bf16(0.25f + 0.5f * i);
  nrt_launch l = new_launch(NRT_OP(DIGAMMA), N, NRT_BFLOAT16);
  nrt_test_operand_1d(&l, 1, x, NRT_BFLOAT16, 1);
  nrt_test_operand_1d(&l, 0, out, NRT_BFLOAT16, 1);
  CHECK_OK(nrt_launch_run(&l));
  for (int i = 0; i < N; i++)
    CHECK(out[i] == nrt_f32_to_bf16((float)nrt_sf_digamma(nrt_bf16_to_f32(x[i]))));

  /* nextafter steps one unit of the output's format. */
  uint16_t a[4], b[4], r[4];
  float av[4] = {1.0f, 1.0f, 0.0f, -2.0f}, bv[4] = {2.0f, 0.0f, -1.0f, 0.0f};
  for (int i = 0; i < 4; i++) {
    a[i] = nrt_f32_to_f16(av[i]);
    b[i] = nrt_f32_to_f16(bv[i]);
  }
  l = new_launch(NRT_OP(NEXTAFTER), 4, NRT_FLOAT16);
  nrt_test_operand_1d(&l, 1, a, NRT_FLOAT16, 1);
  nrt_test_operand_1d(&l, 2, b, NRT_FLOAT16, 1);
  nrt_test_operand_1d(&l, 0, r, NRT_FLOAT16, 1);
  CHECK_OK(nrt_launch_run(&l));
  CHECK(r[0] == 0x3c01 && r[1] == 0x3bff && r[2] == 0x8001 && r[3] == 0xbfff);
  for (int i = 0; i < 4; i++) {
    a[i] = nrt_f32_to_bf16(av[i]);
    b[i] = nrt_f32_to_bf16(bv[i]);
  }
  l.compute_dtype = NRT_BFLOAT16;
  for (int k = 0; k < 3; k++) l.operands[k].dtype = NRT_BFLOAT16;
  CHECK_OK(nrt_launch_run(&l));
  CHECK(r[0] == 0x3f81 && r[1] == 0x3f7f && r[2] == 0x8001 && r[3] == 0xbfff);
}

static void test_edges_match_pytorch(void) {
  /* frexp's exponent into int32; round(decimals) as PyTorch 2.13 prints;
   * heaviside on int64. */
  float x[4] = {8.0f, -0.375f, 0.0f, INFINITY};
  int32_t e[4];
  nrt_launch l = new_launch(NRT_OP(FREXP_EXPONENT), 4, NRT_FLOAT32);
  nrt_test_operand_1d(&l, 1, x, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 0, e, NRT_INT32, 1);
  CHECK_OK(nrt_launch_run(&l));
  CHECK(e[0] == 4 && e[1] == -1 && e[2] == 0 && e[3] == 0);

  float y[3] = {1.2345f, 2.5f, 1250.0f}, r[3];
  l = new_launch(NRT_OP(ROUND_DECIMALS), 3, NRT_FLOAT32);
  l.scalars[0].f = 1000.0;
  nrt_test_operand_1d(&l, 1, y, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 0, r, NRT_FLOAT32, 1);
  CHECK_OK(nrt_launch_run(&l));
  CHECK(r[0] == 1.234f && r[1] == 2.5f && r[2] == 1250.0f); /* 1234.5 rounds to even */
  l.params[0] = 1; /* decimals = -3 */
  CHECK_OK(nrt_launch_run(&l));
  CHECK(r[0] == 0.0f && r[1] == 0.0f && r[2] == 1000.0f);

  int64_t hx[4] = {-3, 0, 5, 0}, hv[4] = {7, 7, 7, -2}, ho[4];
  l = new_launch(NRT_OP(HEAVISIDE), 4, NRT_INT64);
  nrt_test_operand_1d(&l, 1, hx, NRT_INT64, 1);
  nrt_test_operand_1d(&l, 2, hv, NRT_INT64, 1);
  nrt_test_operand_1d(&l, 0, ho, NRT_INT64, 1);
  CHECK_OK(nrt_launch_run(&l));
  CHECK(ho[0] == 0 && ho[1] == 7 && ho[2] == 1 && ho[3] == -2);

  /* Polynomials: order from a float, negative and NaN give 0. */
  float px[4] = {0.5f, 0.5f, -1.0f, 0.3f}, pn[4] = {2.0f, -1.0f, 3.0f, NAN}, po[4];
  l = new_launch(NRT_OP(CHEBYSHEV_T), 4, NRT_FLOAT32);
  nrt_test_operand_1d(&l, 1, px, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 2, pn, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 0, po, NRT_FLOAT32, 1);
  CHECK_OK(nrt_launch_run(&l));
  CHECK(po[0] == -0.5f && po[1] == 0.0f && po[2] == -1.0f && po[3] == 0.0f);
}

int main(void) {
  RUN_TEST(test_digamma_trigamma);
  RUN_TEST(test_polygamma_zeta);
  RUN_TEST(test_incomplete_gamma);
  RUN_TEST(test_modified_bessel);
  RUN_TEST(test_airy);
  RUN_TEST(test_normal);
  RUN_TEST(test_fast_matches_reference);
  RUN_TEST(test_sixteen_bit);
  RUN_TEST(test_edges_match_pytorch);
  return TEST_RESULT();
}
