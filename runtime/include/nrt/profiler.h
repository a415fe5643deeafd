/* The device profiler: a timestamped record of every task a stream runs.
 *
 * While the profiler is on, each task enqueued on any stream is marked at
 * enqueue (with the caller's correlation id and what the task costs), and
 * its worker stamps start and end on the device clock around the run.
 * Records go into one growing buffer shared by all streams (a slot is taken
 * with one atomic add; no lock on the per-task path). While the profiler is
 * off a task pays one relaxed load at enqueue and one branch when it runs.
 *
 * The device clock is CLOCK_MONOTONIC in nanoseconds (nrt_clock_ns); the
 * caller converts to its own time base.
 *
 * Correlation: a host thread pushes the id of the operation it is inside
 * (torch.profiler's op id) and pops it on the way out; a task enqueued on
 * that thread carries the innermost id, so its device row links to the op
 * that launched it. Ids are per thread; 0 means none. */
#ifndef NRT_PROFILER_H
#define NRT_PROFILER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "nrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nrt_activity_kind {
  NRT_ACTIVITY_KERNEL = 0,  /* a kernel launch (nrt_launch_kernel) */
  NRT_ACTIVITY_COPY = 1,    /* nrt_memcpy / nrt_memcpy_async */
  NRT_ACTIVITY_SYNC = 2,    /* event record / wait markers */
  NRT_ACTIVITY_TASK = 3,    /* any other task: compiled programs, collectives, host functions */
} nrt_activity_kind;

#define NRT_ACTIVITY_NAME_MAX 48

typedef struct nrt_activity {
  char name[NRT_ACTIVITY_NAME_MAX]; /* kernel (op) or task name, truncated */
  int32_t device;
  int32_t stream;                   /* index on its device */
  int32_t kind;                     /* nrt_activity_kind */
  int32_t failed;                   /* the task returned an error or was skipped */
  int32_t dtype;                    /* a kernel's compute nrt_dtype, -1 for other tasks */
  uint64_t ticket;                  /* the task's sequence number on its stream */
  uint64_t enqueue_ns, start_ns, end_ns; /* device clock */
  uint64_t bytes;                   /* bytes read + written, 0 if not known */
  uint64_t flops;                   /* floating-point operations, 0 if not known */
  uint64_t correlation;             /* the enqueuing thread's innermost id */
} nrt_activity;

/* Turns recording on with an empty buffer. NRT_ERROR_INVALID_ARGUMENT if it
 * is already on. */
nrt_status nrt_profiler_start(void);
/* Waits until every stream of every device has run what was enqueued, then
 * turns recording off; the records stay readable until the next start.
 * NRT_ERROR_INVALID_ARGUMENT if it is not on. */
nrt_status nrt_profiler_stop(void);
bool nrt_profiler_active(void);

/* Records written since the last start, and how many were dropped because
 * the buffer reached NRT_PROFILER_MAX_ACTIVITIES. */
#define NRT_PROFILER_MAX_ACTIVITIES ((size_t)1 << 24)
nrt_status nrt_profiler_count(size_t *out_count, uint64_t *out_dropped);
/* Copies records [first, first + max) into out (fewer at the end); only
 * while the profiler is off. */
nrt_status nrt_profiler_read(size_t first, size_t max, nrt_activity *out, size_t *out_count);

void nrt_profiler_push_correlation(uint64_t id);
void nrt_profiler_pop_correlation(void);

uint64_t nrt_clock_ns(void);

#ifdef __cplusplus
}
#endif
#endif
