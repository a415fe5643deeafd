/* Memory-bound kernels against the host's bandwidth, measured in the same
 * run: elementwise ops and reductions at 16M elements, the row ops and
 * layer norm at 8192 x 1024, each as GB/s and as a fraction of a STREAM
 * triad (a = b + 3 c over every core, benchmarks/triad.c's loop) timed
 * between the cases, so that a load that comes and goes shows in both.
 *
 * Bytes count each input read once and each output written once, as
 * benchmarks/cases.py does; times are medians over the repeats. Launches
 * go through nrt_launch_run (the calling thread and the kernel pool), so
 * the numbers are the kernels' own, without the stream hand-off.
 * Columns: wall ms, GB/s and % of the better triad around the case; then
 * CPU ms per launch (all threads) and the same bytes per CPU second as a
 * % of the triad's, which a busy host disturbs less (a memory-bound kernel
 * that keeps every thread busy until the end scores like the wall %).
 *
 *   build/bench_bandwidth [--reps N] [--ref] [SUBSTRING ...]
 *     SUBSTRING   only the cases whose name contains one of them (NAME$: that
 *                 case only)
 *     --ref       the scalar reference kernels instead (slow; checks)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "nrt/nrt.h"
#include "nrt/ops/norm.h"

/* ---- triad -------------------------------------------------------------------- */

enum { TRIAD_N = 1 << 24, MAX_THREADS = 64 }; /* 3 x 128 MiB: far past the L3 */
static double *ta, *tb, *tc;
static int triad_threads;

typedef struct { int id; } triad_job;

static void *triad_pass(void *arg) {
  int id = ((triad_job *)arg)->id;
  size_t lo = (size_t)TRIAD_N * id / triad_threads, hi = (size_t)TRIAD_N * (id + 1) / triad_threads;
  for (size_t i = lo; i < hi; i++) ta[i] = tb[i] + 3.0 * tc[i];
  return NULL;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU seconds of every thread of the process: on a shared host a thread
 * that waits for a CPU stretches the wall time but not this, so bytes per
 * CPU second against the triad's is the steadier ratio there. */
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

/* GB/s of one triad sample: median of 5 passes over all threads; and
 * the GB per CPU second (*cpu_gbs). */
static double triad_gbs(double *cpu_gbs) {
  double t[5], tc_[5];
  for (int r = 0; r < 5; r++) {
    double c0 = cpu_now();
    pthread_t th[MAX_THREADS];
    triad_job jobs[MAX_THREADS];
    double t0 = now();
    for (int i = 0; i < triad_threads; i++) {
      jobs[i].id = i;
      pthread_create(&th[i], NULL, triad_pass, &jobs[i]);
    }
    for (int i = 0; i < triad_threads; i++) pthread_join(th[i], NULL);
    t[r] = now() - t0;
    tc_[r] = cpu_now() - c0;
  }
  *cpu_gbs = 3.0 * sizeof(double) * TRIAD_N / median(tc_, 5) / 1e9;
  return 3.0 * sizeof(double) * TRIAD_N / median(t, 5) / 1e9;
}

/* ---- buffers ------------------------------------------------------------------- */

/* A page-aligned buffer of n elements of dt, filled with values in
 * [-1, 1) (every page touched before timing). */
static void *buffer(nrt_dtype dt, int64_t n, unsigned seed) {
  size_t bytes = (size_t)n * nrt_dtype_size(dt);
  void *p = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    float v = (float)((s >> 8) * 0x1p-23) - 1.0f;
    if (dt == NRT_FLOAT32) ((float *)p)[i] = v;
    else if (dt == NRT_BFLOAT16) ((uint16_t *)p)[i] = nrt_f32_to_bf16(v);
    else memset((char *)p + i * (int64_t)nrt_dtype_size(dt), 0, nrt_dtype_size(dt));
  }
  return p;
}

static nrt_launch launch_of(nrt_op op, nrt_dtype compute, int ndim, const int64_t *sizes, int nout, int nin) {
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = op;
  l.compute_dtype = compute;
  l.ndim = ndim;
  for (int d = 0; d < ndim; d++) l.sizes[d] = sizes[d];
  l.noutputs = nout;
  l.ninputs = nin;
  return l;
}

static void operand(nrt_launch *l, int k, void *data, nrt_dtype dt, int64_t s0, int64_t s1) {
  l->operands[k].data = data;
  l->operands[k].dtype = dt;
  l->operands[k].strides[0] = s0;
  l->operands[k].strides[1] = s1;
}

/* ---- cases --------------------------------------------------------------------- */

