/* Element type table and the 16-bit float conversions.
 *
 * The conversions work on bit patterns only, so they give the same answer
 * whatever the FPU's flush-to-zero / rounding state is on the calling
 * thread (a kernel thread may have FTZ/DAZ enabled for speed). */
#include <string.h>

#include "core/core.h"

static const size_t dtype_sizes[] = {
#define NRT_X(e, n, s) s,
    NRT_DTYPE_LIST(NRT_X)
#undef NRT_X
};
_Static_assert(sizeof(dtype_sizes) / sizeof(dtype_sizes[0]) == NRT_DTYPE_COUNT,
               "dtype_sizes must list every nrt_dtype");

static const char *const dtype_names[] = {
#define NRT_X(e, n, s) #n,
    NRT_DTYPE_LIST(NRT_X)
#undef NRT_X
};
_Static_assert(sizeof(dtype_names) / sizeof(dtype_names[0]) == NRT_DTYPE_COUNT,
               "dtype_names must list every nrt_dtype");

size_t nrt_dtype_size(nrt_dtype dtype) {
  if ((unsigned)dtype >= NRT_DTYPE_COUNT) return 0;
  return dtype_sizes[dtype];
}

const char *nrt_dtype_name(nrt_dtype dtype) {
  if ((unsigned)dtype >= NRT_DTYPE_COUNT) return "invalid";
  return dtype_names[dtype];
}

bool nrt_dtype_is_floating(nrt_dtype dtype) {
  return dtype == NRT_FLOAT16 || dtype == NRT_BFLOAT16 || dtype == NRT_FLOAT32 ||
         dtype == NRT_FLOAT64;
}

bool nrt_dtype_is_complex(nrt_dtype dtype) {
  return dtype == NRT_COMPLEX32 || dtype == NRT_COMPLEX64 || dtype == NRT_COMPLEX128;
}

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

float nrt_bf16_to_f32(uint16_t v) { return f32_from_bits((uint32_t)v << 16); }

uint16_t nrt_f32_to_bf16(float v) {
  uint32_t u = f32_bits(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    /* NaN: truncating could clear every payload bit left in the top half
     * and turn it into infinity; keep sign and payload, force it quiet. */
    return (uint16_t)((u >> 16) | 0x0040u);
  }
  /* Round to nearest, ties to even; an overflow carries into the exponent
   * and correctly produces infinity. */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float nrt_f16_to_f32(uint16_t v) {
  uint32_t sign = (uint32_t)(v & 0x8000u) << 16;
  uint32_t exp = (v >> 10) & 0x1fu;
  uint32_t mant = v & 0x3ffu;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mant << 13)); /* inf / NaN */
  if (exp == 0) {
    if (mant == 0) return f32_from_bits(sign);
    /* Subnormal: normalise so the leading 1 becomes the implicit bit. */
    int shift = 0;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      shift++;
    }
    mant &= 0x3ffu;
    /* value = 1.mant * 2^(-14 - shift) */
    uint32_t e32 = (uint32_t)(127 - 14 - shift);
    return f32_from_bits(sign | (e32 << 23) | (mant << 13));
  }
  return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t nrt_f32_to_f16(float v) {
  uint32_t u = f32_bits(v);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) {
    if (a == 0x7f800000u) return sign | 0x7c00u;
    /* NaN: keep the top payload bits, force quiet so it stays a NaN. */
    return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  }
  /* 65520 is halfway between 65504 (max finite) and 2^16; ties go to the
   * even neighbour, which is infinity. */
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a < 0x38800000u) {
    /* Below 2^-14: the result is an f16 subnormal (or zero) counting units
     * of 2^-24. Exactly 2^-25 ties to the even value 0. */
    if (a <= 0x33000000u) return sign;
    uint32_t e = a >> 23;
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; /* 14..24 */
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q); /* q == 0x400 is the smallest normal: still right */
  }
  /* Normal range: rebias the exponent (127 -> 15) and round the mantissa. */
  uint32_t r = a - 0x38000000u;
  r += 0xfffu + ((r >> 13) & 1u);
  return (uint16_t)(sign | (r >> 13));
}
