/* NEURON_LAUNCH_BLOCKING=1 (set in main before the runtime starts): every
 * enqueue runs its task before returning, on the calling thread, and a
 * failure comes back from the enqueue itself instead of being sticky. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "exec/exec.h"
#include "memory/memory.h"
#include "testing.h"

static nrt_status record_thread(void *arg) {
  *(pthread_t *)arg = pthread_self();
  return NRT_SUCCESS;
}

static nrt_status fail_task(void *arg) {
  nrt_set_error_message("%s", (const char *)arg);
  return NRT_ERROR_KERNEL_FAILED;
}

static atomic_int released;
static void count_release(void *arg) {
  (void)arg;
  atomic_fetch_add(&released, 1);
}

static void test_flag(void) { CHECK(nrt_launch_blocking() == 1); }

static void test_runs_before_return(void) {
  nrt_stream *s;
  CHECK_OK(nrt_stream_get(0, 1, &s));
  pthread_t ran_on;
  memset(&ran_on, 0, sizeof ran_on);
  uint64_t before = nrt_stream_enqueued(s);
  CHECK_OK(nrt_stream_enqueue(s, "who", record_thread, &ran_on, count_release));
  CHECK(pthread_equal(ran_on, pthread_self()));
  CHECK(atomic_load(&released) == 1);
  CHECK(nrt_stream_enqueued(s) == before + 1 && nrt_stream_completed(s) == before + 1);
  CHECK_OK(nrt_stream_query(s));
}

static void test_error_returned_directly(void) {
  nrt_stream *s;
  CHECK_OK(nrt_stream_get(0, 2, &s));
  CHECK_STATUS(nrt_stream_enqueue(s, "bad_kernel", fail_task, "index 7 out of range", NULL),
               NRT_ERROR_KERNEL_FAILED);
  CHECK(strcmp(nrt_last_error_message(),
               "kernel bad_kernel failed on neuron:0 stream 2: kernel failed: index 7 out of "
               "range") == 0);
  /* Not sticky: later work runs and synchronising reports nothing. */
  pthread_t ran_on;
  memset(&ran_on, 0, sizeof ran_on);
  CHECK_OK(nrt_stream_enqueue(s, "who", record_thread, &ran_on, NULL));
  CHECK(pthread_equal(ran_on, pthread_self()));
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK_OK(nrt_device_synchronize(0));
}

static void test_memcpy_and_events(void) {
  nrt_stream *s;
  CHECK_OK(nrt_stream_get_default(1, &s));
  char host[32] = "blocking copy", back[32] = {0};
  char *d = NULL;
  CHECK_OK(nrt_malloc(sizeof host, s, (void **)&d));
  CHECK_OK(nrt_memcpy_async(d, host, sizeof host, NRT_MEMCPY_HOST_TO_DEVICE, s));
  CHECK_OK(nrt_memcpy_async(back, d, sizeof back, NRT_MEMCPY_DEVICE_TO_HOST, s));
  CHECK(strcmp(back, "blocking copy") == 0); /* done before the call returned */
  nrt_event *a, *b;
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &a));
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &b));
  CHECK_OK(nrt_event_record(a, s));
  CHECK_OK(nrt_event_query(a));
  nrt_test_sleep_ms(20);
  CHECK_OK(nrt_event_record(b, s));
  float ms = 0;
  CHECK_OK(nrt_event_elapsed_time(a, b, &ms));
  CHECK(ms >= 19.0f);
  nrt_stream *other;
  CHECK_OK(nrt_stream_get(1, 4, &other));
  CHECK_OK(nrt_stream_wait_event(other, b));
  CHECK_OK(nrt_stream_synchronize(other));
  nrt_event_destroy(a);
  nrt_event_destroy(b);
  CHECK_OK(nrt_free(d));
}

