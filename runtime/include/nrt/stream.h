/* Streams: in-order asynchronous queues, each served by its own runtime
 * worker thread (created lazily on first use).
 *
 * Each device has a fixed table of NRT_STREAMS_PER_DEVICE streams:
 * index 0 is the default stream, the rest form a pool handed out
 * round-robin (like CUDA's stream pool). Streams live as long as the
 * process; there is nothing to destroy. */
#ifndef NRT_STREAM_H
#define NRT_STREAM_H

#include <stdint.h>
#include "nrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NRT_STREAMS_PER_DEVICE 32

typedef struct nrt_stream nrt_stream;

nrt_status nrt_stream_get(int device, int index, nrt_stream **out_stream);
nrt_status nrt_stream_get_default(int device, nrt_stream **out_stream);
/* Next pool stream (index 1..NRT_STREAMS_PER_DEVICE-1), round-robin. */
nrt_status nrt_stream_acquire(int device, nrt_stream **out_stream);

int nrt_stream_device(const nrt_stream *stream);
int nrt_stream_index(const nrt_stream *stream);

/* The stream at address `ptr` (a handle another library got from this
 * runtime, for torch.neuron.ExternalStream): its device and index.
 * NRT_ERROR_INVALID_ARGUMENT if ptr is not one of the runtime's streams;
 * the address is compared, never dereferenced. */
nrt_status nrt_stream_lookup(const void *ptr, int *out_device, int *out_index);

/* Blocks until all enqueued work ran. Returns (and clears) the sticky
 * error of the stream if a task failed; nrt_last_error_message() then
 * names the kernel. */
nrt_status nrt_stream_synchronize(nrt_stream *stream);
/* NRT_SUCCESS if idle, NRT_ERROR_NOT_READY if work is pending. */
nrt_status nrt_stream_query(nrt_stream *stream);

/* A unit of work. `run` executes on the stream's worker thread; a non-
 * success return makes the error sticky, naming `name`. `release` (may be
 * NULL) frees `arg` after the run, also when the stream skips the task. */
typedef nrt_status (*nrt_task_fn)(void *arg);
typedef void (*nrt_release_fn)(void *arg);

/* Enqueues a task. `name` must be a string with static lifetime. */
nrt_status nrt_stream_enqueue(nrt_stream *stream, const char *name, nrt_task_fn run,
                              void *arg, nrt_release_fn release);

/* Host function helper with no status (like cudaLaunchHostFunc). */
nrt_status nrt_stream_launch_host_func(nrt_stream *stream, void (*fn)(void *), void *arg);

/* Number of tasks enqueued / completed so far (monotonic). Used by
 * events and by the allocator's stream-ordered reuse. */
uint64_t nrt_stream_enqueued(const nrt_stream *stream);
uint64_t nrt_stream_completed(const nrt_stream *stream);
/* Blocks until completed >= target. Returns (and clears, as
 * nrt_stream_synchronize does) the sticky error, if any. */
nrt_status nrt_stream_wait_until(nrt_stream *stream, uint64_t target);

#ifdef __cplusplus
}
#endif
#endif
