/* Channel normalisation kernels (NRT_KIND_NORM): batch norm
 * (training with batch statistics and running-stat update, eval with the
 * running statistics, backward) and group norm (forward, backward), over
 * activations viewed as [N, C, S] with strides {n, c, s}.
 *
 * The formulas are ATen's CPU ones:
 *   batch norm    mean, biased var over (N, S) per channel; invstd =
 *                 1/sqrt(var + eps); y = x * a + b with a = invstd * w,
 *                 b = bias - mean * a (channels where a or b is not
 *                 finite: ((x - mean) * invstd) * w + bias, see
 *                 bn_affine); running = (1 - m) * running + m * stat with
 *                 the unbiased variance;
 *   its backward  sum_dy, dot = sum (x - mean) dy; training: dx = (dy -
 *                 sum_dy/M - (x - mean) dot invstd^2 / M) invstd w; eval:
 *                 dx = dy invstd w; dw = dot invstd, db = sum_dy;
 *   group norm    mean, biased var per (n, group); rstd = 1/sqrt(max(var,
 *                 0) + eps); y = x * rstd w + (bias - mean rstd w);
 *   its backward  ds = sum dy x, db = sum dy per (n, c); c2 = (db_g mean
 *                 - ds_g) rstd^3 / M, c3 = -c2 mean - db_g rstd / M; dx =
 *                 rstd w dy + c2 x + c3; dw = sum_n (ds - db mean) rstd,
 *                 dbias = sum_n db.
 * Statistics accumulate in double (blocks of float32 partial sums on the
 * fast path); the normalisation itself runs in float32.
 *
 * Work split: batch norm by channel (each channel's N segments of S are
 * read by one thread, which keeps them in its cache across passes), or, for
 * channels-innermost (channels-last) activations, by fixed chunks of
 * (n, s) rows whose per-channel partial sums are combined in chunk order;
 * group norm by (n, group) row. The reference path is plain double loops. */
#pragma GCC optimize("O3,no-trapping-math,no-math-errno")
#include <stdlib.h>
#include "kernels/norm/norm.h"
#include "nrt/ops/norm.h"

#define BLK 1024

typedef struct cn_geom {
  int64_t N, C, S, G, Cg; /* batch norm: G = C, Cg = 1 */
  bool has_w, has_b;
} cn_geom;

typedef struct cn_job {
  const nrt_launch *l;
  cn_geom g;
  const nrt_operand *out[5], *in[5];
  int nout, nin;
  double *ds, *db; /* group norm backward: per (n, c) sums */
  _Atomic int failed;
} cn_job;

static inline char *seg(const nrt_operand *o, int64_t n, int64_t c) {
  return (char *)o->data + n * o->strides[0] + c * o->strides[1];
}

static float vload(const nrt_operand *o, int64_t i) {
  float v;
  nrt_load_f32(&v, (const char *)o->data + i * o->strides[0], 0, o->dtype, 1);
  return v;
}

static void vstore(const nrt_operand *o, int64_t i, double v) {
  float f = (float)v;
  nrt_store_f32((char *)o->data + i * o->strides[0], 0, o->dtype, &f, 1);
}

/* Vector of a [N, G]-shaped statistic (group norm mean / rstd). */
static inline char *stat2(const nrt_operand *o, int64_t n, int64_t g) {
  return (char *)o->data + n * o->strides[0] + g * o->strides[1];
}

/* ---- block sums ----------------------------------------------------------- */

static double sum_f(const float *x, int64_t n) {
  float acc[16] = {0};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; j++) acc[j] += x[i + j];
  double s = 0.0;
  for (; i < n; i++) s += x[i];
  for (int j = 0; j < 16; j++) s += acc[j];
  return s;
}

static double sumsq_dev_f(const float *x, float m, int64_t n) {
  float acc[16] = {0};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; j++) {
      float d = x[i + j] - m;
      acc[j] += d * d;
    }
  double s = 0.0;
  for (; i < n; i++) s += (double)(x[i] - m) * (x[i] - m);
  for (int j = 0; j < 16; j++) s += acc[j];
  return s;
}

static double dot_f(const float *x, const float *y, int64_t n) {
  float acc[16] = {0};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; j++) acc[j] += x[i + j] * y[i + j];
  double s = 0.0;
  for (; i < n; i++) s += (double)x[i] * y[i];
  for (int j = 0; j < 16; j++) s += acc[j];
  return s;
}

static double dot_dev_f(const float *x, float m, const float *y, int64_t n) {
  float acc[16] = {0};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; j++) acc[j] += (x[i + j] - m) * y[i + j];
  double s = 0.0;
  for (; i < n; i++) s += (double)(x[i] - m) * y[i];
  for (int j = 0; j < 16; j++) s += acc[j];
  return s;
}

/* Segment (n, c) of operand o in blocks: load (store = false) or store. */
#define FOR_BLOCKS(S, b0, bn) for (int64_t b0 = 0, bn = 0; b0 < (S) && ((bn = ((S) - b0 < BLK ? (S) - b0 : BLK)), 1); b0 += BLK)

