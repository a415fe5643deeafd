/* Family SEGMENT (nrt/ops/segment.h): embedding bags and pairwise
 * distances here; segmented reductions (segment_reduce.c) and the CTC
 * loss (segment_ctc.c) are dispatched from nrt_segment_execute below.
 * Each op validates its index data serially first (so the first bad value
 * is the one reported and nothing is written on failure), then splits
 * independent output rows over the pool. The fast paths load whole rows
 * through the block loaders; the reference paths go element by element
 * through dtype.c's conversions, with the same arithmetic. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/common/common.h"
#include "kernels/segment/segment.h"
#include "nrt/ops/segment.h"

#define SEG_GRAIN_WORK 16384 /* elements of work per pool task, at least */

static inline const char *ptr1(const nrt_launch *l, int k, int64_t i) {
  return (const char *)l->operands[k].data + i * l->operands[k].strides[0];
}
static inline char *ptr2(const nrt_launch *l, int k, int64_t i, int64_t j) {
  return (char *)l->operands[k].data + i * l->operands[k].strides[0] + j * l->operands[k].strides[1];
}
static inline char *ptr3(const nrt_launch *l, int k, int64_t i, int64_t j, int64_t m) {
  return (char *)l->operands[k].data + i * l->operands[k].strides[0] + j * l->operands[k].strides[1] +
         m * l->operands[k].strides[2];
}
static inline int64_t load_i64(const nrt_launch *l, int k, int64_t i) {
  return nrt_ref_load_i64(ptr1(l, k, i), l->operands[k].dtype);
}

static int64_t grain_for(int64_t work_per_item) {
  if (work_per_item < 1) work_per_item = 1;
  return work_per_item >= SEG_GRAIN_WORK ? 1 : SEG_GRAIN_WORK / work_per_item;
}

static nrt_status check_float(const nrt_launch *l, int k) {
  if (nrt_dtype_is_floating(l->operands[k].dtype)) return NRT_SUCCESS;
  return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "%s: not supported for %s", nrt_op_name(l->op),
                         nrt_dtype_name(l->operands[k].dtype));
}

/* ---- EMBEDDING_BAG ------------------------------------------------------------ */

enum { EB_OUT = 0, EB_O2B = 1, EB_SIZE = 2, EB_MAXI = 3 };

typedef struct bag_ctx {
  const nrt_launch *l;
  int in_w, in_idx, in_off, in_psw; /* operand numbers (in_psw < 0: none) */
  int64_t nbags, dim, n, noffsets, mode, padding;
  bool max_out, reference;
  bool oom; /* a task could not get scratch memory */
} bag_ctx;

static int64_t bag_end(const bag_ctx *c, int64_t b) {
  if (b + 1 < c->noffsets) return load_i64(c->l, c->in_off, b + 1);
  return c->n;
}

static nrt_status bag_validate(const bag_ctx *c) {
  const nrt_launch *l = c->l;
  if (c->nbags > 0) {
    int64_t first = load_i64(l, c->in_off, 0);
    if (first != 0)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                             "position 0. However, got %lld", (long long)first);
  }
  int64_t prev = 0;
  for (int64_t b = 0; b < c->noffsets; b++) {
    int64_t o = load_i64(l, c->in_off, b);
    if (o < prev)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "embedding_bag: offsets must be non-decreasing, got offsets[%lld] = "
                             "%lld after %lld", (long long)b, (long long)o, (long long)prev);
    if (o > c->n)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "offsets[-1] can not be greater than input's length %lld but got "
                             "offsets[-1] of %lld", (long long)c->n, (long long)o);
    prev = o;
  }
  int64_t v = l->aux[0];
  for (int64_t i = 0; i < c->n; i++) {
    int64_t idx = load_i64(l, c->in_idx, i);
    if (idx < 0 || idx >= v)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "index %lld is out of bounds for dimension 0 with size %lld",
                             (long long)idx, (long long)v);
  }
  return NRT_SUCCESS;
}

/* One bag: sum/mean/max over its rows. acc (dim floats) and row (dim
 * floats) are scratch; best_idx (dim int64) only in MAX mode. */
static void bag_one(const bag_ctx *c, int64_t b, float *acc, float *row, int64_t *best) {
  const nrt_launch *l = c->l;
  const nrt_operand *w = &l->operands[c->in_w], *out = &l->operands[EB_OUT];
  int64_t start = load_i64(l, c->in_off, b), end = bag_end(c, b), count = 0;
  bool is_max = c->mode == NRT_BAG_MAX;
  for (int64_t d = 0; d < c->dim; d++) {
    acc[d] = 0.0f;
    if (best) best[d] = -1;
  }
  for (int64_t i = start; i < end; i++) {
    int64_t idx = load_i64(l, c->in_idx, i);
    nrt_ref_store_i64((char *)ptr1(l, EB_O2B, i), l->operands[EB_O2B].dtype, b);
    if (idx == c->padding) continue;
    const char *src = (const char *)w->data + idx * w->strides[0];
    if (c->reference) {
      for (int64_t d = 0; d < c->dim; d++) row[d] = (float)nrt_ref_load_f64(src + d * w->strides[1], w->dtype);
    } else {
      nrt_load_f32(row, src, w->strides[1], w->dtype, c->dim);
    }
    if (is_max) {
      for (int64_t d = 0; d < c->dim; d++) {
        if (count == 0 || row[d] > acc[d]) {
          acc[d] = row[d];
          if (best) best[d] = idx;
        }
      }
    } else {
      float s = c->in_psw >= 0 ? (float)nrt_ref_load_f64(ptr1(l, c->in_psw, i), l->operands[c->in_psw].dtype) : 1.0f;
      for (int64_t d = 0; d < c->dim; d++) acc[d] += s * row[d];
    }
    count++;
  }
  if (c->mode == NRT_BAG_MEAN && count > 0)
    for (int64_t d = 0; d < c->dim; d++) acc[d] /= (float)count;
  char *dst = (char *)out->data + b * out->strides[0];
  if (c->reference) {
    for (int64_t d = 0; d < c->dim; d++) nrt_ref_store_f64(dst + d * out->strides[1], out->dtype, acc[d]);
  } else {
    nrt_store_f32(dst, out->strides[1], out->dtype, acc, c->dim);
  }
  nrt_ref_store_i64((char *)ptr1(l, EB_SIZE, b), l->operands[EB_SIZE].dtype, count);
  if (c->max_out) {
    const nrt_operand *mi = &l->operands[EB_MAXI];
    for (int64_t d = 0; d < c->dim; d++)
      nrt_ref_store_i64(ptr2(l, EB_MAXI, b, d), mi->dtype, is_max ? best[d] : 0);
  }
}

