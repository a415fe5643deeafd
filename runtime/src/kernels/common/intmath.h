/* Integer helpers shared by the kernel families: wrapping arithmetic
 * (signed overflow is undefined in C, PyTorch wraps), integer powers, and
 * the small min/max/division helpers. */
#ifndef NRT_KERNELS_COMMON_INTMATH_H
#define NRT_KERNELS_COMMON_INTMATH_H

#include <stdint.h>

/* Wrap-around integer arithmetic (signed overflow is undefined in C). */
static inline int64_t nrt_wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t nrt_wsub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline int64_t nrt_wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

/* Integer power by squaring, wrapping like PyTorch's. A negative exponent
 * follows PyTorch's integer rule: 1 and -1 keep their magnitude, anything
 * else truncates to 0. */
static inline int64_t nrt_ipow(int64_t base, int64_t e) {
  if (e < 0) return base == 1 ? 1 : (base == -1 ? ((e & 1) ? -1 : 1) : 0);
  int64_t r = 1;
  while (e) {
    if (e & 1) r = nrt_wmul(r, base);
    base = nrt_wmul(base, base);
    e >>= 1;
  }
  return r;
}


static inline int64_t nrt_min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t nrt_max_i64(int64_t a, int64_t b) { return a > b ? a : b; }
/* ceil(a / b) for a >= 0, b > 0. */
static inline int64_t nrt_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
/* a rounded up to a multiple of b (b > 0). */
static inline int64_t nrt_round_up(int64_t a, int64_t b) { return nrt_cdiv(a, b) * b; }

#endif
