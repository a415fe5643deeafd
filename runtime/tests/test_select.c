/* SELECT family tests (nrt/ops/select.h): known cases with PyTorch 2.13's
 * CPU results (NaN and tie rules), double-precision references computed
 * here, and the fast paths against the reference paths on random inputs
 * with non-contiguous strides, in float32, bfloat16 and int64. */
#include <complex.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"
#include "nrt/ops/select.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

/* ---- CUMMAX / CUMMIN ----------------------------------------------------------- */

static void test_cummax_known(void) {
  /* torch.cummax(torch.tensor([1., 3., nan, 2., nan, 5.]), 0) and ties:
   * cummax([2., 2., 1.]) -> indices [0, 1, 1]; cummin -> [0, 1, 2]. */
  float x[6] = {1, 3, NAN, 2, NAN, 5}, v[6];
  int64_t ix[6];
  for (int r = 0; r < 2; r++) {
    nrt_launch l = nrt_test_launch(NRT_OP(CUMMAX), NRT_FLOAT32, 1, S(6), 2, 1);
    nrt_test_operand_n(&l, 0, v, NRT_FLOAT32, S(4), 1);
    nrt_test_operand_n(&l, 1, ix, NRT_INT64, S(8), 1);
    nrt_test_operand_n(&l, 2, x, NRT_FLOAT32, S(4), 1);
    CHECK_OK(nrt_test_run(&l, r));
    float wv[6] = {1, 3, NAN, NAN, NAN, NAN};
    int64_t wi[6] = {0, 1, 2, 2, 4, 4};
    for (int i = 0; i < 6; i++) CHECK(nrt_test_same(v[i], wv[i]) && ix[i] == wi[i]);
    float t[3] = {2, 2, 1}, tv[3];
    int64_t ti[3];
    nrt_test_operand_n(&l, 0, tv, NRT_FLOAT32, S(4), 1);
    nrt_test_operand_n(&l, 1, ti, NRT_INT64, S(8), 1);
    nrt_test_operand_n(&l, 2, t, NRT_FLOAT32, S(4), 1);
    l.sizes[0] = 3;
    CHECK_OK(nrt_test_run(&l, r));
    CHECK(ti[0] == 0 && ti[1] == 1 && ti[2] == 1 && tv[2] == 2);
    l.op = NRT_OP(CUMMIN);
    CHECK_OK(nrt_test_run(&l, r));
    CHECK(ti[0] == 0 && ti[1] == 1 && ti[2] == 2 && tv[2] == 1);
  }
}

/* Random rows read through a transposed view (rows along the strided dim),
 * fast against reference, for each dtype. */
static void test_cummax_random(void) {
  enum { R = 7, N = 61 };
  nrt_dtype dts[3] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_INT64};
  for (int t = 0; t < 3; t++) {
    nrt_dtype dt = dts[t];
    int64_t es = (int64_t)nrt_dtype_size(dt);
    char *x = malloc((size_t)(R * N * es)), *v[2];
    int64_t *ix[2];
    for (int k = 0; k < 2; k++) {
      v[k] = malloc((size_t)(R * N * es));
      ix[k] = malloc(R * N * 8);
    }
    for (int i = 0; i < R * N; i++) {
      double d = (double)nrt_test_rand_range(-5, 6);
      if (nrt_test_rand_u64() % 17 == 0 && dt != NRT_INT64) d = NAN;
      nrt_ref_store_f64(x + i * es, dt, d);
    }
    for (int op = 0; op < 2; op++)
      for (int r = 0; r < 2; r++) {
        /* input stored [N][R]: row r has stride R elements */
        nrt_launch l = nrt_test_launch(op ? NRT_OP(CUMMIN) : NRT_OP(CUMMAX), NRT_FLOAT32, 2, S(R, N), 2, 1);
        nrt_test_operand_n(&l, 0, v[r], dt, S(N * es, es), 2);
        nrt_test_operand_n(&l, 1, ix[r], NRT_INT64, S(N * 8, 8), 2);
        nrt_test_operand_n(&l, 2, x, dt, S(es, R * es), 2);
        l.compute_dtype = dt;
        CHECK_OK(nrt_test_run(&l, r));
      }
    CHECK(memcmp(v[0], v[1], (size_t)(R * N * es)) == 0);
    CHECK(memcmp(ix[0], ix[1], R * N * 8) == 0);
    free(x);
    for (int k = 0; k < 2; k++) {
      free(v[k]);
      free(ix[k]);
    }
  }
}

