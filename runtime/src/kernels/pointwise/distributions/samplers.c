/* Family DISTRIBUTIONS (nrt/ops/distributions.h): the samplers and the
 * family's pointwise table.
 *
 * The algorithms are the ones PyTorch's CPU uses (ATen's
 * native/Distributions.h and Distributions.cpp), written here from the
 * papers' descriptions, in double like the CPU's accumulation type, with
 * the CPU's answers at the edges (alpha = 0, rate = 0, count = 0, prob 0
 * or 1, NaN parameters, tiny gamma samples clamped to the smallest
 * positive normal). Only the random stream differs: each element draws
 * from its own Philox counter sequence (the header's mapping) instead of
 * one shared Mersenne twister, so results do not depend on threading.
 *
 * Fast path and reference: a rejection sampler's loop is scalar by
 * nature, so the only vectorisable part is the Philox work. The fast path
 * computes the first rounds of a block's elements in batches, one per
 * round (nrt_philox_batch with stream = tag + j is exactly counter
 * {e, tag + j, 0}): enough for most samples (a gamma sample takes three
 * uniforms: a Box-Muller pair and the acceptance test); the
 * reference path computes every round one block at a time with the
 * textbook Philox (nrt_philox4x32_10). Both give the same bits. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include <float.h>

#include "kernels/pointwise/distributions/distributions.h"
#include "kernels/pointwise/pointwise.h"

static double lgamma_one(double x) {
  int sign; /* lgamma's sign global would be a data race */
  return lgamma_r(x, &sign);
}

/* ---- gamma: Marsaglia and Tsang (2000), with the alpha < 1 boost ------------------
 * For alpha < 1, Gamma(alpha) = Gamma(alpha + 1) * U^(1/alpha) (U uniform
 * on (0, 1]), drawn first. The core draws a normal x until y = 1 + c x > 0,
 * then accepts d y^3 on the squeeze u < 1 - 0.0331 x^4 or on the full test
 * log u < x^2 / 2 + d (1 - v + log v). As on the CPU, parameters outside
 * the domain are not rejected: alpha < 0 runs the same arithmetic (NaN for
 * alpha <= -2/3), and NaN gives NaN; the store's clamp turns both into the
 * smallest normal, as the CPU's max() does. log_scale: the boost as a log
 * (the log variant), or NULL to apply it as a factor. */
static double gamma_core(double alpha, nrt_dist_stream *s, double *log_scale) {
  double scale = 1.0;
  if (alpha < 1.0) {
    if (alpha == 0.0) {
      if (log_scale) *log_scale = -INFINITY;
      return 0.0;
    }
    /* u1^(1/alpha), u1 in (0, 1]: through its log, which the log variant
     * keeps (exp(log) is cheaper than pow and as accurate here). */
    const double ls = log(1.0 - nrt_dist_uniform(s)) / alpha;
    if (log_scale) *log_scale = ls;
    else scale = exp(ls);
    alpha += 1.0;
  } else if (log_scale) {
    *log_scale = 0.0;
  }
  const double d = alpha - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
  for (;;) {
    double x, y;
    do {
      x = nrt_dist_normal(s);
      y = 1.0 + c * x;
    } while (y <= 0.0 && !s->exhausted);
    const double v = y * y * y, u = 1.0 - nrt_dist_uniform(s), xx = x * x;
    if (s->exhausted) return NAN;
    if (u < 1.0 - 0.0331 * xx * xx || log(u) < 0.5 * xx + d * (1.0 - v + log(v)))
      return log_scale ? d * v : scale * d * v;
  }
}

double nrt_dist_gamma(double alpha, nrt_dist_stream *s) { return gamma_core(alpha, s, NULL); }

double nrt_dist_gamma_log(double alpha, nrt_dist_stream *s) {
  double log_scale;
  double core = gamma_core(alpha, s, &log_scale);
  return alpha == 0.0 ? -INFINITY : log_scale + log(core);
}

