/* Norm kernel tests (LAYER_NORM, LAYER_NORM_BACKWARD): known values from
 * PyTorch 2.13 (float64 results, pasted), a double-precision reference in
 * the test, the backward against central finite differences, the fast
 * paths (baseline and AVX-512 builds) against the reference path over
 * dtypes, layouts and weight/bias combinations, and operand-count errors. */
#include <stdint.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"
#include "nrt/ops/norm.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

/* Contiguous float32 [rows, n] forward; w/b may be NULL. */
static nrt_status ln_forward(float *y, float *mean, float *rstd, const float *x, const float *w,
                             const float *b, int64_t rows, int64_t n, double eps, int reference) {
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP(LAYER_NORM);
  l.ndim = 2;
  l.sizes[0] = rows;
  l.sizes[1] = n;
  l.noutputs = 3;
  l.compute_dtype = NRT_FLOAT32;
  nrt_test_operand(&l, 0, y, NRT_FLOAT32, S(n * 4, 4));
  nrt_test_operand(&l, 1, mean, NRT_FLOAT32, S(4, 0));
  nrt_test_operand(&l, 2, rstd, NRT_FLOAT32, S(4, 0));
  nrt_test_operand(&l, 3, x, NRT_FLOAT32, S(n * 4, 4));
  int k = 4;
  if (w) nrt_test_operand(&l, k++, w, NRT_FLOAT32, S(0, 4));
  if (b) nrt_test_operand(&l, k++, b, NRT_FLOAT32, S(0, 4));
  l.ninputs = k - 3;
  l.params[1] = (w ? 1 : 0) | (b ? 2 : 0);
  l.scalars[0].f = eps;
  return nrt_test_run(&l, reference);
}

static nrt_status ln_backward(float *gx, const float *gy, const float *x, const float *mean,
                              const float *rstd, const float *w, int64_t rows, int64_t n, int reference) {
  nrt_launch l = nrt_test_launch(NRT_OP(LAYER_NORM_BACKWARD), NRT_FLOAT32, 2, S(rows, n), 1, w ? 5 : 4);
  nrt_test_operand(&l, 0, gx, NRT_FLOAT32, S(n * 4, 4));
  nrt_test_operand(&l, 1, gy, NRT_FLOAT32, S(n * 4, 4));
  nrt_test_operand(&l, 2, x, NRT_FLOAT32, S(n * 4, 4));
  nrt_test_operand(&l, 3, mean, NRT_FLOAT32, S(4, 0));
  nrt_test_operand(&l, 4, rstd, NRT_FLOAT32, S(4, 0));
  if (w) nrt_test_operand(&l, 5, w, NRT_FLOAT32, S(0, 4));
  return nrt_test_run(&l, reference);
}

/* ---- known values (torch.native_layer_norm in float64) ---------------------------- */

static void test_known_values(void) {
  const float x[8] = {1, 2, 3, 4, -1, 0.5f, 2, 10};
  const float w[4] = {1, 0.5f, 2, -1}, b[4] = {0, 0.1f, -0.2f, 0.3f};
  const float gy[8] = {0.1f, -0.2f, 0.3f, 0.4f, 1, 2, -1, 0.5f};
  const double y_wb[8] = {-1.3416354199689269, -0.12360590332815449, 0.694423613312618,
                          -1.0416354199689268, -0.9121590711022134, -0.17953261856358152,
                          -0.6119428063042254, -1.377195711381489};
  const double y_plain[8] = {-1.3416354199689269, -0.447211806656309, 0.447211806656309,
                             1.3416354199689269, -0.9121590711022134, -0.559065237127163,
                             -0.20597140315211268, 1.677195711381489};
  const double mean_want[2] = {2.5, 2.875}, rstd_want[2] = {0.894423613312618, 0.23539588931670022};
  const double gx_w[8] = {-0.06260879429208366, -0.16994020031613088, 0.5277096456411781,
                          -0.2951606510329636, 0.16294292529027699, 0.20237935762228115,
                          -0.4643718779958153, 0.09904959508325721};
  const double gx_plain[8] = {0.14310627551036953, -0.25043911260074947, 0.07155438993822591,
                              0.035778447152154114, 0.03536036420850894, 0.2912387416356299,
                              -0.39446643820405, 0.06786733235991113};
  for (int r = 0; r < 2; r++)
    for (int flags = 0; flags < 4; flags++) {
      const float *wp = flags & 1 ? w : NULL, *bp = flags & 2 ? b : NULL;
      float y[8], mean[2], rstd[2];
      CHECK_OK(ln_forward(y, mean, rstd, x, wp, bp, 2, 4, 1e-5, r));
      for (int i = 0; i < 8; i++) {
        double want = y_plain[i] * (wp ? w[i % 4] : 1) + (bp ? b[i % 4] : 0);
        if (flags == 3) want = y_wb[i];
        CHECK_NEAR(y[i], want, 2e-6);
      }
      for (int i = 0; i < 2; i++) {
        CHECK_NEAR(mean[i], mean_want[i], 1e-7);
        CHECK_NEAR(rstd[i], rstd_want[i], 1e-6);
      }
      if (flags != 0 && flags != 1) continue;
      float gx[8];
      CHECK_OK(ln_backward(gx, gy, x, mean, rstd, wp, 2, 4, r));
      for (int i = 0; i < 8; i++) CHECK_NEAR(gx[i], wp ? gx_w[i] : gx_plain[i], 2e-6);
    }
}

