/* Philox4x32-10 counter-based random numbers (philox.c): the device
 * generator behind every random kernel (pointwise RNG ops, attention
 * dropout, samplers). */
#ifndef NRT_KERNELS_COMMON_PHILOX_H
#define NRT_KERNELS_COMMON_PHILOX_H

#include <stdint.h>

/* Most counters one nrt_philox_batch call computes. */
#define NRT_PHILOX_MAX_BATCH 130

/* Words of nb (<= NRT_PHILOX_MAX_BATCH) consecutive counters {first + j,
 * stream, 0} under `key`, interleaved: out[4 j + k] = word k of counter j. */
void nrt_philox_batch(uint64_t key, uint64_t first, int nb, uint32_t stream, uint32_t *out);

/* Philox4x32-10 (philox.c), exposed for tests: one block with a full
 * 128-bit counter, and the kernels' form (64-bit counter, high words 0,
 * through the batched code path). */
void nrt_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
void nrt_philox4x32(uint64_t key, uint64_t counter, uint32_t out[4]);

#endif
