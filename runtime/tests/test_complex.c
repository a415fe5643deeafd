/* COMPLEX family tests, elementwise and reduction ops (nrt/ops/complex.h):
 * each op against a double-precision reference computed here, on complex64,
 * complex128, complex32 and mixed real operands, with non-contiguous and
 * broadcast (stride 0) strides, conj/neg copies, and the reference path
 * (nrt_kernels_set_reference) against the parallel one. */
#include <complex.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"
#include "nrt/ops/complex.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

static void test_dtype_table(void) {
  CHECK(nrt_dtype_size(NRT_COMPLEX32) == 4);
  CHECK(nrt_dtype_size(NRT_COMPLEX64) == 8);
  CHECK(nrt_dtype_size(NRT_COMPLEX128) == 16);
  CHECK(strcmp(nrt_dtype_name(NRT_COMPLEX64), "complex64") == 0);
  CHECK(nrt_dtype_is_complex(NRT_COMPLEX128) && nrt_dtype_is_complex(NRT_COMPLEX32));
  CHECK(!nrt_dtype_is_complex(NRT_FLOAT32) && !nrt_dtype_is_complex(NRT_DTYPE_COUNT));
  CHECK(!nrt_dtype_is_floating(NRT_COMPLEX64));
}

/* Binary ops on a [R, C] complex64 output from a transposed complex64 a
 * and a complex128 b broadcast along rows. */
static void test_binary_ops(void) {
  enum { R = 7, C = 9 };
  float a[C][R][2];   /* stored transposed: element (r, c) at a[c][r] */
  double b[C][2];     /* broadcast along r */
  float out[R][C][2];
  for (int c = 0; c < C; c++)
    for (int r = 0; r < R; r++) {
      a[c][r][0] = (float)nrt_test_uniform(-2, 2);
      a[c][r][1] = (float)nrt_test_uniform(-2, 2);
    }
  for (int c = 0; c < C; c++) b[c][0] = nrt_test_uniform(-2, 2), b[c][1] = nrt_test_uniform(-2, 2);
  b[0][0] = b[0][1] = 0.0; /* division by zero: inf/NaN parts */
  nrt_op ops[] = {NRT_OP(CX_ADD), NRT_OP(CX_SUB), NRT_OP(CX_MUL), NRT_OP(CX_DIV)};
  for (int oi = 0; oi < 4; oi++) {
    for (int ref = 0; ref < 2; ref++) {
      nrt_launch l = nrt_test_launch(ops[oi], NRT_COMPLEX64, 2, S(R, C), 1, 2);
      nrt_test_operand_n(&l, 0, out, NRT_COMPLEX64, S(C * 8, 8), 2);
      nrt_test_operand_n(&l, 1, a, NRT_COMPLEX64, S(8, R * 8), 2);
      nrt_test_operand_n(&l, 2, b, NRT_COMPLEX128, S(0, 16), 2);
      l.scalars[0].f = 2.0; /* alpha = 2 - 0.5i for add/sub */
      l.scalars[1].f = -0.5;
      CHECK_OK(nrt_test_run(&l, ref));
      for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
          double complex x = a[c][r][0] + I * a[c][r][1], y = b[c][0] + I * b[c][1], w;
          double complex alpha = 2.0 - 0.5 * I;
          switch (oi) {
          case 0: w = x + alpha * y; break;
          case 1: w = x - alpha * y; break;
          case 2: w = x * y; break;
          default:
            if (c == 0) w = CMPLX(creal(x) / 0.0, cimag(x) / 0.0);
            else w = x / y;
            break;
          }
          CHECK(nrt_test_near(out[r][c][0], creal(w), 1e-6) && nrt_test_near(out[r][c][1], cimag(w), 1e-6));
        }
    }
  }
}

/* Copies: complex <-> complex of every width, real -> complex (imag 0),
 * complex -> real (real part), complex -> bool (either part nonzero), with
 * the conj and neg flags. */
