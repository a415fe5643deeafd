/* 1-d complex FFT plans of any length (nrt_fft_plan in complex_kernels.h).
 *
 * Lengths whose prime factors are all small run a recursive mixed-radix
 * decimation in time: n = p * m splits into p interleaved transforms of
 * length m, combined by a length-p DFT per output column after twiddling.
 * That costs n * p per level, so a length with a large prime factor uses
 * Bluestein's algorithm instead: the DFT as a chirp-weighted convolution,
 * computed with a power-of-two FFT of length >= 2n - 1.
 * Twiddles are computed one by one in double (no recurrences), so their
 * error does not grow with n. */
#include <math.h>
#include <stdlib.h>

#include "kernels/complex/complex.h"

/* Above this prime factor the p^2 combine loses to Bluestein's three
 * power-of-two FFTs. */
#define FFT_MAX_DIRECT_PRIME 61
#define FFT_MAX_FACTORS 64

struct nrt_fft_plan {
  int64_t n;
  int sign;
  int nfactors;
  int64_t factors[FFT_MAX_FACTORS]; /* smallest first */
  int64_t max_factor;
  nrt_cx *tw;                       /* tw[j] = e^(sign 2 pi i j / n) */
  /* Bluestein: chirp[j] = e^(sign pi i j^2 / n), kernel = FFT_m(conj chirp,
   * wrapped), sub = forward plan of length m. */
  nrt_fft_plan *sub;
  int64_t m;
  nrt_cx *chirp, *kernel;
  int64_t scratch;
};

static const double NRT_TWO_PI = 6.283185307179586476925286766559;

/* e^(sign 2 pi i num / den), num reduced mod den first so the angle stays
 * small and exact. */
static nrt_cx unit_root(int64_t num, int64_t den, int sign) {
  num %= den;
  if (num < 0) num += den;
  double a = NRT_TWO_PI * (double)num / (double)den;
  return nrt_cx_make(cos(a), sign * sin(a));
}

void nrt_fft_plan_destroy(nrt_fft_plan *p) {
  if (!p) return;
  nrt_fft_plan_destroy(p->sub);
  free(p->tw);
  free(p->chirp);
  free(p->kernel);
  free(p);
}

int64_t nrt_fft_scratch_len(const nrt_fft_plan *p) { return p->scratch; }

static void fft_rec(const nrt_fft_plan *p, const nrt_cx *in, int64_t istride, nrt_cx *out, int64_t n,
                    int fi, int64_t twstep, nrt_cx *tmp) {
  if (n == 1) {
    out[0] = in[0];
    return;
  }
  int64_t q = p->factors[fi], m = n / q;
  for (int64_t r = 0; r < q; r++)
    fft_rec(p, in + r * istride, istride * q, out + r * m, m, fi + 1, twstep * q, tmp);
  /* Column k: the q sub-results at k, twiddled by W_n^(rk), then a length-q
   * DFT gives outputs k + s*m (W_n^(r s m) = W_q^(r s)). */
  const nrt_cx *tw = p->tw;
  int64_t N = p->n, qstep = N / q;
  for (int64_t k = 0; k < m; k++) {
    for (int64_t r = 0; r < q; r++) {
      nrt_cx y = out[r * m + k];
      tmp[r] = r == 0 ? y : nrt_cx_mul(y, tw[(r * k * twstep) % N]);
    }
    if (q == 2) {
      out[k] = nrt_cx_add(tmp[0], tmp[1]);
      out[k + m] = nrt_cx_sub(tmp[0], tmp[1]);
      continue;
    }
    for (int64_t s = 0; s < q; s++) {
      nrt_cx acc = tmp[0];
      for (int64_t r = 1; r < q; r++) acc = nrt_cx_add(acc, nrt_cx_mul(tmp[r], tw[((r * s) % q) * qstep]));
      out[k + s * m] = acc;
    }
  }
}

