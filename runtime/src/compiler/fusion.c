/* Pass 3, fusion: chains of pointwise nodes become one fused step
 * (kernels/pointwise/fused.c) whose intermediates stay in L1 tiles.
 *
 * Greedy, in execution order: a pointwise node C joins the chain X of the
 * node P that last wrote one of C's inputs T when
 *  - both iterate over the same elements of T: P's output and C's read of
 *    T are the same map from index to address. The chain's dims and C's
 *    dims (each ordered by T's strides) are refined into common dims, each
 *    dim of either side a product of consecutive common dims, so a chain
 *    collapsed to [4096] still fuses with a bias add over [64, 64];
 *  - every buffer a member writes is accessed by every member through one
 *    identical map (so a tile never reads an element a later tile
 *    rewrote);
 *  - no node between X's last member and C reads what X writes or writes
 *    what X touches (the chain moves to C's place).
 * Broadcast inputs (stride 0) and dtype changes are fine: the pointwise
 * row loop converts as the unfused store and load would. Random ops,
 * multi-output and non-pointwise nodes are left alone.
 *
 * A buffer is kept in tiles only (never written to memory) when it is an
 * intermediate, every live access to it is inside the chain, one member
 * writes it and only later members read it. Tile slots are reused once a
 * tiled buffer's last reader ran; a chain needing more than
 * NRT_FUSED_MAX_TILES stores the rest. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"

/* How far back the hazard check looks for the chain's last member. */
#define MAX_DISTANCE 512

typedef int64_t strides_t[NRT_MAX_OPERANDS][NRT_MAX_DIMS];

typedef struct chain {
  int n, cap;
  int *members;
  strides_t *strides;
  int ndim;
  int64_t sizes[NRT_MAX_DIMS];
  bool open; /* a fusable chain others may join */
} chain;

static int nops_of(const nrt_graph_node *n) { return n->noutputs + n->ninputs; }

static bool fusable(const nrt_graph *g, int i) {
  const nrt_graph_node *n = &g->nodes[i];
  if (nrt_op_kind(n->op) != NRT_KIND_POINTWISE || n->noutputs != 1) return false;
  if (n->rng_seed_param >= 0 || n->rng_offset_param >= 0) return false;
  nrt_launch probe;
  memset(&probe, 0, sizeof probe);
  probe.op = n->op;
  probe.scalars[1].f = 0;
  int seed, offset;
  nrt_rng_params(&probe, &seed, &offset);
  if (seed >= 0 || offset >= 0) return false;
  if (nrt_node_numel(n) <= 0) return false;
  for (int k = 0; k < nops_of(n); k++) {
    const nrt_graph_operand *o = &n->operands[k];
    if (o->buffer < 0 || nrt_dtype_size(o->dtype) > 8 || nrt_dtype_is_complex(o->dtype)) return false;
  }
  /* a broadcast output writes one element many times: not a tile's shape */
  for (int d = 0; d < n->ndim; d++)
    if (n->sizes[d] > 1 && n->operands[0].strides[d] == 0) return false;
  return true;
}

static bool chain_push(chain *c, int node) {
  if (c->n == c->cap) {
    int cap = c->cap ? c->cap * 2 : 4;
    int *m = realloc(c->members, sizeof(int) * (size_t)cap);
    if (!m) return false;
    c->members = m;
    strides_t *s = realloc(c->strides, sizeof(strides_t) * (size_t)cap);
    if (!s) return false;
    c->strides = s;
    c->cap = cap;
  }
  c->members[c->n++] = node;
  return true;
}

/* A chain of one node: its dims of size > 1. */
static bool chain_start(const nrt_graph *g, int i, chain *c) {
  memset(c, 0, sizeof *c);
  if (!chain_push(c, i)) return false;
  const nrt_graph_node *n = &g->nodes[i];
  for (int d = 0; d < n->ndim; d++) {
    if (n->sizes[d] == 1) continue;
    for (int k = 0; k < nops_of(n); k++) c->strides[0][k][c->ndim] = n->operands[k].strides[d];
    c->sizes[c->ndim++] = n->sizes[d];
  }
  c->open = fusable(g, i);
  return true;
}

/* Dims sorted by a stride, largest first (insertion sort, stable). */
static void sort_by_stride(int *perm, int n, const int64_t *stride) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && stride[perm[j - 1]] < stride[perm[j]]; j--) {
      int t = perm[j - 1];
      perm[j - 1] = perm[j];
      perm[j] = t;
    }
}

