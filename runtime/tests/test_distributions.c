/* Family DISTRIBUTIONS tests.
 *
 * 1. The draw stream: round j from the batched Philox is the textbook
 *    block with counter {e, hi(e), tag + j, 0}.
 * 2. The kernels through nrt_launch_run: fast path (batched rounds 0, 1)
 *    against the reference path (every round one block at a time), bit
 *    for bit, on strided and broadcast layouts; results depend only on
 *    (seed, offset, position): a launch split in two at any offset gives
 *    the same numbers, thread counts do not matter.
 * 3. Moments of many samples against the distributions' means and
 *    variances (fixed seeds, bounds of 6 standard errors: deterministic).
 * 4. The CPU's edge values (alpha = 0, NaN, rate = 0, count = 0, prob 0/1).
 * 5. The gradients against values PyTorch's CPU gives (float64 and, from
 *    float32 inputs, float32), bit for bit. */
#include <float.h>
#include <stdint.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"
#include "kernels/pointwise/distributions/distributions.h"
#include "nrt/ops/distributions.h"

static nrt_launch sampler_launch(nrt_op op, int64_t n, uint64_t seed, uint64_t offset) {
  int64_t sizes[1] = {n};
  nrt_launch l = nrt_test_launch_op(op, NRT_FLOAT32, 1, sizes);
  l.params[0] = (int64_t)seed;
  l.params[1] = (int64_t)offset;
  return l;
}

/* ---- 1. the stream ------------------------------------------------------------- */

static void test_stream_mapping(void) {
  uint64_t seed = 0x0123456789ABCDEFull, e = 0x00000005FFFFFFFEull;
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  /* Round j of consecutive elements is one batch with stream tag + j. */
  for (uint32_t round = 0; round < 2; round++) {
    uint32_t batch[8];
    nrt_philox_batch(seed, e, 2, NRT_DIST_PHILOX_TAG + round, batch);
    for (int j = 0; j < 2; j++) {
      uint64_t ej = e + (uint64_t)j;
      uint32_t ctr[4] = {(uint32_t)ej, (uint32_t)(ej >> 32), NRT_DIST_PHILOX_TAG + round, 0}, w[4];
      nrt_philox4x32_10(ctr, key, w);
      CHECK(memcmp(w, batch + 4 * j, sizeof w) == 0);
    }
  }
  /* The stream's draws: two uniforms per round, rounds counted in word 2;
   * with and without the batched rounds 0 and 1. */
  uint32_t pre[2][4];
  nrt_philox_batch(seed, e, 1, NRT_DIST_PHILOX_TAG, pre[0]);
  nrt_philox_batch(seed, e, 1, NRT_DIST_PHILOX_TAG + 1, pre[1]);
  for (int batched = 0; batched < 3; batched++) {
    nrt_dist_stream s;
    nrt_dist_stream_init(&s, seed, e, batched ? pre[0] : NULL, batched, 4);
    for (uint32_t round = 0; round < 4; round++) {
      uint32_t ctr[4] = {(uint32_t)e, (uint32_t)(e >> 32), NRT_DIST_PHILOX_TAG + round, 0}, w[4];
      nrt_philox4x32_10(ctr, key, w);
      for (int h = 0; h < 2; h++) {
        double want = ((double)(w[2 * h] >> 5) * 67108864.0 + (double)(w[2 * h + 1] >> 6)) * 0x1p-53;
        CHECK(nrt_dist_uniform(&s) == want);
      }
    }
  }
  nrt_dist_stream s;
  /* Uniforms are in [0, 1) with mean 1/2. */
  double sum = 0, lo = 1, hi = 0;
  nrt_dist_stream_init(&s, 1, 0, NULL, 0, 0);
  for (int i = 0; i < 100000; i++) {
    double u = nrt_dist_uniform(&s);
    sum += u;
    lo = u < lo ? u : lo;
    hi = u > hi ? u : hi;
  }
  CHECK(lo >= 0 && hi < 1 && fabs(sum / 100000 - 0.5) < 6 * sqrt(1.0 / 12 / 100000));
}

