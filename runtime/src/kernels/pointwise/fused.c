/* The fused pointwise engine (kernels/kernels.h): a chain of pointwise
 * launches run tile by tile through the pointwise engine's row loop.
 *
 * Fast path: the chain's dims are collapsed where every external operand
 * of every member allows (tile operands are contiguous by construction),
 * the element range is split across the kernel pool, and each row is cut
 * into tiles of NRT_BLOCK elements; for each tile the members run in
 * order, reading and writing the tile buffers in L1 and external memory
 * only for the chain's real inputs and outputs.
 *
 * Reference path: one element at a time over the chain's dims as given,
 * every member through the pointwise reference element (libm builds,
 * conversions through double), i.e. what the members' launches do one by
 * one on the reference path. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include "kernels/pointwise/pointwise.h"

#define FUSED_GRAIN 32768
#define TILE_BYTES (NRT_BLOCK * 8) /* the widest real dtype */

typedef struct fused_plan {
  const nrt_fused_chain *c;
  int ndim;
  int64_t sizes[NRT_MAX_DIMS];
  int64_t strides[NRT_FUSED_MAX_MEMBERS][NRT_MAX_OPERANDS][NRT_MAX_DIMS];
  char *data[NRT_FUSED_MAX_MEMBERS][NRT_MAX_OPERANDS];
  nrt_pw_row rows[NRT_FUSED_MAX_MEMBERS];
  atomic_int failed;
} fused_plan;

static bool is_tile(const nrt_fused_member *m, int k) { return m->tile[k] >= 0; }

/* Merges a dim into its inner neighbour when every external operand steps
 * over the inner dim exactly; drops size-1 dims. Keeps the given order. */
static void collapse(fused_plan *p) {
  const nrt_fused_chain *c = p->c;
  int64_t rs[NRT_MAX_DIMS];
  int n = 0;
  for (int d = c->ndim - 1; d >= 0; d--) {
    if (c->sizes[d] == 1) continue;
    bool merge = n > 0;
    for (int mi = 0; merge && mi < c->nmembers; mi++) {
      const nrt_fused_member *m = &c->members[mi];
      int nops = m->launch.noutputs + m->launch.ninputs;
      for (int k = 0; merge && k < nops; k++)
        if (!is_tile(m, k)) merge = m->launch.operands[k].strides[d] == p->strides[mi][k][n - 1] * rs[n - 1];
    }
    if (merge) {
      rs[n - 1] *= c->sizes[d];
      continue;
    }
    rs[n] = c->sizes[d];
    for (int mi = 0; mi < c->nmembers; mi++) {
      const nrt_fused_member *m = &c->members[mi];
      for (int k = 0; k < m->launch.noutputs + m->launch.ninputs; k++)
        p->strides[mi][k][n] = is_tile(m, k) ? 0 : m->launch.operands[k].strides[d];
    }
    n++;
  }
  if (n == 0) {
    rs[0] = 1;
    for (int mi = 0; mi < c->nmembers; mi++)
      for (int k = 0; k < c->members[mi].launch.noutputs + c->members[mi].launch.ninputs; k++)
        p->strides[mi][k][0] = 0;
    n = 1;
  }
  /* rs and strides were built innermost first; store them outermost first. */
  for (int d = 0; d < n; d++) p->sizes[d] = rs[n - 1 - d];
  for (int mi = 0; mi < c->nmembers; mi++)
    for (int k = 0; k < c->members[mi].launch.noutputs + c->members[mi].launch.ninputs; k++)
      for (int d = 0; d < n / 2; d++) {
        int64_t t = p->strides[mi][k][d];
        p->strides[mi][k][d] = p->strides[mi][k][n - 1 - d];
        p->strides[mi][k][n - 1 - d] = t;
      }
  p->ndim = n;
}

static void fused_range(void *ctx, int64_t begin, int64_t end) {
  fused_plan *p = ctx;
  const nrt_fused_chain *c = p->c;
  alignas(64) char tiles[NRT_FUSED_MAX_TILES][TILE_BYTES];
  int nd = p->ndim;
  int64_t idx[NRT_MAX_DIMS], rem = begin;
  for (int d = nd - 1; d >= 0; d--) {
    idx[d] = rem % p->sizes[d];
    rem /= p->sizes[d];
  }
  /* Each external operand's pointer at inner index 0 of the current row. */
  char *row[NRT_FUSED_MAX_MEMBERS][NRT_MAX_OPERANDS];
  for (int mi = 0; mi < c->nmembers; mi++)
    for (int k = 0; k < p->rows[mi].nops; k++) {
      row[mi][k] = p->data[mi][k];
      if (!row[mi][k]) continue;
      for (int d = 0; d < nd - 1; d++) row[mi][k] += idx[d] * p->strides[mi][k][d];
    }
  int64_t inner = p->sizes[nd - 1], first = idx[nd - 1], pos = begin;
  while (pos < end) {
    int64_t n = inner - first < end - pos ? inner - first : end - pos;
    for (int64_t j = 0; j < n; j += NRT_BLOCK) {
      int64_t m = n - j < NRT_BLOCK ? n - j : NRT_BLOCK;
      for (int mi = 0; mi < c->nmembers; mi++) {
        const nrt_fused_member *mem = &c->members[mi];
        char *ptr[NRT_MAX_OPERANDS];
        for (int k = 0; k < p->rows[mi].nops; k++)
          ptr[k] = is_tile(mem, k) ? tiles[mem->tile[k]]
                                   : row[mi][k] + (first + j) * p->strides[mi][k][nd - 1];
        if (nrt_pw_row_run(&p->rows[mi], ptr, m, 0)) {
          atomic_store_explicit(&p->failed, 1, memory_order_relaxed);
          return;
        }
      }
    }
    pos += n;
    first = 0;
    for (int d = nd - 2; d >= 0; d--) { /* odometer step over the outer dims */
      for (int mi = 0; mi < c->nmembers; mi++)
        for (int k = 0; k < p->rows[mi].nops; k++) row[mi][k] += p->strides[mi][k][d];
      if (++idx[d] < p->sizes[d]) break;
      for (int mi = 0; mi < c->nmembers; mi++)
        for (int k = 0; k < p->rows[mi].nops; k++) row[mi][k] -= p->strides[mi][k][d] * p->sizes[d];
      idx[d] = 0;
    }
  }
}