/* ---- LOGCUMSUMEXP ----------------------------------------------------------------- */

static void test_logcumsumexp(void) {
  enum { N = 40 };
  float x[N], out[2][N];
  for (int i = 0; i < N; i++) x[i] = (float)((double)nrt_test_rand_range(-3000, 3000) / 100.0);
  x[5] = -INFINITY;
  for (int r = 0; r < 2; r++) {
    nrt_launch l = nrt_test_launch(NRT_OP(LOGCUMSUMEXP), NRT_FLOAT32, 1, S(N), 1, 1);
    nrt_test_operand_n(&l, 0, out[r], NRT_FLOAT32, S(4), 1);
    nrt_test_operand_n(&l, 1, x, NRT_FLOAT32, S(4), 1);
    CHECK_OK(nrt_test_run(&l, r));
    double s = 0;
    for (int i = 0; i < N; i++) {
      s += exp((double)x[i]);
      CHECK_NEAR(out[r][i], log(s), 1e-6);
    }
  }
  /* Edge rows: all -inf stays -inf; +inf then anything is +inf; NaN
   * propagates. */
  float e[4] = {-INFINITY, -INFINITY, INFINITY, NAN}, eo[4];
  for (int r = 0; r < 2; r++) {
    nrt_launch l = nrt_test_launch(NRT_OP(LOGCUMSUMEXP), NRT_FLOAT32, 1, S(4), 1, 1);
    nrt_test_operand_n(&l, 0, eo, NRT_FLOAT32, S(4), 1);
    nrt_test_operand_n(&l, 1, e, NRT_FLOAT32, S(4), 1);
    CHECK_OK(nrt_test_run(&l, r));
    CHECK(eo[0] == -INFINITY && eo[1] == -INFINITY && eo[2] == INFINITY && isnan(eo[3]));
  }
}

/* Complex rows (p0 = 1) through float32 real views: finite rows against
 * log(sum exp) in double, on both paths, with a row stride of two elements
 * on input and output; then the CPU formula's special values: equal -inf
 * real parts keep the running value's (-inf + 0i), a NaN part poisons both
 * parts from there on, +inf takes the element's angle and keeps it. */
