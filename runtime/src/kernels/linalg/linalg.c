/* Family LINALG (nrt/ops/linalg.h): the dispatcher and what every
 * decomposition shares, the batch loop and dense work copies. The
 * algorithms live one concept per file: lu.c, qr.c, svd.c, eigh.c, ldl.c,
 * expm.c, cholesky.c; their complex versions zlu.c, zqr.c, zsvd.c,
 * zeigh.c, zcholesky.c (helpers in zlinalg.h), and the general
 * eigensolver eig.c (real and complex input).
 *
 * These kernels are plain loop nests in double on a dense copy of each
 * matrix (the matrices PyTorch code factors are small, and double keeps
 * float32 results at LAPACK accuracy); there is no separate fast path, so
 * the loop is also the reference path. */
#include <stdlib.h>

#include "kernels/linalg/linalg.h"
#include "kernels/linalg/zlinalg.h"
#include "nrt/ops/linalg.h"

void nrt_dmat_load(const nrt_dmat *m, int64_t b, int64_t rows, int64_t cols, double *w) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) w[i * cols + j] = nrt_dmat_ld(m, b, i, j);
}

void nrt_dmat_store(const nrt_dmat *m, int64_t b, int64_t rows, int64_t cols, const double *w) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) nrt_dmat_st(m, b, i, j, w[i * cols + j]);
}

void nrt_decomp_solve_one(const nrt_launch *l, int64_t b, double *work, nrt_decomp_pivots_fn pivots,
                          nrt_decomp_solve_fn solve) {
  int64_t n = l->sizes[1], k = l->sizes[2];
  nrt_dmat X = nrt_dmat_of(l, 0), F = nrt_dmat_of(l, 1), P = nrt_dmat_of(l, 2), B = nrt_dmat_of(l, 3);
  double *factor = work, *x = work + n * n;
  int32_t *piv = (int32_t *)(x + n * k);
  nrt_dmat_load(&F, b, n, n, factor);
  pivots(&P, b, n, piv);
  nrt_dmat_load(&B, b, n, k, x);
  solve(l, factor, piv, n, x, k);
  nrt_dmat_store(&X, b, n, k, x);
}

typedef struct batch_ctx {
  const nrt_launch *l;
  size_t work_doubles;
  nrt_decomp_batch_fn fn;
  volatile int failed; /* a task could not allocate its scratch */
} batch_ctx;

static void batch_range(void *vctx, int64_t begin, int64_t end) {
  batch_ctx *c = vctx;
  double *work = malloc(sizeof(double) * (c->work_doubles ? c->work_doubles : 1));
  if (!work) {
    c->failed = 1;
    return;
  }
  for (int64_t b = begin; b < end; b++) c->fn(c->l, b, work);
  free(work);
}

nrt_status nrt_decomp_for_batches(const nrt_launch *l, const char *what, int64_t nbatch,
                                  size_t work_doubles, nrt_decomp_batch_fn fn) {
  if (nbatch <= 0) return NRT_SUCCESS;
  batch_ctx c = {l, work_doubles, fn, 0};
  nrt_parallel_for(nbatch, 1, batch_range, &c);
  if (c.failed)
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: host out of memory for %zu bytes of work space", what,
                           work_doubles * sizeof(double));
  return NRT_SUCCESS;
}

nrt_status nrt_linalg_execute(const nrt_launch *l) {
  int complex_ops = nrt_linalg_is_complex(l);
  /* Cholesky and triangular solves handle empty launches themselves. */
  if (l->op == NRT_OP(CHOLESKY) || l->op == NRT_OP(TRIANGULAR_SOLVE))
    return complex_ops ? nrt_zlinalg_cholesky_run(l) : nrt_linalg_cholesky_run(l);
  /* An empty launch writes nothing (its operands may have no storage):
   * the glue fills what empty matrices define (info 0, det 1, ...). */
  for (int d = 0; d < l->ndim; d++)
    if (l->sizes[d] == 0) return NRT_SUCCESS;
  /* Switch on (int)l->op: family ids are not enumerators of nrt_op. */
  if ((int)l->op == NRT_OP(EIG)) return nrt_decomp_eig(l); /* complex outputs for any input */
  if (complex_ops) {
    switch ((int)l->op) {
    case NRT_OP(LU_FACTOR):
    case NRT_OP(LU_SOLVE):
    case NRT_OP(LU_INVERSE):
    case NRT_OP(LU_DET):
    case NRT_OP(LU_UNPACK): return nrt_zdecomp_lu(l);
    case NRT_OP(GEQRF):
    case NRT_OP(ORGQR):
    case NRT_OP(ORMQR): return nrt_zdecomp_qr(l);
    case NRT_OP(SVD): return nrt_zdecomp_svd(l);
    case NRT_OP(EIGH): return nrt_zdecomp_eigh(l);
    default:
      return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "linalg: op %s has no complex kernel", nrt_op_name(l->op));
    }
  }
  switch ((int)l->op) {
  case NRT_OP(LU_FACTOR):
  case NRT_OP(LU_SOLVE):
  case NRT_OP(LU_INVERSE):
  case NRT_OP(LU_DET):
  case NRT_OP(LU_UNPACK): return nrt_decomp_lu(l);
  case NRT_OP(GEQRF):
  case NRT_OP(ORGQR):
  case NRT_OP(ORMQR): return nrt_decomp_qr(l);
  case NRT_OP(SVD): return nrt_decomp_svd(l);
  case NRT_OP(EIGH): return nrt_decomp_eigh(l);
  case NRT_OP(LDL_FACTOR):
  case NRT_OP(LDL_SOLVE): return nrt_decomp_ldl(l);
  case NRT_OP(MATRIX_EXP): return nrt_decomp_expm(l);
  default: break;
  }
  return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "decomp: op %s has no kernel", nrt_op_name(l->op));
}