static void test_copy_convert(void) {
  enum { N = 37 };
  double src[N][2];
  for (int i = 0; i < N; i++) src[i][0] = nrt_test_uniform(-2, 2), src[i][1] = nrt_test_uniform(-2, 2);
  src[3][0] = 0.0, src[3][1] = 0.0;
  src[4][0] = 0.0, src[4][1] = 1.0;
  for (int conj = 0; conj < 2; conj++)
    for (int neg = 0; neg < 2; neg++) {
      float c64[N][2];
      nrt_launch l = nrt_test_launch(NRT_OP(CX_COPY), NRT_COMPLEX64, 1, S(N), 1, 1);
      nrt_test_operand_n(&l, 0, c64, NRT_COMPLEX64, S(8), 1);
      nrt_test_operand_n(&l, 1, src, NRT_COMPLEX128, S(16), 1);
      l.params[0] = conj;
      l.params[1] = neg;
      CHECK_OK(nrt_test_run(&l, 0));
      for (int i = 0; i < N; i++) {
        double re = src[i][0], im = conj ? -src[i][1] : src[i][1];
        if (neg) re = -re, im = -im;
        CHECK(c64[i][0] == (float)re && c64[i][1] == (float)im);
      }
    }
  /* complex128 -> float32, bool, complex32; float32 -> complex64 */
  float re32[N];
  uint8_t bools[N];
  uint16_t c32[N][2];
  nrt_launch l = nrt_test_launch(NRT_OP(CX_COPY), NRT_COMPLEX64, 1, S(N), 1, 1);
  nrt_test_operand_n(&l, 1, src, NRT_COMPLEX128, S(16), 1);
  nrt_test_operand_n(&l, 0, re32, NRT_FLOAT32, S(4), 1);
  CHECK_OK(nrt_test_run(&l, 1));
  nrt_test_operand_n(&l, 0, bools, NRT_BOOL, S(1), 1);
  CHECK_OK(nrt_test_run(&l, 0));
  nrt_test_operand_n(&l, 0, c32, NRT_COMPLEX32, S(4), 1);
  CHECK_OK(nrt_test_run(&l, 0));
  for (int i = 0; i < N; i++) {
    CHECK(re32[i] == (float)src[i][0]);
    CHECK(bools[i] == (src[i][0] != 0.0 || src[i][1] != 0.0));
    CHECK(nrt_test_near(nrt_f16_to_f32(c32[i][0]), src[i][0], 1e-3) &&
          nrt_test_near(nrt_f16_to_f32(c32[i][1]), src[i][1], 1e-3));
  }
  float back[N][2];
  l = nrt_test_launch(NRT_OP(CX_COPY), NRT_COMPLEX64, 1, S(N), 1, 1);
  nrt_test_operand_n(&l, 0, back, NRT_COMPLEX64, S(8), 1);
  nrt_test_operand_n(&l, 1, re32, NRT_FLOAT32, S(4), 1);
  CHECK_OK(nrt_test_run(&l, 0));
  for (int i = 0; i < N; i++) CHECK(back[i][0] == re32[i] && back[i][1] == 0.0f);
  int64_t ints[3] = {-3, 0, 1 << 20};
  l = nrt_test_launch(NRT_OP(CX_COPY), NRT_COMPLEX64, 1, S(3), 1, 1);
  nrt_test_operand_n(&l, 0, back, NRT_COMPLEX64, S(8), 1);
  nrt_test_operand_n(&l, 1, ints, NRT_INT64, S(8), 1);
  CHECK_OK(nrt_test_run(&l, 0));
  CHECK(back[0][0] == -3.0f && back[2][0] == (float)(1 << 20) && back[1][1] == 0.0f);
}

static void test_fill_where_compare(void) {
  float out[5][2];
  nrt_launch l = nrt_test_launch(NRT_OP(CX_FILL), NRT_COMPLEX64, 1, S(5), 1, 0);
  nrt_test_operand_n(&l, 0, out, NRT_COMPLEX64, S(8), 1);
  l.scalars[0].f = 1.5;
  l.scalars[1].f = -2.25;
  CHECK_OK(nrt_test_run(&l, 0));
  for (int i = 0; i < 5; i++) CHECK(out[i][0] == 1.5f && out[i][1] == -2.25f);

  uint8_t cond[5] = {1, 0, 1, 0, 0};
  float a[5][2] = {{1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}};
  double b[2] = {-1, -2};
  l = nrt_test_launch(NRT_OP(CX_WHERE), NRT_COMPLEX64, 1, S(5), 1, 3);
  nrt_test_operand_n(&l, 0, out, NRT_COMPLEX64, S(8), 1);
  nrt_test_operand_n(&l, 1, cond, NRT_BOOL, S(1), 1);
  nrt_test_operand_n(&l, 2, a, NRT_COMPLEX64, S(8), 1);
  nrt_test_operand_n(&l, 3, b, NRT_COMPLEX128, S(0), 1);
  CHECK_OK(nrt_test_run(&l, 0));
  for (int i = 0; i < 5; i++)
    CHECK(cond[i] ? (out[i][0] == a[i][0] && out[i][1] == a[i][1]) : (out[i][0] == -1.0f && out[i][1] == -2.0f));

  float c[5][2] = {{1, 1}, {2, 0}, {3, 3}, {4, 5}, {NAN, 0}};
  float d[5][2] = {{1, 1}, {2, 1}, {3, 3}, {5, 5}, {NAN, 0}};
  uint8_t eq[5], ne[5];
  l = nrt_test_launch(NRT_OP(CX_EQ), NRT_COMPLEX64, 1, S(5), 1, 2);
  nrt_test_operand_n(&l, 0, eq, NRT_BOOL, S(1), 1);
  nrt_test_operand_n(&l, 1, c, NRT_COMPLEX64, S(8), 1);
  nrt_test_operand_n(&l, 2, d, NRT_COMPLEX64, S(8), 1);
  CHECK_OK(nrt_test_run(&l, 0));
  l.op = NRT_OP(CX_NE);
  nrt_test_operand_n(&l, 0, ne, NRT_BOOL, S(1), 1);
  CHECK_OK(nrt_test_run(&l, 0));
  uint8_t want[5] = {1, 0, 1, 0, 0};
  for (int i = 0; i < 5; i++) CHECK(eq[i] == want[i] && ne[i] == !want[i]);
}

