/* Shared by the kernel files only: dtype conversion helpers, the pointwise
 * op table and a few vectorisable math functions.
 *
 * Conversions here are inline and branch-light so that block loops
 * vectorise; dtype.c keeps the out-of-line versions the rest of the
 * runtime uses, and the tests check the two agree. */
#ifndef NRT_KERNELS_H
#define NRT_KERNELS_H

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "internal.h"

/* Elements per block in the pointwise and reduction engines: small enough
 * for the block buffers of three inputs and an output to stay in L1. */
#define NRT_BLOCK 256

/* Functions compiled for AVX-512 beside their baseline (x86-64-v2)
 * version; the rest of the build must run on any x86-64-v2 host. */
#define NRT_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma,f16c")))
#define NRT_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define NRT_TARGET_AVX512_BF16 \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma,f16c,avx512bf16")))
typedef enum nrt_isa {
  NRT_ISA_BASELINE,
  NRT_ISA_AVX2,
  NRT_ISA_AVX512,
  NRT_ISA_AVX512_BF16, /* AVX-512 with the bfloat16 dot product (Zen 4, Cooper Lake+) */
  NRT_ISA_BEST = NRT_ISA_AVX512_BF16
} nrt_isa;
nrt_isa nrt_kernels_isa(void);            /* best usable, after the limit */
void nrt_kernels_limit_isa(nrt_isa limit); /* tests: cap the ISA used */

static inline uint32_t nrt_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float nrt_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* ---- 16-bit floats ------------------------------------------------------ */
static inline float nrt_k_bf16_to_f32(uint16_t v) { return nrt_bits_f32((uint32_t)v << 16); }

static inline uint16_t nrt_k_f32_to_bf16(float f) {
  uint32_t u = nrt_f32_bits(f);
  /* NaN must stay NaN (rounding could carry it into infinity); PyTorch
   * writes the canonical 0x7fc0. */
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? 0x7fc0u : rounded);
}

static inline float nrt_k_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t em = h & 0x7fffu;
  /* Shifting exponent+mantissa into float position and scaling by 2^112
   * rebias the exponent and normalise half subnormals in one multiply. */
  float f = nrt_bits_f32(em << 13) * 0x1p112f;
  uint32_t bits = em >= 0x7c00u ? (0x7f800000u | (em & 0x3ffu) << 13) : nrt_f32_bits(f);
  return nrt_bits_f32(bits | sign);
}