/* ---- 2. fast path against reference, position-only dependence ------------------- */

/* Parameters that exercise every branch of every sampler. */
static float gamma_param(int i) {
  static const float v[] = {0.05f, 0.5f, 0.999f, 1.0f, 2.5f, 7.0f, 150.0f, 1e-3f};
  return v[i % 8];
}
static float poisson_param(int i) {
  static const float v[] = {0.0f, 0.3f, 4.0f, 9.99f, 10.0f, 37.5f, 1e4f};
  return v[i % 7];
}

/* Runs `op` over N elements of `in` (every other element, strided) and
 * `in2` (broadcast scalar when bcast) on the fast and the reference path. */
static void check_fast_equals_reference(nrt_op op, const float *in, const float *in2, bool bcast, int N) {
  float *fast = malloc(sizeof(float) * (size_t)N), *ref = malloc(sizeof(float) * (size_t)N);
  nrt_launch l = sampler_launch(op, N, 42, 1000003);
  nrt_test_operand_1d(&l, 1, in, NRT_FLOAT32, 2);
  if (in2) nrt_test_operand_1d(&l, 2, in2, NRT_FLOAT32, bcast ? 0 : 1);
  nrt_test_operand_1d(&l, 0, fast, NRT_FLOAT32, 1);
  CHECK_OK(nrt_test_run(&l, false));
  nrt_test_operand_1d(&l, 0, ref, NRT_FLOAT32, 1);
  CHECK_OK(nrt_test_run(&l, true));
  int same = 0;
  for (int i = 0; i < N; i++) same += memcmp(&fast[i], &ref[i], 4) == 0;
  if (same != N) fprintf(stderr, "%s: %d of %d differ\n", nrt_op_name(op), N - same, N);
  CHECK(same == N);
  free(fast);
  free(ref);
}

static void test_fast_equals_reference(void) {
  enum { N = 3001 }; /* several blocks, batches and a ragged tail */
  static float in[2 * N], counts[N], probs[N];
  for (int i = 0; i < 2 * N; i++) in[i] = gamma_param(i / 2);
  check_fast_equals_reference(NRT_OP(STANDARD_GAMMA), in, NULL, false, N);
  check_fast_equals_reference(NRT_OP(STANDARD_GAMMA_LOG), in, NULL, false, N);
  for (int i = 0; i < 2 * N; i++) in[i] = poisson_param(i / 2);
  check_fast_equals_reference(NRT_OP(POISSON), in, NULL, false, N);
  for (int i = 0; i < N; i++) {
    counts[i] = (float)(i % 5 == 0 ? 3 : i % 5 == 1 ? 40 : i % 5 == 2 ? 1000 : i % 5 == 3 ? 7.5 : 0);
    probs[i] = (float)((i % 11) / 10.0);
  }
  for (int i = 0; i < 2 * N; i++) in[i] = counts[i / 2];
  check_fast_equals_reference(NRT_OP(BINOMIAL), in, probs, false, N);
  float half = 0.5f;
  check_fast_equals_reference(NRT_OP(BINOMIAL), in, &half, true, N);
}