/* complex / polar from real parts; abs, angle, sgn back to them. */
static void test_unary_and_constructors(void) {
  enum { N = 23 };
  float re[N], im[N], mag[N], ang[N];
  for (int i = 0; i < N; i++) re[i] = (float)nrt_test_uniform(-2, 2), im[i] = (float)nrt_test_uniform(-2, 2);
  re[0] = im[0] = 0.0f;
  float z[N][2], p[N][2], s[N][2];
  nrt_launch l = nrt_test_launch(NRT_OP(CX_COMPLEX), NRT_COMPLEX64, 1, S(N), 1, 2);
  nrt_test_operand_n(&l, 0, z, NRT_COMPLEX64, S(8), 1);
  nrt_test_operand_n(&l, 1, re, NRT_FLOAT32, S(4), 1);
  nrt_test_operand_n(&l, 2, im, NRT_FLOAT32, S(4), 1);
  CHECK_OK(nrt_test_run(&l, 0));
  l = nrt_test_launch(NRT_OP(CX_ABS), NRT_COMPLEX64, 1, S(N), 1, 1);
  nrt_test_operand_n(&l, 0, mag, NRT_FLOAT32, S(4), 1);
  nrt_test_operand_n(&l, 1, z, NRT_COMPLEX64, S(8), 1);
  CHECK_OK(nrt_test_run(&l, 1));
  l.op = NRT_OP(CX_ANGLE);
  nrt_test_operand_n(&l, 0, ang, NRT_FLOAT32, S(4), 1);
  CHECK_OK(nrt_test_run(&l, 0));
  l.op = NRT_OP(CX_SGN);
  nrt_test_operand_n(&l, 0, s, NRT_COMPLEX64, S(8), 1);
  CHECK_OK(nrt_test_run(&l, 0));
  l = nrt_test_launch(NRT_OP(CX_POLAR), NRT_COMPLEX64, 1, S(N), 1, 2);
  nrt_test_operand_n(&l, 0, p, NRT_COMPLEX64, S(8), 1);
  nrt_test_operand_n(&l, 1, mag, NRT_FLOAT32, S(4), 1);
  nrt_test_operand_n(&l, 2, ang, NRT_FLOAT32, S(4), 1);
  CHECK_OK(nrt_test_run(&l, 0));
  for (int i = 0; i < N; i++) {
    CHECK(z[i][0] == re[i] && z[i][1] == im[i]);
    double m = hypot(re[i], im[i]);
    CHECK(nrt_test_near(mag[i], m, 1e-6));
    CHECK(nrt_test_near(ang[i], atan2(im[i], re[i]), 1e-6));
    CHECK(nrt_test_near(p[i][0], re[i], 1e-5) && nrt_test_near(p[i][1], im[i], 1e-5));
    if (i == 0) CHECK(s[i][0] == 0.0f && s[i][1] == 0.0f);
    else CHECK(nrt_test_near(s[i][0], re[i] / m, 1e-6) && nrt_test_near(s[i][1], im[i] / m, 1e-6));
  }
}

/* Sum and mean over dims 0 and 2 of a [4, 3, 5] tensor (reduction layout:
 * the output has stride 0 there), reference path against parallel path. */
static void test_sum_mean(void) {
  enum { A = 4, B = 3, C = 5 };
  float x[A][B][C][2];
  for (int i = 0; i < A; i++)
    for (int j = 0; j < B; j++)
      for (int k = 0; k < C; k++) {
        x[i][j][k][0] = (float)nrt_test_uniform(-2, 2);
        x[i][j][k][1] = (float)nrt_test_uniform(-2, 2);
      }
  for (int mean = 0; mean < 2; mean++)
    for (int ref = 0; ref < 2; ref++) {
      double out[B][2];
      nrt_launch l = nrt_test_launch(NRT_OP(CX_REDUCE), NRT_COMPLEX64, 3, S(A, B, C), 1, 1);
      nrt_test_operand_n(&l, 0, out, NRT_COMPLEX128, S(0, 16, 0), 3);
      nrt_test_operand_n(&l, 1, x, NRT_COMPLEX64, S(B * C * 8, C * 8, 8), 3);
      l.params[0] = mean;
      CHECK_OK(nrt_test_run(&l, ref));
      for (int j = 0; j < B; j++) {
        double sr = 0, si = 0;
        for (int i = 0; i < A; i++)
          for (int k = 0; k < C; k++) sr += x[i][j][k][0], si += x[i][j][k][1];
        if (mean) sr /= A * C, si /= A * C;
        CHECK(nrt_test_near(out[j][0], sr, 1e-12) && nrt_test_near(out[j][1], si, 1e-12));
      }
    }
}

/* PROD with p1 != 0: the CPU's complex<float> product, rounded every step,
 * its scalar steps fused (1 * (1e30 + 0j) * (1e30 + 0j) overflows to inf,
 * and inf * (1e-30 + 0j) has the imaginary part inf * 0 = NaN), where the
 * double loop keeps 1e30 + 0j. 20 elements: one grouped block of 16 (4
 * lanes of 4) and a tail; the vector steps round each product. */
