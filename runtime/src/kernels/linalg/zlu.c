/* Complex LU with partial pivoting and what is built on it (ops LU_* with
 * complex operands): the structure of lu.c in double complex.
 *
 * The pivot is the entry of largest |re| + |im| (zgetrf's izamax), first
 * one on ties, so the pivots match the CPU's. Solves take op(A) = A, A^T,
 * conj(A) or A^H (LU_SOLVE's p0 bits), which covers left/right solves and
 * adjoints without conjugated copies in the glue. This loop nest is the
 * only path (and so the reference). */
#include <math.h>
#include <stdlib.h>

#include "kernels/linalg/zlinalg.h"

int32_t nrt_zdecomp_getrf(nrt_z *a, int64_t m, int64_t n, int32_t *piv, int pivot) {
  int64_t k = m < n ? m : n;
  int32_t info = 0;
  for (int64_t j = 0; j < k; j++) {
    int64_t p = j;
    if (pivot) {
      double best = nrt_z_abs1(a[j * n + j]);
      for (int64_t i = j + 1; i < m; i++) {
        double v = nrt_z_abs1(a[i * n + j]);
        if (v > best || (isnan(v) && !isnan(best))) {
          best = v;
          p = i;
        }
      }
    }
    piv[j] = (int32_t)(p + 1);
    if (a[p * n + j] != 0.0) {
      nrt_z_swap_rows(a, n, j, p);
      nrt_z d = a[j * n + j];
      for (int64_t i = j + 1; i < m; i++) a[i * n + j] /= d;
    } else if (info == 0) {
      info = (int32_t)(j + 1);
    }
    for (int64_t i = j + 1; i < m; i++) {
      nrt_z lij = a[i * n + j];
      if (lij == 0.0) continue;
      for (int64_t c = j + 1; c < n; c++) a[i * n + c] -= lij * a[j * n + c];
    }
  }
  return info;
}

void nrt_zdecomp_getrs(const nrt_z *lu, const int32_t *piv, int64_t n, int transpose, int conjugate, nrt_z *b,
                       int64_t nrhs) {
#define F(i, j) (conjugate ? conj(lu[(i) * n + (j)]) : lu[(i) * n + (j)])
  if (!transpose) { /* op(A) = P L U (conjugated factors for conj(A)): x = U^-1 L^-1 P^T b */
    for (int64_t j = 0; j < n; j++) nrt_z_swap_rows(b, nrhs, j, piv[j] - 1);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < i; j++) {
        nrt_z l = F(i, j);
        for (int64_t c = 0; c < nrhs; c++) b[i * nrhs + c] -= l * b[j * nrhs + c];
      }
    for (int64_t i = n - 1; i >= 0; i--) {
      for (int64_t j = i + 1; j < n; j++) {
        nrt_z u = F(i, j);
        for (int64_t c = 0; c < nrhs; c++) b[i * nrhs + c] -= u * b[j * nrhs + c];
      }
      nrt_z d = F(i, i);
      for (int64_t c = 0; c < nrhs; c++) b[i * nrhs + c] /= d;
    }
  } else { /* op(A) = U^T L^T P^T (or U^H L^H P^T): x = P L^-T U^-T b */
    for (int64_t i = 0; i < n; i++) {
      for (int64_t j = 0; j < i; j++) {
        nrt_z u = F(j, i);
        for (int64_t c = 0; c < nrhs; c++) b[i * nrhs + c] -= u * b[j * nrhs + c];
      }
      nrt_z d = F(i, i);
      for (int64_t c = 0; c < nrhs; c++) b[i * nrhs + c] /= d;
    }
    for (int64_t i = n - 1; i >= 0; i--)
      for (int64_t j = i + 1; j < n; j++) {
        nrt_z l = F(j, i);
        for (int64_t c = 0; c < nrhs; c++) b[i * nrhs + c] -= l * b[j * nrhs + c];
      }
    for (int64_t j = n - 1; j >= 0; j--) nrt_z_swap_rows(b, nrhs, j, piv[j] - 1);
  }
#undef F
}

