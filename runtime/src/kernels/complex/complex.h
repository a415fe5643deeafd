/* Shared by the COMPLEX family's kernel files (complex.c, reduce.c, math.c,
 * fft.c, fft_plan.c): element loads and stores for every dtype and the FFT
 * plan interface. The (re, im) value type, its arithmetic and the
 * logaddexp step live in kernels/common/cx.h (select.c's complex
 * LOGCUMSUMEXP shares them). */
#ifndef NRT_COMPLEX_KERNELS_H
#define NRT_COMPLEX_KERNELS_H

#include "kernels/common/common.h"
#include "kernels/common/cx.h"
#include "nrt/ops/complex.h"

/* A real dtype reads as (x, 0). Integers go through int64 so that the
 * only rounding is the one to double. */
static inline nrt_cx nrt_cx_load(const char *p, nrt_dtype dt) {
  switch (dt) {
  case NRT_COMPLEX32: {
    uint16_t h[2];
    memcpy(h, p, sizeof h);
    return nrt_cx_make(nrt_f16_to_f32(h[0]), nrt_f16_to_f32(h[1]));
  }
  case NRT_COMPLEX64: {
    float f[2];
    memcpy(f, p, sizeof f);
    return nrt_cx_make(f[0], f[1]);
  }
  case NRT_COMPLEX128: {
    double d[2];
    memcpy(d, p, sizeof d);
    return nrt_cx_make(d[0], d[1]);
  }
  case NRT_FLOAT16: case NRT_BFLOAT16: case NRT_FLOAT32: case NRT_FLOAT64:
    return nrt_cx_make(nrt_ref_load_f64(p, dt), 0.0);
  default:
    return nrt_cx_make((double)nrt_ref_load_i64(p, dt), 0.0);
  }
}

/* A real dtype stores the real part (PyTorch's complex -> real cast); bool
 * stores whether either part is nonzero. */
static inline void nrt_cx_store(char *p, nrt_dtype dt, nrt_cx v) {
  switch (dt) {
  case NRT_COMPLEX32: {
    uint16_t h[2] = {nrt_f32_to_f16((float)v.re), nrt_f32_to_f16((float)v.im)};
    memcpy(p, h, sizeof h);
    break;
  }
  case NRT_COMPLEX64: {
    float f[2] = {(float)v.re, (float)v.im};
    memcpy(p, f, sizeof f);
    break;
  }
  case NRT_COMPLEX128: {
    double d[2] = {v.re, v.im};
    memcpy(p, d, sizeof d);
    break;
  }
  case NRT_BOOL: *(uint8_t *)p = v.re != 0.0 || v.im != 0.0; break;
  default: nrt_ref_store_f64(p, dt, v.re); break;
  }
}

/* Runs fn on every element of the launch's N-d iteration (POINTWISE
 * layout; p[k] points at operand k's element), split over the pool unless
 * the reference path is on (complex.c). */
typedef void (*nrt_cx_element_fn)(const nrt_launch *l, char *const *p);
nrt_status nrt_cx_for_each(const nrt_launch *l, nrt_cx_element_fn fn);
/* The same walk for ops whose CPU kernel computes special values
 * differently in its vector body and in its scalar function (sgn, pow's
 * products): fn is told which one the CPU uses for the element, as ATen's
 * cpu_kernel_vec splits each row into blocks of `block` elements (two
 * vectors: 16 complex64 with AVX-512) and a scalar rest; 0: all scalar. */
typedef void (*nrt_cx_element_split_fn)(const nrt_launch *l, char *const *p, bool vec);
nrt_status nrt_cx_for_each_split(const nrt_launch *l, nrt_cx_element_split_fn fn, int64_t block);
/* The walk for ops whose CPU scalar function GCC's loop vectoriser
 * compiles with fused multiply-adds in some groups of elements (measured
 * on ATen's AVX-512 build of addcmul): fn is told `true` for an element
 * of a whole group of `width` in a strided row, or of the group of 4 that
 * follows the vector body's blocks of 16 and the tail's groups of 8 in a
 * contiguous row. */
nrt_status nrt_cx_for_each_strided_groups(const nrt_launch *l, nrt_cx_element_split_fn fn, int64_t width);
nrt_status nrt_cx_reduce(const nrt_launch *l);
nrt_status nrt_cx_math(const nrt_launch *l); /* math.c: CX_MATH, CX_POW*, CX_LOGICAL, CX_ADDC*, CX_LERP, CX_LOGADDEXP */

/* log(exp(x) + exp(y)) as PyTorch's CPU computes it for complex values
 * (its logaddexp kernel and each step of its logcumsumexp scan, whose
 * running value is y): special values follow that formula, not the
 * analytic limit (math.c). SELECT's complex LOGCUMSUMEXP shares it. */
nrt_status nrt_cx_fft(const nrt_launch *l); /* fft.c: FFT_C2C, FFT_R2C, FFT_C2R */

/* ---- 1-d FFT plans (fft_plan.c) -------------------------------------------
 * X[k] = sum_j x[j] e^(sign 2 pi i jk / n), sign = -1 forward, +1 inverse,
 * unscaled. A plan is read-only once made, so threads share it; each
 * thread passes its own scratch of nrt_fft_scratch_len(plan) values. */
typedef struct nrt_fft_plan nrt_fft_plan;
nrt_fft_plan *nrt_fft_plan_create(int64_t n, int sign); /* NULL: out of memory */
void nrt_fft_plan_destroy(nrt_fft_plan *plan);
int64_t nrt_fft_scratch_len(const nrt_fft_plan *plan);
/* In place on data[0 .. n). */
void nrt_fft_execute(const nrt_fft_plan *plan, nrt_cx *data, nrt_cx *scratch);
/* The O(n^2) definition, for the reference path and the tests. */
void nrt_dft_reference(int64_t n, int sign, nrt_cx *data, nrt_cx *scratch);

#endif
