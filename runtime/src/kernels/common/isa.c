/* CPU feature detection for the families that pick a vector ISA at run
 * time, and the process-wide switch that routes kernels through their
 * plain reference loops (tests compare the two). */
#include <stdatomic.h>

#include "kernels/common/isa.h"

static atomic_bool use_reference_kernels;

void nrt_kernels_set_reference(bool use_reference) {
  atomic_store_explicit(&use_reference_kernels, use_reference, memory_order_relaxed);
}

bool nrt_kernels_reference(void) {
  return atomic_load_explicit(&use_reference_kernels, memory_order_relaxed);
}

/* The detected ISA is cached once (cpuid is not free); the limit lets the
 * tests run the AVX2 and portable code paths on an AVX-512 host. Both are
 * process-wide, like nrt_kernels_set_reference(). */
static _Atomic int detected_isa = -1;
static _Atomic int isa_limit = NRT_ISA_BEST;

static int detect_isa(void) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return __builtin_cpu_supports("avx512bf16") ? NRT_ISA_AVX512_BF16 : NRT_ISA_AVX512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c"))
    return NRT_ISA_AVX2;
  return NRT_ISA_BASELINE;
}

nrt_isa nrt_kernels_isa(void) {
  int d = detected_isa;
  if (d < 0) detected_isa = d = detect_isa();
  int lim = isa_limit;
  return (nrt_isa)(d < lim ? d : lim);
}

void nrt_kernels_limit_isa(nrt_isa limit) { isa_limit = (int)limit; }

/* MKL picks its kernels by the CPU's vendor as well as its ISA, and the
 * kernels sum in different orders; families that follow the CPU's BLAS
 * order where it decides overflow ask which kernel set the host takes. */
static _Atomic int detected_blas = -1;

static int detect_blas(void) {
  __builtin_cpu_init();
  if (__builtin_cpu_is("amd")) return NRT_HOST_BLAS_AMD;
  if (__builtin_cpu_is("intel") && __builtin_cpu_supports("avx512f")) return NRT_HOST_BLAS_INTEL_AVX512;
  return NRT_HOST_BLAS_OTHER;
}

nrt_host_blas nrt_kernels_host_blas(void) {
  int d = detected_blas;
  if (d < 0) detected_blas = d = detect_blas();
  return (nrt_host_blas)d;
}

bool nrt_kernels_host_bf16_dot(void) {
  __builtin_cpu_init();
  return __builtin_cpu_is("intel") && __builtin_cpu_supports("avx512bf16");
}