static void bag_range(void *ctx, int64_t begin, int64_t end) {
  bag_ctx *c = ctx;
  size_t d = (size_t)(c->dim > 0 ? c->dim : 1);
  /* float acc + float row + int64 best, one allocation per task */
  char *buf = malloc(d * (2 * sizeof(float) + sizeof(int64_t)));
  if (!buf) {
    c->oom = true;
    return;
  }
  int64_t *best = (int64_t *)buf;
  float *acc = (float *)(best + d), *row = acc + d;
  for (int64_t b = begin; b < end; b++) bag_one(c, b, acc, row, c->mode == NRT_BAG_MAX ? best : NULL);
  free(buf);
}

static nrt_status embedding_bag(const nrt_launch *l) {
  if (l->noutputs != 3 && l->noutputs != 4)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "EMBEDDING_BAG: expected 3 or 4 outputs, got %d", l->noutputs);
  if (l->ndim != 3)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "EMBEDDING_BAG: sizes must be {B, D, N}, got ndim %d", l->ndim);
  bag_ctx c = {.l = l, .nbags = l->sizes[0], .dim = l->sizes[1], .n = l->sizes[2], .mode = l->params[0],
               .padding = l->params[1], .max_out = l->noutputs == 4, .reference = nrt_kernels_reference()};
  c.in_w = l->noutputs;
  c.in_idx = c.in_w + 1;
  c.in_off = c.in_w + 2;
  c.in_psw = l->ninputs == 4 ? c.in_w + 3 : -1;
  c.noffsets = c.nbags + (l->params[2] ? 1 : 0);
  if (c.mode < NRT_BAG_SUM || c.mode > NRT_BAG_MAX)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "EMBEDDING_BAG: unknown mode %lld", (long long)c.mode);
  if (c.in_psw >= 0 && c.mode != NRT_BAG_SUM)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "embedding_bag: per_sample_weights was not None. per_sample_weights is "
                           "only supported for mode='sum' (got mode='%s'). Please open a feature request on GitHub.",
                           c.mode == NRT_BAG_MEAN ? "mean" : "max");
  if (c.mode == NRT_BAG_MAX && !c.max_out)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "EMBEDDING_BAG: MAX mode needs the max_indices output");
  nrt_status st = check_float(l, EB_OUT);
  if (st == NRT_SUCCESS) st = check_float(l, c.in_w);
  if (st != NRT_SUCCESS) return st;
  st = bag_validate(&c);
  if (st != NRT_SUCCESS || c.nbags == 0) return st;
  if (c.reference) {
    bag_range(&c, 0, c.nbags);
  } else {
    int64_t per_bag = (c.n / c.nbags + 1) * (c.dim + 1);
    nrt_parallel_for(c.nbags, grain_for(per_bag), bag_range, &c);
  }
  if (c.oom)
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY,
                           "EMBEDDING_BAG: out of host memory for %lld-wide rows", (long long)c.dim);
  return NRT_SUCCESS;
}

/* ---- distances ------------------------------------------------------------------ */

typedef enum { P_ZERO, P_ONE, P_TWO, P_INF, P_GENERAL } pkind;

static pkind classify(double p) {
  if (p == 0.0) return P_ZERO;
  if (p == 1.0) return P_ONE;
  if (p == 2.0) return P_TWO;
  if (isinf(p)) return P_INF;
  return P_GENERAL;
}

/* v rounded to float32 when f32: a float operation done in double and
 * rounded once is the float operation itself (+ - * / sqrt). */
static inline double in_dtype(double v, bool f32) { return f32 ? (double)(float)v : v; }

/* |x|^e as the dtype's pow: glibc's powf for float32 (what std::pow(float,
 * float) calls), pow for float64. */
static inline double pow_in(double x, double e, bool f32) {
  return f32 ? (double)powf((float)fabs(x), (float)e) : pow(fabs(x), e);
}

/* Distance between two rows held as doubles. With f32 (cdist of a float32
 * or 16-bit input) every step is rounded to float32 as ATen's scalar loop
 * (run_parallel_cdist) does: terms accumulate serially from 0 in the
 * dtype, so d * d overflows to inf for |d| > 1.8e19 and underflows to 0
 * below 1e-23 there too; the general p's root is pow(agg, 1.0 / p) in
 * double, rounded once. p = 2 as PyTorch 2.13's build compiles that loop
 * (probed on the installed CPU build: 1600 of 1600 random rows): the
 * squares of whole 16-byte vectors (4 floats, 2 doubles; fma_tail) are
 * rounded before they are added, the last m % fma_tail terms are
 * contracted into one fused multiply-add. pdist passes f32 = false and
 * fma_tail = 0 (double inside, no contraction).
 * p = inf: ATen's cdist folds with std::max(acc, d) from acc = 0, which
 * never takes a NaN (cdist of [nan, 1, 5] and [0, 0, 0] is 5, in float64
 * too); pdist's vectorised maximum propagates it (nan_max). */
