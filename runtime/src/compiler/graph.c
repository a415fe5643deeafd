/* The graph object (nrt/graph.h): growable arrays of buffers and nodes,
 * and what the passes ask of a node (element count, operand extents,
 * Philox params). */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"
#include "nrt/ops/attention.h"
#include "nrt/ops/distributions.h"
#include "nrt/ops/gemm.h"

static const char *const kind_names[NRT_BUFFER_KIND_COUNT] = {"input", "output", "intermediate",
                                                              "constant"};

const char *nrt_buffer_kind_name(nrt_buffer_kind kind) {
  return (unsigned)kind < NRT_BUFFER_KIND_COUNT ? kind_names[kind] : "invalid";
}

nrt_status nrt_graph_create(nrt_graph **out_graph) {
  if (!out_graph) return NRT_ERROR_INVALID_ARGUMENT;
  nrt_graph *g = calloc(1, sizeof *g);
  if (!g) {
    nrt_set_error_message("nrt_graph_create: host out of memory");
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  *out_graph = g;
  return NRT_SUCCESS;
}

void nrt_graph_destroy(nrt_graph *g) {
  if (!g) return;
  for (int i = 0; i < g->nbuffers; i++) free((void *)g->buffers[i].data);
  for (int i = 0; i < g->nnodes; i++) free((void *)g->nodes[i].location);
  free(g->buffers);
  free(g->nodes);
  free(g);
}

static bool grow(void **items, int *cap, int count, size_t item_size) {
  if (count < *cap) return true;
  int next = *cap ? *cap * 2 : 16;
  void *p = realloc(*items, (size_t)next * item_size);
  if (!p) return false;
  *items = p;
  *cap = next;
  return true;
}

nrt_status nrt_graph_add_buffer(nrt_graph *g, const nrt_graph_buffer *b, int *out_id) {
  if (!g || !b) return NRT_ERROR_INVALID_ARGUMENT;
  if (b->bytes < 0 || (unsigned)b->kind >= NRT_BUFFER_KIND_COUNT) {
    nrt_set_error_message("nrt_graph_add_buffer: %lld bytes, kind %d", (long long)b->bytes, (int)b->kind);
    return NRT_ERROR_INVALID_ARGUMENT;
  }
  if (!grow((void **)&g->buffers, &g->cap_buffers, g->nbuffers, sizeof *g->buffers)) {
    nrt_set_error_message("nrt_graph_add_buffer: host out of memory");
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  nrt_graph_buffer copy = *b;
  copy.data = NULL;
  if (b->kind == NRT_BUFFER_CONSTANT && b->bytes > 0) {
    void *data = malloc((size_t)b->bytes);
    if (!data) {
      nrt_set_error_message("nrt_graph_add_buffer: host out of memory for %lld constant bytes",
                            (long long)b->bytes);
      return NRT_ERROR_OUT_OF_MEMORY;
    }
    if (b->data) memcpy(data, b->data, (size_t)b->bytes);
    else memset(data, 0, (size_t)b->bytes);
    copy.data = data;
  }
  if (b->kind != NRT_BUFFER_INPUT && b->kind != NRT_BUFFER_OUTPUT) copy.slot = -1;
  if (b->kind != NRT_BUFFER_INPUT) copy.mutated = false;
  g->buffers[g->nbuffers] = copy;
  if (out_id) *out_id = g->nbuffers;
  g->nbuffers++;
  return NRT_SUCCESS;
}

nrt_status nrt_graph_add_node(nrt_graph *g, const nrt_graph_node *n, int *out_id) {
  if (!g || !n) return NRT_ERROR_INVALID_ARGUMENT;
  if (!grow((void **)&g->nodes, &g->cap_nodes, g->nnodes, sizeof *g->nodes)) {
    nrt_set_error_message("nrt_graph_add_node: host out of memory");
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  nrt_graph_node copy = *n;
  copy.location = NULL;
  if (n->location) {
    copy.location = strdup(n->location);
    if (!copy.location) {
      nrt_set_error_message("nrt_graph_add_node: host out of memory");
      return NRT_ERROR_OUT_OF_MEMORY;
    }
  }
  g->nodes[g->nnodes] = copy;
  if (out_id) *out_id = g->nnodes;
  g->nnodes++;
  return NRT_SUCCESS;
}

void nrt_graph_node_init(nrt_graph_node *n, nrt_op op, nrt_dtype compute_dtype, int ndim,
                         const int64_t *sizes, int noutputs, int ninputs) {
  memset(n, 0, sizeof *n);
  n->op = op;
  n->compute_dtype = compute_dtype;
  n->ndim = ndim;
  for (int d = 0; d < ndim && d < NRT_MAX_DIMS; d++) n->sizes[d] = sizes[d];
  n->noutputs = noutputs;
  n->ninputs = ninputs;
  for (int k = 0; k < NRT_MAX_OPERANDS; k++) n->operands[k].buffer = -1;
  n->rng_seed_param = n->rng_offset_param = -1;
}

int nrt_graph_buffer_count(const nrt_graph *g) { return g ? g->nbuffers : 0; }
int nrt_graph_node_count(const nrt_graph *g) { return g ? g->nnodes : 0; }

const nrt_graph_buffer *nrt_graph_buffer_at(const nrt_graph *g, int id) {
  return g && id >= 0 && id < g->nbuffers ? &g->buffers[id] : NULL;
}

const nrt_graph_node *nrt_graph_node_at(const nrt_graph *g, int id) {
  return g && id >= 0 && id < g->nnodes ? &g->nodes[id] : NULL;
}

void nrt_graph_set_rng(nrt_graph *g, uint64_t seed, uint64_t base_offset, uint64_t advance) {
  g->rng_seed = seed;
  g->rng_base_offset = base_offset;
  g->rng_advance = advance;
}

void nrt_graph_get_rng(const nrt_graph *g, uint64_t *out_seed, uint64_t *out_base_offset,
                       uint64_t *out_advance) {
  if (out_seed) *out_seed = g->rng_seed;
  if (out_base_offset) *out_base_offset = g->rng_base_offset;
  if (out_advance) *out_advance = g->rng_advance;
}

/* ---- what the passes ask of a node ------------------------------------------------ */

int64_t nrt_node_numel(const nrt_graph_node *n) {
  int64_t numel = 1;
  for (int d = 0; d < n->ndim; d++) numel *= n->sizes[d];
  return numel;
}

/* [lo, hi) over dims with the given sizes and the operand's strides. */
static void box_extent(const int64_t *sizes, int ndim, const int64_t *strides, int64_t esz,
                       int64_t *lo, int64_t *hi) {
  int64_t l = 0, h = 0;
  for (int d = 0; d < ndim; d++) {
    if (sizes[d] == 0) {
      *lo = *hi = 0;
      return;
    }
    int64_t span = (sizes[d] - 1) * strides[d];
    if (span < 0) l += span;
    else h += span;
  }
  *lo = l;
  *hi = h + esz;
}

bool nrt_operand_extent(const nrt_graph_node *n, int k, int64_t *out_lo, int64_t *out_hi) {
  const nrt_graph_operand *o = &n->operands[k];
  int64_t esz = (int64_t)nrt_dtype_size(o->dtype);
  switch (nrt_op_kind(n->op)) {
  case NRT_KIND_POINTWISE:
  case NRT_KIND_REDUCE:
  case NRT_KIND_ROW:
    box_extent(n->sizes, n->ndim, o->strides, esz, out_lo, out_hi);
    return true;
  case NRT_KIND_GEMM: {
    if (n->op != NRT_OP(GEMM) || n->ndim != 4) return false;
    /* sizes {batch, M, N, K}: A {batch, m, k}, B {batch, k, n}, C/bias {batch, m, n} */
    int64_t b = n->sizes[0], m = n->sizes[1], nn = n->sizes[2], kk = n->sizes[3];
    int64_t dims[3];
    if (k == 1) dims[0] = b, dims[1] = m, dims[2] = kk;
    else if (k == 2) dims[0] = b, dims[1] = kk, dims[2] = nn;
    else dims[0] = b, dims[1] = m, dims[2] = nn;
    box_extent(dims, 3, o->strides, esz, out_lo, out_hi);
    return true;
  }
  default:
    return false;
  }
}

void nrt_rng_params(const nrt_launch *l, int *out_seed, int *out_offset) {
  *out_seed = *out_offset = -1;
  switch ((int)l->op) {
  case NRT_OP_UNIFORM:
  case NRT_OP_NORMAL:
  case NRT_OP_BERNOULLI_SCALAR:
  case NRT_OP_BERNOULLI_TENSOR:
  case NRT_OP_RANDOM_RANGE:
  case NRT_OP_STANDARD_GAMMA:
  case NRT_OP_STANDARD_GAMMA_LOG:
  case NRT_OP_POISSON:
  case NRT_OP_BINOMIAL:
    *out_seed = 0;
    *out_offset = 1;
    return;
  case NRT_OP_SDPA_FORWARD:
  case NRT_OP_SDPA_BACKWARD_PREP:
  case NRT_OP_SDPA_BACKWARD:
  case NRT_OP_SDPA_BACKWARD_DS:
    /* Dropout draws only when s1 (the probability) is positive; the
     * backward ops regenerate the forward's mask from the same p1, p2. */
    if (l->scalars[1].f > 0) {
      *out_seed = 1;
      *out_offset = 2;
    }
    return;
  default:
    return;
  }
}