static void seg_load(const nrt_operand *o, int64_t n, int64_t c, int64_t b0, int64_t bn, float *buf) {
  nrt_load_f32(buf, seg(o, n, c) + b0 * o->strides[2], o->strides[2], o->dtype, bn);
}
static void seg_store(const nrt_operand *o, int64_t n, int64_t c, int64_t b0, int64_t bn, const float *buf) {
  nrt_store_f32(seg(o, n, c) + b0 * o->strides[2], o->strides[2], o->dtype, buf, bn);
}

/* Over the blocks of segment (n, c) of x, in order: *s += the block's sum
 * of x, or with dev of (x - *dev)^2. */
static void seg_sums(const nrt_operand *x, int64_t n, int64_t c, int64_t S, const float *dev, double *s, float *buf) {
  FOR_BLOCKS(S, b0, bn) {
    seg_load(x, n, c, b0, bn, buf);
    *s += dev ? sumsq_dev_f(buf, *dev, bn) : sum_f(buf, bn);
  }
}

/* A channel's normalisation. ATen's contiguous kernels compute y = x * a +
 * bb with a = invstd * w, bb = bias - mean * a; where that overflows or
 * meets an infinity (a huge or infinite weight or bias: inf * x - inf is
 * NaN) its strided kernel's ((x - mean) * invstd) * w + bias, which float64
 * agrees with, keeps the signs and stays finite while the result is. The
 * second form runs only for such channels (`exact`), so finite ones keep
 * the one-multiply-add loop. */
typedef struct bn_affine {
  float a, bb, mean, invstd, w, b;
  bool exact;
} bn_affine;

static bn_affine bn_affine_of(float mean, double invstd, float w, float b) {
  bn_affine f = {.mean = mean, .invstd = (float)invstd, .w = w, .b = b};
  f.a = f.invstd * w;
  f.bb = b - mean * f.a;
  f.exact = !isfinite(f.a) || !isfinite(f.bb);
  return f;
}

/* Segment (n, c) of y = the affine map of that of x, a block at a time. */
static void seg_affine(const nrt_operand *x, const nrt_operand *y, int64_t n, int64_t c, int64_t S,
                       const bn_affine *f, float *buf) {
  FOR_BLOCKS(S, b0, bn) {
    seg_load(x, n, c, b0, bn, buf);
    if (f->exact)
      for (int64_t i = 0; i < bn; i++) buf[i] = ((buf[i] - f->mean) * f->invstd) * f->w + f->b;
    else
      for (int64_t i = 0; i < bn; i++) buf[i] = buf[i] * f->a + f->bb;
    seg_store(y, n, c, b0, bn, buf);
  }
}

/* ---- batch norm (fast) -------------------------------------------------------- */

static void bn_train_channels(void *ctx, int64_t begin, int64_t end) {
  cn_job *j = ctx;
  const cn_geom *g = &j->g;
  const nrt_launch *l = j->l;
  const nrt_operand *x = j->in[0], *y = j->out[0];
  const nrt_operand *w = g->has_w ? j->in[1] : NULL, *b = g->has_b ? j->in[g->has_w ? 2 : 1] : NULL;
  double count = (double)(g->N * g->S), eps = l->scalars[0].f, mom = l->scalars[1].f;
  float buf[BLK];
  for (int64_t c = begin; c < end; c++) {
    double s = 0.0;
    for (int64_t n = 0; n < g->N; n++) seg_sums(x, n, c, g->S, NULL, &s, buf);
    double mean = s / count;
    double ss = 0.0;
    float mf = (float)mean;
    for (int64_t n = 0; n < g->N; n++) seg_sums(x, n, c, g->S, &mf, &ss, buf);
    double var = ss / count, invstd = 1.0 / sqrt(var + eps);
    vstore(j->out[1], c, mean);
    vstore(j->out[2], c, invstd);
    if (j->nout == 5) {
      double unbiased = ss / (count - 1.0);
      vstore(j->out[3], c, mom * mean + (1.0 - mom) * vload(j->out[3], c));
      vstore(j->out[4], c, mom * unbiased + (1.0 - mom) * vload(j->out[4], c));
    }
    bn_affine f = bn_affine_of((float)mean, invstd, w ? vload(w, c) : 1.0f, b ? vload(b, c) : 0.0f);
    for (int64_t n = 0; n < g->N; n++) seg_affine(x, y, n, c, g->S, &f, buf);
  }
}

/* Eval: units are (channel, image) segments. */
static void bn_eval_segments(void *ctx, int64_t begin, int64_t end) {
  cn_job *j = ctx;
  const cn_geom *g = &j->g;
  const nrt_operand *x = j->in[0], *y = j->out[0];
  const nrt_operand *w = g->has_w ? j->in[3] : NULL, *b = g->has_b ? j->in[g->has_w ? 4 : 3] : NULL;
  double eps = j->l->scalars[0].f;
  float buf[BLK];
  int64_t cur = -1;
  bn_affine f = {0};
  for (int64_t u = begin; u < end; u++) {
    int64_t c = u / g->N, n = u % g->N;
    if (c != cur) {
      double invstd = 1.0 / sqrt((double)vload(j->in[2], c) + eps);
      f = bn_affine_of(vload(j->in[1], c), invstd, w ? vload(w, c) : 1.0f, b ? vload(b, c) : 0.0f);
      cur = c;
    }
    seg_affine(x, y, n, c, g->S, &f, buf);
  }
}