static double row_dist(const double *a, const double *b, int64_t m, pkind k, double p, bool nan_max, bool f32,
                       int64_t fma_tail) {
  double acc = 0.0;
  int64_t head = fma_tail > 0 ? m / fma_tail * fma_tail : m;
  for (int64_t i = 0; i < m; i++) {
    double d = fabs(in_dtype(a[i] - b[i], f32));
    switch (k) {
    case P_ZERO: acc = in_dtype(acc + (d != 0.0 ? (isnan(d) ? d : 1.0) : 0.0), f32); break; /* min(ceil(|d|), 1) */
    case P_ONE: acc = in_dtype(acc + d, f32); break;
    case P_TWO:
      if (i < head)
        acc = in_dtype(acc + in_dtype(d * d, f32), f32);
      else
        acc = f32 ? (double)fmaf((float)d, (float)d, (float)acc) : fma(d, d, acc);
      break;
    case P_INF: acc = d > acc || (nan_max && isnan(d)) ? d : acc; break;
    case P_GENERAL: acc = in_dtype(acc + pow_in(d, p, f32), f32); break;
    }
  }
  if (k == P_TWO) return in_dtype(sqrt(acc), f32);
  if (k == P_GENERAL) return in_dtype(pow(acc, 1.0 / p), f32);
  return acc;
}

static inline double sgn(double x) { return (double)((x > 0.0) - (x < 0.0)); }

/* |diff| rounded to the dtype dist was stored in, so that p = inf finds
 * the coordinate that produced the maximum (PyTorch compares in the dtype). */
static inline double round_to(double v, nrt_dtype dt) {
  char tmp[8];
  nrt_ref_store_f64(tmp, dt, v);
  return nrt_ref_load_f64(tmp, dt);
}

/* sign with NaN kept (ATen's Dist::sign: min(max(0, ceil x), 1) + min(max(-1, floor x), 0)). */
static inline double sgn_nan(double x) { return isnan(x) ? x : sgn(x); }

/* grad * d dist / d a_i for diff = a_i - b_i, ATen's backward formulas
 * (cpu/DistanceOpsKernel.cpp) term for term and in their association,
 * each step rounded to float32 with f32: no pair is skipped, so a NaN
 * difference or distance makes the gradient NaN, as on the CPU.
 *   p = 0: 0;  p = 1: grad sign(diff);  p < 2: dist == 0 ? 0 : ((sign(diff)
 *   |diff|^(p-1)) grad) / dist^(p-1), and 0 where diff == 0 with p < 1;
 *   p = 2: dist == 0 ? 0 : (grad diff) / dist;  p > 2: dist == 0 ? 0 :
 *   ((diff |diff|^(p-2)) grad) / dist^(p-1);  p = inf: (grad sign(diff))
 *   (1 - min(1, ceil(| |diff| - dist |))), |diff| rounded to dist's dtype,
 *   as PyTorch compares in the dtype. The CPU's vectorised pow (Sleef)
 *   may differ from powf in the last bit for fractional p. */
static inline double dist_grad(double diff, double grad, double dist, pkind k, double p, nrt_dtype dist_dt,
                               bool f32) {
  switch (k) {
  case P_ZERO: return 0.0;
  case P_ONE: return grad * sgn_nan(diff);
  case P_TWO: return dist == 0.0 ? 0.0 : in_dtype(in_dtype(grad * diff, f32) / dist, f32);
  case P_INF: {
    double e = fabs(in_dtype(round_to(fabs(diff), dist_dt) - dist, f32));
    double keep = in_dtype(1.0 - (isnan(e) ? e : fmin(1.0, ceil(e))), f32);
    return in_dtype(in_dtype(grad * sgn_nan(diff), f32) * keep, f32);
  }
  default:
    if (dist == 0.0) return 0.0;
    if (p < 2.0) {
      if (diff == 0.0 && p < 1.0) return 0.0;
      double pm1 = in_dtype(p - 1.0, f32);
      double t = in_dtype(in_dtype(sgn_nan(diff) * pow_in(diff, pm1, f32), f32) * grad, f32);
      return in_dtype(t / pow_in(dist, pm1, f32), f32);
    }
    double t = in_dtype(in_dtype(diff * pow_in(diff, in_dtype(p - 2.0, f32), f32), f32) * grad, f32);
    return in_dtype(t / pow_in(dist, in_dtype(p - 1.0, f32), f32), f32);
  }
}

/* Loads row `i` of a 2-d operand view (strides s_row, s_col) as doubles. */
static void load_row(double *dst, const char *base, int64_t s_col, nrt_dtype dt, int64_t m, bool reference) {
  if (reference) {
    for (int64_t i = 0; i < m; i++) dst[i] = nrt_ref_load_f64(base + i * s_col, dt);
  } else {
    nrt_load_f64(dst, base, s_col, dt, m);
  }
}

typedef struct dist_ctx {
  const nrt_launch *l;
  pkind k;
  double p;
  bool f32; /* cdist in float32 steps (x1 not float64) */
  bool reference;
  bool oom; /* a task could not get scratch memory */
} dist_ctx;

/* A task's scratch: nrows rows of M doubles; NULL, with the launch marked
 * out of memory, when there is none. */
static double *dist_rows(dist_ctx *c, int64_t nrows, int64_t M) {
  double *a = malloc((size_t)(nrows * M + 1) * sizeof(double));
  if (!a) c->oom = true;
  return a;
}

/* Row i of a [N, M] operand, or row (b, i) of a [B, N, M] one. */
static void dist_row2(const dist_ctx *c, double *dst, const nrt_operand *o, int64_t i, int64_t M) {
  load_row(dst, (const char *)o->data + i * o->strides[0], o->strides[1], o->dtype, M, c->reference);
}
static void dist_row3(const dist_ctx *c, double *dst, const nrt_operand *o, int64_t b, int64_t i, int64_t M) {
  load_row(dst, (const char *)o->data + b * o->strides[0] + i * o->strides[1], o->strides[2], o->dtype, M,
           c->reference);
}

