/* Streams: in-order task queues, one runtime worker thread each.
 *
 * Every device owns NRT_STREAMS_PER_DEVICE stream objects allocated at the
 * first stream lookup (nrt_streams_ready); a stream's worker thread starts at its first enqueue, so an
 * unused stream costs only its struct. When its queue runs dry the worker
 * polls for NRT_STREAM_SPIN_NS (a producer issuing op after op then never
 * pays for a wake-up) and then sleeps on a condition variable, so an idle
 * stream costs no CPU.
 *
 * Ordering and counters: each task gets a ticket (1, 2, ...) when it is
 * enqueued; `enqueued` is the last ticket handed out and `completed` the
 * last ticket finished. Tasks finish in ticket order, so "completed >= t"
 * means every task up to t has run (events and the allocator rely on it).
 *
 * Sticky errors: the first task that fails records its status and a
 * message naming it; later tasks of the stream are skipped (release still
 * runs, completed still advances) until a synchronising call returns the
 * error and clears it. As with a poisoned CUDA context, nothing queued
 * after a failure can observe half-computed results.
 *
 * Fork: worker threads do not survive fork(). A pthread_atfork handler
 * holds every stream lock across the fork, so the child inherits
 * consistent queues, and then resets each stream in the child: the queued
 * tasks are dropped without running (their release functions are not
 * called; the parent owns that work), `completed` is set to `enqueued` so
 * no event or cached block waits forever on work that will never run,
 * sticky errors are cleared, and a new worker starts at the child's first
 * enqueue. A forked child (a DataLoader worker, say) can therefore use the
 * runtime; it never sees the parent's in-flight work. */
#include <pthread.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/exec.h"
#include "nrt/profiler.h"

/* Back-pressure like CUDA's launch queue: a producer that runs this far
 * ahead of the worker blocks until the worker catches up, bounding the
 * memory held by queued tasks. */
#define NRT_STREAM_MAX_PENDING 1024
/* Task nodes kept per stream for reuse, so the steady-state enqueue path
 * does not allocate. */
#define NRT_STREAM_MAX_CACHED_TASKS 256
/* How long an idle worker polls for the next task before sleeping. A
 * producer that finds the worker polling enqueues without a wake-up
 * syscall, which would otherwise dominate the per-op host cost. */
#define NRT_STREAM_SPIN_NS 50000
/* How long a synchronising caller polls before sleeping: short kernels
 * finish within it, sparing the caller a wake-up. */
#define NRT_SYNC_SPIN_NS 20000

typedef struct task {
  struct task *next;
  const char *name;
  nrt_task_fn run;
  nrt_release_fn release;
  void *arg;
  uint64_t ticket;
  unsigned flags;
  /* Set at enqueue while the profiler is on; the worker then stamps the
   * run into the profiler's record. */
  bool profiled;
  nrt_task_cost cost;
  uint64_t correlation, enqueue_ns;
  alignas(max_align_t) unsigned char inline_arg[NRT_TASK_INLINE_MAX];
} task;

struct nrt_stream {
  pthread_mutex_t mu;
  pthread_cond_t work_cv; /* the worker waits here for tasks */
  pthread_cond_t done_cv; /* synchronisers and blocked producers wait here */
  task *head, *tail;
  task *free_tasks;
  int free_count;
  bool started;     /* worker thread exists */
  bool worker_idle; /* the worker waits on work_cv; enqueue signals only then */
  /* A task runs on a caller thread (launch-blocking mode, or a small task
   * on an idle stream). Written under `mu`; the polling worker reads it
   * without the lock, so such a task never looks like queued work. */
  _Atomic bool inline_busy;
  int device, index;
  /* Threads waiting on done_cv. Changed under `mu`, read by the worker
   * without it after each task: it signals only when someone waits. */
  atomic_int waiters;
  _Atomic uint64_t enqueued;
  _Atomic uint64_t completed;
  /* Sticky error: written under `mu`; the worker reads it without the
   * lock to decide whether to skip a task. */
  _Atomic(nrt_status) error;
  uint64_t error_ticket;
  char error_msg[NRT_ERROR_MESSAGE_MAX];
};

/* The runtime context's stream table: device_count * NRT_STREAMS_PER_DEVICE
 * entries, allocated once by nrt_streams_ready() and never freed. */
