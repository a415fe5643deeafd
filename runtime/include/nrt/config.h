/* Runtime configuration: the one table of environment variables.
 *
 * Every variable the project reads (runtime, glue and Python alike) is a row
 * of NRT_ENV_LIST. The runtime reads the process environment once, at first
 * use, and parses each row by its type; the glue and the Python package ask
 * the runtime for the parsed value instead of calling getenv themselves, and
 * docs/env-vars.md is generated from this table (tools/gen_env_docs.py).
 *
 * Grammar, the same for every row of a type:
 *  BOOL   1/0, true/false, yes/no, on/off (any case). Anything else is an
 *         error: nrt_init() fails naming the variable, the getters return
 *         the error, and the default stays in effect.
 *  INT    a decimal integer in the row's range.
 *  SIZE   bytes, or with a binary unit: 512M, 1.5GiB, 24 gb.
 *  CORES  core ids and ranges: 0-1, 2, 0,2,3.
 *  STRING any text (paths, flag lists), taken as given; the part that
 *         reads it validates it.
 * An empty value counts as unset. An INT, SIZE or CORES value that does not
 * parse is ignored with a warning on stderr (the default applies). */
#ifndef NRT_CONFIG_H
#define NRT_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include "nrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(id, name, type, default, reader, help) */
#define NRT_ENV_LIST(X)                                                                  \
  X(VISIBLE_CORES, "NEURON_RT_VISIBLE_CORES", CORES, "all",                            \
    "runtime: devices",                                                                \
    "visible logical cores: `0-1`, `2`, `0,2,3`; device `i` is the i-th listed core")  \
  X(NUM_CORES, "NEURON_RT_NUM_CORES", INT, "4", "runtime: devices",                     \
    "logical cores the device has (1..64); `NEURON_RT_VISIBLE_CORES` picks among them") \
  X(LAUNCH_BLOCKING, "NEURON_LAUNCH_BLOCKING", BOOL, "0", "runtime: streams",           \
    "true: every launch completes before returning and raises its own error")          \
  X(DEVICE_MEMORY, "TORCH_NEURONX_DEVICE_MEMORY", SIZE, "24GiB", "runtime: memory",     \
    "memory capacity per core: bytes, or with `K`/`M`/`G`/`T` (binary units)")         \
  X(KERNEL_THREADS, "TORCH_NEURONX_KERNEL_THREADS", INT, "online CPUs",                 \
    "runtime: kernel threads",                                                         \
    "threads that run kernels (1..256); under torchrun, unset means cores / LOCAL_WORLD_SIZE") \
  X(DISABLE_FALLBACK, "TORCH_NEURONX_DISABLE_FALLBACK", BOOL, "0", "glue: fallback",    \
    "true: an op without a native kernel raises `NotImplementedError` naming it "      \
    "instead of running on the CPU")                                                    \
  X(NEFF_CACHE_DIR, "TORCH_NEURONX_NEFF_CACHE_DIR", STRING,                             \
    "`~/.cache/torch_neuronx/neff`", "python: torch.compile",                          \
    "directory of the on-disk cache of compiled programs (our NEFFs), shared by processes") \
  X(DISABLE_NEFF_CACHE, "TORCH_NEURONX_DISABLE_NEFF_CACHE", BOOL, "0",                  \
    "python: torch.compile",                                                           \
    "true: `torch.compile(backend=\"neuron\")` neither reads nor writes the artifact "   \
    "cache (memory and disk); every graph compiles")                                   \
  X(DEBUG_DIR, "TORCH_NEURONX_DEBUG_DIR", STRING, "unset (no dump)",                    \
    "python: torch.compile",                                                           \
    "directory where each compiled graph's FX code, graph text, compiler report and "  \
    "program dump are written")                                                        \
  X(CC_FLAGS, "NEURON_CC_FLAGS", STRING, "empty", "python: torch.compile",              \
    "graph compiler flags, space separated: `-O0`, `-fno-fuse`, `-fno-dce`, "          \
    "`-fno-plan`, `-fno-inplace`; an unknown flag fails the compile")                  \
  X(DISABLE_FALLBACK_EXECUTION, "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", BOOL, "1",  \
    "python: torch.compile",                                                           \
    "false: an op the graph compiler cannot lower splits the graph and runs eagerly "  \
    "with a warning (listed by `get_fallback_ops()`) instead of failing the compile")  \
  X(NODE_ID, "TORCH_NEURONX_NODE_ID", STRING, "the host name", "python: distributed",   \
    "the machine a process counts as on for torch.distributed (ranks with the same id " \
    "share memory; different ids talk through Gloo): several machines on one host")    \
  X(DIST_TRANSPORT, "TORCH_NEURONX_DIST_TRANSPORT", STRING, "`hierarchical`",           \
    "python: distributed",                                                             \
    "`hierarchical`: shared memory within a machine, Gloo between machines; `shm`: "   \
    "one shared-memory communicator (all ranks on one host); `gloo`: every rank its "  \
    "own machine; read when each process group is created")

typedef enum nrt_env {
#define NRT_ENV_X(id, name, type, def, reader, help) NRT_ENV_##id,
  NRT_ENV_LIST(NRT_ENV_X)
#undef NRT_ENV_X
  NRT_ENV_COUNT
} nrt_env;

typedef struct nrt_env_info {
  const char *name;          /* "NEURON_LAUNCH_BLOCKING" */
  const char *type;          /* "bool", "int", "size" or "cores" */
  const char *default_value; /* as documented */
  const char *reader;        /* which part of the stack acts on it */
  const char *help;          /* one line, Markdown */
  const char *value;         /* the raw value read at first use; NULL if unset */
} nrt_env_info;

/* Describes row `var` (0..NRT_ENV_COUNT-1). */
nrt_status nrt_env_describe(nrt_env var, nrt_env_info *out_info);

/* The parsed value of a BOOL / INT row (the default when unset). A BOOL
 * row with an invalid value returns NRT_ERROR_INVALID_ARGUMENT with a
 * message naming the variable and the accepted spellings. */
nrt_status nrt_env_get_bool(nrt_env var, bool *out_value);
nrt_status nrt_env_get_int(nrt_env var, int64_t *out_value);

/* NEURON_LAUNCH_BLOCKING as parsed (false when invalid). */
int nrt_launch_blocking(void);

#ifdef __cplusplus
}
#endif
#endif
