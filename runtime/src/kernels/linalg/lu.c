/* LU with partial pivoting and what is built on it: solves, the inverse,
 * determinants, unpacking to P, L, U (ops LU_* in nrt/ops/decomp.h).
 *
 * Pivoting follows getrf: at step j the row with the largest |a(i, j)|,
 * i >= j, first one on ties, is swapped into place (whole rows, so L is
 * stored already permuted) and pivots[j] records it 1-based. A zero pivot
 * column is left unscaled and reported in info; the factorisation
 * continues, as LAPACK's does, so LU and det stay meaningful. */
#include <math.h>
#include <stdlib.h>

#include "kernels/linalg/linalg.h"
#include "nrt/ops/linalg.h"

int32_t nrt_decomp_getrf(double *a, int64_t m, int64_t n, int32_t *piv, int pivot) {
  int64_t k = m < n ? m : n;
  int32_t info = 0;
  for (int64_t j = 0; j < k; j++) {
    int64_t p = j;
    if (pivot) {
      double best = fabs(a[j * n + j]);
      for (int64_t i = j + 1; i < m; i++) {
        double v = fabs(a[i * n + j]);
        if (v > best || (isnan(v) && !isnan(best))) {
          best = v;
          p = i;
        }
      }
    }
    piv[j] = (int32_t)(p + 1);
    if (a[p * n + j] != 0.0) {
      nrt_decomp_swap_rows(a, n, j, p);
      double inv = 1.0 / a[j * n + j];
      for (int64_t i = j + 1; i < m; i++) a[i * n + j] *= inv;
    } else if (info == 0) {
      info = (int32_t)(j + 1);
    }
    /* Rank-1 update of the trailing block; a zero pivot column is all
     * zeros below the diagonal (it was the largest), so this is a no-op
     * there, as in getrf. */
    for (int64_t i = j + 1; i < m; i++) {
      double lij = a[i * n + j];
      if (lij == 0.0) continue;
      for (int64_t c = j + 1; c < n; c++) a[i * n + c] -= lij * a[j * n + c];
    }
  }
  return info;
}

void nrt_decomp_getrs(const double *lu, const int32_t *piv, int64_t n, int transpose, double *b,
                      int64_t nrhs) {
  if (!transpose) { /* A = P L U: x = U^-1 L^-1 P^T b */
    for (int64_t j = 0; j < n; j++) nrt_decomp_swap_rows(b, nrhs, j, piv[j] - 1);
    for (int64_t i = 0; i < n; i++) /* L y = b, unit diagonal */
      for (int64_t j = 0; j < i; j++) {
        double l = lu[i * n + j];
        for (int64_t c = 0; c < nrhs; c++) b[i * nrhs + c] -= l * b[j * nrhs + c];
      }
    for (int64_t i = n - 1; i >= 0; i--) { /* U x = y */
      for (int64_t j = i + 1; j < n; j++) {
        double u = lu[i * n + j];
        for (int64_t c = 0; c < nrhs; c++) b[i * nrhs + c] -= u * b[j * nrhs + c];
      }
      double d = lu[i * n + i];
      for (int64_t c = 0; c < nrhs; c++) b[i * nrhs + c] /= d;
    }
  } else { /* A^T = U^T L^T P^T: x = P L^-T U^-T b */
    for (int64_t i = 0; i < n; i++) { /* U^T y = b (lower) */
      for (int64_t j = 0; j < i; j++) {
        double u = lu[j * n + i];
        for (int64_t c = 0; c < nrhs; c++) b[i * nrhs + c] -= u * b[j * nrhs + c];
      }
      double d = lu[i * n + i];
      for (int64_t c = 0; c < nrhs; c++) b[i * nrhs + c] /= d;
    }
    for (int64_t i = n - 1; i >= 0; i--) /* L^T z = y (upper, unit) */
      for (int64_t j = i + 1; j < n; j++) {
        double l = lu[j * n + i];
        for (int64_t c = 0; c < nrhs; c++) b[i * nrhs + c] -= l * b[j * nrhs + c];
      }
    for (int64_t j = n - 1; j >= 0; j--) nrt_decomp_swap_rows(b, nrhs, j, piv[j] - 1);
  }
}