static nrt_stream *stream_table;
static int stream_table_devices;
static _Atomic unsigned acquire_next[NRT_MAX_DEVICES];

/* The stream whose task this thread is running (a worker's own stream, or
 * the stream of an inline launch-blocking task), so that a task calling
 * back into its own stream cannot wait for itself. */
static _Thread_local nrt_stream *tls_running_stream;
static _Thread_local uint64_t tls_running_ticket;

/* Nanoseconds each device's stream workers spent running batches of tasks
 * (summed over streams, so overlapping streams count twice). */
static _Atomic uint64_t busy_ns[NRT_MAX_DEVICES];

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The profiler's marks, taken on the enqueuing thread. */
static void profile_mark(task *t, const nrt_task_cost *cost) {
  t->profiled = nrt_profiler_active();
  if (!t->profiled) return;
  t->cost = cost ? *cost : (nrt_task_cost){NRT_ACTIVITY_TASK, -1, 0, 0};
  t->correlation = nrt_profile_correlation();
  t->enqueue_ns = now_ns();
}

/* Called before the task's completion is published (nrt_profiler_stop
 * relies on it). */
static void profile_stamp(const nrt_stream *s, const task *t, uint64_t start, uint64_t end,
                          bool failed) {
  nrt_activity a;
  memset(&a, 0, sizeof a);
  strncpy(a.name, t->name, sizeof a.name - 1);
  a.device = s->device;
  a.stream = s->index;
  a.kind = t->cost.kind;
  a.failed = failed;
  a.dtype = t->cost.dtype;
  a.ticket = t->ticket;
  a.enqueue_ns = t->enqueue_ns;
  a.start_ns = start;
  a.end_ns = end;
  a.bytes = t->cost.bytes;
  a.flops = t->cost.flops;
  a.correlation = t->correlation;
  nrt_profile_record(&a);
}

static void streams_atfork_prepare(void);
static void streams_atfork_parent(void);
static void streams_atfork_child(void);

static void stream_init_sync(nrt_stream *s) {
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->work_cv, NULL);
  pthread_cond_init(&s->done_cv, NULL);
}

static pthread_once_t streams_once = PTHREAD_ONCE_INIT;

static void streams_init(void) {
  int device_count = nrt_device_count();
  size_t n = (size_t)device_count * NRT_STREAMS_PER_DEVICE;
  size_t bytes = n * sizeof(nrt_stream);
  /* Cache-line aligned so one busy stream's counters do not false-share
   * with its neighbour's. */
  bytes = (bytes + 63) & ~(size_t)63;
  stream_table = aligned_alloc(64, bytes);
  if (!stream_table) {
    fprintf(stderr, "nrt: fatal: cannot allocate the stream table\n");
    abort();
  }
  memset(stream_table, 0, bytes);
  for (size_t i = 0; i < n; i++) {
    nrt_stream *s = &stream_table[i];
    stream_init_sync(s);
    s->device = (int)(i / NRT_STREAMS_PER_DEVICE);
    s->index = (int)(i % NRT_STREAMS_PER_DEVICE);
    atomic_init(&s->error, NRT_SUCCESS);
  }
  stream_table_devices = device_count;
  pthread_atfork(streams_atfork_prepare, streams_atfork_parent, streams_atfork_child);
}

void nrt_streams_ready(void) { pthread_once(&streams_once, streams_init); }

nrt_stream *nrt_stream_at(int device, int index) {
  return &stream_table[(size_t)device * NRT_STREAMS_PER_DEVICE + (size_t)index];
}

/* ---- lookup ------------------------------------------------------------------ */

