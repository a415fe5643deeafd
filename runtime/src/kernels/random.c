/* Random number ops: counter-based, so a result depends only on the seed,
 * the offset and the element's position, never on how the work was split
 * across threads or blocks.
 *
 * Mapping (stable; changing it changes every user's random stream):
 *   key     = params[0] (seed), k0 = low 32 bits, k1 = high 32 bits
 *   e       = params[1] (offset) + the element's linear index, row-major
 *             over launch->sizes (the pointwise engine's iteration order)
 *   Philox4x32-10(key, counter = {lo32(c), hi32(c), 0, 0}) gives four
 *   32-bit words w[0..3] for each 64-bit counter value c.
 *   UNIFORM, BERNOULLI_*, RANDOM_RANGE with range <= 2^32:
 *             c = e / 4, the element uses word w[e % 4].
 *   NORMAL:   c = e / 4; elements 4c, 4c+1 share the Box-Muller pair
 *             (w[0], w[1]) (cos and sin), 4c+2, 4c+3 the pair (w[2], w[3]).
 *   RANDOM_RANGE with range > 2^32 (or 0, meaning 2^64):
 *             c = e / 2, the element uses w[2(e%2)] | w[2(e%2)+1] << 32.
 * The glue advances the offset by at least the element count per launch;
 * consecutive launches then never reuse a word.
 *
 * Conversions: u24 = (w >> 8) * 2^-24 in [0, 1) for uniform values (what
 * a float can hold exactly); Bernoulli compares w * 2^-32 < p; normal uses
 * u1 = (w0 >> 8 + 1) * 2^-24 in (0, 1] so log(u1) is finite. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/pw_ops.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

/* Up to NRT_BLOCK elements need at most NRT_BLOCK/2 + 1 counters. */
#define MAX_CTR (NRT_BLOCK / 2 + 2)

/* Philox for nb consecutive counters starting at `first`, in
 * structure-of-arrays form so the rounds vectorise across counters. */
static void philox_batch(uint64_t key, uint64_t first, int nb, uint32_t w[4][MAX_CTR]) {
  uint32_t c0[MAX_CTR], c1[MAX_CTR], c2[MAX_CTR], c3[MAX_CTR];
  for (int j = 0; j < nb; j++) {
    uint64_t c = first + (uint64_t)j;
    c0[j] = (uint32_t)c;
    c1[j] = (uint32_t)(c >> 32);
    c2[j] = 0;
    c3[j] = 0;
  }
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int r = 0; r < 10; r++) {
    for (int j = 0; j < nb; j++) {
      uint64_t p0 = (uint64_t)PHILOX_M0 * c0[j];
      uint64_t p1 = (uint64_t)PHILOX_M1 * c2[j];
      uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[j] ^ k0;
      uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3[j] ^ k1;
      c1[j] = (uint32_t)p1;
      c3[j] = (uint32_t)p0;
      c0[j] = n0;
      c2[j] = n2;
    }
    k0 += PHILOX_W0;
    k1 += PHILOX_W1;
  }
  for (int j = 0; j < nb; j++) {
    w[0][j] = c0[j];
    w[1][j] = c1[j];
    w[2][j] = c2[j];
    w[3][j] = c3[j];
  }
}

/* One block, straight from the Philox paper (Salmon et al., SC'11); the
 * reference the batched version is tested against. */
void nrt_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1;
    c3 = (uint32_t)p0;
    c0 = n0;
    c2 = n2;
    k0 += PHILOX_W0;
    k1 += PHILOX_W1;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

void nrt_philox4x32(uint64_t key, uint64_t counter, uint32_t out[4]) {
  uint32_t w[4][MAX_CTR];
  philox_batch(key, counter, 1, w);
  for (int i = 0; i < 4; i++) out[i] = w[i][0];
}

/* Words for elements e0 .. e0+n-1, one word per element (c = e / 4). */
static void words_per_element(const nrt_launch *l, int64_t index, int64_t n, uint32_t *out) {
  uint32_t w[4][MAX_CTR];
  uint64_t e0 = (uint64_t)l->params[1] + (uint64_t)index;
  uint64_t first = e0 >> 2;
  int nb = (int)((((e0 + (uint64_t)n - 1) >> 2) - first) + 1);
  philox_batch((uint64_t)l->params[0], first, nb, w);
  for (int64_t i = 0; i < n; i++) {
    uint64_t e = e0 + (uint64_t)i;
    out[i] = w[e & 3][(e >> 2) - first];
  }
}

static void uniform_rng(float *out, const float *a, int64_t n, int64_t index, const nrt_launch *l) {
  uint32_t w[NRT_BLOCK];
  float from = (float)l->scalars[0].f, span = (float)(l->scalars[1].f - l->scalars[0].f);
  words_per_element(l, index, n, w);
  for (int64_t i = 0; i < n; i++) out[i] = (float)(w[i] >> 8) * 0x1p-24f * span + from;
}

