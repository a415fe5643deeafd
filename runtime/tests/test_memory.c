/* The caching allocator: exact statistics, reuse, splitting and merging,
 * best fit, pools, OOM (message figures, retry, recovery), empty_cache,
 * stream-ordered reuse with nrt_record_stream, pointer lookup, pinned host
 * memory, copies, concurrency and fork. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "exec/exec.h"
#include "memory/memory.h"
#include "testing.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)
#define ALL NRT_POOL_ALL
#define SMALL NRT_POOL_SMALL
#define LARGE NRT_POOL_LARGE

static nrt_memory_stats stats(int device) {
  nrt_memory_stats st;
  memset(&st, 0, sizeof st);
  CHECK_OK(nrt_memory_get_stats(device, &st));
  return st;
}

static void *dmalloc(size_t size, nrt_stream *s) {
  void *p = NULL;
  CHECK_OK(nrt_malloc(size, s, &p));
  return p;
}

/* Returns a device to a clean slate: nothing cached, counters zeroed. */
static void fresh(int device) {
  CHECK_OK(nrt_set_memory_capacity(device, NRT_DEFAULT_MEMORY_CAPACITY));
  CHECK_OK(nrt_empty_cache(device));
  CHECK_OK(nrt_memory_reset_accumulated_stats(device));
  CHECK_OK(nrt_memory_reset_peak_stats(device));
  nrt_memory_stats st = stats(device);
  CHECK(st.reserved_bytes[ALL].current == 0);
  CHECK(st.allocation[ALL].current == 0);
}

