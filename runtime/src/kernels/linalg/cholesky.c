/* Small dense linear algebra: Cholesky factorisation and triangular solves
 * over batches of matrices (what torch.distributions.MultivariateNormal and
 * friends need). Matrices here are small, so each batch entry is one plain
 * loop nest computed in double (the stored dtype is only for loading and
 * storing); batches run in parallel. There is no separate vectorised path:
 * this loop is the reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/linalg/linalg.h"
#include "nrt/ops/linalg.h"

/* ---- CHOLESKY ------------------------------------------------------------- */
typedef struct chol_ctx {
  const nrt_launch *l;
  nrt_dmat L, info, A;
  int64_t n;
  int upper;
  int failed; /* allocation failure, reported after the loop */
} chol_ctx;

static void chol_range(void *vctx, int64_t begin, int64_t end) {
  chol_ctx *c = vctx;
  int64_t n = c->n;
  double *w = malloc(sizeof(double) * (size_t)(n * n > 0 ? n * n : 1));
  if (!w) {
    c->failed = 1;
    return;
  }
  for (int64_t b = begin; b < end; b++) {
    /* Work on the lower factor of A (reading the upper triangle as its
     * transpose when upper is asked: A is symmetric by contract). */
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++)
        w[i * n + j] = c->upper ? nrt_dmat_ld(&c->A, b, j, i) : nrt_dmat_ld(&c->A, b, i, j);
    int32_t info = 0;
    for (int64_t j = 0; j < n && !info; j++) {
      double d = w[j * n + j];
      for (int64_t k = 0; k < j; k++) d -= w[j * n + k] * w[j * n + k];
      if (!(d > 0.0)) { /* also catches NaN */
        info = (int32_t)(j + 1);
        break;
      }
      double ljj = sqrt(d);
      w[j * n + j] = ljj;
      for (int64_t i = j + 1; i < n; i++) {
        double s = w[i * n + j];
        for (int64_t k = 0; k < j; k++) s -= w[i * n + k] * w[j * n + k];
        w[i * n + j] = s / ljj;
      }
    }
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        double v = j <= i ? w[i * n + j] : 0.0;
        if (c->upper) nrt_dmat_st(&c->L, b, j, i, v);
        else nrt_dmat_st(&c->L, b, i, j, v);
      }
    nrt_dvec_sti(&c->info, b, 0, info);
  }
  free(w);
}

static nrt_status run_cholesky(const nrt_launch *l) {
  if (l->noutputs != 2 || l->ninputs != 1 || l->ndim != 2)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "CHOLESKY: expected 2 outputs, 1 input and sizes {batch, n}");
  chol_ctx c = {l, nrt_dmat_of(l, 0), nrt_dmat_of(l, 1), nrt_dmat_of(l, 2), l->sizes[1], (int)l->params[0], 0};
  nrt_parallel_for(l->sizes[0], 1, chol_range, &c);
  if (c.failed)
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "CHOLESKY: host out of memory for a %lld x %lld work matrix",
                           (long long)c.n, (long long)c.n);
  return NRT_SUCCESS;
}

/* ---- TRIANGULAR_SOLVE ------------------------------------------------------ */
typedef struct trsm_ctx {
  nrt_dmat X, A, B;
  int64_t m, k;
  int upper, left, unit;
} trsm_ctx;

/* Solves A x = b for one vector (n x n triangular A) in place in x. The
 * accessor picks A(i, j) from the stored matrix, transposed for the
 * right-hand case (X A = B  <=>  A^T X^T = B^T). */
static void trsv(const trsm_ctx *c, int64_t b, int64_t n, bool upper, bool transposed, double *x) {
#define A_(i, j) (transposed ? nrt_dmat_ld(&c->A, b, j, i) : nrt_dmat_ld(&c->A, b, i, j))
  for (int64_t s = 0; s < n; s++) {
    int64_t i = upper ? n - 1 - s : s;
    double v = x[i];
    if (upper) {
      for (int64_t j = i + 1; j < n; j++) v -= A_(i, j) * x[j];
    } else {
      for (int64_t j = 0; j < i; j++) v -= A_(i, j) * x[j];
    }
    x[i] = c->unit ? v : v / nrt_dmat_ld(&c->A, b, i, i);
  }
#undef A_
}

static void trsm_range(void *vctx, int64_t begin, int64_t end) {
  trsm_ctx *c = vctx;
  int64_t n = c->left ? c->m : c->k; /* order of A */
  double x[4096];
  double *buf = n <= 4096 ? x : malloc(sizeof(double) * (size_t)n);
  if (!buf) return;
  for (int64_t b = begin; b < end; b++) {
    if (c->left) { /* each column of B independently */
      for (int64_t col = 0; col < c->k; col++) {
        for (int64_t i = 0; i < n; i++) buf[i] = nrt_dmat_ld(&c->B, b, i, col);
        trsv(c, b, n, c->upper, false, buf);
        for (int64_t i = 0; i < n; i++) nrt_dmat_st(&c->X, b, i, col, buf[i]);
      }
    } else { /* each row: x A = r  <=>  A^T x^T = r^T (A^T flips upper/lower) */
      for (int64_t row = 0; row < c->m; row++) {
        for (int64_t i = 0; i < n; i++) buf[i] = nrt_dmat_ld(&c->B, b, row, i);
        trsv(c, b, n, !c->upper, true, buf);
        for (int64_t i = 0; i < n; i++) nrt_dmat_st(&c->X, b, row, i, buf[i]);
      }
    }
  }
  if (buf != x) free(buf);
}

static nrt_status run_triangular_solve(const nrt_launch *l) {
  if (l->noutputs != 1 || l->ninputs != 2 || l->ndim != 3)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "TRIANGULAR_SOLVE: expected 1 output, 2 inputs and sizes {batch, m, k}");
  trsm_ctx c = {nrt_dmat_of(l, 0), nrt_dmat_of(l, 1), nrt_dmat_of(l, 2), l->sizes[1], l->sizes[2],
                (int)l->params[0], (int)l->params[1], (int)l->params[2]};
  /* X may alias B (in-place solves): each column/row is read fully into the
   * work vector before it is written back, so aliasing is safe. */
  nrt_parallel_for(l->sizes[0], 1, trsm_range, &c);
  return NRT_SUCCESS;
}

nrt_status nrt_linalg_cholesky_run(const nrt_launch *l) {
  switch ((int)l->op) {
  case NRT_OP(CHOLESKY): return run_cholesky(l);
  case NRT_OP(TRIANGULAR_SOLVE): return run_triangular_solve(l);
  default: return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "linalg: op %s is not a LINALG op", nrt_op_name(l->op));
  }
}
