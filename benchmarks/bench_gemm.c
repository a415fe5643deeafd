/* GEMM rates of the runtime's kernel (the GEMM op through nrt_launch_run,
 * as the device runs it) against this host's peak measured in the same run
 * (build/peak, before and after the cases; the higher of the two is the
 * ceiling). For each case: the median GFLOP/s over repeats, the fraction
 * of the FP32 (or BF16) peak, and for bfloat16 the ratio to the float32
 * rate of the same shape.
 *
 * Cases: square float32/bfloat16; the GPT-2-small linear layers for M
 * tokens (nn.Linear weights W[out][in], row-major): forward y = x @ W^T,
 * input gradient dx = dy @ W, weight gradient dW = dy^T @ x; the batched
 * attention products (96 heads: Q @ K^T, P @ V).
 *
 *   build/bench_gemm [--filter SUBSTRING] [--reps N] [--ms MS] [--no-peak] [--cputime]
 *
 * --cputime divides the flops by the process's CPU time per kernel thread
 * instead of wall time: on a host shared with other work it estimates the
 * rate on unshared cores (a thread's slices of time it did not get are
 * not counted, but neither is a sleeping thread's idle wait), useful to
 * compare two builds while the load moves; report wall-clock rates.
 *
 * TORCH_NEURONX_KERNEL_THREADS=1 gives single-thread rates (then compare
 * with the 1-thread peak printed too). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "nrt/launch.h"
#include "nrt/ops/gemm.h"

typedef enum { F32, BF16 } dtype_kind;

typedef struct bcase {
  char name[112];
  int64_t batch, M, N, K;
  bool a_cols; /* A stored column-major (A = X^T) */
  bool b_cols; /* B stored column-major (B = W^T with W row-major) */
  dtype_kind dt;
} bcase;

static bool use_cputime;
static int threads_for_cputime = 1;