nrt_status nrt_stream_get(int device, int index, nrt_stream **out_stream) {
  nrt_streams_ready();
  if (!nrt_device_valid(device)) {
    nrt_set_error_message("nrt_stream_get: invalid device %d", device);
    return NRT_ERROR_INVALID_DEVICE;
  }
  if (index < 0 || index >= NRT_STREAMS_PER_DEVICE || !out_stream) {
    nrt_set_error_message("nrt_stream_get: stream index %d out of range 0..%d", index,
                          NRT_STREAMS_PER_DEVICE - 1);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  *out_stream = nrt_stream_at(device, index);
  return NRT_SUCCESS;
}

nrt_status nrt_stream_get_default(int device, nrt_stream **out_stream) {
  return nrt_stream_get(device, 0, out_stream);
}

nrt_status nrt_stream_lookup(const void *ptr, int *out_device, int *out_index) {
  if (!out_device || !out_index) return NRT_ERROR_INVALID_ARGUMENT;
  nrt_streams_ready();
  size_t n = (size_t)stream_table_devices * NRT_STREAMS_PER_DEVICE;
  uintptr_t p = (uintptr_t)ptr, base = (uintptr_t)stream_table;
  if (p < base || p >= base + n * sizeof(nrt_stream) || (p - base) % sizeof(nrt_stream) != 0) {
    nrt_set_error_message("nrt_stream_lookup: %p is not a neuron stream", ptr);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  size_t i = (p - base) / sizeof(nrt_stream);
  *out_device = (int)(i / NRT_STREAMS_PER_DEVICE);
  *out_index = (int)(i % NRT_STREAMS_PER_DEVICE);
  return NRT_SUCCESS;
}

nrt_status nrt_stream_acquire(int device, nrt_stream **out_stream) {
  nrt_streams_ready();
  if (!nrt_device_valid(device)) {
    nrt_set_error_message("nrt_stream_acquire: invalid device %d", device);
    return NRT_ERROR_INVALID_DEVICE;
  }
  if (!out_stream) return NRT_ERROR_INVALID_ARGUMENT;
  unsigned n = atomic_fetch_add_explicit(&acquire_next[device], 1u, memory_order_relaxed);
  *out_stream = nrt_stream_at(device, 1 + (int)(n % (NRT_STREAMS_PER_DEVICE - 1)));
  return NRT_SUCCESS;
}

int nrt_stream_device(const nrt_stream *stream) { return stream ? stream->device : -1; }
int nrt_stream_index(const nrt_stream *stream) { return stream ? stream->index : -1; }

uint64_t nrt_stream_enqueued(const nrt_stream *stream) {
  return atomic_load_explicit(&((nrt_stream *)stream)->enqueued, memory_order_acquire);
}

uint64_t nrt_stream_completed(const nrt_stream *stream) {
  /* Acquire pairs with the worker's release store: whoever sees a task as
   * completed also sees everything the task wrote. */
  return atomic_load_explicit(&((nrt_stream *)stream)->completed, memory_order_acquire);
}

/* ---- worker --------------------------------------------------------------- */

static void format_failure(const nrt_stream *s, const char *name, nrt_status st, char *buf,
                           size_t size) {
  const char *detail = nrt_last_error_message();
  snprintf(buf, size, "kernel %s failed on neuron:%d stream %d: %s%s%s", name, s->device,
           s->index, nrt_status_string(st), detail[0] ? ": " : "", detail);
}

/* Called with s->mu held. Returns a list of nodes to the free list, or
 * to the heap beyond the cache limit. */
static void recycle_tasks(nrt_stream *s, task *first) {
  while (first) {
    task *next = first->next;
    if (s->free_count < NRT_STREAM_MAX_CACHED_TASKS) {
      first->next = s->free_tasks;
      s->free_tasks = first;
      s->free_count++;
    } else {
      free(first);
    }
    first = next;
  }
}

/* Called with s->mu held. */
static void record_failure(nrt_stream *s, uint64_t ticket, nrt_status st, const char *msg) {
  if (atomic_load_explicit(&s->error, memory_order_relaxed) != NRT_SUCCESS) return;
  s->error_ticket = ticket;
  snprintf(s->error_msg, sizeof s->error_msg, "%s", msg);
  atomic_store_explicit(&s->error, st, memory_order_relaxed);
}

/* Publishes a finished task. seq_cst on both the store and the waiters
 * load pairs with the waiter's increment-then-check (see
 * wait_completed_locked): either the worker sees the waiter and wakes
 * it, or the waiter sees the new count and does not sleep. */
static void publish_completed(nrt_stream *s, uint64_t ticket, bool locked) {
  atomic_store_explicit(&s->completed, ticket, memory_order_seq_cst);
  if (atomic_load_explicit(&s->waiters, memory_order_seq_cst) > 0) {
    if (!locked) pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->done_cv);
    if (!locked) pthread_mutex_unlock(&s->mu);
  }
}

/* Only the worker advances `completed`, so a difference means queued work. */
static bool stream_has_work(const void *arg) {
  nrt_stream *s = (nrt_stream *)arg;
  return atomic_load_explicit(&s->enqueued, memory_order_relaxed) !=
             atomic_load_explicit(&s->completed, memory_order_relaxed) &&
         !atomic_load_explicit(&s->inline_busy, memory_order_relaxed);
}

/* The worker takes the whole queue at once and runs it without the lock,
 * so producers and the worker meet on the mutex once per batch rather
 * than once per task. */
static void *worker_main(void *arg) {
  nrt_stream *s = arg;
  char msg[NRT_ERROR_MESSAGE_MAX];
  nrt_set_device(s->device); /* kernels asking for the current device get theirs */
  tls_running_stream = s;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->head || s->inline_busy) {
      if (s->head) {
        /* A caller thread runs a task of this stream (inline_busy); what
         * is queued after it must wait for it. */
        atomic_fetch_add_explicit(&s->waiters, 1, memory_order_seq_cst);
        pthread_cond_wait(&s->done_cv, &s->mu);
        atomic_fetch_sub_explicit(&s->waiters, 1, memory_order_relaxed);
        continue;
      }
      pthread_mutex_unlock(&s->mu);
      nrt_spin_until(stream_has_work, s, NRT_STREAM_SPIN_NS);
      pthread_mutex_lock(&s->mu);
      if (s->head || s->inline_busy) continue;
      s->worker_idle = true;
      pthread_cond_wait(&s->work_cv, &s->mu);
      s->worker_idle = false;
    }
    task *batch = s->head;
    s->head = s->tail = NULL;
    pthread_mutex_unlock(&s->mu);
    /* Busy time for torch.neuron.utilization(): two clock reads per batch,
     * not per task, so the per-op path stays cheap. */
    uint64_t batch_start = now_ns();

    for (task *t = batch; t; t = t->next) {
      bool skip = atomic_load_explicit(&s->error, memory_order_relaxed) != NRT_SUCCESS &&
                  !(t->flags & NRT_TASK_ALWAYS_RUN);
      nrt_status st = NRT_SUCCESS;
      uint64_t start = t->profiled ? now_ns() : 0;
      if (!skip) {
        nrt_clear_error_message();
        st = t->run(t->arg);
      }
      if (t->profiled) profile_stamp(s, t, start, now_ns(), skip || st != NRT_SUCCESS);
      if (st != NRT_SUCCESS) format_failure(s, t->name, st, msg, sizeof msg);
      if (t->release) t->release(t->arg);
      if (st != NRT_SUCCESS) {
        pthread_mutex_lock(&s->mu);
        record_failure(s, t->ticket, st, msg);
        pthread_mutex_unlock(&s->mu);
      }
      /* Counted before the batch's last completion is published, so a
       * caller that synchronised sees this batch's busy time. */
      if (!t->next)
        atomic_fetch_add_explicit(&busy_ns[s->device], now_ns() - batch_start, memory_order_relaxed);
      publish_completed(s, t->ticket, false);
    }

    pthread_mutex_lock(&s->mu);
    recycle_tasks(s, batch);
  }
  return NULL;
}

