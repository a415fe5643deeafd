/* Complex Cholesky (A = L L^H, zpotrf) and complex triangular solves: the
 * structure of cholesky.c in double complex, one plain loop nest per batch
 * entry (the only path, so also the reference).
 *
 * As zpotrf does, only the real part of A's diagonal is read (A is
 * Hermitian by contract) and L's diagonal is real and positive. upper
 * reads the upper triangle (A(i, j) = conj(A(j, i)) below it) and writes
 * U = L^H. Triangular solves never conjugate: the glue expresses A^H as a
 * conjugated (materialised) transpose view. */
#include <math.h>
#include <stdlib.h>

#include "kernels/linalg/zlinalg.h"

static void chol_one(const nrt_launch *l, int64_t b, double *work) {
  int64_t n = l->sizes[1];
  int upper = l->params[0] != 0;
  nrt_dmat L = nrt_dmat_of(l, 0), INFO = nrt_dmat_of(l, 1), A = nrt_dmat_of(l, 2);
  nrt_z *w = (nrt_z *)work;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j <= i; j++) w[i * n + j] = upper ? conj(nrt_zmat_ld(&A, b, j, i)) : nrt_zmat_ld(&A, b, i, j);
  int32_t info = 0;
  for (int64_t j = 0; j < n && !info; j++) {
    double d = creal(w[j * n + j]);
    for (int64_t k = 0; k < j; k++) d -= nrt_z_abs2(w[j * n + k]);
    if (!(d > 0.0)) {
      info = (int32_t)(j + 1);
      break;
    }
    double ljj = sqrt(d);
    w[j * n + j] = ljj;
    for (int64_t i = j + 1; i < n; i++) {
      nrt_z s = w[i * n + j];
      for (int64_t k = 0; k < j; k++) s -= w[i * n + k] * conj(w[j * n + k]);
      w[i * n + j] = s / ljj;
    }
  }
  /* Entries past a failed column keep what the elimination left (as the
   * real kernel does); the caller reports info. */
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      nrt_z v = j <= i ? w[i * n + j] : 0.0;
      if (upper) nrt_zmat_st(&L, b, j, i, conj(v));
      else nrt_zmat_st(&L, b, i, j, v);
    }
  nrt_dvec_sti(&INFO, b, 0, info);
}

/* Solves A X = B (left) or X A = B (right, as A^T X^T = B^T) for one batch
 * entry, a column (row) at a time through the work vector, so X may alias B. */
static void trsm_one(const nrt_launch *l, int64_t b, double *work) {
  int64_t m = l->sizes[1], k = l->sizes[2];
  int upper = l->params[0] != 0, left = l->params[1] != 0, unit = l->params[2] != 0;
  nrt_dmat X = nrt_dmat_of(l, 0), A = nrt_dmat_of(l, 1), B = nrt_dmat_of(l, 2);
  int64_t n = left ? m : k, count = left ? k : m;
  nrt_z *x = (nrt_z *)work;
  /* Right-hand solves run on A^T, which is triangular of the other kind. */
  int up = left ? upper : !upper;
#define A_(i, j) (left ? nrt_zmat_ld(&A, b, i, j) : nrt_zmat_ld(&A, b, j, i))
  for (int64_t v = 0; v < count; v++) {
    for (int64_t i = 0; i < n; i++) x[i] = left ? nrt_zmat_ld(&B, b, i, v) : nrt_zmat_ld(&B, b, v, i);
    for (int64_t s = 0; s < n; s++) {
      int64_t i = up ? n - 1 - s : s;
      nrt_z acc = x[i];
      if (up)
        for (int64_t j = i + 1; j < n; j++) acc -= A_(i, j) * x[j];
      else
        for (int64_t j = 0; j < i; j++) acc -= A_(i, j) * x[j];
      x[i] = unit ? acc : acc / nrt_zmat_ld(&A, b, i, i);
    }
    for (int64_t i = 0; i < n; i++) {
      if (left) nrt_zmat_st(&X, b, i, v, x[i]);
      else nrt_zmat_st(&X, b, v, i, x[i]);
    }
  }
#undef A_
}

nrt_status nrt_zlinalg_cholesky_run(const nrt_launch *l) {
  switch ((int)l->op) {
  case NRT_OP(CHOLESKY): {
    if (l->noutputs != 2 || l->ninputs != 1 || l->ndim != 2)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "CHOLESKY (complex): expected 2 outputs, 1 input and sizes {batch, n}");
    int64_t n = l->sizes[1];
    return nrt_decomp_for_batches(l, "CHOLESKY", l->sizes[0], (size_t)(2 * n * n + 1), chol_one);
  }
  case NRT_OP(TRIANGULAR_SOLVE): {
    if (l->noutputs != 1 || l->ninputs != 2 || l->ndim != 3)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "TRIANGULAR_SOLVE (complex): expected 1 output, 2 inputs and sizes {batch, m, k}");
    if (l->sizes[1] == 0 || l->sizes[2] == 0) return NRT_SUCCESS;
    int64_t n = l->params[1] ? l->sizes[1] : l->sizes[2];
    return nrt_decomp_for_batches(l, "TRIANGULAR_SOLVE", l->sizes[0], (size_t)(2 * n + 1), trsm_one);
  }
  default: return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "linalg: op %s is not a LINALG op", nrt_op_name(l->op));
  }
}
