/* Logical NeuronCores.
 *
 * The set of devices comes from the configuration (nrt/config.h:
 * NEURON_RT_VISIBLE_CORES, NEURON_RT_NUM_CORES, TORCH_NEURONX_DEVICE_MEMORY),
 * read once at first use. Default: 4 logical cores (one Trainium2 chip at
 * logical-core size 2). */
#ifndef NRT_DEVICE_H
#define NRT_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include "nrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NRT_MAX_DEVICES 64
#define NRT_DEFAULT_DEVICE_COUNT 4
#define NRT_DEFAULT_MEMORY_CAPACITY (24ull << 30)

typedef struct nrt_device_properties {
  char name[64];            /* "NeuronCore-v3 (logical, software)" */
  int index;                /* 0..count-1 as seen by the program */
  int physical_core;        /* the id named in NEURON_RT_VISIBLE_CORES */
  int core_count;           /* physical cores per logical core (2) */
  uint64_t total_memory;    /* capacity in bytes */
  int worker_threads;       /* host threads that execute kernels */
} nrt_device_properties;

/* Idempotent and thread-safe: reads the configuration and sets up every
 * device's streams and memory. Fails (naming the variable) when the
 * environment holds an invalid boolean; other entry points initialise
 * what they need lazily and do not report that error. */
nrt_status nrt_init(void);
nrt_status nrt_get_device_count(int *out_count);
nrt_status nrt_get_device_properties(int device, nrt_device_properties *out_props);

/* The calling thread's current device (default 0). */
nrt_status nrt_set_device(int device);
nrt_status nrt_get_device(int *out_device);

/* Waits for all streams of the device; returns the first sticky error. */
nrt_status nrt_device_synchronize(int device);

/* Time the device's stream workers have spent running work since the
 * process started (summed over its streams), and the monotonic clock now,
 * both in ns: utilization over an interval is the ratio of the deltas. */
nrt_status nrt_device_busy_time(int device, uint64_t *out_busy_ns, uint64_t *out_now_ns);

#ifdef __cplusplus
}
#endif
#endif