#define MAX_LAUNCHES 8
typedef struct bench_case {
  char name[64];
  char shape[32];
  double bytes;
  int nlaunch; /* a case may be a chain of launches (a composite op) */
  nrt_launch l[MAX_LAUNCHES];
} bench_case;

static bench_case cases[64];
static int ncases;

static bench_case *add_case(const char *name, const char *shape, double bytes) {
  bench_case *c = &cases[ncases++];
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "%s", name);
  snprintf(c->shape, sizeof c->shape, "%s", shape);
  c->bytes = bytes;
  return c;
}

enum { SIDE = 4096, ROWS = 8192, WIDTH = 1024 };

static void build_elementwise(void) {
  const int64_t sq[2] = {SIDE, SIDE};
  const int64_t n = (int64_t)SIDE * SIDE;
  nrt_dtype dts[2] = {NRT_FLOAT32, NRT_BFLOAT16};
  for (int t = 0; t < 2; t++) {
    nrt_dtype dt = dts[t];
    int64_t es = (int64_t)nrt_dtype_size(dt);
    const char *dn = dt == NRT_FLOAT32 ? "f32" : "bf16";
    void *a = buffer(dt, n, 1), *b = buffer(dt, n, 2), *o = buffer(dt, n, 3);
    for (int tr = 0; tr < 2; tr++) {
      /* transposed: b (the input of gelu) walked as b.t() */
      int64_t bs0 = tr ? es : SIDE * es, bs1 = tr ? SIDE * es : es;
      const char *sfx = tr ? ", transposed" : "";
      const char *shape = tr ? "16M one transposed" : "16M contiguous";
      char name[64];
      nrt_op ops[2] = {NRT_OP(ADD), NRT_OP(MUL)};
      for (int k = 0; k < 2; k++) {
        snprintf(name, sizeof name, "%s %s%s", k ? "mul" : "add", dn, sfx);
        bench_case *c = add_case(name, shape, 3.0 * es * n);
        c->nlaunch = 1;
        c->l[0] = launch_of(ops[k], dt, 2, sq, 1, 2);
        operand(&c->l[0], 0, o, dt, SIDE * es, es);
        operand(&c->l[0], 1, a, dt, SIDE * es, es);
        operand(&c->l[0], 2, b, dt, bs0, bs1);
        c->l[0].scalars[0].f = 1.0;
      }
      snprintf(name, sizeof name, "gelu %s%s", dn, sfx);
      bench_case *c = add_case(name, shape, 2.0 * es * n);
      c->nlaunch = 1;
      c->l[0] = launch_of(NRT_OP(GELU), dt, 2, sq, 1, 1);
      operand(&c->l[0], 0, o, dt, SIDE * es, es);
      operand(&c->l[0], 1, b, dt, bs0, bs1);
    }
  }
  /* mixed: f32 + bf16 -> f32 */
  void *a = buffer(NRT_FLOAT32, n, 4), *b = buffer(NRT_BFLOAT16, n, 5), *o = buffer(NRT_FLOAT32, n, 6);
  bench_case *c = add_case("add f32 + bf16 -> f32", "16M", 10.0 * n);
  c->nlaunch = 1;
  c->l[0] = launch_of(NRT_OP(ADD), NRT_FLOAT32, 2, sq, 1, 2);
  operand(&c->l[0], 0, o, NRT_FLOAT32, SIDE * 4, 4);
  operand(&c->l[0], 1, a, NRT_FLOAT32, SIDE * 4, 4);
  operand(&c->l[0], 2, b, NRT_BFLOAT16, SIDE * 2, 2);
  c->l[0].scalars[0].f = 1.0;
}

static void reduce_case(const char *name, nrt_op op, nrt_dtype dt, void *x, void *out, int kept_dim) {
  const int64_t sq[2] = {SIDE, SIDE};
  int64_t es = (int64_t)nrt_dtype_size(dt);
  bench_case *c = add_case(name, "4096x4096", (double)es * SIDE * SIDE);
  c->nlaunch = 1;
  c->l[0] = launch_of(op, dt, 2, sq, 1, 1);
  /* kept_dim: -1 all, 0 rows kept (dim=1 reduced), 1 columns kept (dim=0) */
  operand(&c->l[0], 0, out, dt, kept_dim == 0 ? es : 0, kept_dim == 1 ? es : 0);
  operand(&c->l[0], 1, x, dt, SIDE * es, es);
}

