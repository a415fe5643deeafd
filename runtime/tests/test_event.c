/* Events: never-recorded semantics, record/query/synchronize, elapsed
 * time, cross-stream waits (ordering, snapshot at wait time, error
 * propagation), and destroying an event with a marker in flight. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "exec/exec.h"
#include "memory/memory.h"
#include "testing.h"

static nrt_status sleep_task(void *arg) {
  nrt_test_sleep_ms(*(int *)arg);
  return NRT_SUCCESS;
}

static void test_create_destroy(void) {
  nrt_event *e = NULL;
  CHECK_OK(nrt_event_create(NRT_EVENT_DEFAULT, &e));
  CHECK_OK(nrt_event_destroy(e));
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &e));
  CHECK_OK(nrt_event_destroy(e));
  CHECK_STATUS(nrt_event_create(4, &e), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_event_create(0, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_event_destroy(NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_event_record(NULL, nrt_test_stream(0, 1)), NRT_ERROR_INVALID_ARGUMENT);
}

static void test_never_recorded(void) {
  nrt_event *a, *b;
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &a));
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &b));
  CHECK_OK(nrt_event_query(a));
  CHECK_OK(nrt_event_synchronize(a));
  CHECK(nrt_event_device(a) == -1);
  float ms = -1;
  CHECK_STATUS(nrt_event_elapsed_time(a, b, &ms), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_stream_wait_event(nrt_test_stream(0, 1), a)); /* nothing to wait for */
  CHECK_OK(nrt_stream_synchronize(nrt_test_stream(0, 1)));
  nrt_event_destroy(a);
  nrt_event_destroy(b);
}

static void test_record_query_synchronize(void) {
  nrt_stream *s = nrt_test_stream(1, 2);
  nrt_event *e;
  CHECK_OK(nrt_event_create(NRT_EVENT_DEFAULT, &e));
  nrt_test_gate g;
  nrt_test_gate_close(s, &g, "gate");
  CHECK_OK(nrt_event_record(e, s));
  CHECK(nrt_event_device(e) == 1);
  CHECK_STATUS(nrt_event_query(e), NRT_ERROR_NOT_READY);
  nrt_test_sleep_ms(5);
  CHECK_STATUS(nrt_event_query(e), NRT_ERROR_NOT_READY);
  nrt_test_gate_open(&g);
  CHECK_OK(nrt_event_synchronize(e));
  CHECK_OK(nrt_event_query(e));
  /* Work enqueued after the record does not hold the event back. */
  nrt_test_gate g2;
  nrt_test_gate_close(s, &g2, "gate2");
  CHECK_OK(nrt_event_query(e));
  CHECK_OK(nrt_event_synchronize(e));
  nrt_test_gate_open(&g2);
  CHECK_OK(nrt_stream_synchronize(s));
  nrt_event_destroy(e);
}

static void test_elapsed_time(void) {
  nrt_stream *s = nrt_test_stream(0, 3);
  nrt_event *start, *end, *plain;
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &start));
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &end));
  CHECK_OK(nrt_event_create(NRT_EVENT_DEFAULT, &plain));
  int ms = 30;
  nrt_test_gate g = {0, 0};
  CHECK_OK(nrt_event_record(start, s));
  CHECK_OK(nrt_stream_enqueue(s, "sleep", sleep_task, &ms, NULL));
  CHECK_OK(nrt_stream_enqueue(s, "gate", nrt_test_gate_task, &g, NULL));
  CHECK_OK(nrt_event_record(end, s));
  CHECK_OK(nrt_event_record(plain, s));
  float elapsed = -1;
  CHECK_STATUS(nrt_event_elapsed_time(start, end, &elapsed), NRT_ERROR_NOT_READY);
  nrt_test_gate_open(&g);
  CHECK_OK(nrt_event_synchronize(end));
  CHECK_OK(nrt_event_elapsed_time(start, end, &elapsed));
  CHECK(elapsed >= 29.0f);
  CHECK(elapsed < 10000.0f);
  float back = 0;
  CHECK_OK(nrt_event_elapsed_time(end, start, &back));
  CHECK(back <= -29.0f);
  CHECK_STATUS(nrt_event_elapsed_time(start, plain, &elapsed), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_event_elapsed_time(start, NULL, &elapsed), NRT_ERROR_INVALID_ARGUMENT);
  /* Re-recording moves the event; the old stamp is superseded. */
  CHECK_OK(nrt_event_record(start, s));
  CHECK_OK(nrt_event_synchronize(start));
  CHECK_OK(nrt_event_elapsed_time(start, end, &elapsed));
  CHECK(elapsed <= 0.0f);
  nrt_event_destroy(start);
  nrt_event_destroy(end);
  nrt_event_destroy(plain);
}

