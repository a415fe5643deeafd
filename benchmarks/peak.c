/* Peak arithmetic rate of this host: the ceiling `make bench` divides the
 * FLOP-bound cases by. Register-only loops of independent multiply-adds
 * (no memory traffic), on 1 thread and on every online CPU, printed as JSON:
 *
 *   {"threads": 2,
 *    "fp32": {"isa": "avx512f", "gflops_1t": ..., "gflops": ..., "variants": {...}},
 *    "bf16": {"isa": "avx512_bf16", "gflops_1t": ..., "gflops": ...} | "n/a"}
 *
 * fp32 is the best of the FMA widths the CPU runs (AVX-512 is not always
 * faster than AVX2: some cores split a 512-bit FMA in two). bf16 is
 * vdpbf16ps (AVX512_BF16: pairs of bfloat16 products summed into float32,
 * the instruction a bfloat16 GEMM is built on), "n/a" without it.
 * Built for baseline x86-64: the wide loops carry target attributes and
 * run only when __builtin_cpu_supports says so.
 *
 *   build/peak [--ms MILLISECONDS]   time per measurement (default 200)
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { ACCS = 12, MAX_THREADS = 256, REPEATS = 3 };

/* One kernel: `iters` rounds over ACCS independent accumulators (enough to
 * cover the FMA latency times the number of FMA pipes; the inner loop is
 * unrolled so they stay in registers); returns a value that depends on
 * every accumulator so nothing is optimised away. */
typedef float (*kernel_fn)(long iters);

typedef struct {
  const char *name;
  const char *isa;  /* name for __builtin_cpu_supports, NULL: always present */
  kernel_fn run;
  double flops_per_iter;
} kernel;

/* Baseline SSE: no FMA, a multiply and an add per lane. */
static float sse_mul_add(long iters) {
  __m128 acc[ACCS];
  const __m128 m = _mm_set1_ps(0.999999f), c = _mm_set1_ps(1e-6f);
  for (int k = 0; k < ACCS; k++) acc[k] = _mm_set1_ps((float)k);
  for (long i = 0; i < iters; i++)
#pragma GCC unroll 16
    for (int k = 0; k < ACCS; k++) acc[k] = _mm_add_ps(_mm_mul_ps(acc[k], m), c);
  float out[4], sum = 0;
  for (int k = 0; k < ACCS; k++) { _mm_storeu_ps(out, acc[k]); sum += out[0] + out[3]; }
  return sum;
}

__attribute__((target("avx2,fma"))) static float avx2_fma(long iters) {
  __m256 acc[ACCS];
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
  for (int k = 0; k < ACCS; k++) acc[k] = _mm256_set1_ps((float)k);
  for (long i = 0; i < iters; i++)
#pragma GCC unroll 16
    for (int k = 0; k < ACCS; k++) acc[k] = _mm256_fmadd_ps(acc[k], m, c);
  float out[8], sum = 0;
  for (int k = 0; k < ACCS; k++) { _mm256_storeu_ps(out, acc[k]); sum += out[0] + out[7]; }
  return sum;
}

__attribute__((target("avx512f"))) static float avx512_fma(long iters) {
  __m512 acc[ACCS];
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
  for (int k = 0; k < ACCS; k++) acc[k] = _mm512_set1_ps((float)k);
  for (long i = 0; i < iters; i++)
#pragma GCC unroll 16
    for (int k = 0; k < ACCS; k++) acc[k] = _mm512_fmadd_ps(acc[k], m, c);
  float sum = 0;
  for (int k = 0; k < ACCS; k++) sum += _mm512_reduce_add_ps(acc[k]);
  return sum;
}

/* vdpbf16ps: each float32 lane += a[2i]*b[2i] + a[2i+1]*b[2i+1], so one
 * instruction is 32 multiplies and 32 adds. Small products keep the
 * accumulators far from overflow for any run length used here. */
__attribute__((target("avx512f,avx512bf16"))) static float avx512_bf16_dot(long iters) {
  __m512 acc[ACCS];
  const __m512 small = _mm512_set1_ps(1e-3f);
  const __m512bh a = _mm512_cvtne2ps_pbh(small, small), b = _mm512_cvtne2ps_pbh(small, small);
  for (int k = 0; k < ACCS; k++) acc[k] = _mm512_set1_ps((float)k);
  for (long i = 0; i < iters; i++)
#pragma GCC unroll 16
    for (int k = 0; k < ACCS; k++) acc[k] = _mm512_dpbf16_ps(acc[k], a, b);
  float sum = 0;
  for (int k = 0; k < ACCS; k++) sum += _mm512_reduce_add_ps(acc[k]);
  return sum;
}