static void test_prod_cpu_order(void) {
  float x[20][2] = {{1e30f, 0}, {1e30f, 0}, {1e-30f, 0}};
  for (int ref = 0; ref < 2; ref++) {
    float out[2] = {0, 0};
    nrt_launch l = nrt_test_launch(NRT_OP(CX_REDUCE), NRT_COMPLEX64, 1, S(3), 1, 1);
    nrt_test_operand_n(&l, 0, out, NRT_COMPLEX64, S(0), 1);
    nrt_test_operand_n(&l, 1, x, NRT_COMPLEX64, S(8), 1);
    l.params[0] = 2;
    l.params[1] = 32;
    CHECK_OK(nrt_test_run(&l, ref));
    CHECK(isinf(out[0]) && out[0] > 0 && isnan(out[1]));
    l.params[1] = 0;
    CHECK_OK(nrt_test_run(&l, ref));
    CHECK(out[0] == 1e30f && out[1] == 0);
  }
  /* 20 elements: lane k of the block of 16 is (x[k] x[k+4]) (x[k+8]
   * x[k+12]) in rounded vector products, the lanes (but the last) and the
   * tail fused;
   * the fast and reference paths agree bit for bit with a plain float
   * recomputation of that order. */
  float y[20][2];
  for (int i = 0; i < 20; i++) y[i][0] = 1.0f + (float)i / 64, y[i][1] = (float)ldexp(1.0 + i, -12);
  float got[2][2];
  for (int ref = 0; ref < 2; ref++) {
    nrt_launch l = nrt_test_launch(NRT_OP(CX_REDUCE), NRT_COMPLEX64, 1, S(20), 1, 1);
    nrt_test_operand_n(&l, 0, got[ref], NRT_COMPLEX64, S(0), 1);
    nrt_test_operand_n(&l, 1, y, NRT_COMPLEX64, S(8), 1);
    l.params[0] = 2;
    l.params[1] = 32;
    CHECK_OK(nrt_test_run(&l, ref));
  }
  float a[16][2];
  memcpy(a, y, sizeof a);
  float v[4][2];
  for (int k = 0; k < 4; k++) {
    float p[2][2];
    for (int h = 0; h < 2; h++) {
      const float *u = a[k + 8 * h], *w = a[k + 8 * h + 4];
      float ac = u[0] * w[0], bd = u[1] * w[1], ad = u[0] * w[1], bc = u[1] * w[0];
      p[h][0] = ac - bd, p[h][1] = ad + bc;
    }
    float ac = p[0][0] * p[1][0], bd = p[0][1] * p[1][1], ad = p[0][0] * p[1][1], bc = p[0][1] * p[1][0];
    v[k][0] = ac - bd, v[k][1] = ad + bc;
  }
  float acc[2] = {1, 0};
  /* lanes 1..3 are multiplied into lane 0, that into acc, then the tail */
  float lane[2] = {v[0][0], v[0][1]};
  for (int k = 1; k < 4; k++) {
    /* the last lane step unfused, as the CPU's build compiles it */
    float r = k < 3 ? fmaf(lane[0], v[k][0], -(lane[1] * v[k][1])) : lane[0] * v[k][0] - lane[1] * v[k][1];
    float i = k < 3 ? fmaf(lane[0], v[k][1], lane[1] * v[k][0]) : lane[0] * v[k][1] + lane[1] * v[k][0];
    lane[0] = r, lane[1] = i;
  }
  float r = fmaf(acc[0], lane[0], -(acc[1] * lane[1])), i = fmaf(acc[0], lane[1], acc[1] * lane[0]);
  acc[0] = r, acc[1] = i;
  for (int t = 16; t < 20; t++) {
    r = fmaf(acc[0], y[t][0], -(acc[1] * y[t][1])), i = fmaf(acc[0], y[t][1], acc[1] * y[t][0]);
    acc[0] = r, acc[1] = i;
  }
  CHECK(got[0][0] == got[1][0] && got[0][1] == got[1][1]);
  CHECK(got[1][0] == acc[0] && got[1][1] == acc[1]);
}

/* One CX_MATH function of a complex128 vector. */
static void cx_math_run(int64_t fn, const double (*x)[2], double (*y)[2], int n, int ref) {
  nrt_launch l = nrt_test_launch(NRT_OP(CX_MATH), NRT_COMPLEX64, 1, (const int64_t[]){n}, 1, 1);
  nrt_test_operand_n(&l, 0, y, NRT_COMPLEX128, S(16), 1);
  nrt_test_operand_n(&l, 1, (void *)x, NRT_COMPLEX128, S(16), 1);
  l.params[0] = fn;
  CHECK_OK(nrt_test_run(&l, ref));
}

/* Elementary functions through identities (exp(log z) = z, sin^2 + cos^2
 * = 1, ...) and the small-argument forms of expm1 / log1p against their
 * series; pow's special exponents; logical ops; the ternary ops. */
