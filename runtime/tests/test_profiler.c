/* The device profiler (nrt/profiler.h): what a profiled stream records
 * (kinds, names, costs, correlation ids, timestamps in order), the
 * on/off rules, failed tasks, and many tasks from several streams. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nrt/ops/gemm.h"
#include "nrt/profiler.h"
#include "testing.h"

static nrt_status failing_task(void *arg) {
  nrt_set_error_message("planned failure");
  return NRT_ERROR_KERNEL_FAILED;
}

static nrt_status empty_task(void *arg) { return NRT_SUCCESS; }

/* The records of the last profile, in slot order. */
static nrt_activity *read_all(size_t *n) {
  uint64_t dropped = 1;
  CHECK_OK(nrt_profiler_count(n, &dropped));
  CHECK(dropped == 0);
  nrt_activity *a = calloc(*n ? *n : 1, sizeof *a);
  size_t got = 0;
  CHECK_OK(nrt_profiler_read(0, *n, a, &got));
  CHECK(got == *n);
  return a;
}

static const nrt_activity *find(const nrt_activity *a, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(a[i].name, name) == 0) return &a[i];
  return NULL;
}

static void test_on_off_rules(void) {
  CHECK(!nrt_profiler_active());
  CHECK_STATUS(nrt_profiler_stop(), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_profiler_start());
  CHECK(nrt_profiler_active());
  CHECK_STATUS(nrt_profiler_start(), NRT_ERROR_INVALID_ARGUMENT);
  nrt_activity one;
  size_t got;
  CHECK_STATUS(nrt_profiler_read(0, 1, &one, &got), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_profiler_stop());
  size_t n = 99;
  CHECK_OK(nrt_profiler_count(&n, NULL));
  CHECK(n == 0);
  CHECK_STATUS(nrt_profiler_count(NULL, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_profiler_read(0, 1, NULL, &got), NRT_ERROR_INVALID_ARGUMENT);
}

static void test_kernels_copies_costs(void) {
  nrt_stream *s = nrt_test_stream(0, 3);
  enum { N = 1024, D = 64 };
  float host[N];
  for (int i = 0; i < N; i++) host[i] = (float)i;
  float *x, *y, *a, *b, *c;
  CHECK_OK(nrt_malloc(N * sizeof(float), s, (void **)&x));
  CHECK_OK(nrt_malloc(N * sizeof(float), s, (void **)&y));
  CHECK_OK(nrt_malloc(D * D * sizeof(float), s, (void **)&a));
  CHECK_OK(nrt_malloc(D * D * sizeof(float), s, (void **)&b));
  CHECK_OK(nrt_malloc(D * D * sizeof(float), s, (void **)&c));
  CHECK_OK(nrt_stream_synchronize(s));

  /* Work before the start is not recorded. */
  CHECK_OK(nrt_memcpy_async(x, host, sizeof host, NRT_MEMCPY_HOST_TO_DEVICE, s));
  CHECK_OK(nrt_profiler_start());
  CHECK_OK(nrt_memcpy_async(x, host, sizeof host, NRT_MEMCPY_HOST_TO_DEVICE, s));

  int64_t n = N;
  nrt_launch add = nrt_test_launch_op(NRT_OP(ADD), NRT_FLOAT32, 1, &n);
  nrt_test_operand_1d(&add, 0, y, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&add, 1, x, NRT_FLOAT32, 1);
  nrt_test_operand_1d(&add, 2, x, NRT_FLOAT32, 0); /* broadcast: one element read */
  add.scalars[0].f = 1.0;
  nrt_profiler_push_correlation(41);
  nrt_profiler_push_correlation(42); /* innermost wins */
  CHECK_OK(nrt_launch_kernel(s, &add));
  nrt_profiler_pop_correlation();
  nrt_profiler_pop_correlation();

  int64_t sizes[4] = {1, D, D, D};
  nrt_launch mm = nrt_test_launch(NRT_OP(GEMM), NRT_FLOAT32, 4, sizes, 1, 2);
  int64_t row[2] = {D * 4, 4}; /* operand strides for {M or K, N or K} */
  for (int k = 0; k < 3; k++) {
    float *p = k == 0 ? c : k == 1 ? a : b;
    mm.operands[k].data = p;
    mm.operands[k].dtype = NRT_FLOAT32;
    mm.operands[k].strides[1] = row[0];
    mm.operands[k].strides[2] = row[1];
  }
  mm.scalars[0].f = 1.0;
  CHECK_OK(nrt_launch_kernel(s, &mm));
  CHECK_OK(nrt_profiler_stop());
  /* Work after the stop is not recorded either. */
  CHECK_OK(nrt_launch_kernel(s, &add));
  CHECK_OK(nrt_stream_synchronize(s));

  size_t count;
  nrt_activity *rec = read_all(&count);
  CHECK(count == 3);
  const nrt_activity *cp = find(rec, count, "memcpy_HtoD");
  const nrt_activity *ad = find(rec, count, "ADD");
  const nrt_activity *gm = find(rec, count, "GEMM");
  CHECK(cp && ad && gm);
  if (cp && ad && gm) {
    CHECK(cp->kind == NRT_ACTIVITY_COPY && cp->bytes == 2 * sizeof host && cp->flops == 0);
    CHECK(ad->kind == NRT_ACTIVITY_KERNEL && ad->correlation == 42 && ad->dtype == NRT_FLOAT32);
    CHECK(cp->dtype == -1);
    CHECK(ad->bytes == (2 * N + 1) * sizeof(float)); /* y, x, one element of the broadcast */
    CHECK(gm->flops == 2ull * D * D * D && gm->bytes == 3ull * D * D * sizeof(float));
    CHECK(gm->correlation == 0 && cp->correlation == 0);
    for (const nrt_activity *r = rec; r < rec + count; r++) {
      CHECK(r->device == 0 && r->stream == 3 && !r->failed);
      CHECK(r->enqueue_ns <= r->start_ns && r->start_ns <= r->end_ns);
    }
    /* One stream runs in order: copy, add, gemm, each after the last. */
    CHECK(cp->ticket < ad->ticket && ad->ticket < gm->ticket);
    CHECK(cp->end_ns <= ad->start_ns && ad->end_ns <= gm->start_ns);
    CHECK(gm->end_ns <= nrt_clock_ns());
  }
  free(rec);
  nrt_free(x);
  nrt_free(y);
  nrt_free(a);
  nrt_free(b);
  nrt_free(c);
}

static void test_failed_and_skipped_tasks(void) {
  nrt_stream *s = nrt_test_stream(1, 2);
  CHECK_OK(nrt_profiler_start());
  CHECK_OK(nrt_stream_enqueue(s, "planned_failure", failing_task, NULL, NULL));
  CHECK_OK(nrt_stream_enqueue(s, "skipped_after", empty_task, NULL, NULL));
  CHECK_STATUS(nrt_profiler_stop(), NRT_SUCCESS); /* the sticky error stays for the caller */
  CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_KERNEL_FAILED);
  size_t count;
  nrt_activity *rec = read_all(&count);
  CHECK(count == 2);
  const nrt_activity *f = find(rec, count, "planned_failure");
  const nrt_activity *k = find(rec, count, "skipped_after");
  CHECK(f && k);
  if (f && k) {
    CHECK(f->failed && f->kind == NRT_ACTIVITY_TASK && f->device == 1);
    CHECK(k->failed);
  }
  free(rec);
}

