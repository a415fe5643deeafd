/* The exec layer: the kernel thread pool (parallel.c), streams (stream.c)
 * and events (event.c). Below memory and kernels; above core. */
#ifndef NRT_EXEC_EXEC_H
#define NRT_EXEC_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/core.h"

/* ---- parallel.c: the kernel thread pool --------------------------------------
 * Splits [0, n) into chunks of at least `grain` items and runs
 * fn(ctx, begin, end) on the pool threads and the caller. Safe to call
 * from several stream workers at once: when the pool is busy with another
 * launch, the caller runs the whole range itself (no deadlock, no
 * oversubscription). Thread count: TORCH_NEURONX_KERNEL_THREADS or the
 * number of online CPUs. */
typedef void (*nrt_range_fn)(void *ctx, int64_t begin, int64_t end);
void nrt_parallel_for(int64_t n, int64_t grain, nrt_range_fn fn, void *ctx);
int nrt_pool_threads(void);

/* Spin-then-sleep. Runtime threads poll briefly for new work before
 * sleeping on a condition variable, because waking a sleeping thread
 * (futex + cross-CPU interrupt) costs microseconds on the per-op path.
 * Polls ready(ctx) for up to max_ns, yielding the CPU to runnable threads
 * after a short busy phase; returns whether it became ready. */
typedef bool (*nrt_ready_fn)(const void *ctx);
bool nrt_spin_until(nrt_ready_fn ready, const void *ctx, uint64_t max_ns);

/* ---- stream.c ------------------------------------------------------------------ */
/* Allocates every device's streams at first use; idempotent. */
void nrt_streams_ready(void);
nrt_stream *nrt_stream_at(int device, int index); /* unchecked, after nrt_streams_ready */
/* NRT_TASK_ALWAYS_RUN: runs even while the stream holds a sticky error
 * (event markers).
 * NRT_TASK_RUN_IF_IDLE: a small task (a kernel over a few thousand
 * elements, a short copy) that may run on the enqueuing thread when the
 * stream has nothing queued or running: handing it to the worker would
 * cost more than running it. Ordering is unchanged (nothing earlier is
 * pending, later tasks wait for it) and so are errors: a failure is
 * sticky on the stream, reported at the next synchronisation as if the
 * worker had run it. */
enum { NRT_TASK_ALWAYS_RUN = 1u, NRT_TASK_RUN_IF_IDLE = 2u };
/* Largest argument nrt_stream_enqueue_ex copies into the task itself: a
 * launch descriptor and a little more. */
#define NRT_TASK_INLINE_MAX (sizeof(nrt_launch) + 64)
/* What a task costs, for the profiler's record (nrt/profiler.h). */
typedef struct nrt_task_cost {
  int kind;  /* nrt_activity_kind */
  int dtype; /* a kernel's compute nrt_dtype, -1 otherwise */
  uint64_t bytes, flops;
} nrt_task_cost;
/* nrt_stream_enqueue with extras for the runtime's own tasks:
 * copy_size > 0 copies *arg into the task (no allocation; run and release
 * then receive the copy); cost (may be NULL: a plain task) is recorded
 * while the profiler is on, so callers fill it only then; out_ticket (may
 * be NULL) receives the task's sequence number: the task has run once
 * nrt_stream_completed() >= it. */
nrt_status nrt_stream_enqueue_ex(nrt_stream *stream, const char *name, nrt_task_fn run,
                                 void *arg, size_t copy_size, nrt_release_fn release,
                                 unsigned flags, const nrt_task_cost *cost, uint64_t *out_ticket);
/* Waits until completed >= target, leaving any sticky error in place. */
void nrt_stream_wait_quiet(nrt_stream *stream, uint64_t target);
/* The sticky error if the failing task's ticket is <= max_ticket (else
 * NRT_SUCCESS); copies its message into msg. Does not clear it. */
nrt_status nrt_stream_peek_error(nrt_stream *stream, uint64_t max_ticket, char *msg,
                                 size_t msg_size);
/* Waits for every stream of the device, leaving sticky errors in place. */
void nrt_device_wait_idle(int device);

/* ---- profile.c: the profiler's record (nrt/profiler.h) -------------------------
 * The enqueuing thread's innermost correlation id (0 for none), and one
 * finished task's record; stream.c calls both only while the profiler is
 * on (nrt_profiler_active). */
uint64_t nrt_profile_correlation(void);
struct nrt_activity;
void nrt_profile_record(const struct nrt_activity *activity);

/* ---- capture_link.c: a stream being captured into a graph ---------------------
 * The graph capture (compiler/capture.c, a higher layer) attaches itself to
 * one stream per device and is told, through this observer, about what the
 * lower layers see: launches (api), synchronising calls (streams),
 * allocations, frees and copies (memory). The lower layers test
 * nrt_capture_active() first, one relaxed load, so the eager paths pay
 * nothing while no capture runs. The notify functions call the observer
 * under the device's capture lock, so a capture cannot end (and free
 * itself) while another thread is inside its observer. `own` says whether
 * the event happened on the capturing stream itself. */
typedef struct nrt_capture_observer {
  nrt_status (*launch)(void *capture, bool own, const nrt_launch *launch);
  nrt_status (*sync)(void *capture, const char *fn);
  void (*malloc_done)(void *capture, void *ptr, size_t size);
  void (*free_done)(void *capture, void *ptr);
  nrt_status (*memcpy_)(void *capture, bool own, void *dst, const void *src, size_t bytes,
                        int kind);
} nrt_capture_observer;
bool nrt_capture_active(int device);
/* Fails with NRT_ERROR_INVALID_ARGUMENT if the device already captures. */
nrt_status nrt_capture_attach(nrt_stream *stream, void *capture, const nrt_capture_observer *observer);
void nrt_capture_detach(nrt_stream *stream);
nrt_status nrt_capture_notify_launch(nrt_stream *stream, const nrt_launch *launch);
/* Only the capturing stream's synchronising calls are refused. */
nrt_status nrt_capture_notify_sync(nrt_stream *stream, const char *fn);
void nrt_capture_notify_malloc(nrt_stream *stream, void *ptr, size_t size);
void nrt_capture_notify_free(int device, void *ptr);
nrt_status nrt_capture_notify_memcpy(nrt_stream *stream, void *dst, const void *src, size_t bytes,
                                     int kind);

#endif