static void test_position_only(void) {
  enum { N = 5000 };
  static float alpha[N], whole[N], parts[N], other[N];
  for (int i = 0; i < N; i++) alpha[i] = gamma_param(i);
  nrt_launch l = sampler_launch(NRT_OP(STANDARD_GAMMA), N, 7, 96);
  nrt_test_operand_1d(&l, 1, alpha, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 0, whole, NRT_FLOAT32, 1);
  CHECK_OK(nrt_launch_run(&l));
  /* Twice more: the same numbers (the kernel pool may split differently). */
  nrt_test_operand_1d(&l, 0, other, NRT_FLOAT32, 1);
  CHECK_OK(nrt_launch_run(&l));
  CHECK(memcmp(whole, other, sizeof whole) == 0);
  /* Split at an odd point: elements keep their numbers through the offset. */
  int cut = 1237;
  nrt_launch a = sampler_launch(NRT_OP(STANDARD_GAMMA), cut, 7, 96);
  nrt_test_operand_1d(&a, 1, alpha, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&a, 0, parts, NRT_FLOAT32, 1);
  CHECK_OK(nrt_launch_run(&a));
  nrt_launch b = sampler_launch(NRT_OP(STANDARD_GAMMA), N - cut, 7, 96 + cut);
  nrt_test_operand_1d(&b, 1, alpha + cut, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&b, 0, parts + cut, NRT_FLOAT32, 1);
  CHECK_OK(nrt_launch_run(&b));
  CHECK(memcmp(whole, parts, sizeof whole) == 0);
  /* A 2-d launch numbers elements row-major, like the 1-d one. */
  int64_t sizes[2] = {50, 100};
  nrt_launch t = nrt_test_launch_op(NRT_OP(STANDARD_GAMMA), NRT_FLOAT32, 2, sizes);
  t.params[0] = 7;
  t.params[1] = 96;
  int64_t st[2] = {400, 4};
  nrt_test_operand(&t, 1, alpha, NRT_FLOAT32, st);
  nrt_test_operand(&t, 0, other, NRT_FLOAT32, st);
  CHECK_OK(nrt_launch_run(&t));
  CHECK(memcmp(whole, other, sizeof whole) == 0);
  /* Another seed or offset: other numbers. */
  l.params[0] = 8;
  CHECK_OK(nrt_launch_run(&l));
  int differ = 0;
  for (int i = 0; i < N; i++) differ += other[i] != whole[i];
  CHECK(differ > N * 8 / 10); /* alpha = 1e-3 clamps to the same FLT_MIN */
  l.params[0] = 7;
  l.params[1] = 96 + N;
  CHECK_OK(nrt_launch_run(&l));
  differ = 0;
  for (int i = 0; i < N; i++) differ += other[i] != whole[i];
  CHECK(differ > N * 8 / 10); /* alpha = 1e-3 clamps to the same FLT_MIN */
}

/* ---- 3. moments ----------------------------------------------------------------- */

/* n samples of op at (a, b): their mean and variance within 6 standard
 * errors of (mean, var); kurt: the distribution's excess kurtosis (for the
 * variance's standard error). */
static void check_moments(nrt_op op, float a, float b, double mean, double var, double kurt, uint64_t seed) {
  enum { n = 200000 };
  static float out[n];
  nrt_launch l = sampler_launch(op, n, seed, 0);
  nrt_test_operand_1d(&l, 1, &a, NRT_FLOAT32, 0);
  if (l.ninputs == 2) nrt_test_operand_1d(&l, 2, &b, NRT_FLOAT32, 0);
  nrt_test_operand_1d(&l, 0, out, NRT_FLOAT32, 1);
  CHECK_OK(nrt_launch_run(&l));
  bool log_out = op == NRT_OP(STANDARD_GAMMA_LOG);
  double s = 0, s2 = 0;
  for (int i = 0; i < n; i++) {
    double v = log_out ? exp(out[i]) : out[i];
    s += v;
  }
  double m = s / n;
  for (int i = 0; i < n; i++) {
    double v = (log_out ? exp(out[i]) : out[i]) - m;
    s2 += v * v;
  }
  double vv = s2 / (n - 1);
  double se_mean = sqrt(var / n), se_var = var * sqrt((2.0 + kurt) / n);
  if (!(fabs(m - mean) <= 6 * se_mean && fabs(vv - var) <= 6 * se_var))
    fprintf(stderr, "%s(%g, %g): mean %g (want %g +- %g), var %g (want %g +- %g)\n", nrt_op_name(op), a, b, m,
            mean, 6 * se_mean, vv, var, 6 * se_var);
  CHECK(fabs(m - mean) <= 6 * se_mean);
  CHECK(fabs(vv - var) <= 6 * se_var);
}

