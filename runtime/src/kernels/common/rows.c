/* The row runner (see rows.h). */
#include <stdlib.h>
#include "exec/exec.h"
#include "kernels/common/rows.h"

void nrt_rows_init(nrt_rows *g, const nrt_launch *l) {
  g->len = l->ndim > 0 ? l->sizes[l->ndim - 1] : 1;
  g->count = 1;
  for (int d = 0; d + 1 < l->ndim; d++) g->count *= l->sizes[d];
  for (int k = 0; k < NRT_MAX_OPERANDS; k++) g->st[k] = l->ndim > 0 ? l->operands[k].strides[l->ndim - 1] : 0;
}

static void rows_task(void *ctx, int64_t begin, int64_t end) {
  nrt_rows_job *j = ctx;
  void *s = malloc(j->scratch ? j->scratch : 1);
  if (!s) {
    atomic_store(&j->failed, 1);
    return;
  }
  if (j->range) {
    j->range(j, begin, end, s);
  } else {
    for (int64_t r = begin; r < end; r++) {
      char *ptr[NRT_MAX_OPERANDS];
      nrt_rows_start(j->l, j->nops, r, ptr);
      j->row(j, r, ptr, s);
    }
  }
  free(s);
}

bool nrt_rows_run(nrt_rows_job *j, int64_t min_elems, bool parallel) {
  atomic_init(&j->failed, 0);
  if (j->g.count == 0) return true;
  if (parallel) {
    int64_t grain = j->g.len >= min_elems ? 1 : min_elems / (j->g.len ? j->g.len : 1);
    nrt_parallel_for(j->g.count, grain, rows_task, j);
  } else {
    rows_task(j, 0, j->g.count);
  }
  return !atomic_load(&j->failed);
}