static void test_malloc_arguments(void) {
  void *p = (void *)1;
  CHECK_OK(nrt_malloc(0, nrt_test_stream(0, 0), &p));
  CHECK(p == NULL);
  CHECK_STATUS(nrt_malloc(16, NULL, &p), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_malloc(16, nrt_test_stream(0, 0), NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_malloc(SIZE_MAX, nrt_test_stream(0, 0), &p), NRT_ERROR_OUT_OF_MEMORY);
  CHECK(p == NULL);
  CHECK(strstr(nrt_last_error_message(), "neuron:0 out of memory") != NULL);
  CHECK_OK(nrt_free(NULL));
}

static void test_basic_stats(void) {
  fresh(0);
  nrt_stream *s = nrt_test_stream(0, 0);
  char *p = dmalloc(1000, s);
  CHECK(p != NULL && ((uintptr_t)p % 512) == 0);
  memset(p, 0xab, 1000);
  nrt_memory_stats st = stats(0);
  CHECK(st.allocation[ALL].current == 1 && st.allocation[SMALL].current == 1);
  CHECK(st.allocation[LARGE].current == 0);
  CHECK(st.allocation[ALL].allocated == 1);
  CHECK(st.allocated_bytes[ALL].current == 1024);
  CHECK(st.requested_bytes[ALL].current == 1000);
  CHECK(st.reserved_bytes[ALL].current == (int64_t)(2 * MiB));
  CHECK(st.reserved_bytes[SMALL].current == (int64_t)(2 * MiB));
  CHECK(st.segment[SMALL].current == 1 && st.segment[LARGE].current == 0);
  CHECK(st.active[ALL].current == 1 && st.active_bytes[ALL].current == 1024);
  CHECK(st.inactive_split[ALL].current == 1);
  CHECK(st.inactive_split_bytes[ALL].current == (int64_t)(2 * MiB - 1024));
  CHECK(st.num_device_alloc == 1 && st.num_device_free == 0);
  CHECK(st.capacity == NRT_DEFAULT_MEMORY_CAPACITY);
  size_t free_b = 0, total = 0;
  CHECK_OK(nrt_mem_get_info(0, &free_b, &total));
  CHECK(total == NRT_DEFAULT_MEMORY_CAPACITY);
  CHECK(free_b == NRT_DEFAULT_MEMORY_CAPACITY - 1024);

  CHECK_OK(nrt_free(p));
  st = stats(0);
  CHECK(st.allocation[ALL].current == 0 && st.allocation[ALL].freed == 1);
  CHECK(st.allocated_bytes[ALL].current == 0 && st.allocated_bytes[ALL].peak == 1024);
  CHECK(st.allocated_bytes[ALL].allocated == 1024 && st.allocated_bytes[ALL].freed == 1024);
  CHECK(st.requested_bytes[ALL].current == 0 && st.requested_bytes[ALL].peak == 1000);
  CHECK(st.active[ALL].current == 0 && st.active_bytes[ALL].current == 0);
  CHECK(st.inactive_split[ALL].current == 0 && st.inactive_split_bytes[ALL].current == 0);
  CHECK(st.reserved_bytes[ALL].current == (int64_t)(2 * MiB)); /* cached */
  CHECK_OK(nrt_mem_get_info(0, &free_b, &total));
  CHECK(free_b == NRT_DEFAULT_MEMORY_CAPACITY);

  CHECK_OK(nrt_empty_cache(0));
  st = stats(0);
  CHECK(st.reserved_bytes[ALL].current == 0 && st.segment[ALL].current == 0);
  CHECK(st.reserved_bytes[ALL].peak == (int64_t)(2 * MiB));
  CHECK(st.num_device_free == 1);
}

static void test_reuse(void) {
  fresh(0);
  nrt_stream *s = nrt_test_stream(0, 0);
  void *p = dmalloc(1000, s);
  CHECK_OK(nrt_free(p));
  void *q = dmalloc(1000, s);
  CHECK(q == p);
  char *r = dmalloc(700, s);
  CHECK(r == (char *)p + 1024);
  CHECK(stats(0).num_device_alloc == 1);
  CHECK_OK(nrt_free(q));
  CHECK_OK(nrt_free(r));
}

static void test_split_merge_best_fit(void) {
  fresh(0);
  nrt_stream *s = nrt_test_stream(0, 0);
  char *a = dmalloc(512, s), *b = dmalloc(512, s), *c = dmalloc(512, s);
  CHECK(b == a + 512 && c == b + 512);
  const int64_t tail = (int64_t)(2 * MiB - 1536);
  nrt_memory_stats st = stats(0);
  CHECK(st.inactive_split[ALL].current == 1 && st.inactive_split_bytes[ALL].current == tail);
  CHECK_OK(nrt_free(b));
  st = stats(0);
  CHECK(st.inactive_split[ALL].current == 2);
  CHECK(st.inactive_split_bytes[ALL].current == tail + 512);
  CHECK_OK(nrt_free(a)); /* merges with b */
  st = stats(0);
  CHECK(st.inactive_split[ALL].current == 2);
  CHECK(st.inactive_split_bytes[ALL].current == tail + 1024);
  CHECK_OK(nrt_free(c)); /* merges everything back into one segment-sized block */
  st = stats(0);
  CHECK(st.inactive_split[ALL].current == 0 && st.inactive_split_bytes[ALL].current == 0);
  char *d = dmalloc(1536, s);
  CHECK(d == a);
  CHECK_OK(nrt_free(d));

  /* Best fit: a 1 KiB request takes the 1 KiB hole, not the 4 KiB one. */
  char *p1 = dmalloc(1024, s), *g1 = dmalloc(512, s);
  char *p2 = dmalloc(4096, s), *g2 = dmalloc(512, s);
  CHECK_OK(nrt_free(p2));
  CHECK_OK(nrt_free(p1));
  char *x = dmalloc(1000, s);
  CHECK(x == p1);
  char *y = dmalloc(3000, s); /* 3072 from the 4 KiB hole, 1 KiB left */
  CHECK(y == p2);
  char *z = dmalloc(1024, s);
  CHECK(z == p2 + 3072);
  CHECK_OK(nrt_free(x));
  CHECK_OK(nrt_free(y));
  CHECK_OK(nrt_free(z));
  CHECK_OK(nrt_free(g1));
  CHECK_OK(nrt_free(g2));
  st = stats(0);
  CHECK(st.inactive_split[ALL].current == 0 && st.segment[ALL].current == 1);
  CHECK(st.allocation[ALL].allocated == 11 && st.allocation[ALL].freed == 11);
}

static void test_large_pool(void) {
  fresh(0);
  nrt_stream *s = nrt_test_stream(0, 0);
  char *p = dmalloc(3 * MiB, s);
  nrt_memory_stats st = stats(0);
  CHECK(st.reserved_bytes[LARGE].current == (int64_t)(20 * MiB)); /* shared 20 MiB segment */
  CHECK(st.segment[LARGE].current == 1 && st.segment[SMALL].current == 0);
  char *q = dmalloc(3 * MiB, s);
  CHECK(q == p + 3 * MiB);
  /* Cached space is used before a new segment: 12 MiB from the 14 MiB
   * tail, and the 2 MiB left (> 1 MiB) is split off. */
  char *r = dmalloc(12 * MiB, s);
  CHECK(r == q + 3 * MiB);
  /* 1 MiB + 1 is large; the 1 MiB - 512 it would leave is too small to
   * split off, so the whole 2 MiB block is handed out. */
  char *u = dmalloc(MiB + 1, s);
  CHECK(u == r + 12 * MiB);
  char *t = dmalloc(20 * MiB - 512 * KiB, s); /* own 20 MiB segment, not split */
  char *big = dmalloc(30 * MiB, s);           /* >= 10 MiB: own segment */
  char *v = dmalloc(MiB, s);                  /* exactly 1 MiB is still small */
  st = stats(0);
  CHECK(st.segment[LARGE].current == 3 && st.segment[SMALL].current == 1);
  CHECK(st.reserved_bytes[LARGE].current == (int64_t)(70 * MiB));
  CHECK(st.reserved_bytes[SMALL].current == (int64_t)(2 * MiB));
  CHECK(st.allocated_bytes[LARGE].current == (int64_t)(70 * MiB));
  CHECK(st.allocated_bytes[SMALL].current == (int64_t)MiB);
  CHECK(st.requested_bytes[LARGE].current ==
        (int64_t)(18 * MiB + MiB + 1 + 20 * MiB - 512 * KiB + 30 * MiB));
  CHECK(st.inactive_split[LARGE].current == 0);
  CHECK(st.inactive_split[SMALL].current == 1);
  CHECK(st.allocation[LARGE].current == 6 && st.allocation[SMALL].current == 1);
  CHECK(st.allocation[ALL].current == 7);
  memset(t, 1, 20 * MiB - 512 * KiB);
  CHECK_OK(nrt_free(r));
  st = stats(0); /* a 12 MiB hole between q and u */
  CHECK(st.inactive_split[LARGE].current == 1);
  CHECK(st.inactive_split_bytes[LARGE].current == (int64_t)(12 * MiB));
  CHECK_OK(nrt_free(p));
  CHECK_OK(nrt_free(q));
  CHECK_OK(nrt_free(t));
  CHECK_OK(nrt_free(u));
  CHECK_OK(nrt_free(big));
  CHECK_OK(nrt_free(v));
  st = stats(0);
  CHECK(st.inactive_split[ALL].current == 0 && st.allocated_bytes[ALL].current == 0);
  CHECK_OK(nrt_empty_cache(0));
  st = stats(0);
  CHECK(st.reserved_bytes[ALL].current == 0 && st.num_device_free == 4);
}

static void test_peaks_and_resets(void) {
  fresh(0);
  nrt_stream *s = nrt_test_stream(0, 0);
  void *a = dmalloc(4096, s), *b = dmalloc(8192, s);
  CHECK_OK(nrt_free(a));
  CHECK_OK(nrt_free(b));
  nrt_memory_stats st = stats(0);
  CHECK(st.allocated_bytes[ALL].peak == 12288 && st.allocated_bytes[ALL].current == 0);
  CHECK(st.allocation[ALL].peak == 2);
  CHECK(st.allocation[ALL].allocated == 2 && st.allocation[ALL].freed == 2);
  CHECK_OK(nrt_memory_reset_peak_stats(0));
  st = stats(0);
  CHECK(st.allocated_bytes[ALL].peak == 0 && st.allocation[ALL].peak == 0);
  CHECK(st.reserved_bytes[ALL].peak == (int64_t)(2 * MiB)); /* still cached */
  CHECK(st.allocation[ALL].allocated == 2);
  CHECK_OK(nrt_memory_reset_accumulated_stats(0));
  st = stats(0);
  CHECK(st.allocation[ALL].allocated == 0 && st.allocation[ALL].freed == 0);
  CHECK(st.allocated_bytes[ALL].allocated == 0 && st.num_device_alloc == 0);
  CHECK(st.reserved_bytes[ALL].current == (int64_t)(2 * MiB));
}

static void test_out_of_memory(void) {
  fresh(1);
  nrt_stream *s0 = nrt_test_stream(1, 0), *s1 = nrt_test_stream(1, 1);
  CHECK_OK(nrt_set_memory_capacity(1, 64 * MiB));
  void *a = dmalloc(20 * MiB, s0);
  void *b = dmalloc(512, s0);
  void *c = (void *)1;
  CHECK_STATUS(nrt_malloc(3 * GiB / 2, s0, &c), NRT_ERROR_OUT_OF_MEMORY);
  CHECK(c == NULL);
  const char *want =
      "neuron:1 out of memory: tried to allocate 1.50 GiB; 20.00 MiB already allocated, "
      "22.00 MiB reserved, capacity 64.00 MiB";
  if (strcmp(nrt_last_error_message(), want) != 0)
    fprintf(stderr, "got: %s\n", nrt_last_error_message());
  CHECK(strcmp(nrt_last_error_message(), want) == 0);
  nrt_memory_stats st = stats(1);
  CHECK(st.num_ooms == 1 && st.num_alloc_retries == 1);
  CHECK(st.reserved_bytes[ALL].current == (int64_t)(22 * MiB));
  /* The device stays usable. */
  char *d = dmalloc(MiB, s0);
  char host[64] = "still works", back[64] = {0};
  CHECK_OK(nrt_memcpy(d, host, sizeof host, NRT_MEMCPY_HOST_TO_DEVICE, s0));
  CHECK_OK(nrt_memcpy(back, d, sizeof back, NRT_MEMCPY_DEVICE_TO_HOST, s0));
  CHECK(strcmp(back, "still works") == 0);
  CHECK_OK(nrt_free(a));
  CHECK_OK(nrt_free(b));
  CHECK_OK(nrt_free(d));

  /* A request that fits once other streams' cached segments are released:
   * the allocator waits for the device, frees the cache and retries. */
  fresh(1);
  CHECK_OK(nrt_set_memory_capacity(1, 64 * MiB));
  void *x = dmalloc(40 * MiB, s0);
  CHECK_OK(nrt_free(x)); /* cached, but only for s0 */
  void *y = dmalloc(30 * MiB, s1);
  CHECK(y != NULL);
  st = stats(1);
  CHECK(st.num_alloc_retries == 1 && st.num_ooms == 0 && st.num_device_free == 1);
  CHECK(st.reserved_bytes[ALL].current == (int64_t)(30 * MiB));
  CHECK_OK(nrt_free(y));

  /* Near the limit a 1..10 MiB request falls back from a shared 20 MiB
   * segment to one of its own size. */
  fresh(1);
  CHECK_OK(nrt_set_memory_capacity(1, 64 * MiB));
  void *z = dmalloc(50 * MiB, s0);
  void *w = dmalloc(5 * MiB, s0);
  st = stats(1);
  CHECK(w != NULL && st.reserved_bytes[ALL].current == (int64_t)(56 * MiB));
  CHECK(st.num_alloc_retries == 0);
  CHECK_OK(nrt_free(z));
  CHECK_OK(nrt_free(w));

  /* The host refusing a mapping is reported as host out of memory. */
  fresh(1);
  CHECK_OK(nrt_set_memory_capacity(1, (uint64_t)1 << 50));
  void *huge = NULL;
  CHECK_STATUS(nrt_malloc((size_t)1 << 48, s0, &huge), NRT_ERROR_OUT_OF_MEMORY);
  CHECK(strstr(nrt_last_error_message(), "neuron:1 host out of memory") != NULL);
  CHECK(stats(1).num_ooms == 1);
  fresh(1);
}

static void test_empty_cache_keeps_live_segments(void) {
  fresh(2);
  nrt_stream *s = nrt_test_stream(2, 0);
  void *live = dmalloc(1000, s);
  void *big = dmalloc(5 * MiB, s);
  void *mid = dmalloc(64 * KiB, s);
  CHECK_OK(nrt_free(big));
  CHECK_OK(nrt_free(mid));
  nrt_memory_stats st = stats(2);
  CHECK(st.reserved_bytes[ALL].current == (int64_t)(22 * MiB));
  CHECK_OK(nrt_empty_cache(2));
  st = stats(2);
  CHECK(st.reserved_bytes[ALL].current == (int64_t)(2 * MiB)); /* the live block's segment */
  CHECK(st.segment[LARGE].current == 0 && st.segment[SMALL].current == 1);
  CHECK_OK(nrt_free(live));
  CHECK_OK(nrt_empty_cache(2));
  CHECK(stats(2).reserved_bytes[ALL].current == 0);
}

static void test_stream_ordered_reuse(void) {
  fresh(3);
  nrt_stream *s0 = nrt_test_stream(3, 0), *s1 = nrt_test_stream(3, 1);
  /* Same stream: reusable at once, even while the stream is busy. */
  nrt_test_gate g0;
  nrt_test_gate_close(s0, &g0, "gate");
  char *p = dmalloc(1000, s0);
  CHECK_OK(nrt_free(p));
  char *q = dmalloc(1000, s0);
  CHECK(q == p);
  /* Another stream never gets s0's cached blocks. */
  char *r = dmalloc(1000, s1);
  CHECK(r < p || r >= p + 2 * MiB);
  nrt_test_gate_open(&g0);
  CHECK_OK(nrt_stream_synchronize(s0));
  CHECK_OK(nrt_free(q));
  CHECK_OK(nrt_free(r));
}

static void test_record_stream(void) {
  fresh(3);
  nrt_stream *s0 = nrt_test_stream(3, 0), *s1 = nrt_test_stream(3, 1);
  char *p = dmalloc(1000, s0);
  CHECK_OK(nrt_record_stream(p, s1));
  CHECK_OK(nrt_record_stream(p, s1)); /* recording twice is harmless */
  CHECK_OK(nrt_record_stream(p, s0)); /* its own stream: nothing to do */
  nrt_test_gate g;
  nrt_test_gate_close(s1, &g, "uses_p");
  CHECK_OK(nrt_free(p)); /* s1 still has work enqueued before the free */
  nrt_memory_stats st = stats(3);
  CHECK(st.allocation[ALL].current == 0);
  CHECK(st.active[ALL].current == 1 && st.active_bytes[ALL].current == 1024);
  char *q = dmalloc(1000, s0);
  CHECK(q != p); /* p is pending */
  nrt_test_gate_open(&g);
  CHECK_OK(nrt_stream_synchronize(s1));
  char *r = dmalloc(1000, s0);
  CHECK(r == p); /* released at this malloc, best fit again */
  st = stats(3);
  CHECK(st.active[ALL].current == 2 && st.allocation[ALL].current == 2);
  CHECK_OK(nrt_free(q));
  CHECK_OK(nrt_free(r));
  /* A recorded stream that has finished its work does not delay reuse. */
  char *t = dmalloc(1000, s0);
  CHECK_OK(nrt_record_stream(t, s1));
  CHECK_OK(nrt_free(t));
  char *u = dmalloc(1000, s0);
  CHECK(u == t);
  CHECK_OK(nrt_free(u));
  /* A view's pointer inside the block marks the whole block. */
  char *v = dmalloc(4096, s0);
  CHECK_OK(nrt_record_stream(v + 1000, s1));
  nrt_test_gate g2;
  nrt_test_gate_close(s1, &g2, "uses_v");
  CHECK_OK(nrt_free(v));
  char *w = dmalloc(4096, s0);
  CHECK(w != v);
  nrt_test_gate_open(&g2);
  CHECK_OK(nrt_stream_synchronize(s1));
  CHECK_OK(nrt_free(w));
  CHECK_STATUS(nrt_record_stream(v + 1000, s1), NRT_ERROR_INVALID_ARGUMENT); /* freed */
  int local = 0;
  CHECK_STATUS(nrt_record_stream(&local, s1), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_record_stream(NULL, s1), NRT_ERROR_INVALID_ARGUMENT);
  st = stats(3);
  CHECK(st.active[ALL].current == 0 && st.allocation[ALL].current == 0);
}

static void *free_in_thread(void *p) { return (void *)(intptr_t)nrt_free(p); }

static void test_pointer_lookup(void) {
  char *p = dmalloc(1000, nrt_test_stream(2, 0));
  int d = -1;
  CHECK_OK(nrt_pointer_get_device(p, &d));
  CHECK(d == 2);
  d = -1;
  CHECK_OK(nrt_pointer_get_device(p + 999, &d));
  CHECK(d == 2);
  int local;
  CHECK_STATUS(nrt_pointer_get_device(&local, &d), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_pointer_get_device(NULL, &d), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_free(&local), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_free(p + 512), NRT_ERROR_INVALID_ARGUMENT); /* interior: not a block */
  CHECK_OK(nrt_free(p));
  CHECK_STATUS(nrt_free(p), NRT_ERROR_INVALID_ARGUMENT); /* double free */
  CHECK(strstr(nrt_last_error_message(), "not an allocated device pointer") != NULL);
  /* Freed from a thread that never used device 1. */
  char *q = dmalloc(4096, nrt_test_stream(1, 0));
  CHECK_OK(nrt_pointer_get_device(q, &d));
  CHECK(d == 1);
  pthread_t t;
  void *ret;
  pthread_create(&t, NULL, free_in_thread, q);
  pthread_join(t, &ret);
  CHECK((intptr_t)ret == NRT_SUCCESS);
  CHECK(stats(1).allocation[ALL].current == 0);
}

static void test_host_alloc(void) {
  char *h = NULL;
  CHECK_OK(nrt_host_alloc(10000, (void **)&h));
  CHECK(h != NULL && ((uintptr_t)h % 4096) == 0);
  memset(h, 7, 10000);
  CHECK(nrt_host_is_pinned(h));
  CHECK(nrt_host_is_pinned(h + 9999));
  CHECK(!nrt_host_is_pinned(h + 10000));
  int local;
  CHECK(!nrt_host_is_pinned(&local));
  CHECK(!nrt_host_is_pinned(NULL));
  char *h2 = NULL;
  CHECK_OK(nrt_host_alloc(100, (void **)&h2));
  CHECK(nrt_host_is_pinned(h2) && nrt_host_is_pinned(h));
  CHECK_STATUS(nrt_host_free(&local), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_host_free(h + 1), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_host_free(h));
  CHECK(!nrt_host_is_pinned(h));
  CHECK(nrt_host_is_pinned(h2));
  CHECK_OK(nrt_host_free(h2));
  CHECK_OK(nrt_host_free(NULL));
  void *z = (void *)1;
  CHECK_OK(nrt_host_alloc(0, &z));
  CHECK(z == NULL);
}

static void test_memcpy(void) {
  nrt_stream *s = nrt_test_stream(0, 2);
  const size_t n = 10 * MiB + 123;
  unsigned char *h = NULL, *back = malloc(n);
  CHECK_OK(nrt_host_alloc(n, (void **)&h));
  for (size_t i = 0; i < n; i++) h[i] = (unsigned char)(i * 131 + (i >> 12));
  unsigned char *d1 = dmalloc(n, s), *d2 = dmalloc(n, s);
  CHECK_OK(nrt_memcpy_async(d1, h, n, NRT_MEMCPY_HOST_TO_DEVICE, s));
  CHECK_OK(nrt_memcpy_async(d2, d1, n, NRT_MEMCPY_DEVICE_TO_DEVICE, s));
  CHECK_OK(nrt_memcpy(back, d2, n, NRT_MEMCPY_DEVICE_TO_HOST, s));
  CHECK(memcmp(back, h, n) == 0);
  /* Small and overlapping copies. */
  CHECK_OK(nrt_memcpy(d1 + 10, d1, 1000, NRT_MEMCPY_DEVICE_TO_DEVICE, s));
  CHECK(memcmp(d1 + 10, h, 1000) == 0);
  CHECK_OK(nrt_memcpy(back, d1, 0, NRT_MEMCPY_DEVICE_TO_HOST, s));
  CHECK_STATUS(nrt_memcpy(back, d1, 10, NRT_MEMCPY_DEVICE_TO_HOST, NULL),
               NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_memcpy(back, NULL, 10, NRT_MEMCPY_DEVICE_TO_HOST, s),
               NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_memcpy(back, d1, 10, (nrt_memcpy_kind)7, s), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_free(d1));
  CHECK_OK(nrt_free(d2));
  CHECK_OK(nrt_host_free(h));
  free(back);
}

typedef struct worker_ctx {
  int device;
  unsigned seed;
  int failures;
} worker_ctx;

static void *alloc_worker(void *arg) {
  worker_ctx *w = arg;
  nrt_stream *s;
  if (nrt_stream_acquire(w->device, &s) != NRT_SUCCESS) {
    w->failures++;
    return NULL;
  }
  enum { LIVE = 16 };
  unsigned char *live[LIVE] = {0};
  size_t sizes[LIVE] = {0};
  unsigned char tag = (unsigned char)(w->seed & 0xff);
  for (int it = 0; it < 3000; it++) {
    w->seed = w->seed * 1103515245u + 12345u;
    int slot = (int)((w->seed >> 8) % LIVE);
    if (live[slot]) {
      for (size_t i = 0; i < sizes[slot]; i += 97)
        if (live[slot][i] != tag) w->failures++;
      if (nrt_free(live[slot]) != NRT_SUCCESS) w->failures++;
      live[slot] = NULL;
    }
    size_t size = (w->seed >> 12) % 8 == 0 ? 1 + (w->seed >> 4) % (3 * MiB)
                                            : 1 + (w->seed >> 4) % (64 * KiB);
    if (nrt_malloc(size, s, (void **)&live[slot]) != NRT_SUCCESS) {
      w->failures++;
      continue;
    }
    sizes[slot] = size;
    for (size_t i = 0; i < size; i += 97) live[slot][i] = tag;
  }
  for (int i = 0; i < LIVE; i++)
    if (live[i] && nrt_free(live[i]) != NRT_SUCCESS) w->failures++;
  return NULL;
}

static void test_concurrent_alloc(void) {
  enum { THREADS = 4 };
  fresh(0);
  pthread_t t[THREADS];
  worker_ctx w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker_ctx){0, 17u + 31u * (unsigned)i, 0};
    pthread_create(&t[i], NULL, alloc_worker, &w[i]);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    CHECK(w[i].failures == 0);
  }
  nrt_memory_stats st = stats(0);
  CHECK(st.allocation[ALL].current == 0 && st.active[ALL].current == 0);
  CHECK(st.allocated_bytes[ALL].current == 0 && st.requested_bytes[ALL].current == 0);
  CHECK(st.allocation[ALL].allocated == THREADS * 3000);
  CHECK(st.inactive_split[ALL].current == 0); /* everything merged back */
  CHECK_OK(nrt_empty_cache(0));
  CHECK(stats(0).reserved_bytes[ALL].current == 0);
}

