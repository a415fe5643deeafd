/* Random number ops: counter-based, so a result depends only on the seed,
 * the offset and the element's position, never on how the work was split
 * across threads or blocks.
 *
 * Mapping (stable; changing it changes every user's random stream):
 *   key     = params[0] (seed), k0 = low 32 bits, k1 = high 32 bits
 *   e       = params[1] (offset) + the element's linear index, row-major
 *             over launch->sizes (the pointwise engine's iteration order)
 *   c       = e / 4: four elements share a counter
 *   Philox4x32-10(key, counter = {lo32(c), hi32(c), s, 0}) gives four
 *   32-bit words w_s[0..3]; s (0 or 1) is a stream selector.
 *   UNIFORM, BERNOULLI_*, RANDOM_RANGE with range <= 2^32:
 *             the element uses w_0[e % 4].
 *   NORMAL:   elements 4c, 4c+1 share the Box-Muller pair (w_0[0], w_0[1])
 *             (r cos, r sin), 4c+2, 4c+3 the pair (w_0[2], w_0[3]).
 *   RANDOM_RANGE with range > 2^32 (or 0, meaning 2^64):
 *             the element uses w_0[e % 4] | w_1[e % 4] << 32.
 * Every op maps element e to counter e / 4, so a launch covering offsets
 * [o, o + n) uses counters [o / 4, (o + n - 1) / 4] only; with the glue
 * advancing the offset by at least n per launch, launches never share a
 * word (a counter shared at a boundary is split by lane).
 *
 * Conversions: u24 = (w >> 8) * 2^-24 in [0, 1) for uniform values (what
 * a float can hold exactly); Bernoulli compares w * 2^-32 < p; normal uses
 * u1 = (w0 >> 8 + 1) * 2^-24 in (0, 1] so log(u1) is finite. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include "kernels/pointwise/pointwise.h"

/* Up to NRT_BLOCK elements need at most NRT_BLOCK/2 + 1 counters. */
_Static_assert(NRT_BLOCK / 2 + 2 <= NRT_PHILOX_MAX_BATCH, "a block needs more Philox counters than a batch holds");

/* The words of elements e0 .. e0+n-1 from stream s (one word each,
 * counter e / 4): returns a pointer to the first element's word in buf. */
static const uint32_t *words_per_element(const nrt_launch *l, int64_t index, int64_t n,
                                         uint32_t stream, uint32_t *buf) {
  uint64_t e0 = (uint64_t)l->params[1] + (uint64_t)index;
  uint64_t first = e0 >> 2;
  int nb = (int)((((e0 + (uint64_t)n - 1) >> 2) - first) + 1);
  nrt_philox_batch((uint64_t)l->params[0], first, nb, stream, buf);
  return buf + (e0 & 3);
}

static void uniform_rng(float *out, const float *a, int64_t n, int64_t index, const nrt_launch *l) {
  uint32_t buf[4 * NRT_PHILOX_MAX_BATCH];
  float from = (float)l->scalars[0].f, span = (float)(l->scalars[1].f - l->scalars[0].f);
  const uint32_t *w = words_per_element(l, index, n, 0, buf);
  for (int64_t i = 0; i < n; i++) out[i] = (float)(w[i] >> 8) * 0x1p-24f * span + from;
}

/* sin and cos of 2 pi t for t in [0, 1): quarter turns are exact, the rest
 * |a| <= pi/4 goes through Cephes' single-precision polynomials. */
static inline void sincos_2pi(float t, float *s_out, float *c_out) {
  float q = (t * 4.0f + 0x1.8p23f) - 0x1.8p23f; /* nearest quarter */
  float a = (t - q * 0.25f) * 6.28318530717958648f;
  float z = a * a;
  float s = ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * a + a;
  float c = ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) * z * z -
            0.5f * z + 1.0f;
  int qi = (int)q & 3;
  float sr = qi == 0 ? s : (qi == 1 ? c : (qi == 2 ? -s : -c));
  float cr = qi == 0 ? c : (qi == 1 ? -s : (qi == 2 ? -c : s));
  *s_out = sr;
  *c_out = cr;
}

