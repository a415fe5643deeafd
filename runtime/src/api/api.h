/* The api layer: the entry points that need every layer below (runtime
 * initialisation and device properties in init.c; launch validation,
 * enqueue and the dispatch to a kernel engine in launch.c / dispatch.c). */
#ifndef NRT_API_API_H
#define NRT_API_API_H

#include "core/core.h"

/* The checks nrt_launch_kernel / nrt_launch_run apply; `fn` names the
 * caller in the error message. */
nrt_status nrt_launch_validate(const char *fn, const nrt_launch *launch);

/* cost.c: a launch's bytes and FLOPs for the profiler's record. */
struct nrt_task_cost;
void nrt_launch_cost(const nrt_launch *launch, struct nrt_task_cost *out_cost);

/* The one switch from a validated launch to its kernel engine. */
nrt_status nrt_kernel_execute(const nrt_launch *launch);

#endif
