/* Householder QR (GEQRF) and applying its reflectors (ORGQR, ORMQR).
 *
 * Reflector j maps the column x = a(j:m, j) onto beta e_1 with
 * beta = -sign(a(j, j)) ||x|| (the sign that avoids cancellation), as
 * H = I - tau v v^T with v(0) = 1 and tau = (beta - alpha) / beta; when x
 * has nothing below its head, H = I (tau = 0) and R keeps a(j, j) as is.
 * Using LAPACK's convention makes R's signs, and so Q, the same as the
 * CPU's (QR is unique only once those signs are fixed). */
#include <math.h>

#include "kernels/linalg/linalg.h"
#include "nrt/ops/linalg.h"

/* Applies H = I - tau v v^T from the left to the rows r0.. of the row-major
 * block c (rows x cols, leading dimension ldc) restricted to columns
 * [c0, cols): v has length rows - r0 and v[0] = 1 implied by the caller. */
static void reflect_left(const double *v, double tau, double *c, int64_t ldc, int64_t r0, int64_t rows,
                         int64_t c0, int64_t cols) {
  if (tau == 0.0) return;
  for (int64_t j = c0; j < cols; j++) {
    double s = 0.0;
    for (int64_t i = r0; i < rows; i++) s += v[i - r0] * c[i * ldc + j];
    s *= tau;
    for (int64_t i = r0; i < rows; i++) c[i * ldc + j] -= s * v[i - r0];
  }
}

/* From the right on columns c0.. of rows [0, rows): C H. */
static void reflect_right(const double *v, double tau, double *c, int64_t ldc, int64_t rows, int64_t c0,
                          int64_t cols) {
  if (tau == 0.0) return;
  for (int64_t i = 0; i < rows; i++) {
    double s = 0.0;
    for (int64_t j = c0; j < cols; j++) s += c[i * ldc + j] * v[j - c0];
    s *= tau;
    for (int64_t j = c0; j < cols; j++) c[i * ldc + j] -= s * v[j - c0];
  }
}

/* ---- GEQRF ------------------------------------------------------------ */
static void geqrf_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t m = l->sizes[1], n = l->sizes[2], k = m < n ? m : n;
  nrt_dmat QR = nrt_dmat_of(l, 0), T = nrt_dmat_of(l, 1), A = nrt_dmat_of(l, 2);
  double *a = w, *v = w + m * n;
  nrt_dmat_load(&A, b, m, n, a);
  for (int64_t j = 0; j < k; j++) {
    double alpha = a[j * n + j], xnorm = 0.0, scale = 0.0;
    /* Scaled sum of squares: no overflow or underflow for extreme columns. */
    for (int64_t i = j + 1; i < m; i++) scale = fmax(scale, fabs(a[i * n + j]));
    if (scale > 0.0) {
      for (int64_t i = j + 1; i < m; i++) {
        double t = a[i * n + j] / scale;
        xnorm += t * t;
      }
      xnorm = scale * sqrt(xnorm);
    }
    double tau = 0.0;
    if (xnorm != 0.0) {
      double beta = -copysign(hypot(alpha, xnorm), alpha);
      tau = (beta - alpha) / beta;
      double inv = 1.0 / (alpha - beta);
      for (int64_t i = j + 1; i < m; i++) a[i * n + j] *= inv;
      a[j * n + j] = beta;
      v[0] = 1.0;
      for (int64_t i = j + 1; i < m; i++) v[i - j] = a[i * n + j];
      reflect_left(v, tau, a, n, j, m, j + 1, n);
    }
    nrt_dvec_st(&T, b, j, tau);
  }
  nrt_dmat_store(&QR, b, m, n, a);
}

/* ---- ORGQR --------------------------------------------------------------- */
static void orgqr_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t m = l->sizes[1], n = l->sizes[2], k = l->params[0];
  nrt_dmat Q = nrt_dmat_of(l, 0), V = nrt_dmat_of(l, 1), T = nrt_dmat_of(l, 2);
  double *q = w, *v = q + m * n;
  for (int64_t i = 0; i < m * n; i++) q[i] = 0.0;
  for (int64_t i = 0; i < n && i < m; i++) q[i * n + i] = 1.0;
  /* Q E = H_0 (H_1 (... H_{k-1} E)): the last reflector first, each one
   * touching only rows j.. (the ones above are still those of E). Only the
   * first k columns of V are read. */
  for (int64_t j = k - 1; j >= 0; j--) {
    v[0] = 1.0;
    for (int64_t i = j + 1; i < m; i++) v[i - j] = nrt_dmat_ld(&V, b, i, j);
    reflect_left(v, nrt_dvec_ld(&T, b, j), q, n, j, m, j, n);
  }
  nrt_dmat_store(&Q, b, m, n, q);
}

/* ---- ORMQR --------------------------------------------------------------- */
static void ormqr_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t m = l->sizes[1], n = l->sizes[2], k = l->params[2];
  int left = l->params[0] != 0, trans = l->params[1] != 0;
  int64_t nq = left ? m : n;
  nrt_dmat O = nrt_dmat_of(l, 0), V = nrt_dmat_of(l, 1), T = nrt_dmat_of(l, 2), C = nrt_dmat_of(l, 3);
  double *c = w, *v = w + m * n;
  nrt_dmat_load(&C, b, m, n, c);
  /* Q = H_0 ... H_{k-1}. Q C and C Q^T apply H_{k-1} first; Q^T C and C Q
   * apply H_0 first. */
  int forward = left == trans;
  for (int64_t s = 0; s < k; s++) {
    int64_t j = forward ? s : k - 1 - s;
    v[0] = 1.0;
    for (int64_t i = j + 1; i < nq; i++) v[i - j] = nrt_dmat_ld(&V, b, i, j);
    double tau = nrt_dvec_ld(&T, b, j);
    if (left) reflect_left(v, tau, c, n, j, m, 0, n);
    else reflect_right(v, tau, c, n, m, j, n);
  }
  nrt_dmat_store(&O, b, m, n, c);
}

nrt_status nrt_decomp_qr(const nrt_launch *l) {
  const char *name = nrt_op_name(l->op);
  int64_t nb = l->sizes[0];
  switch ((int)l->op) {
  case NRT_OP(GEQRF): {
    if (l->noutputs != 2 || l->ndim != 3) break;
    int64_t m = l->sizes[1], n = l->sizes[2];
    return nrt_decomp_for_batches(l, name, nb, (size_t)(m * n + m), geqrf_one);
  }
  case NRT_OP(ORGQR): {
    if (l->noutputs != 1 || l->ndim != 3) break;
    int64_t m = l->sizes[1], n = l->sizes[2];
    if (l->params[0] < 0 || l->params[0] > n || n > m) break;
    return nrt_decomp_for_batches(l, name, nb, (size_t)(m * n + m), orgqr_one);
  }
  case NRT_OP(ORMQR): {
    if (l->noutputs != 1 || l->ndim != 3) break;
    int64_t m = l->sizes[1], n = l->sizes[2];
    if (l->params[2] < 0 || l->params[2] > (l->params[0] ? m : n)) break;
    return nrt_decomp_for_batches(l, name, nb, (size_t)(m * n + (m > n ? m : n)), ormqr_one);
  }
  default: break;
  }
  return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: bad descriptor (see nrt/ops/decomp.h for its layout)", name);
}