typedef struct refined {
  int ndim;
  int64_t sizes[NRT_MAX_DIMS];
  int src_a[NRT_MAX_DIMS], src_b[NRT_MAX_DIMS];
  int64_t mul_a[NRT_MAX_DIMS], mul_b[NRT_MAX_DIMS];
} refined;

/* Common dims of side A (sizes sa, T strides ta) and side B. Each side's
 * dim splits into consecutive common dims; T's strides must agree at every
 * step, which is what "the same elements of T" means. */
static bool refine(int na, const int64_t *sa, const int64_t *ta, int nb, const int64_t *sb, const int64_t *tb,
                   refined *r) {
  int pa[NRT_MAX_DIMS], pb[NRT_MAX_DIMS];
  for (int i = 0; i < na; i++) pa[i] = i;
  for (int i = 0; i < nb; i++) pb[i] = i;
  sort_by_stride(pa, na, ta);
  sort_by_stride(pb, nb, tb);
  int ia = na - 1, ib = nb - 1, n = 0;
  int64_t rem_a = ia >= 0 ? sa[pa[ia]] : 1, rem_b = ib >= 0 ? sb[pb[ib]] : 1, con_a = 1, con_b = 1;
  int src_a[NRT_MAX_DIMS], src_b[NRT_MAX_DIMS];
  int64_t mul_a[NRT_MAX_DIMS], mul_b[NRT_MAX_DIMS], sizes[NRT_MAX_DIMS];
  while (ia >= 0 && ib >= 0) {
    if (ta[pa[ia]] * con_a != tb[pb[ib]] * con_b) return false;
    int64_t m = rem_a < rem_b ? rem_a : rem_b;
    if (rem_a % m || rem_b % m || n == NRT_MAX_DIMS) return false;
    sizes[n] = m;
    src_a[n] = pa[ia];
    src_b[n] = pb[ib];
    mul_a[n] = con_a;
    mul_b[n] = con_b;
    n++;
    con_a *= m;
    rem_a /= m;
    con_b *= m;
    rem_b /= m;
    if (rem_a == 1 && --ia >= 0) rem_a = sa[pa[ia]], con_a = 1;
    if (rem_b == 1 && --ib >= 0) rem_b = sb[pb[ib]], con_b = 1;
  }
  if (ia >= 0 || ib >= 0) return false;
  r->ndim = n;
  for (int j = 0; j < n; j++) { /* innermost first -> outermost first */
    r->sizes[j] = sizes[n - 1 - j];
    r->src_a[j] = src_a[n - 1 - j];
    r->src_b[j] = src_b[n - 1 - j];
    r->mul_a[j] = mul_a[n - 1 - j];
    r->mul_b[j] = mul_b[n - 1 - j];
  }
  return true;
}

static bool same_map(const nrt_graph_operand *a, const int64_t *sa, const nrt_graph_operand *b, const int64_t *sb,
                     int ndim) {
  if (a->offset != b->offset || a->dtype != b->dtype) return false;
  for (int d = 0; d < ndim; d++)
    if (sa[d] != sb[d]) return false;
  return true;
}

/* Every buffer a member writes is accessed through one map by all members. */
static bool consistent(const nrt_graph *g, const chain *c) {
  for (int m = 0; m < c->n; m++) {
    const nrt_graph_node *w = &g->nodes[c->members[m]];
    const nrt_graph_operand *wo = &w->operands[0];
    for (int m2 = 0; m2 < c->n; m2++) {
      const nrt_graph_node *n = &g->nodes[c->members[m2]];
      for (int k = 0; k < nops_of(n); k++)
        if (n->operands[k].buffer == wo->buffer &&
            !same_map(wo, c->strides[m][0], &n->operands[k], c->strides[m2][k], c->ndim))
          return false;
    }
    for (int d = 0; d < c->ndim; d++)
      if (c->strides[m][0][d] == 0) return false; /* a broadcast output */
  }
  return true;
}

/* Moving the chain from its last member to C's place crosses the live
 * nodes in between: none may read what it writes or write what it
 * touches. */
static bool crossing_ok(const nrt_graph *g, const bool *live, const chain *c, int to) {
  int from = c->members[c->n - 1];
  if (to - from > MAX_DISTANCE) return false;
  for (int z = from + 1; z < to; z++) {
    if (!live[z]) continue;
    const nrt_graph_node *nz = &g->nodes[z];
    for (int kz = 0; kz < nops_of(nz); kz++) {
      int b = nz->operands[kz].buffer;
      if (b < 0) continue;
      bool z_writes = kz < nz->noutputs;
      for (int m = 0; m < c->n; m++) {
        const nrt_graph_node *n = &g->nodes[c->members[m]];
        for (int k = 0; k < nops_of(n); k++) {
          if (n->operands[k].buffer != b) continue;
          bool c_writes = k < n->noutputs;
          if (z_writes || c_writes) return false;
        }
      }
    }
  }
  return true;
}

