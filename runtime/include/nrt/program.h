/* Programs: the compiler's output (our NEFF), runnable as one task.
 *
 * A program holds everything needed to run a graph: its steps (launch
 * descriptors whose operands are (slot | arena | constant, offset) instead
 * of pointers, and fused pointwise chains), the slot table, the arena
 * size, constants, Philox fix-ups, source locations, and the compiler
 * version, flags and host CPU features it was built with. It serialises to
 * one self-describing, versioned, checksummed blob (docs/graph-format.md,
 * "Program artifact"), so a corrupted cache entry is detected on load.
 *
 * Running: the caller allocates the outputs and an arena of
 * nrt_program_arena_bytes() bytes (device memory, 64-byte aligned; the
 * caching allocator's blocks are), binds a pointer to every slot, and
 * calls nrt_program_run: ONE task on the stream runs every step in order
 * (kernels still split across the thread pool). An error inside is sticky
 * on the stream like an eager launch's and names the program, the failing
 * step's op and its source location. The program is reference-counted; a
 * run holds a reference until its task finished. */
#ifndef NRT_PROGRAM_H
#define NRT_PROGRAM_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "nrt/compiler.h"
#include "nrt/graph.h"
#include "nrt/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NRT_PROGRAM_FORMAT_VERSION 1

void nrt_program_retain(nrt_program *program);
void nrt_program_release(nrt_program *program); /* NULL is a no-op */

/* ---- layout queries -------------------------------------------------------------- */
const char *nrt_program_name(const nrt_program *program);
int64_t nrt_program_arena_bytes(const nrt_program *program);
int nrt_program_slot_count(const nrt_program *program);
typedef struct nrt_program_slot {
  nrt_buffer_kind kind; /* NRT_BUFFER_INPUT or NRT_BUFFER_OUTPUT */
  int64_t bytes;
  bool mutated;
} nrt_program_slot;
nrt_status nrt_program_slot_info(const nrt_program *program, int slot, nrt_program_slot *out_slot);
int nrt_program_step_count(const nrt_program *program);
/* Philox counter values one run consumes (add to the generator's offset
 * after each run), and whether the program draws at all. */
uint64_t nrt_program_rng_advance(const nrt_program *program);
bool nrt_program_uses_rng(const nrt_program *program);
/* The compiler version, flags and CPU features recorded at compile time. */
const char *nrt_program_compiler(const nrt_program *program);
const char *nrt_program_flags(const nrt_program *program);
const char *nrt_program_cpu_features(const nrt_program *program);
/* This host's features in the same spelling (for a cache key). */
const char *nrt_host_cpu_features(void);

/* ---- running ----------------------------------------------------------------------- */
typedef struct nrt_program_run_args {
  void *const *slots;     /* slot -> device pointer, nrt_program_slot_count() entries */
  int nslots;
  void *arena;            /* nrt_program_arena_bytes() bytes; NULL if that is 0 */
  uint64_t rng_seed;      /* the generator's seed and offset now: draws use */
  uint64_t rng_base_offset; /* base + (recorded - captured base) */
} nrt_program_run_args;

/* Enqueues the whole program as one task on `stream`. Argument errors
 * return at once; execution errors are sticky on the stream. */
nrt_status nrt_program_run(nrt_program *program, nrt_stream *stream, const nrt_program_run_args *args);
/* Runs on the calling thread, synchronously (tests, nrtc). */
nrt_status nrt_program_run_sync(nrt_program *program, const nrt_program_run_args *args);

/* ---- the artifact ------------------------------------------------------------------- */
/* A malloc'd blob (free()). */
nrt_status nrt_program_serialize(const nrt_program *program, void **out_data, size_t *out_size);
/* Rejects bad magic, version, checksum or a truncated blob with
 * NRT_ERROR_INVALID_ARGUMENT and a message saying which. */
nrt_status nrt_program_deserialize(const void *data, size_t size, nrt_program **out_program);
nrt_status nrt_program_save(const nrt_program *program, const char *path);
nrt_status nrt_program_load(const char *path, nrt_program **out_program);
/* A human-readable listing: header, slots, arena, steps (malloc'd; free()). */
char *nrt_program_dump(const nrt_program *program);

#ifdef __cplusplus
}
#endif
#endif
