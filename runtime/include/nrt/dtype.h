/* Element types the device stores. Computation rules (the README's "How the device behaves"):
 * floating types compute in float32 (float64 too: the hardware has no
 * float64 units, so it runs at float32 precision and keeps its dtype);
 * integer and bool types compute in int64. Complex types store interleaved
 * (re, im) pairs of float16 / float32 / float64; only the COMPLEX op family
 * (nrt/ops/complex.h) computes on them, in complex64 precision or better
 * (complex128 keeps its dtype like float64). They are neither floating nor
 * integral for the other kernels, which must reject them. The unsigned
 * 16/32/64-bit types (appended last, so no other id moves) compute in the
 * int64 domain like every integer: arithmetic wraps modulo 2^64 exactly as
 * uint64 does, and uint64 values of 2^63 and above load to float by their
 * unsigned value. */
#ifndef NRT_DTYPE_H
#define NRT_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NRT_DTYPE_LIST(X) \
  X(BOOL, bool, 1)        \
  X(UINT8, uint8, 1)      \
  X(INT8, int8, 1)        \
  X(INT16, int16, 2)      \
  X(INT32, int32, 4)      \
  X(INT64, int64, 8)      \
  X(FLOAT16, float16, 2)  \
  X(BFLOAT16, bfloat16, 2)\
  X(FLOAT32, float32, 4)  \
  X(FLOAT64, float64, 8)   \
  X(COMPLEX32, complex32, 4)  \
  X(COMPLEX64, complex64, 8)  \
  X(COMPLEX128, complex128, 16) \
  X(UINT16, uint16, 2)          \
  X(UINT32, uint32, 4)          \
  X(UINT64, uint64, 8)

typedef enum nrt_dtype {
#define NRT_X(e, n, s) NRT_##e,
  NRT_DTYPE_LIST(NRT_X)
#undef NRT_X
  NRT_DTYPE_COUNT
} nrt_dtype;

size_t nrt_dtype_size(nrt_dtype dtype);        /* 0 for an invalid dtype */
const char *nrt_dtype_name(nrt_dtype dtype);   /* "float32", ... or "invalid" */
bool nrt_dtype_is_floating(nrt_dtype dtype);   /* false for complex */
bool nrt_dtype_is_complex(nrt_dtype dtype);

/* Scalar conversions used by kernels and tests (round-to-nearest-even). */
float nrt_bf16_to_f32(uint16_t v);
uint16_t nrt_f32_to_bf16(float v);
float nrt_f16_to_f32(uint16_t v);
uint16_t nrt_f32_to_f16(float v);

#ifdef __cplusplus
}
#endif
#endif