/* ---- against a double-precision reference written here ------------------------------ */

static void ref_forward(double *y, double *mean, double *rstd, const float *x, const float *w,
                        const float *b, int64_t n, double eps) {
  double s = 0, q = 0;
  for (int64_t i = 0; i < n; i++) s += x[i];
  double m = s / (double)n;
  for (int64_t i = 0; i < n; i++) q += (x[i] - m) * (x[i] - m);
  double r = 1 / sqrt(q / (double)n + eps);
  for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * r * (w ? w[i] : 1) + (b ? b[i] : 0);
  *mean = m;
  *rstd = r;
}

static void test_against_double(void) {
  enum { ROWS = 24, N = 777 };
  float *x = malloc(ROWS * N * sizeof *x), *y = malloc(ROWS * N * sizeof *y);
  float w[N], b[N], mean[ROWS], rstd[ROWS];
  double yr[N];
  for (int i = 0; i < N; i++) {
    w[i] = (float)nrt_test_uniform(-2, 2);
    b[i] = (float)nrt_test_uniform(-1, 1);
  }
  /* offsets up to 1e3 with unit spread: a one-pass variance would cancel */
  for (int row = 0; row < ROWS; row++) {
    double off = row % 3 == 0 ? 1000 : (row % 3 == 1 ? -3 : 0), scale = row % 4 == 0 ? 1e-3 : 1;
    for (int i = 0; i < N; i++) x[row * N + i] = (float)(off + scale * nrt_test_uniform(-1, 1));
  }
  for (int r = 0; r < 2; r++) {
    CHECK_OK(ln_forward(y, mean, rstd, x, w, b, ROWS, N, 1e-5, r));
    double worst = 0;
    for (int row = 0; row < ROWS; row++) {
      double m, rs;
      ref_forward(yr, &m, &rs, x + row * N, w, b, N, 1e-5);
      /* the statistics are float32 Welford sums, as the CPU's: the
       * variance carries the same |mean| * rstd * 2^-24 relative error */
      CHECK_NEAR(mean[row], m, 1e-7);
      CHECK_NEAR(rstd[row], rs, 1e-6 * (1 + fabs(m) * rs));
      /* float32 has |x| * 2^-24 of absolute error in x - mean: relative to
       * the row's spread that is |mean| * rstd * 2^-24 */
      double tol = 4e-7 * (1 + fabs(m) * rs) * 4;
      for (int i = 0; i < N; i++) {
        double e = fabs(y[row * N + i] - yr[i]) / (1 + fabs(yr[i]));
        if (e / tol > worst) worst = e / tol;
      }
    }
    if (!(worst <= 1)) {
      fprintf(stderr, "layer_norm vs double (reference %d): worst error %.3g x tolerance\n", r, worst);
      nrt_test_failures++;
    }
  }
  free(x);
  free(y);
}

/* ---- backward against central differences of a double forward ---------------------- */

