/* The linalg family's private header (nrt/ops/linalg.h): strided matrix
 * operands loaded into dense double work arrays, the batch loop, and the
 * entry points of the files behind linalg.c's dispatch.
 *
 * Every linalg kernel factors or solves one small dense matrix per batch
 * entry in double precision, whatever the stored dtype (float32 data gets
 * LAPACK-double accuracy; bfloat16/float16 round on store). The batch is
 * split over the kernel thread pool; each task owns one work area. */
#ifndef NRT_KERNELS_LINALG_H
#define NRT_KERNELS_LINALG_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/common.h"
#include "nrt/ops/linalg.h"

/* Cholesky and triangular solves (cholesky.c). */
nrt_status nrt_linalg_cholesky_run(const nrt_launch *launch);

typedef struct nrt_dmat {
  char *base;
  nrt_dtype dt;
  int64_t sb, sr, sc; /* byte strides: batch, row, col (vectors: batch, index) */
} nrt_dmat;

static inline nrt_dmat nrt_dmat_of(const nrt_launch *l, int operand) {
  const nrt_operand *o = &l->operands[operand];
  nrt_dmat m = {(char *)o->data, o->dtype, o->strides[0], o->strides[1], o->strides[2]};
  return m;
}

static inline double nrt_dmat_ld(const nrt_dmat *m, int64_t b, int64_t r, int64_t c) {
  return nrt_ref_load_f64(m->base + b * m->sb + r * m->sr + c * m->sc, m->dt);
}
static inline void nrt_dmat_st(const nrt_dmat *m, int64_t b, int64_t r, int64_t c, double v) {
  nrt_ref_store_f64(m->base + b * m->sb + r * m->sr + c * m->sc, m->dt, v);
}
/* Integer vectors (pivots, info, rank): element i of batch b. */
static inline int64_t nrt_dvec_ldi(const nrt_dmat *m, int64_t b, int64_t i) {
  return nrt_ref_load_i64(m->base + b * m->sb + i * m->sr, m->dt);
}
static inline void nrt_dvec_sti(const nrt_dmat *m, int64_t b, int64_t i, int64_t v) {
  nrt_ref_store_i64(m->base + b * m->sb + i * m->sr, m->dt, v);
}
static inline double nrt_dvec_ld(const nrt_dmat *m, int64_t b, int64_t i) {
  return nrt_ref_load_f64(m->base + b * m->sb + i * m->sr, m->dt);
}
static inline void nrt_dvec_st(const nrt_dmat *m, int64_t b, int64_t i, double v) {
  nrt_ref_store_f64(m->base + b * m->sb + i * m->sr, m->dt, v);
}

/* Swaps rows r1 and r2 of a dense row-major matrix with `cols` columns
 * (pivot interchanges; a no-op when r1 == r2). */
static inline void nrt_decomp_swap_rows(double *a, int64_t cols, int64_t r1, int64_t r2) {
  if (r1 == r2) return;
  for (int64_t c = 0; c < cols; c++) {
    double t = a[r1 * cols + c];
    a[r1 * cols + c] = a[r2 * cols + c];
    a[r2 * cols + c] = t;
  }
}

/* Dense row-major rows x cols copy of batch entry b (w[i * cols + j]). */
void nrt_dmat_load(const nrt_dmat *m, int64_t b, int64_t rows, int64_t cols, double *w);
void nrt_dmat_store(const nrt_dmat *m, int64_t b, int64_t rows, int64_t cols, const double *w);

/* Runs fn for every batch entry in [0, nbatch) on the kernel pool, giving
 * each task `work_doubles` doubles of scratch. Returns NRT_ERROR_OUT_OF_MEMORY
 * (with a message naming `what`) when scratch could not be allocated. */
typedef void (*nrt_decomp_batch_fn)(const nrt_launch *l, int64_t b, double *work);
nrt_status nrt_decomp_for_batches(const nrt_launch *l, const char *what, int64_t nbatch,
                                  size_t work_doubles, nrt_decomp_batch_fn fn);

/* The solve of the factor-then-solve ops (LU_SOLVE, LDL_SOLVE) for batch
 * entry b: operands {X, factor, pivots, B}, sizes {batch, n, k}. Work
 * holds the n x n factor, then B (n x k), then the n pivots as int32
 * (loaded through `pivots`, which clamps corrupt values into range so that
 * a bad pivots tensor cannot make the kernel read out of bounds); `solve`
 * overwrites B with X. */
typedef void (*nrt_decomp_pivots_fn)(const nrt_dmat *pv, int64_t b, int64_t n, int32_t *piv);
typedef void (*nrt_decomp_solve_fn)(const nrt_launch *l, const double *factor, const int32_t *piv, int64_t n,
                                    double *x, int64_t k);
void nrt_decomp_solve_one(const nrt_launch *l, int64_t b, double *work, nrt_decomp_pivots_fn pivots,
                          nrt_decomp_solve_fn solve);

/* Op entry points, one file per concept. */
nrt_status nrt_decomp_lu(const nrt_launch *l);     /* decomp_lu.c: LU_* */
nrt_status nrt_decomp_qr(const nrt_launch *l);     /* decomp_qr.c: GEQRF, ORGQR, ORMQR */
nrt_status nrt_decomp_svd(const nrt_launch *l);    /* decomp_svd.c */
nrt_status nrt_decomp_eigh(const nrt_launch *l);   /* decomp_eigh.c */
nrt_status nrt_decomp_ldl(const nrt_launch *l);    /* decomp_ldl.c: LDL_FACTOR, LDL_SOLVE */
nrt_status nrt_decomp_expm(const nrt_launch *l);   /* decomp_expm.c */

/* Dense helpers on row-major double arrays shared between files. */
/* In-place LU with partial pivoting (getrf semantics) of the m x n matrix a:
 * piv[j] = 1-based row swapped with row j; returns info (0 or the 1-based
 * index of the first exactly-zero pivot). pivot = 0: no row exchanges. */
int32_t nrt_decomp_getrf(double *a, int64_t m, int64_t n, int32_t *piv, int pivot);
/* Solves op(A) X = B for the n x nrhs row-major b in place, with A = P L U
 * packed in lu (n x n) and pivots piv; transpose selects A^T. */
void nrt_decomp_getrs(const double *lu, const int32_t *piv, int64_t n, int transpose, double *b,
                      int64_t nrhs);

#endif
