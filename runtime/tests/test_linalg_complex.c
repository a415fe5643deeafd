/* LINALG kernels on complex operands, against checks computed here in
 * double complex: LU (P L U = A, the four solve flags, inverse, det and
 * slogdet against elimination), Cholesky (L L^H = A, upper too), triangular
 * solves, QR (Q R = A, R's diagonal real with LAPACK's sign, Q unitary,
 * ormqr against the explicit Q), Hermitian eigh and SVD (reconstruction,
 * unitarity, ordering), and EIG for real input (conjugate pairs, positive
 * imaginary part first) and complex input (A V = V diag(w), unit vectors
 * with a real largest entry), on a triangular matrix too (balancing's
 * permutations). complex64 and complex128 storage; the kernels have one
 * path, so results must not depend on the reference switch. */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common/common.h"
#include "nrt/ops/linalg.h"
#include "testing.h"

typedef double complex zc;

static uint64_t rng = 987654321;
static double urand(void) {
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng >> 11) / (double)(1ull << 52) - 1.0;
}
static zc zrand(void) {
  double re = urand();
  return CMPLX(re, urand());
}

static size_t esize(nrt_dtype dt) {
  return dt == NRT_COMPLEX128 ? 16 : dt == NRT_COMPLEX64 || dt == NRT_FLOAT64 ? 8 : 4;
}

/* Row-major [batch, r, c] operand (a vector of length n is (n, 1)). */
static void opnd(nrt_launch *l, int i, void *p, nrt_dtype dt, int64_t r, int64_t c) {
  int64_t es = (int64_t)esize(dt);
  l->operands[i].data = p;
  l->operands[i].dtype = dt;
  l->operands[i].strides[0] = r * c * es;
  l->operands[i].strides[1] = c * es;
  l->operands[i].strides[2] = es;
}

/* Buffers in the test's dtype, read and written as double complex. */
typedef struct buf {
  void *p;
  nrt_dtype dt;
  size_t n;
} buf;

static buf mk(nrt_dtype dt, size_t n) {
  buf b = {calloc(n ? n : 1, esize(dt)), dt, n};
  return b;
}
static zc get(const buf *b, size_t i) {
  switch (b->dt) {
  case NRT_COMPLEX128: return CMPLX(((double *)b->p)[2 * i], ((double *)b->p)[2 * i + 1]);
  case NRT_COMPLEX64: return CMPLX(((float *)b->p)[2 * i], ((float *)b->p)[2 * i + 1]);
  case NRT_FLOAT64: return ((double *)b->p)[i];
  default: return ((float *)b->p)[i];
  }
}
static void set(buf *b, size_t i, zc v) {
  switch (b->dt) {
  case NRT_COMPLEX128:
    ((double *)b->p)[2 * i] = creal(v);
    ((double *)b->p)[2 * i + 1] = cimag(v);
    break;
  case NRT_COMPLEX64:
    ((float *)b->p)[2 * i] = (float)creal(v);
    ((float *)b->p)[2 * i + 1] = (float)cimag(v);
    break;
  case NRT_FLOAT64: ((double *)b->p)[i] = creal(v); break;
  default: ((float *)b->p)[i] = (float)creal(v); break;
  }
}
static void rel(buf *b) { free(b->p); }

/* Stored precision: float-backed storage holds ~1e-7 relative. */
static double tol_of(nrt_dtype dt) { return dt == NRT_COMPLEX128 || dt == NRT_FLOAT64 ? 1e-11 : 2e-5; }
static nrt_dtype real_of(nrt_dtype dt) { return dt == NRT_COMPLEX128 ? NRT_FLOAT64 : NRT_FLOAT32; }

#define CHECK_ZNEAR(a, b, tol)                                                                                     \
  do {                                                                                                            \
    zc za_ = (a), zb_ = (b);                                                                                      \
    if (!(cabs(za_ - zb_) <= (tol) * (1.0 + cabs(zb_)))) {                                                        \
      fprintf(stderr, "%s:%d: %s = %g%+gi, want %g%+gi\n", __FILE__, __LINE__, #a, creal(za_), cimag(za_),        \
              creal(zb_), cimag(zb_));                                                                            \
      nrt_test_failures++;                                                                                        \
    }                                                                                                             \
  } while (0)