static double now(void) {
  struct timespec ts;
  clock_gettime(use_cputime ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static void *filled(size_t n, dtype_kind dt) {
  size_t es = dt == F32 ? 4 : 2;
  void *p = aligned_alloc(64, (n * es + 63) / 64 * 64);
  if (!p) {
    fprintf(stderr, "bench_gemm: out of memory\n");
    exit(1);
  }
  uint32_t s = 12345;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    float v = (float)(s >> 8) / (float)(1 << 24) * 2.0f - 1.0f;
    if (dt == F32) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = to_bf16(v);
  }
  return p;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median seconds per call over `reps` repeats of about `ms` each. */
static double time_case(const bcase *c, int reps, double ms) {
  int64_t B = c->batch, M = c->M, N = c->N, K = c->K;
  size_t es = c->dt == F32 ? 4 : 2;
  void *a = filled((size_t)(B * M * K), c->dt), *b = filled((size_t)(B * K * N), c->dt);
  void *out = filled((size_t)(B * M * N), c->dt);
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP(GEMM);
  l.ndim = 4;
  l.sizes[0] = B;
  l.sizes[1] = M;
  l.sizes[2] = N;
  l.sizes[3] = K;
  l.noutputs = 1;
  l.ninputs = 2;
  l.compute_dtype = NRT_FLOAT32;
  l.scalars[0].f = 1.0;
  nrt_dtype dt = c->dt == F32 ? NRT_FLOAT32 : NRT_BFLOAT16;
  int64_t e = (int64_t)es;
  l.operands[0] = (nrt_operand){.data = out, .dtype = dt, .strides = {M * N * e, N * e, e}};
  l.operands[1] = (nrt_operand){.data = a, .dtype = dt,
                                .strides = {M * K * e, c->a_cols ? e : K * e, c->a_cols ? M * e : e}};
  l.operands[2] = (nrt_operand){.data = b, .dtype = dt,
                                .strides = {K * N * e, c->b_cols ? e : N * e, c->b_cols ? K * e : e}};
  nrt_status st = nrt_launch_run(&l); /* warm-up: pages, pool threads */
  if (st != NRT_SUCCESS) {
    fprintf(stderr, "bench_gemm: %s failed: %d\n", c->name, (int)st);
    exit(1);
  }
  double t0 = now();
  nrt_launch_run(&l);
  double once = now() - t0;
  int64_t calls = once > 0 ? (int64_t)(ms / 1e3 / once) : 1;
  if (calls < 1) calls = 1;
  double *t = malloc(sizeof(double) * (size_t)reps);
  for (int r = 0; r < reps; r++) {
    t0 = now();
    for (int64_t i = 0; i < calls; i++) nrt_launch_run(&l);
    t[r] = (now() - t0) / (double)calls / (use_cputime ? threads_for_cputime : 1);
  }
  qsort(t, (size_t)reps, sizeof(double), cmp_double);
  double med = t[reps / 2];
  free(t);
  free(a);
  free(b);
  free(out);
  return med;
}

typedef struct peaks {
  double fp32, fp32_1t, bf16, bf16_1t;
} peaks;

/* Runs build/peak (next to this binary) and reads its JSON line by line. */
static bool measure_peak(const char *self, peaks *out) {
  char cmd[4096];
  const char *slash = strrchr(self, '/');
  int dir = slash ? (int)(slash - self) : 1;
  snprintf(cmd, sizeof cmd, "%.*s/peak --ms 150", dir, slash ? self : ".");
  FILE *f = popen(cmd, "r");
  if (!f) return false;
  char line[4096];
  bool ok = false;
  while (fgets(line, sizeof line, f)) {
    const char *fp = strstr(line, "\"fp32\""), *bf = strstr(line, "\"bf16\"");
    double one, all;
    if (fp && sscanf(strstr(fp, "gflops_1t"), "gflops_1t\": %lf, \"gflops\": %lf", &one, &all) == 2) {
      out->fp32_1t = one;
      out->fp32 = all;
      ok = true;
    }
    if (bf && strstr(bf, "gflops_1t") &&
        sscanf(strstr(bf, "gflops_1t"), "gflops_1t\": %lf, \"gflops\": %lf", &one, &all) == 2) {
      out->bf16_1t = one;
      out->bf16 = all;
    }
  }
  pclose(f);
  return ok;
}

static void loadavg(char *buf, size_t n) {
  FILE *f = fopen("/proc/loadavg", "r");
  buf[0] = 0;
  if (f) {
    if (!fgets(buf, (int)n, f)) buf[0] = 0;
    fclose(f);
  }
  buf[strcspn(buf, "\n")] = 0;
}

enum { MAX_CASES = 128 };

static int add(bcase *cs, int n, const char *name, int64_t batch, int64_t M, int64_t N, int64_t K, bool ac,
               bool bc) {
  for (int d = 0; d < 2; d++) {
    bcase *c = &cs[n++];
    *c = (bcase){.batch = batch, .M = M, .N = N, .K = K, .a_cols = ac, .b_cols = bc, .dt = d ? BF16 : F32};
    snprintf(c->name, sizeof c->name, "%s %s", d ? "bf16" : "f32 ", name);
  }
  return n;
}

int main(int argc, char **argv) {
  const char *filter = NULL;
  int reps = 5;
  double ms = 150;
  bool peak = true;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ms") && i + 1 < argc) ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--no-peak")) peak = false;
    else if (!strcmp(argv[i], "--cputime")) use_cputime = true;
    else {
      fprintf(stderr, "usage: %s [--filter SUBSTRING] [--reps N] [--ms MS] [--no-peak] [--cputime]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1) reps = 1;

  bcase cs[MAX_CASES];
  int n = 0;
  char name[96];
  for (int64_t s = 1024; s <= 2048; s *= 2) {
    snprintf(name, sizeof name, "square %lld", (long long)s);
    n = add(cs, n, name, 1, s, s, s, false, false);
  }
  /* GPT-2 small: (in, out) of each linear layer */
  const int64_t layers[][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}, {768, 50257}};
  const int64_t tokens[] = {1024, 256};
  for (int t = 0; t < 2; t++)
    for (int w = 0; w < 5; w++) {
      int64_t T = tokens[t], in = layers[w][0], out = layers[w][1];
      snprintf(name, sizeof name, "M%-4lld %lldx%-5lld fwd  x@W^T", (long long)T, (long long)in, (long long)out);
      n = add(cs, n, name, 1, T, out, in, false, true);
      snprintf(name, sizeof name, "M%-4lld %lldx%-5lld dx   dy@W", (long long)T, (long long)in, (long long)out);
      n = add(cs, n, name, 1, T, in, out, false, false);
      snprintf(name, sizeof name, "M%-4lld %lldx%-5lld dW   dy^T@x", (long long)T, (long long)in, (long long)out);
      n = add(cs, n, name, 1, out, in, T, true, false);
    }
  n = add(cs, n, "attn 96x 128x64 @ 64x128 (Q@K^T)", 96, 128, 128, 64, false, true);
  n = add(cs, n, "attn 96x 128x128 @ 128x64 (P@V)", 96, 128, 64, 128, false, false);

  char la[128];
  loadavg(la, sizeof la);
  printf("loadavg before: %s\n", la);
  peaks p0 = {0}, p1 = {0};
  if (peak && !measure_peak(argv[0], &p0)) fprintf(stderr, "bench_gemm: build/peak did not run\n");
  const char *th = getenv("TORCH_NEURONX_KERNEL_THREADS");
  bool one = th && atoi(th) == 1;
  threads_for_cputime = th && atoi(th) > 0 ? atoi(th) : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (peak)
    printf("peak (%s): fp32 %.1f GFLOP/s, bf16 %.1f GFLOP/s\n", one ? "1 thread" : "all threads",
           one ? p0.fp32_1t : p0.fp32, one ? p0.bf16_1t : p0.bf16);

  double rate[MAX_CASES] = {0};
  double secs[MAX_CASES] = {0};
  for (int i = 0; i < n; i++) {
    if (filter && !strstr(cs[i].name, filter)) continue;
    secs[i] = time_case(&cs[i], reps, ms);
    const bcase *c = &cs[i];
    rate[i] = 2.0 * (double)c->batch * (double)c->M * (double)c->N * (double)c->K / secs[i] / 1e9;
  }

  if (peak && !measure_peak(argv[0], &p1)) fprintf(stderr, "bench_gemm: build/peak did not run\n");
  loadavg(la, sizeof la);
  double pf = one ? (p0.fp32_1t > p1.fp32_1t ? p0.fp32_1t : p1.fp32_1t) : (p0.fp32 > p1.fp32 ? p0.fp32 : p1.fp32);
  double pb = one ? (p0.bf16_1t > p1.bf16_1t ? p0.bf16_1t : p1.bf16_1t) : (p0.bf16 > p1.bf16 ? p0.bf16 : p1.bf16);
  if (peak) printf("peak after: fp32 %.1f, bf16 %.1f; using fp32 %.1f, bf16 %.1f\n", one ? p1.fp32_1t : p1.fp32,
                   one ? p1.bf16_1t : p1.bf16, pf, pb);
  printf("%-44s %10s %9s %8s %8s\n", "case", "ms", "GFLOP/s", "%peak", "bf16/f32");
  for (int i = 0; i < n; i++) {
    if (rate[i] == 0) continue;
    const bcase *c = &cs[i];
    double pk = c->dt == F32 ? pf : pb;
    printf("%-44s %10.3f %9.1f %7.1f%%", c->name, secs[i] * 1e3, rate[i], pk > 0 ? 100 * rate[i] / pk : 0.0);
    if (c->dt == BF16 && i > 0 && rate[i - 1] > 0) printf(" %7.2fx", rate[i] / rate[i - 1]);
    printf("\n");
  }
  printf("loadavg after: %s\n", la);
  return 0;
}