static void load_pivots(const nrt_dmat *pv, int64_t b, int64_t k, int64_t n, int32_t *piv) {
  for (int64_t j = 0; j < k; j++) {
    int64_t p = nrt_dvec_ldi(pv, b, j);
    piv[j] = (int32_t)(p < 1 ? 1 : p > n ? n : p);
  }
}

static void lu_factor_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t m = l->sizes[1], n = l->sizes[2], k = m < n ? m : n;
  nrt_dmat LU = nrt_dmat_of(l, 0), P = nrt_dmat_of(l, 1), INFO = nrt_dmat_of(l, 2), A = nrt_dmat_of(l, 3);
  nrt_z *a = (nrt_z *)w;
  int32_t *piv = (int32_t *)(a + m * n);
  nrt_zmat_load(&A, b, m, n, a);
  int32_t info = nrt_zdecomp_getrf(a, m, n, piv, (int)l->params[0]);
  nrt_zmat_store(&LU, b, m, n, a);
  for (int64_t j = 0; j < k; j++) nrt_dvec_sti(&P, b, j, piv[j]);
  nrt_dvec_sti(&INFO, b, 0, info);
}

static void lu_solve_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t n = l->sizes[1], k = l->sizes[2];
  nrt_dmat X = nrt_dmat_of(l, 0), F = nrt_dmat_of(l, 1), P = nrt_dmat_of(l, 2), B = nrt_dmat_of(l, 3);
  nrt_z *lu = (nrt_z *)w, *x = lu + n * n;
  int32_t *piv = (int32_t *)(x + n * k);
  nrt_zmat_load(&F, b, n, n, lu);
  load_pivots(&P, b, n, n, piv);
  nrt_zmat_load(&B, b, n, k, x);
  nrt_zdecomp_getrs(lu, piv, n, (int)(l->params[0] & 1), (int)((l->params[0] >> 1) & 1), x, k);
  nrt_zmat_store(&X, b, n, k, x);
}

static void lu_inverse_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t n = l->sizes[1];
  nrt_dmat X = nrt_dmat_of(l, 0), LU = nrt_dmat_of(l, 1), P = nrt_dmat_of(l, 2);
  nrt_z *lu = (nrt_z *)w, *x = lu + n * n;
  int32_t *piv = (int32_t *)(x + n * n);
  nrt_zmat_load(&LU, b, n, n, lu);
  load_pivots(&P, b, n, n, piv);
  for (int64_t i = 0; i < n * n; i++) x[i] = 0.0;
  for (int64_t i = 0; i < n; i++) x[i * n + i] = 1.0;
  nrt_zdecomp_getrs(lu, piv, n, 0, 0, x, n);
  nrt_zmat_store(&X, b, n, n, x);
}

/* det = sign(P) prod d_j; slogdet: sign = sign(P) prod d_j / |d_j| (a unit
 * complex number, 0 when singular), logabsdet = sum log |d_j| (real). */
static void lu_det_one(const nrt_launch *l, int64_t b, double *w) {
  (void)w;
  int64_t n = l->sizes[1];
  int slog = l->params[0] != 0;
  nrt_dmat LU = nrt_dmat_of(l, slog ? 2 : 1), P = nrt_dmat_of(l, slog ? 3 : 2);
  nrt_z sign = 1.0, det = 1.0;
  double logabs = 0.0;
  int singular = 0;
  for (int64_t j = 0; j < n; j++) {
    nrt_z d = nrt_zmat_ld(&LU, b, j, j);
    if (nrt_dvec_ldi(&P, b, j) != j + 1) sign = -sign;
    if (slog) {
      double a = cabs(d);
      if (a == 0.0) singular = 1;
      else sign *= d / a;
      logabs += log(a);
    } else {
      det *= d;
    }
  }
  if (slog) {
    nrt_dmat S = nrt_dmat_of(l, 0), L = nrt_dmat_of(l, 1);
    if (singular) {
      sign = 0.0;
      logabs = -INFINITY;
    }
    nrt_zvec_st(&S, b, 0, sign);
    nrt_dvec_st(&L, b, 0, logabs);
  } else {
    nrt_dmat D = nrt_dmat_of(l, 0);
    nrt_zvec_st(&D, b, 0, sign * det);
  }
}

