/* The core layer: status and error messages, dtypes, the configuration
 * (one environment-variable table), the device table and the op table.
 * Layers above (exec, memory, kernels, api) may include this header; core
 * itself includes only the public headers. */
#ifndef NRT_CORE_CORE_H
#define NRT_CORE_CORE_H

#include <stdbool.h>
#include <stdint.h>
#include "nrt/nrt.h"

/* ---- status.c -------------------------------------------------------------- */
#define NRT_ERROR_MESSAGE_MAX 1024
/* Workers clear the detail before each task so a failure only reports the
 * detail that task produced. */
void nrt_clear_error_message(void);

/* ---- config.c: the process configuration, read once ------------------------ */
typedef struct nrt_config {
  int device_count;
  int physical_cores[NRT_MAX_DEVICES];
  uint64_t capacity;      /* per device, bytes */
  int kernel_threads;     /* 0: one per online CPU */
  bool launch_blocking;
  bool disable_fallback;
  const char *raw[NRT_ENV_COUNT]; /* the values read; NULL when unset or empty */
  bool invalid[NRT_ENV_COUNT];    /* a BOOL row whose value did not parse */
  nrt_status status;      /* NRT_SUCCESS, or the first invalid BOOL row or missing core */
  char error[256];
} nrt_config;
const nrt_config *nrt_config_get(void);
/* The configuration's status, with its message set when it failed. */
nrt_status nrt_config_check(void);

/* Parsing split from the process environment so tests can feed a fake one. */
typedef const char *(*nrt_env_lookup)(void *ctx, const char *name);
void nrt_config_from_env(nrt_env_lookup lookup, void *ctx, nrt_config *out_config);
/* "0-1", "2", "0,2,3", "0-1,4": distinct ids, at most max_cores of them. */
nrt_status nrt_parse_visible_cores(const char *text, int max_cores, int *out_cores,
                                   int *out_count);
/* "1073741824", "512M", "1.5GiB", "24 gb": binary multiples, case-insensitive. */
nrt_status nrt_parse_memory_size(const char *text, uint64_t *out_bytes);

/* ---- device.c ------------------------------------------------------------------ */
int nrt_device_count(void);
int nrt_device_valid(int device); /* 1 if 0 <= device < count */
int nrt_device_physical_core(int device);
/* Sets "fn: invalid device N (the runtime has M devices)". */
nrt_status nrt_invalid_device(const char *fn, int device);

/* ---- ops.c: the op table over every family ------------------------------------- */
bool nrt_op_valid(nrt_op op);
int nrt_op_max_inputs(nrt_op op);

#endif