/* CDIST: task item = (b, i) row of x1. */
static void cdist_range(void *ctx, int64_t begin, int64_t end) {
  dist_ctx *c = ctx;
  const nrt_launch *l = c->l;
  int64_t P = l->sizes[1], R = l->sizes[2], M = l->sizes[3];
  const nrt_operand *o = &l->operands[0], *x1 = &l->operands[1], *x2 = &l->operands[2];
  double *a = dist_rows(c, 2, M);
  if (!a) return;
  double *bb = a + M;
  for (int64_t t = begin; t < end; t++) {
    int64_t b = t / P, i = t % P;
    dist_row3(c, a, x1, b, i, M);
    for (int64_t j = 0; j < R; j++) {
      dist_row3(c, bb, x2, b, j, M);
      double v = row_dist(a, bb, M, c->k, c->p, false, c->f32, c->f32 ? 4 : 2);
      nrt_ref_store_f64(ptr3(l, 0, b, i, j), o->dtype, v);
    }
  }
  free(a);
}

/* CDIST_BACKWARD: task item = (b, i) row of grad_x1. */
static void cdist_backward_range(void *ctx, int64_t begin, int64_t end) {
  dist_ctx *c = ctx;
  const nrt_launch *l = c->l;
  int64_t P = l->sizes[1], R = l->sizes[2], M = l->sizes[3];
  const nrt_operand *gx = &l->operands[0], *g = &l->operands[1], *x1 = &l->operands[2], *x2 = &l->operands[3],
                    *dist = &l->operands[4];
  double *a = dist_rows(c, 3, M);
  if (!a) return;
  double *bb = a + M, *acc = bb + M;
  for (int64_t t = begin; t < end; t++) {
    int64_t b = t / P, i = t % P;
    dist_row3(c, a, x1, b, i, M);
    for (int64_t m = 0; m < M; m++) acc[m] = 0.0;
    for (int64_t j = 0; j < R; j++) {
      double gv = nrt_ref_load_f64(ptr3(l, 1, b, i, j), g->dtype);
      double dv = nrt_ref_load_f64(ptr3(l, 4, b, i, j), dist->dtype);
      dist_row3(c, bb, x2, b, j, M);
      for (int64_t m = 0; m < M; m++) {
        double diff = in_dtype(a[m] - bb[m], c->f32);
        acc[m] = in_dtype(acc[m] + dist_grad(diff, gv, dv, c->k, c->p, dist->dtype, c->f32), c->f32);
      }
    }
    for (int64_t m = 0; m < M; m++) nrt_ref_store_f64(ptr3(l, 0, b, i, m), gx->dtype, acc[m]);
  }
  free(a);
}

/* Pair (i, j), i < j, of n rows -> its position in row-major order. */
static inline int64_t pair_index(int64_t i, int64_t j, int64_t n) { return i * n - i * (i + 1) / 2 + (j - i - 1); }

/* PDIST: task item = row i (its pairs with every j > i). */
static void pdist_range(void *ctx, int64_t begin, int64_t end) {
  dist_ctx *c = ctx;
  const nrt_launch *l = c->l;
  int64_t N = l->sizes[0], M = l->sizes[1];
  const nrt_operand *o = &l->operands[0], *x = &l->operands[1];
  double *a = dist_rows(c, 2, M);
  if (!a) return;
  double *bb = a + M;
  for (int64_t i = begin; i < end; i++) {
    dist_row2(c, a, x, i, M);
    for (int64_t j = i + 1; j < N; j++) {
      dist_row2(c, bb, x, j, M);
      double v = row_dist(a, bb, M, c->k, c->p, true, false, 0);
      nrt_ref_store_f64((char *)ptr1(l, 0, pair_index(i, j, N)), o->dtype, v);
    }
  }
  free(a);
}

/* PDIST_BACKWARD: task item = row i of grad_x, summing over all j != i. */
static void pdist_backward_range(void *ctx, int64_t begin, int64_t end) {
  dist_ctx *c = ctx;
  const nrt_launch *l = c->l;
  int64_t N = l->sizes[0], M = l->sizes[1];
  const nrt_operand *gx = &l->operands[0], *g = &l->operands[1], *x = &l->operands[2], *dist = &l->operands[3];
  double *a = dist_rows(c, 3, M);
  if (!a) return;
  double *bb = a + M, *acc = bb + M;
  for (int64_t i = begin; i < end; i++) {
    dist_row2(c, a, x, i, M);
    for (int64_t m = 0; m < M; m++) acc[m] = 0.0;
    for (int64_t j = 0; j < N; j++) {
      if (j == i) continue;
      int64_t k = i < j ? pair_index(i, j, N) : pair_index(j, i, N);
      double gv = nrt_ref_load_f64(ptr1(l, 1, k), g->dtype);
      double dv = nrt_ref_load_f64(ptr1(l, 3, k), dist->dtype);
      dist_row2(c, bb, x, j, M);
      for (int64_t m = 0; m < M; m++) acc[m] += dist_grad(a[m] - bb[m], gv, dv, c->k, c->p, dist->dtype, false);
    }
    for (int64_t m = 0; m < M; m++) nrt_ref_store_f64(ptr2(l, 0, i, m), gx->dtype, acc[m]);
  }
  free(a);
}

