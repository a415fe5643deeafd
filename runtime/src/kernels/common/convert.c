/* Block loads and stores between stored dtypes and the compute domains.
 * Every kernel family reads and writes operands through these, so each
 * (dtype, contiguous?) pair gets its own tight loop the compiler can
 * vectorise. */
#pragma GCC optimize("O3,no-trapping-math")
#include "kernels/common/common.h"

#define CONV_INLINE static inline __attribute__((always_inline))

/* float16 <-> float32 with the F16C instructions, 16 at a time; vcvtps2ph
 * rounds to nearest even and keeps NaN quiet, like the scalar form. */
NRT_TARGET_AVX512 static void f16_load_avx512(float *dst, const uint16_t *src, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
  for (; i < n; i++) dst[i] = nrt_k_f16_to_f32(src[i]);
}
NRT_TARGET_AVX512 static void f16_store_avx512(uint16_t *dst, const float *src, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(dst + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++) dst[i] = nrt_k_f32_to_f16(src[i]);
}

/* float -> int with the same rule as nrt_k_f64_to_i32/_i64 (x86
 * truncating conversion), in float so the loops vectorise. */
CONV_INLINE int32_t f32_to_i32(float x) {
  return (x >= -2147483648.0f && x < 2147483648.0f) ? (int32_t)x : INT32_MIN;
}
CONV_INLINE int64_t f32_to_i64(float x) {
  return (x >= -9223372036854775808.0f && x < 9223372036854775808.0f) ? (int64_t)x : INT64_MIN;
}
/* float -> uint64 as x86 compilers lower static_cast<uint64_t>: below 2^63
 * through the signed conversion (negative values wrap), above it shifted
 * down by 2^63 and the top bit restored. */
CONV_INLINE uint64_t f32_to_u64(float x) {
  if (x < 9223372036854775808.0f) return (uint64_t)f32_to_i64(x);
  return (uint64_t)f32_to_i64(x - 9223372036854775808.0f) ^ 0x8000000000000000ull;
}
CONV_INLINE uint64_t f64_to_u64(double x) {
  if (x < 9223372036854775808.0) return (uint64_t)nrt_k_f64_to_i64(x);
  return (uint64_t)nrt_k_f64_to_i64(x - 9223372036854775808.0) ^ 0x8000000000000000ull;
}

/* Loop over n elements; the contiguous form lets the compiler vectorise.
 * STYPE is the stored element type, EXPR the converted value of v. */
#define LOAD_LOOP(STYPE, EXPR)                                       \
  do {                                                               \
    if (stride == (int64_t)sizeof(STYPE)) {                          \
      const STYPE *s_ = (const STYPE *)src;                          \
      for (int64_t i = 0; i < n; i++) {                              \
        STYPE v = s_[i];                                             \
        dst[i] = (EXPR);                                             \
      }                                                              \
    } else {                                                         \
      for (int64_t i = 0; i < n; i++) {                              \
        STYPE v = *(const STYPE *)(src + i * stride);                \
        dst[i] = (EXPR);                                             \
      }                                                              \
    }                                                                \
  } while (0)

#define STORE_LOOP(STYPE, EXPR)                                      \
  do {                                                               \
    if (stride == (int64_t)sizeof(STYPE)) {                          \
      STYPE *d_ = (STYPE *)dst;                                      \
      for (int64_t i = 0; i < n; i++) {                              \
        __typeof__(src[0]) v = src[i];                               \
        d_[i] = (STYPE)(EXPR);                                       \
      }                                                              \
    } else {                                                         \
      for (int64_t i = 0; i < n; i++) {                              \
        __typeof__(src[0]) v = src[i];                               \
        *(STYPE *)(dst + i * stride) = (STYPE)(EXPR);                \
      }                                                              \
    }                                                                \
  } while (0)

/* Every stored dtype, its C type, and how its values convert: loads to
 * float32, int64 and float64 (v is the stored element), stores from them
 * (v is the computed value; STORE_LOOP casts the result to the C type).
 * Narrowing integer stores wrap (two's complement), as in PyTorch; going
 * through uint64_t keeps that free of implementation choices. Floats go
 * to integers with the x86 truncating rule (f32_to_i32/_i64,
 * nrt_k_f64_to_i32/_i64). c10's Half/BFloat16 constructors take a float:
 * int64 and double round to float first, and so do we. */
