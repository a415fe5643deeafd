/* Fractional max pooling forward (FRACTIONAL_MAX_POOL; nrt/ops/resample.h).
 * The pseudo-random window starts are a function of a sample in [0, 1) per
 * (n, c, dim) that the caller drew, so the kernel is deterministic. The
 * starts follow ATen's generate_intervals evaluated in the input's own
 * dtype (bfloat16 / float16 arithmetic rounds after every operation, as
 * c10's reduced-precision types do): a start off by one selects a
 * different window. One (n, c) plane per task; a plain scalar loop, so
 * there is no separate reference path. */
#include <stdlib.h>
#include "kernels/resample/resample.h"

/* Rounds a float to the precision of dt (identity for float32/64). */
static float round_to(nrt_dtype dt, float v) {
  if (dt == NRT_BFLOAT16) return nrt_k_bf16_to_f32(nrt_k_f32_to_bf16(v));
  if (dt == NRT_FLOAT16) return nrt_k_f16_to_f32(nrt_k_f32_to_f16(v));
  return v;
}

/* Window start for output index i (windows are [start, start + pool)). */
static int64_t interval_start(nrt_dtype dt, float sample, int64_t in, int64_t out, int64_t pool, int64_t i) {
  if (i == out - 1) return in - pool;
  float alpha = round_to(dt, round_to(dt, (float)(in - pool)) / round_to(dt, (float)(out - 1)));
  float a = round_to(dt, round_to(dt, round_to(dt, (float)i) + sample) * alpha);
  float b = round_to(dt, sample * alpha);
  return (int64_t)(int)a - (int64_t)(int)b;
}

typedef struct frac_job {
  const nrt_launch *l;
  nrt_resample_geom g;
  int64_t pool[3];
  int nsp;
  _Atomic int failed;
} frac_job;

static void frac_planes(void *ctx, int64_t begin, int64_t end) {
  frac_job *j = ctx;
  const nrt_resample_geom *g = &j->g;
  const nrt_operand *y = &j->l->operands[0], *ix = &j->l->operands[1], *x = &j->l->operands[2],
                    *sm = &j->l->operands[3];
  int64_t *starts = malloc(sizeof(int64_t) * (size_t)(g->O[0] + g->O[1] + g->O[2] + 1));
  if (!starts) {
    j->failed = 1;
    return;
  }
  int64_t *st[3] = {starts, starts + g->O[0], starts + g->O[0] + g->O[1]};
  for (int64_t p = begin; p < end; p++) {
    int64_t n = p / g->C, c = p % g->C;
    const char *sp = (const char *)sm->data + n * sm->strides[0] + c * sm->strides[1];
    for (int d = 0; d < 3; d++) {
      /* 2-d planes: sample 0 drives w and sample 1 drives h */
      int k = j->nsp == 3 ? d : (d == 2 ? 0 : 1);
      float sample = (d == 0 && j->nsp == 2) ? 0.0f : (float)nrt_ref_load_f64(sp + k * sm->strides[2], sm->dtype);
      for (int64_t o = 0; o < g->O[d]; o++)
        st[d][o] = interval_start(x->dtype, sample, g->I[d], g->O[d], j->pool[d], o);
    }
    const char *xp = (const char *)x->data + n * x->strides[0] + c * x->strides[1];
    for (int64_t od = 0; od < g->O[0]; od++)
      for (int64_t oh = 0; oh < g->O[1]; oh++)
        for (int64_t ow = 0; ow < g->O[2]; ow++) {
          int64_t d0 = st[0][od], h0 = st[1][oh], w0 = st[2][ow];
          double best = -INFINITY;
          int64_t best_i = (d0 * g->I[1] + h0) * g->I[2] + w0;
          for (int64_t d = d0; d < d0 + j->pool[0]; d++)
            for (int64_t h = h0; h < h0 + j->pool[1]; h++)
              for (int64_t w = w0; w < w0 + j->pool[2]; w++) {
                if (d < 0 || d >= g->I[0] || h < 0 || h >= g->I[1] || w < 0 || w >= g->I[2]) continue;
                double v = nrt_ref_load_f64(xp + d * x->strides[2] + h * x->strides[3] + w * x->strides[4], x->dtype);
                if (v > best || isnan(v)) {
                  best = v;
                  best_i = (d * g->I[1] + h) * g->I[2] + w;
                }
              }
          size_t yo = (size_t)(n * y->strides[0] + c * y->strides[1] + od * y->strides[2] + oh * y->strides[3] +
                               ow * y->strides[4]);
          nrt_ref_store_f64((char *)y->data + yo, y->dtype, best);
          size_t io = (size_t)(n * ix->strides[0] + c * ix->strides[1] + od * ix->strides[2] + oh * ix->strides[3] +
                               ow * ix->strides[4]);
          memcpy((char *)ix->data + io, &best_i, sizeof best_i);
        }
  }
  free(starts);
}

nrt_status nrt_resample_fracpool(const nrt_launch *l) {
  frac_job j = {.l = l};
  nrt_status s = nrt_resample_geom_init(l, &j.g);
  if (s != NRT_SUCCESS) return s;
  j.nsp = (int)l->params[0];
  if (l->noutputs != 2 || l->operands[1].dtype != NRT_INT64 || (j.nsp != 2 && j.nsp != 3) ||
      !nrt_dtype_is_floating(l->operands[2].dtype)) {
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "FRACTIONAL_MAX_POOL: expected outputs y, int64 indices, float input, 2 or 3 dims");
  }
  for (int d = 0; d < 3; d++) {
    j.pool[d] = l->aux[d];
    if (j.pool[d] < 1 || (j.g.O[d] > 0 && j.pool[d] > j.g.I[d]))
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "FRACTIONAL_MAX_POOL: pool size %lld does not fit input extent %lld", (long long)j.pool[d],
                             (long long)j.g.I[d]);
  }
  int64_t planes = j.g.N * j.g.C;
  if (planes == 0 || j.g.OL == 0) return NRT_SUCCESS;
  nrt_parallel_for(planes, 1, frac_planes, &j);
  if (j.failed) return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "FRACTIONAL_MAX_POOL: out of memory");
  return NRT_SUCCESS;
}