static void test_logcumsumexp_complex(void) {
  enum { R = 3, N = 9 };
  float x[R][2 * N][2], out[2][R][2 * N][2];
  for (int r = 0; r < R; r++)
    for (int i = 0; i < 2 * N; i++) x[r][i][0] = (float)nrt_test_uniform(-4, 4), x[r][i][1] = (float)nrt_test_uniform(-3, 3);
  for (int ref = 0; ref < 2; ref++) {
    memset(out[ref], 0, sizeof out[ref]);
    nrt_launch l = nrt_test_launch(NRT_OP(LOGCUMSUMEXP), NRT_FLOAT32, 2, S(R, N), 1, 1);
    nrt_test_operand_n(&l, 0, out[ref], NRT_FLOAT32, S(2 * N * 8, 16), 2);
    nrt_test_operand_n(&l, 1, x, NRT_FLOAT32, S(2 * N * 8, 16), 2);
    l.params[0] = 1;
    CHECK_OK(nrt_test_run(&l, ref));
    for (int r = 0; r < R; r++) {
      double complex s = 0;
      for (int i = 0; i < N; i++) {
        s += cexp(CMPLX(x[r][2 * i][0], x[r][2 * i][1]));
        double complex want = clog(s);
        /* the angle is defined modulo 2 pi */
        double dphi = remainder(out[ref][r][2 * i][1] - cimag(want), 2 * M_PI);
        CHECK_NEAR(out[ref][r][2 * i][0], creal(want), 1e-5);
        CHECK(fabs(dphi) < 1e-5);
        CHECK(out[ref][r][2 * i + 1][0] == 0.0f && out[ref][r][2 * i + 1][1] == 0.0f); /* gaps untouched */
      }
    }
  }
  CHECK(memcmp(out[0], out[1], sizeof out[0]) == 0);

  double e[3][3][2] = {{{-INFINITY, 3}, {-INFINITY, 1}, {-INFINITY, -2}},
                       {{1, NAN}, {2, 0}, {-1, 1}},
                       {{INFINITY, 0.5}, {1, 1}, {-INFINITY, 0}}};
  double eo[3][3][2];
  for (int ref = 0; ref < 2; ref++) {
    nrt_launch l = nrt_test_launch(NRT_OP(LOGCUMSUMEXP), NRT_FLOAT64, 2, S(3, 3), 1, 1);
    nrt_test_operand_n(&l, 0, eo, NRT_FLOAT64, S(48, 16), 2);
    nrt_test_operand_n(&l, 1, e, NRT_FLOAT64, S(48, 16), 2);
    l.params[0] = 1;
    CHECK_OK(nrt_test_run(&l, ref));
    for (int i = 0; i < 3; i++) {
      CHECK(eo[0][i][0] == -INFINITY && eo[0][i][1] == 0.0);
      CHECK(isnan(eo[1][i][0]) && isnan(eo[1][i][1]));
      CHECK(eo[2][i][0] == INFINITY && eo[2][i][1] == 0.5);
    }
  }
  nrt_launch l = nrt_test_launch(NRT_OP(LOGCUMSUMEXP), NRT_FLOAT64, 2, S(3, 3), 1, 1);
  nrt_test_operand_n(&l, 0, eo, NRT_FLOAT64, S(48, 16), 2);
  nrt_test_operand_n(&l, 1, e, NRT_FLOAT64, S(48, 16), 2);
  l.params[0] = 2;
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT);
}

/* ---- ORDER_STAT --------------------------------------------------------------------- */

static int cmp_nan_last(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  if (isnan(x)) return isnan(y) ? 0 : 1;
  if (isnan(y)) return -1;
  return x < y ? -1 : x > y;
}

static void test_order_stat_known(void) {
  /* median([3, 1, 2, 2]) = 2 (the lower median), index of a 2;
   * median with a NaN is NaN; nanmedian([nan, 4, 1]) = 1;
   * mode([1, 2, 2, 3, 3]) = 2 (smallest on ties), index 2 (its last). */
  float a[4] = {3, 1, 2, 2}, b[3] = {NAN, 4, 1}, m[5] = {1, 2, 2, 3, 3}, v;
  int64_t ix;
  for (int r = 0; r < 2; r++) {
    nrt_launch l = nrt_test_launch(NRT_OP(ORDER_STAT), NRT_FLOAT32, 1, S(4), 2, 1);
    nrt_test_operand_n(&l, 0, &v, NRT_FLOAT32, S(0), 1);
    nrt_test_operand_n(&l, 1, &ix, NRT_INT64, S(0), 1);
    nrt_test_operand_n(&l, 2, a, NRT_FLOAT32, S(4), 1);
    l.params[0] = 1;
    CHECK_OK(nrt_test_run(&l, r));
    CHECK(v == 2 && a[ix] == 2);
    l.params[0] = 0;
    l.params[1] = 3;
    CHECK_OK(nrt_test_run(&l, r));
    CHECK(v == 3 && ix == 0);
    l.params[1] = 4;
    CHECK_STATUS(nrt_test_run(&l, r), NRT_ERROR_INVALID_ARGUMENT);
    l.sizes[0] = 3;
    nrt_test_operand_n(&l, 2, b, NRT_FLOAT32, S(4), 1);
    l.params[0] = 1;
    CHECK_OK(nrt_test_run(&l, r));
    CHECK(isnan(v) && ix == 0);
    l.params[0] = 2;
    CHECK_OK(nrt_test_run(&l, r));
    CHECK(v == 1 && ix == 2);
    l.sizes[0] = 5;
    nrt_test_operand_n(&l, 2, m, NRT_FLOAT32, S(4), 1);
    l.params[0] = 3;
    CHECK_OK(nrt_test_run(&l, r));
    CHECK(v == 2 && ix == 2);
  }
}

