/* Device memory: one caching allocator per logical core.
 *
 * Memory is reserved lazily from the host in segments (mmap) counted
 * against the device's capacity. Freed blocks stay cached for reuse:
 * a block becomes reusable for allocations on the stream that allocated
 * it at once (the stream is in-order), and for other streams only after
 * the work recorded on it with nrt_record_stream() has completed, as with
 * CUDA's caching allocator. Blocks of <= 1 MiB come from 2 MiB segments
 * (small pool); larger ones from their own segments (large pool), split
 * when a cached block is much larger than asked. */
#ifndef NRT_MEMORY_H
#define NRT_MEMORY_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "nrt/status.h"
#include "nrt/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Allocates `size` bytes (size 0 gives NULL and success) for use on
 * `stream`. On NRT_ERROR_OUT_OF_MEMORY, nrt_last_error_message() gives
 * the figures (requested, allocated, reserved, capacity). */
nrt_status nrt_malloc(size_t size, nrt_stream *stream, void **out_ptr);
/* Returns the block to its device's cache. NULL is a no-op. */
nrt_status nrt_free(void *ptr);
/* Marks the block as used by `stream`, so its reuse waits for that
 * stream's work enqueued before the free. `ptr` may point inside the
 * block (a view); `stream` may belong to another device. */
nrt_status nrt_record_stream(void *ptr, nrt_stream *stream);
/* Device owning a pointer returned by nrt_malloc (also interior pointers);
 * NRT_ERROR_INVALID_ARGUMENT if it is not device memory. */
nrt_status nrt_pointer_get_device(const void *ptr, int *out_device);

/* Releases every cached, unused segment of the device to the host. */
nrt_status nrt_empty_cache(int device);

/* Changes a device's memory capacity (tests, or a user limit). Fails with
 * NRT_ERROR_INVALID_ARGUMENT if below what is currently reserved. */
nrt_status nrt_set_memory_capacity(int device, uint64_t bytes);

enum { NRT_POOL_ALL = 0, NRT_POOL_SMALL = 1, NRT_POOL_LARGE = 2, NRT_POOL_COUNT = 3 };

typedef struct nrt_stat {
  int64_t current, peak, allocated, freed;
} nrt_stat;

/* Mirrors the fields of torch.cuda.memory_stats(). Each nrt_stat array is
 * indexed by NRT_POOL_*. */
typedef struct nrt_memory_stats {
  nrt_stat allocation[NRT_POOL_COUNT];        /* blocks handed out (count) */
  nrt_stat segment[NRT_POOL_COUNT];           /* segments reserved (count) */
  nrt_stat active[NRT_POOL_COUNT];            /* allocated or pending-reuse blocks */
  nrt_stat inactive_split[NRT_POOL_COUNT];    /* free blocks inside split segments */
  nrt_stat allocated_bytes[NRT_POOL_COUNT];
  nrt_stat reserved_bytes[NRT_POOL_COUNT];
  nrt_stat active_bytes[NRT_POOL_COUNT];
  nrt_stat inactive_split_bytes[NRT_POOL_COUNT];
  nrt_stat requested_bytes[NRT_POOL_COUNT];   /* sizes as asked, before rounding */
  int64_t num_alloc_retries;                  /* cache flushed to satisfy a request */
  int64_t num_ooms;
  int64_t num_device_alloc;                   /* segments reserved from the host */
  int64_t num_device_free;                    /* segments returned to the host */
  uint64_t capacity;
} nrt_memory_stats;

nrt_status nrt_memory_get_stats(int device, nrt_memory_stats *out_stats);
nrt_status nrt_memory_reset_peak_stats(int device);
nrt_status nrt_memory_reset_accumulated_stats(int device);
/* free = capacity - reserved + cached-free within reserved... see memory.c */
nrt_status nrt_mem_get_info(int device, size_t *out_free, size_t *out_total);

/* The allocator's state, for torch.neuron.memory_snapshot(): every
 * reserved segment in address order with its blocks in address order.
 * Fills at most segment_cap / block_cap entries and returns the full
 * counts, so a caller sizes its arrays with a first call (caps 0) and asks
 * again while the counts exceed what it passed. */
typedef enum nrt_block_state {
  NRT_BLOCK_FREE,         /* cached, reusable */
  NRT_BLOCK_ALLOCATED,    /* handed out */
  NRT_BLOCK_PENDING_FREE, /* freed, waiting for streams named by nrt_record_stream */
} nrt_block_state;
typedef struct nrt_memory_block_info {
  uint64_t address, size, requested; /* requested: 0 for a free block */
  nrt_block_state state;
} nrt_memory_block_info;
typedef struct nrt_memory_segment_info {
  uint64_t address, size;
  int pool;         /* NRT_POOL_SMALL or NRT_POOL_LARGE */
  int stream_index; /* the stream the segment belongs to */
  size_t first_block, nblocks; /* its blocks in the block array */
} nrt_memory_segment_info;
nrt_status nrt_memory_snapshot(int device, nrt_memory_segment_info *out_segments, size_t segment_cap,
                               nrt_memory_block_info *out_blocks, size_t block_cap,
                               size_t *out_nsegments, size_t *out_nblocks);

/* Pinned (page-locked) host memory for asynchronous copies. */
nrt_status nrt_host_alloc(size_t size, void **out_ptr);
nrt_status nrt_host_free(void *ptr);
/* Pinned host memory in use (torch.neuron.host_memory_stats). */
typedef struct nrt_host_memory_stats {
  nrt_stat allocations;     /* blocks from nrt_host_alloc not yet freed */
  nrt_stat allocated_bytes;
} nrt_host_memory_stats;
nrt_status nrt_host_memory_get_stats(nrt_host_memory_stats *out_stats);
/* True if ptr lies inside a block from nrt_host_alloc. */
bool nrt_host_is_pinned(const void *ptr);

typedef enum nrt_memcpy_kind {
  NRT_MEMCPY_HOST_TO_DEVICE,
  NRT_MEMCPY_DEVICE_TO_HOST,
  NRT_MEMCPY_DEVICE_TO_DEVICE,
} nrt_memcpy_kind;

/* Enqueues a byte copy on `stream`. The caller keeps both buffers alive
 * until the stream passes this point. */
nrt_status nrt_memcpy_async(void *dst, const void *src, size_t bytes, nrt_memcpy_kind kind,
                            nrt_stream *stream);
/* nrt_memcpy_async followed by nrt_stream_synchronize. */
nrt_status nrt_memcpy(void *dst, const void *src, size_t bytes, nrt_memcpy_kind kind,
                      nrt_stream *stream);

#ifdef __cplusplus
}
#endif
#endif