/* L(x) = sum_i gy_i * y_i(x) for one row, in double. */
static double loss_row(const double *x, const float *gy, const float *w, int64_t n, double eps) {
  double s = 0, q = 0, m, r, L = 0;
  for (int64_t i = 0; i < n; i++) s += x[i];
  m = s / (double)n;
  for (int64_t i = 0; i < n; i++) q += (x[i] - m) * (x[i] - m);
  r = 1 / sqrt(q / (double)n + eps);
  for (int64_t i = 0; i < n; i++) L += gy[i] * (x[i] - m) * r * (w ? w[i] : 1);
  return L;
}

static void test_backward_finite_differences(void) {
  enum { ROWS = 3, N = 13 };
  float x[ROWS * N], gy[ROWS * N], w[N], mean[ROWS], rstd[ROWS], y[ROWS * N], gx[ROWS * N];
  for (int i = 0; i < ROWS * N; i++) {
    x[i] = (float)nrt_test_uniform(-2, 3);
    gy[i] = (float)nrt_test_uniform(-1, 1);
  }
  for (int i = 0; i < N; i++) w[i] = (float)nrt_test_uniform(0.5, 1.5);
  for (int r = 0; r < 2; r++)
    for (int weighted = 0; weighted < 2; weighted++) {
      const float *wp = weighted ? w : NULL;
      CHECK_OK(ln_forward(y, mean, rstd, x, wp, NULL, ROWS, N, 1e-5, r));
      CHECK_OK(ln_backward(gx, gy, x, mean, rstd, wp, ROWS, N, r));
      for (int row = 0; row < ROWS; row++) {
        double xd[N];
        for (int i = 0; i < N; i++) xd[i] = x[row * N + i];
        for (int i = 0; i < N; i++) {
          const double h = 1e-6;
          double keep = xd[i];
          xd[i] = keep + h;
          double up = loss_row(xd, gy + row * N, wp, N, 1e-5);
          xd[i] = keep - h;
          double down = loss_row(xd, gy + row * N, wp, N, 1e-5);
          xd[i] = keep;
          CHECK_NEAR(gx[row * N + i], (up - down) / (2 * h), 1e-5);
        }
      }
    }
}

/* ---- fast path against the reference path ------------------------------------------ */

static void put(void *base, nrt_dtype dt, int64_t i, double v) {
  nrt_ref_store_f64((char *)base + i * (int64_t)nrt_dtype_size(dt), dt, v);
}
static double get(const void *base, nrt_dtype dt, int64_t i) {
  return nrt_ref_load_f64((const char *)base + i * (int64_t)nrt_dtype_size(dt), dt);
}

/* rows x n in dtype dt; `column` stores the rows as columns of an n x rows
 * matrix; flags: bit0 weight, bit1 bias (forward), bit0 weight (backward);
 * stat_dt is the dtype of mean/rstd. */