enum { BT = 2, N = 5 };

static void test_lu(nrt_dtype dt) {
  double tol = tol_of(dt) * 10;
  buf A = mk(dt, BT * N * N), LU = mk(dt, BT * N * N), P = mk(dt, BT * N * N), L = mk(dt, BT * N * N),
      U = mk(dt, BT * N * N), Bm = mk(dt, BT * N * 2), X = mk(dt, BT * N * 2), INV = mk(dt, BT * N * N),
      DET = mk(dt, BT), SG = mk(dt, BT), LAD = mk(real_of(dt), BT);
  int32_t piv[BT * N], info[BT];
  for (size_t i = 0; i < A.n; i++) set(&A, i, zrand());
  for (size_t i = 0; i < Bm.n; i++) set(&Bm, i, zrand());
  set(&A, N * N, 0.0); /* batch 1: zero first pivot forces an exchange */
  int64_t s3[] = {BT, N, N};
  nrt_launch l = nrt_test_launch(NRT_OP(LU_FACTOR), dt, 3, s3, 3, 1);
  opnd(&l, 0, LU.p, dt, N, N);
  opnd(&l, 1, piv, NRT_INT32, N, 1);
  opnd(&l, 2, info, NRT_INT32, 1, 1);
  opnd(&l, 3, A.p, dt, N, N);
  l.params[0] = 1;
  CHECK_OK(nrt_launch_run(&l));
  CHECK(info[0] == 0 && info[1] == 0 && piv[N] != 1);
  l = nrt_test_launch(NRT_OP(LU_UNPACK), dt, 3, s3, 3, 2);
  opnd(&l, 0, P.p, dt, N, N);
  opnd(&l, 1, L.p, dt, N, N);
  opnd(&l, 2, U.p, dt, N, N);
  opnd(&l, 3, LU.p, dt, N, N);
  opnd(&l, 4, piv, NRT_INT32, N, 1);
  CHECK_OK(nrt_launch_run(&l));
  for (int b = 0; b < BT; b++) {
    size_t o = (size_t)b * N * N;
    for (int i = 0; i < N; i++)
      for (int j = 0; j < N; j++) {
        zc r = 0;
        for (int k = 0; k < N; k++)
          for (int t = 0; t < N; t++) r += get(&P, o + i * N + k) * get(&L, o + k * N + t) * get(&U, o + t * N + j);
        CHECK_ZNEAR(r, get(&A, o + i * N + j), tol);
      }
    for (int j = 0; j < N; j++) /* cabs1 pivoting keeps |L| at most sqrt(2) */
      for (int i = j + 1; i < N; i++) CHECK(cabs(get(&L, o + i * N + j)) <= sqrt(2.0) + 1e-6);
  }
  /* op(A) X = B for A, A^T, conj(A), A^H. */
  int64_t s2[] = {BT, N, 2};
  for (int flags = 0; flags < 4; flags++) {
    l = nrt_test_launch(NRT_OP(LU_SOLVE), dt, 3, s2, 1, 3);
    opnd(&l, 0, X.p, dt, N, 2);
    opnd(&l, 1, LU.p, dt, N, N);
    opnd(&l, 2, piv, NRT_INT32, N, 1);
    opnd(&l, 3, Bm.p, dt, N, 2);
    l.params[0] = flags;
    CHECK_OK(nrt_launch_run(&l));
    for (int b = 0; b < BT; b++)
      for (int i = 0; i < N; i++)
        for (int c = 0; c < 2; c++) {
          zc s = 0;
          for (int j = 0; j < N; j++) {
            zc a = (flags & 1) ? get(&A, b * N * N + j * N + i) : get(&A, b * N * N + i * N + j);
            if (flags & 2) a = conj(a);
            s += a * get(&X, b * N * 2 + j * 2 + c);
          }
          CHECK_ZNEAR(s, get(&Bm, b * N * 2 + i * 2 + c), tol * 10);
        }
  }
  int64_t sn[] = {BT, N};
  l = nrt_test_launch(NRT_OP(LU_INVERSE), dt, 2, sn, 1, 2);
  opnd(&l, 0, INV.p, dt, N, N);
  opnd(&l, 1, LU.p, dt, N, N);
  opnd(&l, 2, piv, NRT_INT32, N, 1);
  CHECK_OK(nrt_launch_run(&l));
  for (int b = 0; b < BT; b++)
    for (int i = 0; i < N; i++)
      for (int j = 0; j < N; j++) {
        zc s = 0;
        for (int t = 0; t < N; t++) s += get(&A, b * N * N + i * N + t) * get(&INV, b * N * N + t * N + j);
        CHECK_ZNEAR(s, i == j ? 1.0 : 0.0, tol * 10);
      }
  l = nrt_test_launch(NRT_OP(LU_DET), dt, 2, sn, 1, 2);
  opnd(&l, 0, DET.p, dt, 1, 1);
  opnd(&l, 1, LU.p, dt, N, N);
  opnd(&l, 2, piv, NRT_INT32, N, 1);
  CHECK_OK(nrt_launch_run(&l));
  l = nrt_test_launch(NRT_OP(LU_DET), dt, 2, sn, 2, 2);
  opnd(&l, 0, SG.p, dt, 1, 1);
  opnd(&l, 1, LAD.p, real_of(dt), 1, 1);
  opnd(&l, 2, LU.p, dt, N, N);
  opnd(&l, 3, piv, NRT_INT32, N, 1);
  l.params[0] = 1;
  CHECK_OK(nrt_launch_run(&l));
  for (int b = 0; b < BT; b++) { /* elimination with partial pivoting by modulus, in double complex */
    zc a[N * N], det = 1;
    for (int i = 0; i < N * N; i++) a[i] = get(&A, b * N * N + i);
    for (int j = 0; j < N; j++) {
      int p = j;
      for (int i = j + 1; i < N; i++)
        if (cabs(a[i * N + j]) > cabs(a[p * N + j])) p = i;
      if (p != j) {
        det = -det;
        for (int c = 0; c < N; c++) {
          zc t = a[j * N + c];
          a[j * N + c] = a[p * N + c];
          a[p * N + c] = t;
        }
      }
      det *= a[j * N + j];
      for (int i = j + 1; i < N; i++) {
        zc f = a[i * N + j] / a[j * N + j];
        for (int c = j; c < N; c++) a[i * N + c] -= f * a[j * N + c];
      }
    }
    CHECK_ZNEAR(get(&DET, b), det, tol);
    CHECK_ZNEAR(get(&SG, b), det / cabs(det), tol);
    CHECK_NEAR(creal(get(&LAD, b)), log(cabs(det)), tol);
  }
  /* A singular matrix: info names the zero pivot; slogdet gives 0, -inf. */
  buf S = mk(dt, 4);
  set(&S, 0, CMPLX(1, 1));
  set(&S, 1, CMPLX(2, -1));
  set(&S, 2, CMPLX(2, 2));
  set(&S, 3, CMPLX(4, -2));
  int64_t s22[] = {1, 2, 2}, s1[] = {1, 2};
  l = nrt_test_launch(NRT_OP(LU_FACTOR), dt, 3, s22, 3, 1);
  opnd(&l, 0, LU.p, dt, 2, 2);
  opnd(&l, 1, piv, NRT_INT32, 2, 1);
  opnd(&l, 2, info, NRT_INT32, 1, 1);
  opnd(&l, 3, S.p, dt, 2, 2);
  l.params[0] = 1;
  CHECK_OK(nrt_launch_run(&l));
  CHECK(info[0] == 2);
  l = nrt_test_launch(NRT_OP(LU_DET), dt, 2, s1, 2, 2);
  opnd(&l, 0, SG.p, dt, 1, 1);
  opnd(&l, 1, LAD.p, real_of(dt), 1, 1);
  opnd(&l, 2, LU.p, dt, 2, 2);
  opnd(&l, 3, piv, NRT_INT32, 2, 1);
  l.params[0] = 1;
  CHECK_OK(nrt_launch_run(&l));
  CHECK(get(&SG, 0) == 0.0 && isinf(creal(get(&LAD, 0))) && creal(get(&LAD, 0)) < 0);
  buf *all[] = {&A, &LU, &P, &L, &U, &Bm, &X, &INV, &DET, &SG, &LAD, &S};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) rel(all[i]);
}