/* Loads pivots of batch b, clamping corrupt values into [1, n] so that a
 * bad pivots tensor cannot make the kernel read out of bounds. */
static void load_pivots(const nrt_dmat *pv, int64_t b, int64_t k, int64_t n, int32_t *piv) {
  for (int64_t j = 0; j < k; j++) {
    int64_t p = nrt_dvec_ldi(pv, b, j);
    piv[j] = (int32_t)(p < 1 ? 1 : p > n ? n : p);
  }
}

/* ---- LU_FACTOR --------------------------------------------------------- */
static void lu_factor_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t m = l->sizes[1], n = l->sizes[2], k = m < n ? m : n;
  nrt_dmat LU = nrt_dmat_of(l, 0), P = nrt_dmat_of(l, 1), I = nrt_dmat_of(l, 2), A = nrt_dmat_of(l, 3);
  int32_t *piv = (int32_t *)(w + m * n);
  nrt_dmat_load(&A, b, m, n, w);
  int32_t info = nrt_decomp_getrf(w, m, n, piv, (int)l->params[0]);
  nrt_dmat_store(&LU, b, m, n, w);
  for (int64_t j = 0; j < k; j++) nrt_dvec_sti(&P, b, j, piv[j]);
  nrt_dvec_sti(&I, b, 0, info);
}

/* ---- LU_SOLVE ----------------------------------------------------------- */
static void lu_solve_pivots(const nrt_dmat *pv, int64_t b, int64_t n, int32_t *piv) { load_pivots(pv, b, n, n, piv); }

static void lu_solve(const nrt_launch *l, const double *lu, const int32_t *piv, int64_t n, double *x, int64_t k) {
  nrt_decomp_getrs(lu, piv, n, (int)(l->params[0] & 1), x, k); /* bit 1 (conjugate) is a no-op */
}

static void lu_solve_one(const nrt_launch *l, int64_t b, double *w) {
  nrt_decomp_solve_one(l, b, w, lu_solve_pivots, lu_solve);
}

/* ---- LU_INVERSE --------------------------------------------------------- */
static void lu_inverse_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t n = l->sizes[1];
  nrt_dmat X = nrt_dmat_of(l, 0), LU = nrt_dmat_of(l, 1), P = nrt_dmat_of(l, 2);
  double *lu = w, *x = w + n * n;
  int32_t *piv = (int32_t *)(x + n * n);
  nrt_dmat_load(&LU, b, n, n, lu);
  load_pivots(&P, b, n, n, piv);
  for (int64_t i = 0; i < n * n; i++) x[i] = 0.0;
  for (int64_t i = 0; i < n; i++) x[i * n + i] = 1.0;
  nrt_decomp_getrs(lu, piv, n, 0, x, n);
  nrt_dmat_store(&X, b, n, n, x);
}

/* ---- LU_DET --------------------------------------------------------------- */
static void lu_det_one(const nrt_launch *l, int64_t b, double *w) {
  (void)w;
  int64_t n = l->sizes[1];
  int slog = l->params[0] != 0;
  nrt_dmat LU = nrt_dmat_of(l, slog ? 2 : 1), P = nrt_dmat_of(l, slog ? 3 : 2);
  /* Each pivot that moved a row flips the permutation's sign. */
  double sign = 1.0, logabs = 0.0, det = 1.0;
  for (int64_t j = 0; j < n; j++) {
    double d = nrt_dmat_ld(&LU, b, j, j);
    if (nrt_dvec_ldi(&P, b, j) != j + 1) sign = -sign;
    if (slog) {
      if (d < 0) sign = -sign;
      else if (!(d > 0) && !isnan(d)) sign = 0.0;
      logabs += log(fabs(d));
    } else {
      det *= d;
    }
  }
  if (slog) {
    nrt_dmat S = nrt_dmat_of(l, 0), L = nrt_dmat_of(l, 1);
    if (sign == 0.0) logabs = -INFINITY;
    nrt_dvec_st(&S, b, 0, sign);
    nrt_dvec_st(&L, b, 0, logabs);
  } else {
    nrt_dmat D = nrt_dmat_of(l, 0);
    nrt_dvec_st(&D, b, 0, sign * det);
  }
}