static void test_fork_child_allocates(void) {
  nrt_stream *s = nrt_test_stream(0, 3);
  char *inherited = dmalloc(4096, s);
  strcpy(inherited, "from the parent");
  nrt_test_gate g;
  nrt_test_gate_close(s, &g, "gate");
  while (!atomic_load(&g.entered)) nrt_test_sleep_ms(1);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    int bad = 0;
    char *d = NULL;
    char host[256], back[256] = {0};
    for (int i = 0; i < 256; i++) host[i] = (char)i;
    bad |= nrt_malloc(256, s, (void **)&d) != NRT_SUCCESS;
    bad |= nrt_memcpy_async(d, host, 256, NRT_MEMCPY_HOST_TO_DEVICE, s) != NRT_SUCCESS;
    bad |= nrt_memcpy(back, d, 256, NRT_MEMCPY_DEVICE_TO_HOST, s) != NRT_SUCCESS;
    bad |= memcmp(host, back, 256) != 0;
    bad |= strcmp(inherited, "from the parent") != 0;
    bad |= nrt_free(inherited) != NRT_SUCCESS;
    bad |= nrt_free(d) != NRT_SUCCESS;
    bad |= nrt_device_synchronize(0) != NRT_SUCCESS;
    bad |= nrt_empty_cache(0) != NRT_SUCCESS;
    _exit(bad ? 1 : 0);
  }
  CHECK(pid > 0);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  nrt_test_gate_open(&g);
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(strcmp(inherited, "from the parent") == 0); /* the child's free was its own */
  CHECK_OK(nrt_free(inherited));
}

