/* Which vector ISA the kernels may use (isa.c): detected once, cappable by
 * tests so the AVX2 and portable paths run on an AVX-512 host; and the
 * target attributes the vector functions are compiled with. The
 * reference-kernel switch (nrt_kernels_set_reference, nrt/launch.h) is
 * implemented beside it. */
#ifndef NRT_KERNELS_COMMON_ISA_H
#define NRT_KERNELS_COMMON_ISA_H

#include <stdbool.h>
#include "nrt/launch.h"

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
/* nrt_kernels_host_blas (nrt/launch.h) is implemented in isa.c too. */

#endif
