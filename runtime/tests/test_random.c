/* Random op tests: Philox known answers, results independent of how the
 * work is split (parallel fast path == element-at-a-time reference, and
 * reshaping does not change values), offsets, and distribution sanity. */
#include <stdint.h>
#include <string.h>
#include "testing.h"
#include "kernels/common/common.h"

/* Known-answer vectors published with Random123 (kat_vectors). */
static void test_philox_known_answers(void) {
  uint32_t out[4];
  nrt_philox4x32_10((uint32_t[]){0, 0, 0, 0}, (uint32_t[]){0, 0}, out);
  CHECK(out[0] == 0x6627e8d5u && out[1] == 0xe169c58du && out[2] == 0xbc57ac4cu && out[3] == 0x9b00dbd8u);
  nrt_philox4x32_10((uint32_t[]){0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                    (uint32_t[]){0xffffffffu, 0xffffffffu}, out);
  CHECK(out[0] == 0x408f276du && out[1] == 0x41c83b0eu && out[2] == 0xa20bc7c6u && out[3] == 0x6d5451fdu);
  nrt_philox4x32_10((uint32_t[]){0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                    (uint32_t[]){0xa4093822u, 0x299f31d0u}, out);
  CHECK(out[0] == 0xd16cfe09u && out[1] == 0x94fdccebu && out[2] == 0x5001e420u && out[3] == 0x24126ea1u);
  /* the batched kernel path agrees with the single block */
  int bad = 0;
  for (uint64_t c = 0; c < 200; c++) {
    uint64_t key = 0x123456789abcdefull * (c + 1), ctr = c * 0x9e3779b97f4a7c15ull;
    uint32_t a[4], b[4];
    nrt_philox4x32(key, ctr, a);
    nrt_philox4x32_10((uint32_t[]){(uint32_t)ctr, (uint32_t)(ctr >> 32), 0, 0},
                      (uint32_t[]){(uint32_t)key, (uint32_t)(key >> 32)}, b);
    bad += memcmp(a, b, sizeof a) != 0;
  }
  CHECK(bad == 0);
}

static nrt_launch rng_launch(nrt_op op, nrt_dtype dt, void *out, int ndim, const int64_t *sizes,
                             uint64_t seed, uint64_t offset) {
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = op;
  l.ndim = ndim;
  l.noutputs = 1;
  l.ninputs = nrt_op_ninputs(op);
  l.compute_dtype = dt;
  l.params[0] = (int64_t)seed;
  l.params[1] = (int64_t)offset;
  l.operands[0].data = out;
  l.operands[0].dtype = dt;
  int64_t st = (int64_t)nrt_dtype_size(dt);
  for (int d = ndim - 1; d >= 0; d--) {
    l.sizes[d] = sizes[d];
    l.operands[0].strides[d] = st;
    st *= sizes[d];
  }
  return l;
}

/* Same values on the parallel fast path, the sequential reference path,
 * and for the same elements described with a different shape. */
static void test_thread_and_shape_independence(void) {
  enum { N = 3 * 40000 + 7 };
  nrt_op ops[] = {NRT_OP_UNIFORM, NRT_OP_NORMAL, NRT_OP_BERNOULLI_SCALAR, NRT_OP_RANDOM_RANGE,
                  NRT_OP_RANDOM_RANGE};
  float *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N), *c = malloc(sizeof(float) * N);
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    int64_t s1[1] = {N}, s2[2] = {N / 7 + (N % 7 != 0), 7};
    nrt_launch l = rng_launch(ops[i], NRT_FLOAT32, a, 1, s1, 42 + i, 1000 + 3 * i);
    l.scalars[0].f = -2.0;
    l.scalars[1].f = 3.0;
    l.params[2] = -5;
    l.params[3] = i == 4 ? (int64_t)(1ull << 40) : 11; /* 64-bit and 32-bit ranges */
    if (ops[i] == NRT_OP_BERNOULLI_SCALAR) l.scalars[0].f = 0.3;
    CHECK_OK(nrt_launch_run(&l));
    nrt_kernels_set_reference(true);
    l.operands[0].data = b;
    CHECK_OK(nrt_launch_run(&l));
    nrt_kernels_set_reference(false);
    CHECK(memcmp(a, b, sizeof(float) * N) == 0);
    /* 2-d view of the first rows: the first elements match */
    s2[0] = N / 7;
    nrt_launch l2 = rng_launch(ops[i], NRT_FLOAT32, c, 2, s2, 42 + i, 1000 + 3 * i);
    memcpy(l2.scalars, l.scalars, sizeof l.scalars);
    memcpy(l2.params, l.params, sizeof l.params);
    CHECK_OK(nrt_launch_run(&l2));
    CHECK(memcmp(a, c, sizeof(float) * (N / 7) * 7) == 0);
    /* an offset shifts the stream element-wise */
    l.params[1] += 5;
    l.operands[0].data = b;
    CHECK_OK(nrt_launch_run(&l));
    CHECK(memcmp(a + 5, b, sizeof(float) * (N - 5)) == 0);
  }
  free(a);
  free(b);
  free(c);
}