static void build_reductions(void) {
  const int64_t n = (int64_t)SIDE * SIDE;
  void *x = buffer(NRT_FLOAT32, n, 7), *out = buffer(NRT_FLOAT32, SIDE, 8);
  reduce_case("sum, all elements", NRT_OP(SUM), NRT_FLOAT32, x, out, -1);
  reduce_case("sum dim=1 (along rows)", NRT_OP(SUM), NRT_FLOAT32, x, out, 0);
  reduce_case("sum dim=0 (down columns)", NRT_OP(SUM), NRT_FLOAT32, x, out, 1);
  reduce_case("amax, all elements", NRT_OP(AMAX), NRT_FLOAT32, x, out, -1);
  reduce_case("amax dim=1 (along rows)", NRT_OP(AMAX), NRT_FLOAT32, x, out, 0);
  reduce_case("amax dim=0 (down columns)", NRT_OP(AMAX), NRT_FLOAT32, x, out, 1);
  void *xb = buffer(NRT_BFLOAT16, n, 9), *ob = buffer(NRT_BFLOAT16, SIDE, 10);
  reduce_case("sum bf16, all elements", NRT_OP(SUM), NRT_BFLOAT16, xb, ob, -1);
  reduce_case("sum bf16 dim=1", NRT_OP(SUM), NRT_BFLOAT16, xb, ob, 0);
  reduce_case("sum bf16 dim=0", NRT_OP(SUM), NRT_BFLOAT16, xb, ob, 1);
}

