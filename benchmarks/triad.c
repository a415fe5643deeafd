/* STREAM-style triad (a = b + s*c) over all cores: the host's memory
 * bandwidth ceiling, printed beside the device benchmarks. Counts 3 arrays
 * of traffic per element (2 reads, 1 write), as STREAM does.
 *
 *   build/triad            {"threads": T, "n": N, "bytes": B, "gbs": G}
 *   build/triad --sweep    the same plus "sweep": [{"bytes": B, "gbs": G}, ...],
 *                          working sets from 384 KiB (caches) to the full N
 *   build/triad --n N      arrays of N doubles (default 2^25: 768 MiB in all)
 *
 * Each thread repeats the pass over its own slice (no barrier between passes,
 * as in STREAM's per-thread loops), so small, cache-resident sizes are timed
 * over enough passes to dwarf the thread start. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { DEFAULT_N = 1 << 25, REPEATS = 9, MAX_THREADS = 256 };
static double *a, *b, *c;
static int nthreads;

typedef struct {
  int id;
  size_t n;
  long passes;
} job;

static void *triad(void *arg) {
  const job *j = arg;
  size_t lo = j->n * j->id / nthreads, hi = j->n * (j->id + 1) / nthreads;
  for (long p = 0; p < j->passes; p++) {
    for (size_t i = lo; i < hi; i++) a[i] = b[i] + 3.0 * c[i];
    /* Keeps the compiler from collapsing the identical passes into one. */
    __asm__ volatile("" ::: "memory");
  }
  return NULL;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *x, const void *y) {
  double d = *(const double *)x - *(const double *)y;
  return (d > 0) - (d < 0);
}

/* Seconds for `passes` passes over the first n elements, all threads. */
static double run(size_t n, long passes) {
  pthread_t th[MAX_THREADS];
  job jobs[MAX_THREADS];
  double t0 = now();
  for (int i = 0; i < nthreads; i++) {
    jobs[i] = (job){.id = i, .n = n, .passes = passes};
    pthread_create(&th[i], NULL, triad, &jobs[i]);
  }
  for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
  return now() - t0;
}

/* Median GB/s over REPEATS, with enough passes that one sample takes
 * about 20 ms (at least one pass). */
static double bandwidth(size_t n) {
  long passes = 1;
  while (run(n, passes) < 0.02 && passes < (1L << 30)) passes *= 2;
  double t[REPEATS];
  for (int r = 0; r < REPEATS; r++) t[r] = run(n, passes);
  qsort(t, REPEATS, sizeof t[0], cmp);
  return 3.0 * sizeof(double) * n * passes / t[REPEATS / 2] / 1e9;
}

int main(int argc, char **argv) {
  size_t n = DEFAULT_N;
  int sweep = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--sweep")) {
      sweep = 1;
    } else if (!strcmp(argv[i], "--n") && i + 1 < argc) {
      n = strtoull(argv[++i], NULL, 10);
    } else {
      fprintf(stderr, "usage: %s [--sweep] [--n ELEMENTS]\n", argv[0]);
      return 2;
    }
  }
  if (n < 1024) n = 1024;
  nthreads = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (nthreads < 1) nthreads = 1;
  if (nthreads > MAX_THREADS) nthreads = MAX_THREADS;
  a = malloc(sizeof(double) * n);
  b = malloc(sizeof(double) * n);
  c = malloc(sizeof(double) * n);
  if (!a || !b || !c) return 1;
  for (size_t i = 0; i < n; i++) { a[i] = 0; b[i] = 1; c[i] = 2; }

  printf("{\"threads\": %d, \"n\": %zu, \"bytes\": %zu, \"gbs\": %.2f", nthreads, n, 3 * sizeof(double) * n,
         bandwidth(n));
  if (sweep) {
    printf(",\n \"sweep\": [");
    int first = 1;
    for (size_t m = 1 << 14; m <= n; m *= 4) {
      printf("%s{\"bytes\": %zu, \"gbs\": %.2f}", first ? "" : ", ", 3 * sizeof(double) * m, bandwidth(m));
      first = 0;
    }
    printf("]");
  }
  printf("}\n");
  return a[n / 2] == 7.0 ? 0 : 2;
}
