/* Runtime-internal interfaces shared between runtime/src files. Not
 * installed; the glue must only use runtime/include. */
#ifndef NRT_INTERNAL_H
#define NRT_INTERNAL_H

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

/* ---- device table (device.c) ------------------------------------------ */
int nrt_device_valid(int device);  /* 1 if 0 <= device < count (after init) */
uint64_t nrt_device_capacity(int device);

/* ---- memory (memory.c) ------------------------------------------------ */
void nrt_memory_init_device(int device, uint64_t capacity);

#endif
