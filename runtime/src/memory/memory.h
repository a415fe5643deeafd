/* The memory layer: the per-device caching allocator and pinned host
 * memory (allocator.c). Above exec: stream-ordered reuse asks the streams
 * how far they have run. */
#ifndef NRT_MEMORY_MEMORY_H
#define NRT_MEMORY_MEMORY_H

#include "core/core.h"
#include "exec/exec.h"

/* Sets up every device's allocator from the configuration; idempotent,
 * called by each entry point of the layer. */
void nrt_memory_ready(void);
uint64_t nrt_memory_capacity(int device);

/* Marks the block holding `ptr` (an interior pointer is fine) as written by
 * a failed kernel, until it is freed; the check is one atomic load while no
 * block is poisoned. Pointers that are not device memory are ignored. */
void nrt_memory_poison(const void *ptr);
bool nrt_memory_is_poisoned(const void *ptr);

#endif