static void bluestein(const nrt_fft_plan *p, nrt_cx *data, nrt_cx *scratch) {
  int64_t n = p->n, m = p->m;
  nrt_cx *a = scratch, *sub_scratch = scratch + m;
  for (int64_t j = 0; j < n; j++) a[j] = nrt_cx_mul(data[j], p->chirp[j]);
  for (int64_t j = n; j < m; j++) a[j] = nrt_cx_make(0.0, 0.0);
  nrt_fft_execute(p->sub, a, sub_scratch);
  /* Pointwise product, then the inverse FFT as conj(FFT(conj(.))). */
  for (int64_t j = 0; j < m; j++) a[j] = nrt_cx_conj(nrt_cx_mul(a[j], p->kernel[j]));
  nrt_fft_execute(p->sub, a, sub_scratch);
  double inv_m = 1.0 / (double)m;
  for (int64_t k = 0; k < n; k++) {
    nrt_cx c = nrt_cx_conj(a[k]);
    data[k] = nrt_cx_mul(nrt_cx_make(c.re * inv_m, c.im * inv_m), p->chirp[k]);
  }
}

void nrt_fft_execute(const nrt_fft_plan *p, nrt_cx *data, nrt_cx *scratch) {
  if (p->n <= 1) return;
  if (p->sub) {
    bluestein(p, data, scratch);
    return;
  }
  memcpy(scratch, data, (size_t)p->n * sizeof *data);
  fft_rec(p, scratch, 1, data, p->n, 0, 1, scratch + p->n);
}

nrt_fft_plan *nrt_fft_plan_create(int64_t n, int sign) {
  nrt_fft_plan *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->n = n;
  p->sign = sign;
  p->max_factor = 1;
  for (int64_t rest = n, f = 2; rest > 1 && p->nfactors < FFT_MAX_FACTORS;) {
    if (f * f > rest) f = rest; /* what is left is prime */
    if (rest % f == 0) {
      p->factors[p->nfactors++] = f;
      if (f > p->max_factor) p->max_factor = f;
      rest /= f;
    } else {
      f++;
    }
  }
  if (n > 1 && p->max_factor > FFT_MAX_DIRECT_PRIME) {
    int64_t m = 1;
    while (m < 2 * n - 1) m *= 2;
    p->m = m;
    p->sub = nrt_fft_plan_create(m, -1);
    p->chirp = malloc((size_t)n * sizeof *p->chirp);
    p->kernel = malloc((size_t)m * sizeof *p->kernel);
    nrt_cx *tmp = malloc((size_t)(p->sub ? p->sub->scratch : 1) * sizeof *tmp);
    if (!p->sub || !p->chirp || !p->kernel || !tmp) {
      free(tmp);
      nrt_fft_plan_destroy(p);
      return NULL;
    }
    /* j^2 mod 2n keeps the chirp's angle pi j^2 / n small. */
    for (int64_t j = 0; j < n; j++) {
      int64_t e = (int64_t)(((unsigned __int128)j * (unsigned __int128)j) % (unsigned __int128)(2 * n));
      p->chirp[j] = unit_root(e, 2 * n, sign);
    }
    for (int64_t j = 0; j < m; j++) p->kernel[j] = nrt_cx_make(0.0, 0.0);
    p->kernel[0] = nrt_cx_conj(p->chirp[0]);
    for (int64_t j = 1; j < n; j++) p->kernel[j] = p->kernel[m - j] = nrt_cx_conj(p->chirp[j]);
    nrt_fft_execute(p->sub, p->kernel, tmp);
    free(tmp);
    p->scratch = m + p->sub->scratch;
    return p;
  }
  p->tw = malloc((size_t)(n > 0 ? n : 1) * sizeof *p->tw);
  if (!p->tw) {
    nrt_fft_plan_destroy(p);
    return NULL;
  }
  for (int64_t j = 0; j < n; j++) p->tw[j] = unit_root(j, n, sign);
  p->scratch = n + p->max_factor;
  if (p->scratch < 1) p->scratch = 1;
  return p;
}

void nrt_dft_reference(int64_t n, int sign, nrt_cx *data, nrt_cx *scratch) {
  for (int64_t k = 0; k < n; k++) {
    nrt_cx acc = nrt_cx_make(0.0, 0.0);
    for (int64_t j = 0; j < n; j++) {
      /* j * k mod n in 128 bits: exact for any length. */
      int64_t e = (int64_t)(((unsigned __int128)j * (unsigned __int128)k) % (unsigned __int128)n);
      acc = nrt_cx_add(acc, nrt_cx_mul(data[j], unit_root(e, n, sign)));
    }
    scratch[k] = acc;
  }
  memcpy(data, scratch, (size_t)n * sizeof *data);
}