static void test_order_stat_random(void) {
  enum { R = 9, N = 57 };
  nrt_dtype dts[3] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_INT64};
  for (int t = 0; t < 3; t++) {
    nrt_dtype dt = dts[t];
    int64_t es = (int64_t)nrt_dtype_size(dt);
    char *x = malloc((size_t)(R * N * es));
    for (int i = 0; i < R * N; i++) {
      double d = (double)nrt_test_rand_range(-20, 20) / (dt == NRT_INT64 ? 1 : 4);
      if (nrt_test_rand_u64() % 23 == 0 && dt != NRT_INT64) d = NAN;
      nrt_ref_store_f64(x + i * es, dt, d);
    }
    for (int stat = 0; stat < 4; stat++) {
      char v[2][R * 8];
      int64_t ix[2][R];
      for (int r = 0; r < 2; r++) {
        nrt_launch l = nrt_test_launch(NRT_OP(ORDER_STAT), NRT_FLOAT32, 2, S(R, N), 2, 1);
        nrt_test_operand_n(&l, 0, v[r], dt, S(es, 0), 2);
        nrt_test_operand_n(&l, 1, ix[r], NRT_INT64, S(8, 0), 2);
        nrt_test_operand_n(&l, 2, x, dt, S(es, R * es), 2); /* transposed rows */
        l.compute_dtype = dt;
        l.params[0] = stat;
        l.params[1] = 17;
        CHECK_OK(nrt_test_run(&l, r));
      }
      CHECK(memcmp(v[0], v[1], (size_t)(R * es)) == 0);
      CHECK(memcmp(ix[0], ix[1], sizeof ix[0]) == 0);
      /* Values against a qsort of the row; the index must select it. */
      for (int row = 0; row < R; row++) {
        double s[N];
        int nans = 0;
        for (int j = 0; j < N; j++) {
          s[j] = nrt_ref_load_f64(x + (j * R + row) * es, dt);
          nans += isnan(s[j]);
        }
        qsort(s, N, sizeof s[0], cmp_nan_last);
        double got = nrt_ref_load_f64(v[0] + row * es, dt);
        double at = nrt_ref_load_f64(x + (ix[0][row] * R + row) * es, dt);
        CHECK(nrt_test_same((float)got, (float)at));
        if (stat == 0) CHECK(nrt_test_same((float)got, (float)s[17]));
        if (stat == 1) CHECK(nrt_test_same((float)got, (float)(nans ? NAN : s[(N - 1) / 2])));
        if (stat == 2) CHECK(nrt_test_same((float)got, (float)s[(N - nans - 1) / 2]));
      }
    }
    free(x);
  }
}

/* ---- UNIQUE_SLICES ---------------------------------------------------------------------- */