static nrt_status fail_task(void *arg) {
  nrt_set_error_message("%s", (const char *)arg);
  return NRT_ERROR_KERNEL_FAILED;
}

static void test_timing_marker_survives_sticky_error(void) {
  /* Markers run even while the stream skips failed work, so elapsed time
   * stays defined; the error is still reported by the stream. */
  nrt_stream *s = nrt_test_stream(0, 4);
  nrt_event *a, *b;
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &a));
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &b));
  CHECK_OK(nrt_stream_enqueue(s, "boom", fail_task, "bad", NULL));
  CHECK_OK(nrt_event_record(a, s));
  CHECK_OK(nrt_event_record(b, s));
  nrt_stream_wait_quiet(s, nrt_stream_enqueued(s));
  float ms = -1;
  CHECK_OK(nrt_event_elapsed_time(a, b, &ms));
  CHECK(ms >= 0.0f);
  CHECK_STATUS(nrt_event_synchronize(b), NRT_ERROR_KERNEL_FAILED);
  CHECK(strstr(nrt_last_error_message(), "kernel boom failed on neuron:0 stream 4") != NULL);
  CHECK_OK(nrt_stream_synchronize(s));
  nrt_event_destroy(a);
  nrt_event_destroy(b);
}

typedef struct handoff {
  nrt_test_gate g;
  atomic_int value;
  atomic_int seen;
} handoff;

static nrt_status produce_task(void *arg) {
  handoff *h = arg;
  nrt_test_gate_task(&h->g);
  atomic_store(&h->value, 42);
  return NRT_SUCCESS;
}

static nrt_status consume_task(void *arg) {
  handoff *h = arg;
  atomic_store(&h->seen, atomic_load(&h->value));
  return NRT_SUCCESS;
}

static void test_cross_stream_wait(void) {
  nrt_stream *producer = nrt_test_stream(0, 5), *consumer = nrt_test_stream(0, 6);
  nrt_event *e;
  CHECK_OK(nrt_event_create(NRT_EVENT_DEFAULT, &e));
  handoff h;
  memset(&h, 0, sizeof h);
  atomic_store(&h.seen, -1);
  CHECK_OK(nrt_stream_enqueue(producer, "produce", produce_task, &h, NULL));
  CHECK_OK(nrt_event_record(e, producer));
  CHECK_OK(nrt_stream_wait_event(consumer, e));
  CHECK_OK(nrt_stream_enqueue(consumer, "consume", consume_task, &h, NULL));
  nrt_test_sleep_ms(20);
  CHECK(atomic_load(&h.seen) == -1); /* still waiting for the producer */
  CHECK_STATUS(nrt_stream_query(consumer), NRT_ERROR_NOT_READY);
  nrt_test_gate_open(&h.g);
  CHECK_OK(nrt_stream_synchronize(consumer));
  CHECK(atomic_load(&h.seen) == 42);
  CHECK_OK(nrt_stream_synchronize(producer));

  /* Waiting on an event of the same stream, or a completed one, is free. */
  uint64_t before = nrt_stream_enqueued(producer);
  CHECK_OK(nrt_event_record(e, producer));
  CHECK_OK(nrt_stream_wait_event(producer, e));
  CHECK(nrt_stream_enqueued(producer) == before);
  before = nrt_stream_enqueued(consumer);
  CHECK_OK(nrt_stream_wait_event(consumer, e));
  CHECK(nrt_stream_enqueued(consumer) == before);
  /* Across devices too. */
  nrt_stream *other = nrt_test_stream(1, 6);
  nrt_test_gate g;
  nrt_test_gate_close(producer, &g, "gate");
  CHECK_OK(nrt_event_record(e, producer));
  CHECK_OK(nrt_stream_wait_event(other, e));
  CHECK_STATUS(nrt_stream_query(other), NRT_ERROR_NOT_READY);
  nrt_test_gate_open(&g);
  CHECK_OK(nrt_stream_synchronize(other));
  CHECK_OK(nrt_event_query(e));
  nrt_event_destroy(e);
}