/* Hermitian positive-definite M = X X^H + N I. */
static void hpd(buf *A, int b) {
  zc x[N * N];
  for (int i = 0; i < N * N; i++) x[i] = zrand();
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      zc s = i == j ? N : 0;
      for (int t = 0; t < N; t++) s += x[i * N + t] * conj(x[j * N + t]);
      set(A, (size_t)b * N * N + i * N + j, s);
    }
}

static void test_cholesky_trsm(nrt_dtype dt) {
  double tol = tol_of(dt) * 10;
  buf A = mk(dt, BT * N * N), L = mk(dt, BT * N * N), Bm = mk(dt, BT * N * 3), X = mk(dt, BT * N * 3);
  int32_t info[BT];
  for (int b = 0; b < BT; b++) hpd(&A, b);
  int64_t sn[] = {BT, N};
  for (int upper = 0; upper < 2; upper++) {
    nrt_launch l = nrt_test_launch(NRT_OP(CHOLESKY), dt, 2, sn, 2, 1);
    opnd(&l, 0, L.p, dt, N, N);
    opnd(&l, 1, info, NRT_INT32, 1, 1);
    opnd(&l, 2, A.p, dt, N, N);
    l.params[0] = upper;
    CHECK_OK(nrt_launch_run(&l));
    for (int b = 0; b < BT; b++) {
      CHECK(info[b] == 0);
      size_t o = (size_t)b * N * N;
      for (int i = 0; i < N; i++) {
        CHECK(cimag(get(&L, o + i * N + i)) == 0.0 && creal(get(&L, o + i * N + i)) > 0);
        for (int j = 0; j < N; j++) {
          zc s = 0; /* lower: L L^H; upper: U^H U */
          for (int t = 0; t < N; t++)
            s += upper ? conj(get(&L, o + t * N + i)) * get(&L, o + t * N + j)
                       : get(&L, o + i * N + t) * conj(get(&L, o + j * N + t));
          CHECK_ZNEAR(s, get(&A, o + i * N + j), tol);
          if (upper ? j < i : j > i) CHECK(get(&L, o + i * N + j) == 0.0);
        }
      }
    }
  }
  /* Triangular solves with the upper factor U: left (U X = B) and right
   * (X U = B on a 3 x N right-hand side). */
  for (size_t i = 0; i < Bm.n; i++) set(&Bm, i, zrand());
  for (int left = 0; left < 2; left++) {
    int64_t m = left ? N : 3, k = left ? 3 : N, s3[] = {BT, m, k};
    nrt_launch l = nrt_test_launch(NRT_OP(TRIANGULAR_SOLVE), dt, 3, s3, 1, 2);
    opnd(&l, 0, X.p, dt, m, k);
    opnd(&l, 1, L.p, dt, N, N);
    opnd(&l, 2, Bm.p, dt, m, k);
    l.params[0] = 1;
    l.params[1] = left;
    CHECK_OK(nrt_launch_run(&l));
    for (int b = 0; b < BT; b++)
      for (int i = 0; i < m; i++)
        for (int j = 0; j < k; j++) {
          zc s = 0;
          for (int t = 0; t < N; t++)
            s += left ? get(&L, b * N * N + i * N + t) * get(&X, b * m * k + t * k + j)
                      : get(&X, b * m * k + i * k + t) * get(&L, b * N * N + t * N + j);
          CHECK_ZNEAR(s, get(&Bm, b * m * k + i * k + j), tol * 10);
        }
  }
  /* Not positive-definite: info is the failing minor. */
  set(&A, 2 * N + 2, -100.0);
  nrt_launch l = nrt_test_launch(NRT_OP(CHOLESKY), dt, 2, sn, 2, 1);
  opnd(&l, 0, L.p, dt, N, N);
  opnd(&l, 1, info, NRT_INT32, 1, 1);
  opnd(&l, 2, A.p, dt, N, N);
  CHECK_OK(nrt_launch_run(&l));
  CHECK(info[0] == 3 && info[1] == 0);
  rel(&A);
  rel(&L);
  rel(&Bm);
  rel(&X);
}