static void test_distributions(void) {
  enum { N = 200000 };
  float *x = malloc(sizeof(float) * N);
  int64_t s[1] = {N};
  /* uniform [-2, 3) */
  nrt_launch l = rng_launch(NRT_OP_UNIFORM, NRT_FLOAT32, x, 1, s, 7, 0);
  l.scalars[0].f = -2;
  l.scalars[1].f = 3;
  CHECK_OK(nrt_launch_run(&l));
  double sum = 0, sq = 0, mn = 1e9, mx = -1e9;
  for (int i = 0; i < N; i++) {
    sum += x[i];
    mn = x[i] < mn ? x[i] : mn;
    mx = x[i] > mx ? x[i] : mx;
  }
  CHECK(mn >= -2 && mx < 3 && mn < -1.99 && mx > 2.99);
  CHECK_NEAR(sum / N, 0.5, 0.02);
  /* normal(1, 2) */
  l = rng_launch(NRT_OP_NORMAL, NRT_FLOAT32, x, 1, s, 8, 0);
  l.scalars[0].f = 1;
  l.scalars[1].f = 2;
  CHECK_OK(nrt_launch_run(&l));
  sum = sq = 0;
  for (int i = 0; i < N; i++) {
    sum += x[i];
    sq += (x[i] - 1.0) * (x[i] - 1.0);
  }
  CHECK_NEAR(sum / N, 1.0, 0.02);
  CHECK_NEAR(sqrt(sq / N), 2.0, 0.02);
  /* bernoulli(0.25) into bool */
  uint8_t *m = malloc(N);
  l = rng_launch(NRT_OP_BERNOULLI_SCALAR, NRT_BOOL, m, 1, s, 9, 0);
  l.scalars[0].f = 0.25; /* the probability is a float even for a bool output */
  CHECK_OK(nrt_launch_run(&l));
  int64_t ones = 0, bad = 0;
  for (int i = 0; i < N; i++) {
    ones += m[i];
    bad += m[i] > 1;
  }
  CHECK(bad == 0);
  CHECK_NEAR((double)ones / N, 0.25, 0.01);
  /* bernoulli with a tensor of probabilities: 0 and 1 are certain */
  float p[4] = {0, 1, 0, 1}, out[4];
  int64_t s4[1] = {4};
  l = rng_launch(NRT_OP_BERNOULLI_TENSOR, NRT_FLOAT32, out, 1, s4, 10, 0);
  l.operands[1] = (nrt_operand){.data = p, .dtype = NRT_FLOAT32, .strides = {4}};
  CHECK_OK(nrt_launch_run(&l));
  CHECK(out[0] == 0 && out[1] == 1 && out[2] == 0 && out[3] == 1);
  /* random integers in [-3, 4) into int64: every value appears */
  int64_t *r = malloc(sizeof(int64_t) * N);
  l = rng_launch(NRT_OP_RANDOM_RANGE, NRT_INT64, r, 1, s, 11, 0);
  l.params[2] = -3;
  l.params[3] = 7;
  CHECK_OK(nrt_launch_run(&l));
  int hist[7] = {0};
  bad = 0;
  for (int i = 0; i < N; i++) {
    if (r[i] < -3 || r[i] > 3) bad++;
    else hist[r[i] + 3]++;
  }
  CHECK(bad == 0);
  for (int i = 0; i < 7; i++) CHECK_NEAR(hist[i] / (double)N, 1.0 / 7, 0.01);
  /* full 64-bit range (p3 == 0): high bits are random too */
  l.params[2] = 0;
  l.params[3] = 0;
  CHECK_OK(nrt_launch_run(&l));
  int64_t negatives = 0;
  for (int i = 0; i < N; i++) negatives += r[i] < 0;
  CHECK_NEAR((double)negatives / N, 0.5, 0.01);
  free(x);
  free(m);
  free(r);
}

/* Every op takes counter e / 4: the 32-bit draws of RANDOM_RANGE are the
 * low halves of its 64-bit draws, and an offset of 4 moves to the next
 * counter without overlap. */
static void test_counter_mapping(void) {
  enum { N = 1000 };
  int64_t lo[N], full[N];
  int64_t s[1] = {N};
  nrt_launch l = rng_launch(NRT_OP_RANDOM_RANGE, NRT_INT64, lo, 1, s, 77, 12);
  l.params[3] = (int64_t)(1ull << 32);
  CHECK_OK(nrt_launch_run(&l));
  l.params[3] = 0;
  l.operands[0].data = full;
  CHECK_OK(nrt_launch_run(&l));
  int bad = 0;
  for (int i = 0; i < N; i++) bad += (uint64_t)lo[i] != ((uint64_t)full[i] & 0xffffffffu);
  CHECK(bad == 0);
  /* element e's 32-bit word is word e % 4 of counter e / 4 */
  uint32_t w[4];
  nrt_philox4x32(77, (12 + 5) / 4, w);
  CHECK((uint64_t)lo[5] == w[(12 + 5) % 4]);
}

static void test_seeds_differ(void) {
  float a[64], b[64];
  int64_t s[1] = {64};
  nrt_launch l = rng_launch(NRT_OP_UNIFORM, NRT_FLOAT32, a, 1, s, 1, 0);
  l.scalars[1].f = 1;
  CHECK_OK(nrt_launch_run(&l));
  l.params[0] = 2;
  l.operands[0].data = b;
  CHECK_OK(nrt_launch_run(&l));
  int same = 0;
  for (int i = 0; i < 64; i++) same += a[i] == b[i];
  CHECK(same < 4);
}

int main(void) {
  RUN_TEST(test_philox_known_answers);
  RUN_TEST(test_thread_and_shape_independence);
  RUN_TEST(test_distributions);
  RUN_TEST(test_counter_mapping);
  RUN_TEST(test_seeds_differ);
  return TEST_RESULT();
}
