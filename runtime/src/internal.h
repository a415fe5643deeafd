/* Runtime-internal interfaces shared between runtime/src files. Not
 * installed; the glue must only use runtime/include. */
#ifndef NRT_INTERNAL_H
#define NRT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include "nrt/nrt.h"

/* ---- kernel thread pool (pool.c) -------------------------------------
 * Splits [0, n) into chunks of at least `grain` items and runs
 * fn(ctx, begin, end) on the pool threads and the caller. Safe to call
 * from several stream workers at once: when the pool is busy with another
 * launch, the caller runs the whole range itself (no deadlock, no
 * oversubscription). Thread count: TORCH_NEURONX_KERNEL_THREADS or the
 * number of online CPUs. */
typedef void (*nrt_range_fn)(void *ctx, int64_t begin, int64_t end);
void nrt_parallel_for(int64_t n, int64_t grain, nrt_range_fn fn, void *ctx);
int nrt_pool_threads(void);

/* ---- kernel entry points (kernels/ *.c) ------------------------------
 * Called on a stream worker with a validated descriptor. */
nrt_status nrt_kernel_execute(const nrt_launch *launch);     /* dispatch on kind */
nrt_status nrt_pointwise_execute(const nrt_launch *launch);
nrt_status nrt_reduce_execute(const nrt_launch *launch);
nrt_status nrt_row_execute(const nrt_launch *launch);
nrt_status nrt_gemm_execute(const nrt_launch *launch);
nrt_status nrt_index_execute(const nrt_launch *launch);     /* kernels/index.c */
nrt_status nrt_norm_execute(const nrt_launch *launch);      /* kernels/norm.c */
nrt_status nrt_linalg_execute(const nrt_launch *launch);    /* kernels/linalg.c */
nrt_status nrt_conv_execute(const nrt_launch *launch);      /* kernels/convolution.c */
nrt_status nrt_pool_execute(const nrt_launch *launch);      /* kernels/pooling.c */
nrt_status nrt_channel_norm_execute(const nrt_launch *launch); /* kernels/channel_norm.c */
nrt_status nrt_decomp_execute(const nrt_launch *launch);    /* kernels/decomp.c */
nrt_status nrt_resample_execute(const nrt_launch *launch);  /* kernels/resample.c */
nrt_status nrt_select_execute(const nrt_launch *launch);    /* kernels/select.c */
nrt_status nrt_segment_execute(const nrt_launch *launch);   /* kernels/segment.c */
nrt_status nrt_complex_execute(const nrt_launch *launch);   /* kernels/complex.c */
nrt_status nrt_attention_execute(const nrt_launch *launch); /* kernels/attention.c */

/* ---- device table (device.c) ------------------------------------------ */
int nrt_device_valid(int device);  /* 1 if 0 <= device < count (after init) */
uint64_t nrt_device_capacity(int device);

/* ---- memory (memory.c) ------------------------------------------------ */
void nrt_memory_init_device(int device, uint64_t capacity);

/* ==== runtime core: status, device, stream, memory =====================
 * (status.c, device.c, stream.c, event.c, memory.c) */

#define NRT_ERROR_MESSAGE_MAX 1024

/* status.c: workers clear the detail before each task so a failure only
 * reports the detail that task produced. */
void nrt_clear_error_message(void);

/* device.c: environment parsing, split from nrt_init so tests can feed a
 * fake environment. Invalid values fall back to the default with a
 * warning on stderr. */
typedef const char *(*nrt_env_lookup)(void *ctx, const char *name);
typedef struct nrt_env_config {
  int device_count;
  int physical_cores[NRT_MAX_DEVICES];
  uint64_t capacity;
  int launch_blocking;
} nrt_env_config;
void nrt_config_from_env(nrt_env_lookup lookup, void *ctx, nrt_env_config *out_config);
/* "0-1", "2", "0,2,3", "0-1,4": distinct ids, at most max_cores of them. */
nrt_status nrt_parse_visible_cores(const char *text, int max_cores, int *out_cores,
                                   int *out_count);
/* "1073741824", "512M", "1.5GiB", "24 gb": binary multiples, case-insensitive. */
nrt_status nrt_parse_memory_size(const char *text, uint64_t *out_bytes);
int nrt_device_count(void); /* after nrt_init */

/* pool.c: spin-then-sleep. Runtime threads poll briefly for new work
 * before sleeping on a condition variable, because waking a sleeping
 * thread (futex + cross-CPU interrupt) costs microseconds on the per-op
 * path. Polls ready(ctx) for up to max_ns, yielding the CPU to runnable
 * threads after a short busy phase; returns whether it became ready. */
typedef bool (*nrt_ready_fn)(const void *ctx);
bool nrt_spin_until(nrt_ready_fn ready, const void *ctx, uint64_t max_ns);

/* stream.c */
void nrt_streams_init(int device_count);
nrt_stream *nrt_stream_at(int device, int index); /* unchecked */
/* Task runs even while the stream holds a sticky error (event markers). */
enum { NRT_TASK_ALWAYS_RUN = 1u };
/* Largest argument nrt_stream_enqueue_ex copies into the task itself. */
#define NRT_TASK_INLINE_MAX (sizeof(nrt_launch) + 64)
/* nrt_stream_enqueue with two extras for the runtime's own tasks:
 * copy_size > 0 copies *arg into the task (no allocation; run and release
 * then receive the copy), and out_ticket (may be NULL) receives the task's
 * sequence number: the task has run once nrt_stream_completed() >= it. */
nrt_status nrt_stream_enqueue_ex(nrt_stream *stream, const char *name, nrt_task_fn run,
                                 void *arg, size_t copy_size, nrt_release_fn release,
                                 unsigned flags, uint64_t *out_ticket);
/* Waits until completed >= target, leaving any sticky error in place. */
void nrt_stream_wait_quiet(nrt_stream *stream, uint64_t target);
/* The sticky error if the failing task's ticket is <= max_ticket (else
 * NRT_SUCCESS); copies its message into msg. Does not clear it. */
nrt_status nrt_stream_peek_error(nrt_stream *stream, uint64_t max_ticket, char *msg,
                                 size_t msg_size);
/* Waits for every stream of the device, leaving sticky errors in place. */
void nrt_device_wait_idle(int device);

/* launch.c: the checks nrt_launch_kernel/nrt_launch_run apply; `fn`
 * names the caller in the error message. */
nrt_status nrt_launch_validate(const char *fn, const nrt_launch *launch);

/* memory.c */
nrt_status nrt_memory_set_capacity(int device, uint64_t bytes);
uint64_t nrt_memory_capacity(int device);

#endif
