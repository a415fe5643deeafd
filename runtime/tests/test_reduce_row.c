/* Row kernel tests (softmax family, cumulative ops): fast path against the
 * reference on random rows of odd lengths, strided rows and low-precision
 * dtypes, and known values. */
#include <stdint.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"

/* rows x len; `column` lays the rows out as columns of a row-major
 * len x rows matrix (softmax over dim 0), so the row stride is not 1. */
static int run_rows(nrt_op op, nrt_dtype in_dt, nrt_dtype out_dt, int64_t rows, int64_t len,
                    bool column) {
  int nin = nrt_op_ninputs(op);
  int64_t n = rows * len;
  size_t ies = nrt_dtype_size(in_dt), oes = nrt_dtype_size(out_dt);
  void *in[2], *out[2];
  for (int k = 0; k < nin; k++) {
    in[k] = malloc((size_t)n * ies + 8);
    for (int64_t i = 0; i < n; i++) {
      double v = nrt_test_uniform(-5, 5);
      if (op == NRT_OP_CUMPROD) v = nrt_test_uniform(0.8, 1.2);
      if (!nrt_dtype_is_floating(in_dt)) v = floor(v);
      /* the backward ops take the forward output: softmax values / log-probs */
      if (k == 1 && op == NRT_OP_SOFTMAX_BACKWARD) v = nrt_test_uniform(0, 1);
      if (k == 1 && op == NRT_OP_LOG_SOFTMAX_BACKWARD) v = nrt_test_uniform(-8, 0);
      nrt_test_put(in[k], in_dt, i, v);
    }
  }
  for (int r = 0; r < 2; r++) out[r] = calloc((size_t)n + 1, oes);
  nrt_launch l = nrt_test_launch(op, in_dt, 2, (const int64_t[]){rows, len}, 1, nin);
  for (int k = 0; k <= nin; k++) {
    int64_t es = (int64_t)(k == 0 ? oes : ies);
    l.operands[k].dtype = k == 0 ? out_dt : in_dt;
    l.operands[k].strides[0] = column ? es : len * es;
    l.operands[k].strides[1] = column ? rows * es : es;
    if (k > 0) l.operands[k].data = in[k - 1];
  }
  int bad = 0;
  /* reference, then the fast path in its baseline build, compared below;
   * the AVX-512 build runs in the second pass */
  for (int pass = 0; pass < 2 && !bad; pass++) {
    for (int r = 0; r < 2; r++) {
      nrt_kernels_set_reference(r == 0);
      nrt_kernels_limit_isa(pass == 0 ? NRT_ISA_BASELINE : NRT_ISA_AVX512);
      l.operands[0].data = out[r];
      CHECK_OK(nrt_launch_run(&l));
    }
    nrt_kernels_set_reference(false);
    nrt_kernels_limit_isa(NRT_ISA_BEST);
    double tol = out_dt == NRT_BFLOAT16 ? 1.0 / 64 : (out_dt == NRT_FLOAT16 ? 1.0 / 512 : 1e-5);
    /* The backward ops subtract terms of the inputs' size (up to ~5): the
     * error is relative to those, not to the (possibly tiny) result. */
    bool backward = op == NRT_OP_SOFTMAX_BACKWARD || op == NRT_OP_LOG_SOFTMAX_BACKWARD;
    double atol = backward ? 5 * tol : 1e-3 * tol;
    for (int64_t i = 0; i < n && !bad; i++) {
      double want = nrt_test_get(out[0], out_dt, i), got = nrt_test_get(out[1], out_dt, i);
      bool ok = nrt_dtype_is_floating(in_dt) ? fabs(got - want) <= tol * fabs(want) + atol
                                             : got == want;
      if (!ok) {
        fprintf(stderr, "%s %s->%s %lldx%lld col %d pass %d [%lld]: fast %.9g ref %.9g\n",
                nrt_op_name(op), nrt_dtype_name(in_dt), nrt_dtype_name(out_dt), (long long)rows,
                (long long)len, column, pass, (long long)i, got, want);
        bad = 1;
      }
    }
  }
  for (int k = 0; k < nin; k++) free(in[k]);
  free(out[0]);
  free(out[1]);
  return bad;
}

static void test_fast_vs_reference(void) {
  nrt_op ops[] = {NRT_OP_SOFTMAX, NRT_OP_LOG_SOFTMAX, NRT_OP_SOFTMAX_BACKWARD,
                  NRT_OP_LOG_SOFTMAX_BACKWARD, NRT_OP_CUMSUM, NRT_OP_CUMPROD};
  int64_t shapes[][2] = {{1, 1}, {3, 7}, {5, 257}, {64, 255}, {2, 1000}, {1, 50257}, {300, 40}};
  int failures = 0;
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      failures += run_rows(ops[i], NRT_FLOAT32, NRT_FLOAT32, shapes[s][0], shapes[s][1], false);
      failures += run_rows(ops[i], NRT_FLOAT32, NRT_FLOAT32, shapes[s][0], shapes[s][1], true);
    }
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    failures += run_rows(ops[i], NRT_BFLOAT16, NRT_BFLOAT16, 9, 300, false);
    failures += run_rows(ops[i], NRT_FLOAT16, NRT_FLOAT32, 9, 300, true); /* half_to_float */
    failures += run_rows(ops[i], NRT_FLOAT64, NRT_FLOAT64, 4, 100, false);
  }
  failures += run_rows(NRT_OP_CUMSUM, NRT_INT32, NRT_INT64, 7, 300, true);
  failures += run_rows(NRT_OP_CUMPROD, NRT_INT64, NRT_INT64, 7, 30, false);
  CHECK(failures == 0);
}