/* ---- Poisson ----------------------------------------------------------------------
 * rate < 10: count the uniforms whose running product stays above
 * exp(-rate). rate >= 10: Hoermann's transformed rejection with squeeze
 * (PTRS, 1993) with the paper's constants. An infinite rate gives what
 * the CPU's int64 conversion of its (infinite) candidate gives on x86,
 * INT64_MIN; a negative or NaN rate NaN (the glue raises before). */
static double poisson_ptrs(double rate, nrt_dist_stream *s) {
  const double slam = sqrt(rate), loglam = log(rate);
  const double b = 0.931 + 2.53 * slam, a = -0.059 + 0.02483 * b;
  const double inv_alpha = 1.1239 + 1.1328 / (b - 3.4), v_r = 0.9277 - 3.6224 / (b - 2.0);
  while (!s->exhausted) {
    const double U = nrt_dist_uniform(s) - 0.5, V = nrt_dist_uniform(s);
    const double us = 0.5 - fabs(U);
    const double k = floor((2.0 * a / us + b) * U + rate + 0.43);
    if (us >= 0.07 && V <= v_r) return k;
    if (k < 0 || (us < 0.013 && V > us)) continue;
    if (log(V) + log(inv_alpha) - log(a / (us * us) + b) <= -rate + k * loglam - lgamma_one(k + 1.0)) return k;
  }
  return NAN;
}

double nrt_dist_poisson(double rate, nrt_dist_stream *s) {
  if (!(rate >= 0.0)) return NAN;
  if (rate >= 10.0) return isinf(rate) ? (double)INT64_MIN : poisson_ptrs(rate, s);
  if (rate == 0.0) return 0.0;
  const double limit = exp(-rate);
  double prod = 1.0, k = 0.0;
  while (!s->exhausted) {
    prod *= nrt_dist_uniform(s);
    if (prod <= limit) return k;
    k += 1.0;
  }
  return NAN;
}

/* ---- binomial ---------------------------------------------------------------------
 * With p <= 1/2 (else count minus the sample of 1 - p): n p < 10 inverts
 * by summing geometric waiting times ceil(log U / log(1 - p)) until they
 * pass n; n p >= 10 uses Hoermann's BTRS (1993) with the constants the CPU
 * uses (TensorFlow's variant: the transformed V is compared in logs).
 * count <= 0 or prob <= 0 gives 0, prob >= 1 gives count, NaN prob NaN;
 * a NaN count (the CPU never returns from it) gives NaN. */
static double binomial_inversion(double n, double p, nrt_dist_stream *s) {
  const double logq = log1p(-p);
  double sum = 0.0, k = 0.0;
  while (!s->exhausted) {
    sum += ceil(log(nrt_dist_uniform(s)) / logq);
    if (sum > n) return k;
    k += 1.0;
  }
  return NAN;
}

/* log k! minus Stirling's approximation of it, at k (truncated to an
 * integer below 10, where the CPU tabulates it; its series above). */
static double stirling_tail(double k) {
  if (k < 10.0) {
    double ki = floor(k);
    return lgamma_one(ki + 1.0) - ((ki + 0.5) * log(ki + 1.0) - (ki + 1.0) + 0.91893853320467274178);
  }
  const double kp1sq = (k + 1.0) * (k + 1.0);
  return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1.0);
}