static void test_moments(void) {
  const float alphas[] = {0.1f, 0.5f, 1.0f, 2.5f, 10.0f, 300.0f};
  for (int i = 0; i < 6; i++) {
    double a = alphas[i];
    check_moments(NRT_OP(STANDARD_GAMMA), alphas[i], 0, a, a, 6 / a, 100 + i);
    check_moments(NRT_OP(STANDARD_GAMMA_LOG), alphas[i], 0, a, a, 6 / a, 200 + i);
  }
  const float rates[] = {0.05f, 1.0f, 9.9f, 10.0f, 55.0f, 5000.0f};
  for (int i = 0; i < 6; i++) check_moments(NRT_OP(POISSON), rates[i], 0, rates[i], rates[i], 1 / rates[i], 300 + i);
  const float bin[][2] = {{5, 0.3f}, {20, 0.45f}, {100, 0.3f}, {100, 0.8f}, {60, 0.95f}, {2000, 0.5f}, {1e6f, 1e-4f}};
  for (int i = 0; i < 7; i++) {
    double n = bin[i][0], p = bin[i][1], v = n * p * (1 - p);
    check_moments(NRT_OP(BINOMIAL), bin[i][0], bin[i][1], n * p, v, (1 - 6 * p * (1 - p)) / v, 400 + i);
  }
}

/* ---- 4. edge values ----------------------------------------------------------- */

static void run_values(nrt_op op, const float *a, const float *b, float *out, int n) {
  nrt_launch l = sampler_launch(op, n, 1, 0);
  nrt_test_operand_1d(&l, 1, a, NRT_FLOAT32, 1);
  if (b) nrt_test_operand_1d(&l, 2, b, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 0, out, NRT_FLOAT32, 1);
  CHECK_OK(nrt_launch_run(&l));
}

static void test_edges(void) {
  float out[8];
  const float g[] = {0.0f, NAN, -1.0f, 1e-30f, INFINITY, 1e-3f};
  run_values(NRT_OP(STANDARD_GAMMA), g, NULL, out, 6);
  for (int i = 0; i < 4; i++) CHECK(out[i] == FLT_MIN); /* the CPU's max(min, sample) */
  CHECK(out[4] == INFINITY);
  CHECK(out[5] >= FLT_MIN);
  run_values(NRT_OP(STANDARD_GAMMA_LOG), g, NULL, out, 6);
  const float log_dbl_min = (float)log(DBL_MIN);
  for (int i = 0; i < 3; i++) CHECK(out[i] == log_dbl_min);
  CHECK(out[3] >= log_dbl_min && out[3] < -100); /* far below float's range, above double's */
  CHECK(out[4] == INFINITY);
  /* alpha = 1e-3: the log is finite where the sample underflows float. */
  CHECK(out[5] > log_dbl_min && out[5] < 0);

  const float r[] = {0.0f, NAN, -2.0f, INFINITY, 1e-30f};
  run_values(NRT_OP(POISSON), r, NULL, out, 5);
  CHECK(out[0] == 0 && isnan(out[1]) && isnan(out[2]));
  CHECK(out[3] == (float)INT64_MIN); /* what the CPU returns */
  CHECK(out[4] == 0);

  const float cnt[] = {0, 10, 10, -1, 10, NAN, 10, INFINITY};
  const float pr[] = {0.5f, 0, 1, 0.5f, NAN, 0.5f, 1.5f, 0.5f};
  run_values(NRT_OP(BINOMIAL), cnt, pr, out, 8);
  CHECK(out[0] == 0 && out[1] == 0 && out[2] == 10 && out[3] == 0);
  CHECK(isnan(out[4]) && isnan(out[5]));
  CHECK(out[6] == 10 && out[7] == INFINITY);
  /* Samples are integers in [0, count]. */
  enum { N = 4000 };
  static float c2[N], p2[N], o2[N];
  for (int i = 0; i < N; i++) c2[i] = (float)(i % 300), p2[i] = (float)((i % 97) / 96.0);
  run_values(NRT_OP(BINOMIAL), c2, p2, o2, N);
  int bad = 0;
  for (int i = 0; i < N; i++) bad += !(o2[i] >= 0 && o2[i] <= c2[i] && o2[i] == floorf(o2[i]));
  CHECK(bad == 0);
}

