/* The linalg family's complex helpers: loads and stores of complex matrix
 * operands into dense work arrays of C11 `double complex`, and the entry
 * points of the complex kernels (zlu.c, zcholesky.c, zqr.c, zeigh.c,
 * zsvd.c) and of the general eigensolver (eig.c).
 *
 * Complex tensors store interleaved (re, im) pairs (nrt/dtype.h); the
 * kernels compute in double complex whatever the stored precision, as the
 * real kernels compute in double. A real operand read through these loads
 * gives zero imaginary parts, and a real operand written through them
 * stores the real part (what the complex kernels write to real outputs,
 * singular values or eigenvalues of Hermitian matrices, is real anyway). */
#ifndef NRT_KERNELS_LINALG_ZLINALG_H
#define NRT_KERNELS_LINALG_ZLINALG_H

#include <complex.h>
#include <math.h>

#include "kernels/linalg/linalg.h"

typedef double complex nrt_z;

static inline nrt_z nrt_z_load(const char *p, nrt_dtype dt) {
  switch (dt) {
  case NRT_COMPLEX128: return CMPLX(((const double *)p)[0], ((const double *)p)[1]);
  case NRT_COMPLEX64: return CMPLX(((const float *)p)[0], ((const float *)p)[1]);
  case NRT_COMPLEX32:
    return CMPLX(nrt_f16_to_f32(((const uint16_t *)p)[0]), nrt_f16_to_f32(((const uint16_t *)p)[1]));
  default: return CMPLX(nrt_ref_load_f64(p, dt), 0.0);
  }
}

static inline void nrt_z_store(char *p, nrt_dtype dt, nrt_z v) {
  switch (dt) {
  case NRT_COMPLEX128:
    ((double *)p)[0] = creal(v);
    ((double *)p)[1] = cimag(v);
    break;
  case NRT_COMPLEX64:
    ((float *)p)[0] = (float)creal(v);
    ((float *)p)[1] = (float)cimag(v);
    break;
  case NRT_COMPLEX32:
    ((uint16_t *)p)[0] = nrt_f32_to_f16((float)creal(v));
    ((uint16_t *)p)[1] = nrt_f32_to_f16((float)cimag(v));
    break;
  default: nrt_ref_store_f64(p, dt, creal(v)); break;
  }
}

static inline nrt_z nrt_zmat_ld(const nrt_dmat *m, int64_t b, int64_t r, int64_t c) {
  return nrt_z_load(m->base + b * m->sb + r * m->sr + c * m->sc, m->dt);
}
static inline void nrt_zmat_st(const nrt_dmat *m, int64_t b, int64_t r, int64_t c, nrt_z v) {
  nrt_z_store(m->base + b * m->sb + r * m->sr + c * m->sc, m->dt, v);
}
static inline nrt_z nrt_zvec_ld(const nrt_dmat *m, int64_t b, int64_t i) {
  return nrt_z_load(m->base + b * m->sb + i * m->sr, m->dt);
}
static inline void nrt_zvec_st(const nrt_dmat *m, int64_t b, int64_t i, nrt_z v) {
  nrt_z_store(m->base + b * m->sb + i * m->sr, m->dt, v);
}

/* Dense row-major rows x cols copies of batch entry b. */
static inline void nrt_zmat_load(const nrt_dmat *m, int64_t b, int64_t rows, int64_t cols, nrt_z *w) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) w[i * cols + j] = nrt_zmat_ld(m, b, i, j);
}
static inline void nrt_zmat_store(const nrt_dmat *m, int64_t b, int64_t rows, int64_t cols, const nrt_z *w) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) nrt_zmat_st(m, b, i, j, w[i * cols + j]);
}

/* |re| + |im|: LAPACK's cabs1, which izamax (the pivot search of zgetrf)
 * maximises; using it makes the pivots the CPU's. */
static inline double nrt_z_abs1(nrt_z z) { return fabs(creal(z)) + fabs(cimag(z)); }
static inline double nrt_z_abs2(nrt_z z) { return creal(z) * creal(z) + cimag(z) * cimag(z); }

static inline void nrt_z_swap_rows(nrt_z *a, int64_t cols, int64_t r1, int64_t r2) {
  if (r1 == r2) return;
  for (int64_t c = 0; c < cols; c++) {
    nrt_z t = a[r1 * cols + c];
    a[r1 * cols + c] = a[r2 * cols + c];
    a[r2 * cols + c] = t;
  }
}

/* True when an operand of the launch is complex: the linalg dispatcher
 * sends such launches to the complex kernels. */
static inline bool nrt_linalg_is_complex(const nrt_launch *l) {
  for (int i = 0; i < l->noutputs + l->ninputs; i++)
    if (nrt_dtype_is_complex(l->operands[i].dtype)) return true;
  return false;
}

/* Complex getrf / getrs on row-major double complex arrays (zlu.c): the
 * pivot is the largest cabs1 entry. getrs solves op(A) X = B where
 * op = A, A^T (transpose), conj(A) (conjugate) or A^H (both). */
int32_t nrt_zdecomp_getrf(nrt_z *a, int64_t m, int64_t n, int32_t *piv, int pivot);
void nrt_zdecomp_getrs(const nrt_z *lu, const int32_t *piv, int64_t n, int transpose, int conjugate, nrt_z *b,
                       int64_t nrhs);

/* Complex entry points. Work areas are counted in doubles (a double
 * complex takes two). */
nrt_status nrt_zdecomp_lu(const nrt_launch *l);        /* zlu.c: LU_* */
nrt_status nrt_zlinalg_cholesky_run(const nrt_launch *l); /* zcholesky.c: CHOLESKY, TRIANGULAR_SOLVE */
nrt_status nrt_zdecomp_qr(const nrt_launch *l);        /* zqr.c: GEQRF, ORGQR, ORMQR */
nrt_status nrt_zdecomp_eigh(const nrt_launch *l);      /* zeigh.c */
nrt_status nrt_zdecomp_svd(const nrt_launch *l);       /* zsvd.c */
nrt_status nrt_decomp_eig(const nrt_launch *l);        /* eig.c: EIG, real and complex input */

#endif
