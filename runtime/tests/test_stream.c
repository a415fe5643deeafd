/* Streams: ordering, counters, sticky errors and skipping, queries while a
 * task blocks, concurrent producers, back-pressure, host functions, the
 * stream pool, and a forked child using streams. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "exec/exec.h"
#include "memory/memory.h"
#include "testing.h"

typedef struct log_entry {
  int *log;
  atomic_int *len;
  int value;
} log_entry;

static nrt_status append_task(void *arg) {
  log_entry *e = arg;
  e->log[atomic_fetch_add(e->len, 1)] = e->value;
  return NRT_SUCCESS;
}

static void test_order_and_counters(void) {
  enum { N = 1000 };
  nrt_stream *s;
  CHECK_OK(nrt_stream_get(0, 2, &s));
  CHECK(nrt_stream_device(s) == 0 && nrt_stream_index(s) == 2);
  uint64_t base = nrt_stream_enqueued(s);
  CHECK(nrt_stream_completed(s) == base);
  static int log[N];
  static log_entry entries[N];
  atomic_int len = 0;
  for (int i = 0; i < N; i++) {
    entries[i] = (log_entry){log, &len, i};
    CHECK_OK(nrt_stream_enqueue(s, "append", append_task, &entries[i], NULL));
  }
  CHECK(nrt_stream_enqueued(s) == base + N);
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(nrt_stream_completed(s) == base + N);
  CHECK(atomic_load(&len) == N);
  int in_order = 1;
  for (int i = 0; i < N; i++) in_order &= log[i] == i;
  CHECK(in_order);
  CHECK_OK(nrt_stream_query(s));
}

static atomic_int release_count;
static atomic_int run_count;

static void count_release(void *arg) {
  (void)arg;
  atomic_fetch_add(&release_count, 1);
}

static nrt_status count_run(void *arg) {
  (void)arg;
  atomic_fetch_add(&run_count, 1);
  return NRT_SUCCESS;
}

static nrt_status fail_run(void *arg) {
  (void)arg;
  nrt_set_error_message("operand 2 misaligned");
  return NRT_ERROR_KERNEL_FAILED;
}

static void test_sticky_error(void) {
  nrt_stream *s;
  CHECK_OK(nrt_stream_get(0, 3, &s));
  atomic_store(&release_count, 0);
  atomic_store(&run_count, 0);
  uint64_t base = nrt_stream_enqueued(s);
  CHECK_OK(nrt_stream_enqueue(s, "before", count_run, NULL, count_release));
  CHECK_OK(nrt_stream_enqueue(s, "my_kernel", fail_run, NULL, count_release));
  for (int i = 0; i < 10; i++)
    CHECK_OK(nrt_stream_enqueue(s, "after", count_run, NULL, count_release));
  nrt_stream_wait_quiet(s, base + 12);
  /* Later tasks were skipped but released and counted as completed. */
  CHECK(atomic_load(&run_count) == 1);
  CHECK(atomic_load(&release_count) == 12);
  CHECK(nrt_stream_completed(s) == base + 12);
  CHECK_OK(nrt_stream_query(s)); /* idle, even with an error pending */
  nrt_set_error_message("stale");
  CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_KERNEL_FAILED);
  CHECK(strcmp(nrt_last_error_message(),
               "kernel my_kernel failed on neuron:0 stream 3: kernel failed: operand 2 "
               "misaligned") == 0);
  /* Cleared: the stream works again. */
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK_OK(nrt_stream_enqueue(s, "again", count_run, NULL, NULL));
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(atomic_load(&run_count) == 2);
}

static nrt_status unsupported_run(void *arg) {
  (void)arg;
  return NRT_ERROR_UNSUPPORTED;
}

static nrt_status leave_message_run(void *arg) {
  (void)arg;
  nrt_set_error_message("left over by a successful task");
  return NRT_SUCCESS;
}

static void test_error_without_detail(void) {
  /* A failure without detail has no trailing ": ", and the message of an
   * earlier task on the same worker does not leak into it. */
  nrt_stream *s;
  CHECK_OK(nrt_stream_get(0, 4, &s));
  CHECK_OK(nrt_stream_enqueue(s, "leaky", leave_message_run, NULL, NULL));
  CHECK_OK(nrt_stream_enqueue(s, "ADD", unsupported_run, NULL, NULL));
  CHECK_STATUS(nrt_stream_wait_until(s, nrt_stream_enqueued(s)), NRT_ERROR_UNSUPPORTED);
  CHECK(strcmp(nrt_last_error_message(),
               "kernel ADD failed on neuron:0 stream 4: operation not supported") == 0);
  CHECK_OK(nrt_stream_wait_until(s, nrt_stream_enqueued(s))); /* cleared */
}

