/* DECOMP kernels against straightforward double-precision checks computed
 * here: LU (P L U = A, solves, inverse, det), QR (Q R = A with LAPACK's
 * sign convention, ormqr against an explicit Q), SVD and eigh (reconstruction,
 * orthogonality, ordering), LDL (solve residual), matrix_exp (diagonal and
 * nilpotent matrices). Also non-contiguous operands, float16 storage, empty
 * launches and the reference-path switch (these kernels have one path). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common/common.h"
#include "nrt/ops/linalg.h"
#include "testing.h"

static uint64_t rng = 12345;
static double urand(void) { /* uniform in [-1, 1) */
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng >> 11) / (double)(1ull << 52) - 1.0;
}

/* Row-major [batch, r, c] operand; a vector of length n is (n, 1) and a
 * per-batch scalar (1, 1). */
static void opnd(nrt_launch *l, int i, void *p, nrt_dtype dt, int64_t r, int64_t c) {
  int64_t es = dt == NRT_FLOAT64 ? 8 : dt == NRT_FLOAT16 ? 2 : 4;
  l->operands[i].data = p;
  l->operands[i].dtype = dt;
  l->operands[i].strides[0] = r * c * es;
  l->operands[i].strides[1] = c * es;
  l->operands[i].strides[2] = es;
}

static void matmul(const double *a, const double *b, double *c, int m, int k, int n) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0;
      for (int t = 0; t < k; t++) s += a[i * k + t] * b[t * n + j];
      c[i * n + j] = s;
    }
}

#define B 3
#define N 5