static void test_qr(nrt_dtype dt) {
  enum { M = 6, C = 4 };
  double tol = tol_of(dt) * 10;
  buf A = mk(dt, M * C), QR = mk(dt, M * C), T = mk(dt, C), Q = mk(dt, M * M), Cm = mk(dt, M * 2),
      O = mk(dt, M * 2);
  for (size_t i = 0; i < A.n; i++) set(&A, i, zrand());
  int64_t s[] = {1, M, C};
  nrt_launch l = nrt_test_launch(NRT_OP(GEQRF), dt, 3, s, 2, 1);
  opnd(&l, 0, QR.p, dt, M, C);
  opnd(&l, 1, T.p, dt, C, 1);
  opnd(&l, 2, A.p, dt, M, C);
  CHECK_OK(nrt_launch_run(&l));
  for (int j = 0; j < C; j++) CHECK(cimag(get(&QR, j * C + j)) == 0.0); /* beta is real */
  CHECK(creal(get(&QR, 0)) * creal(get(&A, 0)) < 0); /* -sign(re alpha) */
  int64_t sf[] = {1, M, M};
  l = nrt_test_launch(NRT_OP(ORGQR), dt, 3, sf, 1, 2);
  opnd(&l, 0, Q.p, dt, M, M);
  opnd(&l, 1, QR.p, dt, M, C);
  opnd(&l, 2, T.p, dt, C, 1);
  l.operands[1].strides[1] = C * (int64_t)esize(dt);
  l.params[0] = C;
  CHECK_OK(nrt_launch_run(&l));
  for (int i = 0; i < M; i++)
    for (int j = 0; j < C; j++) {
      zc r = 0;
      for (int t = 0; t <= j; t++) r += get(&Q, i * M + t) * get(&QR, t * C + j);
      CHECK_ZNEAR(r, get(&A, i * C + j), tol);
    }
  for (int i = 0; i < M; i++)
    for (int j = 0; j < M; j++) {
      zc d = 0;
      for (int t = 0; t < M; t++) d += conj(get(&Q, t * M + i)) * get(&Q, t * M + j);
      CHECK_ZNEAR(d, i == j ? 1.0 : 0.0, tol);
    }
  /* ormqr: Q^H C (left, transpose) and C Q (right) against the explicit Q. */
  for (size_t i = 0; i < Cm.n; i++) set(&Cm, i, zrand());
  for (int left = 0; left < 2; left++) {
    int64_t m = left ? M : 2, n = left ? 2 : M, so[] = {1, m, n};
    l = nrt_test_launch(NRT_OP(ORMQR), dt, 3, so, 1, 3);
    opnd(&l, 0, O.p, dt, m, n);
    opnd(&l, 1, QR.p, dt, M, C);
    opnd(&l, 2, T.p, dt, C, 1);
    opnd(&l, 3, Cm.p, dt, m, n);
    l.params[0] = left;
    l.params[1] = left;
    l.params[2] = C;
    CHECK_OK(nrt_launch_run(&l));
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) {
        zc r = 0;
        for (int t = 0; t < M; t++)
          r += left ? conj(get(&Q, t * M + i)) * get(&Cm, t * n + j) : get(&Cm, i * n + t) * get(&Q, t * M + j);
        CHECK_ZNEAR(get(&O, i * n + j), r, tol);
      }
  }
  buf *all[] = {&A, &QR, &T, &Q, &Cm, &O};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) rel(all[i]);
}

