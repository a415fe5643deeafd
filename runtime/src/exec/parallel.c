/* Kernel thread pool: (threads - 1) persistent workers plus the calling
 * thread share one job at a time.
 *
 * One job slot: a launch takes `job_mu` with trylock; a second concurrent
 * caller (another stream worker, or a nested call from inside a kernel)
 * fails the trylock and runs its range serially on its own thread. That
 * never deadlocks and never runs more threads than the host has CPUs.
 * Chunks are claimed from an atomic counter, so a slow thread does not
 * hold up the others. Workers sleep on a condition variable between jobs.
 *
 * Fork: the workers do not exist in a child. An atfork handler holds the
 * pool locks across fork() (so the child's copy is consistent) and the
 * child marks the pool as not started; the workers are re-created at the
 * child's first parallel launch. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* sched_getaffinity, pthread_setname_np */
#endif
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "exec/exec.h"

#define NRT_POOL_MAX_THREADS 256
/* More chunks than threads evens out uneven chunk costs and threads that
 * start late. */
#define NRT_POOL_CHUNKS_PER_THREAD 4
/* How long a worker polls for the next job before sleeping: back-to-back
 * kernels then start without a wake-up. */
#define NRT_POOL_SPIN_NS 20000

static struct {
  pthread_mutex_t job_mu; /* the single job slot */
  pthread_mutex_t mu;     /* guards everything below except `next` */
  pthread_cond_t start_cv;
  pthread_cond_t done_cv;
  bool started;
  int workers;                 /* running worker threads */
  _Atomic uint64_t generation; /* atomic: spinning workers poll it unlocked */
  atomic_bool job_open;        /* workers may still join the current job */
  atomic_int active;           /* workers inside the current job (changed under mu) */
  nrt_range_fn fn;
  void *ctx;
  int64_t n, chunk, nchunks;
  _Atomic int64_t next;
} pool = {
    .job_mu = PTHREAD_MUTEX_INITIALIZER,
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .start_cv = PTHREAD_COND_INITIALIZER,
    .done_cv = PTHREAD_COND_INITIALIZER,
};

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static int pool_thread_count = 1; /* written once under pool_once */

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

bool nrt_spin_until(nrt_ready_fn ready, const void *ctx, uint64_t max_ns) {
  /* Pure busy-waiting for the first microseconds catches a producer that
   * is about to enqueue; after that, yield between polls so that on a
   * small host the spinning thread does not starve the very producer it
   * waits for. */
  const uint64_t busy_ns = 2000;
  uint64_t start = monotonic_ns();
  for (unsigned i = 0;; i++) {
    if (ready(ctx)) return true;
    if ((i & 15) == 15) {
      uint64_t elapsed = monotonic_ns() - start;
      if (elapsed >= max_ns) return false;
      if (elapsed >= busy_ns) sched_yield();
    }
    cpu_relax();
  }
}

static void pool_atfork_prepare(void) {
  pthread_mutex_lock(&pool.job_mu);
  pthread_mutex_lock(&pool.mu);
}

static void pool_atfork_parent(void) {
  pthread_mutex_unlock(&pool.mu);
  pthread_mutex_unlock(&pool.job_mu);
}

static void pool_atfork_child(void) {
  pthread_mutex_init(&pool.job_mu, NULL);
  pthread_mutex_init(&pool.mu, NULL);
  pthread_cond_init(&pool.start_cv, NULL);
  pthread_cond_init(&pool.done_cv, NULL);
  pool.started = false;
  pool.workers = 0;
  pool.job_open = false;
  pool.active = 0;
}

