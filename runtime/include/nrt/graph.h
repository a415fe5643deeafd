/* Graphs: the compiler's input (docs/graph-format.md).
 *
 * A graph is a list of buffers and a list of nodes in execution order.
 * A buffer is a byte range the graph reads or writes: a graph input or
 * output (bound to a slot when the program runs), an intermediate (placed
 * in the program's arena by the memory planner) or a constant (bytes held
 * by the graph). A node is one kernel launch (the nrt_launch descriptor of
 * nrt/launch.h) whose operand pointers are replaced by (buffer, byte
 * offset). Graphs come from a capture of real launches (nrt/capture.h),
 * from the text format ("nrt-graph 1"), or are built by hand through
 * nrt_graph_add_buffer / nrt_graph_add_node (tests; later hand-written
 * kernels target the same format).
 *
 * Ownership: nrt_graph_create / nrt_graph_parse give a graph the caller
 * frees with nrt_graph_destroy. Adding copies what it is given (location
 * strings, constant bytes). */
#ifndef NRT_GRAPH_H
#define NRT_GRAPH_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "nrt/launch.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NRT_GRAPH_FORMAT_VERSION 1

typedef enum nrt_buffer_kind {
  NRT_BUFFER_INPUT,        /* bound to a slot; read, and written if `mutated` */
  NRT_BUFFER_OUTPUT,       /* bound to a slot; written by the graph */
  NRT_BUFFER_INTERMEDIATE, /* lives inside one run, in the arena */
  NRT_BUFFER_CONSTANT,     /* bytes held by the graph and the program */
  NRT_BUFFER_KIND_COUNT
} nrt_buffer_kind;

const char *nrt_buffer_kind_name(nrt_buffer_kind kind); /* "input", ... */

typedef struct nrt_graph_buffer {
  int64_t bytes;
  nrt_buffer_kind kind;
  int slot;          /* inputs and outputs: the slot index; -1 otherwise */
  bool mutated;      /* inputs: the graph writes it (in-place ops, running stats) */
  const void *data;  /* constants: `bytes` bytes (copied when added); else NULL */
} nrt_graph_buffer;

/* A launch operand: `buffer` -1 means none (an empty operand, data NULL). */
typedef struct nrt_graph_operand {
  int buffer;
  int64_t offset; /* bytes from the buffer's start to the element at index 0 */
  nrt_dtype dtype;
  int64_t strides[NRT_MAX_DIMS]; /* bytes, as in nrt_operand */
} nrt_graph_operand;

typedef struct nrt_graph_node {
  nrt_op op;
  int ndim;
  int64_t sizes[NRT_MAX_DIMS];
  int noutputs;
  int ninputs;
  nrt_dtype compute_dtype;
  nrt_graph_operand operands[NRT_MAX_OPERANDS]; /* outputs first, then inputs */
  nrt_scalar scalars[NRT_MAX_SCALARS];
  int64_t params[NRT_MAX_PARAMS];
  int64_t aux[2 * NRT_MAX_DIMS];
  /* Philox draws: the params holding the seed and the counter offset, or
   * -1. A program replaces them at each run (nrt/program.h). */
  int rng_seed_param;
  int rng_offset_param;
  const char *location; /* user source location ("model.py:12 in forward"), or NULL */
} nrt_graph_node;

typedef struct nrt_graph nrt_graph;

nrt_status nrt_graph_create(nrt_graph **out_graph);
void nrt_graph_destroy(nrt_graph *graph); /* NULL is a no-op */

/* Appends a buffer; its id (0, 1, ...) goes to out_id (may be NULL). */
nrt_status nrt_graph_add_buffer(nrt_graph *graph, const nrt_graph_buffer *buffer, int *out_id);
/* Appends a node (checked later by the compiler's legality pass, not here,
 * so a parsed or hand-built graph can be reported on as a whole). */
nrt_status nrt_graph_add_node(nrt_graph *graph, const nrt_graph_node *node, int *out_id);
/* A node with the launch's fields, no operands, no RNG params and no location. */
void nrt_graph_node_init(nrt_graph_node *node, nrt_op op, nrt_dtype compute_dtype, int ndim,
                         const int64_t *sizes, int noutputs, int ninputs);

int nrt_graph_buffer_count(const nrt_graph *graph);
int nrt_graph_node_count(const nrt_graph *graph);
const nrt_graph_buffer *nrt_graph_buffer_at(const nrt_graph *graph, int id); /* NULL if out of range */
const nrt_graph_node *nrt_graph_node_at(const nrt_graph *graph, int id);

/* The Philox state the graph was captured with: its draws' recorded
 * offsets count from `base_offset`, and one run consumes `advance` counter
 * values (what the caller adds to its generator's offset per run). */
void nrt_graph_set_rng(nrt_graph *graph, uint64_t seed, uint64_t base_offset, uint64_t advance);
void nrt_graph_get_rng(const nrt_graph *graph, uint64_t *out_seed, uint64_t *out_base_offset,
                       uint64_t *out_advance);

/* The text format. nrt_graph_write gives a NUL-terminated malloc'd string
 * (free it with free()). nrt_graph_parse rejects malformed input with
 * NRT_ERROR_INVALID_ARGUMENT and a message naming the line. */
nrt_status nrt_graph_write(const nrt_graph *graph, char **out_text, size_t *out_length);
nrt_status nrt_graph_parse(const char *text, size_t length, nrt_graph **out_graph);
nrt_status nrt_graph_save(const nrt_graph *graph, const char *path);
nrt_status nrt_graph_load(const char *path, nrt_graph **out_graph);

#ifdef __cplusplus
}
#endif
#endif