static void test_unique(void) {
  /* torch.unique(tensor([2., nan, 1., 2., nan]), return_inverse, counts):
   * values [1, 2, nan, nan], inverse [1, 2, 0, 1, 3], counts [1, 2, 1, 1]. */
  float x[5] = {2, NAN, 1, 2, NAN};
  int64_t perm[5], group[5], starts[6], count;
  for (int r = 0; r < 2; r++) {
    nrt_launch l = nrt_test_launch(NRT_OP(UNIQUE_SLICES), NRT_FLOAT32, 2, S(5, 1), 4, 1);
    nrt_test_operand_n(&l, 0, perm, NRT_INT64, S(8), 1);
    nrt_test_operand_n(&l, 1, group, NRT_INT64, S(8), 1);
    nrt_test_operand_n(&l, 2, starts, NRT_INT64, S(8), 1);
    nrt_test_operand_n(&l, 3, &count, NRT_INT64, S(8), 1);
    nrt_test_operand_n(&l, 4, x, NRT_FLOAT32, S(4, 4), 2);
    l.params[0] = 1;
    CHECK_OK(nrt_test_run(&l, r));
    CHECK(count == 4);
    int64_t wp[5] = {2, 0, 3, 1, 4}, wg[5] = {0, 1, 1, 2, 3}, ws[5] = {0, 1, 3, 4, 5};
    for (int i = 0; i < 5; i++) CHECK(perm[i] == wp[i] && group[i] == wg[i] && starts[i] == ws[i]);
    /* consecutive: [2], [nan], [1], [2], [nan] all distinct */
    l.params[0] = 0;
    CHECK_OK(nrt_test_run(&l, r));
    CHECK(count == 5 && perm[3] == 3 && group[4] == 4);
  }
  /* Slices (unique dim=0) of a [4][2] int64 matrix stored transposed. */
  int64_t m[8] = {/* column 0 */ 1, 0, 1, 0, /* column 1 */ 2, 5, 2, 1};
  for (int r = 0; r < 2; r++) {
    nrt_launch l = nrt_test_launch(NRT_OP(UNIQUE_SLICES), NRT_FLOAT32, 2, S(4, 2), 4, 1);
    nrt_test_operand_n(&l, 0, perm, NRT_INT64, S(8), 1);
    nrt_test_operand_n(&l, 1, group, NRT_INT64, S(8), 1);
    nrt_test_operand_n(&l, 2, starts, NRT_INT64, S(8), 1);
    nrt_test_operand_n(&l, 3, &count, NRT_INT64, S(8), 1);
    nrt_test_operand_n(&l, 4, m, NRT_INT64, S(8, 32), 2);
    l.compute_dtype = NRT_INT64;
    l.params[0] = 1;
    CHECK_OK(nrt_test_run(&l, r));
    /* rows (1,2) (0,5) (1,2) (0,1) -> sorted (0,1) (0,5) (1,2) (1,2) */
    CHECK(count == 3 && perm[0] == 3 && perm[1] == 1 && perm[2] == 0 && perm[3] == 2);
    CHECK(group[3] == 2 && starts[2] == 2 && starts[3] == 4);
  }
}

/* ---- SEARCHSORTED ------------------------------------------------------------------------- */

static void test_searchsorted(void) {
  /* boundaries [1, 3, 3, 5]; values [0, 3, 4, 9, nan]:
   * left [0, 1, 3, 4, 4], right [0, 3, 3, 4, 4]. */
  float b[4] = {1, 3, 3, 5}, v[5] = {0, 3, 4, 9, NAN};
  int64_t out[5];
  int32_t out32[5];
  int64_t wl[5] = {0, 1, 3, 4, 4}, wr[5] = {0, 3, 3, 4, 4};
  for (int r = 0; r < 2; r++) {
    nrt_launch l = nrt_test_launch(NRT_OP(SEARCHSORTED), NRT_FLOAT32, 2, S(1, 5), 1, 2);
    nrt_test_operand_n(&l, 0, out, NRT_INT64, S(0, 8), 2);
    nrt_test_operand_n(&l, 1, v, NRT_FLOAT32, S(0, 4), 2);
    nrt_test_operand_n(&l, 2, b, NRT_FLOAT32, S(0, 4), 2);
    l.params[1] = 4;
    CHECK_OK(nrt_test_run(&l, r));
    for (int i = 0; i < 5; i++) CHECK(out[i] == wl[i]);
    l.params[0] = 1;
    nrt_test_operand_n(&l, 0, out32, NRT_INT32, S(0, 4), 2);
    CHECK_OK(nrt_test_run(&l, r));
    for (int i = 0; i < 5; i++) CHECK(out32[i] == wr[i]);
  }
  /* sorter: boundaries [5, 1, 3] sorted by [1, 2, 0]; two rows of values. */
  int64_t bi[6] = {5, 1, 3, 2, 0, 1}, so[6] = {1, 2, 0, 1, 2, 0}, vi[4] = {2, 5, 1, 3};
  for (int r = 0; r < 2; r++) {
    nrt_launch l = nrt_test_launch(NRT_OP(SEARCHSORTED), NRT_FLOAT32, 2, S(2, 2), 1, 3);
    nrt_test_operand_n(&l, 0, out, NRT_INT64, S(16, 8), 2);
    nrt_test_operand_n(&l, 1, vi, NRT_INT64, S(16, 8), 2);
    nrt_test_operand_n(&l, 2, bi, NRT_INT64, S(24, 8), 2);
    nrt_test_operand_n(&l, 3, so, NRT_INT64, S(24, 8), 2);
    l.compute_dtype = NRT_INT64;
    l.params[1] = 3;
    CHECK_OK(nrt_test_run(&l, r));
    /* row 0 sorted [1, 3, 5]: 2 -> 1, 5 -> 2; row 1 sorted [0, 1, 2]: 1 -> 1, 3 -> 3 */
    CHECK(out[0] == 1 && out[1] == 2 && out[2] == 1 && out[3] == 3);
  }
}