static nrt_status run_dist(const nrt_launch *l, int noutputs, int want_ndim, int64_t items, int64_t work,
                           nrt_range_fn fn) {
  if (l->noutputs != noutputs)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected %d output, got %d", nrt_op_name(l->op), noutputs,
                           l->noutputs);
  if (l->ndim != want_ndim)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "%s: expected sizes of ndim %d, got %d", nrt_op_name(l->op), want_ndim,
                           l->ndim);
  for (int k = 0; k < l->noutputs + l->ninputs; k++) {
    nrt_status st = check_float(l, k);
    if (st != NRT_SUCCESS) return st;
  }
  double p = l->scalars[0].f;
  if (!(p >= 0.0))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "%s: p value for the p-norm must be >= 0, got %g", nrt_op_name(l->op), p);
  if (items == 0) return NRT_SUCCESS;
  /* cdist of a float32 (or 16-bit) input in float32 steps, as ATen's
   * scalar_t loops: the forward classifies p as that float too, the
   * backward classifies the double p and computes with the float one */
  int op = (int)l->op, x1 = op == NRT_OP(CDIST) ? 1 : 2;
  bool f32 = (op == NRT_OP(CDIST) || op == NRT_OP(CDIST_BACKWARD)) && l->operands[x1].dtype != NRT_FLOAT64;
  pkind k = classify(f32 && op == NRT_OP(CDIST) ? (double)(float)p : p);
  dist_ctx c = {.l = l, .k = k, .p = in_dtype(p, f32), .f32 = f32, .reference = nrt_kernels_reference(),
                .oom = false};
  if (c.reference)
    fn(&c, 0, items);
  else
    nrt_parallel_for(items, grain_for(work), fn, &c);
  if (c.oom)
    return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for row scratch", nrt_op_name(l->op));
  return NRT_SUCCESS;
}

/* ---- MULTI_MARGIN_LOSS / MULTI_MARGIN_LOSS_BACKWARD --------------------------------
 * ATen's multi_margin_loss_cpu_kernel term for term, so that huge inputs
 * overflow and cancel where the CPU's do: z = (margin - x[y]) + x[d] (in
 * that association: -1e18 - -1e18 + 1 is 1, but 1 - -1e18 + -1e18 is 0),
 * each row summed serially in the input's dtype from d = 0 and divided by
 * C there, rows of a sum/mean added in double. float32 arithmetic is done
 * in double and rounded after each operation (exact for + - * /), so one
 * loop serves both dtypes; 16-bit inputs, which the CPU refuses, compute
 * as float32. O(N C) work with a serial order inside a row: this loop is
 * the reference and the fast path at once; rows run in parallel. */

enum { MM_OUT = 0, MM_X = 1, MM_TARGET = 2, MM_WEIGHT = 3 };
enum { MMB_GRAD_X = 0, MMB_GRAD = 1, MMB_X = 2, MMB_TARGET = 3, MMB_WEIGHT = 4 };

typedef struct margin_ctx {
  const nrt_launch *l;
  int x, target, weight; /* operand numbers (weight < 0: none) */
  bool f32;              /* round every step to float32 */
  double margin, g;      /* margin and the backward's 1 / (N C) or 1 / C, in the dtype */
  double *rows;          /* per-row losses of a sum/mean (NULL: write them to the output) */
} margin_ctx;

static double margin_load(const margin_ctx *c, int k, int64_t n, int64_t d) {
  return in_dtype(nrt_ref_load_f64(ptr2(c->l, k, n, d), c->l->operands[k].dtype), c->f32);
}

static double margin_row(const margin_ctx *c, int64_t n) {
  const nrt_launch *l = c->l;
  int64_t C = l->sizes[1], y = load_i64(l, c->target, n);
  bool sq = l->params[1] == 2;
  double xy = margin_load(c, c->x, n, y), w = c->weight >= 0 ? in_dtype(nrt_ref_load_f64(ptr1(l, c->weight, y),
                                                                        l->operands[c->weight].dtype), c->f32) : 1.0;
  double base = in_dtype(c->margin - xy, c->f32), sum = 0.0;
  for (int64_t d = 0; d < C; d++) {
    if (d == y) continue;
    double z = in_dtype(base + margin_load(c, c->x, n, d), c->f32);
    if (z > 0) { /* a NaN term is skipped, as there */
      double h = sq ? in_dtype(z * z, c->f32) : z;
      if (c->weight >= 0) h = in_dtype(h * w, c->f32);
      sum = in_dtype(sum + h, c->f32);
    }
  }
  return in_dtype(sum / in_dtype((double)C, c->f32), c->f32);
}

static void margin_range(void *ctx, int64_t begin, int64_t end) {
  margin_ctx *c = ctx;
  const nrt_operand *o = &c->l->operands[MM_OUT];
  for (int64_t n = begin; n < end; n++) {
    double v = margin_row(c, n);
    if (c->rows)
      c->rows[n] = v;
    else
      nrt_ref_store_f64((char *)ptr1(c->l, MM_OUT, n), o->dtype, v);
  }
}

/* grad_x of row n: h = g (p = 1) or (2 g) z (p = 2), times weight[y], for
 * each active d; x[y] gets minus their serial sum; then every element
 * times grad_output, as the CPU's two passes do. */
static void margin_backward_range(void *ctx, int64_t begin, int64_t end) {
  margin_ctx *c = ctx;
  const nrt_launch *l = c->l;
  int64_t C = l->sizes[1];
  bool sq = l->params[1] == 2;
  nrt_dtype gdt = l->operands[MMB_GRAD_X].dtype;
  for (int64_t n = begin; n < end; n++) {
    int64_t y = load_i64(l, c->target, n);
    double go = in_dtype(nrt_ref_load_f64(ptr1(l, MMB_GRAD, n), l->operands[MMB_GRAD].dtype), c->f32);
    double xy = margin_load(c, c->x, n, y), w = c->weight >= 0 ? in_dtype(nrt_ref_load_f64(ptr1(l, c->weight, y),
                                                                          l->operands[c->weight].dtype), c->f32) : 1.0;
    double base = in_dtype(c->margin - xy, c->f32), gy = 0.0, g2 = in_dtype(2.0 * c->g, c->f32);
    for (int64_t d = 0; d < C; d++) {
      if (d == y) continue;
      double z = in_dtype(base + margin_load(c, c->x, n, d), c->f32), h = 0.0;
      if (z > 0) {
        h = sq ? in_dtype(g2 * z, c->f32) : c->g;
        if (c->weight >= 0) h = in_dtype(h * w, c->f32);
        gy = in_dtype(gy - h, c->f32);
      }
      nrt_ref_store_f64(ptr2(l, MMB_GRAD_X, n, d), gdt, in_dtype(h * go, c->f32));
    }
    nrt_ref_store_f64(ptr2(l, MMB_GRAD_X, n, y), gdt, in_dtype(gy * go, c->f32));
  }
}