static int default_threads(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

static void pool_configure(void) {
  int threads = nrt_config_get()->kernel_threads;
  if (threads <= 0) threads = default_threads();
  if (threads > NRT_POOL_MAX_THREADS) threads = NRT_POOL_MAX_THREADS;
  pool_thread_count = threads;
  pthread_atfork(pool_atfork_prepare, pool_atfork_parent, pool_atfork_child);
}

int nrt_pool_threads(void) {
  pthread_once(&pool_once, pool_configure);
  return pool_thread_count;
}

static void run_chunks(nrt_range_fn fn, void *ctx, int64_t n, int64_t chunk, int64_t nchunks) {
  for (;;) {
    int64_t i = atomic_fetch_add_explicit(&pool.next, 1, memory_order_relaxed);
    if (i >= nchunks) return;
    int64_t begin = i * chunk;
    int64_t end = begin + chunk < n ? begin + chunk : n;
    fn(ctx, begin, end);
  }
}

static bool pool_has_new_job(const void *seen) {
  return atomic_load_explicit(&pool.job_open, memory_order_relaxed) &&
         atomic_load_explicit(&pool.generation, memory_order_relaxed) != *(const uint64_t *)seen;
}

static bool pool_idle(const void *unused) {
  (void)unused;
  return atomic_load_explicit(&pool.active, memory_order_acquire) == 0;
}

static void *pool_worker(void *unused) {
  (void)unused;
  pthread_mutex_lock(&pool.mu);
  uint64_t seen = pool.generation; /* never join a job already under way */
  for (;;) {
    while (!pool_has_new_job(&seen)) {
      pthread_mutex_unlock(&pool.mu);
      bool ready = nrt_spin_until(pool_has_new_job, &seen, NRT_POOL_SPIN_NS);
      pthread_mutex_lock(&pool.mu);
      if (!ready || !pool_has_new_job(&seen)) pthread_cond_wait(&pool.start_cv, &pool.mu);
    }
    seen = pool.generation;
    pool.active++;
    nrt_range_fn fn = pool.fn;
    void *ctx = pool.ctx;
    int64_t n = pool.n, chunk = pool.chunk, nchunks = pool.nchunks;
    pthread_mutex_unlock(&pool.mu);
    run_chunks(fn, ctx, n, chunk, nchunks);
    pthread_mutex_lock(&pool.mu);
    if (--pool.active == 0) pthread_cond_signal(&pool.done_cv);
  }
  return NULL;
}

/* Called with pool.mu held. Starts as many workers as it can; a partial
 * failure only means fewer helpers. */
static void start_workers(void) {
  pool.started = true;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  for (int i = pool.workers; i < pool_thread_count - 1; i++) {
    pthread_t t;
    if (pthread_create(&t, &attr, pool_worker, NULL) != 0) break;
    char name[16]; /* the kernel keeps 15 characters */
    snprintf(name, sizeof name, "nrt-pool-%d", i % 1000);
    pthread_setname_np(t, name);
    pool.workers++;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
}

void nrt_parallel_for(int64_t n, int64_t grain, nrt_range_fn fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int threads = nrt_pool_threads();
  if (threads <= 1 || n <= grain || pthread_mutex_trylock(&pool.job_mu) != 0) {
    fn(ctx, 0, n);
    return;
  }
  int64_t chunk = (n + (int64_t)threads * NRT_POOL_CHUNKS_PER_THREAD - 1) /
                  ((int64_t)threads * NRT_POOL_CHUNKS_PER_THREAD);
  if (chunk < grain) chunk = grain;
  chunk = (chunk + grain - 1) / grain * grain; /* chunk starts stay grain-aligned */
  int64_t nchunks = (n + chunk - 1) / chunk;

  pthread_mutex_lock(&pool.mu);
  if (!pool.started) start_workers();
  if (pool.workers == 0 || nchunks == 1) {
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&pool.job_mu);
    fn(ctx, 0, n);
    return;
  }
  pool.fn = fn;
  pool.ctx = ctx;
  pool.n = n;
  pool.chunk = chunk;
  pool.nchunks = nchunks;
  atomic_store_explicit(&pool.next, 0, memory_order_relaxed);
  pool.generation++;
  pool.job_open = true;
  pthread_cond_broadcast(&pool.start_cv);
  pthread_mutex_unlock(&pool.mu);

  run_chunks(fn, ctx, n, chunk, nchunks);

  /* Closing the job keeps late-waking workers out; then wait for those
   * that joined, since their chunks may still be running. */
  pthread_mutex_lock(&pool.mu);
  pool.job_open = false;
  if (pool.active > 0) {
    /* The helpers usually finish their last chunk within microseconds;
     * polling spares both sides a sleep and a wake-up. */
    pthread_mutex_unlock(&pool.mu);
    nrt_spin_until(pool_idle, NULL, NRT_POOL_SPIN_NS);
    pthread_mutex_lock(&pool.mu);
    while (pool.active > 0) pthread_cond_wait(&pool.done_cv, &pool.mu);
  }
  pthread_mutex_unlock(&pool.mu);
  pthread_mutex_unlock(&pool.job_mu);
}