static void test_wait_snapshot(void) {
  /* A wait captures the event as recorded at the time of the wait call;
   * re-recording afterwards does not extend it. */
  nrt_stream *a = nrt_test_stream(0, 7), *b = nrt_test_stream(0, 8);
  nrt_event *e;
  CHECK_OK(nrt_event_create(NRT_EVENT_DEFAULT, &e));
  nrt_test_gate g1 = {0, 0}, g2 = {0, 0};
  CHECK_OK(nrt_stream_enqueue(a, "g1", nrt_test_gate_task, &g1, NULL));
  CHECK_OK(nrt_event_record(e, a));
  CHECK_OK(nrt_stream_wait_event(b, e));
  CHECK_OK(nrt_stream_enqueue(a, "g2", nrt_test_gate_task, &g2, NULL));
  CHECK_OK(nrt_event_record(e, a));
  nrt_test_gate_open(&g1);
  CHECK_OK(nrt_stream_synchronize(b)); /* does not need g2 */
  CHECK_STATUS(nrt_event_query(e), NRT_ERROR_NOT_READY);
  nrt_test_gate_open(&g2);
  CHECK_OK(nrt_event_synchronize(e));
  nrt_event_destroy(e);
}

static void set_flag(void *arg) { *(int *)arg = 1; }

static void test_wait_propagates_error(void) {
  nrt_stream *a = nrt_test_stream(1, 7), *b = nrt_test_stream(1, 8);
  nrt_event *e;
  CHECK_OK(nrt_event_create(NRT_EVENT_DEFAULT, &e));
  CHECK_OK(nrt_stream_enqueue(a, "MATMUL_X", fail_task, "bad shape", NULL));
  CHECK_OK(nrt_event_record(e, a));
  CHECK_OK(nrt_stream_wait_event(b, e));
  int ran = 0;
  CHECK_OK(nrt_stream_launch_host_func(b, set_flag, &ran));
  CHECK_STATUS(nrt_stream_synchronize(b), NRT_ERROR_KERNEL_FAILED);
  const char *msg = nrt_last_error_message();
  CHECK(strstr(msg, "kernel event_wait failed on neuron:1 stream 8") != NULL);
  CHECK(strstr(msg, "kernel MATMUL_X failed on neuron:1 stream 7") != NULL);
  CHECK(strstr(msg, "bad shape") != NULL);
  /* The producer still reports its own failure. */
  CHECK_STATUS(nrt_stream_synchronize(a), NRT_ERROR_KERNEL_FAILED);
  CHECK(ran == 0); /* poisoned: work after the failed wait was skipped */
  CHECK_OK(nrt_stream_synchronize(b));
  nrt_event_destroy(e);
}

static void test_destroy_with_marker_in_flight(void) {
  nrt_stream *s = nrt_test_stream(0, 9);
  nrt_event *e;
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &e));
  nrt_test_gate g;
  nrt_test_gate_close(s, &g, "gate");
  CHECK_OK(nrt_event_record(e, s));
  CHECK_OK(nrt_event_record(e, s)); /* two markers pending */
  CHECK_OK(nrt_event_destroy(e));   /* freed when the last marker has run */
  nrt_test_gate_open(&g);
  CHECK_OK(nrt_stream_synchronize(s));
}

static void test_many_events(void) {
  enum { N = 200 };
  nrt_stream *s = nrt_test_stream(1, 9);
  nrt_event *ev[N];
  for (int i = 0; i < N; i++) {
    CHECK_OK(nrt_event_create(i % 2 ? NRT_EVENT_TIMING : NRT_EVENT_DEFAULT, &ev[i]));
    CHECK_OK(nrt_event_record(ev[i], s));
  }
  CHECK_OK(nrt_event_synchronize(ev[N - 1]));
  for (int i = 0; i < N; i++) {
    CHECK_OK(nrt_event_query(ev[i]));
    nrt_event_destroy(ev[i]);
  }
}

int main(void) {
  unsetenv("NEURON_LAUNCH_BLOCKING");
  RUN_TEST(test_create_destroy);
  RUN_TEST(test_never_recorded);
  RUN_TEST(test_record_query_synchronize);
  RUN_TEST(test_elapsed_time);
  RUN_TEST(test_timing_marker_survives_sticky_error);
  RUN_TEST(test_cross_stream_wait);
  RUN_TEST(test_wait_snapshot);
  RUN_TEST(test_wait_propagates_error);
  RUN_TEST(test_destroy_with_marker_in_flight);
  RUN_TEST(test_many_events);
  return TEST_RESULT();
}
