/* Matrix exponential: exp(A) = exp(A / 2^s)^(2^s), with s chosen so that
 * ||A / 2^s||_1 <= 1/2, where the Taylor series converges fast (20 terms
 * reach double rounding); all in double, so float32 results are accurate
 * to their last bits even after the squarings. */
#include <math.h>

#include "kernels/linalg/linalg.h"
#include "nrt/ops/linalg.h"

#define EXPM_MAX_TERMS 40

static void matmul(const double *x, const double *y, double *out, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    for (int64_t j = 0; j < n; j++) out[i * n + j] = 0.0;
    for (int64_t k = 0; k < n; k++) {
      double xik = x[i * n + k];
      if (xik == 0.0) continue;
      for (int64_t j = 0; j < n; j++) out[i * n + j] += xik * y[k * n + j];
    }
  }
}

static double norm1(const double *x, int64_t n) {
  double best = 0.0;
  for (int64_t j = 0; j < n; j++) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += fabs(x[i * n + j]);
    if (!(s <= best)) best = s; /* NaN wins */
  }
  return best;
}

static void expm_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t n = l->sizes[1], nn = n * n;
  nrt_dmat E = nrt_dmat_of(l, 0), A = nrt_dmat_of(l, 1);
  double *x = w, *e = x + nn, *term = e + nn, *tmp = term + nn;
  nrt_dmat_load(&A, b, n, n, x);
  double nrm = norm1(x, n);
  if (!isfinite(nrm)) { /* inf/NaN entries: the series is undefined */
    for (int64_t i = 0; i < nn; i++) e[i] = NAN;
    nrt_dmat_store(&E, b, n, n, e);
    return;
  }
  int s = 0;
  if (nrm > 0.5) s = (int)ceil(log2(nrm / 0.5));
  double scale = ldexp(1.0, -s);
  for (int64_t i = 0; i < nn; i++) x[i] *= scale;
  for (int64_t i = 0; i < nn; i++) e[i] = term[i] = 0.0;
  for (int64_t i = 0; i < n; i++) e[i * n + i] = term[i * n + i] = 1.0;
  for (int k = 1; k <= EXPM_MAX_TERMS; k++) { /* term_k = term_{k-1} X / k */
    matmul(term, x, tmp, n);
    double tn = 0.0;
    for (int64_t i = 0; i < nn; i++) {
      term[i] = tmp[i] / k;
      e[i] += term[i];
      tn = fmax(tn, fabs(term[i]));
    }
    if (tn <= 1e-18 * fmax(1.0, norm1(e, n))) break;
  }
  for (int i = 0; i < s; i++) {
    matmul(e, e, tmp, n);
    for (int64_t j = 0; j < nn; j++) e[j] = tmp[j];
  }
  nrt_dmat_store(&E, b, n, n, e);
}

nrt_status nrt_decomp_expm(const nrt_launch *l) {
  if (l->noutputs != 1 || l->ndim != 2)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "MATRIX_EXP: expected 1 output and sizes {batch, n}");
  int64_t n = l->sizes[1];
  return nrt_decomp_for_batches(l, "MATRIX_EXP", l->sizes[0], (size_t)(4 * n * n), expm_one);
}
