/* Passes 2 and 4: dead-node elimination, and the memory plan.
 *
 * Dead nodes: walking backwards, a node is live when it writes a graph
 * output, a mutated input, or an intermediate that a later live node
 * reads. Liveness is per buffer, not per byte range, so a node writing a
 * slice of a buffer someone reads stays: conservative, never wrong.
 *
 * Memory plan: each intermediate that some step touches (and that fusion
 * did not keep in tiles) lives from the first step touching it to the
 * last. Buffers whose lifetimes overlap get disjoint arena ranges; the
 * others may share. Placement is first fit in decreasing size order (the
 * classic offline heuristic, within a few percent of the optimum on
 * training graphs), 64-byte aligned. In-place: a step that writes a
 * buffer first and reads another for the last time, through identical
 * layouts (offset, dtype size, strides), may write over it: the two become
 * one arena object, since a pointwise kernel reads each element before it
 * writes the same element. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"

#define ARENA_ALIGN 64

static int64_t align_up(int64_t v) { return (v + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN; }

int nrt_eliminate_dead(const nrt_graph *g, bool enable, bool *live) {
  for (int i = 0; i < g->nnodes; i++) live[i] = true;
  if (!enable) return 0;
  bool *read_later = calloc((size_t)g->nbuffers + 1, sizeof *read_later);
  if (!read_later) return 0; /* keep everything */
  int removed = 0;
  for (int i = g->nnodes - 1; i >= 0; i--) {
    const nrt_graph_node *n = &g->nodes[i];
    bool needed = false;
    for (int k = 0; k < n->noutputs; k++) {
      int b = n->operands[k].buffer;
      if (b < 0) continue;
      const nrt_graph_buffer *buf = &g->buffers[b];
      if (buf->kind == NRT_BUFFER_OUTPUT || (buf->kind == NRT_BUFFER_INPUT && buf->mutated) || read_later[b])
        needed = true;
    }
    live[i] = needed;
    if (!needed) {
      removed++;
      continue;
    }
    for (int k = n->noutputs; k < n->noutputs + n->ninputs; k++)
      if (n->operands[k].buffer >= 0) read_later[n->operands[k].buffer] = true;
  }
  free(read_later);
  return removed;
}

typedef struct object {
  int root;
  int64_t size, first, last, offset;
} object;

static int find_root(int *parent, int b) {
  while (parent[b] != b) b = parent[b] = parent[parent[b]];
  return b;
}

/* Operand k of member m of a group: its strides over the group's dims
 * (fused) or the node's own (a single node). */
static const int64_t *member_strides(const nrt_graph *g, const nrt_group *gr, int m, int k) {
  if (gr->nmembers > 1) return gr->strides[m][k];
  return g->nodes[gr->members[m]].operands[k].strides;
}

static int group_ndim(const nrt_graph *g, const nrt_group *gr) {
  return gr->nmembers > 1 ? gr->ndim : g->nodes[gr->members[0]].ndim;
}

/* Whether the write of (wm, wk) may go over buffer a, read by the group:
 * every read of a in the group happens in a member no later than the
 * writer, through the writer's exact layout. */
static bool inplace_ok(const nrt_graph *g, const nrt_group *gr, int wm, int wk, int a) {
  const nrt_graph_node *w = &g->nodes[gr->members[wm]];
  if (nrt_op_kind(w->op) != NRT_KIND_POINTWISE) return false;
  const nrt_graph_operand *wo = &w->operands[wk];
  int nd = group_ndim(g, gr);
  const int64_t *ws = member_strides(g, gr, wm, wk);
  bool read = false;
  for (int m = 0; m < gr->nmembers; m++) {
    const nrt_graph_node *n = &g->nodes[gr->members[m]];
    for (int k = 0; k < n->noutputs + n->ninputs; k++) {
      const nrt_graph_operand *o = &n->operands[k];
      if (o->buffer != a) continue;
      if (k < n->noutputs || m > wm) return false;
      if (o->offset != wo->offset || nrt_dtype_size(o->dtype) != nrt_dtype_size(wo->dtype)) return false;
      const int64_t *s = member_strides(g, gr, m, k);
      for (int d = 0; d < nd; d++)
        if (s[d] != ws[d]) return false;
      read = true;
    }
  }
  return read;
}

static int cmp_object(const void *pa, const void *pb) {
  const object *a = pa, *b = pb;
  if (a->size != b->size) return a->size > b->size ? -1 : 1;
  if (a->first != b->first) return a->first < b->first ? -1 : 1;
  return a->root - b->root;
}

typedef struct interval {
  int64_t lo, hi;
} interval;

static int cmp_interval(const void *pa, const void *pb) {
  const interval *a = pa, *b = pb;
  return a->lo < b->lo ? -1 : a->lo > b->lo;
}

