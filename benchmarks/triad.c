/* STREAM-style triad (a = b + s*c) over all cores: the host's memory
 * bandwidth ceiling, printed beside the device benchmarks. Counts 3 arrays
 * of traffic per element (2 reads, 1 write), as STREAM does. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { N = 1 << 25, REPEATS = 9 };
static double *a, *b, *c;
static int nthreads;

typedef struct { int id; } job;

static void *triad(void *arg) {
  int id = ((job *)arg)->id;
  size_t lo = (size_t)N * id / nthreads, hi = (size_t)N * (id + 1) / nthreads;
  for (size_t i = lo; i < hi; i++) a[i] = b[i] + 3.0 * c[i];
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

int main(void) {
  nthreads = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (nthreads < 1) nthreads = 1;
  a = malloc(sizeof(double) * N);
  b = malloc(sizeof(double) * N);
  c = malloc(sizeof(double) * N);
  if (!a || !b || !c) return 1;
  for (size_t i = 0; i < N; i++) { a[i] = 0; b[i] = 1; c[i] = 2; }
  double t[REPEATS];
  pthread_t th[64];
  job jobs[64];
  for (int r = 0; r < REPEATS; r++) {
    double t0 = now();
    for (int i = 0; i < nthreads; i++) { jobs[i].id = i; pthread_create(&th[i], NULL, triad, &jobs[i]); }
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    t[r] = now() - t0;
  }
  qsort(t, REPEATS, sizeof t[0], cmp);
  printf("%.2f\n", 3.0 * sizeof(double) * N / t[REPEATS / 2] / 1e9);
  return a[N / 2] == 7.0 ? 0 : 2;
}
