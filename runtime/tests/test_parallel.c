/* The kernel thread pool: coverage of ranges, grain alignment, inline
 * execution of small ranges, concurrent and nested callers, and fork. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/api.h"
#include "exec/exec.h"
#include "memory/memory.h"
#include "testing.h"

#define POOL_THREADS 4 /* set through the environment in main */

typedef struct cover_ctx {
  int64_t grain;
  unsigned char *hits;
  atomic_llong sum;
  atomic_int calls;
  atomic_int misaligned;
  pthread_t caller;
  atomic_int off_caller; /* ranges run by another thread */
} cover_ctx;

static void cover_range(void *arg, int64_t begin, int64_t end) {
  cover_ctx *c = arg;
  long long s = 0;
  for (int64_t i = begin; i < end; i++) {
    c->hits[i]++;
    s += i;
  }
  atomic_fetch_add(&c->sum, s);
  atomic_fetch_add(&c->calls, 1);
  if (begin % c->grain != 0) atomic_fetch_add(&c->misaligned, 1);
  if (!pthread_equal(pthread_self(), c->caller)) atomic_fetch_add(&c->off_caller, 1);
}

static int run_cover(int64_t n, int64_t grain, cover_ctx *c) {
  memset(c, 0, sizeof *c);
  c->grain = grain > 0 ? grain : 1; /* the pool treats grain < 1 as 1 */
  c->hits = calloc((size_t)(n > 0 ? n : 1), 1);
  c->caller = pthread_self();
  nrt_parallel_for(n, grain, cover_range, c);
  int ok = atomic_load(&c->sum) == (long long)n * (n - 1) / 2;
  for (int64_t i = 0; i < n; i++) ok &= c->hits[i] == 1;
  free(c->hits);
  return ok;
}

static void test_thread_count(void) {
  CHECK(nrt_pool_threads() == POOL_THREADS);
}

static void test_ranges_cover_exactly_once(void) {
  cover_ctx c;
  int64_t cases[][2] = {{1000000, 1000}, {1000003, 64}, {17, 1}, {4096, 4096}, {4097, 4096},
                        {100, 0},        {5, 2},        {1, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int ok = run_cover(cases[i][0], cases[i][1], &c);
    if (!ok) fprintf(stderr, "n=%lld grain=%lld\n", (long long)cases[i][0], (long long)cases[i][1]);
    CHECK(ok);
    CHECK(atomic_load(&c.misaligned) == 0);
  }
  /* Large ranges are split into several chunks. */
  run_cover(1000000, 1000, &c);
  CHECK(atomic_load(&c.calls) > 1);
}

static void test_small_ranges_run_inline(void) {
  cover_ctx c;
  CHECK(run_cover(1000, 1000, &c));
  CHECK(atomic_load(&c.calls) == 1 && atomic_load(&c.off_caller) == 0);
  CHECK(run_cover(10, 100, &c));
  CHECK(atomic_load(&c.calls) == 1 && atomic_load(&c.off_caller) == 0);
  CHECK(run_cover(0, 10, &c));
  CHECK(atomic_load(&c.calls) == 0);
  memset(&c, 0, sizeof c);
  nrt_parallel_for(-5, 10, cover_range, &c); /* negative n: nothing to do */
  CHECK(atomic_load(&c.calls) == 0);
}

static void test_workers_take_part(void) {
  /* With slow enough chunks some run on pool threads. */
  int seen_other = 0;
  for (int attempt = 0; attempt < 20 && !seen_other; attempt++) {
    cover_ctx c;
    CHECK(run_cover(4000000, 1000, &c));
    seen_other = atomic_load(&c.off_caller) > 0;
  }
  CHECK(seen_other);
}

static void *concurrent_caller(void *arg) {
  int *failures = arg;
  for (int i = 0; i < 200; i++) {
    cover_ctx c;
    if (!run_cover(20000 + i, 100, &c)) (*failures)++;
  }
  return NULL;
}

static void test_concurrent_callers(void) {
  enum { THREADS = 4 };
  pthread_t t[THREADS];
  int failures[THREADS] = {0};
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, concurrent_caller, &failures[i]);
  for (int i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    CHECK(failures[i] == 0);
  }
}

typedef struct nested_ctx {
  atomic_llong total;
} nested_ctx;

static void inner_range(void *arg, int64_t begin, int64_t end) {
  nested_ctx *c = arg;
  atomic_fetch_add(&c->total, end - begin);
}

static void outer_range(void *arg, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; i++) nrt_parallel_for(1000, 10, inner_range, arg);
}

static void test_nested_calls(void) {
  nested_ctx c;
  atomic_init(&c.total, 0);
  nrt_parallel_for(64, 1, outer_range, &c);
  CHECK(atomic_load(&c.total) == 64 * 1000);
}

static void test_fork_child_uses_pool(void) {
  cover_ctx c;
  CHECK(run_cover(1000000, 100, &c)); /* the parent's workers are running */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    int ok = 1;
    for (int i = 0; i < 20; i++) ok &= run_cover(1000000, 100, &c);
    _exit(ok ? 0 : 1);
  }
  CHECK(pid > 0);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(run_cover(1000000, 100, &c));
}

int main(void) {
  setenv("TORCH_NEURONX_KERNEL_THREADS", "4", 1);
  RUN_TEST(test_thread_count);
  RUN_TEST(test_ranges_cover_exactly_once);
  RUN_TEST(test_small_ranges_run_inline);
  RUN_TEST(test_workers_take_part);
  RUN_TEST(test_concurrent_callers);
  RUN_TEST(test_nested_calls);
  RUN_TEST(test_fork_child_uses_pool);
  return TEST_RESULT();
}
