/* FFT tests (FFT_C2C, FFT_R2C, FFT_C2R in nrt/ops/complex.h): the plans
 * (mixed radix, Bluestein) against a double-precision DFT computed here for
 * many lengths, then the launches along a strided middle dim of a 3-d
 * tensor, fast path against the reference path, with scaling, onesided
 * and full r2c, c2r round trips and bad descriptors. */
#include <complex.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"
#include "nrt/ops/complex.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

static const double PI = 3.14159265358979323846;

/* X[k] = sum_j x[j] e^(sign 2 pi i jk / n) in long double. */
static void dft(int64_t n, int sign, const double complex *x, double complex *out) {
  for (int64_t k = 0; k < n; k++) {
    long double re = 0, im = 0;
    for (int64_t j = 0; j < n; j++) {
      long double a = 2.0L * (long double)PI * (long double)((j * k) % n) / (long double)n;
      long double c = cosl(a), s = sign * sinl(a);
      re += creal(x[j]) * c - cimag(x[j]) * s;
      im += creal(x[j]) * s + cimag(x[j]) * c;
    }
    out[k] = (double)re + I * (double)im;
  }
}

/* One FFT_C2C launch over a contiguous complex128 vector of length n. */
static void c2c_1d(int64_t n, int forward, double complex *in, double complex *out, int reference) {
  nrt_launch l = nrt_test_launch(NRT_OP(FFT_C2C), NRT_COMPLEX128, 1, S(n), 1, 1);
  l.operands[0] = (nrt_operand){.data = out, .dtype = NRT_COMPLEX128, .strides = {16}};
  l.operands[1] = (nrt_operand){.data = in, .dtype = NRT_COMPLEX128, .strides = {16}};
  l.params[1] = forward;
  l.aux[0] = n;
  l.scalars[0].f = 1.0;
  CHECK_OK(nrt_test_run(&l, reference));
}

/* Powers of two, smooth lengths, primes below and above the Bluestein
 * threshold, and prime powers: fast path within 1e-12 of the DFT. */
static void test_lengths(void) {
  int64_t lens[] = {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 30, 31, 49, 60, 61, 64, 67, 97, 100, 127, 128, 210, 243, 256, 331, 1000, 1024, 1031};
  for (size_t t = 0; t < sizeof lens / sizeof lens[0]; t++) {
    int64_t n = lens[t];
    double complex *x = malloc(sizeof *x * n), *got = malloc(sizeof *x * n), *want = malloc(sizeof *x * n);
    for (int64_t j = 0; j < n; j++) x[j] = nrt_test_urand() + I * nrt_test_urand();
    for (int fwd = 0; fwd < 2; fwd++) {
      dft(n, fwd ? -1 : 1, x, want);
      for (int ref = 0; ref < 2; ref++) {
        if (ref && n > 256) continue; /* the O(n^2) path is slow */
        c2c_1d(n, fwd, x, got, ref);
        double err = 0, scale = 0;
        for (int64_t k = 0; k < n; k++) {
          err = fmax(err, cabs(got[k] - want[k]));
          scale = fmax(scale, cabs(want[k]));
        }
        if (!(err <= 1e-12 * (1.0 + scale))) {
          fprintf(stderr, "n=%lld fwd=%d ref=%d err=%g\n", (long long)n, fwd, ref, err);
          CHECK(0);
        }
      }
    }
    free(x);
    free(got);
    free(want);
  }
}

/* A [B, N, C] complex64 tensor stored as [C, N, B] (fully transposed),
 * transformed along dim 1, output contiguous; scale 1/N. */
static void test_strided_c2c(void) {
  enum { B = 3, N = 20, C = 4 };
  float in[C][N][B][2], out[B][N][C][2], out_ref[B][N][C][2];
  for (int c = 0; c < C; c++)
    for (int n = 0; n < N; n++)
      for (int b = 0; b < B; b++) in[c][n][b][0] = (float)nrt_test_urand(), in[c][n][b][1] = (float)nrt_test_urand();
  for (int ref = 0; ref < 2; ref++) {
    nrt_launch l = nrt_test_launch(NRT_OP(FFT_C2C), NRT_COMPLEX64, 3, S(B, N, C), 1, 1);
    l.operands[0] = (nrt_operand){.data = ref ? (void *)out_ref : (void *)out, .dtype = NRT_COMPLEX64,
                                  .strides = {N * C * 8, C * 8, 8}};
    l.operands[1] = (nrt_operand){.data = in, .dtype = NRT_COMPLEX64, .strides = {8, B * 8, N * B * 8}};
    l.params[0] = 1;
    l.params[1] = 1;
    l.aux[0] = N;
    l.scalars[0].f = 1.0 / N;
    CHECK_OK(nrt_test_run(&l, ref));
  }
  for (int b = 0; b < B; b++)
    for (int c = 0; c < C; c++) {
      double complex x[N], want[N];
      for (int n = 0; n < N; n++) x[n] = in[c][n][b][0] + I * in[c][n][b][1];
      dft(N, -1, x, want);
      for (int k = 0; k < N; k++) {
        CHECK_NEAR(out[b][k][c][0], creal(want[k]) / N, 1e-5);
        CHECK_NEAR(out[b][k][c][1], cimag(want[k]) / N, 1e-5);
        CHECK_NEAR(out_ref[b][k][c][0], out[b][k][c][0], 1e-5);
        CHECK_NEAR(out_ref[b][k][c][1], out[b][k][c][1], 1e-5);
      }
    }
}

/* r2c (onesided and full) then c2r back, for even and odd lengths, over
 * rows of a [R, n] float32 matrix. */