static void test_math(void) {
  enum { N = 16 };
  double x[N][2], a[N][2], b[N][2];
  for (int i = 0; i < N; i++) x[i][0] = nrt_test_uniform(-2, 2), x[i][1] = nrt_test_uniform(-2, 2);
  x[0][0] = 1e-9, x[0][1] = -2e-9; /* tiny: expm1 / log1p must keep it */
  cx_math_run(NRT_OP_LOG, (const double (*)[2])x, a, N, 0);
  cx_math_run(NRT_OP_EXP, (const double (*)[2])a, b, N, 1);
  for (int i = 0; i < N; i++) CHECK(nrt_test_near(b[i][0], x[i][0], 1e-12) && nrt_test_near(b[i][1], x[i][1], 1e-12));
  cx_math_run(NRT_OP_SIN, (const double (*)[2])x, a, N, 0);
  cx_math_run(NRT_OP_COS, (const double (*)[2])x, b, N, 0);
  for (int i = 0; i < N; i++) {
    double complex s = a[i][0] + I * a[i][1], c = b[i][0] + I * b[i][1], one = s * s + c * c;
    CHECK(nrt_test_near(creal(one), 1.0, 1e-12) && fabs(cimag(one)) < 1e-12);
  }
  cx_math_run(NRT_OP_EXPM1, (const double (*)[2])x, a, 1, 0);
  CHECK(nrt_test_near(a[0][0], 1e-9 + (1e-18 - 4e-18) / 2, 1e-9) && nrt_test_near(a[0][1], -2e-9 + 1e-9 * -2e-9, 1e-9));
  cx_math_run(NRT_OP_LOG1P, (const double (*)[2])x, a, 1, 0);
  CHECK(nrt_test_near(a[0][0], 1e-9 - (1e-18 - 4e-18) / 2, 1e-9) && nrt_test_near(a[0][1], -2e-9 + 2e-18, 1e-9));
  cx_math_run(NRT_OP_SQRT, (const double (*)[2])x, a, N, 0);
  for (int i = 0; i < N; i++) {
    double complex r = a[i][0] + I * a[i][1], sq = r * r;
    CHECK(creal(r) >= 0.0 && nrt_test_near(creal(sq), x[i][0], 1e-12) && nrt_test_near(cimag(sq), x[i][1], 1e-12));
  }
  cx_math_run(NRT_OP_ISNAN, (const double (*)[2])x, a, N, 0);
  CHECK(a[1][0] == 0.0);
  double nanv[1][2] = {{0.0, NAN}};
  cx_math_run(NRT_OP_ISNAN, (const double (*)[2])nanv, a, 1, 0);
  CHECK(a[0][0] == 1.0);
  /* pow of complex64 as the CPU: z ** 2 is the float product z * z
     exactly; any other exponent is glibc's cpowf bit for bit (its float
     rounding and C99's special values: 0 ** 1.5 = 0, 0 ** 0 = NaN + NaN i,
     0 ** -1.3 = inf + NaN i), also through CX_POW with a Tensor_Scalar
     exponent (p0 = 1); a Scalar_Tensor base of 1 (p0 = 2) gives 1 */
  float z[4][2] = {{1.5f, -0.5f}, {0.0f, 0.0f}, {-3.0f, 0.0f}, {3.4e38f, 3.4e38f}}, out[4][2];
  double es[4] = {2.0, 1.5, 0.0, -1.3};
  for (int k = 0; k < 4; k++) {
    for (int via = 0; via < 2; via++) {
      double e[1][2] = {{es[k], 0.0}};
      nrt_launch l = nrt_test_launch(via ? NRT_OP(CX_POW) : NRT_OP(CX_POW_SCALAR), NRT_COMPLEX64, 1, S(4), 1,
                                     1 + via);
      nrt_test_operand_n(&l, 0, out, NRT_COMPLEX64, S(8), 1);
      nrt_test_operand_n(&l, 1, z, NRT_COMPLEX64, S(8), 1);
      if (via) nrt_test_operand_n(&l, 2, e, NRT_COMPLEX128, S(0), 1), l.params[0] = 1;
      l.scalars[0].f = es[k];
      CHECK_OK(nrt_test_run(&l, 0));
      for (int i = 0; i < 4; i++) {
        float a = z[i][0], b = z[i][1];
        /* no vector block (p1 = 0): the CPU's scalar function, whose
           product is fused */
        float complex want = k == 0 ? CMPLXF(fmaf(a, a, -(b * b)), a * b + b * a) : cpowf(CMPLXF(a, b), (float)es[k]);
        CHECK((out[i][0] == crealf(want) || (isnan(out[i][0]) && isnan(crealf(want)))) &&
              (out[i][1] == cimagf(want) || (isnan(out[i][1]) && isnan(cimagf(want)))));
      }
    }
  }
  CHECK(out[1][0] == INFINITY && isnan(out[1][1])); /* the last, k = 3: 0 ** -1.3 */
  {
    /* (3.4e38 + 3.4e38i)^2: -inf + inf i from the CPU's scalar function
       (fused), NaN + inf i in its vector body (p1 = 4: a block of 4 takes
       the whole row); both paths, both kernel paths */
    for (int block = 0; block <= 4; block += 4)
      for (int ref = 0; ref < 2; ref++) {
        nrt_launch l = nrt_test_launch(NRT_OP(CX_POW_SCALAR), NRT_COMPLEX64, 1, S(4), 1, 1);
        nrt_test_operand_n(&l, 0, out, NRT_COMPLEX64, S(8), 1);
        nrt_test_operand_n(&l, 1, z, NRT_COMPLEX64, S(8), 1);
        l.scalars[0].f = 2.0;
        l.params[1] = block;
        CHECK_OK(nrt_test_run(&l, ref));
        CHECK(block ? isnan(out[3][0]) : out[3][0] == -INFINITY);
        CHECK(out[3][1] == INFINITY && out[0][0] == 2.0f && out[0][1] == -1.5f);
      }
  }
  {
    double one[1][2] = {{1.0, 0.0}}, w[2][2] = {{NAN, 0.0}, {0.0, INFINITY}}, r[2][2];
    nrt_launch l = nrt_test_launch(NRT_OP(CX_POW), NRT_COMPLEX128, 1, S(2), 1, 2);
    nrt_test_operand_n(&l, 0, r, NRT_COMPLEX128, S(16), 1);
    nrt_test_operand_n(&l, 1, one, NRT_COMPLEX128, S(0), 1);
    nrt_test_operand_n(&l, 2, w, NRT_COMPLEX128, S(16), 1);
    l.params[0] = 2;
    CHECK_OK(nrt_test_run(&l, 1));
    CHECK(r[0][0] == 1.0 && r[0][1] == 0.0 && r[1][0] == 1.0 && r[1][1] == 0.0);
    l.params[0] = 0; /* a tensor base of 1: cpow(1, NaN) is NaN */
    CHECK_OK(nrt_test_run(&l, 1));
    CHECK(isnan(r[0][0]));
  }
  /* logical and/or/xor on (nonzero?) */
  float p[4][2] = {{0, 0}, {0, 1}, {2, 0}, {0, 0}}, q[4][2] = {{0, 0}, {0, 0}, {1, 1}, {0, 3}};
  for (int m = 0; m < 3; m++) {
    uint8_t r[4];
    nrt_launch l = nrt_test_launch(NRT_OP(CX_LOGICAL), NRT_COMPLEX64, 1, S(4), 1, 2);
    nrt_test_operand_n(&l, 0, r, NRT_BOOL, S(1), 1);
    nrt_test_operand_n(&l, 1, p, NRT_COMPLEX64, S(8), 1);
    nrt_test_operand_n(&l, 2, q, NRT_COMPLEX64, S(8), 1);
    l.params[0] = m;
    CHECK_OK(nrt_test_run(&l, 1));
    for (int i = 0; i < 4; i++) {
      int u = p[i][0] != 0 || p[i][1] != 0, v = q[i][0] != 0 || q[i][1] != 0;
      CHECK(r[i] == (m == 0 ? (u && v) : m == 1 ? (u || v) : (u != v)));
    }
  }
  /* addcmul / addcdiv / lerp (weights below and above 0.5) */
  float s0[2][2] = {{1, 2}, {-1, 0.5f}}, t1[2][2] = {{0.5f, -1}, {2, 2}}, t2[2][2] = {{3, 1}, {0.25f, 1}};
  nrt_op ops[3] = {NRT_OP(CX_ADDCMUL), NRT_OP(CX_ADDCDIV), NRT_OP(CX_LERP)};
  for (int k = 0; k < 3; k++) {
    float r[2][2];
    nrt_launch l = nrt_test_launch(ops[k], NRT_COMPLEX64, 1, S(2), 1, 3);
    nrt_test_operand_n(&l, 0, r, NRT_COMPLEX64, S(8), 1);
    nrt_test_operand_n(&l, 1, s0, NRT_COMPLEX64, S(8), 1);
    nrt_test_operand_n(&l, 2, t1, NRT_COMPLEX64, S(8), 1);
    nrt_test_operand_n(&l, 3, t2, NRT_COMPLEX64, S(8), 1);
    l.scalars[0].f = 0.75;
    CHECK_OK(nrt_test_run(&l, 0));
    for (int i = 0; i < 2; i++) {
      double complex sv = s0[i][0] + I * s0[i][1], a1 = t1[i][0] + I * t1[i][1], a2 = t2[i][0] + I * t2[i][1];
      double complex want = k == 0 ? sv + 0.75 * a1 * a2 : k == 1 ? sv + 0.75 * a1 / a2 : sv + a2 * (a1 - sv);
      CHECK(nrt_test_near(r[i][0], creal(want), 1e-6) && nrt_test_near(r[i][1], cimag(want), 1e-6));
    }
    if (k == 2) continue;
    /* a complex value: self + (s0 + i s1) * t1 (* or /) t2 */
    l.scalars[1].f = -2.0;
    CHECK_OK(nrt_test_run(&l, 0));
    for (int i = 0; i < 2; i++) {
      double complex sv = s0[i][0] + I * s0[i][1], a1 = t1[i][0] + I * t1[i][1], a2 = t2[i][0] + I * t2[i][1];
      double complex v = 0.75 - 2.0 * I, want = k == 0 ? sv + v * a1 * a2 : sv + v * a1 / a2;
      CHECK(nrt_test_near(r[i][0], creal(want), 1e-6) && nrt_test_near(r[i][1], cimag(want), 1e-6));
    }
  }
}