#define CONVERT_DTYPES(X)                                                                                     \
  /* dtype        C type    load: to float32        to int64                          to float64          */ \
  /*                        store: from float32     from int64                        from float64        */ \
  X(NRT_BOOL,     uint8_t,  v != 0 ? 1.0f : 0.0f,   v != 0,                           v != 0 ? 1.0 : 0.0,    \
                            v != 0.0f,              v != 0,                           v != 0.0)              \
  X(NRT_UINT8,    uint8_t,  (float)v,               (int64_t)v,                       (double)v,             \
                            f32_to_i32(v),          (uint64_t)v,                      nrt_k_f64_to_i32(v))   \
  X(NRT_INT8,     int8_t,   (float)v,               (int64_t)v,                       (double)v,             \
                            f32_to_i32(v),          (uint8_t)(uint64_t)v,             nrt_k_f64_to_i32(v))   \
  X(NRT_INT16,    int16_t,  (float)v,               (int64_t)v,                       (double)v,             \
                            f32_to_i32(v),          (uint16_t)(uint64_t)v,            nrt_k_f64_to_i32(v))   \
  X(NRT_INT32,    int32_t,  (float)v,               (int64_t)v,                       (double)v,             \
                            f32_to_i32(v),          (uint32_t)(uint64_t)v,            nrt_k_f64_to_i32(v))   \
  X(NRT_INT64,    int64_t,  (float)v,               v,                                (double)v,             \
                            f32_to_i64(v),          v,                                nrt_k_f64_to_i64(v))   \
  X(NRT_UINT16,   uint16_t, (float)v,               (int64_t)v,                       (double)v,             \
                            f32_to_i32(v),          (uint64_t)v,                      nrt_k_f64_to_i32(v))   \
  X(NRT_UINT32,   uint32_t, (float)v,               (int64_t)v,                       (double)v,             \
                            f32_to_i64(v),          (uint64_t)v,                      nrt_k_f64_to_i64(v))   \
  X(NRT_UINT64,   uint64_t, (float)v,               (int64_t)v,                       (double)v,             \
                            f32_to_u64(v),          (uint64_t)v,                      f64_to_u64(v))         \
  X(NRT_FLOAT16,  uint16_t, nrt_k_f16_to_f32(v),    f32_to_i64(nrt_k_f16_to_f32(v)),  (double)nrt_k_f16_to_f32(v), \
                            nrt_k_f32_to_f16(v),    nrt_k_f32_to_f16((float)v),       nrt_k_f32_to_f16((float)v))  \
  X(NRT_BFLOAT16, uint16_t, nrt_k_bf16_to_f32(v),   f32_to_i64(nrt_k_bf16_to_f32(v)), (double)nrt_k_bf16_to_f32(v), \
                            nrt_k_f32_to_bf16(v),   nrt_k_f32_to_bf16((float)v),      nrt_k_f32_to_bf16((float)v))  \
  X(NRT_FLOAT32,  float,    v,                      f32_to_i64(v),                    (double)v,             \
                            v,                      (float)v,                         (float)v)              \
  X(NRT_FLOAT64,  double,   (float)v,               nrt_k_f64_to_i64(v),              v,                     \
                            (double)v,              (double)v,                        v)

#define LOAD_F32_CASE(DT, T, LF, LI, LD, SF, SI, SD) case DT: LOAD_LOOP(T, LF); break;
#define LOAD_I64_CASE(DT, T, LF, LI, LD, SF, SI, SD) case DT: LOAD_LOOP(T, LI); break;
#define LOAD_F64_CASE(DT, T, LF, LI, LD, SF, SI, SD) case DT: LOAD_LOOP(T, LD); break;
#define STORE_F32_CASE(DT, T, LF, LI, LD, SF, SI, SD) case DT: STORE_LOOP(T, SF); break;
#define STORE_I64_CASE(DT, T, LF, LI, LD, SF, SI, SD) case DT: STORE_LOOP(T, SI); break;
#define STORE_F64_CASE(DT, T, LF, LI, LD, SF, SI, SD) case DT: STORE_LOOP(T, SD); break;

/* A dtype that is the domain's own, unit-stride, is a plain copy. */
#define SAME_TYPE_COPY(DT, SIZE)                    \
  if (dt == (DT) && stride == (SIZE)) {             \
    memcpy(dst, src, (size_t)n * (SIZE));           \
    return;                                         \
  }

