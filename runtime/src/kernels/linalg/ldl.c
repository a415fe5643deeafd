/* Symmetric indefinite factorisation P A P^T = L D L^T with Bunch-Kaufman
 * pivoting (LDL_FACTOR) and the solve with it (LDL_SOLVE).
 *
 * The layout is LAPACK's sytrf 'L' one, so that torch.linalg.ldl_factor's
 * LD and pivots agree with the CPU and ldl_solve accepts either: the
 * interchange of step k is applied to the trailing block only (columns of
 * L already computed are not permuted), which is why the solve replays the
 * interchanges one step at a time. Bunch-Kaufman's rule: a 1x1 pivot when
 * the diagonal is large enough next to its column (alpha = (1 + sqrt 17) / 8
 * bounds element growth), else a 1x1 pivot on the row holding the column's
 * largest entry, else a 2x2 pivot. */
#include <math.h>

#include "kernels/linalg/linalg.h"
#include "nrt/ops/linalg.h"

static inline void swap_d(double *x, double *y) {
  double t = *x;
  *x = *y;
  *y = t;
}

/* Factors the lower triangle of a (n x n) in place; returns info. */
static int32_t sytrf_lower(double *a, int64_t n, int32_t *ipiv) {
  const double alpha = (1.0 + sqrt(17.0)) / 8.0;
  int32_t info = 0;
#define A_(i, j) a[(i) * n + (j)]
  int64_t k = 0;
  while (k < n) {
    int64_t kstep = 1, kp = k;
    double absakk = fabs(A_(k, k)), colmax = 0.0;
    int64_t imax = k;
    for (int64_t i = k + 1; i < n; i++)
      if (fabs(A_(i, k)) > colmax) {
        colmax = fabs(A_(i, k));
        imax = i;
      }
    if (fmax(absakk, colmax) == 0.0 || isnan(absakk)) {
      if (info == 0) info = (int32_t)(k + 1); /* zero column: D(k) = 0, nothing to eliminate */
    } else {
      if (!(absakk >= alpha * colmax)) {
        double rowmax = 0.0; /* largest off-diagonal entry of row/column imax */
        for (int64_t j = k; j < imax; j++) rowmax = fmax(rowmax, fabs(A_(imax, j)));
        for (int64_t i = imax + 1; i < n; i++) rowmax = fmax(rowmax, fabs(A_(i, imax)));
        if (absakk >= alpha * colmax * (colmax / rowmax)) {
          kp = k;
        } else if (fabs(A_(imax, imax)) >= alpha * rowmax) {
          kp = imax;
        } else {
          kp = imax;
          kstep = 2;
        }
      }
      int64_t kk = k + kstep - 1;
      if (kp != kk) { /* symmetric interchange of kk and kp in A(k:n, k:n) */
        for (int64_t i = kp + 1; i < n; i++) swap_d(&A_(i, kk), &A_(i, kp));
        for (int64_t j = kk + 1; j < kp; j++) swap_d(&A_(j, kk), &A_(kp, j));
        swap_d(&A_(kk, kk), &A_(kp, kp));
        if (kstep == 2) swap_d(&A_(kk, k), &A_(kp, k));
      }
      if (kstep == 1) {
        double d11 = 1.0 / A_(k, k);
        for (int64_t j = k + 1; j < n; j++)
          for (int64_t i = j; i < n; i++) A_(i, j) -= d11 * A_(i, k) * A_(j, k);
        for (int64_t i = k + 1; i < n; i++) A_(i, k) *= d11;
      } else if (k < n - 2) {
        /* W = A(:, k:k+1) D^-1 computed row by row through D's inverse
         * written relative to d21 (better conditioned than forming it). */
        double d21 = A_(k + 1, k);
        double d11 = A_(k + 1, k + 1) / d21, d22 = A_(k, k) / d21;
        double t = 1.0 / (d11 * d22 - 1.0);
        d21 = t / d21;
        for (int64_t j = k + 2; j < n; j++) {
          double wk = d21 * (d11 * A_(j, k) - A_(j, k + 1));
          double wkp1 = d21 * (d22 * A_(j, k + 1) - A_(j, k));
          for (int64_t i = j; i < n; i++) A_(i, j) -= A_(i, k) * wk + A_(i, k + 1) * wkp1;
          A_(j, k) = wk;
          A_(j, k + 1) = wkp1;
        }
      }
    }
    if (kstep == 1) {
      ipiv[k] = (int32_t)(kp + 1);
    } else {
      ipiv[k] = ipiv[k + 1] = (int32_t)(-(kp + 1));
    }
    k += kstep;
  }
#undef A_
  return info;
}

