/* Symmetric eigendecomposition by the cyclic Jacobi method.
 *
 * Each rotation zeroes one off-diagonal pair; sweeps over all pairs
 * converge quadratically, and the method is accurate for small eigenvalues
 * too. Only the triangle the caller names is read (the matrix is taken to
 * be symmetric, as LAPACK's syevd does). Eigenvalues come out ascending;
 * each eigenvector's largest-magnitude entry is made positive (they are
 * unique only up to sign). */
#include <float.h>
#include <math.h>

#include "kernels/linalg/linalg.h"
#include "nrt/ops/linalg.h"

#define EIGH_MAX_SWEEPS 100

static void eigh_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t n = l->sizes[1];
  int want_v = l->noutputs == 2, upper = l->params[0] != 0;
  double *a = w, *v = a + n * n, *ev = v + n * n;
  int64_t *order = (int64_t *)(ev + n);
  nrt_dmat A = nrt_dmat_of(l, want_v ? 2 : 1), W = nrt_dmat_of(l, 0);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j <= i; j++) {
      double x = upper ? nrt_dmat_ld(&A, b, j, i) : nrt_dmat_ld(&A, b, i, j);
      a[i * n + j] = a[j * n + i] = x;
    }
  for (int64_t i = 0; i < n * n; i++) v[i] = 0.0;
  for (int64_t i = 0; i < n; i++) v[i * n + i] = 1.0;
  double frob = 0.0;
  for (int64_t i = 0; i < n * n; i++) frob += a[i] * a[i];
  frob = sqrt(frob);

  for (int sweep = 0; sweep < EIGH_MAX_SWEEPS; sweep++) {
    double off = 0.0;
    for (int64_t p = 0; p < n; p++)
      for (int64_t q = p + 1; q < n; q++) off += a[p * n + q] * a[p * n + q];
    if (!(sqrt(off) > DBL_EPSILON * frob)) break; /* also stops on NaN */
    for (int64_t p = 0; p < n - 1; p++)
      for (int64_t q = p + 1; q < n; q++) {
        double apq = a[p * n + q];
        /* Negligible next to both diagonal entries: zero it outright. */
        if (fabs(apq) <= DBL_EPSILON * 1e-2 * sqrt(fabs(a[p * n + p] * a[q * n + q])) || apq == 0.0) {
          a[p * n + q] = a[q * n + p] = 0.0;
          continue;
        }
        double theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
        double t = fabs(theta) > 1e150 ? 0.5 / theta
                                       : (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
        double c = 1.0 / sqrt(t * t + 1.0), s = t * c;
        for (int64_t k = 0; k < n; k++) { /* A J */
          double akp = a[k * n + p], akq = a[k * n + q];
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (int64_t k = 0; k < n; k++) { /* J^T (A J) */
          double apk = a[p * n + k], aqk = a[q * n + k];
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
        a[p * n + q] = a[q * n + p] = 0.0; /* exactly, by construction */
        if (want_v)
          for (int64_t k = 0; k < n; k++) {
            double vkp = v[k * n + p], vkq = v[k * n + q];
            v[k * n + p] = c * vkp - s * vkq;
            v[k * n + q] = s * vkp + c * vkq;
          }
      }
  }
  for (int64_t i = 0; i < n; i++) {
    ev[i] = a[i * n + i];
    order[i] = i;
  }
  for (int64_t i = 1; i < n; i++) { /* ascending, stable; NaN last */
    int64_t o = order[i], j = i;
    while (j > 0 && (ev[order[j - 1]] > ev[o] || (isnan(ev[order[j - 1]]) && !isnan(ev[o])))) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = o;
  }
  for (int64_t j = 0; j < n; j++) nrt_dvec_st(&W, b, j, ev[order[j]]);
  if (!want_v) return;
  nrt_dmat V = nrt_dmat_of(l, 1);
  for (int64_t j = 0; j < n; j++) {
    int64_t o = order[j], imax = 0;
    for (int64_t i = 1; i < n; i++)
      if (fabs(v[i * n + o]) > fabs(v[imax * n + o])) imax = i;
    double sg = v[imax * n + o] < 0 ? -1.0 : 1.0;
    for (int64_t i = 0; i < n; i++) nrt_dmat_st(&V, b, i, j, sg * v[i * n + o]);
  }
}

nrt_status nrt_decomp_eigh(const nrt_launch *l) {
  if ((l->noutputs != 1 && l->noutputs != 2) || l->ndim != 2)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "EIGH: expected 1 or 2 outputs and sizes {batch, n}");
  int64_t n = l->sizes[1];
  return nrt_decomp_for_batches(l, "EIGH", l->sizes[0], (size_t)(2 * n * n + 2 * n), eigh_one);
}
