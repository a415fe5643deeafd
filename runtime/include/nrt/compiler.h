/* The graph compiler: graph (nrt/graph.h) -> program (nrt/program.h).
 *
 * Passes, in order (runtime/src/compiler/): legality (every node valid for
 * its op and kind, operands inside their buffers, writes only to outputs,
 * intermediates and mutated inputs); dead-node elimination (nodes whose
 * results nobody reads); fusion of pointwise chains over one iteration
 * space into tiled fused steps whose intermediates never reach memory;
 * memory planning (liveness-based offsets of intermediates in one
 * 64-byte-aligned arena, first fit by decreasing size, in-place reuse of a
 * dying input of identical layout); scheduling into the step list. With
 * every optimisation off the program runs the graph's nodes one by one:
 * the plain reference path the tests compare against. */
#ifndef NRT_COMPILER_H
#define NRT_COMPILER_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "nrt/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a pass's output can change for the same input: part of
 * every artifact and of a cache key. */
#define NRT_COMPILER_VERSION "nrtc 0.1"

typedef struct nrt_compile_options {
  bool fuse;          /* fuse pointwise chains */
  bool eliminate_dead;
  bool plan_memory;   /* share arena space by liveness; off: every intermediate its own range */
  bool inplace;       /* let a step write over a dying input of identical layout */
  const char *name;   /* the program's name in errors and dumps; NULL: "graph" */
} nrt_compile_options;

/* Everything on. */
void nrt_compile_options_default(nrt_compile_options *out_options);
/* Parses a flag string ("-O0", "-fno-fuse", "-fno-dce", "-fno-plan",
 * "-fno-inplace", space separated) on top of *options; unknown flags are an
 * error naming the flag (the NEURON_CC_FLAGS analogue). */
nrt_status nrt_compile_options_parse(const char *flags, nrt_compile_options *options);

typedef struct nrt_compile_report {
  int nodes_in;            /* graph nodes */
  int nodes_dead;          /* removed as dead */
  int nodes_fused;         /* nodes that ended up inside fused steps */
  int fused_steps;
  int steps;               /* program steps */
  int eliminated_buffers;  /* intermediates kept in L1 tiles only */
  int64_t intermediate_bytes; /* sum of the intermediates that need memory */
  int64_t arena_bytes;     /* what the plan needs */
  double seconds;          /* compile time */
} nrt_compile_report;

typedef struct nrt_program nrt_program;

/* Compiles; the program is the caller's (nrt_program_release). report may
 * be NULL. A graph the compiler cannot run fails with a message naming the
 * node, its op and its source location. */
nrt_status nrt_compile(const nrt_graph *graph, const nrt_compile_options *options,
                       nrt_program **out_program, nrt_compile_report *out_report);

/* The report as text (malloc'd; free()). */
char *nrt_compile_report_format(const nrt_compile_report *report);

#ifdef __cplusplus
}
#endif
#endif