/* Solves A X = B (b: n x nrhs in place) from sytrf_lower's a and ipiv. */
static void sytrs_lower(const double *a, const int32_t *ipiv, int64_t n, double *b, int64_t nrhs) {
#define A_(i, j) a[(i) * n + (j)]
  int64_t k = 0;
  while (k < n) { /* L D y = P b */
    if (ipiv[k] > 0) {
      nrt_decomp_swap_rows(b, nrhs, k, ipiv[k] - 1);
      for (int64_t i = k + 1; i < n; i++)
        for (int64_t c = 0; c < nrhs; c++) b[i * nrhs + c] -= A_(i, k) * b[k * nrhs + c];
      for (int64_t c = 0; c < nrhs; c++) b[k * nrhs + c] /= A_(k, k);
      k++;
    } else {
      if (k + 1 >= n) break; /* corrupt pivots: a 2x2 block cannot start at the end */
      nrt_decomp_swap_rows(b, nrhs, k + 1, -ipiv[k] - 1);
      for (int64_t i = k + 2; i < n; i++)
        for (int64_t c = 0; c < nrhs; c++)
          b[i * nrhs + c] -= A_(i, k) * b[k * nrhs + c] + A_(i, k + 1) * b[(k + 1) * nrhs + c];
      double akm1k = A_(k + 1, k), akm1 = A_(k, k) / akm1k, ak = A_(k + 1, k + 1) / akm1k;
      double denom = akm1 * ak - 1.0;
      for (int64_t c = 0; c < nrhs; c++) {
        double bkm1 = b[k * nrhs + c] / akm1k, bk = b[(k + 1) * nrhs + c] / akm1k;
        b[k * nrhs + c] = (ak * bkm1 - bk) / denom;
        b[(k + 1) * nrhs + c] = (akm1 * bk - bkm1) / denom;
      }
      k += 2;
    }
  }
  k = n - 1;
  while (k >= 0) { /* L^T P^T x = y */
    for (int64_t c = 0; c < nrhs; c++) {
      double s = 0.0;
      for (int64_t i = k + 1; i < n; i++) s += A_(i, k) * b[i * nrhs + c];
      b[k * nrhs + c] -= s;
    }
    if (ipiv[k] > 0) {
      nrt_decomp_swap_rows(b, nrhs, k, ipiv[k] - 1);
      k--;
    } else {
      if (k < 1) break;
      for (int64_t c = 0; c < nrhs; c++) {
        double s = 0.0;
        for (int64_t i = k + 1; i < n; i++) s += A_(i, k - 1) * b[i * nrhs + c];
        b[(k - 1) * nrhs + c] -= s;
      }
      nrt_decomp_swap_rows(b, nrhs, k, -ipiv[k] - 1);
      k -= 2;
    }
  }
#undef A_
}

static void ldl_factor_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t n = l->sizes[1];
  nrt_dmat LD = nrt_dmat_of(l, 0), P = nrt_dmat_of(l, 1), I = nrt_dmat_of(l, 2), A = nrt_dmat_of(l, 3);
  int32_t *ipiv = (int32_t *)(w + n * n);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) w[i * n + j] = j <= i ? nrt_dmat_ld(&A, b, i, j) : 0.0;
  int32_t info = sytrf_lower(w, n, ipiv);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) nrt_dmat_st(&LD, b, i, j, j <= i ? w[i * n + j] : 0.0);
  for (int64_t i = 0; i < n; i++) nrt_dvec_sti(&P, b, i, ipiv[i]);
  nrt_dvec_sti(&I, b, 0, info);
}

/* sytrf's pivots: positive for a 1 x 1 block, negative for a 2 x 2 one;
 * anything out of range reads as no interchange. */
static void ldl_solve_pivots(const nrt_dmat *pv, int64_t b, int64_t n, int32_t *ipiv) {
  for (int64_t i = 0; i < n; i++) {
    int64_t p = nrt_dvec_ldi(pv, b, i);
    if (p == 0 || p > n || p < -n) p = i + 1;
    ipiv[i] = (int32_t)p;
  }
}

static void ldl_solve(const nrt_launch *l, const double *a, const int32_t *ipiv, int64_t n, double *x, int64_t k) {
  sytrs_lower(a, ipiv, n, x, k);
}

static void ldl_solve_one(const nrt_launch *l, int64_t b, double *w) {
  nrt_decomp_solve_one(l, b, w, ldl_solve_pivots, ldl_solve);
}

nrt_status nrt_decomp_ldl(const nrt_launch *l) {
  const char *name = nrt_op_name(l->op);
  if ((int)l->op == NRT_OP(LDL_FACTOR) && l->noutputs == 3 && l->ndim == 2) {
    int64_t n = l->sizes[1];
    return nrt_decomp_for_batches(l, name, l->sizes[0], (size_t)(n * n + n / 2 + 1), ldl_factor_one);
  }
  if ((int)l->op == NRT_OP(LDL_SOLVE) && l->noutputs == 1 && l->ndim == 3) {
    int64_t n = l->sizes[1], k = l->sizes[2];
    return nrt_decomp_for_batches(l, name, l->sizes[0], (size_t)(n * n + n * k + n / 2 + 1), ldl_solve_one);
  }
  return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: bad descriptor (see nrt/ops/decomp.h for its layout)", name);
}