static void test_r2c_c2r_roundtrip(void) {
  int64_t lens[] = {1, 2, 7, 8, 15, 16, 97, 128};
  enum { R = 3 };
  for (size_t t = 0; t < sizeof lens / sizeof lens[0]; t++) {
    int64_t n = lens[t], h = n / 2 + 1;
    float *x = malloc(sizeof(float) * R * n), *back = malloc(sizeof(float) * R * n);
    float *spec = malloc(sizeof(float) * 2 * R * n);
    for (int64_t i = 0; i < R * n; i++) x[i] = (float)nrt_test_urand();
    for (int onesided = 0; onesided < 2; onesided++) {
      int64_t m = onesided ? h : n;
      nrt_launch l = nrt_test_launch(NRT_OP(FFT_R2C), NRT_COMPLEX64, 2, S(R, m), 1, 1);
      l.operands[0] = (nrt_operand){.data = spec, .dtype = NRT_COMPLEX64, .strides = {m * 8, 8}};
      l.operands[1] = (nrt_operand){.data = x, .dtype = NRT_FLOAT32, .strides = {n * 4, 4}};
      l.params[0] = 1;
      l.aux[0] = n;
      l.scalars[0].f = 1.0;
      CHECK_OK(nrt_test_run(&l, 0));
      for (int r = 0; r < R; r++) {
        double complex xr[128], want[128];
        for (int64_t j = 0; j < n; j++) xr[j] = x[r * n + j];
        dft(n, -1, xr, want);
        for (int64_t k = 0; k < m; k++) {
          CHECK_NEAR(spec[2 * (r * m + k)], creal(want[k]), 1e-5);
          CHECK_NEAR(spec[2 * (r * m + k) + 1], cimag(want[k]), 1e-5);
        }
      }
      /* c2r of the (first h entries of the) spectrum, scaled 1/n, both paths. */
      for (int ref = 0; ref < 2; ref++) {
        l = nrt_test_launch(NRT_OP(FFT_C2R), NRT_FLOAT32, 2, S(R, n), 1, 1);
        l.operands[0] = (nrt_operand){.data = back, .dtype = NRT_FLOAT32, .strides = {n * 4, 4}};
        l.operands[1] = (nrt_operand){.data = spec, .dtype = NRT_COMPLEX64, .strides = {m * 8, 8}};
        l.params[0] = 1;
        l.aux[0] = m;
        l.scalars[0].f = 1.0 / n;
        CHECK_OK(nrt_test_run(&l, ref));
        for (int64_t i = 0; i < R * n; i++) CHECK_NEAR(back[i], x[i], 1e-5);
      }
    }
    free(x);
    free(back);
    free(spec);
  }
}

/* c2r ignores the imaginary parts of X[0] and X[n/2] (n even), as ATen's
 * CPU FFT does, and treats missing high entries as zeros. */
static void test_c2r_hermitian_rules(void) {
  float spec[3][2] = {{1.0f, 5.0f}, {0.5f, -0.25f}, {2.0f, 7.0f}}; /* n = 4 uses X[0..2] */
  float out[4];
  nrt_launch l = nrt_test_launch(NRT_OP(FFT_C2R), NRT_FLOAT32, 1, S(4), 1, 1);
  l.operands[0] = (nrt_operand){.data = out, .dtype = NRT_FLOAT32, .strides = {4}};
  l.operands[1] = (nrt_operand){.data = spec, .dtype = NRT_COMPLEX64, .strides = {8}};
  l.aux[0] = 3;
  l.scalars[0].f = 1.0;
  CHECK_OK(nrt_test_run(&l, 0));
  double complex full[4] = {1.0, 0.5 - 0.25 * I, 2.0, 0.5 + 0.25 * I}, want[4];
  dft(4, 1, full, want);
  for (int j = 0; j < 4; j++) CHECK_NEAR(out[j], creal(want[j]), 1e-6);
  l.aux[0] = 1; /* only X[0] given */
  CHECK_OK(nrt_test_run(&l, 1));
  for (int j = 0; j < 4; j++) CHECK_NEAR(out[j], 1.0, 1e-6);
}

static void test_bad_descriptors(void) {
  float c[8][2] = {{0}}, r[8] = {0};
  nrt_launch l = nrt_test_launch(NRT_OP(FFT_C2C), NRT_COMPLEX64, 1, S(8), 1, 1);
  l.operands[0] = (nrt_operand){.data = c, .dtype = NRT_COMPLEX64, .strides = {8}};
  l.operands[1] = (nrt_operand){.data = r, .dtype = NRT_FLOAT32, .strides = {4}};
  l.aux[0] = 8;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT); /* real input */
  l.operands[1] = l.operands[0];
  l.aux[0] = 7;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT); /* length mismatch */
  l.aux[0] = 8;
  l.params[0] = 1;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT); /* dim out of range */
  l.params[0] = 0;
  l.op = NRT_OP(FFT_R2C);
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT); /* complex input */
  l.op = NRT_OP(FFT_C2R);
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT); /* complex output */
  l.sizes[0] = 0;
  l.operands[0] = (nrt_operand){.data = r, .dtype = NRT_FLOAT32, .strides = {4}};
  CHECK_OK(nrt_launch_run(&l)); /* empty: nothing to do */
}

int main(void) {
  nrt_test_seed(0x2545F4914F6CDD1Dull);
  CHECK_OK(nrt_init());
  RUN_TEST(test_lengths);
  RUN_TEST(test_strided_c2c);
  RUN_TEST(test_r2c_c2r_roundtrip);
  RUN_TEST(test_c2r_hermitian_rules);
  RUN_TEST(test_bad_descriptors);
  return TEST_RESULT();
}