static void test_lu(void) {
  float A[B * N * N], LU[B * N * N], X[B * N * 2], Bm[B * N * 2], INV[B * N * N], DET[B], P[B * N * N],
      L[B * N * N], U[B * N * N];
  int32_t piv[B * N], info[B];
  for (int i = 0; i < B * N * N; i++) A[i] = (float)urand();
  for (int i = 0; i < B * N * 2; i++) Bm[i] = (float)urand();
  A[2 * N * N + 0] = 0.f; /* a zero in the first pivot position forces an exchange */
  int64_t s3[] = {B, N, N};
  nrt_launch l = nrt_test_launch(NRT_OP(LU_FACTOR), NRT_FLOAT32, 3, s3, 3, 1);
  opnd(&l, 0, LU, NRT_FLOAT32, N, N);
  opnd(&l, 1, piv, NRT_INT32, N, 1);
  opnd(&l, 2, info, NRT_INT32, 1, 1);
  opnd(&l, 3, A, NRT_FLOAT32, N, N);
  l.params[0] = 1;
  CHECK_OK(nrt_launch_run(&l));
  l = nrt_test_launch(NRT_OP(LU_UNPACK), NRT_FLOAT32, 3, s3, 3, 2);
  opnd(&l, 0, P, NRT_FLOAT32, N, N);
  opnd(&l, 1, L, NRT_FLOAT32, N, N);
  opnd(&l, 2, U, NRT_FLOAT32, N, N);
  opnd(&l, 3, LU, NRT_FLOAT32, N, N);
  opnd(&l, 4, piv, NRT_INT32, N, 1);
  CHECK_OK(nrt_launch_run(&l));
  for (int b = 0; b < B; b++) {
    CHECK(info[b] == 0);
    double p[N * N], lo[N * N], up[N * N], t[N * N], r[N * N];
    for (int i = 0; i < N * N; i++) {
      p[i] = P[b * N * N + i];
      lo[i] = L[b * N * N + i];
      up[i] = U[b * N * N + i];
    }
    matmul(lo, up, t, N, N, N);
    matmul(p, t, r, N, N, N);
    for (int i = 0; i < N * N; i++) CHECK_NEAR(r[i], A[b * N * N + i], 1e-5);
    for (int j = 0; j < N; j++) { /* partial pivoting keeps |L| <= 1 */
      for (int i = j + 1; i < N; i++) CHECK(fabs(lo[i * N + j]) <= 1.0 + 1e-6);
    }
  }
  CHECK(piv[2 * N] != 1);
  /* Solve both ways and check the residuals in double. */
  int64_t s2[] = {B, N, 2};
  for (int trans = 0; trans < 2; trans++) {
    l = nrt_test_launch(NRT_OP(LU_SOLVE), NRT_FLOAT32, 3, s2, 1, 3);
    opnd(&l, 0, X, NRT_FLOAT32, N, 2);
    opnd(&l, 1, LU, NRT_FLOAT32, N, N);
    opnd(&l, 2, piv, NRT_INT32, N, 1);
    opnd(&l, 3, Bm, NRT_FLOAT32, N, 2);
    l.params[0] = trans;
    CHECK_OK(nrt_launch_run(&l));
    for (int b = 0; b < B; b++)
      for (int i = 0; i < N; i++)
        for (int c = 0; c < 2; c++) {
          double s = 0;
          for (int j = 0; j < N; j++)
            s += (trans ? A[b * N * N + j * N + i] : A[b * N * N + i * N + j]) * X[b * N * 2 + j * 2 + c];
          CHECK_NEAR(s, Bm[b * N * 2 + i * 2 + c], 1e-4);
        }
  }
  int64_t sn[] = {B, N};
  l = nrt_test_launch(NRT_OP(LU_INVERSE), NRT_FLOAT32, 2, sn, 1, 2);
  opnd(&l, 0, INV, NRT_FLOAT32, N, N);
  opnd(&l, 1, LU, NRT_FLOAT32, N, N);
  opnd(&l, 2, piv, NRT_INT32, N, 1);
  CHECK_OK(nrt_launch_run(&l));
  for (int b = 0; b < B; b++)
    for (int i = 0; i < N; i++)
      for (int j = 0; j < N; j++) {
        double s = 0;
        for (int t = 0; t < N; t++) s += A[b * N * N + i * N + t] * INV[b * N * N + t * N + j];
        CHECK_NEAR(s, i == j ? 1.0 : 0.0, 1e-4);
      }
  /* det against a cofactor-free reference: Gaussian elimination in double. */
  l = nrt_test_launch(NRT_OP(LU_DET), NRT_FLOAT32, 2, sn, 1, 2);
  opnd(&l, 0, DET, NRT_FLOAT32, 1, 1);
  opnd(&l, 1, LU, NRT_FLOAT32, N, N);
  opnd(&l, 2, piv, NRT_INT32, N, 1);
  CHECK_OK(nrt_launch_run(&l));
  for (int b = 0; b < B; b++) {
    double a[N * N], det = 1;
    for (int i = 0; i < N * N; i++) a[i] = A[b * N * N + i];
    for (int j = 0; j < N; j++) {
      int p = j;
      for (int i = j + 1; i < N; i++)
        if (fabs(a[i * N + j]) > fabs(a[p * N + j])) p = i;
      if (p != j) {
        det = -det;
        for (int c = 0; c < N; c++) {
          double t = a[j * N + c];
          a[j * N + c] = a[p * N + c];
          a[p * N + c] = t;
        }
      }
      det *= a[j * N + j];
      for (int i = j + 1; i < N; i++) {
        double f = a[i * N + j] / a[j * N + j];
        for (int c = j; c < N; c++) a[i * N + c] -= f * a[j * N + c];
      }
    }
    CHECK_NEAR(DET[b], det, 1e-5);
  }
}

static void test_lu_singular_and_empty(void) {
  float A[9] = {1, 2, 3, 2, 4, 6, 1, 1, 1}, LU[9];
  int32_t piv[3], info = -1;
  int64_t s3[] = {1, 3, 3};
  nrt_launch l = nrt_test_launch(NRT_OP(LU_FACTOR), NRT_FLOAT32, 3, s3, 3, 1);
  opnd(&l, 0, LU, NRT_FLOAT32, 3, 3);
  opnd(&l, 1, piv, NRT_INT32, 3, 1);
  opnd(&l, 2, &info, NRT_INT32, 1, 1);
  opnd(&l, 3, A, NRT_FLOAT32, 3, 3);
  l.params[0] = 1;
  CHECK_OK(nrt_launch_run(&l));
  CHECK(info == 3); /* rank 2: the last pivot is exactly zero */
  int64_t s0[] = {0, 3, 3};
  l.sizes[0] = s0[0];
  for (int i = 0; i < 4; i++) l.operands[i].data = NULL;
  CHECK_OK(nrt_launch_run(&l)); /* empty: nothing touched */
}