static nrt_status fused_reference(const fused_plan *p, int64_t numel, char *const *external) {
  const nrt_fused_chain *c = p->c;
  alignas(16) char tiles[NRT_FUSED_MAX_TILES][16];
  for (int64_t lin = 0; lin < numel; lin++) {
    for (int mi = 0; mi < c->nmembers; mi++) {
      const nrt_fused_member *m = &c->members[mi];
      char *ptr[NRT_MAX_OPERANDS];
      for (int k = 0; k < p->rows[mi].nops; k++) {
        if (is_tile(m, k)) {
          ptr[k] = tiles[m->tile[k]];
          continue;
        }
        ptr[k] = external[m->external[k]];
        int64_t rem = lin;
        for (int d = c->ndim - 1; d >= 0; d--) {
          ptr[k] += (rem % c->sizes[d]) * m->launch.operands[k].strides[d];
          rem /= c->sizes[d];
        }
      }
      nrt_status st = nrt_pw_ref_element(&p->rows[mi], ptr, lin);
      if (st != NRT_SUCCESS) return st;
    }
  }
  return NRT_SUCCESS;
}

nrt_status nrt_fused_execute(const nrt_fused_chain *c, char *const *external) {
  if (c->nmembers < 1 || c->nmembers > NRT_FUSED_MAX_MEMBERS || c->ntiles > NRT_FUSED_MAX_TILES ||
      c->ndim < 0 || c->ndim > NRT_MAX_DIMS)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "fused chain: %d members, %d tiles, ndim %d",
                           c->nmembers, c->ntiles, c->ndim);
  int64_t numel = 1;
  for (int d = 0; d < c->ndim; d++) numel *= c->sizes[d];
  fused_plan *p = malloc(sizeof *p);
  if (!p) return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "fused chain: host out of memory");
  p->c = c;
  atomic_init(&p->failed, 0);
  nrt_status st = NRT_SUCCESS;
  for (int mi = 0; mi < c->nmembers && st == NRT_SUCCESS; mi++) {
    const nrt_fused_member *m = &c->members[mi];
    const nrt_pw_kernel *k;
    st = nrt_pw_prepare(&m->launch, &k);
    if (st == NRT_SUCCESS && nrt_pw_is_random(k))
      st = nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "fused chain: %s draws random numbers",
                           nrt_op_name(m->launch.op));
    if (st != NRT_SUCCESS) break;
    int nops = m->launch.noutputs + m->launch.ninputs;
    for (int o = 0; o < nops; o++) {
      bool bad = is_tile(m, o) ? m->tile[o] >= c->ntiles || nrt_dtype_size(m->launch.operands[o].dtype) > 8
                               : m->external[o] < 0 || m->external[o] >= c->nexternal;
      if (bad) {
        st = nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "fused chain: member %d operand %d refers nowhere", mi, o);
        break;
      }
      p->data[mi][o] = is_tile(m, o) ? NULL : external[m->external[o]];
    }
    nrt_pw_row_init(&p->rows[mi], &m->launch, k, NULL);
  }
  if (st != NRT_SUCCESS || numel == 0) {
    free(p);
    return st;
  }
  if (nrt_kernels_reference()) {
    st = fused_reference(p, numel, external);
  } else {
    collapse(p);
    for (int mi = 0; mi < c->nmembers; mi++) {
      const nrt_fused_member *m = &c->members[mi];
      for (int o = 0; o < p->rows[mi].nops; o++)
        p->rows[mi].st[o] = is_tile(m, o) ? (int64_t)nrt_dtype_size(m->launch.operands[o].dtype)
                                          : p->strides[mi][o][p->ndim - 1];
    }
    nrt_parallel_for(numel, FUSED_GRAIN, fused_range, p);
    if (atomic_load(&p->failed)) st = NRT_ERROR_INVALID_ARGUMENT;
  }
  free(p);
  if (st != NRT_SUCCESS) return nrt_kernel_fail(st, "ZeroDivisionError");
  return NRT_SUCCESS;
}