/* Backward outputs by mask: index of grad_x / grad_w / grad_b in out[], or -1. */
static void mask_slots(int64_t mask, int slot[3]) {
  int k = 0;
  for (int i = 0; i < 3; i++) slot[i] = (mask >> i) & 1 ? k++ : -1;
}

static void bn_backward_channels(void *ctx, int64_t begin, int64_t end) {
  cn_job *j = ctx;
  const cn_geom *g = &j->g;
  const nrt_launch *l = j->l;
  const nrt_operand *gy = j->in[0], *x = j->in[1], *w = g->has_w ? j->in[4] : NULL;
  int slot[3];
  mask_slots(l->params[0], slot);
  bool train = l->params[2] != 0;
  double count = (double)(g->N * g->S), eps = l->scalars[0].f;
  float bx[BLK], by[BLK];
  for (int64_t c = begin; c < end; c++) {
    float mean = vload(j->in[2], c);
    double invstd = train ? vload(j->in[3], c) : 1.0 / sqrt((double)vload(j->in[3], c) + eps);
    double sdy = 0.0, dot = 0.0;
    for (int64_t n = 0; n < g->N; n++) FOR_BLOCKS(g->S, b0, bn) {
        seg_load(gy, n, c, b0, bn, by);
        seg_load(x, n, c, b0, bn, bx);
        sdy += sum_f(by, bn);
        dot += dot_dev_f(bx, mean, by, bn);
      }
    if (slot[1] >= 0) vstore(j->out[slot[1]], c, dot * invstd);
    if (slot[2] >= 0) vstore(j->out[slot[2]], c, sdy);
    if (slot[0] < 0) continue;
    const nrt_operand *gx = j->out[slot[0]];
    float wv = w ? vload(w, c) : 1.0f, is = (float)invstd;
    if (train) {
      float k = (float)(dot * invstd * invstd / count), gm = (float)(sdy / count), sc = is * wv;
      for (int64_t n = 0; n < g->N; n++) FOR_BLOCKS(g->S, b0, bn) {
          seg_load(gy, n, c, b0, bn, by);
          seg_load(x, n, c, b0, bn, bx);
          for (int64_t i = 0; i < bn; i++) by[i] = (by[i] - gm - (bx[i] - mean) * k) * sc;
          seg_store(gx, n, c, b0, bn, by);
        }
    } else {
      float sc = is * wv;
      for (int64_t n = 0; n < g->N; n++) FOR_BLOCKS(g->S, b0, bn) {
          seg_load(gy, n, c, b0, bn, by);
          for (int64_t i = 0; i < bn; i++) by[i] *= sc;
          seg_store(gx, n, c, b0, bn, by);
        }
    }
  }
}

/* ---- batch norm, channels innermost (channels-last) ------------------------------
 * With the channels contiguous, a per-channel sweep would touch every cache
 * line once per channel; instead rows of C channels (one per (n, s)) are
 * processed whole: per-channel partial sums per chunk of rows (fixed
 * chunks, so results do not depend on the thread count), combined in chunk
 * order, then a pass over the rows normalises. */

#define CL_CHUNKS 64

typedef struct cl_job {
  cn_job *j;
  int phase;       /* 0: sum x, 1: sum (x-mean)^2, 2: normalise, 3: backward sums, 4: grad_x */
  double *part;    /* [CL_CHUNKS][2][C] */
  float *mean, *a, *b, *k, *gm; /* per channel */
  bn_affine *aff;  /* normalise: per channel; any_exact: some channel needs the exact form */
  bool any_exact;
  int64_t rows;
} cl_job;

static inline char *row_ptr(const nrt_operand *o, const cn_geom *g, int64_t r) {
  int64_t n = r / g->S, s = r - n * g->S;
  return (char *)o->data + n * o->strides[0] + s * o->strides[2];
}

static void cl_range(void *ctx, int64_t begin, int64_t end) {
  cl_job *cj = ctx;
  cn_job *j = cj->j;
  const cn_geom *g = &j->g;
  const int64_t C = g->C;
  float *bx = malloc(sizeof(float) * (size_t)(2 * C + 1)), *by = bx + C;
  if (!bx) {
    j->failed = 1;
    return;
  }
  const nrt_launch *l = j->l;
  bool bwd = l->op == NRT_OP(BATCH_NORM_BACKWARD);
  const nrt_operand *x = bwd ? j->in[1] : j->in[0];
  for (int64_t chunk = begin; chunk < end; chunk++) {
    int64_t r0 = chunk * cj->rows / CL_CHUNKS, r1 = (chunk + 1) * cj->rows / CL_CHUNKS;
    double *p0 = cj->part + chunk * 2 * C, *p1 = p0 + C;
    if (cj->phase <= 1 || cj->phase == 3)
      for (int64_t c = 0; c < C; c++) p0[c] = p1[c] = 0.0;
    for (int64_t r = r0; r < r1; r++) {
      nrt_load_f32(bx, row_ptr(x, g, r), x->strides[1], x->dtype, C);
      switch (cj->phase) {
      case 0:
        for (int64_t c = 0; c < C; c++) p0[c] += bx[c];
        break;
      case 1:
        for (int64_t c = 0; c < C; c++) {
          float d = bx[c] - cj->mean[c];
          p0[c] += d * d;
        }
        break;
      case 2: {
        const nrt_operand *y = j->out[0];
        if (cj->any_exact)
          for (int64_t c = 0; c < C; c++) {
            const bn_affine *f = &cj->aff[c];
            bx[c] = f->exact ? ((bx[c] - f->mean) * f->invstd) * f->w + f->b : bx[c] * f->a + f->bb;
          }
        else
          for (int64_t c = 0; c < C; c++) bx[c] = bx[c] * cj->a[c] + cj->b[c];
        nrt_store_f32(row_ptr(y, g, r), y->strides[1], y->dtype, bx, C);
        break;
      }
      case 3: {
        const nrt_operand *gy = j->in[0];
        nrt_load_f32(by, row_ptr(gy, g, r), gy->strides[1], gy->dtype, C);
        for (int64_t c = 0; c < C; c++) {
          p0[c] += by[c];
          p1[c] += (bx[c] - cj->mean[c]) * by[c];
        }
        break;
      }
      default: { /* 4: grad_x */
        const nrt_operand *gy = j->in[0];
        int slot[3];
        mask_slots(l->params[0], slot);
        const nrt_operand *gx = j->out[slot[0]];
        nrt_load_f32(by, row_ptr(gy, g, r), gy->strides[1], gy->dtype, C);
        if (l->params[2])
          for (int64_t c = 0; c < C; c++) by[c] = (by[c] - cj->gm[c] - (bx[c] - cj->mean[c]) * cj->k[c]) * cj->a[c];
        else
          for (int64_t c = 0; c < C; c++) by[c] *= cj->a[c];
        nrt_store_f32(row_ptr(gx, g, r), gx->strides[1], gx->dtype, by, C);
        break;
      }
      }
    }
  }
  free(bx);
}