static double binomial_btrs(double n, double p, nrt_dist_stream *s) {
  const double spq = sqrt(n * p * (1.0 - p));
  const double b = 1.15 + 2.53 * spq, a = -0.0873 + 0.0248 * b + 0.01 * p, c = n * p + 0.5;
  const double v_r = 0.92 - 4.2 / b, r = p / (1.0 - p), alpha = (2.83 + 5.1 / b) * spq;
  const double m = floor((n + 1.0) * p);
  if (isinf(n)) return n;
  while (!s->exhausted) {
    const double U = nrt_dist_uniform(s) - 0.5;
    double V = nrt_dist_uniform(s);
    const double us = 0.5 - fabs(U);
    const double k = floor((2.0 * a / us + b) * U + c);
    if (k < 0 || k > n) continue;
    if (us >= 0.07 && V <= v_r) return k;
    V = log(V * alpha / (a / (us * us) + b));
    const double bound = (m + 0.5) * log((m + 1.0) / (r * (n - m + 1.0))) +
                         (n + 1.0) * log((n - m + 1.0) / (n - k + 1.0)) +
                         (k + 0.5) * log(r * (n - k + 1.0) / (k + 1.0)) + stirling_tail(m) +
                         stirling_tail(n - m) - stirling_tail(k) - stirling_tail(n - k);
    if (V <= bound) return k;
  }
  return NAN;
}

double nrt_dist_binomial(double n, double p, nrt_dist_stream *s) {
  if (n <= 0.0 || p <= 0.0) return 0.0;
  if (p >= 1.0) return n;
  if (n != n || p != p) return NAN;
  if (p <= 0.5) return n * p >= 10.0 ? binomial_btrs(n, p, s) : binomial_inversion(n, p, s);
  const double q = 1.0 - p;
  return n - (n * q >= 10.0 ? binomial_btrs(n, q, s) : binomial_inversion(n, q, s));
}

/* ---- block functions --------------------------------------------------------------- */

/* The CPU's std::max(smallest normal, sample): NaN gives the normal too.
 * float64 data is computed at float32 precision, so its floor is
 * float32's smallest normal rather than float64's. */
static inline float clamp_gamma(double g) {
  float f = (float)g;
  return FLT_MIN < f ? f : FLT_MIN;
}
/* Dirichlet's log-gamma floor: the CPU clamps each gamma sample to
 * float64's smallest normal before normalising. */
#define LOG_DBL_MIN (-708.39641853226410622)
static inline float clamp_log_gamma(double lg) { return (float)(LOG_DBL_MIN < lg ? lg : LOG_DBL_MIN); }

typedef enum { S_GAMMA, S_GAMMA_LOG, S_POISSON, S_BINOMIAL } sampler;

static inline float sample_one(sampler which, float a, float b, nrt_dist_stream *s) {
  switch (which) {
  case S_GAMMA: return clamp_gamma(nrt_dist_gamma(a, s));
  case S_GAMMA_LOG: return clamp_log_gamma(nrt_dist_gamma_log(a, s));
  case S_POISSON: return (float)nrt_dist_poisson(a, s);
  case S_BINOMIAL: return (float)nrt_dist_binomial(a, b, s);
  }
  return NAN;
}

/* Rounds the fast path computes in batches for a block: two cover a
 * gamma sample and most rejection attempts; the counting methods (Poisson
 * below rate 10, binomial inversion) draw about mean + 1 uniforms, two
 * per round, so they get rounds for the block's largest mean. */
#define DIST_MAX_PRE 8
static int rounds_wanted(sampler which, const float *a, const float *b, int m) {
  if (which != S_POISSON && which != S_BINOMIAL) return 2;
  float top = 0;
  for (int i = 0; i < m; i++) {
    float mean = a[i];
    if (b) {
      float p = b[i] < 0.5f ? b[i] : 1 - b[i];
      mean = a[i] * p;
    }
    if (mean < 10 && mean > top) top = mean; /* NaN fails both */
  }
  int r = 1 + (int)((top + 2) / 2);
  return r < 2 ? 2 : (r > DIST_MAX_PRE ? DIST_MAX_PRE : r);
}

