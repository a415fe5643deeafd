/* Everything a kernel family may share (and all it may include from
 * outside its own folder besides the public headers and the layers below):
 * conversions, integer helpers, double accumulation, the ISA switch,
 * vector math, Philox, the stable sort, row launches and the error idiom. */
#ifndef NRT_KERNELS_COMMON_H
#define NRT_KERNELS_COMMON_H

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/core.h"
#include "exec/exec.h"
#include "kernels/common/accum.h"
#include "kernels/common/convert.h"
#include "kernels/common/error.h"
#include "kernels/common/intmath.h"
#include "kernels/common/isa.h"
#include "kernels/common/philox.h"
#include "kernels/common/rows.h"
#include "kernels/common/sort.h"
#include "kernels/common/vmath.h"
#include "kernels/kernels.h"

/* Elements per block in the pointwise and reduction engines: small enough
 * for the block buffers of three inputs and an output to stay in L1. */
#define NRT_BLOCK 256

/* o[i] = sqrtf(x[i]), correctly rounded, four at a time. The compiler only
 * vectorises sqrtf when -fno-math-errno is on its command line (an optimize
 * pragma does not reach it), so the SSE instruction is spelled out; SSE is
 * part of x86-64. o may alias x. */
static inline void nrt_sqrt_block(float *o, const float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(o + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
  for (; i < n; i++) o[i] = _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(x[i])));
}

/* o[i] = x[i] ** e for a scalar exponent, as PyTorch computes it: its
 * cheaper exact forms of the common exponents keep results bit-identical
 * for x**2, x**0.5 and so on, and its bfloat16 kernels spell x**3 and x**-2
 * with bfloat16 arithmetic, so x*x is rounded to bfloat16 before the second
 * step (bf16_steps; float16 and float32 round once). Shared by POW_SCALAR
 * and FOREACH_POW. */
static inline void nrt_pow_scalar_block(float *out, const float *a, int64_t n, double e, bool bf16_steps) {
  if (bf16_steps && (e == 3.0 || e == -2.0)) {
    for (int64_t i = 0; i < n; i++) {
      float sq = nrt_k_bf16_to_f32(nrt_k_f32_to_bf16(a[i] * a[i]));
      out[i] = e == 3.0 ? sq * a[i] : 1.0f / sq;
    }
  }
  else if (e == 2.0) for (int64_t i = 0; i < n; i++) out[i] = a[i] * a[i];
  else if (e == 3.0) for (int64_t i = 0; i < n; i++) out[i] = a[i] * a[i] * a[i];
  else if (e == 0.5) nrt_sqrt_block(out, a, n);
  else if (e == -0.5) {
    nrt_sqrt_block(out, a, n);
    for (int64_t i = 0; i < n; i++) out[i] = 1.0f / out[i];
  }
  else if (e == -1.0) for (int64_t i = 0; i < n; i++) out[i] = 1.0f / a[i];
  else if (e == -2.0) for (int64_t i = 0; i < n; i++) out[i] = 1.0f / (a[i] * a[i]);
  else if (e == 1.0) for (int64_t i = 0; i < n; i++) out[i] = a[i];
  else {
    float ef = (float)e;
    for (int64_t i = 0; i < n; i++) out[i] = powf(a[i], ef);
  }
}

#endif