/* Sums chunk partials [chunk][which][C] in chunk order. */
static void cl_combine(const cl_job *cj, int which, int64_t C, double *out) {
  for (int64_t c = 0; c < C; c++) out[c] = 0.0;
  for (int64_t k = 0; k < CL_CHUNKS; k++)
    for (int64_t c = 0; c < C; c++) out[c] += cj->part[(k * 2 + which) * C + c];
}

static bool channels_inner(const nrt_operand *o) {
  return o->strides[1] == (int64_t)nrt_dtype_size(o->dtype);
}

static nrt_status bn_channels_last(cn_job *j) {
  const cn_geom *g = &j->g;
  const nrt_launch *l = j->l;
  const int64_t C = g->C;
  cl_job cj = {.j = j, .rows = g->N * g->S};
  cj.part = malloc(sizeof(double) * (size_t)(CL_CHUNKS * 2 * C + 2 * C));
  float *vecs = malloc(sizeof(float) * (size_t)(5 * C));
  cj.aff = malloc(sizeof(bn_affine) * (size_t)(C + 1));
  if (!cj.part || !vecs || !cj.aff) {
    free(cj.part);
    free(vecs);
    free(cj.aff);
    return NRT_ERROR_OUT_OF_MEMORY;
  }
  double *s0 = cj.part + CL_CHUNKS * 2 * C, *s1 = s0 + C;
  cj.mean = vecs;
  cj.a = vecs + C;
  cj.b = vecs + 2 * C;
  cj.k = vecs + 3 * C;
  cj.gm = vecs + 4 * C;
  double count = (double)(g->N * g->S), eps = l->scalars[0].f;
  if (l->op == NRT_OP(BATCH_NORM)) {
    const nrt_operand *w = g->has_w ? j->in[1] : NULL, *b = g->has_b ? j->in[g->has_w ? 2 : 1] : NULL;
    double mom = l->scalars[1].f;
    cj.phase = 0;
    nrt_parallel_for(CL_CHUNKS, 1, cl_range, &cj);
    cl_combine(&cj, 0, C, s0);
    for (int64_t c = 0; c < C; c++) cj.mean[c] = (float)(s0[c] / count);
    cj.phase = 1;
    nrt_parallel_for(CL_CHUNKS, 1, cl_range, &cj);
    cl_combine(&cj, 0, C, s1);
    for (int64_t c = 0; c < C; c++) {
      double mean = s0[c] / count, invstd = 1.0 / sqrt(s1[c] / count + eps);
      vstore(j->out[1], c, mean);
      vstore(j->out[2], c, invstd);
      if (j->nout == 5) {
        vstore(j->out[3], c, mom * mean + (1.0 - mom) * vload(j->out[3], c));
        vstore(j->out[4], c, mom * s1[c] / (count - 1.0) + (1.0 - mom) * vload(j->out[4], c));
      }
      cj.aff[c] = bn_affine_of((float)mean, invstd, w ? vload(w, c) : 1.0f, b ? vload(b, c) : 0.0f);
      cj.a[c] = cj.aff[c].a;
      cj.b[c] = cj.aff[c].bb;
      cj.any_exact |= cj.aff[c].exact;
    }
    cj.phase = 2;
  } else if (l->op == NRT_OP(BATCH_NORM_EVAL)) {
    const nrt_operand *w = g->has_w ? j->in[3] : NULL, *b = g->has_b ? j->in[g->has_w ? 4 : 3] : NULL;
    for (int64_t c = 0; c < C; c++) {
      double invstd = 1.0 / sqrt((double)vload(j->in[2], c) + eps);
      cj.aff[c] = bn_affine_of(vload(j->in[1], c), invstd, w ? vload(w, c) : 1.0f, b ? vload(b, c) : 0.0f);
      cj.a[c] = cj.aff[c].a;
      cj.b[c] = cj.aff[c].bb;
      cj.any_exact |= cj.aff[c].exact;
    }
    cj.phase = 2;
  } else { /* BATCH_NORM_BACKWARD */
    const nrt_operand *w = g->has_w ? j->in[4] : NULL;
    bool train = l->params[2] != 0;
    int slot[3];
    mask_slots(l->params[0], slot);
    for (int64_t c = 0; c < C; c++) cj.mean[c] = vload(j->in[2], c);
    cj.phase = 3;
    nrt_parallel_for(CL_CHUNKS, 1, cl_range, &cj);
    cl_combine(&cj, 0, C, s0);
    cl_combine(&cj, 1, C, s1);
    for (int64_t c = 0; c < C; c++) {
      double invstd = train ? vload(j->in[3], c) : 1.0 / sqrt((double)vload(j->in[3], c) + eps);
      if (slot[1] >= 0) vstore(j->out[slot[1]], c, s1[c] * invstd);
      if (slot[2] >= 0) vstore(j->out[slot[2]], c, s0[c]);
      cj.a[c] = (float)invstd * (w ? vload(w, c) : 1.0f);
      cj.k[c] = (float)(s1[c] * invstd * invstd / count);
      cj.gm[c] = (float)(s0[c] / count);
    }
    cj.phase = slot[0] >= 0 ? 4 : -1;
  }
  if (cj.phase >= 0) nrt_parallel_for(CL_CHUNKS, 1, cl_range, &cj);
  free(cj.part);
  free(vecs);
  free(cj.aff);
  return j->failed ? NRT_ERROR_OUT_OF_MEMORY : NRT_SUCCESS;
}