static void test_query_while_blocked(void) {
  nrt_stream *s;
  CHECK_OK(nrt_stream_get(0, 5, &s));
  nrt_test_gate g;
  nrt_test_gate_close(s, &g, "gate");
  CHECK_OK(nrt_stream_enqueue(s, "count", count_run, NULL, NULL));
  while (!atomic_load(&g.entered)) nrt_test_sleep_ms(1);
  CHECK_STATUS(nrt_stream_query(s), NRT_ERROR_NOT_READY);
  nrt_test_sleep_ms(10);
  CHECK_STATUS(nrt_stream_query(s), NRT_ERROR_NOT_READY);
  CHECK(nrt_stream_completed(s) + 2 == nrt_stream_enqueued(s));
  nrt_test_gate_open(&g);
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK_OK(nrt_stream_query(s));
}

typedef struct producer {
  nrt_stream *stream;
  int id;
  int count;
  int last_seen;  /* written by tasks, in order */
  atomic_int out_of_order;
} producer;

typedef struct seq_arg {
  producer *p;
  int seq;
} seq_arg;

static nrt_status seq_task(void *arg) {
  seq_arg *a = arg;
  if (a->seq != a->p->last_seen + 1) atomic_fetch_add(&a->p->out_of_order, 1);
  a->p->last_seen = a->seq;
  atomic_fetch_add(&run_count, 1);
  return NRT_SUCCESS;
}

static void free_arg(void *arg) { free(arg); }

static void *producer_main(void *arg) {
  producer *p = arg;
  for (int i = 0; i < p->count; i++) {
    seq_arg *a = malloc(sizeof *a);
    a->p = p;
    a->seq = i;
    if (nrt_stream_enqueue(p->stream, "seq", seq_task, a, free_arg) != NRT_SUCCESS)
      atomic_fetch_add(&p->out_of_order, 1000);
  }
  return NULL;
}

static void test_concurrent_producers(void) {
  enum { THREADS = 4, PER_THREAD = 3000 };
  nrt_stream *s;
  CHECK_OK(nrt_stream_get(0, 6, &s));
  atomic_store(&run_count, 0);
  uint64_t base = nrt_stream_enqueued(s);
  producer p[THREADS];
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) {
    p[i] = (producer){.stream = s, .id = i, .count = PER_THREAD, .last_seen = -1};
    atomic_init(&p[i].out_of_order, 0);
    pthread_create(&t[i], NULL, producer_main, &p[i]);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(atomic_load(&run_count) == THREADS * PER_THREAD);
  CHECK(nrt_stream_completed(s) == base + THREADS * PER_THREAD);
  for (int i = 0; i < THREADS; i++) {
    CHECK(atomic_load(&p[i].out_of_order) == 0);
    CHECK(p[i].last_seen == PER_THREAD - 1);
  }
}

static void *open_gate_later(void *arg) {
  nrt_test_sleep_ms(50);
  nrt_test_gate_open(arg);
  return NULL;
}

static void test_backpressure(void) {
  /* Far more tasks than the queue holds, behind a task that blocks for a
   * while: the producer waits for room instead of failing or deadlocking. */
  enum { N = 5000 };
  nrt_stream *s;
  CHECK_OK(nrt_stream_get(0, 7, &s));
  atomic_store(&run_count, 0);
  nrt_test_gate g;
  nrt_test_gate_close(s, &g, "gate");
  pthread_t opener;
  pthread_create(&opener, NULL, open_gate_later, &g);
  for (int i = 0; i < N; i++) CHECK_OK(nrt_stream_enqueue(s, "count", count_run, NULL, NULL));
  CHECK_OK(nrt_stream_synchronize(s));
  pthread_join(opener, NULL);
  CHECK(atomic_load(&run_count) == N);
}

static void host_fn(void *arg) { atomic_fetch_add((atomic_int *)arg, 5); }

static void test_host_func(void) {
  nrt_stream *s;
  CHECK_OK(nrt_stream_get_default(0, &s));
  CHECK(nrt_stream_index(s) == 0);
  atomic_int v = 0;
  CHECK_OK(nrt_stream_launch_host_func(s, host_fn, &v));
  CHECK_OK(nrt_stream_launch_host_func(s, host_fn, &v));
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(atomic_load(&v) == 10);
  CHECK_STATUS(nrt_stream_launch_host_func(s, NULL, NULL), NRT_ERROR_INVALID_ARGUMENT);
}