static void run_row1(nrt_op op, const float *a, const float *b, float *out, int64_t n, bool reference) {
  nrt_launch l = nrt_test_launch_op(op, NRT_FLOAT32, 1, &n);
  nrt_test_operand_1d(&l, 0, out, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 1, a, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 2, b, NRT_FLOAT32, 1);
  CHECK_OK(nrt_test_run(&l, reference));
}

static void test_known_values(void) {
  float x[3] = {1, 2, 3}, out[3];
  for (int r = 0; r < 2; r++) {
    run_row1(NRT_OP_SOFTMAX, x, NULL, out, 3, r);
    CHECK_NEAR(out[0], 0.0900305732, 1e-6);
    CHECK_NEAR(out[1], 0.244728471, 1e-6);
    CHECK_NEAR(out[2], 0.665240955, 1e-6);
    run_row1(NRT_OP_LOG_SOFTMAX, x, NULL, out, 3, r);
    CHECK_NEAR(out[0], -2.40760596, 1e-6);
    CHECK_NEAR(out[2], -0.407605964, 1e-6);
    float big[2] = {1000, 1000};
    run_row1(NRT_OP_SOFTMAX, big, NULL, out, 2, r);
    CHECK(out[0] == 0.5f && out[1] == 0.5f);
    float ninf[2] = {-INFINITY, -INFINITY}; /* PyTorch: NaN */
    run_row1(NRT_OP_SOFTMAX, ninf, NULL, out, 2, r);
    CHECK(isnan(out[0]) && isnan(out[1]));
    float one_inf[3] = {-INFINITY, 0, -INFINITY};
    run_row1(NRT_OP_SOFTMAX, one_inf, NULL, out, 3, r);
    CHECK(out[0] == 0 && out[1] == 1 && out[2] == 0);
    /* backward: grad_in = y * (g - sum(g * y)); log: g - exp(y) * sum(g) */
    float g[3] = {0.5f, -1, 2}, y[3] = {0.2f, 0.3f, 0.5f};
    run_row1(NRT_OP_SOFTMAX_BACKWARD, g, y, out, 3, r);
    double dot = 0.5 * 0.2 - 0.3 + 1.0;
    CHECK_NEAR(out[0], 0.2 * (0.5 - dot), 1e-6);
    CHECK_NEAR(out[2], 0.5 * (2 - dot), 1e-6);
    float ly[3] = {-1.6094379f, -1.2039728f, -0.6931472f};
    run_row1(NRT_OP_LOG_SOFTMAX_BACKWARD, g, ly, out, 3, r);
    CHECK_NEAR(out[0], 0.5 - 0.2 * 1.5, 1e-6);
    CHECK_NEAR(out[1], -1 - 0.3 * 1.5, 1e-6);
    run_row1(NRT_OP_CUMSUM, x, NULL, out, 3, r);
    CHECK(out[0] == 1 && out[1] == 3 && out[2] == 6);
    run_row1(NRT_OP_CUMPROD, x, NULL, out, 3, r);
    CHECK(out[0] == 1 && out[1] == 2 && out[2] == 6);
  }
}

static void test_int_cumsum_exact(void) {
  int64_t x[3] = {1ll << 62, 1, 2}, out[3];
  nrt_launch l = nrt_test_launch(NRT_OP_CUMSUM, NRT_INT64, 1, (const int64_t[]){3}, 1, 1);
  l.operands[0] = (nrt_operand){.data = out, .dtype = NRT_INT64, .strides = {8}};
  l.operands[1] = (nrt_operand){.data = x, .dtype = NRT_INT64, .strides = {8}};
  for (int r = 0; r < 2; r++) {
    nrt_kernels_set_reference(r);
    CHECK_OK(nrt_launch_run(&l));
    CHECK(out[0] == 1ll << 62 && out[1] == (1ll << 62) + 1 && out[2] == (1ll << 62) + 3);
  }
  nrt_kernels_set_reference(false);
  l.op = NRT_OP_SOFTMAX; /* float-only op on ints */
  CHECK_STATUS(nrt_launch_run(&l), NRT_ERROR_UNSUPPORTED);
}

int main(void) {
  nrt_test_seed(0x8CB92BA72F3D8DD7ull);
  RUN_TEST(test_fast_vs_reference);
  RUN_TEST(test_known_values);
  RUN_TEST(test_int_cumsum_exact);
  return TEST_RESULT();
}
