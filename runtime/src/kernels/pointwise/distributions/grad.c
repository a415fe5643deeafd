/* Family DISTRIBUTIONS: the reparameterised gradients behind rsample()
 * (PyTorch's _standard_gamma_grad and _dirichlet_grad), pure math on their
 * inputs. They are approximations (series, saddle points, fitted rational
 * functions) rather than exact derivatives, so matching the CPU means the
 * same formulas and constants, and for float32 data the same float32
 * steps: grad_tmpl.h is compiled once per precision. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/pointwise/distributions/distributions.h"

/* Cephes' asymptotic digamma series in 1/x^2 (Bernoulli numbers over 2k),
 * Horner from the highest power. */
static double digamma_series(double z) {
  static const double A[7] = {
      8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
      -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
      8.33333333333333333333E-2,
  };
  double r = 0;
  for (int i = 0; i < 7; i++) r = r * z + A[i];
  return r;
}

/* Beta's gradient in alpha when alpha and beta are both large: Rice's
 * saddle point expansion, in double (a polynomial form near the mean,
 * where the general one is singular). */
static double beta_grad_alpha_mid(double x, double alpha, double beta) {
  const double total = alpha + beta, mean = alpha / total;
  const double std = sqrt(alpha * beta / (total + 1)) / total;
  if (mean - 0.1 * std <= x && x <= mean + 0.1 * std) {
    const double poly =
        47 * x * (beta * beta) * (beta * beta) +
        alpha * ((43 + 20 * (16 + 27 * beta) * x) * (beta * beta) * beta +
                 alpha * (3 * (59 + 180 * beta - 90 * x) * (beta * beta) +
                          alpha * ((453 + 1620 * beta * (1 - x) - 455 * x) * beta +
                                   alpha * (8 * (1 - x) * (135 * beta - 11)))));
    const double prefactor_num = (1 + 12 * alpha) * (1 + 12 * beta) / (total * total);
    const double prefactor_den = 12960 * alpha * alpha * alpha * beta * beta * (1 + 12 * total);
    return prefactor_num / (1 - x) * poly / prefactor_den;
  }
  const double prefactor = -x / sqrt(2 * alpha * beta / total);
  const double stirling = (1 + 1 / (12 * alpha) + 1 / (288 * alpha * alpha)) *
                          (1 + 1 / (12 * beta) + 1 / (288 * beta * beta)) /
                          (1 + 1 / (12 * total) + 1 / (288 * total * total));
  const double term1_num = 2 * (alpha * alpha) * (x - 1) + alpha * beta * (x - 1) - x * (beta * beta);
  const double axbx = alpha * (x - 1) + beta * x;
  const double term1_den = sqrt(2 * alpha / beta) * pow(total, 1.5) * axbx * axbx;
  const double term1 = term1_num / term1_den;
  const double term2 = 0.5 * log(alpha / (total * x));
  const double term3 = sqrt(8 * alpha * beta / total) / (beta * x + alpha * (x - 1));
  const double term4_base = beta * log(beta / (total * (1 - x))) + alpha * log(alpha / (total * x));
  const double term4 = pow(term4_base, -1.5);
  const double term1234 = term1 + term2 * (term3 + (x < mean ? term4 : -term4));
  return stirling * prefactor * term1234;
}

/* The fitted rational correction of the Dirichlet gradient: numerator
 * [0] and denominator [1], by powers of log x and log(alpha / x), each a
 * cubic in the third log coordinate. */
static const double dirichlet_coef[2][3][3][4] = {
    {{{1.003668233, -0.01061107488, -0.0657888334, 0.01201642863},
      {0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033},
      {-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013}},
     {{0.221950385, -0.3187676331, 0.01799915743, 0.01074823814},
      {-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057},
      {0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05}},
     {{-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565},
      {0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181},
      {0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05}}},
    {{{1, -0.02924021934, -0.04438342661, 0.007285809825},
      {0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521},
      {-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149}},
     {{0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273},
      {0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956},
      {-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05}},
     {{0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05},
      {0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05},
      {-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06}}},
};

#define S float
#define SFX f
#define S_LOG logf
#define S_POW powf
#define S_FLOOR floorf
#define S_TAN tanf
#include "kernels/pointwise/distributions/grad_tmpl.h"
#undef S
#undef SFX
#undef S_LOG
#undef S_POW
#undef S_FLOOR
#undef S_TAN

#define S double
#define SFX d
#define S_LOG log
#define S_POW pow
#define S_FLOOR floor
#define S_TAN tan
#include "kernels/pointwise/distributions/grad_tmpl.h"
#undef S
#undef SFX
#undef S_LOG
#undef S_POW
#undef S_FLOOR
#undef S_TAN

/* -(dF/dalpha) / f for x ~ Gamma(alpha), in double for every dtype (as
 * the CPU): a Taylor series for x < 0.8, Rice's saddle point expansion for
 * alpha > 8, else a fitted bivariate rational function of log(x / alpha)
 * and log(alpha). A NaN from the series (x = 0, alpha = 0) gives 0, as on
 * the CPU. The float-suffixed thresholds are the CPU's float constants. */
double nrt_dist_gamma_grad(double alpha, double x) {
  if (x < (double)0.8f) {
    double numer = 1, denom = alpha;
    double series1 = numer / denom, series2 = numer / (denom * denom);
    for (int i = 1; i <= 5; ++i) {
      numer *= -x / (double)i;
      denom += 1;
      series1 += numer / denom;
      series2 += numer / (denom * denom);
    }
    const double pow_x_alpha = pow(x, alpha);
    const double gamma_pdf = pow(x, alpha - 1) * exp(-x);
    const double gamma_cdf = pow_x_alpha * series1;
    const double gamma_cdf_alpha = (log(x) - nrt_dist_digamma_d(alpha)) * gamma_cdf - pow_x_alpha * series2;
    const double result = -gamma_cdf_alpha / gamma_pdf;
    return result != result ? 0.0 : result;
  }
  if (alpha > (double)8.0f) {
    if ((double)0.9f * alpha <= x && x <= (double)1.1f * alpha) {
      const double numer_1 = 1 + 24 * alpha * (1 + 12 * alpha);
      const double numer_2 = 1440 * (alpha * alpha) + 6 * x * (53 - 120 * x) - 65 * x * x / alpha +
                             alpha * (107 + 3600 * x);
      const double denom = 1244160 * (alpha * alpha) * (alpha * alpha);
      return numer_1 * numer_2 / denom;
    }
    const double denom = sqrt(8 * alpha);
    const double term2 = denom / (alpha - x);
    const double term3 = pow(x - alpha - alpha * log(x / alpha), -1.5);
    const double term23 = (x < alpha) ? term2 - term3 : term2 + term3;
    const double term1 = log(x / alpha) * term23 - sqrt(2 / alpha) * (alpha + x) / ((alpha - x) * (alpha - x));
    const double stirling = 1 + 1 / (12 * alpha) * (1 + 1 / (24 * alpha));
    const double numer = x * term1;
    return -stirling * numer / denom;
  }
  static const double coef_uv[3][8] = {
      {0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084},
      {0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915,
       -0.00058392623},
      {0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326, 0.00085092367,
       -1.5247877e-07},
  };
  const double u = log(x / alpha), v = log(alpha);
  double c[8];
  for (int i = 0; i < 8; ++i) c[i] = coef_uv[0][i] + u * (coef_uv[1][i] + u * coef_uv[2][i]);
  const double p = c[0] + v * (c[1] + v * (c[2] + v * c[3]));
  const double q = c[4] + v * (c[5] + v * (c[6] + v * c[7]));
  return exp(p / q);
}
