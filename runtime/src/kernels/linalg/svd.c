/* Singular value decomposition by one-sided Jacobi (Hestenes).
 *
 * For a tall matrix T (M x N, M >= N; a wide A is decomposed as its
 * transpose) plane rotations applied to pairs of columns make all columns
 * mutually orthogonal; then T V = U S with S the column norms. It needs no
 * bidiagonalisation, is accurate to the last bits for small singular values
 * (relative accuracy, unlike QR-iteration methods), and its sweeps are
 * plain loops: the right fit for the small matrices PyTorch code hands us.
 *
 * Singular vectors are unique only up to a common sign per pair (u_j, v_j):
 * here the largest-magnitude entry of each v_j is made positive. Columns of
 * U for zero singular values, and the extra columns of full_matrices, are
 * completed to an orthonormal basis by Gram-Schmidt on unit vectors. */
#include <float.h>
#include <math.h>

#include "kernels/linalg/linalg.h"
#include "nrt/ops/linalg.h"

#define SVD_MAX_SWEEPS 80

/* Rotates columns p, q of the row-major rows x cols matrix x. */
static void rotate_cols(double *x, int64_t rows, int64_t cols, int64_t p, int64_t q, double c, double s) {
  for (int64_t i = 0; i < rows; i++) {
    double xp = x[i * cols + p], xq = x[i * cols + q];
    x[i * cols + p] = c * xp - s * xq;
    x[i * cols + q] = s * xp + c * xq;
  }
}

/* tan of the rotation angle that zeroes the off-diagonal of the 2x2
 * symmetric [[app, apq], [apq, aqq]] (the smaller root, |t| <= 1). */
static double jacobi_tan(double app, double aqq, double apq) {
  double zeta = (aqq - app) / (2.0 * apq);
  if (fabs(zeta) > 1e150) return 0.5 / zeta; /* zeta^2 would overflow */
  return (zeta >= 0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1.0 + zeta * zeta));
}

/* Orthonormalises column j of q (rows x cols) against columns [0, j) that
 * are already orthonormal, starting from the unit vector that is furthest
 * from their span. */
static void complete_column(double *q, int64_t rows, int64_t cols, int64_t j) {
  int64_t best = 0;
  double best_res = -1.0;
  for (int64_t i = 0; i < rows; i++) {
    double r = 1.0;
    for (int64_t c = 0; c < j; c++) r -= q[i * cols + c] * q[i * cols + c];
    if (r > best_res) {
      best_res = r;
      best = i;
    }
  }
  for (int64_t i = 0; i < rows; i++) q[i * cols + j] = i == best ? 1.0 : 0.0;
  for (int pass = 0; pass < 2; pass++) /* twice is enough (Kahan) */
    for (int64_t c = 0; c < j; c++) {
      double d = 0.0;
      for (int64_t i = 0; i < rows; i++) d += q[i * cols + c] * q[i * cols + j];
      for (int64_t i = 0; i < rows; i++) q[i * cols + j] -= d * q[i * cols + c];
    }
  double nrm = 0.0;
  for (int64_t i = 0; i < rows; i++) nrm += q[i * cols + j] * q[i * cols + j];
  nrm = sqrt(nrm);
  for (int64_t i = 0; i < rows; i++) q[i * cols + j] /= nrm;
}