/* C joins chain X through its input q, which reads what member pm wrote. */
static bool try_join(const nrt_graph *g, const bool *live, chain *x, int pm, int ci, int q) {
  const nrt_graph_node *p = &g->nodes[x->members[pm]], *cn = &g->nodes[ci];
  if (x->n >= NRT_FUSED_MAX_MEMBERS || nrt_node_numel(cn) != nrt_node_numel(p)) return false;
  const nrt_graph_operand *t_out = &p->operands[0], *t_in = &cn->operands[q];
  if (t_out->offset != t_in->offset || t_out->dtype != t_in->dtype) return false;
  if (!crossing_ok(g, live, x, ci)) return false;
  /* C's dims of size > 1 */
  int nb = 0, dims[NRT_MAX_DIMS];
  int64_t sb[NRT_MAX_DIMS] = {0}, tb[NRT_MAX_DIMS] = {0};
  for (int d = 0; d < cn->ndim; d++)
    if (cn->sizes[d] != 1) {
      dims[nb] = d;
      sb[nb] = cn->sizes[d];
      tb[nb] = t_in->strides[d];
      nb++;
    }
  refined r;
  if (!refine(x->ndim, x->sizes, x->strides[pm][0], nb, sb, tb, &r)) return false;
  chain next = *x;
  next.members = malloc(sizeof(int) * (size_t)(x->n + 1));
  next.strides = malloc(sizeof(strides_t) * (size_t)(x->n + 1));
  if (!next.members || !next.strides) {
    free(next.members);
    free(next.strides);
    return false;
  }
  next.cap = next.n = x->n + 1;
  memcpy(next.members, x->members, sizeof(int) * (size_t)x->n);
  next.members[x->n] = ci;
  next.ndim = r.ndim;
  memcpy(next.sizes, r.sizes, sizeof r.sizes);
  for (int m = 0; m < x->n; m++) {
    const nrt_graph_node *n = &g->nodes[x->members[m]];
    for (int k = 0; k < nops_of(n); k++)
      for (int j = 0; j < r.ndim; j++) next.strides[m][k][j] = x->strides[m][k][r.src_a[j]] * r.mul_a[j];
  }
  for (int k = 0; k < nops_of(cn); k++)
    for (int j = 0; j < r.ndim; j++)
      next.strides[x->n][k][j] = cn->operands[k].strides[dims[r.src_b[j]]] * r.mul_b[j];
  if (!consistent(g, &next)) {
    free(next.members);
    free(next.strides);
    return false;
  }
  free(x->members);
  free(x->strides);
  *x = next;
  return true;
}

/* Tiled buffers and their slots: slot reuse after the last reader. */
static void assign_tiles(const nrt_graph *g, const int *access_count, const chain *c, nrt_fusion *f, int *out_ntiles) {
  int slot_until[NRT_FUSED_MAX_TILES]; /* member index of the slot's last reader */
  for (int s = 0; s < NRT_FUSED_MAX_TILES; s++) slot_until[s] = -1;
  int ntiles = 0;
  for (int m = 0; m < c->n; m++) {
    const nrt_graph_node *w = &g->nodes[c->members[m]];
    int b = w->operands[0].buffer;
    if (g->buffers[b].kind != NRT_BUFFER_INTERMEDIATE || f->tiled[b]) continue;
    int inside = 0, last_reader = -1;
    bool ok = true;
    for (int m2 = 0; m2 < c->n; m2++) {
      const nrt_graph_node *n = &g->nodes[c->members[m2]];
      for (int k = 0; k < nops_of(n); k++) {
        if (n->operands[k].buffer != b) continue;
        inside++;
        if (k < n->noutputs && m2 != m) ok = false;             /* a second writer */
        if (k >= n->noutputs && m2 <= m) ok = false;            /* read before the write */
        if (k >= n->noutputs && m2 > last_reader) last_reader = m2;
      }
    }
    if (!ok || inside != access_count[b] || last_reader < 0) continue;
    int slot = -1;
    for (int s = 0; s < NRT_FUSED_MAX_TILES && slot < 0; s++)
      if (slot_until[s] < m) slot = s; /* free: its last reader ran before this writer */
    if (slot < 0) continue;          /* out of slots: stored instead */
    slot_until[slot] = last_reader;
    if (slot + 1 > ntiles) ntiles = slot + 1;
    f->tiled[b] = true;
    f->tile_slot[b] = slot;
  }
  *out_ntiles = ntiles;
}

