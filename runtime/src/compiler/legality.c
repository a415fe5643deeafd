/* Pass 1, legality: the graph can run as written. Every buffer has a kind
 * and the slots form 0..n-1; every node passes the launch checks eager
 * launches pass (api/launch.c, with stand-in pointers), has a kernel
 * engine, writes only outputs, intermediates and mutated inputs, and
 * reaches only bytes inside its buffers for every index its sizes and
 * strides allow (where the op's operand layout is the launch's; for the
 * families with their own layouts the start is checked). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"
#include "kernels/pointwise/pointwise.h"

void nrt_node_label(const nrt_graph *g, int i, char *buf, size_t size) {
  const nrt_graph_node *n = nrt_graph_node_at(g, i);
  if (!n) {
    snprintf(buf, size, "node %d", i);
    return;
  }
  snprintf(buf, size, "node %d (%s at %s)", i, nrt_op_name(n->op), n->location ? n->location : "unknown location");
}

static nrt_status node_error(const nrt_graph *g, int i, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static nrt_status node_error(const nrt_graph *g, int i, const char *fmt, ...) {
  char label[512], detail[768];
  nrt_node_label(g, i, label, sizeof label);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  nrt_set_error_message("legality: %s: %s", label, detail);
  return NRT_ERROR_INVALID_ARGUMENT;
}

static nrt_status check_buffers(const nrt_graph *g) {
  int nslots = 0;
  for (int i = 0; i < g->nbuffers; i++)
    if (g->buffers[i].slot >= nslots) nslots = g->buffers[i].slot + 1;
  int *owner = malloc(sizeof(int) * (size_t)(nslots ? nslots : 1));
  if (!owner) return NRT_ERROR_OUT_OF_MEMORY;
  for (int s = 0; s < nslots; s++) owner[s] = -1;
  nrt_status st = NRT_SUCCESS;
  for (int i = 0; i < g->nbuffers && st == NRT_SUCCESS; i++) {
    const nrt_graph_buffer *b = &g->buffers[i];
    bool slotted = b->kind == NRT_BUFFER_INPUT || b->kind == NRT_BUFFER_OUTPUT;
    if ((unsigned)b->kind >= NRT_BUFFER_KIND_COUNT || b->bytes < 0) {
      nrt_set_error_message("legality: buffer %d: kind %d, %lld bytes", i, (int)b->kind, (long long)b->bytes);
      st = NRT_ERROR_INVALID_ARGUMENT;
    } else if (slotted && b->slot < 0) {
      nrt_set_error_message("legality: buffer %d: an %s without a slot", i, nrt_buffer_kind_name(b->kind));
      st = NRT_ERROR_INVALID_ARGUMENT;
    } else if (slotted && owner[b->slot] >= 0) {
      nrt_set_error_message("legality: buffers %d and %d share slot %d", owner[b->slot], i, b->slot);
      st = NRT_ERROR_INVALID_ARGUMENT;
    } else if (slotted) {
      owner[b->slot] = i;
    }
  }
  for (int s = 0; s < nslots && st == NRT_SUCCESS; s++)
    if (owner[s] < 0) {
      nrt_set_error_message("legality: slot %d has no buffer (slots are 0..%d)", s, nslots - 1);
      st = NRT_ERROR_INVALID_ARGUMENT;
    }
  free(owner);
  return st;
}

static nrt_status check_node(const nrt_graph *g, int i) {
  const nrt_graph_node *n = &g->nodes[i];
  if (!nrt_op_valid(n->op)) return node_error(g, i, "unknown op id %d", (int)n->op);
  if ((unsigned)nrt_op_kind(n->op) >= NRT_KIND_COUNT) return node_error(g, i, "no kernel engine for this op");
  if (n->ndim < 0 || n->ndim > NRT_MAX_DIMS || n->noutputs < 1 || n->ninputs < 0 ||
      n->noutputs + n->ninputs > NRT_MAX_OPERANDS)
    return node_error(g, i, "ndim %d, %d outputs, %d inputs", n->ndim, n->noutputs, n->ninputs);
  if (n->rng_seed_param < -1 || n->rng_seed_param >= NRT_MAX_PARAMS || n->rng_offset_param < -1 ||
      n->rng_offset_param >= NRT_MAX_PARAMS)
    return node_error(g, i, "rng params %d, %d outside -1..%d", n->rng_seed_param, n->rng_offset_param,
                      NRT_MAX_PARAMS - 1);
  /* The eager checks, with each operand at a stand-in address. */
  nrt_launch l;
  memset(&l, 0, sizeof l);
  l.op = n->op;
  l.ndim = n->ndim;
  memcpy(l.sizes, n->sizes, sizeof l.sizes);
  l.noutputs = n->noutputs;
  l.ninputs = n->ninputs;
  l.compute_dtype = n->compute_dtype;
  memcpy(l.scalars, n->scalars, sizeof l.scalars);
  memcpy(l.params, n->params, sizeof l.params);
  memcpy(l.aux, n->aux, sizeof l.aux);
  static char stand_in;
  for (int k = 0; k < n->noutputs + n->ninputs; k++) {
    const nrt_graph_operand *o = &n->operands[k];
    l.operands[k].dtype = o->dtype;
    memcpy(l.operands[k].strides, o->strides, sizeof o->strides);
    l.operands[k].data = o->buffer >= 0 ? &stand_in : NULL;
  }
  if (nrt_launch_validate("launch", &l) != NRT_SUCCESS) {
    char detail[NRT_ERROR_MESSAGE_MAX];
    snprintf(detail, sizeof detail, "%s", nrt_last_error_message());
    return node_error(g, i, "%s", detail);
  }
  /* The pointwise engine knows up front whether it has a kernel for the
   * op in its compute domain: an op the compiler cannot run fails the
   * compile, not the first run. */
  const nrt_pw_kernel *k;
  if (nrt_op_kind(n->op) == NRT_KIND_POINTWISE && nrt_pw_prepare(&l, &k) != NRT_SUCCESS) {
    char detail[NRT_ERROR_MESSAGE_MAX];
    snprintf(detail, sizeof detail, "%s", nrt_last_error_message());
    node_error(g, i, "no kernel: %s", detail);
    return NRT_ERROR_UNSUPPORTED;
  }
  for (int k = 0; k < n->noutputs + n->ninputs; k++) {
    const nrt_graph_operand *o = &n->operands[k];
    if (o->buffer < 0) continue;
    if (o->buffer >= g->nbuffers)
      return node_error(g, i, "operand %d refers to buffer %d of %d", k, o->buffer, g->nbuffers);
    const nrt_graph_buffer *b = &g->buffers[o->buffer];
    bool out = k < n->noutputs;
    if (out && b->kind == NRT_BUFFER_CONSTANT) return node_error(g, i, "writes constant buffer %d", o->buffer);
    if (out && b->kind == NRT_BUFFER_INPUT && !b->mutated)
      return node_error(g, i, "writes input slot %d, which is not declared mutated", b->slot);
    int64_t lo, hi;
    if (nrt_operand_extent(n, k, &lo, &hi)) {
      if (lo < hi && (o->offset + lo < 0 || o->offset + hi > b->bytes))
        return node_error(g, i, "operand %d reaches bytes [%lld, %lld) of %lld-byte buffer %d", k,
                          (long long)(o->offset + lo), (long long)(o->offset + hi), (long long)b->bytes, o->buffer);
    } else if (o->offset < 0 || (o->offset >= b->bytes && b->bytes > 0)) {
      return node_error(g, i, "operand %d starts at byte %lld of %lld-byte buffer %d", k, (long long)o->offset,
                        (long long)b->bytes, o->buffer);
    }
  }
  return NRT_SUCCESS;
}

nrt_status nrt_check_legality(const nrt_graph *g) {
  nrt_status st = check_buffers(g);
  for (int i = 0; i < g->nnodes && st == NRT_SUCCESS; i++) st = check_node(g, i);
  return st;
}
