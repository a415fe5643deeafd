/* The compiler layer's private header: the graph and program structures
 * and the interfaces between its files.
 *
 *   graph.c        the graph object (nrt/graph.h)
 *   graph_text.c   the "nrt-graph 1" text format, write and parse
 *   capture.c      recording launches into a graph (nrt/capture.h)
 *   legality.c     pass 1: every node runnable, operands inside buffers
 *   fusion.c       pass 3: pointwise chains -> fused steps
 *   plan.c         passes 2 and 4: dead nodes, arena offsets by liveness
 *   compile.c      the pipeline, scheduling into steps, the report, flags
 *   program.c      the program object, its queries and the dump
 *   artifact.c     the binary artifact: serialise / deserialise
 *   run.c          running a program as one stream task
 *
 * The layer sits above api/: it validates with the api's launch checks and
 * runs steps through its kernel dispatch. The lower layers reach the
 * capture only through the observer of exec/capture_link.c. */
#ifndef NRT_COMPILER_COMPILER_H
#define NRT_COMPILER_COMPILER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/api.h"
#include "kernels/kernels.h"
#include "nrt/capture.h"
#include "nrt/compiler.h"
#include "nrt/graph.h"
#include "nrt/program.h"

/* ---- graph.c ---------------------------------------------------------------------- */
struct nrt_graph {
  nrt_graph_buffer *buffers; /* constant data and node locations are owned */
  int nbuffers, cap_buffers;
  nrt_graph_node *nodes;
  int nnodes, cap_nodes;
  uint64_t rng_seed, rng_base_offset, rng_advance;
};

/* Reads a whole file, NUL-terminated (graph_text.c); fn names the caller. */
nrt_status nrt_read_file(const char *fn, const char *path, char **out_data, size_t *out_size);

/* Elements the node iterates over (product of sizes; 1 for ndim 0). */
int64_t nrt_node_numel(const nrt_graph_node *node);
/* The byte range [lo, hi) operand k reaches relative to its offset, when
 * the op's operand layout follows the launch's sizes (POINTWISE, REDUCE,
 * ROW kinds; GEMM's documented layout). false: the family has its own
 * layout and only the start is checked. An empty range gives lo == hi. */
bool nrt_operand_extent(const nrt_graph_node *node, int k, int64_t *out_lo, int64_t *out_hi);
/* The Philox params of a launch as the capture marks them (random
 * pointwise ops p0/p1, attention with dropout p1/p2), or -1. */
void nrt_rng_params(const nrt_launch *launch, int *out_seed_param, int *out_offset_param);

/* ---- legality.c --------------------------------------------------------------------- */
/* NRT_ERROR_INVALID_ARGUMENT (or UNSUPPORTED) with a message naming the
 * first bad node, its op and location. */
nrt_status nrt_check_legality(const nrt_graph *graph);
/* "node 3 (ADD at model.py:12)" into buf. */
void nrt_node_label(const nrt_graph *graph, int node, char *buf, size_t size);

/* ---- steps: what fusion and scheduling produce --------------------------------------- */
/* Where an operand's memory comes from at run time. */
typedef enum nrt_ref_kind { NRT_REF_NONE, NRT_REF_SLOT, NRT_REF_ARENA, NRT_REF_CONSTANT } nrt_ref_kind;
typedef struct nrt_ref {
  int32_t kind;  /* nrt_ref_kind */
  int32_t index; /* slot or constant id */
  int64_t offset;
} nrt_ref;

enum { NRT_STEP_LAUNCH = 0, NRT_STEP_FUSED = 1 };

typedef struct nrt_step {
  int type;
  int node;        /* the graph node (the last member for a fused step) */
  char *location;  /* owned; NULL if none */
  /* NRT_STEP_LAUNCH: the launch with data pointers NULL, refs per operand. */
  nrt_launch launch;
  nrt_ref refs[NRT_MAX_OPERANDS];
  int rng_seed_param, rng_offset_param;
  /* NRT_STEP_FUSED: the chain (members owned) and one ref per external. */
  nrt_fused_chain chain;
  nrt_ref *external; /* chain.nexternal, owned */
} nrt_step;

/* ---- fusion.c ------------------------------------------------------------------------- */
/* A group of graph nodes that becomes one step. */
typedef struct nrt_group {
  int nmembers;
  int *members;     /* graph node ids in execution order (owned) */
  int position;     /* the step's place: its last member's node id */
  /* fused groups (nmembers > 1): the chain's dims and each member operand's
   * strides over them, and which buffers stay in tiles. */
  int ndim;
  int64_t sizes[NRT_MAX_DIMS];
  int64_t (*strides)[NRT_MAX_OPERANDS][NRT_MAX_DIMS]; /* [nmembers], owned */
  int ntiles;       /* tile slots its tiled buffers use */
} nrt_group;

typedef struct nrt_fusion {
  int ngroups;
  nrt_group *groups;      /* in schedule order */
  int *group_of;          /* node -> group, -1 for dead nodes */
  bool *tiled;            /* buffer -> kept in tiles only (never in memory) */
  int *tile_slot;         /* buffer -> its tile slot within its group, or -1 */
} nrt_fusion;

/* live: which nodes survived dead-node elimination. */
nrt_status nrt_fuse(const nrt_graph *graph, const bool *live, bool enable, nrt_fusion *out_fusion);
void nrt_fusion_free(nrt_fusion *fusion);

/* ---- plan.c --------------------------------------------------------------------------- */
/* Marks live nodes: those writing an output, a mutated input, or an
 * intermediate a live node reads later. Returns the number removed. */
int nrt_eliminate_dead(const nrt_graph *graph, bool enable, bool *out_live);

typedef struct nrt_memory_plan {
  int64_t *offset;    /* buffer -> arena offset, -1 if not in the arena */
  int64_t arena_bytes;
  int64_t naive_bytes; /* sum of the planned intermediates, each 64-aligned */
  int inplace_pairs;
} nrt_memory_plan;

/* Liveness is measured in groups (steps). A buffer not touched by any
 * step, or tiled, gets no space. */
nrt_status nrt_plan_memory(const nrt_graph *graph, const nrt_fusion *fusion, bool share, bool inplace,
                           nrt_memory_plan *out_plan);
void nrt_memory_plan_free(nrt_memory_plan *plan);

/* ---- program.c ---------------------------------------------------------------------- */
struct nrt_program {
  atomic_int refs;
  char *name, *compiler, *flags, *cpu_features;
  int64_t arena_bytes;
  int nslots;
  nrt_program_slot *slots;
  int nconstants;
  int64_t *constant_bytes;
  void **constant_data; /* 64-byte aligned, owned */
  int nsteps;
  nrt_step *steps;
  uint64_t rng_capture_base, rng_advance;
  bool uses_rng;
};

nrt_program *nrt_program_alloc(void);
/* Frees steps (members, externals, locations) and everything else. */
void nrt_program_free(nrt_program *program);

/* ---- artifact helpers shared by program.c and artifact.c ---------------------------- */
const char *nrt_ref_kind_name(int kind);

#endif