static void test_eigh(nrt_dtype dt) {
  double tol = tol_of(dt) * 10;
  buf A = mk(dt, N * N), Ab = mk(dt, N * N), W = mk(real_of(dt), N), V = mk(dt, N * N);
  for (int i = 0; i < N; i++) {
    for (int j = 0; j < i; j++) {
      zc x = zrand();
      set(&A, i * N + j, x);
      set(&A, j * N + i, conj(x));
    }
    set(&A, i * N + i, urand());
  }
  for (int upper = 0; upper < 2; upper++) {
    memcpy(Ab.p, A.p, N * N * esize(dt));
    for (int i = 0; i < N; i++) /* garbage where nothing may be read, imaginary parts on the diagonal too */
      for (int j = 0; j < N; j++) {
        if (upper ? j < i : j > i) set(&Ab, i * N + j, CMPLX(99, 99));
        if (i == j) set(&Ab, i * N + i, get(&A, i * N + i) + CMPLX(0, 7));
      }
    int64_t s[] = {1, N};
    nrt_launch l = nrt_test_launch(NRT_OP(EIGH), dt, 2, s, 2, 1);
    opnd(&l, 0, W.p, real_of(dt), N, 1);
    opnd(&l, 1, V.p, dt, N, N);
    opnd(&l, 2, Ab.p, dt, N, N);
    l.params[0] = upper;
    CHECK_OK(nrt_launch_run(&l));
    for (int j = 1; j < N; j++) CHECK(creal(get(&W, j - 1)) <= creal(get(&W, j)));
    for (int i = 0; i < N; i++)
      for (int j = 0; j < N; j++) {
        zc av = 0, vv = 0;
        for (int t = 0; t < N; t++) {
          av += get(&A, i * N + t) * get(&V, t * N + j);
          vv += conj(get(&V, t * N + i)) * get(&V, t * N + j);
        }
        CHECK_ZNEAR(av, creal(get(&W, j)) * get(&V, i * N + j), tol);
        CHECK_ZNEAR(vv, i == j ? 1.0 : 0.0, tol);
      }
  }
  rel(&A);
  rel(&Ab);
  rel(&W);
  rel(&V);
}