static inline uint16_t nrt_k_f32_to_f16(float f) {
  uint32_t x = nrt_f32_bits(f);
  uint32_t sign = x & 0x80000000u;
  x ^= sign;
  uint16_t o;
  if (x >= 0x47800000u) { /* >= 65536: infinity, or NaN (kept quiet) */
    o = x > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (x < 0x38800000u) {
    /* Below the smallest normal half: adding 0.5 lets the FPU do the
     * round-to-nearest-even of the subnormal mantissa. */
    o = (uint16_t)(nrt_f32_bits(nrt_bits_f32(x) + 0.5f) - 0x3f000000u);
  } else {
    uint32_t odd = (x >> 13) & 1u;
    x += ((uint32_t)(15 - 127) << 23) + 0xfffu + odd;
    o = (uint16_t)(x >> 13);
  }
  return (uint16_t)(o | (sign >> 16));
}

/* ---- float -> integer, as PyTorch on x86 --------------------------------
 * static_cast<intN_t>(float) compiles to cvttss2si: out of range and NaN
 * give INT_MIN of the 32- or 64-bit form; narrower types truncate the
 * 32-bit result. C leaves those cases undefined, so spell them out. */
static inline int32_t nrt_k_f64_to_i32(double x) {
  return (x > -2147483649.0 && x < 2147483648.0) ? (int32_t)x : INT32_MIN;
}
static inline int64_t nrt_k_f64_to_i64(double x) {
  return (x >= -9223372036854775808.0 && x < 9223372036854775808.0) ? (int64_t)x : INT64_MIN;
}

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

/* ---- strided block loads and stores (conv.c) ----------------------------
 * `stride` is in bytes and may be 0 or negative. The float loaders read
 * float64 as float32 (the device computes floats in float32); the double
 * and int64 forms exist for exact copies and integer work. */
void nrt_load_f32(float *dst, const char *src, int64_t stride, nrt_dtype dt, int64_t n);
void nrt_load_i64(int64_t *dst, const char *src, int64_t stride, nrt_dtype dt, int64_t n);
void nrt_load_f64(double *dst, const char *src, int64_t stride, nrt_dtype dt, int64_t n);
void nrt_store_f32(char *dst, int64_t stride, nrt_dtype dt, const float *src, int64_t n);
void nrt_store_i64(char *dst, int64_t stride, nrt_dtype dt, const int64_t *src, int64_t n);
void nrt_store_f64(char *dst, int64_t stride, nrt_dtype dt, const double *src, int64_t n);

/* One element, through dtype.c's out-of-line conversions: the reference
 * paths use these so the fast loaders are checked against independent
 * code. */
double nrt_ref_load_f64(const char *src, nrt_dtype dt);
int64_t nrt_ref_load_i64(const char *src, nrt_dtype dt);
void nrt_ref_store_f64(char *dst, nrt_dtype dt, double v);
void nrt_ref_store_i64(char *dst, nrt_dtype dt, int64_t v);

static inline bool nrt_dtype_is_integral(nrt_dtype dt) { return !nrt_dtype_is_floating(dt); }

/* ---- pointwise op table --------------------------------------------------
 * A block function computes n elements from converted input blocks (a, b,
 * c; unused ones are NULL). out may alias an input at the same index (in-
 * place ops), never at a shifted one. Float blocks hold float32 values,
 * integer blocks int64 values; integer functions return nonzero on an
 * integer division by zero. Random functions also get the linear index of
 * their first element (consecutive elements have consecutive indices). */
typedef void (*nrt_pw_f32_fn)(float *out, const float *a, const float *b, const float *c,
                              int64_t n, const nrt_launch *l);
typedef int (*nrt_pw_i64_fn)(int64_t *out, const int64_t *a, const int64_t *b,
                             const int64_t *c, int64_t n, const nrt_launch *l);
typedef void (*nrt_pw_rng_f32_fn)(float *out, const float *a, int64_t n, int64_t index,
                                  const nrt_launch *l);
typedef void (*nrt_pw_rng_i64_fn)(int64_t *out, int64_t n, int64_t index, const nrt_launch *l);

typedef struct nrt_pw_kernel {
  nrt_pw_f32_fn f32;        /* float domain; NULL: not supported */
  nrt_pw_f32_fn f32_avx512; /* optional AVX-512 build of f32 */
  nrt_pw_f32_fn f32_ref;    /* scalar reference when f32 is hand-vectorised */
  nrt_pw_i64_fn i64;        /* integer domain; NULL: not supported */
  nrt_pw_rng_f32_fn rng_f32;
  nrt_pw_rng_i64_fn rng_i64;
} nrt_pw_kernel;

/* Family lookups: NULL if the op is not in the family. */
const nrt_pw_kernel *nrt_pw_unary_kernel(nrt_op op);
const nrt_pw_kernel *nrt_pw_binary_kernel(nrt_op op);
const nrt_pw_kernel *nrt_pw_activation_kernel(nrt_op op);
const nrt_pw_kernel *nrt_pw_random_kernel(nrt_op op);
const nrt_pw_kernel *nrt_pw_special_kernel(nrt_op op); /* special.c, family SPECIAL */
const nrt_pw_kernel *nrt_pw_nn_kernel(nrt_op op);      /* nn_pointwise.c, family NN */

/* Philox4x32-10 (random.c), exposed for tests: one block with a full
 * 128-bit counter, and the kernels' form (64-bit counter, high words 0,
 * through the batched code path). */
void nrt_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
void nrt_philox4x32(uint64_t key, uint64_t counter, uint32_t out[4]);

/* ---- vectorisable float math (vmath.h-style inline, ~1 ulp) ------------ */
#include "kernels/vmath.h"

/* o[i] = sqrtf(x[i]), correctly rounded, four at a time. The compiler only
 * vectorises sqrtf when -fno-math-errno is on its command line (an optimize
 * pragma does not reach it), so the SSE instruction is spelled out; SSE is
 * part of x86-64. o may alias x. */
static inline void nrt_sqrt_block(float *o, const float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(o + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
  for (; i < n; i++) o[i] = _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(x[i])));
}

/* ---- kernel error exits --------------------------------------------------
 * Sets the calling thread's error message (printf-style; it surfaces as
 * the RuntimeError at the next sync) and returns st, so that a kernel's
 * checks read `if (bad) return nrt_kernel_fail(NRT_ERROR_..., "...", ...);`. */
#include <stdarg.h>
#include <stdio.h>
static inline nrt_status nrt_kernel_fail(nrt_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline nrt_status nrt_kernel_fail(nrt_status st, const char *fmt, ...) {
  char msg[NRT_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  nrt_set_error_message("%s", msg);
  return st;
}

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
 * returns whichever of the two buffers holds the result (index.c). */
nrt_sort_pair *nrt_sort_pairs_stable(nrt_sort_pair *a, nrt_sort_pair *tmp, int64_t n);

#endif
