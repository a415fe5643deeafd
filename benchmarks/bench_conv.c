/* Convolution kernels against the host's FP32 peak, measured in the same
 * run: the ResNet-50 layer shapes of benchmarks/cases.py (1x1 256->64,
 * 3x3 64->64, 3x3 stride 2 128->128, 3x3 depthwise 256, 3x3 64->64
 * channels_last; 56x56 inputs, padding k/2) at batch 8 and 4, forward,
 * input gradient and weight gradient, each as GFLOP/s and as a % of an
 * FMA loop on every core timed between the cases (a load that comes and
 * goes shows in both). Depthwise convolutions do a few FLOPs per byte, so
 * they are also shown as GB/s of x + y against a triad timed the same way.
 *
 * FLOPs are 2 * N * Cout * OH * OW * Cin/groups * K * K for every pass, as
 * cases.py counts them; times are medians over the repeats. Launches go
 * through nrt_launch_run (the calling thread and the kernel pool), so the
 * numbers are the kernels' own. Columns: wall ms, GFLOP/s, % of the better
 * peak around the case, CPU ms (all threads) and FLOPs per CPU second as
 * a % of the peak loop's (steadier on a shared host: a kernel that keeps
 * every thread busy until the end scores like the wall %), GB/s and %
 * triad.
 *
 *   build/bench_conv [--reps N] [--bf16] [--ref] [SUBSTRING ...]
 *     SUBSTRING   only the cases whose name contains one of them (NAME$:
 *                 that case only)
 *     --bf16      bfloat16 operands (the pair-packed kernel) instead of float32
 *     --ref       the reference loop nests instead (slow; checks)
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "nrt/nrt.h"
#include "nrt/ops/conv.h"

enum { MAX_THREADS = 64, ACCS = 12, TRIAD_N = 1 << 23 };

static int nthreads;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *x, const void *y) {
  double d = *(const double *)x - *(const double *)y;
  return (d > 0) - (d < 0);
}

static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof t[0], cmp_double);
  return t[n / 2];
}

/* ---- peak and triad ------------------------------------------------------------- */

/* benchmarks/peak.c's AVX-512 loop: ACCS independent FMA chains. */
__attribute__((target("avx512f"))) static float fma_loop(long iters) {
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

static double *ta, *tb, *tc;

typedef struct {
  int id;
  bool triad;
  long iters;
  volatile float sink;
} job;

static void *run_job(void *arg) {
  job *j = arg;
  if (!j->triad) {
    j->sink = fma_loop(j->iters);
    return NULL;
  }
  size_t lo = (size_t)TRIAD_N * j->id / nthreads, hi = (size_t)TRIAD_N * (j->id + 1) / nthreads;
  for (size_t i = lo; i < hi; i++) ta[i] = tb[i] + 3.0 * tc[i];
  return NULL;
}

/* Seconds for one pass of every thread. */
static double all_threads(bool triad, long iters) {
  pthread_t th[MAX_THREADS];
  job jobs[MAX_THREADS];
  double t0 = now();
  for (int i = 0; i < nthreads; i++) {
    jobs[i] = (job){.id = i, .triad = triad, .iters = iters};
    pthread_create(&th[i], NULL, run_job, &jobs[i]);
  }
  for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
  return now() - t0;
}

/* FP32 GFLOP/s on every thread: the best of 5 passes of ~20 ms (a peak is
 * what the machine can do); and per CPU second (*per_cpu: the rate of one
 * core while it runs, which a busy host disturbs less). */
static double peak_gflops(double *per_cpu) {
  const long iters = 1 << 18;
  double best = 1e30, best_cpu = 1e30;
  for (int r = 0; r < 5; r++) {
    double c0 = cpu_now(), t = all_threads(false, iters), c = cpu_now() - c0;
    if (t < best) best = t;
    if (c < best_cpu) best_cpu = c;
  }
  double flops = (double)iters * ACCS * 16 * 2 * nthreads;
  *per_cpu = flops / best_cpu / 1e9;
  return flops / best / 1e9;
}

/* Triad GB/s: median of 5 passes. */
static double triad_gbs(void) {
  double t[5];
  for (int r = 0; r < 5; r++) t[r] = all_threads(true, 0);
  return 3.0 * 8 * TRIAD_N / median(t, 5) / 1e9;
}

/* ---- cases ---------------------------------------------------------------------- */

typedef enum { FWD, BWD_INPUT, BWD_WEIGHT } pass;
static const char *const PASS_NAMES[] = {"forward", "input grad", "weight grad"};

typedef struct {
  char name[96], shape[48];
  nrt_launch l;
  double flops, bytes;
  bool depthwise, cl;
  pass ps;
  void *mem[3];
} bench_case;

static bench_case cases[64];
static int ncases;

static void *buffer(nrt_dtype dt, int64_t n, unsigned seed) {
  size_t es = nrt_dtype_size(dt);
  void *p = aligned_alloc(64, ((size_t)n * es + 63) / 64 * 64);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  unsigned s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    float v = (float)(s >> 8) / (float)(1 << 24) - 0.5f;
    if (dt == NRT_FLOAT32) {
      ((float *)p)[i] = v;
    } else {
      uint32_t u;
      memcpy(&u, &v, 4);
      ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
    }
  }
  return p;
}

