/* Sort keys in PyTorch's order and a stable pair sort (sort.c), shared by
 * index's SORT and select's order statistics and unique. */
#ifndef NRT_KERNELS_COMMON_SORT_H
#define NRT_KERNELS_COMMON_SORT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- sorting (index.c's SORT, select.c's order statistics and unique) ----
 * Each value maps to an unsigned key whose order is PyTorch's: -0.0 and 0.0
 * equal, every NaN equal and above +inf (the NaN key is UINT64_MAX, which
 * no other float reaches); integers in offset binary. A stable sort of
 * (key, position) pairs then gives ties in input order. */
static inline uint64_t nrt_sort_key_f64(double d) {
  if (isnan(d)) return UINT64_MAX;
  if (d == 0) d = 0.0; /* -0.0 sorts with 0.0 */
  uint64_t u;
  memcpy(&u, &d, 8);
  return (u >> 63) ? ~u : u | 0x8000000000000000ull;
}
static inline uint64_t nrt_sort_key_i64(int64_t v) { return (uint64_t)v ^ 0x8000000000000000ull; }

typedef struct nrt_sort_pair {
  uint64_t key;
  int64_t idx;
} nrt_sort_pair;

/* Stable ascending sort of a[0..n) by key using tmp[0..n) as scratch;
 * returns whichever of the two buffers holds the result (sort.c). */
nrt_sort_pair *nrt_sort_pairs_stable(nrt_sort_pair *a, nrt_sort_pair *tmp, int64_t n);

#endif