/* A failed kernel poisons its outputs until they are freed: after its error
 * was reported, copying them out or launching on them fails instead of
 * reading garbage; the poison spreads to what such a launch writes. */
static void int_div(nrt_stream *s, int64_t *out, const int64_t *a, const int64_t *b, int64_t n) {
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = NRT_OP(DIV_TRUNC);
  l.ndim = 1;
  l.sizes[0] = n;
  l.noutputs = 1;
  l.ninputs = 2;
  l.compute_dtype = NRT_INT64;
  int64_t *ptrs[3] = {out, (int64_t *)a, (int64_t *)b};
  for (int i = 0; i < 3; i++) {
    l.operands[i].data = ptrs[i];
    l.operands[i].dtype = NRT_INT64;
    l.operands[i].strides[0] = 8;
  }
  CHECK_OK(nrt_launch_kernel(s, &l));
}

static void test_failed_kernel_poisons_outputs(void) {
  nrt_stream *s = nrt_test_stream(0, 0);
  int64_t host[4] = {6, 8, 0, 2}, back[4];
  int64_t *a = dmalloc(sizeof host, s), *zero = dmalloc(sizeof host, s), *out = dmalloc(sizeof host, s),
          *next = dmalloc(sizeof host, s);
  CHECK_OK(nrt_memcpy(a, host, sizeof host, NRT_MEMCPY_HOST_TO_DEVICE, s));
  memset(back, 0, sizeof back);
  CHECK_OK(nrt_memcpy(zero, back, sizeof back, NRT_MEMCPY_HOST_TO_DEVICE, s));
  int_div(s, out, a, zero, 4); /* integer division by zero fails */
  CHECK(nrt_stream_synchronize(s) != NRT_SUCCESS);
  CHECK(nrt_memory_is_poisoned(out) && nrt_memory_is_poisoned((char *)out + 8));
  CHECK(!nrt_memory_is_poisoned(a));
  CHECK_STATUS(nrt_memcpy(back, out, sizeof back, NRT_MEMCPY_DEVICE_TO_HOST, s), NRT_ERROR_KERNEL_FAILED);
  CHECK(strstr(nrt_last_error_message(), "failed earlier") != NULL);
  int_div(s, next, out, a, 4); /* reads the poisoned block */
  CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_KERNEL_FAILED);
  CHECK(strstr(nrt_last_error_message(), "input 0") != NULL);
  CHECK(nrt_memory_is_poisoned(next));
  /* Healthy buffers keep working; a freed block comes back clean. */
  CHECK_OK(nrt_memcpy(back, a, sizeof back, NRT_MEMCPY_DEVICE_TO_HOST, s));
  CHECK(back[0] == 6 && back[3] == 2);
  CHECK_OK(nrt_free(out));
  CHECK_OK(nrt_free(next));
  int64_t *again = dmalloc(sizeof host, s);
  CHECK(!nrt_memory_is_poisoned(again));
  int_div(s, again, a, a, 2); /* a[2] is 0 */
  CHECK_OK(nrt_memcpy(back, again, 2 * sizeof *back, NRT_MEMCPY_DEVICE_TO_HOST, s));
  CHECK(back[0] == 1 && back[1] == 1);
  nrt_free(again);
  nrt_free(a);
  nrt_free(zero);
}

int main(void) {
  unsetenv("NEURON_RT_VISIBLE_CORES");
  unsetenv("NEURON_RT_NUM_CORES");
  unsetenv("TORCH_NEURONX_DEVICE_MEMORY");
  unsetenv("NEURON_LAUNCH_BLOCKING");
  RUN_TEST(test_malloc_arguments);
  RUN_TEST(test_basic_stats);
  RUN_TEST(test_reuse);
  RUN_TEST(test_split_merge_best_fit);
  RUN_TEST(test_large_pool);
  RUN_TEST(test_peaks_and_resets);
  RUN_TEST(test_out_of_memory);
  RUN_TEST(test_empty_cache_keeps_live_segments);
  RUN_TEST(test_stream_ordered_reuse);
  RUN_TEST(test_record_stream);
  RUN_TEST(test_pointer_lookup);
  RUN_TEST(test_host_alloc);
  RUN_TEST(test_memcpy);
  RUN_TEST(test_concurrent_alloc);
  RUN_TEST(test_fork_child_allocates);
  RUN_TEST(test_failed_kernel_poisons_outputs);
  return TEST_RESULT();
}
