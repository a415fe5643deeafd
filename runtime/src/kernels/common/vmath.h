/* Branch-free float32 math that the compiler can vectorise (libm's
 * functions are opaque calls, one element at a time). Polynomials and
 * range reductions follow Cephes (S. Moshier) single precision; each is
 * within ~1-2 ulp of the correctly rounded result over its whole domain,
 * which is what PyTorch's own vectorised (Sleef) paths give. Specials
 * (NaN, +-inf, overflow, subnormal results) are handled with selects.
 * Included from kernels.h. */
#ifndef NRT_KERNELS_VMATH_H
#define NRT_KERNELS_VMATH_H

#include <stdint.h>

static inline uint32_t nrt_vm_bits(float f) {
  union { float f; uint32_t u; } v = {.f = f};
  return v.u;
}
static inline float nrt_vm_float(uint32_t u) {
  union { uint32_t u; float f; } v = {.u = u};
  return v.f;
}

/* The plain family (nrt_vexpf, ...): a * b + c rounded twice, the same on
 * every ISA; the baseline builds of the kernels use it. */
#define NRT_VM(name) name
#define NRT_VM_MADD(a, b, c) ((a) * (b) + (c))
#include "kernels/common/vmath_body.h"
#undef NRT_VM
#undef NRT_VM_MADD

/* The _fma family (nrt_vexpf_fma, ...): the polynomials' steps as fused
 * multiply-adds, half the operations and one rounding each. -std=c11
 * never contracts a * b + c by itself. Only for functions built for a
 * target with FMA (NRT_TARGET_AVX512): elsewhere fmaf is a library call. */
#define NRT_VM(name) name##_fma
#define NRT_VM_MADD(a, b, c) __builtin_fmaf((a), (b), (c))
#include "kernels/common/vmath_body.h"
#undef NRT_VM
#undef NRT_VM_MADD

#endif