/* Called with s->mu held. */
static nrt_status start_worker(nrt_stream *s) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  /* Workers block every signal so that asynchronous signals (SIGINT for
   * Python's KeyboardInterrupt) are delivered to application threads. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  pthread_t thread;
  int rc = pthread_create(&thread, &attr, worker_main, s);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    nrt_set_error_message("neuron:%d stream %d: cannot start its worker thread: %s", s->device,
                          s->index, strerror(rc));
    return NRT_ERROR_INTERNAL;
  }
  char name[16];
  snprintf(name, sizeof name, "nrt-d%d-s%d", s->device, s->index);
  pthread_setname_np(thread, name);
  s->started = true;
  return NRT_SUCCESS;
}

typedef struct completion_target {
  nrt_stream *stream;
  uint64_t target;
} completion_target;

static bool target_reached(const void *arg) {
  const completion_target *c = arg;
  return atomic_load_explicit(&c->stream->completed, memory_order_acquire) >= c->target;
}

/* Called without the lock, before a blocking wait. */
static void spin_for_completion(nrt_stream *s, uint64_t target) {
  completion_target c = {s, target};
  if (!target_reached(&c)) nrt_spin_until(target_reached, &c, NRT_SYNC_SPIN_NS);
}

/* Called with s->mu held: waits until completed >= target. */
static void wait_completed_locked(nrt_stream *s, uint64_t target) {
  if (atomic_load_explicit(&s->completed, memory_order_acquire) >= target) return;
  atomic_fetch_add_explicit(&s->waiters, 1, memory_order_seq_cst);
  while (atomic_load_explicit(&s->completed, memory_order_seq_cst) < target)
    pthread_cond_wait(&s->done_cv, &s->mu);
  atomic_fetch_sub_explicit(&s->waiters, 1, memory_order_relaxed);
}

