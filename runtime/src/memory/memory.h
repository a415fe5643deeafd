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

#endif