static const kernel FP32_KERNELS[] = {
    {"sse", NULL, sse_mul_add, ACCS * 4 * 2},
    {"avx2", "avx2", avx2_fma, ACCS * 8 * 2},
    {"avx512f", "avx512f", avx512_fma, ACCS * 16 * 2},
};
static const kernel BF16_KERNEL = {"avx512_bf16", "avx512bf16", avx512_bf16_dot, ACCS * 32 * 2};

static int supported(const kernel *k) {
  if (!k->isa) return 1;
  /* __builtin_cpu_supports takes a string literal only. */
  if (!strcmp(k->isa, "avx2")) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!strcmp(k->isa, "avx512f")) return __builtin_cpu_supports("avx512f");
  if (!strcmp(k->isa, "avx512bf16"))
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
  return 0;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct {
  const kernel *k;
  long iters;
  volatile float sink;
} job;

static void *run_job(void *arg) {
  job *j = arg;
  j->sink = j->k->run(j->iters);
  return NULL;
}

/* GFLOP/s of `k` on `threads` threads, each running `iters` rounds: the
 * best of REPEATS, since a peak is what the machine can do, not what it
 * usually does while shared. */
static double rate(const kernel *k, int threads, long iters) {
  pthread_t th[MAX_THREADS];
  job jobs[MAX_THREADS];
  double best = 0;
  for (int r = 0; r < REPEATS; r++) {
    double t0 = now();
    for (int i = 0; i < threads; i++) {
      jobs[i] = (job){.k = k, .iters = iters};
      pthread_create(&th[i], NULL, run_job, &jobs[i]);
    }
    for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
    double gflops = k->flops_per_iter * iters * threads / (now() - t0) / 1e9;
    if (gflops > best) best = gflops;
  }
  return best;
}

/* Rounds that take about `ms` milliseconds on one thread. */
static long calibrate(const kernel *k, double ms) {
  long iters = 1 << 14;
  for (;;) {
    double t0 = now();
    volatile float sink = k->run(iters);
    (void)sink;
    double dt = now() - t0;
    if (dt > 0.02 || iters > (1L << 40)) return (long)(iters * (ms / 1e3) / dt) + 1;
    iters *= 4;
  }
}

static void print_rates(const kernel *k, int threads, double ms) {
  long iters = calibrate(k, ms);
  printf("{\"isa\": \"%s\", \"gflops_1t\": %.2f, \"gflops\": %.2f}", k->name, rate(k, 1, iters),
         rate(k, threads, iters));
}

int main(int argc, char **argv) {
  double ms = 200;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--ms") && i + 1 < argc) {
      ms = atof(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s [--ms MILLISECONDS]\n", argv[0]);
      return 2;
    }
  }
  int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (threads < 1) threads = 1;
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  __builtin_cpu_init();

  /* Every supported fp32 width; the best all-thread rate is the peak. */
  double best = -1, best_1t = 0;
  const char *best_isa = "sse";
  char variants[1024] = "";
  size_t used = 0;
  for (size_t i = 0; i < sizeof FP32_KERNELS / sizeof FP32_KERNELS[0]; i++) {
    const kernel *k = &FP32_KERNELS[i];
    if (!supported(k)) continue;
    long iters = calibrate(k, ms);
    double one = rate(k, 1, iters), all = rate(k, threads, iters);
    used += snprintf(variants + used, sizeof variants - used, "%s\"%s\": {\"gflops_1t\": %.2f, \"gflops\": %.2f}",
                     used ? ", " : "", k->name, one, all);
    if (all > best) { best = all; best_1t = one; best_isa = k->name; }
  }
  printf("{\"threads\": %d,\n \"fp32\": {\"isa\": \"%s\", \"gflops_1t\": %.2f, \"gflops\": %.2f, \"variants\": {%s}},\n",
         threads, best_isa, best_1t, best, variants);
  printf(" \"bf16\": ");
  if (supported(&BF16_KERNEL))
    print_rates(&BF16_KERNEL, threads, ms);
  else
    printf("\"n/a\"");
  printf("}\n");
  return 0;
}