/* ---- 5. gradients ---------------------------------------------------------------- */

static void test_gradients(void) {
  /* PyTorch 2.13 CPU: torch._standard_gamma_grad(alpha, x) in float64 and
   * float32 (the float32 column from float32-rounded inputs). */
  const double al[] = {0.3, 0.3, 1.5, 1.5, 5.0, 12.0, 12.0, 50.0, 3.0, 0.01};
  const double xs[] = {0.1, 2.0, 0.5, 3.0, 4.0, 12.5, 5.0, 70.0, 1e-3, 1e-5};
  const double g64[] = {0x1.942cd05da3518p-1, 0x1.c82b579cadbb8p+1, 0x1.3726396135bbap-1, 0x1.8c28d3bbaf1d9p+0,
                        0x1.d873166d297bfp-1, 0x1.08e88e0762c11p+0, 0x1.44932aaedf21dp-1, 0x1.2e7cffec4bdaap+0,
                        0x1.64c6e7a9db6ffp-9, 0x1.66e15cbec0b0bp-7};
  const float g32[] = {0x1.942cd0p-1f, 0x1.c82b56p+1f, 0x1.37263ap-1f, 0x1.8c28d4p+0f, 0x1.d87316p-1f,
                       0x1.08e88ep+0f, 0x1.44932ap-1f, 0x1.2e7d00p+0f, 0x1.64c6e8p-9f, 0x1.66e15cp-7f};
  for (int i = 0; i < 10; i++) {
    CHECK(nrt_dist_gamma_grad(al[i], xs[i]) == g64[i]);
    CHECK((float)nrt_dist_gamma_grad((float)al[i], (float)xs[i]) == g32[i]);
  }
  CHECK(nrt_dist_gamma_grad(1.0, 0.0) == 0.0); /* the series' NaN gives 0 */

  /* torch._dirichlet_grad(x, alpha, total): every branch (small x, x near
   * 1, both large, the rational correction). */
  const double X[] = {0.01, 0.3, 0.5, 0.95, 0.6, 0.45, 0.2, 0.999, 0.7};
  const double A[] = {0.5, 2.0, 3.0, 10.0, 7.0, 20.0, 1.0, 4.0, 0.3};
  const double T[] = {2.0, 4.0, 5.0, 11.0, 15.0, 45.0, 30.0, 4.5, 3.0};
  const double d64[] = {0x1.5e75a3736fb2ep-4, 0x1.c9916d50b1331p-3, 0x1.a4d1a53a10b39p-3,
                        0x1.8f2f57d9c7da4p-4, 0x1.43bdbbe119c02p-4, 0x1.742fb6c1c7589p-6,
                        0x1.5d683a755c3e9p-4, 0x1.0fbd5e22df1acp-2, 0x1.6f934587cabd1p+0};
  const float d32[] = {0x1.5e75a2p-4f, 0x1.c9916cp-3f, 0x1.a4d1a4p-3f, 0x1.8f2f88p-4f, 0x1.43bdbcp-4f,
                       0x1.742fb6p-6f, 0x1.5d683cp-4f, 0x1.0fbd5ep-2f, 0x1.6f9344p+0f};
  for (int i = 0; i < 9; i++) {
    double g = nrt_dist_dirichlet_grad_d(X[i], A[i], T[i]);
    float f = nrt_dist_dirichlet_grad_f((float)X[i], (float)A[i], (float)T[i]);
    if (g != d64[i] || f != d32[i]) fprintf(stderr, "dirichlet grad %d: %a %a, want %a %a\n", i, g, f, d64[i], d32[i]);
    CHECK(g == d64[i]);
    CHECK(f == d32[i]);
  }

  /* Through the engine: float32 and float64 data (float64 at float32
   * precision), fast path equal to reference. */
  enum { N = 9 };
  float x32[N], a32[N], t32[N], o32[N], r32[N];
  for (int i = 0; i < N; i++) x32[i] = (float)X[i], a32[i] = (float)A[i], t32[i] = (float)T[i];
  int64_t sizes[1] = {N};
  nrt_launch l = nrt_test_launch_op(NRT_OP(DIRICHLET_GRAD), NRT_FLOAT32, 1, sizes);
  nrt_test_operand_1d(&l, 1, x32, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 2, a32, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 3, t32, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 0, o32, NRT_FLOAT32, 1);
  CHECK_OK(nrt_test_run(&l, false));
  nrt_test_operand_1d(&l, 0, r32, NRT_FLOAT32, 1);
  CHECK_OK(nrt_test_run(&l, true));
  CHECK(memcmp(o32, d32, sizeof o32) == 0 && memcmp(r32, d32, sizeof r32) == 0);
  double o64[N];
  l.compute_dtype = NRT_FLOAT64;
  nrt_test_operand_1d(&l, 0, o64, NRT_FLOAT64, 1);
  CHECK_OK(nrt_test_run(&l, false));
  for (int i = 0; i < N; i++) CHECK(o64[i] == (float)nrt_dist_dirichlet_grad_d(x32[i], a32[i], t32[i]));

  float ga[N], gx[N], go[N];
  for (int i = 0; i < N; i++) ga[i] = (float)al[i], gx[i] = (float)xs[i];
  l = nrt_test_launch_op(NRT_OP(STANDARD_GAMMA_GRAD), NRT_FLOAT32, 1, sizes);
  nrt_test_operand_1d(&l, 1, ga, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 2, gx, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&l, 0, go, NRT_FLOAT32, 1);
  CHECK_OK(nrt_launch_run(&l));
  CHECK(memcmp(go, g32, sizeof go) == 0);

  /* digamma in both precisions at its special points. */
  CHECK(nrt_dist_digamma_d(0.0) == INFINITY && nrt_dist_digamma_f(-2.0f) == INFINITY);
  CHECK_NEAR(nrt_dist_digamma_d(1.0), -0.57721566490153286061, 1e-15);
  CHECK_NEAR(nrt_dist_digamma_f(1.0f), -0.57721566490153286061, 1e-6);
}