/* n elements from linear index `index`: element i is e = p1 + index + i. */
static inline void sample_block(sampler which, float *out, const float *a, const float *b, int64_t n,
                                int64_t index, const nrt_launch *l) {
  const uint64_t seed = (uint64_t)l->params[0], e0 = (uint64_t)l->params[1] + (uint64_t)index;
  nrt_dist_stream s;
  if (nrt_kernels_reference()) {
    for (int64_t i = 0; i < n; i++) {
      nrt_dist_stream_init(&s, seed, e0 + (uint64_t)i, NULL, 0, 0);
      out[i] = sample_one(which, a[i], b ? b[i] : 0.0f, &s);
    }
    return;
  }
  uint32_t w[DIST_MAX_PRE][4 * NRT_PHILOX_MAX_BATCH];
  for (int64_t j = 0; j < n; j += NRT_PHILOX_MAX_BATCH) {
    int m = n - j < NRT_PHILOX_MAX_BATCH ? (int)(n - j) : NRT_PHILOX_MAX_BATCH;
    int rounds = rounds_wanted(which, a + j, b ? b + j : NULL, m);
    for (int r = 0; r < rounds; r++)
      nrt_philox_batch(seed, e0 + (uint64_t)j, m, NRT_DIST_PHILOX_TAG + (uint32_t)r, w[r]);
    for (int i = 0; i < m; i++) {
      nrt_dist_stream_init(&s, seed, e0 + (uint64_t)(j + i), w[0] + 4 * i, rounds, 4 * NRT_PHILOX_MAX_BATCH);
      out[j + i] = sample_one(which, a[j + i], b ? b[j + i] : 0.0f, &s);
    }
  }
}

static void gamma_rng(float *out, const float *a, int64_t n, int64_t index, const nrt_launch *l) {
  sample_block(S_GAMMA, out, a, NULL, n, index, l);
}
static void gamma_log_rng(float *out, const float *a, int64_t n, int64_t index, const nrt_launch *l) {
  sample_block(S_GAMMA_LOG, out, a, NULL, n, index, l);
}
static void poisson_rng(float *out, const float *a, int64_t n, int64_t index, const nrt_launch *l) {
  sample_block(S_POISSON, out, a, NULL, n, index, l);
}
static void binomial_rng(float *out, const float *a, const float *b, const float *c, int64_t n, int64_t index,
                         const nrt_launch *l) {
  sample_block(S_BINOMIAL, out, a, b, n, index, l);
}

/* The gradients are scalar loops over grad.c's functions: series and
 * rational approximations with data-dependent branches, nothing worth a
 * vectorised twin (the engine's reference path runs these same loops).
 * float64 data takes PyTorch's double formulas, other data its float32
 * ones (the gradients' CPU kernels accept float32 and float64 only). */
static void gamma_grad_f32(float *out, const float *a, const float *b, const float *c, int64_t n,
                           const nrt_launch *l) {
  for (int64_t i = 0; i < n; i++) out[i] = (float)nrt_dist_gamma_grad(a[i], b[i]);
}
static void dirichlet_grad_f32(float *out, const float *a, const float *b, const float *c, int64_t n,
                               const nrt_launch *l) {
  if (l->operands[0].dtype == NRT_FLOAT64)
    for (int64_t i = 0; i < n; i++) out[i] = (float)nrt_dist_dirichlet_grad_d(a[i], b[i], c[i]);
  else
    for (int64_t i = 0; i < n; i++) out[i] = nrt_dist_dirichlet_grad_f(a[i], b[i], c[i]);
}

const nrt_pw_kernel *nrt_pw_distributions_kernel(nrt_op op) {
  switch ((int)op) {
    PW_CASE(STANDARD_GAMMA, .rng_f32 = gamma_rng)
    PW_CASE(STANDARD_GAMMA_LOG, .rng_f32 = gamma_log_rng)
    PW_CASE(POISSON, .rng_f32 = poisson_rng)
    PW_CASE(BINOMIAL, .rng3_f32 = binomial_rng)
    PW_CASE(STANDARD_GAMMA_GRAD, .f32 = gamma_grad_f32)
    PW_CASE(DIRICHLET_GRAD, .f32 = dirichlet_grad_f32)
  default: return NULL;
  }
}