/* CX_LOGADDEXP: finite values against log(exp(a) + exp(b)) in double
 * (angles modulo 2 pi), a complex64 a with a real float32 b (read as
 * b + 0i), on both paths; then the CPU formula's special values, which are
 * not the analytic limits: equal -inf real parts give the operand taken as
 * min (b on a tie), a NaN in any part gives NaN in both, equal +inf real
 * parts go through log(exp(min) + exp(max)). */
static void test_logaddexp(void) {
  enum { N = 23 };
  float a[N][2], b[N], out[2][N][2];
  for (int i = 0; i < N; i++) {
    a[i][0] = (float)nrt_test_uniform(-5, 5), a[i][1] = (float)nrt_test_uniform(-3, 3);
    b[i] = (float)nrt_test_uniform(-5, 5);
  }
  for (int ref = 0; ref < 2; ref++) {
    nrt_launch l = nrt_test_launch(NRT_OP(CX_LOGADDEXP), NRT_COMPLEX64, 1, S(N), 1, 2);
    nrt_test_operand_n(&l, 0, out[ref], NRT_COMPLEX64, S(8), 1);
    nrt_test_operand_n(&l, 1, a, NRT_COMPLEX64, S(8), 1);
    nrt_test_operand_n(&l, 2, b, NRT_FLOAT32, S(4), 1);
    CHECK_OK(nrt_test_run(&l, ref));
    for (int i = 0; i < N; i++) {
      double complex want = clog(cexp(CMPLX(a[i][0], a[i][1])) + exp((double)b[i]));
      CHECK_NEAR(out[ref][i][0], creal(want), 1e-5);
      CHECK(fabs(remainder(out[ref][i][1] - cimag(want), 2 * M_PI)) < 1e-5);
    }
  }
  CHECK(memcmp(out[0], out[1], sizeof out[0]) == 0);

  enum { M = 5 };
  double x[M][2] = {{-INFINITY, 1}, {1, NAN}, {2, 0}, {INFINITY, 0}, {0.5, 0.25}};
  double y[M][2] = {{-INFINITY, 2}, {0, 0}, {NAN, 0}, {INFINITY, 0}, {0.5, -0.25}};
  double r[M][2];
  nrt_launch l = nrt_test_launch(NRT_OP(CX_LOGADDEXP), NRT_COMPLEX128, 1, S(M), 1, 2);
  nrt_test_operand_n(&l, 0, r, NRT_COMPLEX128, S(16), 1);
  nrt_test_operand_n(&l, 1, x, NRT_COMPLEX128, S(16), 1);
  nrt_test_operand_n(&l, 2, y, NRT_COMPLEX128, S(16), 1);
  CHECK_OK(nrt_test_run(&l, 0));
  CHECK(r[0][0] == -INFINITY && r[0][1] == 2.0);
  CHECK(isnan(r[1][0]) && isnan(r[1][1]) && isnan(r[2][0]) && isnan(r[2][1]));
  CHECK(r[3][0] == INFINITY && r[3][1] == 0.0);
  /* equal real parts: log(e^0.5 (e^0.25i + e^-0.25i)) = 0.5 + log(2 cos 0.25) */
  CHECK_NEAR(r[4][0], 0.5 + log(2 * cos(0.25)), 1e-14);
  CHECK(fabs(r[4][1]) < 1e-15);
}

