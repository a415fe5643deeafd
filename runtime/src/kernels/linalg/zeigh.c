/* Hermitian eigendecomposition by the complex cyclic Jacobi method (EIGH
 * with complex operands): the structure of eigh.c.
 *
 * For the pair (p, q) with a_pq = |a_pq| e^{i phi}, the unitary diagonal
 * scaling D = diag(.., e^{-i phi} at q, ..) makes (D^H A D)_pq real; the
 * real rotation of eigh.c then zeroes it. Both are applied to A (as
 * J^H A J) and to V (V J). The diagonal stays real, eigenvalues come out
 * ascending; each eigenvector is scaled so that its largest-magnitude entry
 * is real and positive (eigenvectors are unique only up to a phase, and the
 * CPU's phase comes from its own algorithm). Only the named triangle is
 * read, and the diagonal's imaginary part is ignored (zheevd does the
 * same). One path, so also the reference. */
#include <float.h>
#include <math.h>

#include "kernels/linalg/zlinalg.h"

#define ZEIGH_MAX_SWEEPS 100

static void zeigh_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t n = l->sizes[1];
  int want_v = l->noutputs == 2, upper = l->params[0] != 0;
  nrt_z *a = (nrt_z *)w, *v = a + n * n;
  double *ev = (double *)(v + n * n);
  int64_t *order = (int64_t *)(ev + n);
  nrt_dmat A = nrt_dmat_of(l, want_v ? 2 : 1), W = nrt_dmat_of(l, 0);
  for (int64_t i = 0; i < n; i++) {
    for (int64_t j = 0; j < i; j++) {
      nrt_z x = upper ? conj(nrt_zmat_ld(&A, b, j, i)) : nrt_zmat_ld(&A, b, i, j);
      a[i * n + j] = x;
      a[j * n + i] = conj(x);
    }
    a[i * n + i] = creal(nrt_zmat_ld(&A, b, i, i));
  }
  for (int64_t i = 0; i < n * n; i++) v[i] = 0.0;
  for (int64_t i = 0; i < n; i++) v[i * n + i] = 1.0;
  double frob = 0.0;
  for (int64_t i = 0; i < n * n; i++) frob += nrt_z_abs2(a[i]);
  frob = sqrt(frob);

  for (int sweep = 0; sweep < ZEIGH_MAX_SWEEPS; sweep++) {
    double off = 0.0;
    for (int64_t p = 0; p < n; p++)
      for (int64_t q = p + 1; q < n; q++) off += nrt_z_abs2(a[p * n + q]);
    if (!(sqrt(off) > DBL_EPSILON * frob)) break; /* also stops on NaN */
    for (int64_t p = 0; p < n - 1; p++)
      for (int64_t q = p + 1; q < n; q++) {
        nrt_z apq = a[p * n + q];
        double mag = cabs(apq), app = creal(a[p * n + p]), aqq = creal(a[q * n + q]);
        if (mag == 0.0 || mag <= DBL_EPSILON * 1e-2 * sqrt(fabs(app * aqq))) {
          a[p * n + q] = a[q * n + p] = 0.0;
          continue;
        }
        /* Scale column q by d = e^{-i phi} and row q by conj(d). */
        nrt_z d = conj(apq) / mag;
        for (int64_t k = 0; k < n; k++) {
          a[k * n + q] *= d;
          a[q * n + k] *= conj(d);
        }
        a[q * n + q] = aqq;
        if (want_v)
          for (int64_t k = 0; k < n; k++) v[k * n + q] *= d;
        /* a_pq is now mag (real): the real Jacobi rotation. */
        double theta = (aqq - app) / (2.0 * mag);
        double t = fabs(theta) > 1e150 ? 0.5 / theta
                                       : (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
        double c = 1.0 / sqrt(t * t + 1.0), s = t * c;
        for (int64_t k = 0; k < n; k++) {
          nrt_z akp = a[k * n + p], akq = a[k * n + q];
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (int64_t k = 0; k < n; k++) {
          nrt_z apk = a[p * n + k], aqk = a[q * n + k];
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
        a[p * n + q] = a[q * n + p] = 0.0;
        a[p * n + p] = creal(a[p * n + p]);
        a[q * n + q] = creal(a[q * n + q]);
        if (want_v)
          for (int64_t k = 0; k < n; k++) {
            nrt_z vkp = v[k * n + p], vkq = v[k * n + q];
            v[k * n + p] = c * vkp - s * vkq;
            v[k * n + q] = s * vkp + c * vkq;
          }
      }
  }
  for (int64_t i = 0; i < n; i++) {
    ev[i] = creal(a[i * n + i]);
    order[i] = i;
  }
  for (int64_t i = 1; i < n; i++) {
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
      if (cabs(v[i * n + o]) > cabs(v[imax * n + o])) imax = i;
    double mag = cabs(v[imax * n + o]);
    nrt_z ph = mag > 0.0 ? conj(v[imax * n + o]) / mag : 1.0;
    for (int64_t i = 0; i < n; i++) nrt_zmat_st(&V, b, i, j, i == imax ? mag : ph * v[i * n + o]);
  }
}

nrt_status nrt_zdecomp_eigh(const nrt_launch *l) {
  if ((l->noutputs != 1 && l->noutputs != 2) || l->ndim != 2)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "EIGH (complex): expected 1 or 2 outputs and sizes {batch, n}");
  int64_t n = l->sizes[1];
  return nrt_decomp_for_batches(l, "EIGH", l->sizes[0], (size_t)(4 * n * n + 2 * n), zeigh_one);
}