/* Work layout for a tall M x N problem with ucols columns of U wanted. */
static void svd_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t m = l->sizes[1], n = l->sizes[2];
  int wide = m < n, want_uv = l->noutputs == 3, full = l->params[0] != 0;
  int64_t M = wide ? n : m, N = wide ? m : n;
  int64_t ucols = want_uv && full ? M : N;
  double *t = w;              /* M x N, becomes T V */
  double *v = t + M * N;      /* N x N */
  double *sig = v + N * N;    /* N */
  double *u = sig + N;        /* M x ucols */
  int64_t *order = (int64_t *)(u + M * ucols);
  nrt_dmat A = nrt_dmat_of(l, want_uv ? 3 : 1), S = nrt_dmat_of(l, 0);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) t[i * N + j] = wide ? nrt_dmat_ld(&A, b, j, i) : nrt_dmat_ld(&A, b, i, j);
  for (int64_t i = 0; i < N * N; i++) v[i] = 0.0;
  for (int64_t i = 0; i < N; i++) v[i * N + i] = 1.0;

  for (int sweep = 0; sweep < SVD_MAX_SWEEPS; sweep++) {
    int rotated = 0;
    for (int64_t p = 0; p < N - 1; p++)
      for (int64_t q = p + 1; q < N; q++) {
        double alpha = 0.0, beta = 0.0, gamma = 0.0;
        for (int64_t i = 0; i < M; i++) {
          double tp = t[i * N + p], tq = t[i * N + q];
          alpha += tp * tp;
          beta += tq * tq;
          gamma += tp * tq;
        }
        /* Columns orthogonal to working precision: leave them. */
        if (gamma == 0.0 || fabs(gamma) <= DBL_EPSILON * sqrt(alpha * beta)) continue;
        double tn = jacobi_tan(alpha, beta, gamma);
        double c = 1.0 / sqrt(1.0 + tn * tn), s = c * tn;
        rotate_cols(t, M, N, p, q, c, s);
        if (want_uv) rotate_cols(v, N, N, p, q, c, s);
        rotated = 1;
      }
    if (!rotated) break;
  }

  for (int64_t j = 0; j < N; j++) {
    double s2 = 0.0;
    for (int64_t i = 0; i < M; i++) s2 += t[i * N + j] * t[i * N + j];
    sig[j] = sqrt(s2);
    order[j] = j;
  }
  /* Descending; insertion sort is stable and N is small. NaN sorts last. */
  for (int64_t i = 1; i < N; i++) {
    int64_t o = order[i], j = i;
    while (j > 0 && (sig[order[j - 1]] < sig[o] || (isnan(sig[order[j - 1]]) && !isnan(sig[o])))) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = o;
  }
  for (int64_t j = 0; j < N; j++) nrt_dvec_st(&S, b, j, sig[order[j]]);
  if (!want_uv) return;

  /* u_j = t_j / sigma_j for singular values clearly above the rounding
   * level; the rest (and full_matrices' extra columns) are completed. */
  double smax = N ? sig[order[0]] : 0.0, tiny = (double)M * DBL_EPSILON * smax;
  for (int64_t j = 0; j < N; j++) {
    int64_t o = order[j];
    /* Sign: largest |v| entry positive, flipping u with it. */
    int64_t imax = 0;
    for (int64_t i = 1; i < N; i++)
      if (fabs(v[i * N + o]) > fabs(v[imax * N + o])) imax = i;
    double sg = v[imax * N + o] < 0 ? -1.0 : 1.0;
    if (sg < 0)
      for (int64_t i = 0; i < N; i++) v[i * N + o] = -v[i * N + o];
    double inv = sig[o] > tiny && sig[o] > 0.0 ? sg / sig[o] : 0.0;
    for (int64_t i = 0; i < M; i++) u[i * ucols + j] = t[i * N + o] * inv;
  }
  for (int64_t j = 0; j < ucols; j++)
    if (j >= N || !(sig[order[j]] > tiny && sig[order[j]] > 0.0)) complete_column(u, M, ucols, j);

  nrt_dmat U = nrt_dmat_of(l, 1), VH = nrt_dmat_of(l, 2);
  if (!wide) { /* A = U S V^T */
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < ucols; j++) nrt_dmat_st(&U, b, i, j, u[i * ucols + j]);
    for (int64_t j = 0; j < N; j++)
      for (int64_t i = 0; i < N; i++) nrt_dmat_st(&VH, b, j, i, v[i * N + order[j]]);
  } else { /* A^T = u S v^T, so A = v S u^T: U_A = v, Vh_A = u^T */
    for (int64_t i = 0; i < N; i++)
      for (int64_t j = 0; j < N; j++) nrt_dmat_st(&U, b, i, j, v[i * N + order[j]]);
    for (int64_t j = 0; j < ucols; j++)
      for (int64_t i = 0; i < M; i++) nrt_dmat_st(&VH, b, j, i, u[i * ucols + j]);
  }
}

nrt_status nrt_decomp_svd(const nrt_launch *l) {
  if ((l->noutputs != 1 && l->noutputs != 3) || l->ndim != 3)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "SVD: expected 1 or 3 outputs and sizes {batch, m, n}");
  int64_t m = l->sizes[1], n = l->sizes[2];
  int64_t M = m > n ? m : n, N = m > n ? n : m;
  size_t work = (size_t)(M * N + N * N + N + M * M + N);
  return nrt_decomp_for_batches(l, "SVD", l->sizes[0], work, svd_one);
}