static int compare_paths(nrt_op op, nrt_dtype dt, nrt_dtype stat_dt, int64_t rows, int64_t n, bool column,
                         int flags) {
  int64_t es = (int64_t)nrt_dtype_size(dt), ss = (int64_t)nrt_dtype_size(stat_dt), cnt = rows * n;
  void *x = malloc((size_t)(cnt * es)), *gy = malloc((size_t)(cnt * es));
  void *w = malloc((size_t)(n * es)), *b = malloc((size_t)(n * es));
  void *mean = malloc((size_t)(rows * ss)), *rstd = malloc((size_t)(rows * ss));
  void *out[2] = {malloc((size_t)(cnt * es)), malloc((size_t)(cnt * es))};
  void *mo[2] = {malloc((size_t)(rows * ss)), malloc((size_t)(rows * ss))};
  void *ro[2] = {malloc((size_t)(rows * ss)), malloc((size_t)(rows * ss))};
  for (int64_t i = 0; i < cnt; i++) {
    put(x, dt, i, nrt_test_uniform(-3, 3) + (i / n % 2 ? 5 : 0));
    put(gy, dt, i, nrt_test_uniform(-1, 1));
  }
  for (int64_t i = 0; i < n; i++) {
    put(w, dt, i, nrt_test_uniform(-2, 2));
    put(b, dt, i, nrt_test_uniform(-1, 1));
  }
  /* stats for the backward: from the reference forward */
  {
    nrt_launch l = nrt_test_launch(NRT_OP(LAYER_NORM), dt, 2, S(rows, n), 3, 1);
    nrt_test_operand(&l, 0, out[0], dt, S(n * es, es));
    nrt_test_operand(&l, 1, mean, stat_dt, S(ss, 0));
    nrt_test_operand(&l, 2, rstd, stat_dt, S(ss, 0));
    nrt_test_operand(&l, 3, x, dt, S(n * es, es));
    l.scalars[0].f = 1e-5;
    CHECK_OK(nrt_test_run(&l, 1));
  }
  int64_t rs[2];
  if (column) {
    rs[0] = es;
    rs[1] = rows * es;
  } else {
    rs[0] = n * es;
    rs[1] = es;
  }
  int bad = 0;
  for (int pass = 0; pass < 2 && !bad; pass++) {
    for (int r = 0; r < 2; r++) {
      nrt_kernels_limit_isa(pass == 0 ? NRT_ISA_BASELINE : NRT_ISA_BEST);
      nrt_launch l;
      memset(&l, 0, sizeof l);
      l.op = op;
      l.ndim = 2;
      l.sizes[0] = rows;
      l.sizes[1] = n;
      l.compute_dtype = dt;
      if (op == NRT_OP(LAYER_NORM)) {
        l.noutputs = 3;
        nrt_test_operand(&l, 0, out[r], dt, rs);
        nrt_test_operand(&l, 1, mo[r], stat_dt, S(ss, 0));
        nrt_test_operand(&l, 2, ro[r], stat_dt, S(ss, 0));
        nrt_test_operand(&l, 3, x, dt, rs);
        int k = 4;
        if (flags & 1) nrt_test_operand(&l, k++, w, dt, S(0, es));
        if (flags & 2) nrt_test_operand(&l, k++, b, dt, S(0, es));
        l.ninputs = k - 3;
        l.params[1] = flags;
        l.scalars[0].f = 1e-5;
      } else {
        l.noutputs = 1;
        nrt_test_operand(&l, 0, out[r], dt, rs);
        nrt_test_operand(&l, 1, gy, dt, rs);
        nrt_test_operand(&l, 2, x, dt, rs);
        nrt_test_operand(&l, 3, mean, stat_dt, S(ss, 0));
        nrt_test_operand(&l, 4, rstd, stat_dt, S(ss, 0));
        l.ninputs = 4;
        if (flags & 1) {
          nrt_test_operand(&l, 5, w, dt, S(0, es));
          l.ninputs = 5;
        }
      }
      CHECK_OK(nrt_test_run(&l, r == 0));
    }
    nrt_kernels_limit_isa(NRT_ISA_BEST);
    double tol = dt == NRT_BFLOAT16 ? 1.0 / 64 : (dt == NRT_FLOAT16 ? 1.0 / 512 : 1e-5);
    /* a 16-bit result may round either way: one unit of its precision */
    for (int64_t i = 0; i < cnt && !bad; i++) {
      double want = get(out[0], dt, i), got = get(out[1], dt, i);
      if (!(fabs(got - want) <= tol * (1 + fabs(want)))) {
        fprintf(stderr, "%s %s %lldx%lld col %d flags %d pass %d [%lld]: fast %.9g ref %.9g\n",
                nrt_op_name(op), nrt_dtype_name(dt), (long long)rows, (long long)n, column, flags, pass,
                (long long)i, got, want);
        bad = 1;
      }
    }
    if (op == NRT_OP(LAYER_NORM))
      for (int64_t i = 0; i < rows && !bad; i++) {
        double st_tol = stat_dt == NRT_FLOAT32 ? 1e-6 : 1.0 / 128;
        if (!(fabs(get(mo[1], stat_dt, i) - get(mo[0], stat_dt, i)) <= st_tol * (1 + fabs(get(mo[0], stat_dt, i)))) ||
            !(fabs(get(ro[1], stat_dt, i) - get(ro[0], stat_dt, i)) <= st_tol * fabs(get(ro[0], stat_dt, i)))) {
          fprintf(stderr, "%s %s stats row %lld differ\n", nrt_op_name(op), nrt_dtype_name(dt), (long long)i);
          bad = 1;
        }
      }
  }
  free(x);
  free(gy);
  free(w);
  free(b);
  free(mean);
  free(rstd);
  for (int r = 0; r < 2; r++) {
    free(out[r]);
    free(mo[r]);
    free(ro[r]);
  }
  return bad;
}