/* ---- group norm (fast) --------------------------------------------------------- */

static void gn_rows(void *ctx, int64_t begin, int64_t end) {
  cn_job *j = ctx;
  const cn_geom *g = &j->g;
  const nrt_operand *x = j->in[0], *y = j->out[0];
  const nrt_operand *w = g->has_w ? j->in[1] : NULL, *b = g->has_b ? j->in[g->has_w ? 2 : 1] : NULL;
  double count = (double)(g->Cg * g->S), eps = j->l->scalars[0].f;
  float buf[BLK];
  for (int64_t r = begin; r < end; r++) {
    int64_t n = r / g->G, grp = r % g->G, c0 = grp * g->Cg;
    double s = 0.0;
    for (int64_t c = c0; c < c0 + g->Cg; c++) seg_sums(x, n, c, g->S, NULL, &s, buf);
    double mean = s / count, ss = 0.0;
    float md = (float)mean;
    for (int64_t c = c0; c < c0 + g->Cg; c++) seg_sums(x, n, c, g->S, &md, &ss, buf);
    /* max(var, 0) as ATen's: a NaN variance (inf or NaN in the group) stays NaN */
    double var = ss / count, rstd = 1.0 / sqrt((var < 0.0 ? 0.0 : var) + eps);
    float mf = (float)mean, rf = (float)rstd;
    nrt_store_f32(stat2(j->out[1], n, grp), 0, j->out[1]->dtype, &mf, 1);
    nrt_store_f32(stat2(j->out[2], n, grp), 0, j->out[2]->dtype, &rf, 1);
    for (int64_t c = c0; c < c0 + g->Cg; c++) {
      /* ATen's group norm has only the x * a + bb form, non-finite weights included */
      bn_affine f = {.a = rf * (w ? vload(w, c) : 1.0f)};
      f.bb = (b ? vload(b, c) : 0.0f) - mf * f.a;
      seg_affine(x, y, n, c, g->S, &f, buf);
    }
  }
}

static void gn_backward_rows(void *ctx, int64_t begin, int64_t end) {
  cn_job *j = ctx;
  const cn_geom *g = &j->g;
  const nrt_launch *l = j->l;
  const nrt_operand *gy = j->in[0], *x = j->in[1], *w = g->has_w ? j->in[4] : NULL;
  int slot[3];
  mask_slots(l->params[0], slot);
  double count = (double)(g->Cg * g->S);
  float bx[BLK], by[BLK];
  for (int64_t r = begin; r < end; r++) {
    int64_t n = r / g->G, grp = r % g->G, c0 = grp * g->Cg;
    double dsg = 0.0, dbg = 0.0;
    for (int64_t c = c0; c < c0 + g->Cg; c++) {
      double ds = 0.0, db = 0.0;
      FOR_BLOCKS(g->S, b0, bn) {
        seg_load(gy, n, c, b0, bn, by);
        seg_load(x, n, c, b0, bn, bx);
        ds += dot_f(by, bx, bn);
        db += sum_f(by, bn);
      }
      j->ds[n * g->C + c] = ds;
      j->db[n * g->C + c] = db;
      double wv = w ? vload(w, c) : 1.0;
      dsg += ds * wv;
      dbg += db * wv;
    }
    if (slot[0] < 0) continue;
    float mf, rf;
    nrt_load_f32(&mf, stat2(j->in[2], n, grp), 0, j->in[2]->dtype, 1);
    nrt_load_f32(&rf, stat2(j->in[3], n, grp), 0, j->in[3]->dtype, 1);
    double mean = mf, rstd = rf;
    double c2 = (dbg * mean - dsg) * rstd * rstd * rstd / count;
    double c3 = -c2 * mean - dbg * rstd / count;
    float c2f = (float)c2, c3f = (float)c3;
    const nrt_operand *gx = j->out[slot[0]];
    for (int64_t c = c0; c < c0 + g->Cg; c++) {
      float c1 = rf * (w ? vload(w, c) : 1.0f);
      FOR_BLOCKS(g->S, b0, bn) {
        seg_load(gy, n, c, b0, bn, by);
        seg_load(x, n, c, b0, bn, bx);
        for (int64_t i = 0; i < bn; i++) by[i] = c1 * by[i] + c2f * bx[i] + c3f;
        seg_store(gx, n, c, b0, bn, by);
      }
    }
  }
}