static void build_rows(void) {
  const int64_t rw[2] = {ROWS, WIDTH};
  const int64_t m = (int64_t)ROWS * WIDTH;
  const int64_t rs = WIDTH * 4;
  float *x = buffer(NRT_FLOAT32, m, 11), *g = buffer(NRT_FLOAT32, m, 12), *y = buffer(NRT_FLOAT32, m, 13);
  float *o = buffer(NRT_FLOAT32, m, 14), *w = buffer(NRT_FLOAT32, WIDTH, 15), *b = buffer(NRT_FLOAT32, WIDTH, 16);
  float *mean = buffer(NRT_FLOAT32, ROWS, 17), *rstd = buffer(NRT_FLOAT32, ROWS, 18);
  for (int64_t i = 0; i < ROWS; i++) rstd[i] = 1.5f;
  nrt_op fwd[2] = {NRT_OP(SOFTMAX), NRT_OP(LOG_SOFTMAX)}, bwd[2] = {NRT_OP(SOFTMAX_BACKWARD), NRT_OP(LOG_SOFTMAX_BACKWARD)};
  const char *names[2] = {"softmax", "log_softmax"};
  for (int k = 0; k < 2; k++) {
    char name[64];
    snprintf(name, sizeof name, "%s forward", names[k]);
    bench_case *c = add_case(name, "8192x1024", 8.0 * m);
    c->nlaunch = 1;
    c->l[0] = launch_of(fwd[k], NRT_FLOAT32, 2, rw, 1, 1);
    operand(&c->l[0], 0, o, NRT_FLOAT32, rs, 4);
    operand(&c->l[0], 1, x, NRT_FLOAT32, rs, 4);
    snprintf(name, sizeof name, "%s backward", names[k]);
    c = add_case(name, "8192x1024", 12.0 * m);
    c->nlaunch = 1;
    c->l[0] = launch_of(bwd[k], NRT_FLOAT32, 2, rw, 1, 2);
    operand(&c->l[0], 0, o, NRT_FLOAT32, rs, 4);
    operand(&c->l[0], 1, g, NRT_FLOAT32, rs, 4);
    operand(&c->l[0], 2, y, NRT_FLOAT32, rs, 4);
  }
  bench_case *c = add_case("layer_norm forward (kernel)", "8192x1024", 8.0 * m);
  c->nlaunch = 1;
  c->l[0] = launch_of(NRT_OP(LAYER_NORM), NRT_FLOAT32, 2, rw, 3, 3);
  operand(&c->l[0], 0, o, NRT_FLOAT32, rs, 4);
  operand(&c->l[0], 1, mean, NRT_FLOAT32, 4, 0);
  operand(&c->l[0], 2, rstd, NRT_FLOAT32, 4, 0);
  operand(&c->l[0], 3, x, NRT_FLOAT32, rs, 4);
  operand(&c->l[0], 4, w, NRT_FLOAT32, 0, 4);
  operand(&c->l[0], 5, b, NRT_FLOAT32, 0, 4);
  c->l[0].params[1] = 3;
  c->l[0].scalars[0].f = 1e-5;
  c = add_case("layer_norm backward (kernel)", "8192x1024", 12.0 * m);
  c->nlaunch = 1;
  c->l[0] = launch_of(NRT_OP(LAYER_NORM_BACKWARD), NRT_FLOAT32, 2, rw, 1, 5);
  operand(&c->l[0], 0, o, NRT_FLOAT32, rs, 4);
  operand(&c->l[0], 1, g, NRT_FLOAT32, rs, 4);
  operand(&c->l[0], 2, x, NRT_FLOAT32, rs, 4);
  operand(&c->l[0], 3, mean, NRT_FLOAT32, 4, 0);
  operand(&c->l[0], 4, rstd, NRT_FLOAT32, 4, 0);
  operand(&c->l[0], 5, w, NRT_FLOAT32, 0, 4);

  /* The pieces the composite norms run (the glue's layer_norm weight
   * gradient, ATen's rms_norm decomposition). */
  c = add_case("mul by a row vector (x * r[:,None])", "8192x1024", 8.0 * m);
  c->nlaunch = 1;
  c->l[0] = launch_of(NRT_OP(MUL), NRT_FLOAT32, 2, rw, 1, 2);
  operand(&c->l[0], 0, o, NRT_FLOAT32, rs, 4);
  operand(&c->l[0], 1, x, NRT_FLOAT32, rs, 4);
  operand(&c->l[0], 2, rstd, NRT_FLOAT32, 4, 0);
  c = add_case("mul by a column vector (x * w)", "8192x1024", 8.0 * m);
  c->nlaunch = 1;
  c->l[0] = launch_of(NRT_OP(MUL), NRT_FLOAT32, 2, rw, 1, 2);
  operand(&c->l[0], 0, o, NRT_FLOAT32, rs, 4);
  operand(&c->l[0], 1, x, NRT_FLOAT32, rs, 4);
  operand(&c->l[0], 2, w, NRT_FLOAT32, 0, 4);
  c = add_case("sum dim=0 of 8192x1024", "8192x1024", 4.0 * m);
  c->nlaunch = 1;
  c->l[0] = launch_of(NRT_OP(SUM), NRT_FLOAT32, 2, rw, 1, 1);
  operand(&c->l[0], 0, w, NRT_FLOAT32, 0, 4);
  operand(&c->l[0], 1, g, NRT_FLOAT32, rs, 4);
  c = add_case("mean dim=1 of 8192x1024", "8192x1024", 4.0 * m);
  c->nlaunch = 1;
  c->l[0] = launch_of(NRT_OP(MEAN), NRT_FLOAT32, 2, rw, 1, 1);
  operand(&c->l[0], 0, mean, NRT_FLOAT32, 4, 0);
  operand(&c->l[0], 1, g, NRT_FLOAT32, rs, 4);

  /* rms_norm forward as ATen decomposes it for this backend:
   * r = rsqrt(mean(x^2, -1) + eps); y = (x * r) * w. Bytes: read x, write y. */
  c = add_case("rms_norm forward (composite, 5 launches)", "8192x1024", 8.0 * m);
  c->nlaunch = 5;
  c->l[0] = launch_of(NRT_OP(POW_SCALAR), NRT_FLOAT32, 2, rw, 1, 1);
  operand(&c->l[0], 0, y, NRT_FLOAT32, rs, 4);
  operand(&c->l[0], 1, x, NRT_FLOAT32, rs, 4);
  c->l[0].scalars[0].f = 2.0;
  c->l[1] = launch_of(NRT_OP(MEAN), NRT_FLOAT32, 2, rw, 1, 1);
  operand(&c->l[1], 0, mean, NRT_FLOAT32, 4, 0);
  operand(&c->l[1], 1, y, NRT_FLOAT32, rs, 4);
  const int64_t r1[1] = {ROWS};
  c->l[2] = launch_of(NRT_OP(ADD), NRT_FLOAT32, 1, r1, 1, 2);
  operand(&c->l[2], 0, rstd, NRT_FLOAT32, 4, 0);
  operand(&c->l[2], 1, mean, NRT_FLOAT32, 4, 0);
  operand(&c->l[2], 2, mean, NRT_FLOAT32, 0, 0);
  c->l[2].scalars[0].f = 1e-6;
  c->l[3] = launch_of(NRT_OP(MUL), NRT_FLOAT32, 2, rw, 1, 2);
  operand(&c->l[3], 0, o, NRT_FLOAT32, rs, 4);
  operand(&c->l[3], 1, x, NRT_FLOAT32, rs, 4);
  operand(&c->l[3], 2, rstd, NRT_FLOAT32, 4, 0);
  c->l[4] = launch_of(NRT_OP(MUL), NRT_FLOAT32, 2, rw, 1, 2);
  operand(&c->l[4], 0, o, NRT_FLOAT32, rs, 4);
  operand(&c->l[4], 1, o, NRT_FLOAT32, rs, 4);
  operand(&c->l[4], 2, w, NRT_FLOAT32, 0, 4);
}