static void test_fast_vs_reference(void) {
  const int64_t shapes[][2] = {{1, 1}, {3, 7}, {64, 255}, {2, 1000}, {300, 40}, {1, 50257}, {17, 768}};
  int failures = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int flags = 0; flags < 4; flags++) {
      failures += compare_paths(NRT_OP(LAYER_NORM), NRT_FLOAT32, NRT_FLOAT32, shapes[s][0], shapes[s][1],
                                false, flags);
      failures += compare_paths(NRT_OP(LAYER_NORM), NRT_FLOAT32, NRT_FLOAT32, shapes[s][0], shapes[s][1],
                                true, flags);
      if (flags < 2) {
        failures += compare_paths(NRT_OP(LAYER_NORM_BACKWARD), NRT_FLOAT32, NRT_FLOAT32, shapes[s][0],
                                  shapes[s][1], false, flags);
        failures += compare_paths(NRT_OP(LAYER_NORM_BACKWARD), NRT_FLOAT32, NRT_FLOAT32, shapes[s][0],
                                  shapes[s][1], true, flags);
      }
    }
  const nrt_dtype dts[] = {NRT_BFLOAT16, NRT_FLOAT16, NRT_FLOAT64};
  for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++)
    for (int flags = 0; flags < 4; flags++) {
      nrt_dtype stat = dts[t] == NRT_FLOAT64 ? NRT_FLOAT64 : NRT_FLOAT32;
      failures += compare_paths(NRT_OP(LAYER_NORM), dts[t], stat, 9, 300, flags & 1, flags);
      failures += compare_paths(NRT_OP(LAYER_NORM_BACKWARD), dts[t], stat, 9, 300, flags & 2, flags & 1);
    }
  /* statistics stored in a 16-bit operand */
  failures += compare_paths(NRT_OP(LAYER_NORM), NRT_BFLOAT16, NRT_BFLOAT16, 5, 100, false, 3);
  CHECK(failures == 0);
}

/* A weight that differs per row (nonzero leading stride) is read per row. */
static void test_per_row_weight(void) {
  enum { ROWS = 4, N = 6 };
  float x[ROWS * N], w[ROWS * N], y[2][ROWS * N], mean[ROWS], rstd[ROWS];
  for (int i = 0; i < ROWS * N; i++) {
    x[i] = (float)nrt_test_uniform(-1, 1);
    w[i] = (float)(i / N + 1);
  }
  for (int r = 0; r < 2; r++) {
    nrt_launch l = nrt_test_launch(NRT_OP(LAYER_NORM), NRT_FLOAT32, 2, S(ROWS, N), 3, 2);
    nrt_test_operand(&l, 0, y[r], NRT_FLOAT32, S(N * 4, 4));
    nrt_test_operand(&l, 1, mean, NRT_FLOAT32, S(4, 0));
    nrt_test_operand(&l, 2, rstd, NRT_FLOAT32, S(4, 0));
    nrt_test_operand(&l, 3, x, NRT_FLOAT32, S(N * 4, 4));
    nrt_test_operand(&l, 4, w, NRT_FLOAT32, S(N * 4, 4));
    l.params[1] = 1;
    l.scalars[0].f = 1e-5;
    CHECK_OK(nrt_test_run(&l, r));
  }
  for (int i = 0; i < ROWS * N; i++) {
    CHECK_NEAR(y[0][i], y[1][i], 1e-6);
    CHECK_NEAR(y[0][i], (x[i] - mean[i / N]) * rstd[i / N] * (float)(i / N + 1), 1e-5);
  }
}

