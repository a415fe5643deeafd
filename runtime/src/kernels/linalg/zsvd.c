/* Complex singular value decomposition by one-sided Jacobi (SVD with
 * complex operands): the structure of svd.c.
 *
 * For a tall T (M x N, M >= N; a wide A is decomposed as A^H) the pair of
 * columns (p, q) with gamma = t_p^H t_q = |gamma| e^{i phi} is made
 * orthogonal by scaling t_q by e^{-i phi} (gamma becomes real) and the
 * real rotation of svd.c; the same unitary column operations accumulate V,
 * so that T V = U S at convergence. S is real, descending; A = U S V^H and
 * Vh = V^H. Singular vectors are unique up to one phase per pair (u_j, v_j):
 * the largest-magnitude entry of each v_j is made real and positive. U's
 * columns for zero singular values and the extra ones of full_matrices are
 * completed by Gram-Schmidt on unit vectors. One path, so also the
 * reference. */
#include <float.h>
#include <math.h>

#include "kernels/linalg/zlinalg.h"

#define ZSVD_MAX_SWEEPS 80

static void complete_column(nrt_z *q, int64_t rows, int64_t cols, int64_t j) {
  int64_t best = 0;
  double best_res = -1.0;
  for (int64_t i = 0; i < rows; i++) {
    double r = 1.0;
    for (int64_t c = 0; c < j; c++) r -= nrt_z_abs2(q[i * cols + c]);
    if (r > best_res) {
      best_res = r;
      best = i;
    }
  }
  for (int64_t i = 0; i < rows; i++) q[i * cols + j] = i == best ? 1.0 : 0.0;
  for (int pass = 0; pass < 2; pass++)
    for (int64_t c = 0; c < j; c++) {
      nrt_z d = 0.0;
      for (int64_t i = 0; i < rows; i++) d += conj(q[i * cols + c]) * q[i * cols + j];
      for (int64_t i = 0; i < rows; i++) q[i * cols + j] -= d * q[i * cols + c];
    }
  double nrm = 0.0;
  for (int64_t i = 0; i < rows; i++) nrm += nrt_z_abs2(q[i * cols + j]);
  nrm = sqrt(nrm);
  for (int64_t i = 0; i < rows; i++) q[i * cols + j] /= nrm;
}