CONV_INLINE void load_f32_run(float *dst, const char *src, int64_t stride, nrt_dtype dt, int64_t n, bool wide) {
  if (wide && dt == NRT_FLOAT16 && stride == 2) {
    f16_load_avx512(dst, (const uint16_t *)src, n);
    return;
  }
  SAME_TYPE_COPY(NRT_FLOAT32, 4)
  switch (dt) {
    CONVERT_DTYPES(LOAD_F32_CASE)
  default: break;
  }
}

CONV_INLINE void load_f32_impl(float *dst, const char *src, int64_t stride, nrt_dtype dt, int64_t n,
                               bool wide) {
  if (stride == 0 && n > 1) {
    /* a broadcast operand (a scalar, an expanded dim): one conversion and
     * a fill the compiler vectorises; the strided loop stored one element
     * a cycle, as long as the kernel itself on a 4096-element add_(1) */
    load_f32_run(dst, src, 0, dt, 1, wide);
    float v = dst[0];
    for (int64_t i = 1; i < n; i++) dst[i] = v;
    return;
  }
  load_f32_run(dst, src, stride, dt, n, wide);
}

void nrt_load_i64(int64_t *dst, const char *src, int64_t stride, nrt_dtype dt, int64_t n) {
  SAME_TYPE_COPY(NRT_INT64, 8)
  switch (dt) {
    CONVERT_DTYPES(LOAD_I64_CASE)
  default: break;
  }
}

void nrt_load_f64(double *dst, const char *src, int64_t stride, nrt_dtype dt, int64_t n) {
  SAME_TYPE_COPY(NRT_FLOAT64, 8)
  switch (dt) {
    CONVERT_DTYPES(LOAD_F64_CASE)
  default: break;
  }
}

CONV_INLINE void store_f32_impl(char *dst, int64_t stride, nrt_dtype dt, const float *src, int64_t n,
                                bool wide) {
  if (wide && dt == NRT_FLOAT16 && stride == 2) {
    f16_store_avx512((uint16_t *)dst, src, n);
    return;
  }
  SAME_TYPE_COPY(NRT_FLOAT32, 4)
  switch (dt) {
    CONVERT_DTYPES(STORE_F32_CASE)
  default: break;
  }
}

/* Two builds of the float conversions: the AVX-512 one converts 16 lanes
 * at a time (and float16 with the hardware instructions). */
static void load_f32_base(float *dst, const char *src, int64_t stride, nrt_dtype dt, int64_t n) {
  load_f32_impl(dst, src, stride, dt, n, false);
}
NRT_TARGET_AVX512 static void load_f32_avx512(float *dst, const char *src, int64_t stride,
                                              nrt_dtype dt, int64_t n) {
  load_f32_impl(dst, src, stride, dt, n, true);
}
static void store_f32_base(char *dst, int64_t stride, nrt_dtype dt, const float *src, int64_t n) {
  store_f32_impl(dst, stride, dt, src, n, false);
}
NRT_TARGET_AVX512 static void store_f32_avx512(char *dst, int64_t stride, nrt_dtype dt,
                                               const float *src, int64_t n) {
  store_f32_impl(dst, stride, dt, src, n, true);
}

void nrt_load_f32(float *dst, const char *src, int64_t stride, nrt_dtype dt, int64_t n) {
  if (nrt_kernels_isa() >= NRT_ISA_AVX512) load_f32_avx512(dst, src, stride, dt, n);
  else load_f32_base(dst, src, stride, dt, n);
}

void nrt_store_f32(char *dst, int64_t stride, nrt_dtype dt, const float *src, int64_t n) {
  if (nrt_kernels_isa() >= NRT_ISA_AVX512) store_f32_avx512(dst, stride, dt, src, n);
  else store_f32_base(dst, stride, dt, src, n);
}

void nrt_store_i64(char *dst, int64_t stride, nrt_dtype dt, const int64_t *src, int64_t n) {
  SAME_TYPE_COPY(NRT_INT64, 8)
  switch (dt) {
    CONVERT_DTYPES(STORE_I64_CASE)
  default: break;
  }
}

void nrt_store_f64(char *dst, int64_t stride, nrt_dtype dt, const double *src, int64_t n) {
  SAME_TYPE_COPY(NRT_FLOAT64, 8)
  switch (dt) {
    CONVERT_DTYPES(STORE_F64_CASE)
  default: break;
  }
}

/* ---- one element, through dtype.c (reference paths) ------------------- */

/* Integers (bool included) load exactly as int64, and as double from
 * that (every value of the narrower types is exact in double). */