/* ---- driver -------------------------------------------------------------------- */

static bool wanted(const bench_case *c, int argc, char **argv, int first) {
  bool any = false;
  for (int i = first; i < argc; i++) {
    if (argv[i][0] == '-') continue;
    any = true;
    size_t n = strlen(argv[i]);
    if (n > 1 && argv[i][n - 1] == '$') { /* "name$": exactly that case */
      if (strlen(c->name) == n - 1 && !strncmp(c->name, argv[i], n - 1)) return true;
    } else if (strstr(c->name, argv[i])) {
      return true;
    }
  }
  return !any;
}

static double run_case(const bench_case *c, double *cpu) {
  double t0 = now(), c0 = cpu_now();
  for (int k = 0; k < c->nlaunch; k++) {
    nrt_status st = nrt_launch_run(&c->l[k]);
    if (st != NRT_SUCCESS) {
      fprintf(stderr, "%s: launch %d: %s (%s)\n", c->name, k, nrt_status_name(st), nrt_last_error_message());
      exit(1);
    }
  }
  *cpu = cpu_now() - c0;
  return now() - t0;
}

int main(int argc, char **argv) {
  int reps = 15;
  bool ref = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = atoi(argv[i + 1]);
      argv[i + 1] = "-";
      i++;
    } else if (!strcmp(argv[i], "--ref")) {
      ref = true;
    }
  }
  if (reps < 1) reps = 1;
  if (reps > 101) reps = 101;
  triad_threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (triad_threads < 1) triad_threads = 1;
  if (triad_threads > MAX_THREADS) triad_threads = MAX_THREADS;
  ta = buffer(NRT_FLOAT32, 2 * (int64_t)TRIAD_N, 0); /* doubles: two floats' room each */
  tb = buffer(NRT_FLOAT32, 2 * (int64_t)TRIAD_N, 0);
  tc = buffer(NRT_FLOAT32, 2 * (int64_t)TRIAD_N, 0);
  for (size_t i = 0; i < TRIAD_N; i++) ta[i] = 0, tb[i] = 1, tc[i] = 2;

  build_elementwise();
  build_reductions();
  build_rows();
  nrt_kernels_set_reference(ref);

  FILE *la = fopen("/proc/loadavg", "r");
  char load[64] = "?";
  if (la) {
    if (!fgets(load, sizeof load, la)) load[0] = 0;
    fclose(la);
    load[strcspn(load, "\n")] = 0;
  }
  printf("# threads %d, loadavg %s, reps %d%s\n", triad_threads, load, reps, ref ? ", reference kernels" : "");
  printf("%-42s %-18s %8s %8s %7s %7s %8s %8s\n", "case", "shape", "ms", "GB/s", "triad", "%triad", "cpu ms",
         "%cpu-tr");
  double triads[128];
  int ntriad = 0;
  for (int i = 0; i < ncases; i++) {
    const bench_case *c = &cases[i];
    if (!wanted(c, argc, argv, 1)) continue;
    double tcpu, tcpu2, dummy;
    double tg = triad_gbs(&tcpu);
    if (ntriad < 128) triads[ntriad++] = tg;
    run_case(c, &dummy); /* warm-up: pool threads, page faults of any scratch */
    run_case(c, &dummy);
    double t[101], tc[101];
    for (int r = 0; r < reps; r++) t[r] = run_case(c, &tc[r]);
    double s = median(t, reps), sc = median(tc, reps);
    double gbs = c->bytes / s / 1e9;
    double tg2 = triad_gbs(&tcpu2);
    double tri = tg > tg2 ? tg : tg2; /* the better of the triads around the case */
    double tric = tcpu > tcpu2 ? tcpu : tcpu2;
    printf("%-42s %-18s %8.3f %8.2f %7.2f %6.0f%% %8.3f %7.0f%%\n", c->name, c->shape, s * 1e3, gbs, tri,
           100.0 * gbs / tri, sc * 1e3, 100.0 * c->bytes / sc / 1e9 / tric);
    fflush(stdout);
  }
  if (ntriad) printf("# triad median %.2f GB/s over %d samples\n", median(triads, ntriad), ntriad);
  return 0;
}