/* ---- HISTOGRAM ------------------------------------------------------------------------------ */

static void test_histogram(void) {
  /* histc(tensor([0., 1., 1., 2., 3., 4., nan, 5.]), bins=4, min=0, max=4):
   * [1, 2, 1, 2] (4 is in the closed last bin; nan and 5 skipped). */
  float x[8] = {0, 1, 1, 2, 3, 4, NAN, 5}, e[5] = {0, 1, 2, 3, 4}, h[4];
  for (int algo = 0; algo < 3; algo++)
    for (int r = 0; r < 2; r++) {
      nrt_launch l = nrt_test_launch(NRT_OP(HISTOGRAM), NRT_FLOAT32, 2, S(8, 1), 1, 2);
      nrt_test_operand_n(&l, 0, h, NRT_FLOAT32, S(4), 1);
      nrt_test_operand_n(&l, 1, x, NRT_FLOAT32, S(4, 4), 2);
      nrt_test_operand_n(&l, 2, e, NRT_FLOAT32, S(4), 1);
      l.aux[0] = 5;
      l.params[0] = algo;
      CHECK_OK(nrt_test_run(&l, r));
      CHECK(h[0] == 1 && h[1] == 2 && h[2] == 1 && h[3] == 2);
    }
  /* 2-d with weights: points (0.5, 0.5) w2, (1.5, 0.2) w3, (0.1, 1.9) w1
   * on edges {0,1,2} x {0,1,2}: hist [[2, 1], [3, 0]]. */
  float p[6] = {0.5f, 0.5f, 1.5f, 0.2f, 0.1f, 1.9f}, ee[6] = {0, 1, 2, 0, 1, 2}, w[3] = {2, 3, 1}, hh[4];
  for (int r = 0; r < 2; r++) {
    nrt_launch l = nrt_test_launch(NRT_OP(HISTOGRAM), NRT_FLOAT32, 2, S(3, 2), 1, 3);
    nrt_test_operand_n(&l, 0, hh, NRT_FLOAT32, S(8, 4), 2);
    nrt_test_operand_n(&l, 1, p, NRT_FLOAT32, S(8, 4), 2);
    nrt_test_operand_n(&l, 2, ee, NRT_FLOAT32, S(4), 1);
    nrt_test_operand_n(&l, 3, w, NRT_FLOAT32, S(4), 1);
    l.aux[0] = 3;
    l.aux[1] = 3;
    CHECK_OK(nrt_test_run(&l, r));
    CHECK(hh[0] == 2 && hh[1] == 1 && hh[2] == 3 && hh[3] == 0);
  }
}

/* ---- fast against reference on random inputs --------------------------------------------- */