typedef struct producer {
  nrt_stream *s;
  int tasks;
} producer;

static void *produce(void *arg) {
  producer *p = arg;
  nrt_profiler_push_correlation(7);
  for (int i = 0; i < p->tasks; i++) CHECK_OK(nrt_stream_enqueue(p->s, "many", empty_task, NULL, NULL));
  nrt_profiler_pop_correlation();
  return NULL;
}

/* Two threads feeding two streams: every task gets exactly one record,
 * the per-stream tickets are distinct and consecutive, and the other
 * thread's correlation id stays its own. */
static void test_many_tasks_two_streams(void) {
  enum { TASKS = 20000 }; /* more than two buffer chunks */
  producer p[2] = {{nrt_test_stream(0, 4), TASKS}, {nrt_test_stream(0, 5), TASKS}};
  CHECK_OK(nrt_profiler_start());
  pthread_t th;
  pthread_create(&th, NULL, produce, &p[1]);
  for (int i = 0; i < TASKS; i++) CHECK_OK(nrt_stream_enqueue(p[0].s, "many", empty_task, NULL, NULL));
  pthread_join(th, NULL);
  CHECK_OK(nrt_profiler_stop());
  size_t count;
  nrt_activity *rec = read_all(&count);
  CHECK(count == 2 * TASKS);
  uint64_t first[2] = {UINT64_MAX, UINT64_MAX}, last[2] = {0, 0}, seen[2] = {0, 0};
  for (size_t i = 0; i < count; i++) {
    int w = rec[i].stream == 5;
    CHECK(rec[i].stream == 4 || rec[i].stream == 5);
    CHECK(rec[i].correlation == (w ? 7u : 0u));
    if (rec[i].ticket < first[w]) first[w] = rec[i].ticket;
    if (rec[i].ticket > last[w]) last[w] = rec[i].ticket;
    seen[w]++;
  }
  for (int w = 0; w < 2; w++) CHECK(seen[w] == TASKS && last[w] - first[w] + 1 == TASKS);
  free(rec);
  /* A new start forgets the old records. */
  CHECK_OK(nrt_profiler_start());
  CHECK_OK(nrt_profiler_stop());
  CHECK_OK(nrt_profiler_count(&count, NULL));
  CHECK(count == 0);
}

int main(void) {
  unsetenv("NEURON_LAUNCH_BLOCKING");
  RUN_TEST(test_on_off_rules);
  RUN_TEST(test_kernels_copies_costs);
  RUN_TEST(test_failed_and_skipped_tasks);
  RUN_TEST(test_many_tasks_two_streams);
  return TEST_RESULT();
}