/* QR: R upper with LAPACK's signs (beta = -sign(alpha) ||x||), Q R = A. */
static void test_qr(void) {
  enum { M = 6, C = 4 };
  double A[M * C];
  float Af[M * C], QR[M * C], tau[C], Q[M * C], Qfull[M * M], Cm[M * 3], Out[M * 3];
  for (int i = 0; i < M * C; i++) Af[i] = (float)(A[i] = (float)urand());
  int64_t s[] = {1, M, C};
  nrt_launch l = nrt_test_launch(NRT_OP(GEQRF), NRT_FLOAT32, 3, s, 2, 1);
  opnd(&l, 0, QR, NRT_FLOAT32, M, C);
  opnd(&l, 1, tau, NRT_FLOAT32, C, 1);
  opnd(&l, 2, Af, NRT_FLOAT32, M, C);
  CHECK_OK(nrt_launch_run(&l));
  CHECK(QR[0] * Af[0] < 0); /* R(0,0) has the opposite sign of A(0,0) */
  l = nrt_test_launch(NRT_OP(ORGQR), NRT_FLOAT32, 3, s, 1, 2);
  opnd(&l, 0, Q, NRT_FLOAT32, M, C);
  opnd(&l, 1, QR, NRT_FLOAT32, M, C);
  opnd(&l, 2, tau, NRT_FLOAT32, C, 1);
  l.params[0] = C;
  CHECK_OK(nrt_launch_run(&l));
  for (int i = 0; i < M; i++)
    for (int j = 0; j < C; j++) {
      double r = 0;
      for (int t = 0; t <= j; t++) r += Q[i * C + t] * QR[t * C + j];
      CHECK_NEAR(r, A[i * C + j], 1e-5);
    }
  int64_t sf[] = {1, M, M};
  l = nrt_test_launch(NRT_OP(ORGQR), NRT_FLOAT32, 3, sf, 1, 2);
  opnd(&l, 0, Qfull, NRT_FLOAT32, M, M);
  opnd(&l, 1, QR, NRT_FLOAT32, M, C); /* only the first C columns are read */
  opnd(&l, 2, tau, NRT_FLOAT32, C, 1);
  l.params[0] = C;
  CHECK_OK(nrt_launch_run(&l));
  for (int i = 0; i < M; i++)
    for (int j = 0; j < M; j++) {
      double d = 0;
      for (int t = 0; t < M; t++) d += Qfull[t * M + i] * Qfull[t * M + j];
      CHECK_NEAR(d, i == j, 1e-5);
    }
  /* ormqr(left, transpose) = Q^T C against the explicit full Q. */
  for (int i = 0; i < M * 3; i++) Cm[i] = (float)urand();
  int64_t so[] = {1, M, 3};
  l = nrt_test_launch(NRT_OP(ORMQR), NRT_FLOAT32, 3, so, 1, 3);
  opnd(&l, 0, Out, NRT_FLOAT32, M, 3);
  opnd(&l, 1, QR, NRT_FLOAT32, M, C);
  opnd(&l, 2, tau, NRT_FLOAT32, C, 1);
  opnd(&l, 3, Cm, NRT_FLOAT32, M, 3);
  l.params[0] = 1;
  l.params[1] = 1;
  l.params[2] = C;
  CHECK_OK(nrt_launch_run(&l));
  for (int i = 0; i < M; i++)
    for (int j = 0; j < 3; j++) {
      double r = 0;
      for (int t = 0; t < M; t++) r += Qfull[t * M + i] * Cm[t * 3 + j];
      CHECK_NEAR(Out[i * 3 + j], r, 1e-5);
    }
}

/* SVD of tall and wide matrices (the wide one read through transposed
 * strides), full and reduced. */
static void check_svd(int m, int n, int full, int transposed_input) {
  int k = m < n ? m : n, uc = full ? m : k, vr = full ? n : k;
  float *A = malloc(sizeof(float) * m * n), *S = malloc(sizeof(float) * k), *U = malloc(sizeof(float) * m * uc),
        *VH = malloc(sizeof(float) * vr * n);
  for (int i = 0; i < m * n; i++) A[i] = (float)urand();
  int64_t s[] = {1, m, n};
  nrt_launch l = nrt_test_launch(NRT_OP(SVD), NRT_FLOAT32, 3, s, 3, 1);
  opnd(&l, 0, S, NRT_FLOAT32, k, 1);
  opnd(&l, 1, U, NRT_FLOAT32, m, uc);
  opnd(&l, 2, VH, NRT_FLOAT32, vr, n);
  opnd(&l, 3, A, NRT_FLOAT32, m, n);
  if (transposed_input) { /* A stored column-major: element (i, j) at j * m + i */
    l.operands[3].strides[1] = 4;
    l.operands[3].strides[2] = 4 * (int64_t)m;
  }
  l.params[0] = full;
  CHECK_OK(nrt_launch_run(&l));
  for (int j = 1; j < k; j++) CHECK(S[j - 1] >= S[j]);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double r = 0;
      for (int t = 0; t < k; t++) r += U[i * uc + t] * S[t] * VH[t * n + j];
      double a = transposed_input ? A[j * m + i] : A[i * n + j];
      CHECK_NEAR(r, a, 1e-5);
    }
  for (int i = 0; i < uc; i++)
    for (int j = 0; j < uc; j++) {
      double d = 0;
      for (int t = 0; t < m; t++) d += U[t * uc + i] * U[t * uc + j];
      CHECK_NEAR(d, i == j, 1e-5);
    }
  for (int i = 0; i < vr; i++)
    for (int j = 0; j < vr; j++) {
      double d = 0;
      for (int t = 0; t < n; t++) d += VH[i * n + t] * VH[j * n + t];
      CHECK_NEAR(d, i == j, 1e-5);
    }
  free(A);
  free(S);
  free(U);
  free(VH);
}