static void test_random_fast_vs_reference(void) {
  enum { R = 13, C = 29, NB = 40, N = 500 };
  /* searchsorted over per-row sorted boundaries (bfloat16, with NaN values) */
  uint16_t b[R * NB], v[R * C];
  for (int r = 0; r < R; r++) {
    float prev = -20;
    for (int j = 0; j < NB; j++) {
      prev += (float)nrt_test_rand_range(0, 3) / 2;
      b[r * NB + j] = nrt_f32_to_bf16(prev);
    }
  }
  for (int i = 0; i < R * C; i++)
    v[i] = nrt_f32_to_bf16(nrt_test_rand_u64() % 19 == 0 ? NAN : (float)nrt_test_rand_range(-50, 50) / 2);
  for (int right = 0; right < 2; right++) {
    int64_t out[2][R * C];
    for (int r = 0; r < 2; r++) {
      nrt_launch l = nrt_test_launch(NRT_OP(SEARCHSORTED), NRT_FLOAT32, 2, S(R, C), 1, 2);
      nrt_test_operand_n(&l, 0, out[r], NRT_INT64, S(C * 8, 8), 2);
      nrt_test_operand_n(&l, 1, v, NRT_BFLOAT16, S(C * 2, 2), 2);
      nrt_test_operand_n(&l, 2, b, NRT_BFLOAT16, S(NB * 2, 2), 2);
      l.compute_dtype = NRT_BFLOAT16;
      l.params[0] = right;
      l.params[1] = NB;
      CHECK_OK(nrt_test_run(&l, r));
    }
    CHECK(memcmp(out[0], out[1], sizeof out[0]) == 0);
  }
  /* histogram, three selections, float16 points with a weight */
  uint16_t p[N], w[N], e[11];
  for (int i = 0; i < N; i++) {
    p[i] = nrt_k_f32_to_f16((float)nrt_test_rand_range(-1200, 1200) / 100);
    w[i] = nrt_k_f32_to_f16((float)nrt_test_rand_range(0, 8) / 4);
  }
  for (int j = 0; j <= 10; j++) e[j] = nrt_k_f32_to_f16(-10.0f + 2.0f * (float)j);
  for (int algo = 0; algo < 3; algo++) {
    uint16_t h[2][10];
    for (int r = 0; r < 2; r++) {
      nrt_launch l = nrt_test_launch(NRT_OP(HISTOGRAM), NRT_FLOAT32, 2, S(N, 1), 1, 3);
      nrt_test_operand_n(&l, 0, h[r], NRT_FLOAT16, S(2), 1);
      nrt_test_operand_n(&l, 1, p, NRT_FLOAT16, S(2, 2), 2);
      nrt_test_operand_n(&l, 2, e, NRT_FLOAT16, S(2), 1);
      nrt_test_operand_n(&l, 3, w, NRT_FLOAT16, S(2), 1);
      l.aux[0] = 11;
      l.params[0] = algo;
      CHECK_OK(nrt_test_run(&l, r));
    }
    CHECK(memcmp(h[0], h[1], sizeof h[0]) == 0);
    /* against a count done here (edges are exact multiples of 2) */
    double want[10] = {0};
    for (int i = 0; i < N; i++) {
      double x = nrt_k_f16_to_f32(p[i]);
      if (x < -10 || x > 10) continue;
      int bin = (int)floor((x + 10) / 2);
      want[bin < 10 ? bin : 9] += nrt_k_f16_to_f32(w[i]);
    }
    for (int j = 0; j < 10; j++) CHECK(nrt_k_f16_to_f32(h[0][j]) == nrt_k_f16_to_f32(nrt_k_f32_to_f16((float)want[j])));
  }
  /* unique slices of random int64 rows with many repeats */
  enum { U = 300, M = 3 };
  int64_t x[U * M];
  for (int i = 0; i < U * M; i++) x[i] = nrt_test_rand_range(0, 3);
  for (int sort = 0; sort < 2; sort++) {
    int64_t perm[2][U], group[2][U], starts[2][U + 1], count[2];
    for (int r = 0; r < 2; r++) {
      nrt_launch l = nrt_test_launch(NRT_OP(UNIQUE_SLICES), NRT_FLOAT32, 2, S(U, M), 4, 1);
      nrt_test_operand_n(&l, 0, perm[r], NRT_INT64, S(8), 1);
      nrt_test_operand_n(&l, 1, group[r], NRT_INT64, S(8), 1);
      nrt_test_operand_n(&l, 2, starts[r], NRT_INT64, S(8), 1);
      nrt_test_operand_n(&l, 3, &count[r], NRT_INT64, S(8), 1);
      nrt_test_operand_n(&l, 4, x, NRT_INT64, S(M * 8, 8), 2);
      l.compute_dtype = NRT_INT64;
      l.params[0] = sort;
      CHECK_OK(nrt_test_run(&l, r));
    }
    CHECK(count[0] == count[1]);
    CHECK(memcmp(perm[0], perm[1], sizeof perm[0]) == 0 && memcmp(group[0], group[1], sizeof group[0]) == 0);
    CHECK(memcmp(starts[0], starts[1], (size_t)(count[0] + 1) * 8) == 0);
    if (sort) CHECK(count[0] <= 27);
  }
}

