/* The device profiler's record (nrt/profiler.h): the on/off switch, the
 * per-thread correlation stack and the activity buffer the stream workers
 * write into (exec/stream.c stamps the tasks).
 *
 * The buffer is a table of fixed-size chunks allocated on first use, so a
 * slot is claimed with one atomic add and records never move: no lock on
 * the per-task path, and a long profile grows without copying. Chunks are
 * kept across profiles for reuse. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/exec.h"
#include "nrt/profiler.h"

#define CHUNK_BITS 13 /* 8192 records of 128 bytes: 1 MiB per chunk */
#define CHUNK_SIZE ((size_t)1 << CHUNK_BITS)
#define MAX_CHUNKS (NRT_PROFILER_MAX_ACTIVITIES >> CHUNK_BITS)

_Static_assert(NRT_PROFILER_MAX_ACTIVITIES % CHUNK_SIZE == 0, "whole chunks");

static atomic_bool active;
static _Atomic(nrt_activity *) chunks[MAX_CHUNKS];
static _Atomic size_t next_slot;
static _Atomic uint64_t dropped;

/* Depth beyond the stack's room still counts, so pushes and pops stay
 * paired; the innermost id that fits is reported. */
#define CORRELATION_DEPTH 64
static _Thread_local uint64_t corr_stack[CORRELATION_DEPTH];
static _Thread_local int corr_depth;

uint64_t nrt_clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool nrt_profiler_active(void) { return atomic_load_explicit(&active, memory_order_relaxed); }

void nrt_profiler_push_correlation(uint64_t id) {
  if (corr_depth < CORRELATION_DEPTH) corr_stack[corr_depth] = id;
  corr_depth++;
}

void nrt_profiler_pop_correlation(void) {
  if (corr_depth > 0) corr_depth--;
}

uint64_t nrt_profile_correlation(void) {
  if (corr_depth == 0) return 0;
  int top = corr_depth < CORRELATION_DEPTH ? corr_depth : CORRELATION_DEPTH;
  return corr_stack[top - 1];
}

static nrt_activity *chunk_at(size_t c) {
  nrt_activity *p = atomic_load_explicit(&chunks[c], memory_order_acquire);
  if (p) return p;
  nrt_activity *fresh = calloc(CHUNK_SIZE, sizeof *fresh);
  if (!fresh) return NULL;
  nrt_activity *expected = NULL;
  if (atomic_compare_exchange_strong_explicit(&chunks[c], &expected, fresh, memory_order_acq_rel,
                                              memory_order_acquire))
    return fresh;
  free(fresh); /* another worker allocated it first */
  return expected;
}

void nrt_profile_record(const nrt_activity *a) {
  size_t i = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed);
  nrt_activity *chunk = i < NRT_PROFILER_MAX_ACTIVITIES ? chunk_at(i >> CHUNK_BITS) : NULL;
  if (!chunk) {
    atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
    return;
  }
  chunk[i & (CHUNK_SIZE - 1)] = *a;
}

nrt_status nrt_profiler_start(void) {
  /* Reset while still off: a task marked by the new profile must not
   * land in a slot the reset then forgets. The exchange settles two
   * threads starting at once. */
  bool expected = false;
  if (!atomic_load(&active)) {
    atomic_store(&next_slot, 0);
    atomic_store(&dropped, 0);
    if (atomic_compare_exchange_strong(&active, &expected, true)) return NRT_SUCCESS;
  }
  nrt_set_error_message("nrt_profiler_start: the profiler is already on");
  return NRT_ERROR_INVALID_ARGUMENT;
}

nrt_status nrt_profiler_stop(void) {
  if (!atomic_load(&active)) {
    nrt_set_error_message("nrt_profiler_stop: the profiler is not on");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  /* Every marked task stamps its record before its completion is
   * published, so once the streams are idle the buffer is complete. */
  int n = nrt_device_count();
  for (int d = 0; d < n; d++) nrt_device_wait_idle(d);
  atomic_store(&active, false);
  return NRT_SUCCESS;
}

static size_t recorded(void) {
  size_t n = atomic_load(&next_slot);
  return n < NRT_PROFILER_MAX_ACTIVITIES ? n : NRT_PROFILER_MAX_ACTIVITIES;
}

nrt_status nrt_profiler_count(size_t *out_count, uint64_t *out_dropped) {
  if (!out_count) {
    nrt_set_error_message("nrt_profiler_count: out_count is NULL");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  *out_count = recorded();
  if (out_dropped) *out_dropped = atomic_load(&dropped);
  return NRT_SUCCESS;
}

nrt_status nrt_profiler_read(size_t first, size_t max, nrt_activity *out, size_t *out_count) {
  if (!out_count || (max > 0 && !out)) {
    nrt_set_error_message("nrt_profiler_read: %s is NULL", out_count ? "out" : "out_count");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  if (atomic_load(&active)) {
    nrt_set_error_message("nrt_profiler_read: stop the profiler before reading its records");
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  size_t n = recorded();
  size_t got = 0;
  for (size_t i = first; i < n && got < max; i++) {
    nrt_activity *chunk = atomic_load(&chunks[i >> CHUNK_BITS]);
    if (chunk) {
      out[got] = chunk[i & (CHUNK_SIZE - 1)];
    } else { /* the chunk could not be allocated: counted in dropped */
      memset(&out[got], 0, sizeof out[got]);
      strcpy(out[got].name, "(dropped)");
      out[got].failed = 1;
    }
    got++;
  }
  *out_count = got;
  return NRT_SUCCESS;
}