int64_t nrt_ref_load_i64(const char *src, nrt_dtype dt) {
  switch (dt) {
  case NRT_BOOL: return *(const uint8_t *)src != 0;
  case NRT_UINT8: return *(const uint8_t *)src;
  case NRT_INT8: return *(const int8_t *)src;
  case NRT_INT16: return *(const int16_t *)src;
  case NRT_INT32: return *(const int32_t *)src;
  case NRT_INT64: return *(const int64_t *)src;
  case NRT_UINT16: return *(const uint16_t *)src;
  case NRT_UINT32: return *(const uint32_t *)src;
  case NRT_UINT64: return (int64_t)*(const uint64_t *)src;
  default: return nrt_k_f64_to_i64(nrt_ref_load_f64(src, dt));
  }
}

double nrt_ref_load_f64(const char *src, nrt_dtype dt) {
  switch (dt) {
  case NRT_BOOL:
  case NRT_UINT8:
  case NRT_INT8:
  case NRT_INT16:
  case NRT_INT32:
  case NRT_INT64:
  case NRT_UINT16:
  case NRT_UINT32: return (double)nrt_ref_load_i64(src, dt);
  case NRT_UINT64: return (double)*(const uint64_t *)src;
  case NRT_FLOAT16: return nrt_f16_to_f32(*(const uint16_t *)src);
  case NRT_BFLOAT16: return nrt_bf16_to_f32(*(const uint16_t *)src);
  case NRT_FLOAT32: return *(const float *)src;
  case NRT_FLOAT64: return *(const double *)src;
  default: return 0.0;
  }
}

void nrt_ref_store_f64(char *dst, nrt_dtype dt, double v) {
  switch (dt) {
  case NRT_BOOL: *(uint8_t *)dst = v != 0.0; break;
  case NRT_UINT8: *(uint8_t *)dst = (uint8_t)(uint32_t)nrt_k_f64_to_i32(v); break;
  case NRT_INT8: *(int8_t *)dst = (int8_t)(uint8_t)(uint32_t)nrt_k_f64_to_i32(v); break;
  case NRT_INT16: *(int16_t *)dst = (int16_t)(uint16_t)(uint32_t)nrt_k_f64_to_i32(v); break;
  case NRT_INT32: *(int32_t *)dst = nrt_k_f64_to_i32(v); break;
  case NRT_INT64: *(int64_t *)dst = nrt_k_f64_to_i64(v); break;
  case NRT_UINT16: *(uint16_t *)dst = (uint16_t)(uint32_t)nrt_k_f64_to_i32(v); break;
  case NRT_UINT32: *(uint32_t *)dst = (uint32_t)(uint64_t)nrt_k_f64_to_i64(v); break;
  case NRT_UINT64: *(uint64_t *)dst = f64_to_u64(v); break;
  case NRT_FLOAT16: *(uint16_t *)dst = nrt_f32_to_f16((float)v); break;
  case NRT_BFLOAT16: *(uint16_t *)dst = nrt_f32_to_bf16((float)v); break;
  case NRT_FLOAT32: *(float *)dst = (float)v; break;
  case NRT_FLOAT64: *(double *)dst = v; break;
  default: break;
  }
}

void nrt_ref_store_i64(char *dst, nrt_dtype dt, int64_t v) {
  switch (dt) {
  case NRT_BOOL: *(uint8_t *)dst = v != 0; break;
  case NRT_UINT8: *(uint8_t *)dst = (uint8_t)(uint64_t)v; break;
  case NRT_INT8: *(int8_t *)dst = (int8_t)(uint8_t)(uint64_t)v; break;
  case NRT_INT16: *(int16_t *)dst = (int16_t)(uint16_t)(uint64_t)v; break;
  case NRT_INT32: *(int32_t *)dst = (int32_t)(uint32_t)(uint64_t)v; break;
  case NRT_INT64: *(int64_t *)dst = v; break;
  case NRT_UINT16: *(uint16_t *)dst = (uint16_t)(uint64_t)v; break;
  case NRT_UINT32: *(uint32_t *)dst = (uint32_t)(uint64_t)v; break;
  case NRT_UINT64: *(uint64_t *)dst = (uint64_t)v; break;
  case NRT_FLOAT16: *(uint16_t *)dst = nrt_f32_to_f16((float)v); break;
  case NRT_BFLOAT16: *(uint16_t *)dst = nrt_f32_to_bf16((float)v); break;
  case NRT_FLOAT32: *(float *)dst = (float)v; break;
  case NRT_FLOAT64: *(double *)dst = (double)v; break;
  default: break;
  }
}