static void test_bad_descriptors(void) {
  float x[4] = {0}, v[4];
  int64_t ix[4];
  nrt_launch l = nrt_test_launch(NRT_OP(CUMMAX), NRT_FLOAT32, 1, S(4), 1, 1);
  nrt_test_operand_n(&l, 0, v, NRT_FLOAT32, S(4), 1);
  nrt_test_operand_n(&l, 1, x, NRT_FLOAT32, S(4), 1);
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT); /* needs 2 outputs */
  l = nrt_test_launch(NRT_OP(ORDER_STAT), NRT_FLOAT32, 1, S(4), 2, 1);
  nrt_test_operand_n(&l, 0, v, NRT_FLOAT32, S(0), 1);
  nrt_test_operand_n(&l, 1, ix, NRT_FLOAT32, S(0), 1); /* index output must be integer */
  nrt_test_operand_n(&l, 2, x, NRT_FLOAT32, S(4), 1);
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT);
  l = nrt_test_launch(NRT_OP(LOGCUMSUMEXP), NRT_FLOAT32, 1, S(4), 1, 1);
  nrt_test_operand_n(&l, 0, ix, NRT_INT64, S(8), 1);
  nrt_test_operand_n(&l, 1, ix, NRT_INT64, S(8), 1);
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT);
}

/* ---- REPEAT_INTERLEAVE / NONZERO_STATIC --------------------------------------------------------- */

static void test_repeat_nonzero_static(void) {
  int32_t rep[3] = {2, 0, 3};
  int64_t out[5];
  nrt_launch l = nrt_test_launch(NRT_OP(REPEAT_INTERLEAVE), NRT_FLOAT32, 1, S(3), 1, 1);
  nrt_test_operand_n(&l, 0, out, NRT_INT64, S(8), 1);
  nrt_test_operand_n(&l, 1, rep, NRT_INT32, S(4), 1);
  l.params[0] = 5;
  CHECK_OK(nrt_test_run(&l, 0));
  int64_t want[5] = {0, 0, 2, 2, 2};
  for (int i = 0; i < 5; i++) CHECK(out[i] == want[i]);
  rep[1] = -1;
  CHECK_STATUS(nrt_test_run(&l, 0), NRT_ERROR_INVALID_ARGUMENT);

  /* nonzero_static([[0, 1], [2, 0]], size=3, fill_value=-1) on a
   * transposed view: [[0, 2], [1, 0]] -> (0,1), (1,0), (-1,-1). */
  float x[4] = {0, 1, 2, 0};
  int64_t nz[6];
  nrt_launch n = nrt_test_launch(NRT_OP(NONZERO_STATIC), NRT_FLOAT32, 2, S(2, 2), 1, 1);
  nrt_test_operand_n(&n, 0, nz, NRT_INT64, S(16, 8), 2);
  nrt_test_operand_n(&n, 1, x, NRT_FLOAT32, S(4, 8), 2);
  n.params[0] = 3;
  n.scalars[0].i = -1;
  CHECK_OK(nrt_test_run(&n, 0));
  int64_t wn[6] = {0, 1, 1, 0, -1, -1};
  for (int i = 0; i < 6; i++) CHECK(nz[i] == wn[i]);
}

int main(void) {
  CHECK_OK(nrt_init());
  RUN_TEST(test_cummax_known);
  RUN_TEST(test_cummax_random);
  RUN_TEST(test_logcumsumexp);
  RUN_TEST(test_logcumsumexp_complex);
  RUN_TEST(test_order_stat_known);
  RUN_TEST(test_order_stat_random);
  RUN_TEST(test_unique);
  RUN_TEST(test_searchsorted);
  RUN_TEST(test_histogram);
  RUN_TEST(test_random_fast_vs_reference);
  RUN_TEST(test_bad_descriptors);
  RUN_TEST(test_repeat_nonzero_static);
  return TEST_RESULT();
}