static void lu_unpack_one(const nrt_launch *l, int64_t b, double *w) {
  int64_t m = l->sizes[1], n = l->sizes[2], k = m < n ? m : n;
  nrt_dmat Pm = nrt_dmat_of(l, 0), L = nrt_dmat_of(l, 1), U = nrt_dmat_of(l, 2);
  nrt_dmat LU = nrt_dmat_of(l, 3), PV = nrt_dmat_of(l, 4);
  int32_t *piv = (int32_t *)w, *perm = piv + k;
  load_pivots(&PV, b, k, m, piv);
  for (int64_t i = 0; i < m; i++) perm[i] = (int32_t)i;
  for (int64_t j = 0; j < k; j++) {
    int32_t t = perm[j];
    perm[j] = perm[piv[j] - 1];
    perm[piv[j] - 1] = t;
  }
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < m; j++) nrt_zmat_st(&Pm, b, i, j, 0.0);
  for (int64_t i = 0; i < m; i++) nrt_zmat_st(&Pm, b, perm[i], i, 1.0);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < k; j++)
      nrt_zmat_st(&L, b, i, j, i > j ? nrt_zmat_ld(&LU, b, i, j) : i == j ? 1.0 : 0.0);
  for (int64_t i = 0; i < k; i++)
    for (int64_t j = 0; j < n; j++) nrt_zmat_st(&U, b, i, j, j >= i ? nrt_zmat_ld(&LU, b, i, j) : 0.0);
}

static nrt_status bad(const nrt_launch *l, const char *want) {
  return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s (complex): expected %s", nrt_op_name(l->op), want);
}

nrt_status nrt_zdecomp_lu(const nrt_launch *l) {
  const char *name = nrt_op_name(l->op);
  int64_t nb = l->sizes[0];
  switch ((int)l->op) {
  case NRT_OP(LU_FACTOR): {
    if (l->noutputs != 3 || l->ndim != 3) return bad(l, "3 outputs and sizes {batch, m, n}");
    int64_t m = l->sizes[1], n = l->sizes[2];
    return nrt_decomp_for_batches(l, name, nb, (size_t)(2 * m * n + (m < n ? m : n) / 2 + 1), lu_factor_one);
  }
  case NRT_OP(LU_SOLVE): {
    if (l->noutputs != 1 || l->ndim != 3) return bad(l, "1 output and sizes {batch, n, k}");
    int64_t n = l->sizes[1], k = l->sizes[2];
    if (n == 0 || k == 0) return NRT_SUCCESS;
    return nrt_decomp_for_batches(l, name, nb, (size_t)(2 * (n * n + n * k) + n / 2 + 1), lu_solve_one);
  }
  case NRT_OP(LU_INVERSE): {
    if (l->noutputs != 1 || l->ndim != 2) return bad(l, "1 output and sizes {batch, n}");
    int64_t n = l->sizes[1];
    if (n == 0) return NRT_SUCCESS;
    return nrt_decomp_for_batches(l, name, nb, (size_t)(4 * n * n + n / 2 + 1), lu_inverse_one);
  }
  case NRT_OP(LU_DET):
    if (l->noutputs != (l->params[0] ? 2 : 1) || l->ndim != 2)
      return bad(l, "1 output (det) or 2 (p0 = 1: sign, logabsdet) and sizes {batch, n}");
    return nrt_decomp_for_batches(l, name, nb, 1, lu_det_one);
  case NRT_OP(LU_UNPACK): {
    if (l->noutputs != 3 || l->ndim != 3) return bad(l, "3 outputs and sizes {batch, m, n}");
    int64_t m = l->sizes[1], n = l->sizes[2];
    if (m == 0) return NRT_SUCCESS;
    return nrt_decomp_for_batches(l, name, nb, (size_t)((m < n ? m : n) + m) / 2 + 1, lu_unpack_one);
  }
  default: return bad(l, "an LU op");
  }
}