/* prod / all / any over the inner dim of [3, 4]. */
static void test_prod_all_any(void) {
  float x[3][4][2] = {{{1, 1}, {2, 0}, {0, -1}, {0.5f, 0.5f}},
                      {{0, 0}, {1, 0}, {1, 0}, {1, 0}},
                      {{0, 0}, {0, 0}, {0, 0}, {0, 0}}};
  double prod[3][2];
  uint8_t all[3], any[3];
  nrt_launch l = nrt_test_launch(NRT_OP(CX_REDUCE), NRT_COMPLEX64, 2, S(3, 4), 1, 1);
  nrt_test_operand_n(&l, 1, x, NRT_COMPLEX64, S(32, 8), 2);
  nrt_test_operand_n(&l, 0, prod, NRT_COMPLEX128, S(16, 0), 2);
  l.params[0] = 2;
  CHECK_OK(nrt_test_run(&l, 0));
  nrt_test_operand_n(&l, 0, all, NRT_BOOL, S(1, 0), 2);
  l.params[0] = 3;
  CHECK_OK(nrt_test_run(&l, 1));
  nrt_test_operand_n(&l, 0, any, NRT_BOOL, S(1, 0), 2);
  l.params[0] = 4;
  CHECK_OK(nrt_test_run(&l, 0));
  double complex p0 = (1.0 + I) * 2.0 * (-I) * (0.5 + 0.5 * I);
  CHECK(nrt_test_near(prod[0][0], creal(p0), 1e-12) && nrt_test_near(prod[0][1], cimag(p0), 1e-12));
  CHECK(prod[1][0] == 0.0 && prod[1][1] == 0.0);
  CHECK(all[0] == 1 && all[1] == 0 && all[2] == 0);
  CHECK(any[0] == 1 && any[1] == 1 && any[2] == 0);
  l.params[0] = 9;
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT);
}