/* ---- LU_UNPACK ------------------------------------------------------------ */
static void lu_unpack_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t m = l->sizes[1], n = l->sizes[2], k = m < n ? m : n;
  nrt_dmat Pm = nrt_dmat_of(l, 0), L = nrt_dmat_of(l, 1), U = nrt_dmat_of(l, 2);
  nrt_dmat LU = nrt_dmat_of(l, 3), PV = nrt_dmat_of(l, 4);
  int32_t *piv = (int32_t *)w, *perm = piv + k;
  load_pivots(&PV, b, k, m, piv);
  /* Replaying the swaps on 0..m-1 gives perm with (P^T A)[i] = A[perm[i]],
   * so P[perm[i]][i] = 1. */
  for (int64_t i = 0; i < m; i++) perm[i] = (int32_t)i;
  for (int64_t j = 0; j < k; j++) {
    int32_t t = perm[j];
    perm[j] = perm[piv[j] - 1];
    perm[piv[j] - 1] = t;
  }
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < m; j++) nrt_dmat_st(&Pm, b, i, j, 0.0);
  for (int64_t i = 0; i < m; i++) nrt_dmat_st(&Pm, b, perm[i], i, 1.0);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < k; j++)
      nrt_dmat_st(&L, b, i, j, i > j ? nrt_dmat_ld(&LU, b, i, j) : i == j ? 1.0 : 0.0);
  for (int64_t i = 0; i < k; i++)
    for (int64_t j = 0; j < n; j++) nrt_dmat_st(&U, b, i, j, j >= i ? nrt_dmat_ld(&LU, b, i, j) : 0.0);
}

static nrt_status bad(const nrt_launch *l, const char *want) {
  return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected %s", nrt_op_name(l->op), want);
}

nrt_status nrt_decomp_lu(const nrt_launch *l) {
  const char *name = nrt_op_name(l->op);
  int64_t nb = l->sizes[0];
  switch ((int)l->op) {
  case NRT_OP(LU_FACTOR): {
    if (l->noutputs != 3 || l->ndim != 3) return bad(l, "3 outputs and sizes {batch, m, n}");
    int64_t m = l->sizes[1], n = l->sizes[2];
    return nrt_decomp_for_batches(l, name, nb, (size_t)(m * n + (m < n ? m : n) / 2 + 1), lu_factor_one);
  }
  case NRT_OP(LU_SOLVE): {
    if (l->noutputs != 1 || l->ndim != 3) return bad(l, "1 output and sizes {batch, n, k}");
    int64_t n = l->sizes[1], k = l->sizes[2];
    if (n == 0 || k == 0) return NRT_SUCCESS;
    return nrt_decomp_for_batches(l, name, nb, (size_t)(n * n + n * k + n / 2 + 1), lu_solve_one);
  }
  case NRT_OP(LU_INVERSE): {
    if (l->noutputs != 1 || l->ndim != 2) return bad(l, "1 output and sizes {batch, n}");
    int64_t n = l->sizes[1];
    if (n == 0) return NRT_SUCCESS;
    return nrt_decomp_for_batches(l, name, nb, (size_t)(2 * n * n + n / 2 + 1), lu_inverse_one);
  }
  case NRT_OP(LU_DET):
    if (l->noutputs != (l->params[0] ? 2 : 1) || l->ndim != 2)
      return bad(l, "1 output (det) or 2 (p0 = 1: sign, logabsdet) and sizes {batch, n}");
    return nrt_decomp_for_batches(l, name, nb, 1, lu_det_one);
  case NRT_OP(LU_UNPACK): {
    if (l->noutputs != 3 || l->ndim != 3) return bad(l, "3 outputs and sizes {batch, m, n}");
    int64_t m = l->sizes[1], n = l->sizes[2];
    if (m == 0) return NRT_SUCCESS;
    return nrt_decomp_for_batches(l, name, nb, (size_t)((m < n ? m : n) + m) / 2 + 1, lu_unpack_one);
  }
  default: return bad(l, "an LU op");
  }
}