static int cmp_position(const void *pa, const void *pb) {
  const nrt_group *a = pa, *b = pb;
  return a->position - b->position;
}

nrt_status nrt_fuse(const nrt_graph *g, const bool *live, bool enable, nrt_fusion *f) {
  memset(f, 0, sizeof *f);
  int nn = g->nnodes, nb = g->nbuffers;
  chain *chains = calloc((size_t)(nn ? nn : 1), sizeof *chains);
  int *chain_of = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
  int *last_writer = malloc(sizeof(int) * (size_t)(nb ? nb : 1));
  int *access_count = calloc((size_t)(nb ? nb : 1), sizeof(int));
  f->group_of = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
  f->tiled = calloc((size_t)(nb ? nb : 1), sizeof(bool));
  f->tile_slot = malloc(sizeof(int) * (size_t)(nb ? nb : 1));
  nrt_status st = NRT_SUCCESS;
  int nchains = 0;
  if (!chains || !chain_of || !last_writer || !access_count || !f->group_of || !f->tiled || !f->tile_slot) {
    st = NRT_ERROR_OUT_OF_MEMORY;
    goto done;
  }
  for (int b = 0; b < nb; b++) last_writer[b] = -1, f->tile_slot[b] = -1;
  for (int i = 0; i < nn; i++) {
    chain_of[i] = -1;
    if (!live[i]) continue;
    const nrt_graph_node *n = &g->nodes[i];
    for (int k = 0; k < nops_of(n); k++)
      if (n->operands[k].buffer >= 0) access_count[n->operands[k].buffer]++;
  }
  for (int i = 0; i < nn; i++) {
    if (!live[i]) continue;
    const nrt_graph_node *n = &g->nodes[i];
    bool joined = false;
    if (enable && fusable(g, i)) {
      for (int q = n->noutputs; q < nops_of(n) && !joined; q++) {
        int t = n->operands[q].buffer;
        int p = t >= 0 ? last_writer[t] : -1;
        if (p < 0 || chain_of[p] < 0) continue;
        chain *x = &chains[chain_of[p]];
        if (!x->open) continue;
        int pm = 0;
        while (x->members[pm] != p) pm++;
        if (try_join(g, live, x, pm, i, q)) {
          chain_of[i] = chain_of[p];
          joined = true;
        }
      }
    }
    if (!joined) {
      if (!chain_start(g, i, &chains[nchains])) {
        st = NRT_ERROR_OUT_OF_MEMORY;
        goto done;
      }
      chain_of[i] = nchains++;
    }
    for (int k = 0; k < n->noutputs; k++)
      if (n->operands[k].buffer >= 0) last_writer[n->operands[k].buffer] = i;
  }
  f->groups = calloc((size_t)(nchains ? nchains : 1), sizeof *f->groups);
  if (!f->groups) {
    st = NRT_ERROR_OUT_OF_MEMORY;
    goto done;
  }
  for (int c = 0; c < nchains; c++) {
    chain *x = &chains[c];
    nrt_group *gr = &f->groups[f->ngroups++];
    gr->nmembers = x->n;
    gr->members = x->members;
    gr->position = x->members[x->n - 1];
    gr->ndim = x->ndim;
    memcpy(gr->sizes, x->sizes, sizeof gr->sizes);
    if (x->n > 1) {
      assign_tiles(g, access_count, x, f, &gr->ntiles);
      gr->strides = x->strides;
      x->strides = NULL;
    }
    x->members = NULL;
  }
  qsort(f->groups, (size_t)f->ngroups, sizeof *f->groups, cmp_position);
  for (int i = 0; i < nn; i++) f->group_of[i] = -1;
  for (int s = 0; s < f->ngroups; s++)
    for (int m = 0; m < f->groups[s].nmembers; m++) f->group_of[f->groups[s].members[m]] = s;
done:
  for (int c = 0; c < nchains; c++) {
    free(chains[c].members);
    free(chains[c].strides);
  }
  free(chains);
  free(chain_of);
  free(last_writer);
  free(access_count);
  if (st != NRT_SUCCESS) {
    nrt_set_error_message("fusion: host out of memory");
    nrt_fusion_free(f);
  }
  return st;
}

void nrt_fusion_free(nrt_fusion *f) {
  for (int s = 0; s < f->ngroups; s++) {
    free(f->groups[s].members);
    free(f->groups[s].strides);
  }
  free(f->groups);
  free(f->group_of);
  free(f->tiled);
  free(f->tile_slot);
  memset(f, 0, sizeof *f);
}