static void test_errors(void) {
  float x[4] = {1, 2, 3, 4}, y[4] = {0}, m[1] = {0}, r[1] = {1}, w[4] = {1, 1, 1, 1};
  nrt_launch l = nrt_test_launch(NRT_OP(LAYER_NORM), NRT_FLOAT32, 2, S(1, 4), 3, 1);
  nrt_test_operand(&l, 0, y, NRT_FLOAT32, S(16, 4));
  nrt_test_operand(&l, 1, m, NRT_FLOAT32, S(4, 0));
  nrt_test_operand(&l, 2, r, NRT_FLOAT32, S(4, 0));
  nrt_test_operand(&l, 3, x, NRT_FLOAT32, S(16, 4));
  nrt_test_operand(&l, 4, w, NRT_FLOAT32, S(0, 4));
  nrt_test_operand(&l, 5, w, NRT_FLOAT32, S(0, 4));
  CHECK_OK(nrt_launch_run(&l));
  l.params[1] = 1; /* weight announced, not passed */
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  l.ninputs = 2;
  CHECK_OK(nrt_launch_run(&l));
  l.params[1] = 3;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  l.ninputs = 3;
  CHECK_OK(nrt_launch_run(&l));
  l.params[1] = 4;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  l.params[1] = 3;
  l.ninputs = 0; /* validation: 1..3 inputs */
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  l.ninputs = 4;
  l.noutputs = 2;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  l.ninputs = 3;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT); /* 2 outputs */
  /* backward: 4 or 5 inputs, one output */
  float gx[4] = {0};
  l = nrt_test_launch(NRT_OP(LAYER_NORM_BACKWARD), NRT_FLOAT32, 2, S(1, 4), 1, 4);
  nrt_test_operand(&l, 0, gx, NRT_FLOAT32, S(16, 4));
  nrt_test_operand(&l, 1, x, NRT_FLOAT32, S(16, 4));
  nrt_test_operand(&l, 2, x, NRT_FLOAT32, S(16, 4));
  nrt_test_operand(&l, 3, m, NRT_FLOAT32, S(4, 0));
  nrt_test_operand(&l, 4, r, NRT_FLOAT32, S(4, 0));
  nrt_test_operand(&l, 5, w, NRT_FLOAT32, S(0, 4));
  CHECK_OK(nrt_launch_run(&l));
  l.ninputs = 5;
  CHECK_OK(nrt_launch_run(&l));
  l.ninputs = 3;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  l.ninputs = 6;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
  l.ninputs = 4;
  l.noutputs = 2;
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_INVALID_ARGUMENT);
}

/* ---- non-finite and wide rows -------------------------------------------------------
 * An inf in a row makes its variance NaN and the whole row NaN, as on the
 * CPU (torch.nn.functional.layer_norm of [1, inf, 2, 3]), and so is a row
 * spreading past float32's range (the CPU's float32 variance overflows); in the
 * backward an inf weight or gradient gives NaN for the row, as ATen's
 * formula does (values from torch 2.13 in float64, pasted). */
static void test_nonfinite_rows(void) {
  for (int ref = 0; ref < 2; ref++) {
    float x[4] = {1, INFINITY, 2, 3}, y[4], mean, rstd;
    CHECK_OK(ln_forward(y, &mean, &rstd, x, NULL, NULL, 1, 4, 1e-5, ref));
    for (int i = 0; i < 4; i++) CHECK(isnan(y[i]));
    CHECK(isnan(rstd));
    /* a row spreading past float32's range: the CPU's float32 Welford
     * variance overflows and the row is NaN there (torch 2.13:
     * F.layer_norm(tensor([3e38, 3e38, -3e38, 0]), [4]) is all NaN), as here */
    float wide[4] = {3e38f, 3e38f, -3e38f, 0};
    CHECK_OK(ln_forward(y, &mean, &rstd, wide, NULL, NULL, 1, 4, 1e-5, ref));
    for (int i = 0; i < 4; i++) CHECK(isnan(y[i]));
    /* backward: ATen's own results */
    const float xs[4] = {1, 2, 3, 4}, gy[4] = {0.1f, -0.2f, 0.3f, 0.4f}, gy_inf[4] = {0.1f, INFINITY, 0.3f, 0.4f};
    const float w[4] = {1, 2, 0.5f, 2}, w_inf[4] = {1, INFINITY, 0.5f, 2};
    const double want[4] = {0.2996290662153907, -0.3846031018058712, -0.12969047584888416, 0.2146645114393647};
    float gx[4];
    CHECK_OK(ln_forward(y, &mean, &rstd, xs, w, NULL, 1, 4, 1e-5, ref));
    CHECK_OK(ln_backward(gx, gy, xs, &mean, &rstd, w, 1, 4, ref));
    for (int i = 0; i < 4; i++) CHECK_NEAR(gx[i], want[i], 1e-6);
    CHECK_OK(ln_backward(gx, gy_inf, xs, &mean, &rstd, w, 1, 4, ref));
    for (int i = 0; i < 4; i++) CHECK(isnan(gx[i]));
    CHECK_OK(ln_backward(gx, gy, xs, &mean, &rstd, w_inf, 1, 4, ref));
    for (int i = 0; i < 4; i++) CHECK(isnan(gx[i]));
  }
}