static void check_svd(nrt_dtype dt, int m, int n, int full) {
  double tol = tol_of(dt) * 10;
  int k = m < n ? m : n, uc = full ? m : k, vr = full ? n : k;
  buf A = mk(dt, (size_t)m * n), S = mk(real_of(dt), k), U = mk(dt, (size_t)m * uc), VH = mk(dt, (size_t)vr * n);
  for (size_t i = 0; i < A.n; i++) set(&A, i, zrand());
  int64_t s[] = {1, m, n};
  nrt_launch l = nrt_test_launch(NRT_OP(SVD), dt, 3, s, 3, 1);
  opnd(&l, 0, S.p, real_of(dt), k, 1);
  opnd(&l, 1, U.p, dt, m, uc);
  opnd(&l, 2, VH.p, dt, vr, n);
  opnd(&l, 3, A.p, dt, m, n);
  l.params[0] = full;
  CHECK_OK(nrt_launch_run(&l));
  for (int j = 1; j < k; j++) CHECK(creal(get(&S, j - 1)) >= creal(get(&S, j)));
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      zc r = 0;
      for (int t = 0; t < k; t++) r += get(&U, i * uc + t) * creal(get(&S, t)) * get(&VH, t * n + j);
      CHECK_ZNEAR(r, get(&A, i * n + j), tol);
    }
  for (int i = 0; i < uc; i++)
    for (int j = 0; j < uc; j++) {
      zc d = 0;
      for (int t = 0; t < m; t++) d += conj(get(&U, t * uc + i)) * get(&U, t * uc + j);
      CHECK_ZNEAR(d, i == j ? 1.0 : 0.0, tol);
    }
  for (int i = 0; i < vr; i++)
    for (int j = 0; j < vr; j++) {
      zc d = 0;
      for (int t = 0; t < n; t++) d += get(&VH, i * n + t) * conj(get(&VH, j * n + t));
      CHECK_ZNEAR(d, i == j ? 1.0 : 0.0, tol);
    }
  /* singular values only agree with the full decomposition */
  buf S2 = mk(real_of(dt), k);
  l = nrt_test_launch(NRT_OP(SVD), dt, 3, s, 1, 1);
  opnd(&l, 0, S2.p, real_of(dt), k, 1);
  opnd(&l, 1, A.p, dt, m, n);
  CHECK_OK(nrt_launch_run(&l));
  for (int j = 0; j < k; j++) CHECK_NEAR(creal(get(&S2, j)), creal(get(&S, j)), tol);
  rel(&A);
  rel(&S);
  rel(&U);
  rel(&VH);
  rel(&S2);
}