/* Runs a task on the calling thread, called with s->mu held once nothing
 * earlier of the stream is pending or running (and releases it): the task
 * takes a ticket while inline_busy holds the worker back, so events and
 * the allocator see the counters of asynchronous mode. `skip`: the stream
 * holds an error and the task is not run. `sticky`: a failure becomes the
 * stream's error, as if the worker had run it; otherwise it is returned
 * with its message in `msg`. */
static nrt_status run_here_locked(nrt_stream *s, const char *name, nrt_task_fn run, void *arg,
                                  nrt_release_fn release, const nrt_task_cost *cost, bool skip, bool sticky,
                                  uint64_t *out_ticket, char msg[NRT_ERROR_MESSAGE_MAX]) {
  s->inline_busy = true;
  uint64_t ticket = atomic_load_explicit(&s->enqueued, memory_order_relaxed) + 1;
  atomic_store_explicit(&s->enqueued, ticket, memory_order_release);
  pthread_mutex_unlock(&s->mu);
  if (out_ticket) *out_ticket = ticket;
  task t = {.name = name, .ticket = ticket};
  profile_mark(&t, cost);

  nrt_status st = NRT_SUCCESS;
  uint64_t start = now_ns();
  if (!skip) {
    nrt_stream *outer = tls_running_stream;
    uint64_t outer_ticket = tls_running_ticket;
    tls_running_stream = s;
    tls_running_ticket = ticket;
    nrt_clear_error_message();
    st = run(arg);
    if (st != NRT_SUCCESS) format_failure(s, name, st, msg, NRT_ERROR_MESSAGE_MAX);
    tls_running_stream = outer;
    tls_running_ticket = outer_ticket;
  }
  uint64_t end = now_ns();
  atomic_fetch_add_explicit(&busy_ns[s->device], end - start, memory_order_relaxed);
  if (t.profiled) profile_stamp(s, &t, start, end, skip || st != NRT_SUCCESS);
  if (release) release(arg);

  pthread_mutex_lock(&s->mu);
  if (sticky && st != NRT_SUCCESS) record_failure(s, ticket, st, msg);
  s->inline_busy = false;
  /* Wakes synchronisers and a worker holding queued work back for this
   * task (both wait on done_cv as waiters). */
  publish_completed(s, ticket, true);
  pthread_mutex_unlock(&s->mu);
  return st;
}

/* NRT_TASK_RUN_IF_IDLE on an idle stream, called with s->mu held: the
 * task runs here and its failure is reported at the next synchronisation. */
static nrt_status run_idle_locked(nrt_stream *s, const char *name, nrt_task_fn run, void *arg,
                                  nrt_release_fn release, const nrt_task_cost *cost, uint64_t *out_ticket) {
  char msg[NRT_ERROR_MESSAGE_MAX];
  run_here_locked(s, name, run, arg, release, cost, false, true, out_ticket, msg);
  nrt_clear_error_message();
  return NRT_SUCCESS;
}

/* NEURON_LAUNCH_BLOCKING: the task runs on the calling thread once all
 * earlier work of the stream has finished, and its failure is returned
 * here instead of becoming sticky. */