/* Byte strides of a [d0, c, 1, h, w] tensor: contiguous, or channels-last
 * (c innermost). */
static void strides_of(const int64_t shape[5], bool cl, size_t es, int64_t st[5]) {
  static const int contiguous[5] = {0, 1, 2, 3, 4}, last[5] = {0, 2, 3, 4, 1};
  const int *perm = cl ? last : contiguous;
  int64_t s = (int64_t)es;
  for (int i = 4; i >= 0; i--) {
    st[perm[i]] = s;
    s *= shape[perm[i]];
  }
}

static void operand(nrt_operand *o, void *data, nrt_dtype dt, const int64_t shape[5], bool cl) {
  o->data = data;
  o->dtype = dt;
  strides_of(shape, cl, nrt_dtype_size(dt), o->strides);
}

static void add_case(const char *label, int64_t n, int64_t ci, int64_t co, int64_t k, int64_t stride, int64_t groups,
                     bool cl, pass ps, nrt_dtype dt) {
  bench_case *c = &cases[ncases++];
  const int64_t hw = 56, pad = k / 2, ohw = (hw + 2 * pad - k) / stride + 1;
  int64_t cig = ci / groups, cog = co / groups;
  snprintf(c->name, sizeof c->name, "b%lld %s %s", (long long)n, label, PASS_NAMES[ps]);
  snprintf(c->shape, sizeof c->shape, "%lldx%lldx%lldx%lld k%lld s%lld%s", (long long)n, (long long)ci, (long long)hw,
           (long long)hw, (long long)k, (long long)stride, groups > 1 ? " dw" : "");
  c->flops = 2.0 * n * co * ohw * ohw * cig * k * k;
  c->bytes = (double)nrt_dtype_size(dt) * (n * ci * hw * hw + n * co * ohw * ohw);
  c->depthwise = groups > 1;
  c->ps = ps;
  c->cl = cl;
  nrt_launch *l = &c->l;
  memset(l, 0, sizeof *l);
  l->op = ps == FWD ? NRT_OP(CONV) : ps == BWD_INPUT ? NRT_OP(CONV_BACKWARD_INPUT) : NRT_OP(CONV_BACKWARD_WEIGHT);
  l->ndim = 13;
  int64_t sizes[13] = {n, groups, cog, cig, 1, ohw, ohw, 1, hw, hw, 1, k, k};
  memcpy(l->sizes, sizes, sizeof sizes);
  l->aux[0] = l->aux[1] = l->aux[2] = 1;
  l->aux[1] = l->aux[2] = stride;
  l->aux[4] = l->aux[5] = pad;
  l->aux[6] = l->aux[7] = l->aux[8] = 1;
  l->noutputs = 1;
  l->ninputs = 2;
  l->compute_dtype = dt;
}

/* Operand memory for case c (allocated only for the cases that run). */
static void case_alloc(bench_case *c) {
  nrt_launch *l = &c->l;
  const int64_t *z = l->sizes, n = z[0], cog = z[2], cig = z[3], co = z[1] * cog, ci = z[1] * cig;
  const nrt_dtype dt = l->compute_dtype;
  const bool cl = c->cl;
  int64_t xs[5] = {n, ci, 1, z[8], z[9]}, ys[5] = {n, co, 1, z[5], z[6]}, ws[5] = {co, cig, 1, z[11], z[12]};
  void *x = buffer(dt, n * ci * z[8] * z[9], 1), *y = buffer(dt, n * co * z[5] * z[6], 2);
  void *w = buffer(dt, co * cig * z[11] * z[12], 3);
  c->mem[0] = x;
  c->mem[1] = y;
  c->mem[2] = w;
  switch (c->ps) {
  case FWD:
    operand(&l->operands[0], y, dt, ys, cl);
    operand(&l->operands[1], x, dt, xs, cl);
    operand(&l->operands[2], w, dt, ws, cl);
    break;
  case BWD_INPUT:
    operand(&l->operands[0], x, dt, xs, cl);
    operand(&l->operands[1], y, dt, ys, cl);
    operand(&l->operands[2], w, dt, ws, cl);
    break;
  case BWD_WEIGHT:
    operand(&l->operands[0], w, dt, ws, cl);
    operand(&l->operands[1], y, dt, ys, cl);
    operand(&l->operands[2], x, dt, xs, cl);
    break;
  }
}