static void zsvd_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t m = l->sizes[1], n = l->sizes[2];
  int wide = m < n, want_uv = l->noutputs == 3, full = l->params[0] != 0;
  int64_t M = wide ? n : m, N = wide ? m : n;
  int64_t ucols = want_uv && full ? M : N;
  nrt_z *t = (nrt_z *)w;  /* M x N */
  nrt_z *v = t + M * N;   /* N x N */
  nrt_z *u = v + N * N;   /* M x ucols */
  double *sig = (double *)(u + M * ucols);
  int64_t *order = (int64_t *)(sig + N);
  nrt_dmat A = nrt_dmat_of(l, want_uv ? 3 : 1), S = nrt_dmat_of(l, 0);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) t[i * N + j] = wide ? conj(nrt_zmat_ld(&A, b, j, i)) : nrt_zmat_ld(&A, b, i, j);
  for (int64_t i = 0; i < N * N; i++) v[i] = 0.0;
  for (int64_t i = 0; i < N; i++) v[i * N + i] = 1.0;

  for (int sweep = 0; sweep < ZSVD_MAX_SWEEPS; sweep++) {
    int rotated = 0;
    for (int64_t p = 0; p < N - 1; p++)
      for (int64_t q = p + 1; q < N; q++) {
        double alpha = 0.0, beta = 0.0;
        nrt_z gamma = 0.0;
        for (int64_t i = 0; i < M; i++) {
          nrt_z tp = t[i * N + p], tq = t[i * N + q];
          alpha += nrt_z_abs2(tp);
          beta += nrt_z_abs2(tq);
          gamma += conj(tp) * tq;
        }
        double g = cabs(gamma);
        if (g == 0.0 || g <= DBL_EPSILON * sqrt(alpha * beta)) continue;
        nrt_z d = conj(gamma) / g; /* t_q d makes t_p^H t_q real */
        double zeta = (beta - alpha) / (2.0 * g);
        double tn = fabs(zeta) > 1e150 ? 0.5 / zeta : (zeta >= 0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1.0 + zeta * zeta));
        double c = 1.0 / sqrt(1.0 + tn * tn), s = c * tn;
        for (int64_t i = 0; i < M; i++) {
          nrt_z tp = t[i * N + p], tq = t[i * N + q] * d;
          t[i * N + p] = c * tp - s * tq;
          t[i * N + q] = s * tp + c * tq;
        }
        if (want_uv)
          for (int64_t i = 0; i < N; i++) {
            nrt_z vp = v[i * N + p], vq = v[i * N + q] * d;
            v[i * N + p] = c * vp - s * vq;
            v[i * N + q] = s * vp + c * vq;
          }
        rotated = 1;
      }
    if (!rotated) break;
  }

  for (int64_t j = 0; j < N; j++) {
    double s2 = 0.0;
    for (int64_t i = 0; i < M; i++) s2 += nrt_z_abs2(t[i * N + j]);
    sig[j] = sqrt(s2);
    order[j] = j;
  }
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

  double smax = N ? sig[order[0]] : 0.0, tiny = (double)M * DBL_EPSILON * smax;
  for (int64_t j = 0; j < N; j++) {
    int64_t o = order[j], imax = 0;
    for (int64_t i = 1; i < N; i++)
      if (cabs(v[i * N + o]) > cabs(v[imax * N + o])) imax = i;
    double mag = cabs(v[imax * N + o]);
    nrt_z ph = mag > 0.0 ? conj(v[imax * N + o]) / mag : 1.0;
    for (int64_t i = 0; i < N; i++) v[i * N + o] *= ph;
    v[imax * N + o] = mag;
    int ok = sig[o] > tiny && sig[o] > 0.0;
    for (int64_t i = 0; i < M; i++) u[i * ucols + j] = ok ? t[i * N + o] * ph / sig[o] : 0.0;
  }
  for (int64_t j = 0; j < ucols; j++)
    if (j >= N || !(sig[order[j]] > tiny && sig[order[j]] > 0.0)) complete_column(u, M, ucols, j);

  nrt_dmat U = nrt_dmat_of(l, 1), VH = nrt_dmat_of(l, 2);
  if (!wide) { /* A = U S V^H */
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < ucols; j++) nrt_zmat_st(&U, b, i, j, u[i * ucols + j]);
    for (int64_t j = 0; j < N; j++)
      for (int64_t i = 0; i < N; i++) nrt_zmat_st(&VH, b, j, i, conj(v[i * N + order[j]]));
  } else { /* A^H = u S v^H, so A = v S u^H: U_A = v, Vh_A = u^H */
    for (int64_t i = 0; i < N; i++)
      for (int64_t j = 0; j < N; j++) nrt_zmat_st(&U, b, i, j, v[i * N + order[j]]);
    for (int64_t j = 0; j < ucols; j++)
      for (int64_t i = 0; i < M; i++) nrt_zmat_st(&VH, b, j, i, conj(u[i * ucols + j]));
  }
}

nrt_status nrt_zdecomp_svd(const nrt_launch *l) {
  if ((l->noutputs != 1 && l->noutputs != 3) || l->ndim != 3)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "SVD (complex): expected 1 or 3 outputs and sizes {batch, m, n}");
  int64_t m = l->sizes[1], n = l->sizes[2];
  int64_t M = m > n ? m : n, N = m > n ? n : m;
  size_t work = (size_t)(2 * (M * N + N * N + M * M) + 2 * N);
  return nrt_decomp_for_batches(l, "SVD", l->sizes[0], work, zsvd_one);
}