/* Large enough to split over the pool: parallel and reference agree. */
static void test_parallel_matches_reference(void) {
  enum { N = 50000 };
  float *a = malloc(sizeof(float) * 2 * N), *o1 = malloc(sizeof(float) * 2 * N), *o2 = malloc(sizeof(float) * 2 * N);
  for (int i = 0; i < 2 * N; i++) a[i] = (float)nrt_test_uniform(-2, 2);
  nrt_launch l = nrt_test_launch(NRT_OP(CX_MUL), NRT_COMPLEX64, 1, S(N), 1, 2);
  nrt_test_operand_n(&l, 0, o1, NRT_COMPLEX64, S(8), 1);
  nrt_test_operand_n(&l, 1, a, NRT_COMPLEX64, S(8), 1);
  nrt_test_operand_n(&l, 2, a, NRT_COMPLEX64, S(-8), 1);
  l.operands[2].data = a + 2 * (N - 1); /* reversed view */
  CHECK_OK(nrt_test_run(&l, 0));
  nrt_test_operand_n(&l, 0, o2, NRT_COMPLEX64, S(8), 1);
  CHECK_OK(nrt_test_run(&l, 1));
  CHECK(memcmp(o1, o2, sizeof(float) * 2 * N) == 0);
  free(a);
  free(o1);
  free(o2);
}

static void test_empty_and_errors(void) {
  float out[1][2] = {{7, 7}};
  nrt_launch l = nrt_test_launch(NRT_OP(CX_FILL), NRT_COMPLEX64, 2, S(0, 3), 1, 0);
  nrt_test_operand_n(&l, 0, out, NRT_COMPLEX64, S(24, 8), 2);
  l.scalars[0].f = 1.0;
  CHECK_OK(nrt_test_run(&l, 0));
  CHECK(out[0][0] == 7.0f); /* nothing written */
  l = nrt_test_launch(NRT_OP(CX_MUL), NRT_COMPLEX64, 1, S(1), 2, 2);
  nrt_test_operand_n(&l, 0, out, NRT_COMPLEX64, S(8), 1);
  nrt_test_operand_n(&l, 1, out, NRT_COMPLEX64, S(8), 1);
  nrt_test_operand_n(&l, 2, out, NRT_COMPLEX64, S(8), 1);
  nrt_test_operand_n(&l, 3, out, NRT_COMPLEX64, S(8), 1);
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT); /* two outputs */
}

/* The mean multiplies the sum by (1/n, 0) as ATen's MeanOps, so an infinite
 * part makes the other NaN: mean([1+infj, 2]) = nan+infj, mean([-inf+1j,
 * 3+3j]) = -inf+nanj (torch 2.13 CPU); finite means are the plain ones. */
static void test_mean_of_infinite_parts(void) {
  float x[3][2][2] = {{{1, INFINITY}, {2, 0}}, {{-INFINITY, 1}, {3, 3}}, {{1, 2}, {3, -1}}};
  double m[3][2];
  nrt_launch l = nrt_test_launch(NRT_OP(CX_REDUCE), NRT_COMPLEX64, 2, S(3, 2), 1, 1);
  nrt_test_operand_n(&l, 1, x, NRT_COMPLEX64, S(16, 8), 2);
  nrt_test_operand_n(&l, 0, m, NRT_COMPLEX128, S(16, 0), 2);
  l.params[0] = 1;
  for (int ref = 0; ref < 2; ref++) {
    CHECK_OK(nrt_test_run(&l, ref));
    CHECK(isnan(m[0][0]) && m[0][1] == INFINITY);
    CHECK(m[1][0] == -INFINITY && isnan(m[1][1]));
    CHECK(m[2][0] == 2.0 && m[2][1] == 0.5);
  }
}

int main(void) {
  CHECK_OK(nrt_init());
  RUN_TEST(test_dtype_table);
  RUN_TEST(test_binary_ops);
  RUN_TEST(test_copy_convert);
  RUN_TEST(test_fill_where_compare);
  RUN_TEST(test_unary_and_constructors);
  RUN_TEST(test_sum_mean);
  RUN_TEST(test_math);
  RUN_TEST(test_logaddexp);
  RUN_TEST(test_prod_all_any);
  RUN_TEST(test_mean_of_infinite_parts);
  RUN_TEST(test_prod_cpu_order);
  RUN_TEST(test_parallel_matches_reference);
  RUN_TEST(test_empty_and_errors);
  return TEST_RESULT();
}