static void test_stream_pool(void) {
  int seen[NRT_STREAMS_PER_DEVICE] = {0};
  nrt_stream *first = NULL;
  for (int i = 0; i < NRT_STREAMS_PER_DEVICE - 1; i++) {
    nrt_stream *s;
    CHECK_OK(nrt_stream_acquire(1, &s));
    if (i == 0) first = s;
    CHECK(nrt_stream_device(s) == 1);
    int idx = nrt_stream_index(s);
    CHECK(idx >= 1 && idx < NRT_STREAMS_PER_DEVICE);
    if (idx >= 0 && idx < NRT_STREAMS_PER_DEVICE) seen[idx]++;
  }
  CHECK(seen[0] == 0);
  for (int i = 1; i < NRT_STREAMS_PER_DEVICE; i++) CHECK(seen[i] == 1);
  nrt_stream *again;
  CHECK_OK(nrt_stream_acquire(1, &again));
  CHECK(again == first); /* round-robin wraps */
  nrt_stream *same;
  CHECK_OK(nrt_stream_get(1, nrt_stream_index(first), &same));
  CHECK(same == first);
}

static void test_invalid_arguments(void) {
  nrt_stream *s;
  CHECK_STATUS(nrt_stream_get(0, -1, &s), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_stream_get(0, NRT_STREAMS_PER_DEVICE, &s), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_stream_get(-1, 0, &s), NRT_ERROR_INVALID_DEVICE);
  CHECK_STATUS(nrt_stream_get(64, 0, &s), NRT_ERROR_INVALID_DEVICE);
  CHECK_STATUS(nrt_stream_get(0, 0, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_stream_acquire(0, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_stream_get(0, 8, &s));
  CHECK_STATUS(nrt_stream_enqueue(NULL, "x", count_run, NULL, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_stream_enqueue(s, "x", NULL, NULL, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_stream_synchronize(NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_stream_query(NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_stream_wait_until(s, nrt_stream_enqueued(s) + 1), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_stream_device(NULL) == -1 && nrt_stream_index(NULL) == -1);
  /* A stream never used is idle and synchronises at once. */
  CHECK_OK(nrt_stream_get(0, 30, &s));
  CHECK_OK(nrt_stream_query(s));
  CHECK_OK(nrt_stream_synchronize(s));
}

static void test_wait_until(void) {
  nrt_stream *s;
  CHECK_OK(nrt_stream_get(0, 9, &s));
  nrt_test_gate g1 = {0, 0}, g2 = {0, 0};
  uint64_t base = nrt_stream_enqueued(s);
  CHECK_OK(nrt_stream_enqueue(s, "g1", nrt_test_gate_task, &g1, NULL));
  CHECK_OK(nrt_stream_enqueue(s, "g2", nrt_test_gate_task, &g2, NULL));
  nrt_test_gate_open(&g1);
  CHECK_OK(nrt_stream_wait_until(s, base + 1)); /* returns while g2 still blocks */
  CHECK(nrt_stream_completed(s) == base + 1);
  CHECK_STATUS(nrt_stream_query(s), NRT_ERROR_NOT_READY);
  nrt_test_gate_open(&g2);
  CHECK_OK(nrt_stream_wait_until(s, base + 2));
}

/* Streams of different devices and indices run concurrently. */
static void test_streams_independent(void) {
  nrt_stream *a, *b;
  CHECK_OK(nrt_stream_get(0, 10, &a));
  CHECK_OK(nrt_stream_get(1, 10, &b));
  nrt_test_gate g;
  nrt_test_gate_close(a, &g, "gate");
  atomic_store(&run_count, 0);
  CHECK_OK(nrt_stream_enqueue(b, "count", count_run, NULL, NULL));
  CHECK_OK(nrt_stream_synchronize(b)); /* not blocked by a */
  CHECK(atomic_load(&run_count) == 1);
  CHECK_STATUS(nrt_stream_query(a), NRT_ERROR_NOT_READY);
  nrt_test_gate_open(&g);
  CHECK_OK(nrt_stream_synchronize(a));
}

typedef struct self_ctx {
  nrt_stream *stream;
  int enqueue_failures;
  nrt_status sync_status;
} self_ctx;

static nrt_status self_enqueue_task(void *arg) {
  /* More than the queue holds: must not wait for room (only this worker
   * could make it), and waiting for its own stream must fail, not hang. */
  self_ctx *c = arg;
  for (int i = 0; i < 3000; i++)
    if (nrt_stream_enqueue(c->stream, "child", count_run, NULL, NULL) != NRT_SUCCESS)
      c->enqueue_failures++;
  c->sync_status = nrt_stream_synchronize(c->stream);
  nrt_stream_wait_quiet(c->stream, nrt_stream_enqueued(c->stream)); /* returns at once */
  return NRT_SUCCESS;
}

static void test_task_uses_own_stream(void) {
  nrt_stream *s;
  CHECK_OK(nrt_stream_get(0, 12, &s));
  atomic_store(&run_count, 0);
  self_ctx c = {s, 0, NRT_SUCCESS};
  CHECK_OK(nrt_stream_enqueue(s, "parent", self_enqueue_task, &c, NULL));
  CHECK_OK(nrt_stream_synchronize(s)); /* the parent; its children may not be enqueued yet */
  CHECK_OK(nrt_stream_synchronize(s)); /* now they all are */
  CHECK(c.enqueue_failures == 0);
  CHECK(c.sync_status == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(atomic_load(&run_count) == 3000);
}

static void test_fork_child_uses_streams(void) {
  /* The parent has a started worker with a blocked task when it forks.
   * The child must neither run nor wait for it. */
  nrt_stream *s;
  CHECK_OK(nrt_stream_get(0, 11, &s));
  nrt_test_gate g;
  nrt_test_gate_close(s, &g, "gate");
  while (!atomic_load(&g.entered)) nrt_test_sleep_ms(1);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(20); /* a hang shows as a failure, not a stuck test */
    atomic_store(&run_count, 0);
    int bad = 0;
    bad |= nrt_stream_query(s) != NRT_SUCCESS;
    bad |= nrt_stream_completed(s) != nrt_stream_enqueued(s);
    for (int i = 0; i < 100; i++) bad |= nrt_stream_enqueue(s, "c", count_run, NULL, NULL) != 0;
    bad |= nrt_stream_synchronize(s) != NRT_SUCCESS;
    bad |= atomic_load(&run_count) != 100;
    bad |= nrt_device_synchronize(0) != NRT_SUCCESS;
    _exit(bad ? 1 : 0);
  }
  CHECK(pid > 0);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  nrt_test_gate_open(&g);
  CHECK_OK(nrt_stream_synchronize(s));
}

/* NRT_TASK_RUN_IF_IDLE: on an idle stream the task runs on the caller's
 * thread, before the enqueue returns, with a ticket; its failure is sticky
 * (reported by the next synchronize, not by the enqueue); on a busy stream
 * it is queued behind the earlier work like any task. */
static pthread_t ran_on;
static nrt_status note_thread(void *arg) {
  (void)arg;
  ran_on = pthread_self();
  atomic_fetch_add(&run_count, 1);
  return NRT_SUCCESS;
}

static nrt_status block_until_released(void *arg) {
  while (!atomic_load((atomic_int *)arg)) nrt_test_sleep_ms(1);
  return NRT_SUCCESS;
}

static void test_run_if_idle(void) {
  nrt_stream *s;
  CHECK_OK(nrt_stream_get(0, 5, &s));
  CHECK_OK(nrt_stream_synchronize(s));
  atomic_store(&run_count, 0);
  atomic_store(&release_count, 0);
  uint64_t base = nrt_stream_enqueued(s), ticket = 0;
  CHECK_OK(nrt_stream_enqueue_ex(s, "small", note_thread, NULL, 0, count_release, NRT_TASK_RUN_IF_IDLE, NULL,
                                 &ticket));
  CHECK(atomic_load(&run_count) == 1 && pthread_equal(ran_on, pthread_self()));
  CHECK(atomic_load(&release_count) == 1);
  CHECK(ticket == base + 1 && nrt_stream_completed(s) == base + 1);

  /* A failure does not surface at the enqueue, but at the next sync. */
  CHECK_OK(nrt_stream_enqueue_ex(s, "small_kernel", fail_run, NULL, 0, NULL, NRT_TASK_RUN_IF_IDLE, NULL, NULL));
  CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_KERNEL_FAILED);
  CHECK(strstr(nrt_last_error_message(), "small_kernel") != NULL);
  CHECK(strstr(nrt_last_error_message(), "operand 2 misaligned") != NULL);
  CHECK_OK(nrt_stream_synchronize(s));

  /* Busy stream: queued behind the blocker, run by the worker. */
  atomic_int go = 0;
  CHECK_OK(nrt_stream_enqueue(s, "blocker", block_until_released, &go, NULL));
  atomic_store(&run_count, 0);
  CHECK_OK(nrt_stream_enqueue_ex(s, "small", note_thread, NULL, 0, NULL, NRT_TASK_RUN_IF_IDLE, NULL, NULL));
  CHECK(atomic_load(&run_count) == 0);
  atomic_store(&go, 1);
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(atomic_load(&run_count) == 1 && !pthread_equal(ran_on, pthread_self()));
}

int main(void) {
  unsetenv("NEURON_LAUNCH_BLOCKING");
  RUN_TEST(test_order_and_counters);
  RUN_TEST(test_sticky_error);
  RUN_TEST(test_error_without_detail);
  RUN_TEST(test_query_while_blocked);
  RUN_TEST(test_concurrent_producers);
  RUN_TEST(test_backpressure);
  RUN_TEST(test_host_func);
  RUN_TEST(test_stream_pool);
  RUN_TEST(test_invalid_arguments);
  RUN_TEST(test_wait_until);
  RUN_TEST(test_streams_independent);
  RUN_TEST(test_task_uses_own_stream);
  RUN_TEST(test_fork_child_uses_streams);
  RUN_TEST(test_run_if_idle);
  return TEST_RESULT();
}