static void test_svd(void) {
  check_svd(6, 4, 0, 0);
  check_svd(6, 4, 1, 0);
  check_svd(3, 7, 1, 0);
  check_svd(3, 7, 0, 1);
  /* Rank-deficient: repeated column; the zero singular value's u is completed. */
  float A[8] = {1, 1, 2, 2, 3, 3, 4, 4}, S[2], U[16], VH[4];
  int64_t s[] = {1, 4, 2};
  nrt_launch l = nrt_test_launch(NRT_OP(SVD), NRT_FLOAT32, 3, s, 3, 1);
  opnd(&l, 0, S, NRT_FLOAT32, 2, 1);
  opnd(&l, 1, U, NRT_FLOAT32, 4, 4);
  opnd(&l, 2, VH, NRT_FLOAT32, 2, 2);
  opnd(&l, 3, A, NRT_FLOAT32, 4, 2);
  l.params[0] = 1;
  CHECK_OK(nrt_launch_run(&l));
  CHECK_NEAR(S[0], sqrt(60.0), 1e-6);
  CHECK(fabs(S[1]) < 1e-6);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      double d = 0;
      for (int t = 0; t < 4; t++) d += U[t * 4 + i] * U[t * 4 + j];
      CHECK_NEAR(d, i == j, 1e-5);
    }
}

static void test_eigh(void) {
  float A[N * N], W[N], V[N * N];
  for (int i = 0; i < N; i++)
    for (int j = 0; j <= i; j++) A[i * N + j] = A[j * N + i] = (float)urand();
  for (int upper = 0; upper < 2; upper++) {
    float Ab[N * N];
    memcpy(Ab, A, sizeof A);
    for (int i = 0; i < N; i++) /* garbage in the triangle that must not be read */
      for (int j = 0; j < N; j++)
        if (upper ? j < i : j > i) Ab[i * N + j] = 99.f;
    int64_t s[] = {1, N};
    nrt_launch l = nrt_test_launch(NRT_OP(EIGH), NRT_FLOAT32, 2, s, 2, 1);
    opnd(&l, 0, W, NRT_FLOAT32, N, 1);
    opnd(&l, 1, V, NRT_FLOAT32, N, N);
    opnd(&l, 2, Ab, NRT_FLOAT32, N, N);
    l.params[0] = upper;
    CHECK_OK(nrt_launch_run(&l));
    for (int j = 1; j < N; j++) CHECK(W[j - 1] <= W[j]);
    for (int i = 0; i < N; i++)
      for (int j = 0; j < N; j++) {
        double av = 0;
        for (int t = 0; t < N; t++) av += A[i * N + t] * V[t * N + j];
        CHECK_NEAR(av, W[j] * V[i * N + j], 1e-5);
      }
  }
}