static nrt_status multi_margin(const nrt_launch *l, bool fwd) {
  int nout = 1;
  if (l->noutputs != nout)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected 1 output, got %d", nrt_op_name(l->op),
                           l->noutputs);
  if (l->ndim != 2)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: sizes must be {N, C}, got ndim %d", nrt_op_name(l->op),
                           l->ndim);
  margin_ctx c = {.l = l, .x = fwd ? MM_X : MMB_X, .target = fwd ? MM_TARGET : MMB_TARGET};
  c.weight = l->ninputs == (fwd ? 3 : 4) ? (fwd ? MM_WEIGHT : MMB_WEIGHT) : -1;
  for (int k = 0; k < l->noutputs + l->ninputs; k++) {
    if (k == c.target) continue;
    nrt_status st = check_float(l, k);
    if (st != NRT_SUCCESS) return st;
  }
  if (!nrt_dtype_is_integral(l->operands[c.target].dtype))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: target must be an integer type, got %s",
                           nrt_op_name(l->op), nrt_dtype_name(l->operands[c.target].dtype));
  int64_t N = l->sizes[0], C = l->sizes[1], red = l->params[0];
  if (l->params[1] != 1 && l->params[1] != 2)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "only p == 1 and p == 2 supported");
  if (red < NRT_LOSS_NONE || red > NRT_LOSS_SUM)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: unknown reduction %lld", nrt_op_name(l->op),
                           (long long)red);
  /* the targets first, in order, so that the first bad one fails the launch before anything is written */
  for (int64_t n = 0; n < N; n++) {
    int64_t y = load_i64(l, c.target, n);
    if (y < 0 || y >= C) return nrt_kernel_fail(NRT_ERROR_OUT_OF_RANGE, "target out of range");
  }
  c.f32 = l->operands[c.x].dtype != NRT_FLOAT64;
  c.margin = in_dtype(l->scalars[0].f, c.f32);
  if (!fwd) {
    c.g = in_dtype(red == NRT_LOSS_MEAN ? 1.0 / (double)(N * C) : 1.0 / (double)C, c.f32);
    if (N > 0 && C > 0) nrt_parallel_for(N, grain_for(C), margin_backward_range, &c);
    return NRT_SUCCESS;
  }
  if (red == NRT_LOSS_NONE) {
    if (N > 0) nrt_parallel_for(N, grain_for(C), margin_range, &c);
    return NRT_SUCCESS;
  }
  /* a sum or mean: rows in parallel into doubles, then added serially from
   * row 0 in double (the CPU's accscalar_t), divided by N there */
  c.rows = malloc((size_t)(N + 1) * sizeof(double));
  if (!c.rows) return nrt_kernel_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld rows",
                                      nrt_op_name(l->op), (long long)N);
  if (N > 0 && C > 0) nrt_parallel_for(N, grain_for(C), margin_range, &c);
  double acc = 0.0;
  for (int64_t n = 0; n < N && C > 0; n++) acc += c.rows[n];
  if (red == NRT_LOSS_MEAN) acc /= (double)N;
  free(c.rows);
  nrt_ref_store_f64(l->operands[MM_OUT].data, l->operands[MM_OUT].dtype, acc);
  return NRT_SUCCESS;
}

/* ---- NLL_LOSS_REDUCE ------------------------------------------------------------------
 * The sum or mean of nll_loss over [N, C, M] in ATen's order (LossNLL2d.cpp,
 * also LossNLL.cpp's for M = 1): a cascade over the linear index b * M + m
 * with 8 levels of 16 (level_power = max(4, ceil(log2(N M)) / 8)); level 0
 * takes each loss, and wherever the index is a multiple of 16^(j+1) level
 * j is added into level j + 1 and cleared; the levels are then added from
 * 0. Every operation is rounded to x's dtype as the CPU's scalar_t
 * arithmetic does (bfloat16/float16 through float), so huge terms overflow
 * and cancel where the CPU's do. Serial: the order is the result. */

enum { NLR_OUT = 0, NLR_TOTAL = 1, NLR_X = 2, NLR_TARGET = 3, NLR_WEIGHT = 4 };
#define NLR_LEVELS 8

/* v rounded to dt as a float operation then a 16-bit store would round it */
static inline double scalar_round(double v, nrt_dtype dt) {
  if (dt == NRT_FLOAT64) return v;
  float f = (float)v;
  return dt == NRT_FLOAT32 ? (double)f : round_to((double)f, dt);
}

static int64_t ceil_log2(int64_t x) {
  if (x <= 2) return 1;
  int64_t b = 0;
  for (uint64_t v = (uint64_t)(x - 1); v; v >>= 1) b++;
  return b;
}