static nrt_status run_inline(nrt_stream *s, const char *name, nrt_task_fn run, void *arg,
                             nrt_release_fn release, unsigned flags, const nrt_task_cost *cost,
                             uint64_t *out_ticket) {
  char msg[NRT_ERROR_MESSAGE_MAX];
  if (tls_running_stream == s) {
    /* Enqueued by the task running inline on this stream: it runs now, as
     * part of that task (waiting for the stream would wait for itself). */
    if (out_ticket) *out_ticket = tls_running_ticket;
    nrt_status st = run(arg);
    if (st != NRT_SUCCESS) format_failure(s, name, st, msg, sizeof msg);
    if (release) release(arg);
    if (st != NRT_SUCCESS) nrt_set_error_message("%s", msg);
    return st;
  }
  pthread_mutex_lock(&s->mu);
  for (;;) {
    uint64_t pending = atomic_load_explicit(&s->enqueued, memory_order_relaxed);
    wait_completed_locked(s, pending);
    if (!s->inline_busy) break;
    atomic_fetch_add_explicit(&s->waiters, 1, memory_order_seq_cst);
    pthread_cond_wait(&s->done_cv, &s->mu);
    atomic_fetch_sub_explicit(&s->waiters, 1, memory_order_relaxed);
  }
  bool skip = atomic_load_explicit(&s->error, memory_order_relaxed) != NRT_SUCCESS &&
              !(flags & NRT_TASK_ALWAYS_RUN);
  nrt_status st = run_here_locked(s, name, run, arg, release, cost, skip, false, out_ticket, msg);
  if (st != NRT_SUCCESS) nrt_set_error_message("%s", msg);
  return st;
}