static void test_launch_returns_kernel_status(void) {
  nrt_stream *s;
  CHECK_OK(nrt_stream_get(0, 3, &s));
  float out[3] = {0, 0, 0};
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP_FILL;
  l.ndim = 1;
  l.sizes[0] = 3;
  l.noutputs = 1;
  l.compute_dtype = NRT_FLOAT32;
  l.operands[0].data = out;
  l.operands[0].dtype = NRT_FLOAT32;
  l.operands[0].strides[0] = 4;
  l.scalars[0].f = 2.0;
  nrt_status st = nrt_launch_kernel(s, &l);
  if (st == NRT_SUCCESS) {
    CHECK(out[0] == 2.0f && out[2] == 2.0f); /* already written */
  } else {
    CHECK(st == NRT_ERROR_UNSUPPORTED); /* kernels not built yet */
    CHECK(strstr(nrt_last_error_message(), "kernel FILL failed") != NULL);
  }
  CHECK_OK(nrt_stream_synchronize(s));
}

typedef struct nested_ctx {
  nrt_stream *stream;
  int order[3];
  int n;
  nrt_status inner, sync;
} nested_ctx;

static void note_inner(void *arg) {
  nested_ctx *c = arg;
  c->order[c->n++] = 2;
}

static nrt_status outer_task(void *arg) {
  nested_ctx *c = arg;
  c->order[c->n++] = 1;
  /* Work a task enqueues on its own stream runs at once, as part of it. */
  c->inner = nrt_stream_launch_host_func(c->stream, note_inner, c);
  c->sync = nrt_stream_synchronize(c->stream); /* would wait for itself */
  c->order[c->n++] = 3;
  return NRT_SUCCESS;
}

static void test_nested_enqueue(void) {
  nested_ctx c;
  memset(&c, 0, sizeof c);
  CHECK_OK(nrt_stream_get(0, 6, &c.stream));
  uint64_t before = nrt_stream_enqueued(c.stream);
  CHECK_OK(nrt_stream_enqueue(c.stream, "outer", outer_task, &c, NULL));
  CHECK(c.n == 3 && c.order[0] == 1 && c.order[1] == 2 && c.order[2] == 3);
  CHECK(c.inner == NRT_SUCCESS);
  CHECK(c.sync == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_stream_enqueued(c.stream) == before + 1); /* the nested task shares the ticket */
  CHECK(nrt_stream_completed(c.stream) == before + 1);
  CHECK_OK(nrt_stream_synchronize(c.stream));
}

typedef struct overlap_ctx {
  atomic_int inside;
  atomic_int overlaps;
  nrt_stream *stream;
} overlap_ctx;

static nrt_status exclusive_task(void *arg) {
  overlap_ctx *c = arg;
  if (atomic_fetch_add(&c->inside, 1) != 0) atomic_fetch_add(&c->overlaps, 1);
  struct timespec ts = {0, 20000};
  nanosleep(&ts, NULL);
  atomic_fetch_sub(&c->inside, 1);
  return NRT_SUCCESS;
}

static void *enqueue_many(void *arg) {
  overlap_ctx *c = arg;
  for (int i = 0; i < 200; i++) nrt_stream_enqueue(c->stream, "x", exclusive_task, c, NULL);
  return NULL;
}

static void test_threads_stay_in_order(void) {
  /* Two threads launching on one stream: tasks still run one at a time. */
  overlap_ctx c;
  memset(&c, 0, sizeof c);
  CHECK_OK(nrt_stream_get(0, 5, &c.stream));
  uint64_t before = nrt_stream_enqueued(c.stream);
  pthread_t t[3];
  for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, enqueue_many, &c);
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  CHECK(atomic_load(&c.overlaps) == 0);
  CHECK(nrt_stream_completed(c.stream) == before + 600);
}

int main(void) {
  setenv("NEURON_LAUNCH_BLOCKING", "1", 1);
  RUN_TEST(test_flag);
  RUN_TEST(test_runs_before_return);
  RUN_TEST(test_error_returned_directly);
  RUN_TEST(test_memcpy_and_events);
  RUN_TEST(test_launch_returns_kernel_status);
  RUN_TEST(test_threads_stay_in_order);
  RUN_TEST(test_nested_enqueue);
  return TEST_RESULT();
}