/* Speed: 2^20 samples of gamma (alpha = 2.5, 0.5) and Poisson (rate 5),
 * printed, not checked. */
static void bench(void) {
  enum { n = 1 << 20 };
  float *out = malloc(sizeof(float) * n);
  const nrt_op ops[3] = {NRT_OP(STANDARD_GAMMA), NRT_OP(STANDARD_GAMMA), NRT_OP(POISSON)};
  float a[3] = {2.5f, 0.5f, 5.0f};
  for (int k = 0; k < 3; k++) {
    nrt_launch l = sampler_launch(ops[k], n, 3, 0);
    nrt_test_operand_1d(&l, 1, &a[k], NRT_FLOAT32, 0);
    nrt_test_operand_1d(&l, 0, out, NRT_FLOAT32, 1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_OK(nrt_launch_run(&l));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("  %s(%g) x 2^20: %.1f ms\n", nrt_op_name(ops[k]), a[k],
           (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6);
  }
  free(out);
}

int main(int argc, char **argv) {
  RUN_TEST(test_stream_mapping);
  RUN_TEST(test_fast_equals_reference);
  RUN_TEST(test_position_only);
  RUN_TEST(test_moments);
  RUN_TEST(test_edges);
  RUN_TEST(test_gradients);
  if (argc > 1 && strcmp(argv[1], "--bench") == 0) bench();
  return TEST_RESULT();
}