/* grad_weight / grad_bias per channel from the per-(n, c) sums. */
static void gn_backward_params(cn_job *j) {
  const cn_geom *g = &j->g;
  int slot[3];
  mask_slots(j->l->params[0], slot);
  for (int64_t c = 0; c < g->C; c++) {
    int64_t grp = c / g->Cg;
    double dw = 0.0, dbias = 0.0;
    for (int64_t n = 0; n < g->N; n++) {
      float mf, rf;
      nrt_load_f32(&mf, stat2(j->in[2], n, grp), 0, j->in[2]->dtype, 1);
      nrt_load_f32(&rf, stat2(j->in[3], n, grp), 0, j->in[3]->dtype, 1);
      dw += (j->ds[n * g->C + c] - j->db[n * g->C + c] * mf) * rf;
      dbias += j->db[n * g->C + c];
    }
    if (slot[1] >= 0) vstore(j->out[slot[1]], c, dw);
    if (slot[2] >= 0) vstore(j->out[slot[2]], c, dbias);
  }
}

/* ---- reference ----------------------------------------------------------------- */

static double rl(const nrt_operand *o, int64_t n, int64_t c, int64_t s) {
  return (float)nrt_ref_load_f64(seg(o, n, c) + s * o->strides[2], o->dtype);
}
static void rs(const nrt_operand *o, int64_t n, int64_t c, int64_t s, double v) {
  nrt_ref_store_f64(seg(o, n, c) + s * o->strides[2], o->dtype, v);
}
static double rv(const nrt_operand *o, int64_t i) {
  return (float)nrt_ref_load_f64((const char *)o->data + i * o->strides[0], o->dtype);
}
static void rvs(const nrt_operand *o, int64_t i, double v) {
  nrt_ref_store_f64((char *)o->data + i * o->strides[0], o->dtype, v);
}
static double rl2(const nrt_operand *o, int64_t n, int64_t g) {
  return (float)nrt_ref_load_f64(stat2(o, n, g), o->dtype);
}

