/* The stable pair sort behind SORT (index), the order statistics and
 * unique (select). */
#include "kernels/common/sort.h"

/* Stable: insertion-sorted runs, then bottom-up merges that take from the
 * right only when strictly smaller. Returns the buffer holding the result. */
nrt_sort_pair *nrt_sort_pairs_stable(nrt_sort_pair *a, nrt_sort_pair *tmp, int64_t n) {
  enum { RUN = 32 };
  for (int64_t s = 0; s < n; s += RUN) {
    int64_t e = s + RUN < n ? s + RUN : n;
    for (int64_t i = s + 1; i < e; i++) {
      nrt_sort_pair x = a[i];
      int64_t j = i;
      for (; j > s && a[j - 1].key > x.key; j--) a[j] = a[j - 1];
      a[j] = x;
    }
  }
  nrt_sort_pair *src = a, *dst = tmp;
  for (int64_t w = RUN; w < n; w *= 2) {
    for (int64_t s = 0; s < n; s += 2 * w) {
      int64_t mid = s + w < n ? s + w : n, hi = s + 2 * w < n ? s + 2 * w : n;
      int64_t i = s, j = mid, o = s;
      while (i < mid && j < hi) dst[o++] = src[j].key < src[i].key ? src[j++] : src[i++];
      while (i < mid) dst[o++] = src[i++];
      while (j < hi) dst[o++] = src[j++];
    }
    nrt_sort_pair *t = src;
    src = dst;
    dst = t;
  }
  return src;
}