static void build(nrt_dtype dt) {
  static const struct {
    const char *label;
    int64_t ci, co, k, stride, groups;
    bool cl;
  } shapes[] = {
      {"1x1 256->64", 256, 64, 1, 1, 1, false},
      {"3x3 64->64", 64, 64, 3, 1, 1, false},
      {"3x3 s2 128->128", 128, 128, 3, 2, 1, false},
      {"3x3 dw 256", 256, 256, 3, 1, 256, false},
      {"3x3 64->64 cl", 64, 64, 3, 1, 1, true},
      {"1x1 256->64 cl", 256, 64, 1, 1, 1, true},
  };
  const int64_t batches[2] = {8, 4};
  for (int b = 0; b < 2; b++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int ps = 0; ps < 3; ps++)
        add_case(shapes[s].label, batches[b], shapes[s].ci, shapes[s].co, shapes[s].k, shapes[s].stride,
                 shapes[s].groups, shapes[s].cl, (pass)ps, dt);
}

static bool wanted(const bench_case *c, int argc, char **argv) {
  bool any = false;
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-') continue;
    any = true;
    size_t n = strlen(argv[i]);
    if (n > 1 && argv[i][n - 1] == '$') {
      if (strlen(c->name) == n - 1 && !strncmp(c->name, argv[i], n - 1)) return true;
    } else if (strstr(c->name, argv[i])) {
      return true;
    }
  }
  return !any;
}

static void case_free(bench_case *c) {
  for (int i = 0; i < 3; i++) free(c->mem[i]);
}

static double run_case(const bench_case *c, double *cpu) {
  double t0 = now(), c0 = cpu_now();
  nrt_status st = nrt_launch_run(&c->l);
  if (st != NRT_SUCCESS) {
    fprintf(stderr, "%s: %s (%s)\n", c->name, nrt_status_name(st), nrt_last_error_message());
    exit(1);
  }
  *cpu = cpu_now() - c0;
  return now() - t0;
}

int main(int argc, char **argv) {
  int reps = 11;
  bool ref = false, bf16 = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = atoi(argv[i + 1]);
      argv[i + 1] = "-";
      i++;
    } else if (!strcmp(argv[i], "--ref")) {
      ref = true;
    } else if (!strcmp(argv[i], "--bf16")) {
      bf16 = true;
    }
  }
  if (reps < 1) reps = 1;
  if (reps > 101) reps = 101;
  nthreads = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (nthreads < 1) nthreads = 1;
  if (nthreads > MAX_THREADS) nthreads = MAX_THREADS;
  if (!__builtin_cpu_supports("avx512f")) {
    fprintf(stderr, "bench_conv: the peak loop needs AVX-512\n");
    return 1;
  }
  ta = malloc(sizeof(double) * TRIAD_N);
  tb = malloc(sizeof(double) * TRIAD_N);
  tc = malloc(sizeof(double) * TRIAD_N);
  for (size_t i = 0; i < TRIAD_N; i++) ta[i] = 0, tb[i] = 1, tc[i] = 2;
  build(bf16 ? NRT_BFLOAT16 : NRT_FLOAT32);
  nrt_kernels_set_reference(ref);

  FILE *la = fopen("/proc/loadavg", "r");
  char load[64] = "?";
  if (la) {
    if (!fgets(load, sizeof load, la)) load[0] = 0;
    fclose(la);
    load[strcspn(load, "\n")] = 0;
  }
  printf("# threads %d, loadavg %s, reps %d, %s%s\n", nthreads, load, reps, bf16 ? "bfloat16" : "float32",
         ref ? ", reference kernels" : "");
  printf("%-34s %-22s %8s %8s %7s %6s %8s %6s %7s %6s\n", "case", "shape", "ms", "GFLOP/s", "peak", "%peak", "cpu ms",
         "%cpupk", "GB/s", "%triad");
  double peaks[128];
  int npeak = 0;
  for (int i = 0; i < ncases; i++) {
    bench_case *c = &cases[i];
    if (!wanted(c, argc, argv)) continue;
    case_alloc(c);
    double pkc, pkc2, pk = peak_gflops(&pkc), tri = c->depthwise ? triad_gbs() : 0, dummy;
    run_case(c, &dummy); /* warm-up: pool threads, page faults of scratch */
    double t[101], tcpu[101];
    for (int r = 0; r < reps; r++) t[r] = run_case(c, &tcpu[r]);
    double s = median(t, reps), sc = median(tcpu, reps);
    double pk2 = peak_gflops(&pkc2);
    pk = pk > pk2 ? pk : pk2;
    pkc = pkc > pkc2 ? pkc : pkc2;
    if (c->depthwise) {
      double tri2 = triad_gbs();
      tri = tri > tri2 ? tri : tri2;
    }
    if (npeak < 128) peaks[npeak++] = pk;
    double gf = c->flops / s / 1e9;
    printf("%-34s %-22s %8.3f %8.1f %7.1f %5.1f%% %8.3f %5.1f%%", c->name, c->shape, s * 1e3, gf, pk, 100 * gf / pk,
           sc * 1e3, 100 * c->flops / sc / 1e9 / pkc);
    if (c->depthwise) printf(" %7.2f %5.0f%%", c->bytes / s / 1e9, 100 * c->bytes / s / 1e9 / tri);
    printf("\n");
    fflush(stdout);
    case_free(c);
  }
  if (npeak) printf("# peak median %.1f GFLOP/s over %d samples\n", median(peaks, npeak), npeak);
  return 0;
}