static nrt_status reference(cn_job *j) {
  const cn_geom *g = &j->g;
  const nrt_launch *l = j->l;
  double eps = l->scalars[0].f;
  int slot[3];
  mask_slots(l->params[0], slot);
  switch ((int)l->op) {
  case NRT_OP(BATCH_NORM):
  case NRT_OP(BATCH_NORM_EVAL):
  case NRT_OP(BATCH_NORM_BACKWARD): {
    bool train_fwd = l->op == NRT_OP(BATCH_NORM);
    int wi = l->op == NRT_OP(BATCH_NORM) ? 1 : l->op == NRT_OP(BATCH_NORM_EVAL) ? 3 : 4;
    const nrt_operand *w = g->has_w ? j->in[wi] : NULL, *b = g->has_b ? j->in[wi + (g->has_w ? 1 : 0)] : NULL;
    double count = (double)(g->N * g->S);
    for (int64_t c = 0; c < g->C; c++) {
      double wv = w ? rv(w, c) : 1.0, bv = b ? rv(b, c) : 0.0;
      if (l->op == NRT_OP(BATCH_NORM_BACKWARD)) {
        const nrt_operand *gy = j->in[0], *x = j->in[1];
        bool train = l->params[2] != 0;
        double mean = rv(j->in[2], c), invstd = train ? rv(j->in[3], c) : 1.0 / sqrt(rv(j->in[3], c) + eps);
        double sdy = 0.0, dot = 0.0;
        for (int64_t n = 0; n < g->N; n++)
          for (int64_t s = 0; s < g->S; s++) {
            double dy = rl(gy, n, c, s);
            sdy += dy;
            dot += (rl(x, n, c, s) - mean) * dy;
          }
        if (slot[1] >= 0) rvs(j->out[slot[1]], c, dot * invstd);
        if (slot[2] >= 0) rvs(j->out[slot[2]], c, sdy);
        if (slot[0] >= 0)
          for (int64_t n = 0; n < g->N; n++)
            for (int64_t s = 0; s < g->S; s++) {
              double dy = rl(gy, n, c, s), v;
              if (train) v = (dy - sdy / count - (rl(x, n, c, s) - mean) * dot * invstd * invstd / count) * invstd * wv;
              else v = dy * invstd * wv;
              rs(j->out[slot[0]], n, c, s, v);
            }
        continue;
      }
      const nrt_operand *x = j->in[0];
      double mean, invstd;
      if (train_fwd) {
        double s1 = 0.0, s2 = 0.0;
        for (int64_t n = 0; n < g->N; n++)
          for (int64_t s = 0; s < g->S; s++) s1 += rl(x, n, c, s);
        mean = s1 / count;
        for (int64_t n = 0; n < g->N; n++)
          for (int64_t s = 0; s < g->S; s++) s2 += (rl(x, n, c, s) - mean) * (rl(x, n, c, s) - mean);
        invstd = 1.0 / sqrt(s2 / count + eps);
        rvs(j->out[1], c, mean);
        rvs(j->out[2], c, invstd);
        if (j->nout == 5) {
          double mom = l->scalars[1].f;
          rvs(j->out[3], c, mom * mean + (1.0 - mom) * rv(j->out[3], c));
          rvs(j->out[4], c, mom * s2 / (count - 1.0) + (1.0 - mom) * rv(j->out[4], c));
        }
      } else {
        mean = rv(j->in[1], c);
        invstd = 1.0 / sqrt(rv(j->in[2], c) + eps);
      }
      for (int64_t n = 0; n < g->N; n++)
        for (int64_t s = 0; s < g->S; s++) rs(j->out[0], n, c, s, (rl(x, n, c, s) - mean) * invstd * wv + bv);
    }
    return NRT_SUCCESS;
  }
  case NRT_OP(GROUP_NORM): {
    const nrt_operand *x = j->in[0];
    const nrt_operand *w = g->has_w ? j->in[1] : NULL, *b = g->has_b ? j->in[g->has_w ? 2 : 1] : NULL;
    double count = (double)(g->Cg * g->S);
    for (int64_t n = 0; n < g->N; n++)
      for (int64_t grp = 0; grp < g->G; grp++) {
        double s1 = 0.0, s2 = 0.0;
        for (int64_t c = grp * g->Cg; c < (grp + 1) * g->Cg; c++)
          for (int64_t s = 0; s < g->S; s++) s1 += rl(x, n, c, s);
        double mean = s1 / count;
        for (int64_t c = grp * g->Cg; c < (grp + 1) * g->Cg; c++)
          for (int64_t s = 0; s < g->S; s++) s2 += (rl(x, n, c, s) - mean) * (rl(x, n, c, s) - mean);
        double rstd = 1.0 / sqrt(s2 / count + eps);
        nrt_ref_store_f64(stat2(j->out[1], n, grp), j->out[1]->dtype, mean);
        nrt_ref_store_f64(stat2(j->out[2], n, grp), j->out[2]->dtype, rstd);
        for (int64_t c = grp * g->Cg; c < (grp + 1) * g->Cg; c++) {
          double wv = w ? rv(w, c) : 1.0, bv = b ? rv(b, c) : 0.0;
          for (int64_t s = 0; s < g->S; s++) rs(j->out[0], n, c, s, (rl(x, n, c, s) - mean) * rstd * wv + bv);
        }
      }
    return NRT_SUCCESS;
  }
  default: { /* GROUP_NORM_BACKWARD */
    const nrt_operand *gy = j->in[0], *x = j->in[1], *w = g->has_w ? j->in[4] : NULL;
    double count = (double)(g->Cg * g->S);
    double *dw = calloc((size_t)g->C + 1, sizeof(double)), *dbs = calloc((size_t)g->C + 1, sizeof(double));
    if (!dw || !dbs) {
      free(dw);
      free(dbs);
      return NRT_ERROR_OUT_OF_MEMORY;
    }
    for (int64_t n = 0; n < g->N; n++)
      for (int64_t grp = 0; grp < g->G; grp++) {
        double mean = rl2(j->in[2], n, grp), rstd = rl2(j->in[3], n, grp), dsg = 0.0, dbg = 0.0;
        for (int64_t c = grp * g->Cg; c < (grp + 1) * g->Cg; c++) {
          double ds = 0.0, db = 0.0, wv = w ? rv(w, c) : 1.0;
          for (int64_t s = 0; s < g->S; s++) {
            ds += rl(gy, n, c, s) * rl(x, n, c, s);
            db += rl(gy, n, c, s);
          }
          dsg += ds * wv;
          dbg += db * wv;
          dw[c] += (ds - db * mean) * rstd;
          dbs[c] += db;
        }
        double c2 = (dbg * mean - dsg) * rstd * rstd * rstd / count, c3 = -c2 * mean - dbg * rstd / count;
        if (slot[0] >= 0)
          for (int64_t c = grp * g->Cg; c < (grp + 1) * g->Cg; c++) {
            double c1 = rstd * (w ? rv(w, c) : 1.0);
            for (int64_t s = 0; s < g->S; s++)
              rs(j->out[slot[0]], n, c, s, c1 * rl(gy, n, c, s) + c2 * rl(x, n, c, s) + c3);
          }
      }
    for (int64_t c = 0; c < g->C; c++) {
      if (slot[1] >= 0) rvs(j->out[slot[1]], c, dw[c]);
      if (slot[2] >= 0) rvs(j->out[slot[2]], c, dbs[c]);
    }
    free(dw);
    free(dbs);
    return NRT_SUCCESS;
  }
  }
}

/* ---- entry ------------------------------------------------------------------------ */

static nrt_status bad(const nrt_launch *l, const char *what) {
  return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: %s", nrt_op_name(l->op), what);
}