nrt_status nrt_plan_memory(const nrt_graph *g, const nrt_fusion *f, bool share, bool inplace,
                           nrt_memory_plan *plan) {
  memset(plan, 0, sizeof *plan);
  int nb = g->nbuffers;
  plan->offset = malloc(sizeof(int64_t) * (size_t)(nb ? nb : 1));
  int64_t *first = malloc(sizeof(int64_t) * (size_t)(nb ? nb : 1));
  int64_t *last = malloc(sizeof(int64_t) * (size_t)(nb ? nb : 1));
  int *parent = malloc(sizeof(int) * (size_t)(nb ? nb : 1));
  object *objs = malloc(sizeof(object) * (size_t)(nb ? nb : 1));
  interval *ivs = malloc(sizeof(interval) * (size_t)(nb ? nb : 1));
  nrt_status st = NRT_SUCCESS;
  if (!plan->offset || !first || !last || !parent || !objs || !ivs) {
    nrt_set_error_message("memory plan: host out of memory");
    st = NRT_ERROR_OUT_OF_MEMORY;
    goto done;
  }
  for (int b = 0; b < nb; b++) {
    plan->offset[b] = -1;
    first[b] = last[b] = -1;
    parent[b] = b;
  }
  for (int s = 0; s < f->ngroups; s++) {
    const nrt_group *gr = &f->groups[s];
    for (int m = 0; m < gr->nmembers; m++) {
      const nrt_graph_node *n = &g->nodes[gr->members[m]];
      for (int k = 0; k < n->noutputs + n->ninputs; k++) {
        int b = n->operands[k].buffer;
        if (b < 0 || g->buffers[b].kind != NRT_BUFFER_INTERMEDIATE || f->tiled[b]) continue;
        if (first[b] < 0) first[b] = s;
        last[b] = s;
      }
    }
  }
  /* In place: step s writes b first and reads a for the last time. */
  if (inplace) {
    for (int s = 0; s < f->ngroups; s++) {
      const nrt_group *gr = &f->groups[s];
      for (int m = 0; m < gr->nmembers; m++) {
        const nrt_graph_node *n = &g->nodes[gr->members[m]];
        int b = n->operands[0].buffer;
        if (n->noutputs != 1 || b < 0 || first[b] != s || parent[b] != b) continue;
        for (int k = 1; k < 1 + n->ninputs; k++) {
          int a = n->operands[k].buffer;
          if (a < 0 || a == b || first[a] < 0) continue;
          int ra = find_root(parent, a);
          if (last[ra] != s || last[a] != s || !inplace_ok(g, gr, m, 0, a)) continue;
          parent[b] = ra;
          if (last[b] > last[ra]) last[ra] = last[b];
          plan->inplace_pairs++;
          break;
        }
      }
    }
  }
  int nobj = 0;
  for (int b = 0; b < nb; b++) {
    if (first[b] < 0) continue;
    plan->naive_bytes += align_up(g->buffers[b].bytes);
    int r = find_root(parent, b);
    int j = 0;
    while (j < nobj && objs[j].root != r) j++;
    if (j == nobj) objs[nobj++] = (object){r, 0, first[r], last[r], -1};
    if (g->buffers[b].bytes > objs[j].size) objs[j].size = g->buffers[b].bytes;
    if (first[b] < objs[j].first) objs[j].first = first[b];
    if (last[b] > objs[j].last) objs[j].last = last[b];
  }
  if (!share) {
    int64_t at = 0;
    for (int j = 0; j < nobj; j++) {
      objs[j].offset = at;
      at += align_up(objs[j].size);
    }
    plan->arena_bytes = at;
  } else {
    qsort(objs, (size_t)nobj, sizeof *objs, cmp_object);
    for (int j = 0; j < nobj; j++) {
      int niv = 0;
      for (int i = 0; i < j; i++)
        if (objs[i].first <= objs[j].last && objs[j].first <= objs[i].last)
          ivs[niv++] = (interval){objs[i].offset, objs[i].offset + objs[i].size};
      qsort(ivs, (size_t)niv, sizeof *ivs, cmp_interval);
      int64_t at = 0;
      for (int i = 0; i < niv; i++) {
        if (at + objs[j].size <= ivs[i].lo) break;
        if (align_up(ivs[i].hi) > at) at = align_up(ivs[i].hi);
      }
      objs[j].offset = at;
      if (align_up(at + objs[j].size) > plan->arena_bytes) plan->arena_bytes = align_up(at + objs[j].size);
    }
  }
  for (int b = 0; b < nb; b++) {
    if (first[b] < 0) continue;
    int r = find_root(parent, b);
    for (int j = 0; j < nobj; j++)
      if (objs[j].root == r) plan->offset[b] = objs[j].offset;
  }
done:
  free(first);
  free(last);
  free(parent);
  free(objs);
  free(ivs);
  if (st != NRT_SUCCESS) nrt_memory_plan_free(plan);
  return st;
}

void nrt_memory_plan_free(nrt_memory_plan *plan) {
  free(plan->offset);
  plan->offset = NULL;
}