static nrt_status nll_loss_reduce(const nrt_launch *l) {
  if (l->noutputs != 2 || l->ndim != 3)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "NLL_LOSS_REDUCE: expected 2 outputs and sizes {N, C, M}");
  nrt_status st = check_float(l, NLR_OUT);
  if (st == NRT_SUCCESS) st = check_float(l, NLR_TOTAL);
  if (st == NRT_SUCCESS) st = check_float(l, NLR_X);
  if (st == NRT_SUCCESS && l->ninputs == 3) st = check_float(l, NLR_WEIGHT);
  if (st != NRT_SUCCESS) return st;
  nrt_dtype tdt = l->operands[NLR_TARGET].dtype, dt = l->operands[NLR_X].dtype;
  if (!nrt_dtype_is_integral(tdt))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "NLL_LOSS_REDUCE: target must be an integer type, got %s",
                           nrt_dtype_name(tdt));
  int64_t N = l->sizes[0], C = l->sizes[1], M = l->sizes[2], ignore = l->params[1];
  bool weighted = l->ninputs == 3, mean = l->params[0] == NRT_LOSS_MEAN;
  /* targets first, in the CPU's order, so the first bad one is reported */
  for (int64_t b = 0; b < N; b++)
    for (int64_t m = 0; m < M; m++) {
      int64_t t = nrt_ref_load_i64(ptr2(l, NLR_TARGET, b, m), tdt);
      if (t != ignore && (t < 0 || t >= C))
        return nrt_kernel_fail(NRT_ERROR_OUT_OF_RANGE, "Target %lld is out of bounds.", (long long)t);
    }
  double loss[NLR_LEVELS] = {0}, wsum[NLR_LEVELS] = {0};
  int64_t n = N * M, ignored = 0, power = ceil_log2(n) / NLR_LEVELS;
  if (power < 4) power = 4;
  int64_t mask0 = ((int64_t)1 << power) - 1;
  for (int64_t b = 0; b < N; b++)
    for (int64_t m = 0; m < M; m++) {
      int64_t t = nrt_ref_load_i64(ptr2(l, NLR_TARGET, b, m), tdt);
      if (t == ignore) {
        ignored++;
        continue;
      }
      double x = nrt_ref_load_f64(ptr3(l, NLR_X, b, t, m), dt);
      if (weighted) {
        double w = scalar_round(nrt_ref_load_f64(ptr1(l, NLR_WEIGHT, t), l->operands[NLR_WEIGHT].dtype), dt);
        loss[0] = scalar_round(loss[0] - scalar_round(x * w, dt), dt);
        wsum[0] = scalar_round(wsum[0] + w, dt);
      } else {
        loss[0] = scalar_round(loss[0] - x, dt);
      }
      int64_t idx = b * M + m;
      for (int j = 0; j + 1 < NLR_LEVELS; j++) {
        if (idx & (mask0 << (j * power))) break;
        wsum[j + 1] = scalar_round(wsum[j + 1] + wsum[j], dt);
        loss[j + 1] = scalar_round(loss[j + 1] + loss[j], dt);
        wsum[j] = loss[j] = 0.0;
      }
    }
  double total = 0.0, out = 0.0;
  if (weighted)
    for (int j = 0; j < NLR_LEVELS; j++) total = scalar_round(total + wsum[j], dt);
  else
    total = scalar_round((double)(n - ignored), dt);
  for (int j = 0; j < NLR_LEVELS; j++) out = scalar_round(out + loss[j], dt);
  if (mean) out = n == 0 ? NAN : scalar_round(out / total, dt);
  nrt_ref_store_f64(l->operands[NLR_OUT].data, l->operands[NLR_OUT].dtype, out);
  nrt_ref_store_f64(l->operands[NLR_TOTAL].data, l->operands[NLR_TOTAL].dtype, n == 0 ? 0.0 : total);
  return NRT_SUCCESS;
}

/* ---- NLL_LOSS / NLL_LOSS_BACKWARD ---------------------------------------------------
 * The rows form (1-d/2-d input) of nll_loss without a reduction, and the
 * gradient of the rows form, in ATen's arithmetic (LossNLL.cpp): loss[n] =
 * -x[n, t] w[t], and grad[n, t] = w[t] * -(mean ? g / total_weight : g),
 * each step rounded to the input's dtype (scalar_round) because the CPU
 * computes in scalar_t, so 16-bit products and quotients round where its
 * do. The targets are checked in order before anything is written, so the
 * first bad one is reported and a failed launch leaves the outputs alone. */

enum { NLL_OUT = 0, NLL_X = 1, NLL_TARGET = 2, NLL_WEIGHT = 3 };
enum { NLLB_GRAD = 0, NLLB_TARGET = 1, NLLB_GO = 2, NLLB_TOTAL = 3, NLLB_WEIGHT = 4 };

static nrt_status nll_rows_check(const nrt_launch *l, int tk) {
  if (l->ndim != 2)
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: sizes must be {N, C}, got ndim %d", nrt_op_name(l->op),
                           l->ndim);
  for (int k = 0; k < l->noutputs + l->ninputs; k++) {
    nrt_status st = k == tk ? NRT_SUCCESS : check_float(l, k);
    if (st != NRT_SUCCESS) return st;
  }
  nrt_dtype tdt = l->operands[tk].dtype;
  if (!nrt_dtype_is_integral(tdt))
    return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: target must be an integer type, got %s",
                           nrt_op_name(l->op), nrt_dtype_name(tdt));
  int64_t rows = l->sizes[0], classes = l->sizes[1], ignore = l->params[1];
  for (int64_t n = 0; n < rows; n++) {
    int64_t t = nrt_ref_load_i64(ptr1(l, tk, n), tdt);
    if (t != ignore && (t < 0 || t >= classes))
      return nrt_kernel_fail(NRT_ERROR_OUT_OF_RANGE, "Target %lld is out of bounds.", (long long)t);
  }
  return NRT_SUCCESS;
}

/* w[t] rounded to dt as the CPU reads the weight as scalar_t (1 without one) */
static inline double nll_weight(const nrt_launch *l, int wk, int64_t t, nrt_dtype dt) {
  if (l->ninputs <= wk - l->noutputs) return 1.0;
  return scalar_round(nrt_ref_load_f64(ptr1(l, wk, t), l->operands[wk].dtype), dt);
}

static nrt_status nll_loss_rows(const nrt_launch *l) {
  nrt_status st = nll_rows_check(l, NLL_TARGET);
  if (st != NRT_SUCCESS) return st;
  nrt_dtype dt = l->operands[NLL_X].dtype, odt = l->operands[NLL_OUT].dtype;
  int64_t ignore = l->params[1];
  /* O(N) work: one plain loop is both the reference and the fast path */
  for (int64_t n = 0; n < l->sizes[0]; n++) {
    int64_t t = nrt_ref_load_i64(ptr1(l, NLL_TARGET, n), l->operands[NLL_TARGET].dtype);
    double loss = 0.0;
    if (t != ignore) loss = scalar_round(-nrt_ref_load_f64(ptr2(l, NLL_X, n, t), dt) * nll_weight(l, NLL_WEIGHT, t, dt), dt);
    nrt_ref_store_f64(ptr2(l, NLL_OUT, n, 0), odt, loss);
  }
  return NRT_SUCCESS;
}

