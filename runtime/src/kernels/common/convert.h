/* Dtype conversion for kernels: inline scalar conversions (branch-light so
 * block loops vectorise) and the strided block loads and stores every
 * family uses to bring operands into the compute domain and back
 * (convert.c). core/dtype.c keeps the out-of-line versions the rest of the
 * runtime uses, and the tests check the two agree. */
#ifndef NRT_KERNELS_COMMON_CONVERT_H
#define NRT_KERNELS_COMMON_CONVERT_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "core/core.h"

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

/* ---- strided block loads and stores (convert.c) ----------------------------
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

#endif