nrt_status nrt_channel_norm_run(const nrt_launch *l) {
  cn_job j = {.l = l};
  cn_geom *g = &j.g;
  bool group = l->op == NRT_OP(GROUP_NORM) || l->op == NRT_OP(GROUP_NORM_BACKWARD);
  bool backward = l->op == NRT_OP(BATCH_NORM_BACKWARD) || l->op == NRT_OP(GROUP_NORM_BACKWARD);
  if (!nrt_dtype_is_floating(l->compute_dtype))
    return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED,
                           "%s: floating dtypes only, got %s", nrt_op_name(l->op), nrt_dtype_name(l->compute_dtype));
  if (l->ndim != (group ? 4 : 3)) return bad(l, group ? "sizes are {N, G, Cg, S}" : "sizes are {N, C, S}");
  g->N = l->sizes[0];
  if (group) {
    g->G = l->sizes[1];
    g->Cg = l->sizes[2];
    g->C = g->G * g->Cg;
    g->S = l->sizes[3];
  } else {
    g->C = g->G = l->sizes[1];
    g->Cg = 1;
    g->S = l->sizes[2];
  }
  j.nout = l->noutputs;
  j.nin = l->ninputs;
  for (int i = 0; i < j.nout; i++) j.out[i] = &l->operands[i];
  for (int i = 0; i < j.nin; i++) j.in[i] = &l->operands[j.nout + i];
  int base_in = l->op == NRT_OP(BATCH_NORM_EVAL) ? 3 : backward ? 4 : 1;
  g->has_w = backward ? j.nin == 5 : (l->params[1] & 1) != 0;
  g->has_b = !backward && (l->params[1] & 2) != 0;
  if (j.nin != base_in + g->has_w + g->has_b) return bad(l, "inputs do not match the weight / bias bits of p1");
  if (backward) {
    int64_t m = l->params[0];
    int want = (int)((m & 1) + ((m >> 1) & 1) + ((m >> 2) & 1));
    if (m < 1 || m > 7 || j.nout != want) return bad(l, "outputs do not match the p0 mask");
  } else if (l->op == NRT_OP(BATCH_NORM) && j.nout != 3 && j.nout != 5) {
    return bad(l, "expected 3 outputs (5 with running statistics)");
  } else if ((l->op == NRT_OP(GROUP_NORM) && j.nout != 3) ||
             (l->op == NRT_OP(BATCH_NORM_EVAL) && j.nout != 1 && j.nout != 3)) {
    return bad(l, "wrong number of outputs");
  }
  if (l->op == NRT_OP(BATCH_NORM_EVAL) && j.nout == 3) {
    /* The saved statistics of an eval step are the running mean and
     * 1/sqrt(running_var + eps): what the op's meta function (and CUDA)
     * return, so a compiled graph sees the same [C] outputs. O(C), shared
     * by the fast and reference paths. */
    double eps = l->scalars[0].f;
    for (int64_t c = 0; c < g->C; c++) {
      vstore(j.out[1], c, vload(j.in[1], c));
      vstore(j.out[2], c, 1.0 / sqrt((double)vload(j.in[2], c) + eps));
    }
  }
  if (g->C == 0) return NRT_SUCCESS;
  if (nrt_kernels_reference()) return reference(&j);
  int64_t per_channel = g->N * g->S;
  if (!group && g->C > 1 && per_channel >= CL_CHUNKS) {
    /* every activation operand channels-innermost: the row path */
    bool act_out = !backward || (l->params[0] & 1);
    bool cl = !act_out || channels_inner(j.out[0]);
    int nact = backward ? 2 : 1;
    for (int i = 0; i < nact; i++) cl = cl && channels_inner(j.in[i]);
    if (cl) return bn_channels_last(&j);
  }
  switch ((int)l->op) {
  case NRT_OP(BATCH_NORM):
    nrt_parallel_for(g->C, per_channel >= 8192 ? 1 : 8192 / (per_channel + 1) + 1, bn_train_channels, &j);
    break;
  case NRT_OP(BATCH_NORM_EVAL):
    if (g->N > 0) nrt_parallel_for(g->C * g->N, g->S >= 8192 ? 1 : 8192 / (g->S + 1) + 1, bn_eval_segments, &j);
    break;
  case NRT_OP(BATCH_NORM_BACKWARD):
    nrt_parallel_for(g->C, per_channel >= 8192 ? 1 : 8192 / (per_channel + 1) + 1, bn_backward_channels, &j);
    break;
  case NRT_OP(GROUP_NORM): {
    int64_t per_row = g->Cg * g->S;
    nrt_parallel_for(g->N * g->G, per_row >= 8192 ? 1 : 8192 / (per_row + 1) + 1, gn_rows, &j);
    break;
  }
  default: {
    j.ds = malloc(sizeof(double) * (size_t)(g->N * g->C + 1));
    j.db = malloc(sizeof(double) * (size_t)(g->N * g->C + 1));
    if (!j.ds || !j.db) {
      free(j.ds);
      free(j.db);
      return NRT_ERROR_OUT_OF_MEMORY;
    }
    int64_t per_row = g->Cg * g->S;
    nrt_parallel_for(g->N * g->G, per_row >= 8192 ? 1 : 8192 / (per_row + 1) + 1, gn_backward_rows, &j);
    if (l->params[0] & 6) gn_backward_params(&j);
    free(j.ds);
    free(j.db);
    break;
  }
  }
  return NRT_SUCCESS;
}