typedef struct nllb_ctx {
  const nrt_launch *l;
  double total; /* total_weight as dt */
  bool mean;
} nllb_ctx;

/* grad[n, t]: -(g / total) for a mean (g alone otherwise), times w[t], in dt */
static inline double nll_grad_at(const nllb_ctx *c, int64_t n, int64_t t) {
  const nrt_launch *l = c->l;
  nrt_dtype dt = l->operands[NLLB_GRAD].dtype;
  double g = scalar_round(nrt_ref_load_f64(ptr1(l, NLLB_GO, n), l->operands[NLLB_GO].dtype), dt);
  if (c->mean) g = scalar_round(g / c->total, dt);
  return scalar_round(nll_weight(l, NLLB_WEIGHT, t, dt) * -g, dt);
}

/* Rows [begin, end): zero the row (all-zero bytes are +0.0 in every float
 * dtype), then write the target's gradient. */
static void nll_backward_range(void *ctx, int64_t begin, int64_t end) {
  const nllb_ctx *c = ctx;
  const nrt_launch *l = c->l;
  const nrt_operand *gi = &l->operands[NLLB_GRAD];
  int64_t es = (int64_t)nrt_dtype_size(gi->dtype), classes = l->sizes[1], ignore = l->params[1];
  for (int64_t n = begin; n < end; n++) {
    char *row = ptr2(l, NLLB_GRAD, n, 0);
    if (gi->strides[1] == es) {
      memset(row, 0, (size_t)(classes * es));
    } else {
      for (int64_t j = 0; j < classes; j++) memset(row + j * gi->strides[1], 0, (size_t)es);
    }
    int64_t t = nrt_ref_load_i64(ptr1(l, NLLB_TARGET, n), l->operands[NLLB_TARGET].dtype);
    if (t != ignore) nrt_ref_store_f64(ptr2(l, NLLB_GRAD, n, t), gi->dtype, nll_grad_at(c, n, t));
  }
}

static nrt_status nll_loss_backward(const nrt_launch *l) {
  nrt_status st = nll_rows_check(l, NLLB_TARGET);
  if (st != NRT_SUCCESS) return st;
  int64_t rows = l->sizes[0], classes = l->sizes[1], ignore = l->params[1];
  nrt_dtype dt = l->operands[NLLB_GRAD].dtype;
  nllb_ctx c = {.l = l, .mean = l->params[0] == NRT_LOSS_MEAN,
                .total = scalar_round(nrt_ref_load_f64(l->operands[NLLB_TOTAL].data, l->operands[NLLB_TOTAL].dtype), dt)};
  if (rows == 0 || classes == 0) return NRT_SUCCESS;
  if (nrt_kernels_reference()) {
    for (int64_t n = 0; n < rows; n++) {
      int64_t t = nrt_ref_load_i64(ptr1(l, NLLB_TARGET, n), l->operands[NLLB_TARGET].dtype);
      for (int64_t j = 0; j < classes; j++)
        nrt_ref_store_f64(ptr2(l, NLLB_GRAD, n, j), dt, j == t && t != ignore ? nll_grad_at(&c, n, t) : 0.0);
    }
    return NRT_SUCCESS;
  }
  nrt_parallel_for(rows, grain_for(classes), nll_backward_range, &c);
  return NRT_SUCCESS;
}

nrt_status nrt_segment_execute(const nrt_launch *l) {
  /* Switch on (int)l->op: family ids are not enumerators of nrt_op. */
  switch ((int)l->op) {
  case NRT_OP(EMBEDDING_BAG): return embedding_bag(l);
  case NRT_OP(CDIST):
  case NRT_OP(CDIST_BACKWARD): {
    if (l->ndim != 4)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "%s: sizes must be {B, P, R, M}, got ndim %d", nrt_op_name(l->op),
                             l->ndim);
    bool fwd = (int)l->op == NRT_OP(CDIST);
    int64_t items = l->sizes[0] * l->sizes[1], work = l->sizes[2] * (l->sizes[3] + 1);
    return run_dist(l, 1, 4, items, work, fwd ? cdist_range : cdist_backward_range);
  }
  case NRT_OP(PDIST):
  case NRT_OP(PDIST_BACKWARD): {
    bool fwd = (int)l->op == NRT_OP(PDIST);
    if (l->ndim != 2)
      return nrt_kernel_fail(NRT_ERROR_INVALID_ARGUMENT,
                             "%s: sizes must be {N, M}, got ndim %d", nrt_op_name(l->op), l->ndim);
    int64_t work = l->sizes[0] * (l->sizes[1] + 1);
    return run_dist(l, 1, 2, l->sizes[0], work, fwd ? pdist_range : pdist_backward_range);
  }
  case NRT_OP(SEGMENT_REDUCE): return nrt_segment_reduce_execute(l);
  case NRT_OP(SEGMENT_REDUCE_BACKWARD): return nrt_segment_reduce_backward_execute(l);
  case NRT_OP(CTC_LOSS): return nrt_ctc_loss_execute(l);
  case NRT_OP(CTC_LOSS_BACKWARD): return nrt_ctc_loss_backward_execute(l);
  case NRT_OP(MULTI_MARGIN_LOSS): return multi_margin(l, true);
  case NRT_OP(MULTI_MARGIN_LOSS_BACKWARD): return multi_margin(l, false);
  case NRT_OP(NLL_LOSS_REDUCE): return nll_loss_reduce(l);
  case NRT_OP(NLL_LOSS): return nll_loss_rows(l);
  case NRT_OP(NLL_LOSS_BACKWARD): return nll_loss_backward(l);
  default: break;
  }
  return nrt_kernel_fail(NRT_ERROR_UNSUPPORTED, "segment: op %s has no kernel", nrt_op_name(l->op));
}