/* LAYER_NORM_PARAM_GRADS: the fast path against the reference bit for bit
 * (float32 and bfloat16 buffers, 1-3 CPU threads, each output mask), and
 * float32 results near the double sums of dy * (x - mean) * rstd. */
static void test_param_grads(void) {
  const int64_t shapes[][2] = {{1, 9}, {7, 5}, {300, 40}, {33, 700}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int bf = 0; bf < 2; bf++) {
      nrt_dtype dt = bf ? NRT_BFLOAT16 : NRT_FLOAT32;
      int64_t rows = shapes[s][0], n = shapes[s][1], es = bf ? 2 : 4;
      char *x = malloc((size_t)(rows * n * es)), *gy = malloc((size_t)(rows * n * es));
      float *mean = malloc(sizeof(float) * (size_t)rows), *rstd = malloc(sizeof(float) * (size_t)rows);
      float *out = malloc(sizeof(float) * (size_t)(4 * n));
      double *want = calloc((size_t)n, sizeof(double));
      for (int64_t i = 0; i < rows * n; i++) {
        float v = (float)nrt_test_uniform(-3, 3), d = (float)nrt_test_uniform(-1, 1);
        nrt_store_f32(x + i * es, 0, dt, &v, 1);
        nrt_store_f32(gy + i * es, 0, dt, &d, 1);
      }
      for (int64_t r = 0; r < rows; r++) {
        mean[r] = (float)nrt_test_uniform(-0.5, 0.5);
        rstd[r] = (float)nrt_test_uniform(0.5, 2);
        for (int64_t i = 0; i < n; i++) {
          float xv, dv;
          nrt_load_f32(&xv, x + (r * n + i) * es, 0, dt, 1);
          nrt_load_f32(&dv, gy + (r * n + i) * es, 0, dt, 1);
          want[i] += (double)dv * ((double)xv - mean[r]) * rstd[r];
        }
      }
      for (int64_t threads = 1; threads <= 3; threads++)
        for (int mask = 2; mask <= 6; mask += 2) {
          for (int ref = 0; ref < 2; ref++) {
            int nout = (mask & 2 ? 1 : 0) + (mask & 4 ? 1 : 0);
            nrt_launch l = nrt_test_launch(NRT_OP(LAYER_NORM_PARAM_GRADS), dt, 2, S(rows, n), nout, 4);
            int k = 0;
            if (mask & 2) nrt_test_operand(&l, k++, out + (2 * ref) * n, NRT_FLOAT32, S(0, 4));
            if (mask & 4) nrt_test_operand(&l, k++, out + (2 * ref + 1) * n, NRT_FLOAT32, S(0, 4));
            nrt_test_operand(&l, k++, gy, dt, S(n * es, es));
            nrt_test_operand(&l, k++, x, dt, S(n * es, es));
            nrt_test_operand(&l, k++, mean, NRT_FLOAT32, S(4, 0));
            nrt_test_operand(&l, k++, rstd, NRT_FLOAT32, S(4, 0));
            l.params[0] = mask;
            l.params[1] = 1; /* float32 statistics */
            l.params[3] = threads;
            CHECK_OK(nrt_test_run(&l, ref));
          }
          if (mask & 2) CHECK(memcmp(out, out + 2 * n, sizeof(float) * (size_t)n) == 0);
          if (mask & 4) CHECK(memcmp(out + n, out + 3 * n, sizeof(float) * (size_t)n) == 0);
          if ((mask & 2) && !bf)
            for (int64_t i = 0; i < n; i++) CHECK(fabs(out[i] - want[i]) <= 1e-4 * (1 + fabs(want[i])) * rows);
        }
      free(x);
      free(gy);
      free(mean);
      free(rstd);
      free(out);
      free(want);
    }
}

int main(void) {
  printf("test_kernels_norm\n");
  RUN_TEST(test_known_values);
  RUN_TEST(test_against_double);
  RUN_TEST(test_backward_finite_differences);
  RUN_TEST(test_fast_vs_reference);
  RUN_TEST(test_per_row_weight);
  RUN_TEST(test_errors);
  RUN_TEST(test_nonfinite_rows);
  RUN_TEST(test_param_grads);
  return TEST_RESULT();
}