static void test_ldl(void) {
  /* A symmetric indefinite matrix with a zero diagonal start forces a 2x2 pivot. */
  float A[N * N], LD[N * N], X[N], Bv[N];
  int32_t piv[N], info = -1;
  for (int i = 0; i < N; i++)
    for (int j = 0; j <= i; j++) A[i * N + j] = A[j * N + i] = (float)urand();
  A[0] = 0.f;
  A[N + 1] = 0.f;
  A[1] = A[N] = 2.f; /* the column's largest entry, off the diagonal */
  for (int i = 0; i < N; i++) Bv[i] = (float)urand();
  int64_t s[] = {1, N};
  nrt_launch l = nrt_test_launch(NRT_OP(LDL_FACTOR), NRT_FLOAT32, 2, s, 3, 1);
  opnd(&l, 0, LD, NRT_FLOAT32, N, N);
  opnd(&l, 1, piv, NRT_INT32, N, 1);
  opnd(&l, 2, &info, NRT_INT32, 1, 1);
  opnd(&l, 3, A, NRT_FLOAT32, N, N);
  CHECK_OK(nrt_launch_run(&l));
  CHECK(info == 0);
  CHECK(piv[0] < 0 && piv[1] == piv[0]);
  for (int i = 0; i < N; i++)
    for (int j = i + 1; j < N; j++) CHECK(LD[i * N + j] == 0.f);
  int64_t s3[] = {1, N, 1};
  l = nrt_test_launch(NRT_OP(LDL_SOLVE), NRT_FLOAT32, 3, s3, 1, 3);
  opnd(&l, 0, X, NRT_FLOAT32, N, 1);
  opnd(&l, 1, LD, NRT_FLOAT32, N, N);
  opnd(&l, 2, piv, NRT_INT32, N, 1);
  opnd(&l, 3, Bv, NRT_FLOAT32, N, 1);
  CHECK_OK(nrt_launch_run(&l));
  for (int i = 0; i < N; i++) {
    double r = 0;
    for (int j = 0; j < N; j++) r += A[i * N + j] * X[j];
    CHECK_NEAR(r, Bv[i], 1e-4);
  }
}

static void test_matrix_exp(void) {
  /* exp(diag(d)) = diag(exp(d)); exp of the nilpotent [[0, a], [0, 0]] is
   * [[1, a], [0, 1]]; exp of a rotation generator is the rotation. Large
   * norms exercise the squaring. */
  float D[9] = {3.f, 0, 0, 0, -2.f, 0, 0, 0, 7.5f}, E[9];
  int64_t s[] = {1, 3};
  nrt_launch l = nrt_test_launch(NRT_OP(MATRIX_EXP), NRT_FLOAT32, 2, s, 1, 1);
  opnd(&l, 0, E, NRT_FLOAT32, 3, 3);
  opnd(&l, 1, D, NRT_FLOAT32, 3, 3);
  CHECK_OK(nrt_launch_run(&l));
  CHECK_NEAR(E[0], exp(3.0), 1e-6);
  CHECK_NEAR(E[4], exp(-2.0), 1e-6);
  CHECK_NEAR(E[8], exp(7.5), 1e-6);
  CHECK(E[1] == 0.f && E[3] == 0.f);
  float R[4] = {0, -5.f, 5.f, 0}, ER[4];
  int64_t s2[] = {1, 2};
  l = nrt_test_launch(NRT_OP(MATRIX_EXP), NRT_FLOAT32, 2, s2, 1, 1);
  opnd(&l, 0, ER, NRT_FLOAT32, 2, 2);
  opnd(&l, 1, R, NRT_FLOAT32, 2, 2);
  CHECK_OK(nrt_launch_run(&l));
  CHECK_NEAR(ER[0], cos(5.0), 1e-5);
  CHECK_NEAR(ER[1], -sin(5.0), 1e-5);
  /* float16 storage: rounded on store. */
  uint16_t H[4], EH[4];
  float nil[4] = {0, 3.f, 0, 0};
  for (int i = 0; i < 4; i++) H[i] = nrt_k_f32_to_f16(nil[i]);
  opnd(&l, 0, EH, NRT_FLOAT16, 2, 2);
  opnd(&l, 1, H, NRT_FLOAT16, 2, 2);
  l.compute_dtype = NRT_FLOAT16;
  CHECK_OK(nrt_launch_run(&l));
  CHECK(nrt_k_f16_to_f32(EH[0]) == 1.f && nrt_k_f16_to_f32(EH[1]) == 3.f && nrt_k_f16_to_f32(EH[2]) == 0.f);
}

int main(void) {
  CHECK_OK(nrt_init());
  for (int ref = 0; ref < 2; ref++) { /* one path: results must not depend on the switch */
    nrt_kernels_set_reference(ref != 0);
    RUN_TEST(test_lu);
    RUN_TEST(test_lu_singular_and_empty);
    RUN_TEST(test_qr);
    RUN_TEST(test_svd);
    RUN_TEST(test_eigh);
    RUN_TEST(test_ldl);
    RUN_TEST(test_matrix_exp);
  }
  nrt_kernels_set_reference(false);
  return TEST_RESULT();
}