static void test_svd(nrt_dtype dt) {
  check_svd(dt, 6, 4, 0);
  check_svd(dt, 6, 4, 1);
  check_svd(dt, 3, 7, 1);
  check_svd(dt, 3, 7, 0);
  check_svd(dt, 1, 1, 1);
}

/* EIG of an n x n matrix in dtype `in` (real or complex), outputs in `out`:
 * A V = V diag(w), unit columns with a real largest-magnitude entry; for
 * real input the non-real eigenvalues come in conjugate pairs, positive
 * imaginary part first, with conjugate vectors. Returns the eigenvalues
 * through w_out (if not NULL). */
static void check_eig(nrt_dtype in, nrt_dtype out, int n, buf *A, zc *w_out) {
  double tol = tol_of(out) * 100;
  buf W = mk(out, n), V = mk(out, (size_t)n * n), W2 = mk(out, n);
  int64_t s[] = {1, n};
  nrt_launch l = nrt_test_launch(NRT_OP(EIG), in, 2, s, 2, 1);
  opnd(&l, 0, W.p, out, n, 1);
  opnd(&l, 1, V.p, out, n, n);
  opnd(&l, 2, A->p, in, n, n);
  CHECK_OK(nrt_launch_run(&l));
  double anorm = 0;
  for (size_t i = 0; i < A->n; i++) anorm = fmax(anorm, cabs(get(A, i)));
  for (int j = 0; j < n; j++) {
    zc w = get(&W, j);
    double nrm = 0, big = -1;
    int kmax = 0;
    for (int i = 0; i < n; i++) {
      zc av = 0;
      for (int t = 0; t < n; t++) av += get(A, i * n + t) * get(&V, t * n + j);
      CHECK(cabs(av - w * get(&V, i * n + j)) <= tol * (1 + anorm));
      nrm += cabs(get(&V, i * n + j)) * cabs(get(&V, i * n + j));
      if (cabs(get(&V, i * n + j)) > big + 1e-12) {
        big = cabs(get(&V, i * n + j));
        kmax = i;
      }
    }
    CHECK_NEAR(sqrt(nrm), 1.0, tol);
    /* The largest entry is real (on a tie, one of the largest). */
    int real_max = 0;
    for (int i = 0; i < n; i++)
      if (cabs(get(&V, i * n + j)) >= big - tol && fabs(cimag(get(&V, i * n + j))) <= tol) {
        real_max = 1;
        kmax = i;
      }
    CHECK(real_max);
    if (nrt_dtype_is_complex(in)) CHECK(creal(get(&V, kmax * n + j)) > 0);
    if (!nrt_dtype_is_complex(in) && cimag(w) != 0.0) {
      if (cimag(w) > 0) { /* the partner follows, conjugate, with conjugate vector */
        CHECK(j + 1 < n);
        if (j + 1 < n) {
          CHECK(get(&W, j + 1) == conj(w));
          for (int i = 0; i < n; i++) CHECK(get(&V, i * n + j + 1) == conj(get(&V, i * n + j)));
        }
      } else {
        CHECK(j > 0 && cimag(get(&W, j - 1)) > 0);
      }
    }
    if (w_out) w_out[j] = w;
  }
  /* eigenvalues alone: the same values */
  l = nrt_test_launch(NRT_OP(EIG), in, 2, s, 1, 1);
  opnd(&l, 0, W2.p, out, n, 1);
  opnd(&l, 1, A->p, in, n, n);
  CHECK_OK(nrt_launch_run(&l));
  for (int j = 0; j < n; j++) CHECK_ZNEAR(get(&W2, j), get(&W, j), tol);
  rel(&W);
  rel(&V);
  rel(&W2);
}

