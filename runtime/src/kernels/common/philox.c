/* Philox4x32-10 (Salmon et al., SC'11): the counter-based generator of
 * every random kernel. The batched form computes many counters at once in
 * structure-of-arrays form so the rounds vectorise. */
#pragma GCC optimize("O3")
#include "kernels/common/philox.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

/* Philox for nb consecutive counters starting at `first`, rounds in
 * structure-of-arrays form so they vectorise across counters; the words
 * come out interleaved, out[4 j + k] = word k of counter first + j, which
 * makes consecutive elements' words consecutive in memory. */
void nrt_philox_batch(uint64_t key, uint64_t first, int nb, uint32_t stream, uint32_t *out) {
  uint32_t c0[NRT_PHILOX_MAX_BATCH], c1[NRT_PHILOX_MAX_BATCH], c2[NRT_PHILOX_MAX_BATCH], c3[NRT_PHILOX_MAX_BATCH];
  for (int j = 0; j < nb; j++) {
    uint64_t c = first + (uint64_t)j;
    c0[j] = (uint32_t)c;
    c1[j] = (uint32_t)(c >> 32);
    c2[j] = stream;
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
    out[4 * j] = c0[j];
    out[4 * j + 1] = c1[j];
    out[4 * j + 2] = c2[j];
    out[4 * j + 3] = c3[j];
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
  nrt_philox_batch(key, counter, 1, 0, out);
}

