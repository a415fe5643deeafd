/* Max unpooling (MAX_UNPOOL, nrt/ops/resample.h): the inverse of max
 * pooling's index output. Each (n, c) plane is one task: zero-filled, then
 * every input element copied to the output offset its index names, in input
 * order, so a repeated index keeps the last value exactly as ATen's CPU
 * loop does (results do not depend on threading). Elements are copied as
 * bytes: every dtype is exact and there is no arithmetic to vectorise, so
 * the reference and fast paths are the same loop. */
#include <stdatomic.h>
#include "kernels/resample/resample.h"

typedef struct unpool_job {
  const nrt_launch *l;
  nrt_resample_geom g;
  size_t esize;
  _Atomic int64_t bad_plane; /* lowest plane with an invalid index, or -1 */
} unpool_job;

#define PLANE(o, n, c) ((char *)(o)->data + (n) * (o)->strides[0] + (c) * (o)->strides[1])

static void unpool_planes(void *ctx, int64_t begin, int64_t end) {
  unpool_job *j = ctx;
  const nrt_resample_geom *g = &j->g;
  const nrt_operand *y = &j->l->operands[0], *x = &j->l->operands[1], *ix = &j->l->operands[2];
  const int64_t OHW = g->O[1] * g->O[2];
  for (int64_t p = begin; p < end; p++) {
    int64_t n = p / g->C, c = p % g->C;
    char *yp = PLANE(y, n, c);
    for (int64_t d = 0; d < g->O[0]; d++)
      for (int64_t h = 0; h < g->O[1]; h++)
        for (int64_t w = 0; w < g->O[2]; w++)
          memset(yp + d * y->strides[2] + h * y->strides[3] + w * y->strides[4], 0, j->esize);
    const char *xp = PLANE(x, n, c), *ip = PLANE(ix, n, c);
    for (int64_t d = 0; d < g->I[0]; d++)
      for (int64_t h = 0; h < g->I[1]; h++)
        for (int64_t w = 0; w < g->I[2]; w++) {
          int64_t idx;
          memcpy(&idx, ip + d * ix->strides[2] + h * ix->strides[3] + w * ix->strides[4], sizeof idx);
          if (idx < 0 || idx >= g->OL) {
            /* keep the lowest failing plane, so the message is the same on every run */
            int64_t cur = atomic_load(&j->bad_plane);
            while ((cur == -1 || cur > p) && !atomic_compare_exchange_weak(&j->bad_plane, &cur, p)) {
            }
            goto next_plane;
          }
          int64_t od = idx / OHW, oh = (idx / g->O[2]) % g->O[1], ow = idx % g->O[2];
          memcpy(yp + od * y->strides[2] + oh * y->strides[3] + ow * y->strides[4],
                 xp + d * x->strides[2] + h * x->strides[3] + w * x->strides[4], j->esize);
        }
  next_plane:;
  }
}

nrt_status nrt_resample_unpool(const nrt_launch *l) {
  unpool_job j = {.l = l};
  nrt_status st = nrt_resample_geom_init(l, &j.g);
  if (st != NRT_SUCCESS) return st;
  if (l->noutputs != 1 || l->operands[2].dtype != NRT_INT64 || l->operands[0].dtype != l->operands[1].dtype)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "MAX_UNPOOL: expected output y, inputs x (same dtype) and int64 indices");
  int64_t planes = j.g.N * j.g.C;
  if (planes == 0 || j.g.OL == 0) return NRT_SUCCESS;
  j.esize = nrt_dtype_size(l->operands[0].dtype);
  atomic_store(&j.bad_plane, -1);
  nrt_parallel_for(planes, 1 + 4096 / (j.g.OL + j.g.IL), unpool_planes, &j);
  int64_t bad = atomic_load(&j.bad_plane);
  if (bad >= 0) {
    /* the first invalid index of that plane, found again serially */
    const nrt_operand *ix = &l->operands[2];
    const char *ip = PLANE(ix, bad / j.g.C, bad % j.g.C);
    int64_t bad_index = 0;
    for (int64_t d = 0; d < j.g.I[0]; d++)
      for (int64_t h = 0; h < j.g.I[1]; h++)
        for (int64_t w = 0; w < j.g.I[2]; w++) {
          int64_t idx;
          memcpy(&idx, ip + d * ix->strides[2] + h * ix->strides[3] + w * ix->strides[4], sizeof idx);
          if (idx < 0 || idx >= j.g.OL) {
            bad_index = idx;
            goto found;
          }
        }
  found:
    if (j.g.O[0] == 1)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "Found an invalid max index: %lld (output volumes are of size %lldx%lld)",
                             (long long)bad_index, (long long)j.g.O[1], (long long)j.g.O[2]);
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "Found an invalid max index: %lld (output volumes are of size %lldx%lldx%lld)",
                           (long long)bad_index, (long long)j.g.O[0], (long long)j.g.O[1], (long long)j.g.O[2]);
  }
  return NRT_SUCCESS;
}