static void test_eig(nrt_dtype dt) {
  nrt_dtype rdt = real_of(dt);
  for (int n = 1; n <= 9; n += 2) {
    buf A = mk(rdt, (size_t)n * n);
    for (size_t i = 0; i < A.n; i++) set(&A, i, urand());
    check_eig(rdt, dt, n, &A, NULL);
    rel(&A);
    buf Z = mk(dt, (size_t)n * n);
    for (size_t i = 0; i < Z.n; i++) set(&Z, i, zrand());
    check_eig(dt, dt, n, &Z, NULL);
    rel(&Z);
  }
  /* A rotation: eigenvalues exactly cos t +- i sin t, the + one first. */
  buf R = mk(rdt, 4);
  set(&R, 0, 0.6);
  set(&R, 1, -0.8);
  set(&R, 2, 0.8);
  set(&R, 3, 0.6);
  zc w[9];
  check_eig(rdt, dt, 2, &R, w);
  CHECK_ZNEAR(w[0], CMPLX(0.6, 0.8), tol_of(dt));
  CHECK_ZNEAR(w[1], CMPLX(0.6, -0.8), tol_of(dt));
  rel(&R);
  /* Upper triangular: balancing isolates every eigenvalue by permutation;
   * the eigenvalues are the diagonal, in its order. */
  buf T = mk(dt, 16);
  for (int i = 0; i < 4; i++)
    for (int j = i; j < 4; j++) set(&T, i * 4 + j, i == j ? CMPLX(i + 1, -i) : zrand());
  check_eig(dt, dt, 4, &T, w);
  for (int i = 0; i < 4; i++) CHECK_ZNEAR(w[i], CMPLX(i + 1, -i), tol_of(dt));
  rel(&T);
  /* A defective Jordan block and a zero matrix still give finite output. */
  buf J = mk(rdt, 9);
  set(&J, 0, 2.0);
  set(&J, 1, 1.0);
  set(&J, 4, 2.0);
  set(&J, 5, 1.0);
  set(&J, 8, 2.0);
  buf Wj = mk(dt, 3), Vj = mk(dt, 9);
  int64_t s[] = {1, 3};
  nrt_launch l = nrt_test_launch(NRT_OP(EIG), rdt, 2, s, 2, 1);
  opnd(&l, 0, Wj.p, dt, 3, 1);
  opnd(&l, 1, Vj.p, dt, 3, 3);
  opnd(&l, 2, J.p, rdt, 3, 3);
  CHECK_OK(nrt_launch_run(&l));
  for (int i = 0; i < 3; i++) CHECK_ZNEAR(get(&Wj, i), 2.0, tol_of(dt));
  for (size_t i = 0; i < 9; i++) CHECK(isfinite(creal(get(&Vj, i))) && isfinite(cimag(get(&Vj, i))));
  rel(&J);
  rel(&Wj);
  rel(&Vj);
}

static void test_all(void) {
  nrt_dtype dts[] = {NRT_COMPLEX64, NRT_COMPLEX128};
  for (int d = 0; d < 2; d++) {
    test_lu(dts[d]);
    test_cholesky_trsm(dts[d]);
    test_qr(dts[d]);
    test_eigh(dts[d]);
    test_svd(dts[d]);
    test_eig(dts[d]);
  }
}

/* Empty launches touch nothing. */
static void test_empty(void) {
  int64_t s0[] = {0, 3, 3};
  nrt_launch l = nrt_test_launch(NRT_OP(LU_FACTOR), NRT_COMPLEX64, 3, s0, 3, 1);
  opnd(&l, 0, NULL, NRT_COMPLEX64, 3, 3);
  opnd(&l, 1, NULL, NRT_INT32, 3, 1);
  opnd(&l, 2, NULL, NRT_INT32, 1, 1);
  opnd(&l, 3, NULL, NRT_COMPLEX64, 3, 3);
  CHECK_OK(nrt_launch_run(&l));
  int64_t e0[] = {0, 3};
  l = nrt_test_launch(NRT_OP(EIG), NRT_FLOAT32, 2, e0, 2, 1);
  opnd(&l, 0, NULL, NRT_COMPLEX64, 3, 1);
  opnd(&l, 1, NULL, NRT_COMPLEX64, 3, 3);
  opnd(&l, 2, NULL, NRT_FLOAT32, 3, 3);
  CHECK_OK(nrt_launch_run(&l));
}

int main(void) {
  CHECK_OK(nrt_init());
  for (int ref = 0; ref < 2; ref++) { /* one path: results must not depend on the switch */
    nrt_kernels_set_reference(ref != 0);
    RUN_TEST(test_all);
    RUN_TEST(test_empty);
  }
  nrt_kernels_set_reference(false);
  return TEST_RESULT();
}