static void normal_rng(float *out, const float *a, int64_t n, int64_t index, const nrt_launch *l) {
  uint32_t w[4][MAX_CTR];
  uint64_t e0 = (uint64_t)l->params[1] + (uint64_t)index;
  uint64_t first = e0 >> 2;
  int nb = (int)((((e0 + (uint64_t)n - 1) >> 2) - first) + 1);
  philox_batch((uint64_t)l->params[0], first, nb, w);
  double mean = l->scalars[0].f, std = l->scalars[1].f;
  for (int64_t i = 0; i < n; i++) {
    uint64_t e = e0 + (uint64_t)i;
    uint64_t j = (e >> 2) - first;
    int pair = (int)(e & 2);
    double u1 = ((double)(w[pair][j] >> 8) + 1.0) * 0x1p-24;
    double u2 = (double)(w[pair + 1][j] >> 8) * 0x1p-24;
    double r = sqrt(-2.0 * log(u1)), theta = 6.283185307179586 * u2;
    double z = (e & 1) ? r * sin(theta) : r * cos(theta);
    out[i] = (float)(mean + std * z);
  }
}

static void bernoulli_scalar_rng(float *out, const float *a, int64_t n, int64_t index,
                                 const nrt_launch *l) {
  uint32_t w[NRT_BLOCK];
  double p = l->scalars[0].f;
  words_per_element(l, index, n, w);
  for (int64_t i = 0; i < n; i++) out[i] = (double)w[i] * 0x1p-32 < p ? 1.0f : 0.0f;
}
static void bernoulli_scalar_rng_i64(int64_t *out, int64_t n, int64_t index, const nrt_launch *l) {
  uint32_t w[NRT_BLOCK];
  /* The probability is a float even when the output is an integer. */
  double p = l->scalars[0].f;
  words_per_element(l, index, n, w);
  for (int64_t i = 0; i < n; i++) out[i] = (double)w[i] * 0x1p-32 < p;
}

static void bernoulli_tensor_rng(float *out, const float *a, int64_t n, int64_t index,
                                 const nrt_launch *l) {
  uint32_t w[NRT_BLOCK];
  words_per_element(l, index, n, w);
  for (int64_t i = 0; i < n; i++) out[i] = (double)w[i] * 0x1p-32 < (double)a[i] ? 1.0f : 0.0f;
}

/* Integers in [p2, p2 + p3); p3 == 0 means the full 64-bit range. */
static void random_range_words(int64_t *out, int64_t n, int64_t index, const nrt_launch *l) {
  uint64_t base = (uint64_t)l->params[2], range = (uint64_t)l->params[3];
  if (range != 0 && range <= (1ull << 32)) {
    uint32_t w[NRT_BLOCK];
    words_per_element(l, index, n, w);
    for (int64_t i = 0; i < n; i++) out[i] = (int64_t)(base + w[i] % range);
    return;
  }
  uint32_t w[4][MAX_CTR];
  uint64_t e0 = (uint64_t)l->params[1] + (uint64_t)index;
  uint64_t first = e0 >> 1;
  int nb = (int)((((e0 + (uint64_t)n - 1) >> 1) - first) + 1);
  philox_batch((uint64_t)l->params[0], first, nb, w);
  for (int64_t i = 0; i < n; i++) {
    uint64_t e = e0 + (uint64_t)i, j = (e >> 1) - first;
    int lane = (int)(e & 1) * 2;
    uint64_t r = (uint64_t)w[lane][j] | (uint64_t)w[lane + 1][j] << 32;
    out[i] = (int64_t)(base + (range ? r % range : r));
  }
}
static void random_range_rng(float *out, const float *a, int64_t n, int64_t index,
                             const nrt_launch *l) {
  int64_t v[NRT_BLOCK];
  random_range_words(v, n, index, l);
  for (int64_t i = 0; i < n; i++) out[i] = (float)v[i];
}

const nrt_pw_kernel *nrt_pw_random_kernel(nrt_op op) {
  switch (op) {
    PW_CASE(UNIFORM, .rng_f32 = uniform_rng)
    PW_CASE(NORMAL, .rng_f32 = normal_rng)
    PW_CASE(BERNOULLI_SCALAR, .rng_f32 = bernoulli_scalar_rng, .rng_i64 = bernoulli_scalar_rng_i64)
    PW_CASE(BERNOULLI_TENSOR, .rng_f32 = bernoulli_tensor_rng)
    PW_CASE(RANDOM_RANGE, .rng_f32 = random_range_rng, .rng_i64 = random_range_words)
  default: return NULL;
  }
}