nrt_status nrt_stream_enqueue_ex(nrt_stream *s, const char *name, nrt_task_fn run, void *arg,
                                 size_t copy_size, nrt_release_fn release, unsigned flags,
                                 const nrt_task_cost *cost, uint64_t *out_ticket) {
  if (!s || !run) {
    nrt_set_error_message("nrt_stream_enqueue: %s is NULL", s ? "the task function" : "stream");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  if (copy_size > NRT_TASK_INLINE_MAX) {
    nrt_set_error_message("nrt_stream_enqueue: inline argument of %zu bytes exceeds %zu",
                          copy_size, (size_t)NRT_TASK_INLINE_MAX);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  if (!name) name = "host task";
  /* The caller's argument outlives an inline run, so no copy is needed. */
  if (nrt_launch_blocking()) return run_inline(s, name, run, arg, release, flags, cost, out_ticket);

  pthread_mutex_lock(&s->mu);
  if ((flags & NRT_TASK_RUN_IF_IDLE) && !s->head && !s->inline_busy && tls_running_stream != s &&
      atomic_load_explicit(&s->completed, memory_order_relaxed) ==
          atomic_load_explicit(&s->enqueued, memory_order_relaxed) &&
      atomic_load_explicit(&s->error, memory_order_relaxed) == NRT_SUCCESS)
    return run_idle_locked(s, name, run, arg, release, cost, out_ticket);
  if (!s->started) {
    nrt_status st = start_worker(s);
    if (st != NRT_SUCCESS) {
      pthread_mutex_unlock(&s->mu);
      return st;
    }
  }
  /* A task enqueuing on its own stream must not wait for room: only its
   * own worker could make it. */
  uint64_t enq = atomic_load_explicit(&s->enqueued, memory_order_relaxed);
  if (enq >= NRT_STREAM_MAX_PENDING && tls_running_stream != s)
    wait_completed_locked(s, enq - NRT_STREAM_MAX_PENDING + 1);
  task *t = s->free_tasks;
  if (t) {
    s->free_tasks = t->next;
    s->free_count--;
  } else {
    t = malloc(sizeof *t);
    if (!t) {
      pthread_mutex_unlock(&s->mu);
      nrt_set_error_message("nrt_stream_enqueue: host out of memory for a task");
      return NRT_ERROR_OUT_OF_MEMORY;
    }
  }
  t->next = NULL;
  t->name = name;
  t->run = run;
  t->release = release;
  t->flags = flags;
  profile_mark(t, cost);
  if (copy_size > 0) {
    memcpy(t->inline_arg, arg, copy_size);
    t->arg = t->inline_arg;
  } else {
    t->arg = arg;
  }
  uint64_t ticket = atomic_load_explicit(&s->enqueued, memory_order_relaxed) + 1;
  t->ticket = ticket;
  atomic_store_explicit(&s->enqueued, ticket, memory_order_release);
  if (s->tail)
    s->tail->next = t;
  else
    s->head = t;
  s->tail = t;
  bool wake = s->worker_idle;
  pthread_mutex_unlock(&s->mu);
  /* Signalling after unlock saves the worker from waking into a held lock;
   * worker_idle was read under the lock, so no wake-up is lost. */
  if (wake) pthread_cond_signal(&s->work_cv);
  if (out_ticket) *out_ticket = ticket;
  return NRT_SUCCESS;
}

nrt_status nrt_stream_enqueue(nrt_stream *stream, const char *name, nrt_task_fn run, void *arg,
                              nrt_release_fn release) {
  return nrt_stream_enqueue_ex(stream, name, run, arg, 0, release, 0, NULL, NULL);
}

typedef struct host_func_arg {
  void (*fn)(void *);
  void *arg;
} host_func_arg;

static nrt_status run_host_func(void *p) {
  host_func_arg *h = p;
  h->fn(h->arg);
  return NRT_SUCCESS;
}

nrt_status nrt_stream_launch_host_func(nrt_stream *stream, void (*fn)(void *), void *arg) {
  if (!fn) {
    nrt_set_error_message("nrt_stream_launch_host_func: fn is NULL");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  host_func_arg h = {fn, arg};
  return nrt_stream_enqueue_ex(stream, "host_func", run_host_func, &h, sizeof h, NULL, 0, NULL,
                               NULL);
}

/* ---- waiting ------------------------------------------------------------- */

/* A task waiting for later work of its own stream would wait forever. */
static nrt_status check_not_self_wait(nrt_stream *s, uint64_t target, const char *fn) {
  if (tls_running_stream != s || nrt_stream_completed(s) >= target) return NRT_SUCCESS;
  nrt_set_error_message("%s: a task of neuron:%d stream %d cannot wait for its own stream", fn,
                        s->device, s->index);
  return NRT_ERROR_INVALID_ARGUMENT;
}

/* Called with s->mu held. Hands the sticky error to the caller's thread. */
static nrt_status take_error_locked(nrt_stream *s) {
  nrt_status st = atomic_load_explicit(&s->error, memory_order_relaxed);
  if (st != NRT_SUCCESS) {
    nrt_set_error_message("%s", s->error_msg);
    atomic_store_explicit(&s->error, NRT_SUCCESS, memory_order_relaxed);
    s->error_msg[0] = '\0';
  }
  return st;
}

nrt_status nrt_stream_wait_until(nrt_stream *stream, uint64_t target) {
  if (!stream) {
    nrt_set_error_message("nrt_stream_wait_until: stream is NULL");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  uint64_t enqueued = nrt_stream_enqueued(stream); /* monotonic: no lock needed */
  if (target > enqueued) {
    nrt_set_error_message("nrt_stream_wait_until: target %llu is beyond the %llu tasks enqueued",
                          (unsigned long long)target, (unsigned long long)enqueued);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  nrt_status st = check_not_self_wait(stream, target, "nrt_stream_wait_until");
  if (st != NRT_SUCCESS) return st;
  spin_for_completion(stream, target);
  pthread_mutex_lock(&stream->mu);
  wait_completed_locked(stream, target);
  st = take_error_locked(stream);
  pthread_mutex_unlock(&stream->mu);
  /* A graph capture cannot record a host wait: the wait happened (the
   * caller sees consistent memory), but the capture fails. */
  if (st == NRT_SUCCESS && nrt_capture_active(stream->device))
    st = nrt_capture_notify_sync(stream, "nrt_stream_wait_until");
  return st;
}

nrt_status nrt_stream_synchronize(nrt_stream *stream) {
  if (!stream) {
    nrt_set_error_message("nrt_stream_synchronize: stream is NULL");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  /* Work enqueued by other threads after this point is not waited for. */
  uint64_t target = nrt_stream_enqueued(stream);
  nrt_status st = check_not_self_wait(stream, target, "nrt_stream_synchronize");
  if (st != NRT_SUCCESS) return st;
  spin_for_completion(stream, target);
  pthread_mutex_lock(&stream->mu);
  wait_completed_locked(stream, target);
  st = take_error_locked(stream);
  pthread_mutex_unlock(&stream->mu);
  if (st == NRT_SUCCESS && nrt_capture_active(stream->device))
    st = nrt_capture_notify_sync(stream, "nrt_stream_synchronize");
  return st;
}

nrt_status nrt_stream_query(nrt_stream *stream) {
  if (!stream) return NRT_ERROR_INVALID_ARGUMENT;
  uint64_t enq = nrt_stream_enqueued(stream);
  return nrt_stream_completed(stream) >= enq ? NRT_SUCCESS : NRT_ERROR_NOT_READY;
}

void nrt_stream_wait_quiet(nrt_stream *stream, uint64_t target) {
  if (nrt_stream_completed(stream) >= target) return;
  if (tls_running_stream == stream) return; /* cannot wait for itself; see above */
  spin_for_completion(stream, target);
  pthread_mutex_lock(&stream->mu);
  wait_completed_locked(stream, target);
  pthread_mutex_unlock(&stream->mu);
}

nrt_status nrt_stream_peek_error(nrt_stream *stream, uint64_t max_ticket, char *msg,
                                 size_t msg_size) {
  pthread_mutex_lock(&stream->mu);
  nrt_status st = NRT_SUCCESS;
  nrt_status err = atomic_load_explicit(&stream->error, memory_order_relaxed);
  if (err != NRT_SUCCESS && stream->error_ticket <= max_ticket) {
    st = err;
    if (msg && msg_size) snprintf(msg, msg_size, "%s", stream->error_msg);
  }
  pthread_mutex_unlock(&stream->mu);
  return st;
}

nrt_status nrt_device_busy_time(int device, uint64_t *out_busy_ns, uint64_t *out_now_ns) {
  if (!nrt_device_valid(device)) return nrt_invalid_device("nrt_device_busy_time", device);
  if (!out_busy_ns || !out_now_ns) return NRT_ERROR_INVALID_ARGUMENT;
  *out_busy_ns = atomic_load_explicit(&busy_ns[device], memory_order_relaxed);
  *out_now_ns = now_ns();
  return NRT_SUCCESS;
}

nrt_status nrt_device_synchronize(int device) {
  if (!nrt_device_valid(device)) return nrt_invalid_device("nrt_device_synchronize", device);
  nrt_streams_ready();
  /* Report one error per call (the lowest stream index); the others stay
   * sticky on their streams and surface at the next synchronising call
   * rather than being lost. */
  nrt_status first = NRT_SUCCESS;
  for (int i = 0; i < NRT_STREAMS_PER_DEVICE; i++) {
    nrt_stream *s = nrt_stream_at(device, i);
    if (first == NRT_SUCCESS)
      first = nrt_stream_synchronize(s); /* sets this thread's message on error */
    else
      nrt_stream_wait_quiet(s, nrt_stream_enqueued(s));
  }
  return first;
}

void nrt_device_wait_idle(int device) {
  nrt_streams_ready();
  for (int i = 0; i < NRT_STREAMS_PER_DEVICE; i++) {
    nrt_stream *s = nrt_stream_at(device, i);
    nrt_stream_wait_quiet(s, nrt_stream_enqueued(s));
  }
}

/* ---- fork ------------------------------------------------------------------ */

static size_t stream_count(void) { return (size_t)stream_table_devices * NRT_STREAMS_PER_DEVICE; }

static void streams_atfork_prepare(void) {
  for (size_t i = 0; i < stream_count(); i++) pthread_mutex_lock(&stream_table[i].mu);
}

static void streams_atfork_parent(void) {
  for (size_t i = stream_count(); i-- > 0;) pthread_mutex_unlock(&stream_table[i].mu);
}

static void streams_atfork_child(void) {
  for (size_t i = 0; i < stream_count(); i++) {
    nrt_stream *s = &stream_table[i];
    /* Waiters of the parent do not exist here, so the condition variables
     * are re-created rather than destroyed (destroy would wait for them). */
    stream_init_sync(s);
    task *t = s->head;
    while (t) {
      task *next = t->next;
      free(t);
      t = next;
    }
    s->head = s->tail = NULL;
    atomic_store_explicit(&s->waiters, 0, memory_order_relaxed);
    s->started = false;
    s->worker_idle = false;
    s->inline_busy = false;
    atomic_store_explicit(&s->completed, atomic_load_explicit(&s->enqueued, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&s->error, NRT_SUCCESS, memory_order_relaxed);
    s->error_msg[0] = '\0';
  }
}
