/* Complex Householder QR (GEQRF, ORGQR, ORMQR with complex operands): the
 * structure of qr.c in double complex, with LAPACK's complex conventions
 * (zgeqrf, zlarfg) so that R, tau and Q are the CPU's:
 *
 *   H = I - tau v v^H, v(0) = 1; for the column [alpha; x],
 *   beta = -sign(re alpha) ||[alpha; x]|| (real: R's diagonal is real),
 *   tau = (beta - alpha) / beta, v = [1; x / (alpha - beta)], and
 *   H^H [alpha; x] = [beta; 0]. tau = 0 (H = I) only when x = 0 and alpha
 *   is already real. Q = H_0 ... H_{k-1}, so Q^H A = R applies H_j^H
 *   (conj(tau_j)) to the trailing columns.
 * One loop nest per batch entry: the only path, so also the reference. */
#include <math.h>

#include "kernels/linalg/zlinalg.h"

/* H = I - tau v v^H from the left on rows r0..rows-1, columns c0..cols-1
 * of the row-major c (leading dimension ldc): C -= tau v (v^H C). */
static void zreflect_left(const nrt_z *v, nrt_z tau, nrt_z *c, int64_t ldc, int64_t r0, int64_t rows, int64_t c0,
                          int64_t cols) {
  if (tau == 0.0) return;
  for (int64_t j = c0; j < cols; j++) {
    nrt_z s = 0.0;
    for (int64_t i = r0; i < rows; i++) s += conj(v[i - r0]) * c[i * ldc + j];
    s *= tau;
    for (int64_t i = r0; i < rows; i++) c[i * ldc + j] -= s * v[i - r0];
  }
}

/* From the right on columns c0.. of rows [0, rows): C H = C - tau (C v) v^H. */
static void zreflect_right(const nrt_z *v, nrt_z tau, nrt_z *c, int64_t ldc, int64_t rows, int64_t c0,
                           int64_t cols) {
  if (tau == 0.0) return;
  for (int64_t i = 0; i < rows; i++) {
    nrt_z s = 0.0;
    for (int64_t j = c0; j < cols; j++) s += c[i * ldc + j] * v[j - c0];
    s *= tau;
    for (int64_t j = c0; j < cols; j++) c[i * ldc + j] -= s * conj(v[j - c0]);
  }
}

static void geqrf_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t m = l->sizes[1], n = l->sizes[2], k = m < n ? m : n;
  nrt_dmat QR = nrt_dmat_of(l, 0), T = nrt_dmat_of(l, 1), A = nrt_dmat_of(l, 2);
  nrt_z *a = (nrt_z *)w, *v = a + m * n;
  nrt_zmat_load(&A, b, m, n, a);
  for (int64_t j = 0; j < k; j++) {
    nrt_z alpha = a[j * n + j];
    double scale = 0.0, xnorm = 0.0;
    for (int64_t i = j + 1; i < m; i++) scale = fmax(scale, cabs(a[i * n + j]));
    if (scale > 0.0) {
      for (int64_t i = j + 1; i < m; i++) xnorm += nrt_z_abs2(a[i * n + j] / scale);
      xnorm = scale * sqrt(xnorm);
    }
    nrt_z tau = 0.0;
    if (xnorm != 0.0 || cimag(alpha) != 0.0) {
      double ar = creal(alpha), ai = cimag(alpha);
      double beta = -copysign(hypot(hypot(ar, ai), xnorm), ar);
      tau = CMPLX((beta - ar) / beta, -ai / beta);
      nrt_z inv = 1.0 / (alpha - beta);
      for (int64_t i = j + 1; i < m; i++) a[i * n + j] *= inv;
      a[j * n + j] = beta;
      v[0] = 1.0;
      for (int64_t i = j + 1; i < m; i++) v[i - j] = a[i * n + j];
      zreflect_left(v, conj(tau), a, n, j, m, j + 1, n);
    }
    nrt_zvec_st(&T, b, j, tau);
  }
  nrt_zmat_store(&QR, b, m, n, a);
}

static void orgqr_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t m = l->sizes[1], n = l->sizes[2], k = l->params[0];
  nrt_dmat Q = nrt_dmat_of(l, 0), V = nrt_dmat_of(l, 1), T = nrt_dmat_of(l, 2);
  nrt_z *q = (nrt_z *)w, *v = q + m * n;
  for (int64_t i = 0; i < m * n; i++) q[i] = 0.0;
  for (int64_t i = 0; i < n && i < m; i++) q[i * n + i] = 1.0;
  for (int64_t j = k - 1; j >= 0; j--) {
    v[0] = 1.0;
    for (int64_t i = j + 1; i < m; i++) v[i - j] = nrt_zmat_ld(&V, b, i, j);
    zreflect_left(v, nrt_zvec_ld(&T, b, j), q, n, j, m, j, n);
  }
  nrt_zmat_store(&Q, b, m, n, q);
}

/* op(Q) C or C op(Q), op(Q) = Q^H when p1 (torch.ormqr's transpose is the
 * conjugate transpose for complex input). */
static void ormqr_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t m = l->sizes[1], n = l->sizes[2], k = l->params[2];
  int left = l->params[0] != 0, trans = l->params[1] != 0;
  int64_t nq = left ? m : n;
  nrt_dmat O = nrt_dmat_of(l, 0), V = nrt_dmat_of(l, 1), T = nrt_dmat_of(l, 2), C = nrt_dmat_of(l, 3);
  nrt_z *c = (nrt_z *)w, *v = c + m * n;
  nrt_zmat_load(&C, b, m, n, c);
  int forward = left == trans;
  for (int64_t s = 0; s < k; s++) {
    int64_t j = forward ? s : k - 1 - s;
    v[0] = 1.0;
    for (int64_t i = j + 1; i < nq; i++) v[i - j] = nrt_zmat_ld(&V, b, i, j);
    nrt_z tau = nrt_zvec_ld(&T, b, j);
    if (trans) tau = conj(tau);
    if (left) zreflect_left(v, tau, c, n, j, m, 0, n);
    else zreflect_right(v, tau, c, n, m, j, n);
  }
  nrt_zmat_store(&O, b, m, n, c);
}

nrt_status nrt_zdecomp_qr(const nrt_launch *l) {
  const char *name = nrt_op_name(l->op);
  int64_t nb = l->sizes[0];
  switch ((int)l->op) {
  case NRT_OP(GEQRF): {
    if (l->noutputs != 2 || l->ndim != 3) break;
    int64_t m = l->sizes[1], n = l->sizes[2];
    return nrt_decomp_for_batches(l, name, nb, (size_t)(2 * (m * n + m)), geqrf_one);
  }
  case NRT_OP(ORGQR): {
    if (l->noutputs != 1 || l->ndim != 3) break;
    int64_t m = l->sizes[1], n = l->sizes[2];
    if (l->params[0] < 0 || l->params[0] > n || n > m) break;
    return nrt_decomp_for_batches(l, name, nb, (size_t)(2 * (m * n + m)), orgqr_one);
  }
  case NRT_OP(ORMQR): {
    if (l->noutputs != 1 || l->ndim != 3) break;
    int64_t m = l->sizes[1], n = l->sizes[2];
    if (l->params[2] < 0 || l->params[2] > (l->params[0] ? m : n)) break;
    return nrt_decomp_for_batches(l, name, nb, (size_t)(2 * (m * n + (m > n ? m : n))), ormqr_one);
  }
  default: break;
  }
  return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s (complex): bad descriptor (see nrt/ops/linalg.h for its layout)",
                         name);
}