static void normal_rng(float *out, const float *a, int64_t n, int64_t index, const nrt_launch *l) {
  uint32_t w[4 * NRT_PHILOX_MAX_BATCH];
  float z[4 * NRT_PHILOX_MAX_BATCH], r[2 * NRT_PHILOX_MAX_BATCH];
  uint64_t e0 = (uint64_t)l->params[1] + (uint64_t)index;
  uint64_t first = e0 >> 2;
  int nb = (int)((((e0 + (uint64_t)n - 1) >> 2) - first) + 1);
  nrt_philox_batch((uint64_t)l->params[0], first, nb, 0, w);
  /* Box-Muller: one counter's two word pairs give four normals. */
  for (int j = 0; j < 2 * nb; j++) {
    float u1 = ((float)(w[2 * j] >> 8) + 1.0f) * 0x1p-24f; /* (0, 1]: log is finite */
    r[j] = -2.0f * nrt_vlogf(u1);
  }
  nrt_sqrt_block(r, r, 2 * nb);
  for (int j = 0; j < 2 * nb; j++) {
    float u2 = (float)(w[2 * j + 1] >> 8) * 0x1p-24f, s, c;
    sincos_2pi(u2, &s, &c);
    z[2 * j] = r[j] * c;
    z[2 * j + 1] = r[j] * s;
  }
  float mean = (float)l->scalars[0].f, std = (float)l->scalars[1].f;
  const float *zz = z + (e0 & 3);
  for (int64_t i = 0; i < n; i++) out[i] = mean + std * zz[i];
}

static void bernoulli_scalar_rng(float *out, const float *a, int64_t n, int64_t index,
                                 const nrt_launch *l) {
  uint32_t buf[4 * NRT_PHILOX_MAX_BATCH];
  double p = l->scalars[0].f;
  const uint32_t *w = words_per_element(l, index, n, 0, buf);
  for (int64_t i = 0; i < n; i++) out[i] = (double)w[i] * 0x1p-32 < p ? 1.0f : 0.0f;
}
static void bernoulli_scalar_rng_i64(int64_t *out, int64_t n, int64_t index, const nrt_launch *l) {
  uint32_t buf[4 * NRT_PHILOX_MAX_BATCH];
  /* The probability is a float even when the output is an integer. */
  double p = l->scalars[0].f;
  const uint32_t *w = words_per_element(l, index, n, 0, buf);
  for (int64_t i = 0; i < n; i++) out[i] = (double)w[i] * 0x1p-32 < p;
}

static void bernoulli_tensor_rng(float *out, const float *a, int64_t n, int64_t index,
                                 const nrt_launch *l) {
  uint32_t buf[4 * NRT_PHILOX_MAX_BATCH];
  const uint32_t *w = words_per_element(l, index, n, 0, buf);
  for (int64_t i = 0; i < n; i++) out[i] = (double)w[i] * 0x1p-32 < (double)a[i] ? 1.0f : 0.0f;
}

/* Integers in [p2, p2 + p3); p3 == 0 means the full 64-bit range. The
 * modulo keeps PyTorch's (small) bias for ranges that are not powers of
 * two. */
static void random_range_words(int64_t *out, int64_t n, int64_t index, const nrt_launch *l) {
  uint64_t base = (uint64_t)l->params[2], range = (uint64_t)l->params[3];
  uint32_t buf[4 * NRT_PHILOX_MAX_BATCH], buf_hi[4 * NRT_PHILOX_MAX_BATCH];
  const uint32_t *w = words_per_element(l, index, n, 0, buf);
  if (range != 0 && range <= (1ull << 32)) {
    for (int64_t i = 0; i < n; i++) out[i] = (int64_t)(base + w[i] % range);
    return;
  }
  const uint32_t *hi = words_per_element(l, index, n, 1, buf_hi);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = (uint64_t)w[i] | (uint64_t)hi[i] << 32;
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
